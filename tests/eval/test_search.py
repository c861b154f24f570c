from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from data.beir import graded_qrels, read_qrels, read_trec_run, write_trec_run
from eval.labelers import CachedLabeler, Hit, HitLabel, Labeler, QrelsLabeler
from eval.search import _ranx_metrics, evaluate_query

REPO = Path(__file__).resolve().parents[2]


class DictLabeler(Labeler):
    """Grades from a dict; counts how often it is asked."""

    name = "dict"

    def __init__(self, grades: dict[str, int]) -> None:
        self.grades = grades
        self.calls = 0

    def label(self, qid, query, hits):
        self.calls += 1
        return [
            HitLabel(
                relevant=self.grades.get(h.doc_id, 0) >= 2,
                grade=self.grades.get(h.doc_id, 0),
                score=0.5,
                input_tokens=10,
            )
            for h in hits
        ]


def test_hand_worked_example():
    hits = [Hit("a", "x"), Hit("b", "y"), Hit("c", "z"), Hit("d", "w")]
    labeler = DictLabeler({"a": 3, "b": 0, "c": 1, "d": 2})
    result = evaluate_query("q", hits, labeler, k=3, num_relevant=3)
    # DCG@3 = (2^3-1)/log2(2) + 0 + (2^1-1)/log2(4) = 7.5; IDCG@3 = 7 + 3/log2(3) + 1/log2(4)
    idcg = 7 + 3 / math.log2(3) + 0.5
    metrics = result["metrics"]
    assert metrics["ndcg@3"] == pytest.approx(7.5 / idcg)
    # Binary relevance (grade >= 2): a (rank 1) and d (rank 4); 3 relevant in all.
    assert metrics["map"] == pytest.approx((1 / 1 + 2 / 4) / 3)
    assert metrics["mrr"] == 1.0
    assert metrics["precision@3"] == pytest.approx(1 / 3)
    assert metrics["recall@3"] == pytest.approx(1 / 3)
    assert metrics["hit@3"] == 1.0
    assert [h["relevant"] for h in result["hits"]] == [True, False, False, True]
    assert result["usage"]["evaluation_input_tokens"] == 40


def test_ranx_and_ir_measures_agree_on_random_runs():
    import ir_measures
    from ir_measures import AP, RR, P, nDCG

    rng = np.random.default_rng(0)
    graded, binary, run = {}, {}, {}
    for q in range(20):
        docs = [f"d{i}" for i in range(15)]
        grades = rng.integers(0, 4, len(docs))
        graded[f"q{q}"] = {d: int(g) for d, g in zip(docs, grades, strict=True)}
        binary[f"q{q}"] = {d: int(g >= 2) for d, g in zip(docs, grades, strict=True)}
        run[f"q{q}"] = {d: float(s) for d, s in zip(docs, rng.random(len(docs)), strict=True)}
    ranx = _ranx_metrics(graded, binary, run, 10, recall=False)
    measures = [nDCG(gains={0: 0, 1: 1, 2: 3, 3: 7}) @ 10, AP, RR, P @ 10]
    by_query = {
        (m.query_id, str(m.measure)): m.value
        for m in ir_measures.iter_calc(measures[:1], graded, run)
    }
    by_query.update(
        {
            (m.query_id, str(m.measure)): m.value
            for m in ir_measures.iter_calc(measures[1:], binary, run)
        }
    )
    names = {"ndcg@10": str(measures[0]), "map": "AP", "mrr": "RR", "precision@10": "P@10"}
    for ours, theirs in names.items():
        for qid in run:
            assert ranx[ours][qid] == pytest.approx(by_query[(qid, theirs)], abs=1e-9), (ours, qid)


def _tied_runs(seed: int) -> tuple[dict, dict, dict]:
    """Graded and binary qrels and a run whose scores tie often (one decimal)."""
    rng = np.random.default_rng(seed)
    graded, binary, run = {}, {}, {}
    for q in range(30):
        docs = [f"d{i:02d}" for i in rng.permutation(14)]
        grades = rng.integers(0, 4, len(docs))
        graded[f"q{q}"] = {d: int(g) for d, g in zip(docs, grades, strict=True)}
        binary[f"q{q}"] = {d: int(g >= 2) for d, g in zip(docs, grades, strict=True)}
        scores = np.round(rng.random(len(docs)), 1)
        run[f"q{q}"] = {d: float(s) for d, s in zip(docs, scores, strict=True)}
    return graded, binary, run


