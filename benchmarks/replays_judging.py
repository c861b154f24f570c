"""Issue 42, round 3, judging side (items 5-10), for ``python -m benchmarks.reliability``: the bad
inputs that must now be refused in one line (a table read by its ``cases()``) and the replays of
silent wrong results (read into its Replay list), each set up as reported and run again.

Then the judging page's review (the statistician's and a hostile test round, items 1-7 of its
list): the labeler kept out of view until the session is finished, who is asking (a token per
assessor, the Host check), an order per assessor, highlighting and answers without a grade, one
server per session and undo as an appended line, append-only files that keep a record without
its newline and one writer per cache, and the session's errors in one line.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from data import COLLECTIONS

ADI = COLLECTIONS / "adi"

# command | case | arguments | words the error line must contain ({dir}, {adi}, {qrels}: as in
# benchmarks.reliability's CASE_TABLE).
CASE_TABLE_JUDGING = """
judgments.draw | pilot width the run cannot reach | --run {dir}/run-43.trec --pilot {dir}/pilot.json --target_width 0.1 | target_width, needs about 160, 43, reaches about 0.193
judgments.draw | a corpus given as the run | --run {adi}/corpus.jsonl --n 10 | corpus.jsonl, is a corpus
data.validate | an empty document | --files {dir}/empty-document.jsonl --record judgment | 1 bad line(s) in 1 file(s)
eval.search | human grades off the 0-3 scale | --run {dir}/run-adi.trec --corpus {adi} --labeler {qrels} --human {dir}/grade-4.qrels --out {dir}/s | grade-4.qrels, grade 4, 0-3 scale
"""


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _adi_run(path: Path, ranks: dict[str, int] | None = None) -> dict[str, dict[str, float]]:
    """A run over every ADI query, 10 hits each: one relevant document at the query's rank in
    ``ranks`` (default: its place in id order mod 5, plus 1) among non-relevant ones."""
    from data.beir import read_corpus, read_qrels, write_trec_run

    qrels = read_qrels(ADI / "qrels.tsv")
    docs = sorted(read_corpus(ADI / "corpus.jsonl"))
    run = {}
    for i, qid in enumerate(sorted(qrels)):
        ranking = [d for d in docs if d not in qrels[qid]][:9]
        ranking.insert((ranks or {}).get(qid, i % 5 + 1) - 1, sorted(qrels[qid])[0])
        run[qid] = {d: float(10 - r) for r, d in enumerate(ranking)}
    write_trec_run(path, run)
    return run


def make_judging_files(root: Path) -> None:
    """The inputs of CASE_TABLE_JUDGING."""
    from data.beir import write_trec_run

    write_trec_run(root / "run-43.trec", {f"q{i}": {"d": 1.0} for i in range(43)})
    interval = {"estimate": 0.5, "low": 0.3, "high": 0.7, "n": 10, "lam": 1.0}  # 160 for 0.1
    interval |= {"unjudged": 33, "method": "t", "width": 0.4}
    estimates = {"labeler_mean": 0.5, "queries": 43, "human_only": interval, "ppi": interval}
    pilot = {  # a relevance-grader search metrics.json with people's judgments
        "format_version": 1,
        "labeler": "grader:runs/export",
        "k": 10,
        "mean": {"bm25": {"ndcg@10": 0.5}},
        "ppi": {
            "judged_queries": 10,
            "estimator": "PPI++",
            "confidence": 0.95,
            "runs": {"bm25": {"ndcg@10": estimates}},
            "differences": {},
        },
    }
    (root / "pilot.json").write_text(json.dumps(pilot))
    judgment = {"qid": "q1", "query": "axon", "doc_id": "d1", "text": "An axon ...", "grade": 3}
    (root / "empty-document.jsonl").write_text(
        _jsonl([judgment, {**judgment, "doc_id": "d2", "text": " "}])
    )
    _adi_run(root / "run-adi.trec")
    (root / "grade-4.qrels").write_text("1 0 17 4\n1 0 46 2\n2 0 1 0\n")


@contextlib.contextmanager
def _warnings() -> Iterator[list[str]]:
    """The warnings logged inside the block (the campaign disables logging around a replay)."""
    messages: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    disabled = logging.root.manager.disable
    logging.disable(logging.NOTSET)
    logging.getLogger().addHandler(handler)
    try:
        yield messages
    finally:
        logging.getLogger().removeHandler(handler)
        logging.disable(disabled)


def _search(root: Path, *args: str) -> tuple[dict, str]:
    """eval.search with ADI's qrels as the labeler: (metrics.json, what it printed)."""
    from eval.search.command import main as search

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        search(
            [
                *("--corpus", str(ADI), "--labeler", f"qrels:{ADI / 'qrels.tsv'}"),
                *("--out", str(root / "s"), "--report", "false", *args),
            ]
        )
    return json.loads((root / "s" / "metrics.json").read_text()), printed.getvalue()


