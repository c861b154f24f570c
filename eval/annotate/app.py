"""The judging page's web app: one static page (``page.html``, every style and script inline) and
the JSON routes it calls. Nothing is loaded from any other origin.

    GET  /                 the page (``?assessor=NAME`` picks who is judging)
    GET  /api/config       the grade scale, the default assessor, whether labels can be revealed
    GET  /api/state        the assessor's next hit and progress
    POST /api/judge        {assessor, qid, doc_id, grade, seconds}: stored durably, then the next hit
    POST /api/undo         {assessor}: withdraws the latest judgment and shows that hit again
    POST /api/skip         {assessor, qid, doc_id}: the hit comes back after its query's others
    GET  /api/summary      a finished query's grades beside the labeler's (never before it is done)

A hit sent to the page carries the query and the document, never the labeler's label: a label in
view anchors people. The labeler's labels of a query are sent only once the assessor has judged
every hit of it, and only when the server was given ``--labels``.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from data.beir import Document
from data.core.records import GRADE_SCALE, MAX_GRADE, label_from_grade
from eval.annotate.agreement import by_assessor, disagreements
from eval.annotate.store import JudgmentStore

ASSESSOR = r"^[\w.@-]{1,64}$"
Assessor = Annotated[str, Field(pattern=ASSESSOR)]
Hit = tuple[str, str]


class HitIn(BaseModel):
    assessor: Assessor
    qid: str
    doc_id: str


class JudgeIn(HitIn):
    grade: int = Field(ge=0, le=MAX_GRADE)
    seconds: float = Field(ge=0, le=86_400)


class UndoIn(BaseModel):
    assessor: Assessor


class Judging:
    """What the routes share: the pooled hits in the order shown, the texts, the store, the
    labeler's labels (revealed after a query) and each assessor's skipped hits (kept for the
    life of the server: after a restart the page resumes at the first unjudged hit)."""

    def __init__(
        self,
        pool: Mapping[str, list[str]],
        queries: Mapping[str, str],
        documents: Mapping[str, Document],
        store: JudgmentStore,
        labels: Mapping[Hit, dict[str, Any]] | None = None,
        assessor: str = "assessor",
        adjudicate: bool = False,
    ) -> None:
        self.pool, self.queries, self.documents, self.store = pool, queries, documents, store
        self.labels, self.assessor, self.adjudicate = labels, assessor, adjudicate
        self.order: list[Hit] = [(q, d) for q, docs in pool.items() for d in docs]
        if adjudicate:
            contested = disputed(store)
            self.order = [hit for hit in self.order if hit in contested]
        self.skipped: dict[str, set[Hit]] = {}
        self.again: dict[str, Hit] = {}  # the hit an undo withdrew, shown next

    def next_hit(self, assessor: str) -> Hit | None:
        judged = self.store.judged(assessor)
        again = self.again.get(assessor)
        if again is not None and again not in judged and again in self.order:
            return again
        pending = [hit for hit in self.order if hit not in judged]
        if not pending:
            return None
        # The current query is the first with a hit left; a skipped hit waits for its others.
        in_query = [hit for hit in pending if hit[0] == pending[0][0]]
        skipped = self.skipped.setdefault(assessor, set())
        fresh = [hit for hit in in_query if hit not in skipped]
        if not fresh:
            skipped.difference_update(in_query)  # only skipped hits left: go round them again
        return (fresh or in_query)[0]

    def query_hits(self, qid: str) -> list[Hit]:
        return [hit for hit in self.order if hit[0] == qid]

    def state(self, assessor: str, **extra: Any) -> dict[str, Any]:
        judged = self.store.judged(assessor)
        hit = self.next_hit(assessor)
        queries = list(dict.fromkeys(q for q, _ in self.order))
        done = [q for q in queries if all(h in judged for h in self.query_hits(q))]
        progress = {
            "judged": sum(1 for h in self.order if h in judged),
            "total": len(self.order),
            "queries_done": len(done),
            "queries": len(queries),
        }
        shown = None
        if hit is not None:
            in_query = self.query_hits(hit[0])
            doc = self.documents[hit[1]]
            shown = {
                "qid": hit[0],
                "doc_id": hit[1],
                "query": self.queries[hit[0]],
                "title": doc.title,
                "text": doc.text,
                "query_number": queries.index(hit[0]) + 1,
                "query_judged": sum(1 for h in in_query if h in judged),
                "query_hits": len(in_query),
            }
        return {"assessor": assessor, "hit": shown, "progress": progress} | extra

    def judge(self, item: JudgeIn) -> dict[str, Any]:
        hit = (item.qid, item.doc_id)
        if hit not in self.order:
            raise HTTPException(404, f"{item.qid}/{item.doc_id} is not a hit of this session")
        record = {
            "qid": item.qid,
            "query": self.queries[item.qid],
            "doc_id": item.doc_id,
            "text": self.documents[item.doc_id].text,
            "title": self.documents[item.doc_id].title or None,
            "grade": item.grade,
            "assessor": item.assessor,
            "seconds": round(item.seconds, 3),
        }
        if self.store.add(record | ({"adjudication": True} if self.adjudicate else {})) is None:
            raise HTTPException(409, f"{item.assessor} has already judged this hit")
        judged = self.store.judged(item.assessor)
        finished = all(h in judged for h in self.query_hits(item.qid))
        return self.state(item.assessor, finished_query=item.qid if finished else None)

    def summary(self, assessor: str, qid: str) -> dict[str, Any]:
        """A finished query's grades beside the labeler's labels."""
        judged = self.store.judged(assessor)
        hits = self.query_hits(qid)
        if not hits or not all(h in judged for h in hits):
            raise HTTPException(409, "the labeler's labels are shown once the query is judged")
        rows = []
        for hit in hits:
            grade = judged[hit].grade
            label = (self.labels or {}).get(hit)
            doc = self.documents[hit[1]]
            snippet = (doc.title or doc.text)[:90]
            rows.append({"doc_id": hit[1], "snippet": snippet, "grade": grade, "labeler": label})
        agree = [
            label_from_grade(r["grade"]) == int(r["labeler"]["relevant"])
            for r in rows
            if r["labeler"]
        ]
        return {
            "qid": qid,
            "query": self.queries[qid],
            "hits": rows,
            "agree": sum(agree),
            "compared": len(agree),
        }


def disputed(store: JudgmentStore) -> set[Hit]:
    """Hits that two or more assessors graded differently."""
    return {(row["qid"], row["doc_id"]) for row in disagreements(by_assessor(store.records))}


def page() -> str:
    return resources.files("eval.annotate").joinpath("page.html").read_text(encoding="utf-8")


def create_app(judging: Judging) -> FastAPI:
    app = FastAPI(title="relevance-grader judging page", docs_url=None, redoc_url=None)
    html = page()

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return html

    @app.get("/api/config")
    def config() -> dict[str, Any]:
        scale = [
            {"grade": g, "name": name, "definition": text, "relevant": bool(label_from_grade(g))}
            for g, (name, text) in GRADE_SCALE.items()
        ]
        return {
            "grades": scale,
            "assessor": judging.assessor,
            "reveal_labels": judging.labels is not None,
            "adjudicate": judging.adjudicate,
        }

    @app.get("/api/state")
    def state(assessor: Annotated[str, Query(pattern=ASSESSOR)]) -> dict[str, Any]:
        return judging.state(assessor)

    @app.post("/api/judge")
    def judge(item: JudgeIn) -> dict[str, Any]:
        return judging.judge(item)

    @app.post("/api/undo")
    def undo(item: UndoIn) -> dict[str, Any]:
        withdrawn = judging.store.undo(item.assessor)
        if withdrawn is not None:  # shown again at once
            judging.again[item.assessor] = (withdrawn.qid, withdrawn.doc_id)
        return judging.state(item.assessor, undone=withdrawn is not None)

    @app.post("/api/skip")
    def skip(item: HitIn) -> dict[str, Any]:
        judging.skipped.setdefault(item.assessor, set()).add((item.qid, item.doc_id))
        if judging.again.get(item.assessor) == (item.qid, item.doc_id):
            del judging.again[item.assessor]
        return judging.state(item.assessor)

    @app.get("/api/summary")
    def summary(assessor: Annotated[str, Query(pattern=ASSESSOR)], qid: str) -> dict[str, Any]:
        return judging.summary(assessor, qid)

    @app.get("/healthz")
    def health() -> dict[str, Any]:
        return {"status": "ok", "judgments": len(judging.store.records)}

    return app
