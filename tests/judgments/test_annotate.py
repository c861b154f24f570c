"""The judging page's parts without a browser: pooling, the session store, the routes, the checks
before the server starts, the assessors' agreement, and eval.search reading the page's output."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from data.beir import read_qrels, read_trec_run, write_trec_run
from judgments.annotate.app import JudgeIn

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
    (root / "labels" / "per_query.json").write_text(
        json.dumps({"format_version": 1, "runs": per_query})
    )
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
    from core.cli import parse_config
    from judgments.annotate.__main__ import AnnotateConfig, labeler_labels, resolve
    from judgments.annotate.app import Judging
    from judgments.store import JudgmentStore, write_session

    inputs = make_inputs(tmp_path)
    (config,) = parse_config([AnnotateConfig], annotate_args(inputs, tmp_path / "out", *extra))
    session, corpus, queries = resolve(config)
    write_session(tmp_path / "out", session)
    pool = dict(session.pool)
    documents = {d: corpus[d] for docs in pool.values() for d in docs}
    store = JudgmentStore(tmp_path / "out")
    found = labeler_labels(str(tmp_path / "labels")) if labels else None
    return Judging(pool, queries, documents, store, found, ["alice", "bob"], secret=b"s"), inputs


def test_the_pool_holds_each_top_k_hit_once_in_an_order_that_does_not_reveal_the_system(
    tmp_path: Path,
):
    from judgments.annotate.pool import pool_hits, shown_order

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


def test_judgments_are_durable_folded_and_undone_by_an_appended_line(tmp_path: Path):
    from judgments.store import QRELS_FILE, JudgmentStore, fold, read_judgments

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
    # Only some hits judged twice: one assessor's grade each (alice's: she judged the most, tied
    # with bob and first by name); adjudicated: the adjudicator's.
    assert store.grades() == {("q1", "d1"): 3, ("q1", "d2"): 2, ("q1", "d3"): 0}
    store.add(record("dave", "d1", 3, adjudication=True))
    assert read_qrels(tmp_path / QRELS_FILE) == {"q1": {"d1": 3, "d2": 2, "d3": 0}}
    before = (tmp_path / "judgments.jsonl").read_text()
    withdrawn = store.undo("alice")
    assert (withdrawn.hit, withdrawn.judgment.grade) == (("q1", "d2"), 2)
    store.close()
    # The file is never rewritten: the undo is one more line, naming the withdrawn one.
    after = (tmp_path / "judgments.jsonl").read_text()
    assert after.startswith(before) and after.count("\n") == before.count("\n") + 1
    undo = json.loads(after.splitlines()[-1])
    assert undo["undo"] == json.loads(before.splitlines()[2])["ref"]
    assert all(json.loads(line)["time"] for line in after.splitlines())
    # A kill mid-append leaves a partial line: dropped on reopen, the rest kept.
    with open(tmp_path / "judgments.jsonl", "a") as handle:
        handle.write('{"qid": "q1", "doc_')
    again = JudgmentStore(tmp_path)
    assert [r.doc_id for r in again.records] == ["d1", "d1", "d2", "d3", "d1"]
    records = read_judgments(tmp_path)  # undo applied: alice's d2 is gone
    assert [(r.doc_id, r.model_extra["assessor"]) for r in records][:3] == [
        ("d1", "alice"),
        ("d1", "bob"),
        ("d2", "bob"),
    ]
    assert records[0].label == 1 and fold(records, "label")[("q1", "d2")] == 1
    assert again.undo("alice").hit == ("q1", "d1") and again.undo("alice") is None
    again.close()
    assert ("q1", "d1") not in {
        (r.qid, r.doc_id) for r in read_judgments(tmp_path) if r.model_extra["assessor"] == "alice"
    }


def test_a_judgment_whose_newline_was_lost_is_kept_when_the_session_starts(tmp_path: Path):
    """A hand edit or a merge that drops the final newline once cost the last judgment: the
    appender cut it when the server started."""
    from judgments.store import JudgmentStore, read_judgments

    line = {"qid": "q1", "query": "axon", "doc_id": "d1", "text": "t", "grade": 3}
    (tmp_path / "judgments.jsonl").write_text(json.dumps(line | {"assessor": "alice"}))
    store = JudgmentStore(tmp_path)
    assert [r.doc_id for r in store.records] == ["d1"]
    store.add(line | {"doc_id": "d2", "assessor": "alice", "seconds": 1.0})
    store.close()
    assert [r.doc_id for r in read_judgments(tmp_path)] == ["d1", "d2"]


def test_cannot_tell_and_judge_later_are_recorded_but_never_read_as_grades(tmp_path: Path):
    from judgments.store import JudgmentStore, as_qrels, fold, read_judgments

    base = {"qid": "q1", "query": "axon", "text": "t", "assessor": "alice", "seconds": 2.0}
    store = JudgmentStore(tmp_path)
    store.add(base | {"doc_id": "d1", "grade": 3})
    assert store.add_verdict(base | {"doc_id": "d2"}, "cannot_tell") is not None
    assert store.add_verdict(base | {"doc_id": "d3"}, "later") is not None
    assert store.add_verdict(base | {"doc_id": "d2"}, "later") is None  # answered already
    assert set(store.answered("alice")) == {("q1", "d1"), ("q1", "d2")}
    assert store.deferred("alice") == {("q1", "d3")}
    store.close()
    lines = [json.loads(line) for line in (tmp_path / "judgments.jsonl").read_text().splitlines()]
    assert [line.get("verdict") for line in lines] == [None, "cannot_tell", "later"]
    assert all("grade" not in line and "label" not in line for line in lines[1:])
    records = read_judgments(tmp_path)
    assert [r.doc_id for r in records] == ["d1"]
    assert as_qrels(fold(records)) == {"q1": {"d1": 3}}
    assert (tmp_path / "qrels.txt").read_text().split() == ["q1", "0", "d1", "3"]
    # A verdict line that also gives a grade is a damaged line, named as such.
    with open(tmp_path / "judgments.jsonl", "a") as handle:
        handle.write(json.dumps(base | {"doc_id": "d4", "verdict": "cannot_tell", "grade": 2}))
        handle.write("\n")
    with pytest.raises(ValueError, match=r"judgments\.jsonl:4: verdict: a cannot_tell record"):
        read_judgments(tmp_path)


LOCAL = "http://127.0.0.1:8765"


def judge_all(client, token: str, body_extra: dict | None = None) -> dict:
    """Grade every hit the token's assessor is served (2 for odd documents, else 0)."""
    headers = {"X-Token": token}
    state = client.get("/api/state", headers=headers).json()
    while state["hit"]:
        hit = state["hit"]
        body = {
            "qid": hit["qid"],
            "doc_id": hit["doc_id"],
            "grade": 2 * (int(hit["doc_id"][1:]) % 2),
        }
        response = client.post(
            "/api/judge", json=body | {"seconds": 0.5} | (body_extra or {}), headers=headers
        )
        assert '"score"' not in response.text and "labeler" not in response.text
        state = response.json()
    return state


