"""The REST API: each error message says what is wrong with the request, and shedding holds its wait."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from measure.labelers import Hit
from tests.doubles import DictLabeler, PoisonLabeler

REPO = Path(__file__).resolve().parents[2]


def detail(response) -> list[dict]:
    assert response.status_code == 422, response.text
    return response.json()["detail"]


def test_a_list_valued_hit_field_is_named_as_such_not_as_an_extra_input(client):
    hit = {"id": "d1", "title": "Axon", "text": ["Axon terminals", "are"]}
    (error,) = detail(client.post("/v1/eval/search", json=request_body(hits=[hit])))
    assert error["loc"] == ["body", "hits", 0]
    assert error["msg"].startswith("'text': ") and "must be strings, got a list" in error["msg"]
    assert "Extra inputs" not in error["msg"]


def test_a_body_that_is_not_a_json_object_says_why(client):
    body = json.dumps(request_body())
    (error,) = detail(
        client.post("/v1/eval/search", content=body, headers={"content-type": "text/plain"})
    )
    assert "Content-Type: application/json" in error["msg"] and "text/plain" in error["msg"]
    assert "valid dictionary" not in error["msg"]
    (error,) = detail(client.post("/v1/eval/search", json=[request_body()]))
    assert "must be a JSON object" in error["msg"] and "not a list" in error["msg"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_batcher(clock: FakeClock, **settings):
    from eval.api import MicroBatcher

    return MicroBatcher(DictLabeler({"a": 3}), clock=clock, **{"max_queued": 10_000, **settings})


def test_the_rate_follows_a_slowdown_within_one_long_batch():
    """The old estimate (0.7 old + 0.3 new per batch) said 8.5 pairs/s after the machine had
    halved the grader's speed for 20 s, and admitted requests that then waited 54 s for 30."""
    from eval.api import QueueFull

    batcher = make_batcher(FakeClock(), max_wait_s=30)
    for _ in range(20):
        batcher.rate.add(20, 2.0)  # 10 pairs/s
    batcher.rate.add(100, 20.0)  # then 5 pairs/s for 20 s
    assert batcher.current_rate() == pytest.approx(5.13, abs=0.01)
    batcher.pending = 170
    with pytest.raises(QueueFull, match="about 35 s of grading is queued; the limit is 30 s"):
        batcher.admit(10)  # 36 s at 5 pairs/s


def test_a_batch_running_long_lowers_the_rate_at_once():
    from eval.api import QueueFull

    clock = FakeClock()
    batcher = make_batcher(clock, max_wait_s=30)
    batcher.rate.add(100, 10.0)  # 10 pairs/s
    batcher.in_flight = (50, clock.now)  # a batch of 50 pairs started: 5 s expected
    batcher.pending = 60  # that batch and 10 pairs queued behind it
    clock.now += 4
    assert batcher.current_rate() == pytest.approx(10.0)
    clock.now += 16  # 20 s into the batch: at most 2.5 pairs/s
    assert batcher.current_rate() == pytest.approx(2.5)
    batcher.admit(10)  # 70 pairs, 28 s
    with pytest.raises(QueueFull, match="about 32 s"):
        batcher.admit(10)  # 80 pairs, 32 s (8 s at the earlier rate)
    assert batcher.pending == 70


class ClockedLabeler(DictLabeler):
    """Grades ``per_pair`` seconds a pair on a fake clock."""

    def __init__(self, clock: FakeClock, per_pair: float) -> None:
        super().__init__({"a": 3})
        self.clock, self.per_pair = clock, per_pair

    def label_many(self, requests):
        self.clock.now += self.per_pair * sum(len(hits) for _, _, hits in requests)
        return super().label_many(requests)


def test_the_wait_limit_holds_for_a_first_request_alone():
    """With a 2 s wait limit a 100-hit request was admitted because nothing was queued, and
    answered after 27.7 s: its cost is now estimated from the rate measured at warm-up."""
    import asyncio

    from eval.api import MicroBatcher, QueueFull

    clock = FakeClock()
    batcher = MicroBatcher(ClockedLabeler(clock, 0.277), clock=clock, max_wait_s=2)
    asyncio.run(batcher.warm_up())
    assert batcher.current_rate() == pytest.approx(1 / 0.277)
    with pytest.raises(QueueFull, match=r"100 hits would take about 27.7 s") as refused:
        batcher.admit(100)
    assert "as measured); the wait limit is 2 s: send at most 7 hits per request" in str(
        refused.value
    )
    assert refused.value.retry_after == 28 and batcher.pending == 0
    batcher.admit(7)  # 1.94 s
    assert batcher.pending == 7