def replay_pairs_outside_top_k(root: Path) -> None:
    """Item 6: 240 judged hits, 14 of them in the run's top k: the 226 others were ignored
    without a word while the report said "240 sampled hits"."""
    run = _adi_run(root / "run.trec", ranks=dict.fromkeys(map(str, range(1, 36)), 2))
    ranked = {q: sorted(docs, key=docs.__getitem__, reverse=True) for q, docs in run.items()}
    top = [(q, ranked[q][0]) for q in sorted(ranked)[:14]]
    below = [(q, d) for q in sorted(ranked) for d in ranked[q][1:]][:226]
    rows = [
        {"qid": q, "query": "q", "doc_id": d, "text": "t", "label": i % 2}
        for i, (q, d) in enumerate(top + below)
    ]
    (root / "hits.jsonl").write_text(_jsonl(rows))
    with _warnings() as warned:
        report, printed = _search(
            root,
            "--run",
            str(root / "run.trec"),
            "--k",
            "1",
            "--human_pairs",
            str(root / "hits.jsonl"),
        )
    assert report["ppi"]["judged_pairs_used"] == {"run": 14}, report["ppi"]["judged_pairs_used"]
    assert "the ones used: run 14" in printed, printed[-300:]
    assert any("226 of the 240 judged hits" in w for w in warned), warned


def replay_conflicting_duplicates(root: Path) -> None:
    """Item 7: a human qrels file giving one pair 3, then 0: the last line won without a word
    (one query's NDCG 0.589 -> 0.301), while data.build warned on the same conflict."""
    from judgments.samples import human_qrels

    (root / "human.qrels").write_text("1 0 17 3\n1 0 46 2\n1 0 17 0\n")
    with _warnings() as warned:
        grades = human_qrels(str(root / "human.qrels"))
    assert grades == {"1": {"17": 0, "46": 2}}, grades
    assert any("1 pair(s) given twice with different verdicts" in w for w in warned), warned


def replay_best_queries_judged(root: Path) -> None:
    """Item 8: --human with the labeler's 10 best-scored queries judged: PPI++ took them as a
    random sample, and its interval excluded the true value."""
    from data.beir import read_qrels

    run = _adi_run(root / "run.trec")
    qrels = read_qrels(ADI / "qrels.tsv")
    first = {
        q: min(r for r, d in enumerate(sorted(docs, key=docs.get, reverse=True)) if d in qrels[q])
        for q, docs in run.items()
    }
    best = sorted(first, key=lambda q: (first[q], q))[:10]
    (root / "best.qrels").write_text("".join(f"{q} 0 {d} 3\n" for q in best for d in qrels[q]))
    with _warnings() as warned:
        report, _ = _search(
            root, "--run", str(root / "run.trec"), "--k", "5", "--human", str(root / "best.qrels")
        )
    check = report["ppi"]["sample"]["check"]
    assert check and not check["random_plausible"], check
    assert any("valid only for a random sample" in w for w in warned), warned