def test_only_a_valid_token_says_who_asks_and_no_one_reads_anothers_grades(tmp_path: Path):
    """Identity is the token of the assessor's link: ?assessor=NAME or an assessor field never
    picks it, a guessed token is refused, and bob cannot read alice's grades or labels."""
    from judgments.annotate.app import create_app

    judging, _ = judging_for(tmp_path, "--queries", "q1", "q2", "q3", "q4")
    client = TestClient(create_app(judging), base_url=LOCAL)
    alice, bob = judging.token("alice"), judging.token("bob")
    assert alice != bob and "Relevance judging" in client.get("/").text
    assert client.get("/api/state").status_code == 401
    named = client.get("/api/state", params={"assessor": "alice"})
    assert named.status_code == 401 and "?assessor=alice no longer picks" in named.json()["detail"]
    assert client.get("/api/state", headers={"X-Token": "0" * 32}).status_code == 403
    assert client.post("/api/undo", json={"assessor": "alice"}).status_code == 401
    assert client.get("/api/config", headers={"X-Token": bob}).json()["assessor"] == "bob"
    # Bob judges with an assessor field naming alice: the grades are his.
    state = judge_all(client, bob, {"assessor": "alice"})
    assert state["progress"]["judged"] == 32
    assert {r.model_extra["assessor"] for r in judging.store.records} == {"bob"}
    # Alice sees none of bob's work, whatever she asks for, and bob none of the labeler's yet.
    mine = client.get("/api/state", params={"assessor": "bob"}, headers={"X-Token": alice})
    assert mine.json()["assessor"] == "alice" and mine.json()["progress"]["judged"] == 0
    for params in ({"assessor": "bob"}, {"assessor": "bob", "qid": "q1"}):
        asked = client.get("/api/summary", params=params, headers={"X-Token": alice})
        assert asked.status_code == 409 and "every hit of the session" in asked.json()["detail"]
    undone = client.post("/api/undo", json={"assessor": "bob"}, headers={"X-Token": alice})
    assert undone.json()["undone"] is False and len(judging.store.records) == 32
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/openapi.json").status_code == 404