def test_before_any_measurement_a_conservative_rate_is_assumed():
    from eval.api import QueueFull
    from eval.api.batcher import ASSUMED_PAIRS_PER_S

    assert ASSUMED_PAIRS_PER_S <= 1.0
    batcher = make_batcher(FakeClock(), max_wait_s=30)
    with pytest.raises(QueueFull, match=r"31 hits would take about 31.0 s .*assumed until a batch"):
        batcher.admit(31)
    batcher.admit(20)
    with pytest.raises(QueueFull, match="about 32 s of grading is queued"):
        batcher.admit(12)
    batcher.admit(10)
    tiny = make_batcher(FakeClock(), max_wait_s=0.5)
    with pytest.raises(QueueFull, match="not even one hit fits: raise GRADER_MAX_WAIT_S"):
        tiny.admit(1)


def test_a_batch_takes_no_more_pairs_than_its_first_request_has_time_left_for():
    """Two requests admitted together, each within 30 s; their batch forms 15 s later (behind
    another): graded together they would end at 40 s, so the second waits for the next batch."""
    import asyncio

    clock = FakeClock()

    async def scenario():
        batcher = make_batcher(clock, max_wait_s=30, wait_ms=200)
        batcher.rate.add(100, 10.0)  # 10 pairs/s
        first = asyncio.ensure_future(batcher.label("a", [Hit("a", "x")] * 100))  # 10 s
        second = asyncio.ensure_future(batcher.label("b", [Hit("a", "x")] * 150))  # 25 s
        await asyncio.sleep(0)
        clock.now += 15
        batches = [await batcher._next_jobs(), await batcher._next_jobs()]
        first.cancel()
        second.cancel()
        return [[job.query for job in jobs] for jobs in batches]

    assert asyncio.run(scenario()) == [["a"], ["b"]]


def test_a_caller_gone_mid_batch_still_counts_until_the_batch_ends():
    import asyncio
    import threading

    release = threading.Event()

    class Blocking(DictLabeler):
        def label_many(self, requests):
            release.wait(5)
            return super().label_many(requests)

    async def until(condition) -> None:
        for _ in range(500):
            if condition():
                return
            await asyncio.sleep(0.01)

    async def scenario():
        from eval.api import MicroBatcher

        batcher = MicroBatcher(Blocking({"a": 3}), wait_ms=1)
        batcher.start()
        graded = asyncio.ensure_future(batcher.label("one", [Hit("a", "x")]))
        await until(lambda: batcher.in_flight is not None)  # "one" is being graded
        queued = asyncio.ensure_future(batcher.label("two", [Hit("a", "x")] * 2))
        await asyncio.sleep(0)
        counts = [batcher.pending]
        graded.cancel()
        queued.cancel()
        await asyncio.sleep(0.01)
        counts.append(batcher.pending)  # "two" costs nothing now; "one" is still being graded
        release.set()
        await until(lambda: batcher.pending == 0)
        counts.append(batcher.pending)
        await batcher.stop()
        return counts

    assert asyncio.run(scenario()) == [3, 1, 0]


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


def test_rest_bearer_token():
    from fastapi.testclient import TestClient

    from eval.api import create_app

    with TestClient(create_app(labeler=DictLabeler({}), token="s3cret")) as secured:
        assert secured.post("/v1/eval/search", json=request_body()).status_code == 401
        ok = secured.post(
            "/v1/eval/search", json=request_body(), headers={"Authorization": "Bearer s3cret"}
        )
        assert ok.status_code == 200


@pytest.mark.slow
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
    from measure.labelers import GraderLabeler

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
    assert labeler.calls == 2  # the start-up warm-up only (a first call, then the timed probe)


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


@pytest.mark.slow
def test_a_caller_who_gives_up_is_not_graded_behind_the_real_middleware_stack():
    """Through uvicorn and the body-limit middleware: a request whose client disconnects while
    it waits behind another is dropped before grading (the old middleware hid the disconnect, so
    abandoned requests were graded and made the next caller wait)."""
    import threading

    import httpx

    from eval.api import ApiSettings, create_app
    from support.api_server import Server

    release = threading.Event()

    class BlockingLabeler(DictLabeler):
        def label(self, qid, query, hits):
            if query != "warm up":
                release.wait(10)  # the first request holds the grader
            return super().label(qid, query, hits)

    labeler = BlockingLabeler({"d1": 3})
    app = create_app(labeler=labeler, settings=ApiSettings(model=None, token=None))
    with Server(app) as server:
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
    assert labeler.calls == 3  # the warm-up's two and the first request; the abandoned one never