def replay_recalibrate_own_validation(root: Path) -> None:
    """Item 9: relevance-grader recalibrate given the export's own validation pairs said nothing,
    and its 'stored' figures were measured on the split the threshold was fitted on."""
    from core.io import read_records
    from core.records import Judgment
    from data.build import BuildConfig, build_dataset
    from judgments.recalibrate import data_overlap
    from models.grader_config import GraderDescription

    rows = [
        {"qid": f"q{q}", "query": f"query {q}", "doc_id": f"d{q}-{d}", "text": "t", "grade": d % 4}
        for q in range(20)
        for d in range(4)
    ]
    (root / "j.jsonl").write_text(_jsonl(rows))
    build_dataset(
        BuildConfig(judgments=[str(root / "j.jsonl")], out=str(root / "ds"), save_dataset=False)
    )
    validation = list(read_records(root / "ds" / "validation.jsonl", Judgment))
    with _warnings() as warned:
        described = GraderDescription.model_validate({"data": {"dataset": str(root / "ds")}})
        overlap = data_overlap(described, validation)
    assert overlap["validation_pairs"] == len(validation), overlap
    assert any("are the export's validation pairs" in w for w in warned), warned


def replay_rerank_keeps_tail_and_link(root: Path) -> None:
    """Item 10: relevance-grader rerank --k 2 on a run of depth 5 dropped three hits, and an --out
    that is a link to a file was replaced by a plain file (the target kept its old run)."""
    from data.beir import Collection, ranked, read_trec_run, write_trec_run
    from measure.labelers import HitLabel, Labeler
    from measure.labelers.rerank import rerank

    class Reversed(Labeler):
        name = "reversed"

        def label(self, qid, query, hits):
            return [HitLabel(relevant=True, score=0.1 * (i + 1)) for i, _ in enumerate(hits)]

    run = {"1": {d: float(5 - i) for i, d in enumerate(["1", "2", "3", "4", "5"])}}
    (root / "store").mkdir()
    write_trec_run(root / "store" / "reranked.trec", {"1": {"old": 1.0}})
    (root / "reranked.trec").symlink_to(root / "store" / "reranked.trec")
    write_trec_run(root / "reranked.trec", rerank(run, Collection.load(ADI), Reversed(), k=2))
    order = [d for d, _ in ranked(read_trec_run(root / "store" / "reranked.trec")["1"])]
    assert order == ["2", "1", "3", "4", "5"], order
    assert (root / "reranked.trec").is_symlink(), "the link was replaced by a file"


def replay_zero_width_inside_a_query(root: Path) -> None:
    """Item 10: a zero-width space inside a query changed its score (only all-invisible queries
    were refused); the grader's input is now the same."""
    from models.assets import TINY_TOKENIZER
    from models.input_format import GraderInputFormat, format_pairs
    from models.resolve import load_tokenizer

    tokenizer = load_tokenizer(str(TINY_TOKENIZER))
    fmt = GraderInputFormat.from_tokenizer(tokenizer, 256)
    plain = format_pairs(tokenizer, fmt, ["axon terminal"], ["An axon ends here."])
    hidden = format_pairs(tokenizer, fmt, ["ax\u200bon ter\u2060minal"], ["An axon ends here."])
    assert plain.input_ids == hidden.input_ids, "the zero-width characters reached the grader"


def _session(root: Path) -> tuple[Any, Path]:
    """A judging session over two ADI queries (a run's top 4 each) with a labeler's labels, and
    its app's test client as alice sees it: (client, session folder)."""
    from fastapi.testclient import TestClient

    from judgments.annotate.__main__ import AnnotateConfig, labeler_labels, resolve
    from judgments.annotate.app import Judging, create_app
    from judgments.store import JudgmentStore, session_secret, write_session

    run = _adi_run(root / "run.trec")
    hits = {q: {"hits": [{"id": d, "relevant": True, "score": 0.9} for d in run[q]]} for q in run}
    labels = {"format_version": 1, "runs": {"run": hits}}
    (root / "labels.json").write_text(json.dumps(labels))
    out = root / "session"
    config = AnnotateConfig(corpus=str(ADI), runs=[str(root / "run.trec")], queries=["1", "2"], k=4)
    config.out, config.assessors, config.labels = (
        str(out),
        ["alice", "bob"],
        str(root / "labels.json"),
    )
    session, corpus, queries = resolve(config)
    write_session(out, session)
    pool = dict(session.pool)
    documents = {d: corpus[d] for docs in pool.values() for d in docs}
    judging = Judging(
        pool,
        queries,
        documents,
        JudgmentStore(out),
        labeler_labels(session.labels),
        session.assessors,
        seed=session.seed,
        reveal=session.reveal,
        secret=session_secret(out),
    )
    client = TestClient(create_app(judging), base_url="http://127.0.0.1:8765")
    client.headers["X-Token"] = judging.token("alice")
    client.judging = judging  # type: ignore[attr-defined]
    return client, out