def test_every_metric_equals_trec_eval_on_runs_with_ties():
    """trec_eval's own C code (pytrec_eval) on runs whose scores tie: one tie rule everywhere."""
    import pytrec_eval

    graded, binary, run = _tied_runs(1)
    assert sum(len(set(s.values())) < len(s) for s in run.values()) == len(run)  # ties in all
    ours = _ranx_metrics(graded, binary, run, 10, recall=True)
    gains = {q: {d: 2**g - 1 for d, g in docs.items()} for q, docs in graded.items()}
    theirs = pytrec_eval.RelevanceEvaluator(gains, {"ndcg_cut.10"}).evaluate(run)
    binary_measures = {"map", "recip_rank", "P.10", "success.10", "recall.10"}
    for qid, values in (
        pytrec_eval.RelevanceEvaluator(binary, binary_measures).evaluate(run).items()
    ):
        theirs[qid].update(values)
    names = {
        "ndcg@10": "ndcg_cut_10",
        "map": "map",
        "mrr": "recip_rank",
        "precision@10": "P_10",
        "hit@10": "success_10",
        "recall@10": "recall_10",
    }
    for metric, trec_name in names.items():
        for qid in run:
            assert ours[metric][qid] == pytest.approx(theirs[qid][trec_name], abs=1e-6), (
                metric,
                qid,
            )


def test_a_hit_list_with_one_id_twice_is_refused():
    hits = [Hit("a", "x"), Hit("b", "y"), Hit("a", "z")]
    with pytest.raises(ValueError, match=r"id 'a' is listed twice \(hits 0 and 2\)"):
        evaluate_query("q", hits, DictLabeler({"a": 3}))


def test_ties_are_broken_by_descending_document_id_as_trec_eval_does():
    from data.beir import ranked

    assert [d for d, _ in ranked({"a": 1.0, "c": 1.0, "b": 2.0, "d": 0.5})] == ["b", "c", "a", "d"]


def test_labels_are_cached_and_reused_across_instances(tmp_path: Path):
    inner = DictLabeler({"a": 3})
    cached = CachedLabeler(inner, tmp_path / "labels.jsonl")
    hits = [Hit("a", "text a"), Hit("b", "text b")]
    first = cached.label("q1", "query", hits)
    cached.label("q1", "query", hits)
    cached.close()
    assert inner.calls == 1
    again = CachedLabeler(
        DictLabeler({}), tmp_path / "labels.jsonl"
    )  # a new process, a blank labeler
    assert again.label("q1", "query", hits) == first and again.inner.calls == 0


def test_bulk_run_compare_and_inferred_qrels(adi_dir: Path, tmp_path: Path):
    from data.candidates import CandidatesConfig, generate_candidates

    generate_candidates(
        CandidatesConfig(
            collection=str(adi_dir), out=str(tmp_path / "c"), retrievers=["bm25"], k=10
        )
    )
    good = read_trec_run(tmp_path / "c" / "bm25.trec")
    worse = {
        q: {d: -s for d, s in docs.items()} for q, docs in good.items()
    }  # the same documents, reversed
    write_trec_run(tmp_path / "worse.trec", worse)
    qrels = adi_dir / "qrels.tsv"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "eval.search",
            "--run",
            str(tmp_path / "c" / "bm25.trec"),
            "--compare",
            str(tmp_path / "worse.trec"),
            "--corpus",
            str(adi_dir),
            "--labeler",
            f"qrels:{qrels}",
            "--out",
            str(tmp_path / "s"),
            "--k",
            "5",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "s" / "metrics.json").read_text())
    assert report["mean"]["bm25"]["ndcg@5"] > report["mean"]["worse"]["ndcg@5"]
    assert "table_ndcg_burges@5" in report["comparison"]
    # The significance table compares the same top-5 metrics that the summary reports.
    for run in ("bm25", "worse"):
        for ours, theirs in (("map", "map"), ("mrr", "mrr"), ("ndcg@5", "ndcg_burges@5")):
            compared = report["comparison"][theirs][run]["scores"][theirs]
            assert compared == pytest.approx(report["mean"][run][ours], abs=1e-9), (run, ours)
    inferred = read_qrels(tmp_path / "s" / "inferred_qrels.txt")
    truth = graded_qrels(read_qrels(qrels), qrels)  # ADI is binary: its 1 is grade 3
    assert any(g == 3 for docs in inferred.values() for g in docs.values())
    assert all(
        grade == truth.get(q, {}).get(d, 0)
        for q, docs in inferred.items()
        for d, grade in docs.items()
    )


