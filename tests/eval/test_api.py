"""The REST API: each error message says what is wrong with the request, and shedding holds its wait."""

from __future__ import annotations

import json

import pytest

from eval.labelers import Hit
from tests.eval.test_search import DictLabeler, request_body


@pytest.fixture(scope="module")
def client():
    from fastapi.testclient import TestClient

    from eval.api import create_app

    with TestClient(create_app(labeler=DictLabeler({"d1": 3}), token="")) as test_client:
        yield test_client


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


# ---- Shedding holds GRADER_MAX_WAIT_S (issue 42, item 15) -------------------------------------


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


def test_before_any_batch_is_graded_one_batch_of_pairs_is_admitted():
    from eval.api import QueueFull

    batcher = make_batcher(FakeClock(), max_pairs=32)
    batcher.admit(20)
    batcher.admit(12)
    with pytest.raises(QueueFull, match="not measured yet and 32 pairs are waiting"):
        batcher.admit(1)


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