def _judge_query(client: Any) -> dict:
    """Grade the current query's hits (grade 1 each): the state after its last one."""
    state = client.get("/api/state").json()
    while True:
        hit = state["hit"]
        body = {"qid": hit["qid"], "doc_id": hit["doc_id"], "grade": 1, "seconds": 1.0}
        state = client.post("/api/judge", json=body).json()
        if state.get("finished_query"):
            return state


def replay_labeler_hidden_until_the_end(root: Path) -> None:
    """Review 1: after each query the page showed the labeler's verdicts ("the labeler agrees
    with you on 5 of 7"), and undo after the reveal served a hit with its verdict in view."""
    client, _ = _session(root)
    state = _judge_query(client)
    asked = client.get("/api/summary", params={"qid": state["finished_query"]})
    assert asked.status_code == 409, f"the labeler was shown after one query: {asked.text[:120]}"
    undone = client.post("/api/undo").json()
    assert undone["hit"] and "score" not in json.dumps(undone), undone
    _judge_query(client)
    _judge_query(client)
    assert client.get("/api/summary").status_code == 200  # the session is finished: revealed
    assert client.post("/api/undo").status_code == 409, "undo after the reveal was allowed"


def replay_who_is_asking(root: Path) -> None:
    """Review 2: the assessor was a request field: anyone reaching the port could read
    /api/summary?assessor=alice or judge in her name; any Host was answered."""
    from fastapi.testclient import TestClient

    client, _ = _session(root)
    _judge_query(client)
    anonymous = TestClient(client.app, base_url="http://127.0.0.1:8765")
    assert anonymous.get("/api/state", params={"assessor": "alice"}).status_code == 401
    bob = {"X-Token": client.judging.token("bob")}
    seen = client.get("/api/state", params={"assessor": "alice"}, headers=bob).json()
    assert seen["assessor"] == "bob" and seen["progress"]["judged"] == 0, seen
    rebound = TestClient(client.app, base_url="http://evil.example:8765")
    assert rebound.get("/api/state", headers=bob).status_code == 403


def replay_an_order_per_assessor(root: Path) -> None:
    """Review 3: every assessor saw the same hits in the same order (shared order effects)."""
    client, _ = _session(root)
    alice, bob = client.judging.order("alice"), client.judging.order("bob")
    assert sorted(alice) == sorted(bob) and alice != bob, "the two assessors share one order"


def replay_highlight_and_answers_without_a_grade(root: Path) -> None:
    """Review 4: "us" was highlighted; a hit left on screen for a day could not be graded (422);
    "I can't tell" had no place but a grade."""
    from judgments.annotate.app import highlight_terms
    from judgments.store import JudgingSession, read_judgments

    assert "us" not in highlight_terms("can you tell us about titles"), "a stop word is marked"
    client, out = _session(root)
    hit = client.get("/api/state").json()["hit"]
    late = {"qid": hit["qid"], "doc_id": hit["doc_id"], "grade": 2, "seconds": 90_000.0}
    assert client.post("/api/judge", json=late).status_code == 200, "a late grade was refused"
    hit = client.get("/api/state").json()["hit"]
    unsure = {"qid": hit["qid"], "doc_id": hit["doc_id"], "verdict": "cannot_tell"}
    assert client.post("/api/verdict", json=unsure).status_code == 200
    graded = {(r.qid, r.doc_id) for r in read_judgments(out)}
    assert (hit["qid"], hit["doc_id"]) not in graded, "cannot tell was read as a grade"
    session = JudgingSession.of_folder(out)
    assert session and session.highlight is True and session.reveal == "end", session


def replay_one_server_and_undo_appended(root: Path) -> None:
    """Review 5: two servers could judge into one folder, and undo rewrote judgments.jsonl from
    memory (a second server's judgments were lost)."""
    from judgments.store import hold_session

    client, out = _session(root)
    release = hold_session(out, "http://127.0.0.1:8765/")
    try:
        hold_session(out, "http://127.0.0.1:8766/")
        raise AssertionError("a second server on the session was allowed")
    except ValueError as exc:
        assert "http://127.0.0.1:8765/" in str(exc), exc
    finally:
        release()
    _judge_query(client)
    before = (out / "judgments.jsonl").read_bytes()
    client.post("/api/undo")
    after = (out / "judgments.jsonl").read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1