def test_system_ranking_agreement_is_perfect_for_identical_labels(adi_dir: Path, tmp_path: Path):
    from data.candidates import CandidatesConfig, generate_candidates
    from eval.ranking_agreement import SystemAgreementConfig, agreement

    generate_candidates(
        CandidatesConfig(
            collection=str(adi_dir), out=str(tmp_path / "c"), retrievers=["bm25"], k=10
        )
    )
    good = read_trec_run(tmp_path / "c" / "bm25.trec")
    runs = [tmp_path / "c" / "bm25.trec"]
    for name, shift in (("shifted", 2), ("reversed", None)):
        other = {}
        for q, docs in good.items():
            order = sorted(docs, key=lambda d: -docs[d])
            order = order[::-1] if shift is None else order[shift:] + order[:shift]
            other[q] = {d: float(len(order) - i) for i, d in enumerate(order)}
        write_trec_run(tmp_path / f"{name}.trec", other)
        runs.append(tmp_path / f"{name}.trec")
    judgments = tmp_path / "j.jsonl"
    qrels = read_qrels(adi_dir / "qrels.tsv")
    lines = [
        {
            "qid": q,
            "query": "x",
            "doc_id": d,
            "text": "t",
            "grade": 3 if qrels.get(q, {}).get(d) else 0,
        }
        for q, docs in good.items()
        for d in docs
    ]
    judgments.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = agreement(
        SystemAgreementConfig(
            runs=[str(r) for r in runs],
            corpus=str(adi_dir),
            labelers=[f"judgments:{judgments}"],
            reference=f"qrels:{adi_dir / 'qrels.tsv'}",
            metric="ndcg@10",
            out=str(tmp_path / "agr"),
        )
    )
    assert result["agreement"][f"judgments:{judgments}"]["kendall_tau"] == pytest.approx(1.0)
    assert result["reference_ranking"][0] == "bm25"


# ---- REST API ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    from fastapi.testclient import TestClient

    from eval.api import create_app

    labeler = DictLabeler({"d1": 3, "d2": 0, "d3": 2})
    with TestClient(create_app(labeler=labeler, token="")) as test_client:
        yield test_client


def request_body(**overrides):
    body = {
        "query": {"inputs": {"text": "what is an axon terminal"}},
        "eval": {"fields": ["title", "text"], "debug": True},
        "hits": [
            {"id": "d1", "fields": {"title": "Axon", "text": "Axon terminals are ..."}},
            {"id": "d2", "fields": {"title": "Paris", "text": "Paris is ..."}},
            {"id": "d3", "fields": {"title": "Synapse", "text": "A synapse ..."}},
        ],
    }
    body.update(overrides)
    return body


def test_rest_eval_search_returns_metrics_hits_usage_and_debug(client):
    response = client.post("/v1/eval/search", json=request_body())
    assert response.status_code == 200, response.text
    data = response.json()
    assert [h["relevant"] for h in data["hits"]] == [True, False, True]
    assert data["hits"][0] == {
        "index": 0,
        "id": "d1",
        "fields": {"title": "Axon", "text": "Axon terminals are ..."},
        "relevant": True,
        "relevance": 4,
        "score": 0.5,
        "grade": 3,
    }
    assert [h["relevance"] for h in data["hits"]] == [4, 1, 3]
    assert data["metrics"]["mrr"] == 1.0 and data["metrics"]["map"] == pytest.approx(
        (1 + 2 / 3) / 2
    )
    assert data["usage"]["evaluation_input_tokens"] == 30
    assert set(data["debug"]) == {"probabilities", "timings_ms", "labeler"}
    assert client.get("/healthz").json()["status"] == "ok"


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (
            {"eval": {"fields": ["text"]}, "hits": [{"id": "d1", "fields": {"text": "t"}}]},
            ["body", "query"],
        ),
        (request_body(hits=[]), ["body", "hits"]),
        (request_body(hits="not a list"), ["body", "hits"]),
        (request_body(query={"inputs": {"text": 5}}), ["body", "query", "inputs", "text"]),
        (request_body(query={"inputs": {"text": ""}}), ["body", "query", "inputs", "text"]),
        (
            request_body(query={"inputs": {"text": " \u200b\ufeff "}}),
            ["body", "query", "inputs", "text"],
        ),
        (
            request_body(hits=[{"id": "d1", "fields": {"title": "t", "text": "x" * 20001}}]),
            ["body", "hits", 0, "fields", "text"],
        ),
        (
            request_body(
                hits=[{"id": str(i), "fields": {"title": "t", "text": "x"}} for i in range(101)]
            ),
            ["body", "hits"],
        ),
        (
            request_body(hits=[{"id": "d1", "fields": {"text": "no title"}}]),
            ["body", "hits", 0, "fields", "title"],
        ),
        (request_body(eval={"fields": ["text"], "debug": "maybe"}), ["body", "eval", "debug"]),
        (
            # Metrics over a list with one id twice would count one document twice.
            request_body(
                hits=[{"id": "d1", "fields": {"title": "t", "text": x}} for x in ("a", "b")]
            ),
            ["body", "hits", 1, "id"],
        ),
    ],
    ids=[
        "missing-query",
        "empty-hits",
        "hits-wrong-type",
        "query-wrong-type",
        "empty-query",
        "invisible-query",
        "oversize-text",
        "too-many-hits",
        "missing-field",
        "debug-wrong-type",
        "duplicated-id",
    ],
)
def test_rest_bad_requests_get_422_with_the_field_path(client, body, path):
    response = client.post("/v1/eval/search", json=body)
    assert response.status_code == 422, response.text
    locations = [error["loc"] for error in response.json()["detail"]]
    assert path in locations, locations


