"""The judging page's web app: one static page (``page.html``, every style and script inline) and
the JSON routes it calls. Nothing is loaded from any other origin.

    GET  /                 the page, opened with an assessor's secret link: /?token=TOKEN
    GET  /api/config       the grade scale, who the token is, how the session reveals and highlights
    GET  /api/state        the assessor's next hit and progress
    POST /api/judge        {qid, doc_id, grade, seconds}: stored durably, then the next hit
    POST /api/verdict      {qid, doc_id, verdict, seconds}: "cannot_tell" or "later", never a grade
    POST /api/undo         withdraws the latest judgment (an appended undo line), shows the hit again
    POST /api/skip         {qid, doc_id}: the hit comes back after its query's others
    GET  /api/summary      the labeler's verdicts beside the assessor's grades, once allowed

**Who is asking** is the token alone (sent by the page as the ``X-Token`` header, or ``?token=``):
each assessor's token is printed in their link at server start, and a request without a valid
one is refused (401/403). A name in a request (``?assessor=NAME``, an ``assessor`` field) is never
taken for identity, so nobody reaching the port can judge, undo or read in another's name.
Requests whose ``Host`` is not the server's own address are refused (DNS rebinding).

**Blind judging.** A hit sent to the page carries the query and the document, never the labeler's
label: a label in view anchors people. With ``--labels``, the labeler's verdicts are revealed at
the end of the assessor's session (``reveal`` "end": every hit answered, then an explicit step),
or after each query in the training mode (``reveal`` "per-query"); each reveal is an appended line
of the judgments file, and a grade made before it is final: undo is refused once its hit's
verdicts were shown.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, Field

from core.errors import InputError
from core.records import GRADE_SCALE, MAX_GRADE, label_from_grade
from data.beir import Document
from judgments.annotate.agreement import by_assessor, disagreements
from judgments.annotate.pool import shown_order
from judgments.annotate.progress import interval_progress
from judgments.store import JudgmentStore

ASSESSOR = r"^[\w.@-]{1,64}$"
REVEALS = ("end", "per-query")
# A hit left on screen overnight is still gradable: its time is capped, not refused, so a break
# does not count as minutes spent judging (the means of ``seconds`` stay meaningful).
MAX_SECONDS = 600.0
Hit = tuple[str, str]
TOKEN_HEADER = "X-Token"

# Function words are no evidence of relevance: marking them ("us", "what", "the") draws the eye
# to passages that share only grammar with the query.
STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me might more most much must my myself no nor not now of off on once only or
    other our ours ourselves out over own same shall she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up upon us
    very was we were what when where which while who whom whose why will with would you your
    yours yourself yourselves""".split()  # noqa: SIM905 - a paragraph reads better than a list
)


def highlight_terms(query: str) -> list[str]:
    """The query's content words, crudely stemmed (the page marks words that start with one),
    longest first: stop words and single letters are left out."""
    words = re.findall(r"[^\W_]+", query.lower())
    stems = [
        re.sub(r"(ing|ed|es|s)$", "", w) if len(w) > 4 else w
        for w in words
        if len(w) > 1 and w not in STOP_WORDS
    ]
    return sorted(dict.fromkeys(stems), key=lambda term: (-len(term), term))


def valid_assessor(name: str) -> str:
    """The name, or one line saying what a name may hold."""
    if not re.fullmatch(ASSESSOR, name):
        raise InputError(
            f"assessor: {name!r} is not a valid name: use letters, digits and . _ @ - (1 to 64)"
        )
    return name


def token_for(secret: bytes, assessor: str) -> str:
    """An assessor's token: derived from the session's secret, so links survive a restart."""
    return hmac.new(secret, assessor.encode(), hashlib.sha256).hexdigest()[:32]


class HitIn(BaseModel):
    qid: str
    doc_id: str


class JudgeIn(HitIn):
    grade: int = Field(ge=0, le=MAX_GRADE)
    seconds: float = Field(ge=0, allow_inf_nan=False)