def test_a_request_that_cannot_be_answered_within_the_wait_is_refused_through_the_api():
    """The reported case end to end: a grader measured at warm-up, a 2 s wait limit and an empty
    queue; a request longer than the limit gets 503 and Retry-After at once, a short one its
    answer."""
    from fastapi.testclient import TestClient

    from eval.api import ApiSettings, create_app

    class Slow(DictLabeler):
        def label_many(self, requests):
            time.sleep(0.05 * sum(len(hits) for _, _, hits in requests))
            return super().label_many(requests)

    labeler = Slow({"d1": 3})
    settings = ApiSettings(model=None, token=None, max_wait_s=1)
    hits = [{"id": f"d{i}", "text": "an axon"} for i in range(40)]
    with TestClient(create_app(labeler=labeler, settings=settings)) as client:
        started = time.perf_counter()
        text_only = {"fields": ["text"]}
        refused = client.post("/v1/eval/search", json=request_body(hits=hits, eval=text_only))
        refused_after = time.perf_counter() - started
        answered = client.post("/v1/eval/search", json=request_body(hits=hits[:5], eval=text_only))
    assert refused.status_code == 503 and int(refused.headers["retry-after"]) >= 2
    assert "40 hits would take about" in refused.json()["detail"] and refused_after < 1
    assert answered.status_code == 200 and labeler.calls == 3


def test_a_body_that_is_not_utf8_is_named_as_such_with_where(client):
    """A Latin-1 body got FastAPI's generic 400 ("There was an error parsing the body")."""
    body = json.dumps(request_body(query={"inputs": {"text": "café"}}), ensure_ascii=False)
    response = client.post(
        "/v1/eval/search",
        content=body.encode("latin-1"),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    detail = response.json()["detail"]
    offset = body.encode("latin-1").index(b"\xe9")
    assert detail.startswith("the body is not UTF-8: byte 0xe9 at offset " + str(offset))
    assert "(line 1, column " in detail and "caf" in detail
    # Other HTTP errors keep their answers (the bearer token's 401 here).
    assert client.post("/v1/eval/search", json=request_body()).status_code == 200


@pytest.mark.parametrize("damage", ["cut short", "a future version"])
def test_a_grader_that_cannot_be_read_is_one_line_before_the_server_starts(
    tiny_grader_dir: Path, tmp_path: Path, capsys, monkeypatch, damage: str
):
    """`eval.api` with a damaged or too new grader_config.json started the server, whose
    start-up ended in a traceback (exit 3); `eval.search` says it in one line, exit 2."""
    import shutil

    import uvicorn

    from core.cli import run_main
    from eval.api.__main__ import main

    grader = tmp_path / "grader"
    shutil.copytree(tiny_grader_dir, grader)
    config = grader / "grader_config.json"
    if damage == "cut short":
        config.write_text(config.read_text()[:200])
        expected = f"error: {config}: not JSON ("
    else:
        config.write_text(json.dumps({**json.loads(config.read_text()), "format_version": 99}))
        expected = f"error: {config}: format version 99 is newer than this release reads (1)"
    monkeypatch.setattr(uvicorn, "run", lambda *_, **__: pytest.fail("the server started"))
    with pytest.raises(SystemExit) as exit_info:
        run_main(main, ["--model", str(grader), "--port", "0"])
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(expected)


def test_a_body_nested_too_deeply_says_so_and_where(client):
    """A 100,000-deep body got FastAPI's generic 400, "There was an error parsing the body"."""
    prefix = '{"query": {"inputs": {"text": "a \\"[[[[\\" in a string"}},\n "hits": '
    body = prefix + "[" * 100_000 + "]" * 100_000 + "}"
    response = client.post(
        "/v1/eval/search", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    past = len(prefix) + 63  # the hits' first "[" opens level 2, its 64th level 65
    assert response.json()["detail"] == (
        "the body is nested too deeply to parse: its arrays and objects nest more than 64 levels "
        f"deep from offset {past} (line 2, column {past - prefix.index(chr(10))}) on (a search "
        "request nests 4)"
    )


def test_a_body_that_is_not_json_says_why_and_where(client):
    body = '{"query": {"inputs": {"text": "q"}},\n "hits": [1,]}'
    (error,) = detail(
        client.post("/v1/eval/search", content=body, headers={"content-type": "application/json"})
    )
    assert error["loc"] == ["body", body.index("]")]
    assert (
        error["msg"]
        == f"not valid JSON: Expecting value at offset {body.index(']')} (line 2, column 13)"
    )