def test_rest_accepts_every_documented_hit_shape(client):
    shapes = [
        {"id": "d1", "fields": {"title": "Axon", "text": "Axon terminals are ..."}},
        {"id": "d1", "title": "Axon", "text": "Axon terminals are ..."},
        {
            "_id": "d1",
            "_score": 12.5,
            "fields": {"title": "Axon", "text": "Axon terminals are ..."},
        },
    ]
    answers = []
    for hit in shapes:
        response = client.post("/v1/eval/search", json=request_body(hits=[hit]))
        assert response.status_code == 200, response.text
        answers.append(response.json()["hits"][0])
    assert answers[0] == answers[1] == answers[2]
    mixed = {"id": "d1", "title": 3, "fields": {"text": "t"}}  # a non-text extra is not a field
    assert client.post("/v1/eval/search", json=request_body(hits=[mixed])).status_code == 422


def test_grader_labels_carry_a_justification_and_the_1_to_4_scale(tiny_grader_dir: Path):
    from eval.labelers import GraderLabeler

    labeler = GraderLabeler(str(tiny_grader_dir))
    labels = labeler.label("q1", "axon", [Hit("a", "axon text"), Hit("b", "other")])
    for label in labels:
        assert f"{label.score:.3f}" in label.justification and "threshold" in label.justification
        assert (label.relevance >= 3) == label.relevant and 1 <= label.relevance <= 4
    assert HitLabel(relevant=False, score=0.1, threshold=0.4).relevance == 1
    assert HitLabel(relevant=False, score=0.3, threshold=0.4).relevance == 2
    assert HitLabel(relevant=True, score=0.5, threshold=0.4).relevance == 3
    assert HitLabel(relevant=True, score=0.9, threshold=0.4).relevance == 4


def test_rest_bearer_token():
    from fastapi.testclient import TestClient

    from eval.api import create_app

    with TestClient(create_app(labeler=DictLabeler({}), token="s3cret")) as secured:
        assert secured.post("/v1/eval/search", json=request_body()).status_code == 401
        ok = secured.post(
            "/v1/eval/search", json=request_body(), headers={"Authorization": "Bearer s3cret"}
        )
        assert ok.status_code == 200


def test_rest_through_a_real_uvicorn_with_a_grader(tiny_grader_dir: Path):
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "GRADER_MODEL": str(tiny_grader_dir), "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "eval.api:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        response = httpx.post(f"{url}/v1/eval/search", json=request_body(), timeout=60)
        assert response.status_code == 200, response.text
        data = response.json()
        assert (
            all(0 <= h["score"] <= 1 for h in data["hits"])
            and data["usage"]["evaluation_input_tokens"] > 0
        )
        assert httpx.post(f"{url}/v1/eval/search", json={"hits": []}, timeout=10).status_code == 422
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_grader_labeler_batches_several_queries(tiny_grader_dir: Path):
    from eval.labelers import GraderLabeler

    labeler = GraderLabeler(str(tiny_grader_dir))
    hits = [Hit("a", "axon text"), Hit("b", "other")]
    batched = labeler.label_many([("q1", "axon", hits), ("q2", "paris", hits[:1])])
    assert [len(x) for x in batched] == [2, 1]
    single = labeler.label("q1", "axon", hits)
    assert [round(x.score, 5) for x in batched[0]] == [round(x.score, 5) for x in single]