def test_the_labeler_is_revealed_only_at_the_end_and_its_grades_are_then_final(tmp_path: Path):
    from judgments.annotate.app import create_app

    judging, _ = judging_for(tmp_path, "--queries", "q1", "q2")
    client = TestClient(create_app(judging), base_url=LOCAL)
    headers = {"X-Token": judging.token("alice")}
    state = client.get("/api/state", headers=headers).json()
    first = state["hit"]
    assert set(first) == {
        "qid",
        "doc_id",
        "query",
        "title",
        "text",
        "terms",
        "query_number",
        "query_judged",
        "query_hits",
    }
    assert state["reveal"] == {"ready": False, "done": False}
    skipped = client.post(
        "/api/skip", json={"qid": first["qid"], "doc_id": first["doc_id"]}, headers=headers
    )
    assert skipped.json()["hit"]["doc_id"] != first["doc_id"]
    # Query by query, nothing of the labeler: the summary waits for the whole session.
    for _ in range(first["query_hits"]):
        hit = client.get("/api/state", headers=headers).json()["hit"]
        body = {"qid": hit["qid"], "doc_id": hit["doc_id"], "grade": 2, "seconds": 0.5}
        state = client.post("/api/judge", json=body, headers=headers).json()
    assert state["finished_query"] == first["qid"]  # the skipped hit came back before the end
    summary = client.get("/api/summary", params={"qid": first["qid"]}, headers=headers)
    assert summary.status_code == 409
    assert client.post("/api/judge", json=body, headers=headers).status_code == 409
    bad = client.post("/api/judge", json=body | {"grade": 4}, headers=headers)
    assert bad.status_code == 422
    # Undo before the reveal: the hit is served again, without anything of the labeler.
    undone = client.post("/api/undo", headers=headers).json()
    assert undone["undone"] and undone["hit"]["doc_id"] == body["doc_id"]
    # A hit left on screen for two days is still gradable; its time is capped.
    late = client.post("/api/judge", json=body | {"seconds": 2 * 86_400}, headers=headers)
    assert late.status_code == 200
    state = judge_all(client, judging.token("alice"))
    assert state["reveal"] == {"ready": True, "done": False}
    summary = client.get("/api/summary", headers=headers).json()
    assert [q["qid"] for q in summary["queries"]] == list(
        dict.fromkeys(q for q, _ in judging.order("alice"))
    )
    assert summary["compared"] == 16 and 0 <= summary["agree"] <= 16
    # After the reveal the grades are final: undo is refused, and the reveal is on file.
    refused = client.post("/api/undo", headers=headers)
    assert refused.status_code == 409 and "grade is final" in refused.json()["detail"]
    lines = [json.loads(line) for line in (tmp_path / "out" / "judgments.jsonl").open()]
    assert lines[-1]["reveal"] == "session" and lines[-1]["assessor"] == "alice"
    capped = [line for line in lines if line.get("seconds_capped")]
    assert len(capped) == 1 and capped[0]["seconds"] == 600