def replay_newline_less_records_kept(root: Path) -> None:
    """Review 6: a complete last record without its newline was cut on open (the judging
    session deleted a judgment, the label cache a paid label); two data.label on one cache both
    wrote."""
    from core.io import CacheLocked, KeyedCache
    from judgments.store import JudgmentStore

    judgment = {"qid": "1", "query": "q", "doc_id": "17", "text": "t", "grade": 3}
    (root / "judgments.jsonl").write_text(json.dumps(judgment | {"assessor": "alice"}))
    store = JudgmentStore(root)
    store.close()
    assert len(store.records) == 1 and (root / "judgments.jsonl").read_text().endswith("}\n")
    (root / "c.jsonl").write_text(json.dumps({"key": "a", "label": 1}))
    with KeyedCache(root / "c.jsonl") as cache:
        cache.put("b", {"label": 0})
    assert set(KeyedCache(root / "c.jsonl").values) == {"a", "b"}, "a paid label was cut"
    import fcntl
    import os

    fd = os.open(root / "c.jsonl.lock", os.O_RDWR)  # another process's hold, as flock sees it
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        KeyedCache(root / "c.jsonl", exclusive=True)
        raise AssertionError("a second writer of the cache was allowed")
    except CacheLocked as exc:
        assert "c.jsonl" in str(exc), exc
    finally:
        os.close(fd)


def replay_session_errors_in_one_line(root: Path) -> None:
    """Review 7: a damaged session.json said "Expecting value: line 2 column 1", a bad assessor
    name "Unprocessable Entity", and --out alone forgot --assessor and --labels."""
    from judgments.annotate.__main__ import AnnotateConfig, resolve
    from judgments.annotate.app import valid_assessor

    _, out = _session(root)
    remembered, _, _ = resolve(AnnotateConfig(out=str(out)))
    assert remembered.assessors == ["alice", "bob"] and remembered.labels, remembered
    try:
        valid_assessor("no spaces")
        raise AssertionError("a bad assessor name was taken")
    except ValueError as exc:
        assert "assessor: 'no spaces' is not a valid name" in str(exc), exc
    (out / "session.json").write_text('{"format":\n')
    try:
        resolve(AnnotateConfig(out=str(out)))
        raise AssertionError("a damaged session.json was read")
    except ValueError as exc:
        assert "session.json is damaged (not JSON at line 2" in str(exc), exc


def replay_hit_at_k_at_the_bound(root: Path) -> None:
    """Trust 1-2 and round 4 item 7: ten judged queries all with a hit gave hit@10
    1.000 [1.000, 1.000] "worth inf queries", and metrics.json held a bare Infinity."""
    from data.beir import read_qrels

    _adi_run(root / "run.trec")  # every query's relevant document in its top 5
    qrels = read_qrels(ADI / "qrels.tsv")
    judged = sorted(qrels)[:10]
    (root / "ten.qrels").write_text("".join(f"{q} 0 {d} 3\n" for q in judged for d in qrels[q]))
    _search(root, "--run", str(root / "run.trec"), "--k", "10", "--human", str(root / "ten.qrels"))

    def refuse(name: str) -> None:
        raise AssertionError(f"metrics.json holds a bare {name}")

    text = (root / "s" / "metrics.json").read_text()
    entry = json.loads(text, parse_constant=refuse)["ppi"]["runs"]["run"]["hit@10"]
    for side in ("human_only", "ppi"):
        interval = entry[side]
        assert interval["high"] - interval["low"] > 0.2, (side, interval)
        assert interval["low"] <= interval["estimate"] <= interval["high"], (side, interval)