def test_qrels_labeler_counts_relevant(adi_dir: Path):
    labeler = QrelsLabeler(str(adi_dir / "qrels.tsv"), label_threshold=1)
    assert labeler.num_relevant("1") == len(read_qrels(adi_dir / "qrels.tsv")["1"])


def test_api_limits_are_create_app_arguments():
    from fastapi.testclient import TestClient

    from eval.api import ApiSettings, create_app

    settings = ApiSettings(model=None, token=None, max_hits=2, max_text_chars=10)
    with TestClient(create_app(labeler=DictLabeler({}), settings=settings)) as client:
        hits = [{"id": str(i), "fields": {"text": "short"}} for i in range(3)]
        too_many = client.post("/v1/eval/search", json=request_body(hits=hits))
        assert too_many.status_code == 422
        assert ["body", "hits"] in [e["loc"] for e in too_many.json()["detail"]]
        long_query = client.post(
            "/v1/eval/search", json=request_body(query={"inputs": {"text": "q" * 11}})
        )
        assert ["body", "query", "inputs", "text"] in [
            e["loc"] for e in long_query.json()["detail"]
        ]
    with pytest.raises(ValueError, match="max_hits"):
        ApiSettings(max_hits=0)


@pytest.mark.parametrize(
    ("variable", "value"), [("GRADER_MAX_HITS", "abc"), ("GRADER_BATCH_WAIT_MS", "soon")]
)
def test_a_bad_environment_variable_is_named(monkeypatch, variable: str, value: str):
    from eval.api import ApiSettings

    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=f"^{variable}: expected .* got '{value}'"):
        ApiSettings()


def test_an_unknown_stat_test_is_refused_before_any_labelling(tmp_path: Path):
    from eval.search import SearchEvalConfig

    with pytest.raises(ValueError, match="stat_test"):
        SearchEvalConfig(stat_test="bogus")  # as a YAML value reaches it
    config = tmp_path / "search.yaml"
    config.write_text("stat_test: bogus\n")
    from data.cli import parse_config

    with pytest.raises((ValueError, SystemExit)):
        parse_config([SearchEvalConfig], ["--config", str(config)])


class PoisonLabeler(DictLabeler):
    """Fails any call that contains the query "poison", like a pair that raises in a batch."""

    def label_many(self, requests):
        if any(query == "poison" for _, query, _ in requests):
            raise RuntimeError("poisoned pair")
        return super().label_many(requests)


def test_one_failing_request_never_fails_the_requests_batched_with_it():
    import asyncio

    from eval.api import MicroBatcher

    async def scenario():
        batcher = MicroBatcher(PoisonLabeler({"a": 3}), wait_ms=50)
        batcher.start()
        hits = [Hit("a", "x")]
        results = await asyncio.gather(
            *(batcher.label(q, hits) for q in ("one", "poison", "two", "three")),
            return_exceptions=True,
        )
        await batcher.stop()
        return results

    results = asyncio.run(scenario())
    assert isinstance(results[1], RuntimeError)
    assert [r[0].grade for i, r in enumerate(results) if i != 1] == [3, 3, 3]


def test_an_over_long_query_is_graded_with_a_warning_not_a_500(tiny_grader_dir: Path):
    from fastapi.testclient import TestClient

    from eval.api import ApiSettings, create_app
    from eval.labelers import GraderLabeler

    settings = ApiSettings(model=None, token=None)
    app = create_app(labeler=GraderLabeler(str(tiny_grader_dir)), settings=settings)
    with TestClient(app) as client:
        long_query = " ".join(["axon terminal synapse"] * 200)
        response = client.post(
            "/v1/eval/search", json=request_body(query={"inputs": {"text": long_query}})
        )
        assert response.status_code == 200, response.text
        assert "cut to fit" in response.json()["warnings"][0]
        normal = client.post("/v1/eval/search", json=request_body())
        assert normal.status_code == 200 and "warnings" not in normal.json()