def test_the_training_mode_reveals_each_query_once_it_is_judged(tmp_path: Path):
    from judgments.annotate.app import create_app

    judging, _ = judging_for(tmp_path, "--queries", "q1", "q2")
    judging.reveal = "per-query"
    client = TestClient(create_app(judging), base_url=LOCAL)
    headers = {"X-Token": judging.token("alice")}
    state = client.get("/api/state", headers=headers).json()
    qid = state["hit"]["qid"]
    assert client.get("/api/summary", params={"qid": qid}, headers=headers).status_code == 409
    while not state.get("finished_query"):
        hit = state["hit"]
        body = {"qid": hit["qid"], "doc_id": hit["doc_id"], "grade": 3, "seconds": 1}
        state = client.post("/api/judge", json=body, headers=headers).json()
    summary = client.get("/api/summary", params={"qid": qid}, headers=headers).json()
    assert summary["qid"] == qid and summary["compared"] == 8 and summary["agree"] == 4
    assert client.post("/api/undo", headers=headers).status_code == 409  # seen: final


def test_each_assessor_gets_a_seeded_order_of_their_own(tmp_path: Path):
    judging, _ = judging_for(tmp_path, "--queries", "q1", "q2", "q3", "q4")
    alice, bob = judging.order("alice"), judging.order("bob")
    assert sorted(alice) == sorted(bob) == sorted(judging.hits)
    assert alice != bob
    queries = lambda order: list(dict.fromkeys(q for q, _ in order))  # noqa: E731
    within = lambda order, q: [d for qid, d in order if qid == q]  # noqa: E731
    assert queries(alice) != queries(bob) or any(
        within(alice, q) != within(bob, q) for q in queries(alice)
    )
    assert any(within(alice, q) != within(bob, q) for q in queries(alice))  # hits shuffled too
    # The same seed and name give the same order on every start; another seed another one.
    judging.seed, judging._orders = 0, {}
    assert judging.order("alice") == alice
    judging.seed, judging._orders = 1, {}
    assert judging.order("alice") != alice
    # Over many names, each query comes first about equally often: a random permutation.
    firsts = [judging.order(f"a{i}")[0][0] for i in range(400)]
    assert all(60 < firsts.count(q) < 140 for q in ("q1", "q2", "q3", "q4"))


def test_requests_for_another_host_are_refused(tmp_path: Path):
    """DNS rebinding: a page of evil.example whose name resolves to 127.0.0.1 sends its own name
    as the Host; the server answers only its own address."""
    from judgments.annotate.app import create_app

    judging, _ = judging_for(tmp_path, "--queries", "q1")
    headers = {"X-Token": judging.token("alice")}
    app = create_app(judging, ("127.0.0.1", "localhost"), 8765)
    for base in (LOCAL, "http://localhost:8765"):
        assert TestClient(app, base_url=base).get("/api/state", headers=headers).status_code == 200
    for base in ("http://evil.example:8765", "http://127.0.0.1:9999", "http://evil.example"):
        refused = TestClient(app, base_url=base).get("/api/state", headers=headers)
        assert refused.status_code == 403 and "not this judging server" in refused.text
        assert TestClient(app, base_url=base).get("/").status_code == 403


def test_highlighting_leaves_out_stop_words():
    from judgments.annotate.app import highlight_terms

    assert highlight_terms("Can you tell us what an axon terminal is?") == [
        "terminal",
        "axon",
        "tell",
    ]
    assert highlight_terms("how does the brain store memories") == ["memori", "brain", "store"]
    assert highlight_terms("what is it") == []


def run_command(module_main, args: list[str], capsys) -> tuple[int, str]:
    from core.cli import run_main

    with pytest.raises(SystemExit) as exit_:
        run_main(module_main, args)
    return exit_.value.code, capsys.readouterr().err.strip()


def test_bad_input_is_one_line_and_exit_2_before_the_server_starts(tmp_path: Path, capsys):
    from judgments.annotate.__main__ import main

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
    from judgments.store import new_session, write_session

    other = tmp_path / "other-corpus.jsonl"
    other.write_text('{"_id": "x", "text": "y"}\n')
    write_session(out, new_session(other, {}, 5, 0, {}))
    code, err = run_command(main, annotate_args(inputs, out, "--queries", "q1"), capsys)
    assert code == 2 and "holds judgments of another corpus" in err and len(err.splitlines()) == 1