class VerdictIn(HitIn):
    verdict: Literal["cannot_tell", "later"]
    seconds: float = Field(default=0.0, ge=0, allow_inf_nan=False)


class Judging:
    """What the routes share: the session's hits, the texts, the store, the labeler's labels
    (revealed as ``reveal`` says), the assessors' tokens and each assessor's skipped hits (kept
    for the life of the server: after a restart the page resumes at the first unjudged hit).

    Each assessor sees the queries in a seeded random order of their own, and each query's hits
    too (a keyed hash of the session's seed, the assessor and the ids: independent of the data,
    so the queries fully judged so far stay a random sample of the draw, and two assessors do not
    share order effects)."""

    def __init__(
        self,
        pool: Mapping[str, list[str]],
        queries: Mapping[str, str],
        documents: Mapping[str, Document],
        store: JudgmentStore,
        labels: Mapping[Hit, dict[str, Any]] | None = None,
        assessors: Iterable[str] = ("assessor",),
        adjudicate: bool = False,
        *,
        seed: int = 0,
        reveal: str = "end",
        highlight: bool = True,
        secret: bytes = b"",
        rankings: Mapping[str, list[str]] | None = None,
        k: int = 10,
    ) -> None:
        self.pool, self.queries, self.documents, self.store = pool, queries, documents, store
        self.labels, self.adjudicate, self.seed = labels, adjudicate, seed
        self.reveal, self.highlight = reveal, highlight
        # The first run's top k per query: the interval width reached so far is of its NDCG@k.
        self.rankings, self.k = rankings, k
        names = [assessors] if isinstance(assessors, str) else list(assessors)
        self.assessors = [valid_assessor(name) for name in dict.fromkeys(names)]
        self.tokens = {token_for(secret, name): name for name in self.assessors}
        self.hits: set[Hit] = {(q, d) for q, docs in pool.items() for d in docs}
        if adjudicate:
            self.hits &= disputed(store)
        self._orders: dict[str, list[Hit]] = {}
        self.skipped: dict[str, set[Hit]] = {}
        self.again: dict[str, Hit] = {}  # the hit an undo withdrew, shown next

    def token(self, assessor: str) -> str:
        return next(t for t, name in self.tokens.items() if name == assessor)

    def who(self, token: str | None) -> str | None:
        """The assessor a token names (compared in constant time), else None."""
        found = None
        for known, name in self.tokens.items():
            if token and hmac.compare_digest(known, token):
                found = name
        return found

    def order(self, assessor: str) -> list[Hit]:
        """The assessor's hits in their own seeded order: queries shuffled, hits within each."""
        if assessor not in self._orders:
            key = (str(self.seed), "order", assessor)
            qids = sorted(self.pool, key=lambda q: shown_order(*key, q))
            self._orders[assessor] = [
                (q, d)
                for q in qids
                for d in sorted(self.pool[q], key=lambda d, q=q: shown_order(*key, q, d))
                if (q, d) in self.hits
            ]
        return self._orders[assessor]

    def next_hit(self, assessor: str) -> Hit | None:
        answered = self.store.answered(assessor)
        again = self.again.get(assessor)
        if again is not None and again not in answered and again in self.hits:
            return again
        pending = [hit for hit in self.order(assessor) if hit not in answered]
        if not pending:
            return None
        # The current query is the first with a hit left, so queries are finished in the
        # assessor's random order (those finished so far stay a random sample of the draw);
        # within it, skipped and "judge later" hits wait for its other hits.
        in_query = [hit for hit in pending if hit[0] == pending[0][0]]
        later = self.store.deferred(assessor)
        skipped = self.skipped.setdefault(assessor, set())
        fresh = [hit for hit in in_query if hit not in skipped and hit not in later]
        if not fresh:
            skipped.difference_update(in_query)  # only skipped hits left: go round them again
            fresh = [hit for hit in in_query if hit not in later]
        return (fresh or in_query)[0]

    def query_hits(self, assessor: str, qid: str) -> list[Hit]:
        return [hit for hit in self.order(assessor) if hit[0] == qid]

    def finished(self, assessor: str) -> bool:
        answered = self.store.answered(assessor)
        return all(hit in answered for hit in self.hits)

    def state(self, assessor: str, **extra: Any) -> dict[str, Any]:
        answered = self.store.answered(assessor)
        order = self.order(assessor)
        hit = self.next_hit(assessor)
        queries = list(dict.fromkeys(q for q, _ in order))
        done = [q for q in queries if all(h in answered for h in self.query_hits(assessor, q))]
        progress = {
            "judged": sum(1 for h in order if h in answered),
            "total": len(order),
            "queries_done": len(done),
            "queries": len(queries),
            "interval": self.interval(assessor, done, len(queries)),
            "minutes_left": self.minutes_left(assessor, len(order) - len(answered)),
        }
        finished = hit is None
        reveal = {
            "ready": bool(self.labels) and finished and self.reveal == "end",
            "done": "session" in self.store.revealed(assessor),
        }
        return {
            "assessor": assessor,
            "hit": None if hit is None else self.shown(assessor, hit, answered, queries),
            "progress": progress,
            "reveal": reveal,
        } | extra

    def minutes_left(self, assessor: str, hits_left: int) -> float | None:
        """The hits left at the assessor's own pace (the median seconds of their judgments so
        far); None before five judgments say what the pace is."""
        recorded = [
            (j.model_extra or {}).get("seconds") for j in self.store.judged(assessor).values()
        ]
        seconds = sorted(float(s) for s in recorded if isinstance(s, int | float))
        if len(seconds) < 5:
            return None
        return round(max(0, hits_left) * seconds[len(seconds) // 2] / 60, 1)

    def interval(self, assessor: str, done: list[str], queries: int) -> dict[str, Any] | None:
        """The width the assessor's fully graded queries reach (people's grades only), and the
        queries an interval of the target width needs; None without the runs' rankings."""
        if not self.rankings:
            return None
        grades: dict[str, dict[str, int]] = {}
        for (qid, doc_id), judgment in self.store.judged(assessor).items():
            grades.setdefault(qid, {})[doc_id] = int(judgment.grade)
        graded = {
            q: grades[q] for q in done if q in grades and all(d in grades[q] for d in self.pool[q])
        }
        return interval_progress(self.rankings, graded, self.k, queries)

    def shown(
        self, assessor: str, hit: Hit, answered: Mapping[Hit, Any], queries: list[str]
    ) -> dict[str, Any]:
        in_query = self.query_hits(assessor, hit[0])
        doc = self.documents[hit[1]]
        return {
            "qid": hit[0],
            "doc_id": hit[1],
            "query": self.queries[hit[0]],
            "title": doc.title,
            "text": doc.text,
            "terms": highlight_terms(self.queries[hit[0]]) if self.highlight else [],
            "query_number": queries.index(hit[0]) + 1,
            "query_judged": sum(1 for h in in_query if h in answered),
            "query_hits": len(in_query),
        }

    def record(self, assessor: str, hit: Hit, seconds: float) -> dict[str, Any]:
        """The fields every answer of a hit carries; the seconds capped at MAX_SECONDS."""
        if hit not in self.hits:
            raise HTTPException(404, f"{hit[0]}/{hit[1]} is not a hit of this session")
        doc = self.documents[hit[1]]
        fields = {
            "qid": hit[0],
            "query": self.queries[hit[0]],
            "doc_id": hit[1],
            "text": doc.text,
            "title": doc.title or None,
            "assessor": assessor,
            "seconds": round(min(seconds, MAX_SECONDS), 3),
        }
        if seconds > MAX_SECONDS:
            fields["seconds_capped"] = True  # on screen longer: a break, not judging time
        return fields | ({"adjudication": True} if self.adjudicate else {})

    def judge(self, assessor: str, item: JudgeIn) -> dict[str, Any]:
        hit = (item.qid, item.doc_id)
        record = self.record(assessor, hit, item.seconds) | {"grade": item.grade}
        if self.store.add(record) is None:
            raise HTTPException(409, f"{assessor} has already judged this hit")
        return self.after_answer(assessor, hit)

    def verdict(self, assessor: str, item: VerdictIn) -> dict[str, Any]:
        hit = (item.qid, item.doc_id)
        if self.store.add_verdict(self.record(assessor, hit, item.seconds), item.verdict) is None:
            raise HTTPException(409, f"{assessor} has already judged this hit")
        if self.again.get(assessor) == hit:
            del self.again[assessor]
        return self.after_answer(assessor, hit)

    def after_answer(self, assessor: str, hit: Hit) -> dict[str, Any]:
        answered = self.store.answered(assessor)
        finished = all(h in answered for h in self.query_hits(assessor, hit[0]))
        return self.state(assessor, finished_query=hit[0] if finished else None)

    def undo(self, assessor: str) -> dict[str, Any]:
        """Withdraw the latest answer, unless the labeler's verdicts of its hit were shown: a
        grade changed after seeing them is no longer the assessor's own."""
        latest = self.store.latest(assessor)
        revealed = self.store.revealed(assessor)
        if latest is not None and ("session" in revealed or latest.hit[0] in revealed):
            raise HTTPException(
                409, "the labeler's verdicts of this hit were shown: its grade is final"
            )
        withdrawn = self.store.undo(assessor)
        if withdrawn is not None:  # shown again at once
            self.again[assessor] = withdrawn.hit
        return self.state(assessor, undone=withdrawn is not None)

    def skip(self, assessor: str, item: HitIn) -> dict[str, Any]:
        hit = (item.qid, item.doc_id)
        self.skipped.setdefault(assessor, set()).add(hit)
        if self.again.get(assessor) == hit:
            del self.again[assessor]
        return self.state(assessor)

    def summary(self, assessor: str, qid: str | None) -> dict[str, Any]:
        """The labeler's verdicts beside the assessor's grades: at the end of the session (every
        hit answered), or in the per-query mode once the query is; recorded as a reveal line."""
        if not self.labels:
            raise HTTPException(404, "this session has no labeler's labels (--labels) to show")
        if self.reveal == "per-query":
            hits = self.query_hits(assessor, qid or "")
            answered = self.store.answered(assessor)
            if not hits or not all(h in answered for h in hits):
                raise HTTPException(409, "the labeler's labels are shown once the query is judged")
            self.store.reveal(assessor, str(qid))
            return self.query_summary(assessor, str(qid))
        if not self.finished(assessor):
            raise HTTPException(
                409, "the labeler's labels are shown once every hit of the session is judged"
            )
        self.store.reveal(assessor, "session")
        qids = list(dict.fromkeys(q for q, _ in self.order(assessor)))
        tables = [self.query_summary(assessor, q) for q in qids]
        agree = sum(t["agree"] for t in tables)
        return {"queries": tables, "agree": agree, "compared": sum(t["compared"] for t in tables)}

    def query_summary(self, assessor: str, qid: str) -> dict[str, Any]:
        answered = self.store.answered(assessor)
        rows = []
        for hit in self.query_hits(assessor, qid):
            judgment = answered[hit].judgment
            doc = self.documents[hit[1]]
            rows.append(
                {
                    "doc_id": hit[1],
                    "snippet": (doc.title or doc.text)[:90],
                    "grade": None if judgment is None else judgment.grade,
                    "labeler": (self.labels or {}).get(hit),
                }
            )
        agree = [
            label_from_grade(r["grade"]) == int(r["labeler"]["relevant"])
            for r in rows
            if r["labeler"] and r["grade"] is not None
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
    return resources.files("judgments.annotate").joinpath("page.html").read_text(encoding="utf-8")


def split_host(header: str) -> tuple[str, str | None]:
    """(name, port) of a Host header, IPv6 literals included ("[::1]:8765")."""
    if header.startswith("["):
        name, _, rest = header[1:].partition("]")
        return name.lower(), rest.removeprefix(":") or None
    name, _, port = header.partition(":")
    return name.lower(), port or None


def arrived_at(request: Request) -> str | None:
    """The address of this machine that the request's connection arrived at, where the server
    knows it as an IP address: a Host naming it is this server (a machine listening on every
    interface has several), never a name a rebinding page could give."""
    server = request.scope.get("server")
    return as_address(str(server[0])) if server else None


def as_address(name: str) -> str | None:
    """``name`` as an IP address in its one written form, None for a name."""
    try:
        return str(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return None


def current_assessor(request: Request) -> str:
    """The assessor the request's token names; never a name the request gives."""
    judging: Judging = request.app.state.judging
    token = request.headers.get(TOKEN_HEADER) or request.query_params.get("token")
    if not token:
        named = request.query_params.get("assessor")
        hint = f" (?assessor={named} no longer picks who judges)" if named else ""
        raise HTTPException(
            401,
            "open the judging page with your own link, /?token=..., as the server printed it "
            f"at start{hint}",
        )
    found = judging.who(token)
    if found is None:
        raise HTTPException(
            403, "this link's token is not one of this session's; use the link printed for you"
        )
    return found


Who = Annotated[str, Depends(current_assessor)]


def create_app(
    judging: Judging, hosts: Iterable[str] = ("127.0.0.1", "localhost"), port: int | None = None
) -> FastAPI:
    """The app; ``hosts`` (and ``port``, where known) are the only Host headers it answers."""
    app = FastAPI(
        title="relevance-grader judging page", docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.judging = judging
    html = page()
    allowed = {name.lower().strip("[]") for name in hosts}

    @app.middleware("http")
    async def own_host_only(request: Request, call_next: Any) -> Any:
        # A page of another site whose name resolves to this machine (DNS rebinding) sends its
        # own name as the Host: refused, so it can neither read nor judge.
        name, given = split_host(request.headers.get("host", ""))
        address = as_address(name)
        known = name in allowed or (address is not None and address == arrived_at(request))
        if not known or (port is not None and given not in (None, str(port))):
            detail = f"host: {name or '(none)'} is not this judging server's address"
            return JSONResponse({"detail": detail}, status_code=403)
        return await call_next(request)

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return html  # holds no data: every route it calls asks for the token

    @app.get("/api/config")
    def config(who: Who) -> dict[str, Any]:
        scale = [
            {"grade": g, "name": name, "definition": text, "relevant": bool(label_from_grade(g))}
            for g, (name, text) in GRADE_SCALE.items()
        ]
        return {
            "grades": scale,
            "assessor": who,
            "reveal_labels": judging.labels is not None,
            "reveal": judging.reveal,
            "highlight": judging.highlight,
            "adjudicate": judging.adjudicate,
        }

    @app.get("/api/state")
    def state(who: Who) -> dict[str, Any]:
        return judging.state(who)

    @app.post("/api/judge")
    def judge(who: Who, item: JudgeIn) -> dict[str, Any]:
        return judging.judge(who, item)

    @app.post("/api/verdict")
    def verdict(who: Who, item: VerdictIn) -> dict[str, Any]:
        return judging.verdict(who, item)

    @app.post("/api/undo")
    def undo(who: Who) -> dict[str, Any]:
        return judging.undo(who)

    @app.post("/api/skip")
    def skip(who: Who, item: HitIn) -> dict[str, Any]:
        return judging.skip(who, item)

    @app.get("/api/summary")
    def summary(who: Who, qid: str | None = None) -> dict[str, Any]:
        return judging.summary(who, qid)

    @app.get("/healthz")
    def health() -> dict[str, Any]:
        return {"status": "ok"}  # nothing of any assessor's

    return app