def test_every_request_has_bounded_work_and_bad_text_is_a_422_not_a_500(client):
    from fastapi.testclient import TestClient

    from eval.api import ApiSettings, create_app

    class Counting(DictLabeler):
        def input_tokens(self, query, hits):
            return 100 * len(hits)

    settings = ApiSettings(model=None, token=None, max_body_bytes=2000, max_request_tokens=250)
    with TestClient(create_app(labeler=Counting({"d1": 3}), settings=settings)) as small:
        big = request_body(hits=[{"id": "d1", "fields": {"text": "x" * 3000}}])
        assert small.post("/v1/eval/search", json=big).status_code == 413
        over = small.post("/v1/eval/search", json=request_body())  # 3 hits x 100 tokens
        assert over.status_code == 422 and "the limit per request is 250" in over.text
        two = request_body(hits=request_body()["hits"][:2])
        assert small.post("/v1/eval/search", json=two).status_code == 200
    surrogate_query = (
        b'{"query": {"inputs": {"text": "axon \\ud800"}}, "hits": [{"id": "d1", '
        b'"fields": {"text": "t"}}]}'
    )
    surrogate_id = b'{"query": {"inputs": {"text": "q"}}, "hits": [{"id": "\\udfff", "fields": {"text": "t"}}]}'
    for raw, where in [(surrogate_query, "text"), (surrogate_id, "id")]:
        response = client.post(
            "/v1/eval/search", content=raw, headers={"content-type": "application/json"}
        )
        assert response.status_code == 422, response.text
        assert where in response.json()["detail"][0]["loc"]
    for body in (
        request_body(eval={"fields": [""]}),
        request_body(hits=[{"id": "d1", "fields": {"": "text"}}], eval={"fields": ["text"]}),
    ):
        assert client.post("/v1/eval/search", json=body).status_code == 422


def test_a_full_queue_answers_503_and_a_gone_caller_is_not_graded():
    import asyncio
    import time

    from fastapi.testclient import TestClient

    from eval.api import ApiSettings, MicroBatcher, QueueFull, create_app

    class Slow(DictLabeler):
        def label_many(self, requests):
            time.sleep(0.2)
            return super().label_many(requests)

    async def scenario():
        labeler = Slow({"a": 3})
        batcher = MicroBatcher(labeler, wait_ms=1, max_queued=2)
        batcher.start()
        first = asyncio.ensure_future(batcher.label("one", [Hit("a", "x")]))
        await asyncio.sleep(0.05)  # "one" is being labelled
        second = asyncio.ensure_future(batcher.label("two", [Hit("a", "x")]))
        await asyncio.sleep(0)
        with pytest.raises(QueueFull):
            await batcher.label("three", [Hit("a", "x")])
        second.cancel()  # its caller went away while it waited
        assert (await first)[0].grade == 3
        await asyncio.sleep(0.3)
        await batcher.stop()
        return labeler.calls, batcher.dropped

    calls, dropped = asyncio.run(scenario())
    assert (calls, dropped) == (1, 1)

    app = create_app(labeler=DictLabeler({}), settings=ApiSettings(model=None, token=None))
    with TestClient(app) as full:

        async def refuse(query, hits):
            raise QueueFull("busy")

        full.app.state.batcher.label = refuse
        response = full.post("/v1/eval/search", json=request_body())
        assert response.status_code == 503 and response.headers["retry-after"] == "1"


def test_the_module_level_app_is_built_once(monkeypatch):
    import eval.api

    monkeypatch.setattr(eval.api, "_app", None)
    assert eval.api.app is eval.api.app


def test_a_chunked_body_over_the_limit_is_cut_at_the_limit():
    from fastapi.testclient import TestClient

    from eval.api import ApiSettings, create_app

    labeler = DictLabeler({})
    app = create_app(
        labeler=labeler, settings=ApiSettings(model=None, token=None, max_body_bytes=1000)
    )
    body = json.dumps(request_body(hits=[{"id": "d1", "text": "x" * 5000}])).encode()

    def chunks():  # no Content-Length: the size is known only as it arrives
        for start in range(0, len(body), 256):
            yield body[start : start + 256]

    with TestClient(app) as client:
        response = client.post(
            "/v1/eval/search", content=chunks(), headers={"content-type": "application/json"}
        )
    assert response.status_code == 413 and "limit is 1000" in response.json()["detail"]
    assert labeler.calls == 1  # the start-up warm-up only


def test_a_request_that_would_wait_too_long_is_shed_with_a_retry_after():
    import asyncio

    from eval.api import MicroBatcher, QueueFull

    async def scenario():
        batcher = MicroBatcher(DictLabeler({}), max_queued=10_000, max_wait_s=20)
        batcher.rate.add(100, 10.0)  # 10 pairs/s, as measured on earlier batches
        batcher.pending = 250  # 25 s of grading queued
        with pytest.raises(
            QueueFull, match="about 26 s of grading is queued; the limit is 20 s"
        ) as refused:
            # Never started: a request let through would wait forever, so the wait is bounded.
            await asyncio.wait_for(batcher.label("q", [Hit(str(i), "x") for i in range(10)]), 5)
        return refused.value.retry_after, batcher.expected_wait(0)

    retry_after, queued = asyncio.run(scenario())
    assert retry_after == 26 and queued == pytest.approx(25.0)