def replay_report_out_over_an_input(root: Path) -> None:
    """Round 4 item 2: report --out naming the folder's inferred_qrels.txt overwrote it, exit 0."""
    from eval.report.__main__ import main as report

    _adi_run(root / "run.trec")
    _search(root, "--run", str(root / "run.trec"), "--k", "5")
    inferred = root / "s" / "inferred_qrels.txt"
    inferred.write_text("1 0 17 1\n")
    try:
        report(["--input", str(root / "s"), "--out", str(inferred)])
        raise AssertionError("report --out replaced inferred_qrels.txt")
    except ValueError as exc:
        assert "--out" in str(exc) and "not a file this command writes" in str(exc), exc
    assert inferred.read_text() == "1 0 17 1\n"


def replay_report_corpus_without_the_documents(root: Path) -> None:
    """Round 4 item 10: report --corpus naming a corpus with none of the evaluated documents
    embedded nothing and said nothing."""
    from eval.report.build import ReportOptions, build_report

    _adi_run(root / "run.trec")
    _search(root, "--run", str(root / "run.trec"), "--k", "5")
    other = root / "other"
    other.mkdir()
    (other / "corpus.jsonl").write_text('{"_id": "x1", "title": "", "text": "elsewhere"}\n')
    (other / "queries.jsonl").write_text('{"_id": "1", "text": "a query"}\n')
    report = build_report(root / "s", ReportOptions(corpus=str(other)))
    assert not report.documents, len(report.documents)
    assert any("holds none of the" in note for note in report.notes), report.notes


def replay_grader_that_does_not_beat_its_baselines(root: Path) -> None:
    """Round 4 item 11: a grader at chance against its baselines still labelled the runs, and
    the report's table under its labels read as if it could be believed."""
    from measure.classification.crossval import (
        CrossValidationRecord,
        PairedDifference,
        PooledMetrics,
        held_out_warning,
    )

    def pooled(query_roc_auc: float) -> PooledMetrics:
        return PooledMetrics(
            pairs=100,
            queries=10,
            roc_auc=None,
            query_roc_auc=query_roc_auc,
            pr_auc=None,
            f1=None,
            kappa=None,
            precision=None,
            recall=None,
        )

    difference = PairedDifference(
        model="grader", baseline="cosine", queries=10, mean=-0.3, low=-0.4, high=-0.2, beats=False
    )
    cross = CrossValidationRecord(
        folds=2,
        source="human",
        pooled={"grader": pooled(0.437), "cosine": pooled(0.74)},
        differences=[difference],
        beats_every_baseline={"grader": False},
    )
    words = held_out_warning(cross, {"grader": "grader (ours)", "cosine": "MiniLM cosine"})
    assert words and words.startswith("Not trustworthy"), words
    assert "The best labeler there was MiniLM cosine" in words, words


REPLAYS: list[tuple[int, str, Callable[[Path], None]]] = [
    (6, "judged hits outside the top k counted", replay_pairs_outside_top_k),
    (7, "conflicting human judgments warned", replay_conflicting_duplicates),
    (8, "best-scored queries judged: warned", replay_best_queries_judged),
    (9, "recalibrate on its own validation pairs", replay_recalibrate_own_validation),
    (10, "rerank keeps the tail and the link", replay_rerank_keeps_tail_and_link),
    (10, "zero-width characters inside a query", replay_zero_width_inside_a_query),
    # The judging page's review, items 1-7.
    (1, "review: labeler hidden until the session ends", replay_labeler_hidden_until_the_end),
    (2, "review: the token says who asks, the Host is checked", replay_who_is_asking),
    (3, "review: an order per assessor", replay_an_order_per_assessor),
    (
        4,
        "review: stop words, late grades, cannot tell",
        replay_highlight_and_answers_without_a_grade,
    ),
    (5, "review: one server per session, undo appended", replay_one_server_and_undo_appended),
    (6, "review: a record without its newline kept", replay_newline_less_records_kept),
    (7, "review: session errors in one line", replay_session_errors_in_one_line),
    # The statistician's review (trust) and reliability round 4.
    (1, "trust: hit@10 at the bound has width, strict JSON", replay_hit_at_k_at_the_bound),
    (2, "round 4: report --out over an input refused", replay_report_out_over_an_input),
    (
        10,
        "round 4: a corpus without the documents is said",
        replay_report_corpus_without_the_documents,
    ),
    (
        11,
        "round 4: a grader below its baselines said first",
        replay_grader_that_does_not_beat_its_baselines,
    ),
]
