"""The judging page's parts without a browser: pooling, the session store, the routes, the checks
before the server starts, the assessors' agreement, and eval.search reading the page's output."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from data.beir import read_qrels, read_trec_run, write_trec_run
from data.core.io import read_records
from data.core.records import Judgment
from eval.annotate.app import JudgeIn

REPO = Path(__file__).resolve().parents[2]
WORDS = [
    "axon",
    "terminal",
    "neuron",
    "synapse",
    "signal",
    "calcium",
    "vesicle",
    "membrane",
    "protein",
    "brain",
]


def make_inputs(root: Path, queries: int = 4, docs: int = 30) -> dict[str, Path]:
    """A small BEIR folder, two runs that share some hits, and an eval.search-style
    per_query.json of a labeler's labels of both runs' top 5."""
    rng = np.random.default_rng(0)
    collection = root / "collection"
    collection.mkdir(parents=True)
    with open(collection / "corpus.jsonl", "w") as handle:
        for i in range(docs):
            text = " ".join(rng.choice(WORDS, 12))
            handle.write(json.dumps({"_id": f"d{i}", "title": f"Title {i}", "text": text}) + "\n")
    with open(collection / "queries.jsonl", "w") as handle:
        for q in range(1, queries + 1):
            handle.write(json.dumps({"_id": f"q{q}", "text": f"axon terminal {q}"}) + "\n")
    runs = {}
    for name, offset in (("a", 0), ("b", 3)):
        runs[name] = {
            f"q{q}": {f"d{(q * 7 + offset + j) % docs}": float(10 - j) for j in range(8)}
            for q in range(1, queries + 1)
        }
        write_trec_run(root / f"{name}.trec", runs[name])
    per_query = {
        name: {
            qid: {
                "hits": [
                    {"id": d, "relevant": j < 2, "score": 0.9 if j < 2 else 0.2, "grade": None}
                    for j, d in enumerate(sorted(docs_, key=docs_.get, reverse=True)[:5])
                ],
                "metrics": {"ndcg@5": 0.5},
            }
            for qid, docs_ in run.items()
        }
        for name, run in runs.items()
    }
    (root / "labels").mkdir()
    (root / "labels" / "per_query.json").write_text(json.dumps(per_query))
    return {"collection": collection, "a": root / "a.trec", "b": root / "b.trec"}


def annotate_args(inputs: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "--corpus",
        str(inputs["collection"]),
        "--runs",
        str(inputs["a"]),
        str(inputs["b"]),
        "--k",
        "5",
        "--out",
        str(out),
        *extra,
    ]


def judging_for(tmp_path: Path, *extra: str, labels: bool = True):
    """A Judging over the small collection, as the command builds it (without the server)."""
    from data.core.cli import parse_config
    from eval.annotate.__main__ import AnnotateConfig, labeler_labels, resolve
    from eval.annotate.app import Judging
    from eval.annotate.store import JudgmentStore, write_session

    inputs = make_inputs(tmp_path)
    (config,) = parse_config([AnnotateConfig], annotate_args(inputs, tmp_path / "out", *extra))
    session, corpus, queries = resolve(config)
    write_session(tmp_path / "out", session)
    pool = dict(session["pool"])
    documents = {d: corpus[d] for docs in pool.values() for d in docs}
    store = JudgmentStore(tmp_path / "out")
    found = labeler_labels(str(tmp_path / "labels")) if labels else None
    return Judging(pool, queries, documents, store, found, "alice"), inputs


def test_the_pool_holds_each_top_k_hit_once_in_an_order_that_does_not_reveal_the_system(
    tmp_path: Path,
):
    from eval.annotate.pool import pool_hits, shown_order

    inputs = make_inputs(tmp_path)
    runs = {n: read_trec_run(inputs[n]) for n in ("a", "b")}
    corpus = {f"d{i}": object() for i in range(30)}
    files = {"a": "a.trec", "b": "b.trec", "corpus": "corpus.jsonl", "sample": "s"}
    pool = pool_hits(["q1", "q2"], runs, 5, 0, corpus, files)
    swapped = pool_hits(
        ["q2", "q1"], {"x": runs["b"], "y": runs["a"]}, 5, 0, corpus, files | {"x": "", "y": ""}
    )
    assert pool == swapped  # neither the run names nor their order changes what is shown
    for qid, docs in pool.items():
        top = {
            d for run in runs.values() for d, _ in sorted(run[qid].items(), key=lambda x: -x[1])[:5]
        }
        assert sorted(docs) == sorted(top) and len(docs) == len(set(docs))
        assert docs == sorted(docs, key=lambda d, q=qid: shown_order(0, q, d))
    assert len(pool["q1"]) == 8  # 5 + 5 with 2 shared
    del corpus["d7"]  # in a's top 5 only
    with pytest.raises(ValueError, match=r"a\.trec names document 'd7' \(query 'q1'\)"):
        pool_hits(["q1"], runs, 5, 0, corpus, files)


def test_judgments_are_durable_folded_and_undone_by_an_atomic_rewrite(tmp_path: Path):
    from eval.annotate.store import QRELS_FILE, JudgmentStore, fold

    def record(assessor: str, doc: str, grade: int, **extra) -> dict:
        base = {"qid": "q1", "query": "axon", "doc_id": doc, "text": "t", "assessor": assessor}
        return base | {"grade": grade, "seconds": 1.5} | extra

    store = JudgmentStore(tmp_path)
    assert store.add(record("alice", "d1", 3)) is not None
    assert store.add(record("alice", "d1", 0)) is None  # judged already: not doubled
    store.add(record("bob", "d1", 1))
    store.add(record("alice", "d2", 2))
    store.add(record("bob", "d2", 2))
    store.add(record("carol", "d3", 0))
    # Two assessors: the lower grade; adjudicated: the adjudicator's.
    assert store.grades() == {("q1", "d1"): 1, ("q1", "d2"): 2, ("q1", "d3"): 0}
    store.add(record("dave", "d1", 3, adjudication=True))
    assert read_qrels(tmp_path / QRELS_FILE) == {"q1": {"d1": 3, "d2": 2, "d3": 0}}
    withdrawn = store.undo("alice")
    assert (withdrawn.doc_id, withdrawn.grade) == ("d2", 2)
    store.close()
    lines = (tmp_path / "judgments.jsonl").read_text().splitlines()
    assert len(lines) == 5 and all(json.loads(line)["time"] for line in lines)
    # A kill mid-append leaves a partial line: dropped on reopen, the rest kept.
    with open(tmp_path / "judgments.jsonl", "a") as handle:
        handle.write('{"qid": "q1", "doc_')
    again = JudgmentStore(tmp_path)
    assert [r.doc_id for r in again.records] == ["d1", "d1", "d2", "d3", "d1"]
    records = list(read_records(tmp_path / "judgments.jsonl", Judgment))  # plain Judgments
    assert records[0].label == 1 and records[0].model_extra["assessor"] == "alice"
    assert fold(records, "label")[("q1", "d2")] == 1


def test_the_routes_hide_the_labelers_label_until_a_query_is_judged(tmp_path: Path):
    from eval.annotate.app import create_app

    judging, _ = judging_for(tmp_path, "--queries", "q1", "q2", "q3", "q4")
    client = TestClient(create_app(judging))
    assert "Relevance judging" in client.get("/").text
    state = client.get("/api/state", params={"assessor": "alice"}).json()
    first = state["hit"]
    qid, hits = first["qid"], first["query_hits"]
    assert hits == 8 and state["progress"]["total"] == 32
    assert set(first) == {
        "qid",
        "doc_id",
        "query",
        "title",
        "text",
        "query_number",
        "query_judged",
        "query_hits",
    }
    assert client.get("/api/summary", params={"assessor": "alice", "qid": qid}).status_code == 409
    skipped = client.post(
        "/api/skip", json={"assessor": "alice", "qid": qid, "doc_id": first["doc_id"]}
    )
    assert skipped.json()["hit"]["doc_id"] != first["doc_id"]
    state = skipped.json()
    for _ in range(hits):
        hit = state["hit"]
        body = {"assessor": "alice", "qid": hit["qid"], "doc_id": hit["doc_id"], "grade": 2}
        state = client.post("/api/judge", json=body | {"seconds": 0.5}).json()
        if state.get("finished_query"):
            break
    assert state["finished_query"] == qid  # the skipped hit came back before the query ended
    repeat = client.post("/api/judge", json=body | {"seconds": 0.5})
    assert repeat.status_code == 409
    summary = client.get("/api/summary", params={"assessor": "alice", "qid": qid}).json()
    assert (
        summary["compared"] == 8 and summary["agree"] == 4
    )  # relevant: the labeler's top 2 of each run
    undone = client.post("/api/undo", json={"assessor": "alice"}).json()
    assert undone["undone"] and undone["hit"]["doc_id"] == body["doc_id"]
    bad = client.post("/api/judge", json=body | {"grade": 4, "seconds": 1})
    assert bad.status_code == 422
    assert client.get("/api/state", params={"assessor": "no spaces"}).status_code == 422


def run_command(module_main, args: list[str], capsys) -> tuple[int, str]:
    from data.core.cli import run_main

    with pytest.raises(SystemExit) as exit_:
        run_main(module_main, args)
    return exit_.value.code, capsys.readouterr().err.strip()


def test_bad_input_is_one_line_and_exit_2_before_the_server_starts(tmp_path: Path, capsys):
    from eval.annotate.__main__ import main

    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    # A run naming a document the corpus lacks.
    run = read_trec_run(inputs["a"])
    run["q1"]["nosuch"] = 99.0
    write_trec_run(tmp_path / "stray.trec", run)
    code, err = run_command(
        main,
        [*annotate_args(inputs, out, "--queries", "q1"), "--runs", str(tmp_path / "stray.trec")],
        capsys,
    )
    assert code == 2 and "stray.trec names document 'nosuch'" in err and len(err.splitlines()) == 1
    # An empty sample.
    (tmp_path / "empty.txt").write_text("# nothing drawn\n\n")
    code, err = run_command(
        main, annotate_args(inputs, out, "--draw", str(tmp_path / "empty.txt")), capsys
    )
    assert code == 2 and "the sample is empty" in err and len(err.splitlines()) == 1
    # A port in use.
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, err = run_command(
            main, annotate_args(inputs, out, "--queries", "q1", "--port", str(port)), capsys
        )
    assert code == 2 and f"127.0.0.1:{port} cannot be used" in err and len(err.splitlines()) == 1
    assert not out.exists()  # nothing written before the server would start
    # An output folder of another corpus.
    from eval.annotate.store import new_session, write_session

    other = tmp_path / "other-corpus.jsonl"
    other.write_text('{"_id": "x", "text": "y"}\n')
    write_session(out, new_session(other, {}, 5, 0, {}))
    code, err = run_command(main, annotate_args(inputs, out, "--queries", "q1"), capsys)
    assert code == 2 and "holds judgments of another corpus" in err and len(err.splitlines()) == 1


def test_two_assessors_get_cohens_kappa_and_the_disagreements(tmp_path: Path, capsys):
    from sklearn.metrics import cohen_kappa_score

    from eval.annotate.agreement import main
    from eval.annotate.store import JudgmentStore

    alice = [3, 2, 0, 1, 0, 2, 3, 0, 1, 2]
    bob = [3, 1, 0, 1, 0, 2, 2, 0, 0, 3]
    store = JudgmentStore(tmp_path)
    for name, grades in (("alice", alice), ("bob", bob)):
        for i, grade in enumerate(grades):
            store.add(
                {"qid": "q1", "query": "q", "doc_id": f"d{i}", "text": "t", "grade": grade}
                | {"assessor": name, "seconds": 1.0}
            )
    store.close()
    main(["--judgments", str(tmp_path), "--out", str(tmp_path / "agreement")])
    result = json.loads((tmp_path / "agreement.json").read_text())["pairs"]["alice vs bob"]
    relevant = lambda grades: [int(g >= 2) for g in grades]  # noqa: E731
    assert result["kappa"] == pytest.approx(cohen_kappa_score(relevant(alice), relevant(bob)))
    assert result["weighted_kappa"] == pytest.approx(
        cohen_kappa_score(alice, bob, weights="quadratic")
    )
    assert result["hits"] == 10 and result["same_grade"] == pytest.approx(0.6)
    listed = json.loads((tmp_path / "agreement.json").read_text())["disagreements"]
    assert {r["doc_id"]: r["grades"] for r in listed} == {
        "d1": {"alice": 2, "bob": 1},
        "d6": {"alice": 3, "bob": 2},
        "d8": {"alice": 1, "bob": 0},
        "d9": {"alice": 2, "bob": 3},
    }
    assert "| q1 | q | d1 |" in capsys.readouterr().out


def judged_session(tmp_path: Path, draw_args: list[str], complete: bool = True) -> dict:
    """A draw over 12 queries, its judging session, and (``complete``) a grade for every hit, as
    the page would leave them; the labeler's judgments of both runs' top 5 for eval.search."""
    from eval.ppi import main as draw

    inputs = make_inputs(tmp_path, queries=12)
    draw([*draw_args, "--labels", str(tmp_path / "labels"), "--out", str(tmp_path / "draw.json")])
    judging, _ = judging_for_inputs(tmp_path, inputs, "--draw", str(tmp_path / "draw.json"))
    hits = judging.order if complete else judging.order[:-1]
    for qid, doc in hits:
        grade = int(doc[1:]) % 4  # the person's grade
        judging.judge(JudgeIn(assessor="alice", qid=qid, doc_id=doc, grade=grade, seconds=1.0))
    judging.store.close()
    with open(tmp_path / "labeler.jsonl", "w") as handle:  # the labeler: every hit relevant
        for name in ("a", "b"):
            for qid, docs in read_trec_run(inputs[name]).items():
                for doc in sorted(docs, key=docs.get, reverse=True)[:5]:
                    record = {"qid": qid, "query": "q", "doc_id": doc, "text": "t", "label": 1}
                    handle.write(json.dumps(record) + "\n")
    return inputs


def judging_for_inputs(tmp_path: Path, inputs: dict[str, Path], *extra: str):
    from data.core.cli import parse_config
    from eval.annotate.__main__ import AnnotateConfig, resolve
    from eval.annotate.app import Judging
    from eval.annotate.store import JudgmentStore, write_session

    (config,) = parse_config([AnnotateConfig], annotate_args(inputs, tmp_path / "out", *extra))
    session, corpus, queries = resolve(config)
    write_session(tmp_path / "out", session)
    pool = dict(session["pool"])
    documents = {d: corpus[d] for docs in pool.values() for d in docs}
    return Judging(pool, queries, documents, JudgmentStore(tmp_path / "out"), None, "alice"), None


def search_args(tmp_path: Path, inputs: dict[str, Path], *extra: str) -> list[str]:
    return [
        "--run",
        str(inputs["a"]),
        "--compare",
        str(inputs["b"]),
        "--corpus",
        str(inputs["collection"]),
        "--labeler",
        f"judgments:{tmp_path / 'labeler.jsonl'}",
        "--k",
        "5",
        "--out",
        str(tmp_path / "search"),
        *extra,
    ]


def test_search_reads_the_session_and_uses_its_draws_design(tmp_path: Path, capsys):
    from eval.search.command import main as search

    inputs = judged_session(tmp_path, ["--design", "neyman", "--n", "6", "--metric", "ndcg@5"])
    search(search_args(tmp_path, inputs, "--human", str(tmp_path / "out")))
    report = json.loads((tmp_path / "search" / "metrics.json").read_text())["ppi"]
    assert (
        report["judged_queries"] == 6 and "neyman allocation over 2 strata" in report["estimator"]
    )
    precision = report["runs"]["a"]["precision@5"]
    assert precision["labeler_mean"] == pytest.approx(1.0)
    assert "stratified PPI++" in precision["ppi"]["method"] and precision["ppi"]["n"] == 6
    # The human value of the judged grades (relevant = d number % 4 >= 2) pulls the estimate down.
    assert precision["ppi"]["high"] < 0.9
    assert "neyman allocation" in capsys.readouterr().out
    # Its qrels.txt is the same sample, read the same way.
    search(search_args(tmp_path, inputs, "--human", str(tmp_path / "out" / "qrels.txt")))
    again = json.loads((tmp_path / "search" / "metrics.json").read_text())["ppi"]
    assert again["runs"] == report["runs"]


def test_search_refuses_a_session_with_unjudged_hits_before_labelling(tmp_path: Path, capsys):
    from eval.search.command import main as search

    inputs = judged_session(tmp_path, ["--n", "4"], complete=False)
    code, err = run_command(
        search, search_args(tmp_path, inputs, "--human", str(tmp_path / "out")), capsys
    )
    assert code == 2 and "which is not judged; judge it on the page" in err
    assert not (tmp_path / "search" / "per_query.json").exists()


def test_search_estimates_relevant_shares_from_a_stratified_draw_of_hits(tmp_path: Path):
    from eval.search.command import main as search

    draw = ["--design", "proportional", "--unit", "hits", "--n", "30", "--strata", "3"]
    inputs = judged_session(tmp_path, draw)
    search(search_args(tmp_path, inputs, "--human_pairs", str(tmp_path / "out")))
    report = json.loads((tmp_path / "search" / "metrics.json").read_text())["ppi"]
    share = report["pairs"]["a"]["relevant share"]
    assert (
        report["judged_pairs"] == 30
        and "proportional allocation over 3 strata" in (report["estimator"])
    )
    assert share["labeler_mean"] == pytest.approx(1.0) and share["ppi"]["high"] < 0.95
    assert 0 < share["ppi"]["n"] <= 30  # the drawn hits that fall in a's top 5


def test_one_assessor_giving_a_hit_twice_keeps_the_last_with_a_warning_and_assessors_fold(
    tmp_path: Path, caplog
):
    from eval.annotate.store import fold, read_judgments

    def line(assessor: str, grade: int) -> str:
        base = {"qid": "q1", "query": "axon", "doc_id": "d1", "text": "t", "grade": grade}
        return json.dumps(base | {"assessor": assessor}) + "\n"

    path = tmp_path / "judgments.jsonl"
    path.write_text(line("alice", 3) + line("bob", 1))  # two assessors: folded, no conflict
    assert fold(read_judgments(path)) == {("q1", "d1"): 1} and not caplog.text
    path.write_text(line("alice", 0) + line("bob", 3) + line("alice", 3))  # alice re-judged
    assert [r.grade for r in read_judgments(path)] == [3, 3]
    assert "1 pair(s) given twice with different verdicts" in caplog.text
    assert "q1/d1/alice: (0, 0) at line 1, then (3, 1) at line 3" in caplog.text