def test_a_caller_who_gives_up_is_not_graded_behind_the_real_middleware_stack():
    """Through uvicorn and the body-limit middleware: a request whose client disconnects while
    it waits behind another is dropped before grading (the old middleware hid the disconnect, so
    abandoned requests were graded and made the next caller wait)."""
    import threading

    import httpx

    from eval.api import ApiSettings, create_app
    from eval.bench.api_load import Server

    release = threading.Event()

    class BlockingLabeler(DictLabeler):
        def label(self, qid, query, hits):
            if query != "warm up":
                release.wait(10)  # the first request holds the grader
            return super().label(qid, query, hits)

    labeler = BlockingLabeler({"d1": 3})
    app = create_app(labeler=labeler, settings=ApiSettings(model=None, token=None))
    with Server(app=app) as server:
        url = f"{server.url}/v1/eval/search"
        holder = threading.Thread(
            target=lambda: httpx.post(url, json=request_body(), timeout=30), daemon=True
        )
        holder.start()
        time.sleep(0.5)
        with pytest.raises(httpx.TimeoutException):  # gives up while queued behind the first
            httpx.post(url, json=request_body(query={"inputs": {"text": "other"}}), timeout=0.7)
        time.sleep(0.6)  # the server notices the disconnect within its 0.25 s polls
        release.set()
        holder.join(10)
        batcher = server.app.state.batcher
        deadline = time.time() + 5
        while batcher.dropped == 0 and time.time() < deadline:
            time.sleep(0.05)
    assert batcher.dropped == 1
    assert labeler.calls == 2  # the warm-up and the first request; the abandoned one never


# ---- Human judgments (issue 42, round 3) -------------------------------------------------------


def _adi_run(adi_dir: Path, path: Path, depth: int, seed: int = 0) -> dict:
    """A run over every ADI query: ``depth`` documents per query, in a seeded random order."""
    from data.beir import read_corpus, read_queries

    docs = sorted(read_corpus(adi_dir / "corpus.jsonl"))
    rng = np.random.default_rng(seed)
    run = {
        q: {d: float(depth - i) for i, d in enumerate(rng.choice(docs, depth, replace=False))}
        for q in sorted(read_queries(adi_dir / "queries.jsonl"))
    }
    write_trec_run(path, run)
    return run


def _search(adi_dir: Path, tmp_path: Path, run: Path, *extra: str) -> dict:
    from eval import search as search_module

    search_module.main(
        [
            "--run", str(run), "--corpus", str(adi_dir), "--labeler",
            f"qrels:{adi_dir / 'qrels.tsv'}", "--out", str(tmp_path / "s"), "--report", "false",
            *extra,
        ]
    )  # fmt: skip
    return json.loads((tmp_path / "s" / "metrics.json").read_text())


def test_judged_hits_outside_the_top_k_are_counted_and_named_as_ignored(
    adi_dir: Path, tmp_path: Path, caplog, capsys
):
    run = _adi_run(adi_dir, tmp_path / "run.trec", depth=10)
    judged = [(q, d) for q, docs in run.items() for d in list(docs)[:3]]  # ranks 1-3
    rows = [
        {"qid": q, "query": "q", "doc_id": d, "text": "t", "label": i % 2}
        for i, (q, d) in enumerate(judged)
    ]
    (tmp_path / "hits.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = _search(adi_dir, tmp_path, tmp_path / "run.trec", "--k", "2", "--human_pairs",
                     str(tmp_path / "hits.jsonl"))  # fmt: skip
    ppi = report["ppi"]
    assert ppi["judged_pairs"] == 105 and ppi["judged_pairs_used"] == {"run": 70}
    assert ppi["pairs"]["run"]["relevant share"]["ppi"]["n"] == 70
    assert "35 of the 105 judged hits are not in run's top 2 and are ignored" in caplog.text
    assert "105 sampled hits (in each run's top 2, the ones used: run 70" in capsys.readouterr().out