def test_two_assessors_get_cohens_kappa_and_the_disagreements(tmp_path: Path, capsys):
    from sklearn.metrics import cohen_kappa_score

    from judgments.annotate.agreement import main
    from judgments.store import JudgmentStore

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
    from judgments.draw import main as draw

    inputs = make_inputs(tmp_path, queries=12)
    draw([*draw_args, "--labels", str(tmp_path / "labels"), "--out", str(tmp_path / "draw.json")])
    judging, _ = judging_for_inputs(tmp_path, inputs, "--draw", str(tmp_path / "draw.json"))
    hits = judging.order("alice") if complete else judging.order("alice")[:-1]
    for qid, doc in hits:
        grade = int(doc[1:]) % 4  # the person's grade
        judging.judge("alice", JudgeIn(qid=qid, doc_id=doc, grade=grade, seconds=1.0))
    judging.store.close()
    with open(tmp_path / "labeler.jsonl", "w") as handle:  # the labeler: every hit relevant
        for name in ("a", "b"):
            for qid, docs in read_trec_run(inputs[name]).items():
                for doc in sorted(docs, key=docs.get, reverse=True)[:5]:
                    record = {"qid": qid, "query": "q", "doc_id": doc, "text": "t", "label": 1}
                    handle.write(json.dumps(record) + "\n")
    return inputs


def judging_for_inputs(tmp_path: Path, inputs: dict[str, Path], *extra: str):
    from core.cli import parse_config
    from judgments.annotate.__main__ import AnnotateConfig, resolve
    from judgments.annotate.app import Judging
    from judgments.store import JudgmentStore, write_session

    (config,) = parse_config([AnnotateConfig], annotate_args(inputs, tmp_path / "out", *extra))
    session, corpus, queries = resolve(config)
    write_session(tmp_path / "out", session)
    pool = dict(session.pool)
    documents = {d: corpus[d] for docs in pool.values() for d in docs}
    store = JudgmentStore(tmp_path / "out")
    return Judging(pool, queries, documents, store, None, ["alice"], seed=session.seed), None


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


@pytest.mark.slow
def test_search_reads_the_session_and_uses_its_draws_design(tmp_path: Path, capsys):
    from eval.search.command import main as search

    inputs = judged_session(tmp_path, ["--design", "neyman", "--n", "10", "--metric", "ndcg@5"])
    search(search_args(tmp_path, inputs, "--human", str(tmp_path / "out")))
    report = json.loads((tmp_path / "search" / "metrics.json").read_text())["ppi"]
    assert (
        report["judged_queries"] == 10 and "neyman allocation over 2 strata" in report["estimator"]
    )
    precision = report["runs"]["a"]["precision@5"]
    assert precision["labeler_mean"] == pytest.approx(1.0)
    assert "stratified PPI++" in precision["ppi"]["method"] and precision["ppi"]["n"] == 10
    # The human value of the judged grades (relevant = d number % 4 >= 2) pulls the estimate down.
    assert precision["ppi"]["high"] < 0.9
    assert "neyman allocation" in capsys.readouterr().out
    # Its qrels.txt is the same sample, read the same way.
    search(search_args(tmp_path, inputs, "--human", str(tmp_path / "out" / "qrels.txt")))
    again = json.loads((tmp_path / "search" / "metrics.json").read_text())["ppi"]
    assert again["runs"] == report["runs"]


def test_a_draw_judged_in_part_gives_estimates_from_its_fully_judged_queries(
    tmp_path: Path, caplog
):
    """The last hit of an 11-query draw is not judged: its query is left out and the other 10, a
    uniform subsample of the draw (served in a random order), give the estimates with n = 10."""
    from eval.search.command import main as search

    inputs = judged_session(tmp_path, ["--n", "11"], complete=False)
    search(search_args(tmp_path, inputs, "--human", str(tmp_path / "out")))
    report = json.loads((tmp_path / "search" / "metrics.json").read_text())["ppi"]
    assert report["judged_queries"] == 10
    assert report["runs"]["a"]["precision@5"]["ppi"]["n"] == 10
    assert "10 of the 11 drawn fully judged" in report["sample"]["design"]
    assert "judged in part and left out" in caplog.text
    assert "10 of the 11 drawn queries are fully judged" in caplog.text
    # Measured deeper than the session judged: one line says the k differs.
    deeper = search_args(tmp_path, inputs, "--human", str(tmp_path / "out"))
    deeper[deeper.index("--k") + 1] = "8"
    with pytest.raises(ValueError, match=r"judged each run's top 5, .* top 8 \(the k differs\)"):
        search(deeper)


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
    from judgments.store import fold, read_judgments

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