def test_a_human_file_giving_a_pair_twice_keeps_the_last_line_with_a_warning(
    tmp_path: Path, caplog
):
    from eval.search import human_qrels, read_human_pairs

    rows = [
        {"qid": "q1", "query": "q", "doc_id": "d1", "text": "t", "grade": grade} for grade in (0, 3)
    ] + [{"qid": "q1", "query": "q", "doc_id": "d2", "text": "t", "grade": 2}]
    path = tmp_path / "human.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert human_qrels(str(path)) == {"q1": {"d1": 3, "d2": 2}}  # the last line, not the lower
    assert read_human_pairs(str(path)) == {("q1", "d1"): 1, ("q1", "d2"): 1}
    assert "human.jsonl: 1 pair(s) given twice with different verdicts" in caplog.text
    (tmp_path / "human.qrels").write_text("q1 0 d1 3\nq1 0 d1 0\n")
    assert human_qrels(str(tmp_path / "human.qrels")) == {"q1": {"d1": 0}}
    assert "human.qrels: 1 pair(s) given twice" in caplog.text


def _graded_adi_run(adi_dir: Path, path: Path) -> tuple[dict, dict[str, int]]:
    """A run over every ADI query with one of its relevant documents at rank 1 to 5 (the
    query's place in id order, mod 5) among non-relevant ones, so that the labeler's NDCG@5
    spreads; and that rank of each query."""
    from data.beir import read_corpus

    qrels = read_qrels(adi_dir / "qrels.tsv")
    docs = sorted(read_corpus(adi_dir / "corpus.jsonl"))
    run, ranks = {}, {}
    for i, q in enumerate(sorted(qrels)):
        ranking = [d for d in docs if d not in qrels[q]][:9]
        ranks[q] = i % 5 + 1
        ranking.insert(ranks[q] - 1, sorted(qrels[q])[0])
        run[q] = {d: float(10 - r) for r, d in enumerate(ranking)}
    write_trec_run(path, run)
    return run, ranks


def test_a_judged_subset_unlike_a_random_draw_is_warned_about_and_the_draw_recorded(
    adi_dir: Path, tmp_path: Path, caplog
):
    from eval.design import write_design
    from eval.ppi import DrawConfig, draw

    _, ranks = _graded_adi_run(adi_dir, tmp_path / "run.trec")
    qrels = read_qrels(adi_dir / "qrels.tsv")
    best = sorted(ranks, key=lambda q: (ranks[q], q))[:10]  # the labeler's 10 best NDCG@5
    design = draw(DrawConfig(run=str(tmp_path / "run.trec"), n=10, seed=0))
    write_design(tmp_path / "draw.json", design)
    for name, judged in (("best", best), ("random", design.drawn)):
        (tmp_path / f"{name}.qrels").write_text(
            "".join(f"{q} 0 {d} 3\n" for q in judged for d in qrels[q])
        )
    caplog.clear()
    report = _search(adi_dir, tmp_path, tmp_path / "run.trec", "--k", "5", "--human",
                     str(tmp_path / "best.qrels"))  # fmt: skip
    sample = report["ppi"]["sample"]
    assert sample["drawn_by"] is None and "unknown" in sample["design"]
    assert sample["check"]["p"] < 0.01 and not sample["check"]["random_plausible"]
    assert "PPI++ is valid only for a random sample of the queries" in caplog.text
    caplog.clear()
    report = _search(adi_dir, tmp_path, tmp_path / "run.trec", "--k", "5", "--human",
                     str(tmp_path / "random.qrels"))  # fmt: skip
    assert report["ppi"]["sample"]["check"]["random_plausible"]
    assert "valid only for a random sample" not in caplog.text
    report = _search(adi_dir, tmp_path, tmp_path / "run.trec", "--k", "5", "--human",
                     str(tmp_path / "random.qrels"), "--draw", str(tmp_path / "draw.json"))  # fmt: skip
    sample = report["ppi"]["sample"]
    assert sample["drawn_by"] == "eval.ppi" and sample["check"] is None
    assert sample["design"] == "uniform draw of 10 of 35 queries" and sample["seed"] == 0


def test_human_qrels_off_the_0_to_3_scale_are_refused_not_taken_as_gains(tmp_path: Path):
    from eval.search import human_qrels

    path = tmp_path / "human.qrels"
    path.write_text("q1 0 d1 4\nq1 0 d2 2\nq2 0 d3 -1\n")
    with pytest.raises(ValueError, match=r"human: .*human.qrels: grade 4 of q1/d1 is off the 0-3 "
                       r"scale \(2 such pair\(s\)\); map the grades onto 0-3 first"):  # fmt: skip
        human_qrels(str(path))
    path.write_text("q1 0 d1 3\nq1 0 d2 0\n")
    assert human_qrels(str(path)) == {"q1": {"d1": 3, "d2": 0}}