def test_a_second_server_on_one_session_is_refused_naming_the_first(tmp_path: Path, capsys):
    from judgments.annotate.__main__ import main
    from judgments.store import LOCK_FILE, hold_session

    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    release = hold_session(out, "http://127.0.0.1:8765/")
    try:
        code, err = run_command(main, annotate_args(inputs, out, "--queries", "q1"), capsys)
    finally:
        release()
    assert code == 2 and len(err.splitlines()) == 1
    assert f"is being judged by the server at http://127.0.0.1:8765/ (PID {os.getpid()}" in err
    assert not (out / LOCK_FILE).exists()  # released
    # A lock left by a server that died (no flock held) is taken over.
    (out / LOCK_FILE).write_text(json.dumps({"url": "http://127.0.0.1:1/", "pid": 999_999_999}))
    release = hold_session(out, "http://127.0.0.1:2/")
    assert json.loads((out / LOCK_FILE).read_text())["pid"] == os.getpid()
    release()


def test_a_restart_with_out_alone_keeps_the_sessions_assessors_labels_and_modes(tmp_path: Path):
    from core.cli import parse_config
    from judgments.annotate.__main__ import AnnotateConfig, resolve
    from judgments.store import JudgingSession, JudgmentStore, write_session

    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    labels = str(tmp_path / "labels")
    args = annotate_args(inputs, out, "--queries", "q1", "--assessors", "alice", "bob")
    extra = ["--labels", labels, "--highlight", "false", "--reveal", "per-query"]
    (config,) = parse_config([AnnotateConfig], [*args, *extra])
    session, _, _ = resolve(config)
    write_session(out, session)
    recorded = JudgingSession.of_folder(out)
    assert recorded is not None
    assert recorded.assessors == ["alice", "bob"] and recorded.labels == labels
    assert (recorded.highlight, recorded.reveal, recorded.adjudicate) == (
        False,
        "per-query",
        False,
    )
    (config,) = parse_config([AnnotateConfig], ["--out", str(out)])
    again, _, _ = resolve(config)
    assert again == recorded
    # Once judged, a session's highlighting and reveal mode stay as they were judged.
    store = JudgmentStore(out)
    store.add(
        {"qid": "q1", "query": "q", "doc_id": "d7", "text": "t", "grade": 1}
        | {"assessor": "alice", "seconds": 1.0}
    )
    store.close()
    (config,) = parse_config([AnnotateConfig], ["--out", str(out), "--highlight", "true"])
    with pytest.raises(ValueError, match=r"highlight: .* was judged with --highlight false"):
        resolve(config)


def test_a_damaged_session_and_a_bad_assessor_name_are_one_line_each(tmp_path: Path, capsys):
    from judgments.annotate.__main__ import main

    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    code, err = run_command(
        main, annotate_args(inputs, out, "--queries", "q1", "--assessor", "no spaces"), capsys
    )
    assert code == 2 and len(err.splitlines()) == 1
    assert "assessor: 'no spaces' is not a valid name: use letters, digits" in err
    out.mkdir()
    (out / "session.json").write_text('{"format": "relevance-grader annotate 1",\n')
    code, err = run_command(main, ["--out", str(out)], capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert f"{out / 'session.json'} is damaged (not JSON at line 2 column 1)" in err
    (out / "session.json").write_text('{"format": "relevance-grader annotate 1"}')
    code, err = run_command(main, ["--out", str(out)], capsys)
    assert code == 2 and "session.json is damaged: it has no 'corpus' field" in err


def test_judge_later_comes_back_before_the_next_query_and_cannot_tell_ends_a_hit(tmp_path: Path):
    """Queries are finished in the assessor's random order (the finished ones stay a random
    sample of the draw): a hit kept for later comes back after its query's other hits, not at
    the end of the session."""
    from judgments.annotate.app import create_app

    judging, _ = judging_for(tmp_path, "--queries", "q1", "q2")
    client = TestClient(create_app(judging), base_url=LOCAL)
    headers = {"X-Token": judging.token("alice")}
    first = client.get("/api/state", headers=headers).json()["hit"]
    body = {"qid": first["qid"], "doc_id": first["doc_id"]}
    later = client.post("/api/verdict", json=body | {"verdict": "later"}, headers=headers).json()
    assert later["hit"]["qid"] == first["qid"] and later["hit"]["doc_id"] != first["doc_id"]
    served = []
    state = later
    for _ in range(first["query_hits"] - 1):
        hit = state["hit"]
        served.append(hit["doc_id"])
        grade = {"qid": hit["qid"], "doc_id": hit["doc_id"], "grade": 1, "seconds": 1}
        state = client.post("/api/judge", json=grade, headers=headers).json()
    assert first["doc_id"] not in served
    assert (state["hit"]["qid"], state["hit"]["doc_id"]) == (first["qid"], first["doc_id"])
    unsure = client.post("/api/verdict", json=body | {"verdict": "cannot_tell"}, headers=headers)
    assert unsure.json()["finished_query"] == first["qid"]
    assert unsure.json()["hit"]["qid"] != first["qid"]
    assert (first["qid"], first["doc_id"]) not in judging.store.grades()


def test_hits_judged_twice_among_hits_judged_once_keep_one_assessors_grade(caplog):
    """Folding the lower of two grades where only some hits are double-judged would make the
    estimand a mixture (a systematically lower grade on those hits): each keeps one assessor's."""
    from core.records import Judgment
    from judgments.store import fold

    def record(doc: str, assessor: str, grade: int) -> Judgment:
        fields = {"qid": "q1", "query": "axon", "doc_id": doc, "text": "t", "grade": grade}
        return Judgment.model_validate(fields | {"assessor": assessor})

    both = [record("d1", "alice", 3), record("d1", "bob", 1), record("d2", "alice", 2)]
    both += [record("d2", "bob", 2), record("d3", "bob", 0), record("d3", "alice", 1)]
    assert fold(both) == {("q1", "d1"): 1, ("q1", "d2"): 2, ("q1", "d3"): 0}  # all doubled
    assert not caplog.text
    mixed = [record("d1", "alice", 3), record("d1", "bob", 1), record("d2", "alice", 2)]
    mixed += [record("d3", "bob", 0)]
    assert fold(mixed) == {("q1", "d1"): 3, ("q1", "d2"): 2, ("q1", "d3"): 0}
    assert "only some hits are judged by several assessors" in caplog.text


def test_the_page_shows_the_width_the_graded_queries_reach_and_the_queries_left(tmp_path: Path):
    """As queries are finished the state carries the human-only NDCG@k interval's width over
    them and the queries a 0.1 width needs; from people's grades only (no labeler in it)."""
    from judgments.annotate.__main__ import first_run_rankings
    from judgments.annotate.app import JudgeIn
    from judgments.store import JudgingSession

    judging, _ = judging_for(tmp_path, "--queries", "q1", "q2", "q3", "q4", labels=False)
    session = JudgingSession.of_folder(tmp_path / "out")
    assert session is not None
    judging.rankings, judging.k = first_run_rankings(session), session.k
    assert judging.state("alice")["progress"]["interval"]["width"] is None
    for qid, doc in judging.order("alice"):
        judging.judge("alice", JudgeIn(qid=qid, doc_id=doc, grade=int(doc[1:]) % 4, seconds=1))
        interval = judging.state("alice")["progress"]["interval"]
        if interval["judged"] >= 2:
            break
    assert interval["metric"] == "ndcg@5" and 0 < interval["width"] <= 1
    assert interval["needed"] >= 2 and interval["reachable"] is False  # 4 queries cannot
    assert judging.state("bob")["progress"]["interval"]["judged"] == 0  # alice's, not bob's
    # The work left in minutes, at alice's own pace (1 s a hit) once five judgments show it.
    progress = judging.state("alice")["progress"]
    left = progress["total"] - progress["judged"]
    assert progress["minutes_left"] == round(left / 60, 1)
    assert judging.state("bob")["progress"]["minutes_left"] is None
    # The session records the runs it judged; the sample is not one of them.
    assert set(session.runs) == {"a", "b"} and session.sample == "--queries"


@pytest.mark.parametrize("weak", ["", "\n", "3f9a\n", "x" * 64])
def test_a_weak_secret_is_refused_before_the_server_starts(tmp_path, capsys, monkeypatch, weak):
    """An empty `.secret` (a crash between creating and writing it) was used as the key of
    every assessor's token, so anyone could compute the links."""
    import uvicorn

    from judgments.annotate.__main__ import main
    from judgments.store import SECRET_FILE

    monkeypatch.setattr(uvicorn.Server, "run", lambda *_, **__: pytest.fail("the server started"))
    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / SECRET_FILE).write_text(weak)
    args = annotate_args(inputs, out, "--queries", "q1", "--port", "0")
    code, err = run_command(main, args, capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert f"{out / SECRET_FILE}: a weak secret (" in err
    assert "delete it and start the server again" in err and "no judgment is lost" in err


def test_a_secret_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    import secrets
    import stat

    from judgments.store import SECRET_FILE, session_secret

    def crash(_: int) -> str:
        raise KeyboardInterrupt  # killed between creating the file and writing the secret

    with monkeypatch.context() as patched:
        patched.setattr(secrets, "token_hex", crash)
        with pytest.raises(KeyboardInterrupt):
            session_secret(tmp_path)
    assert list(tmp_path.iterdir()) == []  # no empty secret, no temporary file
    secret = session_secret(tmp_path)
    assert len(secret) == 64 and int(secret, 16) >= 0
    assert session_secret(tmp_path) == secret  # links stay the same across restarts
    assert stat.S_IMODE((tmp_path / SECRET_FILE).stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [SECRET_FILE]


def test_on_every_interface_the_links_name_an_address_the_server_answers(
    tmp_path, capsys, monkeypatch
):
    """`--host 0.0.0.0` printed http://0.0.0.0:PORT/ links, which no other machine can open,
    and refused the machine's real address as the Host."""
    import uvicorn

    from judgments.annotate.__main__ import main

    served = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets: served.append(server))
    inputs = make_inputs(tmp_path)
    args = annotate_args(inputs, tmp_path / "out", "--queries", "q1", "--assessors", "alice")
    main([*args, "--host", "0.0.0.0", "--port", "0"])
    printed = capsys.readouterr().out
    (link,) = [line.split()[1] for line in printed.splitlines() if line.startswith("open ")]
    assert "0.0.0.0" not in link and "listening on every interface (0.0.0.0)" in printed
    base, token = link.split("?token=")
    client = TestClient(served[0].config.app, base_url=base.rstrip("/"))
    assert client.get("/api/state", headers={"X-Token": token}).status_code == 200


def test_on_every_interface_any_address_of_the_machine_is_answered_and_a_name_is_not(tmp_path):
    """The server answers a Host that is the address a request arrived at (127.0.0.2 here, one
    it printed no link for); a name that is not the machine's (DNS rebinding) stays refused."""
    import threading
    import time

    import httpx
    import uvicorn

    from judgments.annotate.__main__ import allowed_hosts, bind
    from judgments.annotate.app import create_app

    judging, _ = judging_for(tmp_path, "--queries", "q1")
    sock = bind("0.0.0.0", 0)
    port = sock.getsockname()[1]
    app = create_app(judging, allowed_hosts("0.0.0.0"), port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        headers = {"X-Token": judging.token("alice")}
        url = f"http://127.0.0.2:{port}/api/state"
        direct = httpx.Client(trust_env=False)  # no proxy from the environment
        assert direct.get(url, headers=headers).status_code == 200
        refused = direct.get(url, headers={**headers, "Host": f"evil.example:{port}"})
        assert refused.status_code == 403 and "not this judging server" in refused.text
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
