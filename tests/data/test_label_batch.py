"""``data.label --batch true``: the Batch API (against the fake provider) and vLLM's run_batch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import data.judges.batch as batch_module
from core.io import read_records
from core.records import Judgment
from data.judges.backends import ChatJudge
from data.label import LabelConfig, batch_record_path, label
from support.fake_openai import FakeOpenAI
from tests.data.test_label import openai_judge, write_pairs

FAST = {"batch": True, "batch_poll_seconds": 0.0}


def judgments(path: Path) -> dict[str, Judgment]:
    return {j.doc_id: j for j in read_records(path, Judgment)}


def batch_lines(server: FakeOpenAI) -> list[dict]:
    """Every request line uploaded for a batch."""
    return [
        json.loads(line)
        for data in server.files.values()
        for line in data.decode().splitlines()
        if '"method"' in line
    ]


def test_batch_requests_are_the_synchronous_requests_and_results_become_the_same_judgments(
    tmp_path: Path,
):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 6)
    with FakeOpenAI() as server:
        sync = label(
            LabelConfig(pairs=str(pairs), out=str(tmp_path / "sync.jsonl")),
            openai_judge(server, prompt="binary"),
        )
        sync_bodies = sorted(json.dumps(b, sort_keys=True) for b in server.bodies)
        server.bodies.clear()
        summary = label(
            LabelConfig(pairs=str(pairs), out=str(tmp_path / "batch.jsonl")),
            openai_judge(server, prompt="binary", **FAST),
        )
        lines = batch_lines(server)
    # The same request bodies (log-probabilities asked for a direct prompt), one line per pair.
    assert sorted(json.dumps(line["body"], sort_keys=True) for line in lines) == sync_bodies
    assert all(line["url"] == "/v1/chat/completions" for line in lines)
    by_sync, by_batch = judgments(tmp_path / "sync.jsonl"), judgments(tmp_path / "batch.jsonl")
    assert {d: (j.label, j.p_relevant) for d, j in by_batch.items()} == {
        d: (j.label, j.p_relevant) for d, j in by_sync.items()
    }
    assert all(j.judge.backend == "openai-batch" for j in by_batch.values())
    # Billed at the batch price: half of the synchronous estimate for the same tokens.
    assert summary["estimated_cost"] == pytest.approx(sync["estimated_cost"] / 2)
    assert summary["batches"] == {"batches": 1, "rounds": 1}


def test_a_reply_that_is_no_answer_is_asked_again_in_a_later_batch_then_becomes_an_error(
    tmp_path: Path,
):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok", "garbage-once", "garbage", "500-twice"])
    out = tmp_path / "j.jsonl"
    with FakeOpenAI() as server:
        summary = label(
            LabelConfig(pairs=str(pairs), out=str(out)),
            openai_judge(server, max_retries=0, parse_retries=1, **FAST),
        )
    found = judgments(out)
    assert found["d0"].error is None and found["d1"].error is None
    assert "unanswered after 2 batch attempt(s)" in found["d2"].error
    assert "request failed (500)" in found["d3"].error  # failed twice: the retries are spent
    assert summary["batches"]["rounds"] == 2 and server.requests["d2"] == 2


def test_unanswered_pairs_can_be_asked_synchronously_instead(tmp_path: Path):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok", "garbage-once"])
    out = tmp_path / "j.jsonl"
    with FakeOpenAI() as server:
        label(
            LabelConfig(pairs=str(pairs), out=str(out)),
            openai_judge(server, batch_retry="sync", **FAST),
        )
    found = judgments(out)
    assert found["d1"].error is None and found["d1"].judge.backend == "openai"
    assert found["d0"].judge.backend == "openai-batch"


def test_requests_are_split_at_the_providers_limits(tmp_path: Path):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 5)
    with FakeOpenAI() as server:
        label(
            LabelConfig(pairs=str(pairs), out=str(tmp_path / "j.jsonl")),
            openai_judge(server, batch_max_requests=2, **FAST),
        )
        assert len(server.batches) == 3
    record = json.loads(batch_record_path(tmp_path / "j.jsonl").read_text())
    assert [b["requests"] for b in record["batches"]] == [2, 2, 1]


def test_a_kill_between_submit_and_download_polls_instead_of_paying_again(
    tmp_path: Path, monkeypatch
):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 4)
    out = tmp_path / "j.jsonl"
    with FakeOpenAI() as server:
        server.batch_polls = 3

        real_wait = batch_module.BatchJudge.wait

        def killed(self):
            if self.state.in_flight():
                raise KeyboardInterrupt  # the command dies while the batch runs
            real_wait(self)

        with monkeypatch.context() as patch:
            patch.setattr(batch_module.BatchJudge, "wait", killed)
            with pytest.raises(KeyboardInterrupt):
                label(LabelConfig(pairs=str(pairs), out=str(out)), openai_judge(server, **FAST))
        assert len(server.batches) == 1 and not out.exists()
        label(LabelConfig(pairs=str(pairs), out=str(out)), openai_judge(server, **FAST))
        assert len(server.batches) == 1  # polled, not submitted again
        assert sum(server.requests.values()) == 4
        # A third run finds every pair in the cache and sends nothing.
        summary = label(LabelConfig(pairs=str(pairs), out=str(out)), openai_judge(server, **FAST))
    assert summary["cached"] == 4 and len(judgments(out)) == 4


def test_a_kill_between_upload_and_create_finds_the_batch_it_made(tmp_path: Path, monkeypatch):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 2)
    out = tmp_path / "j.jsonl"
    with FakeOpenAI() as server:
        real_save = batch_module.BatchState.save
        saves = []

        def die_after_the_batch_is_created(self):
            saves.append(1)
            if any(b.id for b in self.batches):  # created at the provider, id not yet recorded
                raise KeyboardInterrupt
            real_save(self)

        with monkeypatch.context() as patch:
            patch.setattr(batch_module.BatchState, "save", die_after_the_batch_is_created)
            with pytest.raises(KeyboardInterrupt):
                label(LabelConfig(pairs=str(pairs), out=str(out)), openai_judge(server, **FAST))
        assert len(server.batches) == 1
        label(LabelConfig(pairs=str(pairs), out=str(out)), openai_judge(server, **FAST))
        assert len(server.batches) == 1 and sum(server.requests.values()) == 2


def test_an_expired_batch_submits_only_what_it_never_ran(tmp_path: Path):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 4)
    out = tmp_path / "j.jsonl"
    with FakeOpenAI() as server:
        server.batch_outcome = "expire_half"
        label(LabelConfig(pairs=str(pairs), out=str(out)), openai_judge(server, **FAST))
        # 2 + 1 + 1: each batch runs half of its lines; every pair asked exactly once.
        assert len(server.batches) == 3
        assert sorted(server.requests.values()) == [1, 1, 1, 1]
    assert all(j.error is None for j in judgments(out).values())


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("forget", "batch batch_1: no longer exists at the provider (404)"),
        ("failed", "failed: the model does not exist (line 1)"),
        ("refuse", "the provider refused (400): Enqueued token limit reached"),
    ],
)
def test_provider_trouble_is_one_line_and_keeps_what_was_paid_for(
    tmp_path: Path, setup: str, message: str
):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 4)
    out = tmp_path / "j.jsonl"
    with FakeOpenAI() as server:
        judge = openai_judge(server, batch_max_requests=2, **FAST)
        if setup == "forget":
            server.batch_polls, server.forget_batches = 2, True
        elif setup == "failed":
            server.batch_outcome = "failed"
        else:
            server.batches_accepted = 1
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            label(LabelConfig(pairs=str(pairs), out=str(out)), judge)
        record = json.loads(batch_record_path(out).read_text())
        if setup == "refuse":
            # The first batch was accepted and is recorded; a re-run polls it and then submits
            # the rest once the provider takes it.
            assert record["batches"][0]["id"] == "batch_1"
            server.batches_accepted = None
            label(LabelConfig(pairs=str(pairs), out=str(out)), judge)
            assert sorted(server.requests.values()) == [1, 1, 1, 1]
            assert len(judgments(out)) == 4


def test_a_result_line_for_no_request_of_the_run_is_named_and_the_rest_kept(tmp_path: Path):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 2)
    out = tmp_path / "j.jsonl"
    with FakeOpenAI() as server:
        label(LabelConfig(pairs=str(pairs), out=str(out)), openai_judge(server, **FAST))
        record_path = batch_record_path(out)
        record = json.loads(record_path.read_text())
        results = record_path.parent / record["batches"][0]["output_file"]
        stranger = json.loads(results.read_text().splitlines()[0])
        stranger["custom_id"] = "f" * 64 + ":0"
        results.write_text(results.read_text() + json.dumps(stranger) + "\n")
        more = write_pairs(tmp_path / "more.jsonl", ["ok"] * 3)  # a third pair to ask
        with pytest.raises(ValueError, match=r"1 result line\(s\) match no request of their batch"):
            label(LabelConfig(pairs=str(more), out=str(out)), openai_judge(server, **FAST))
    cache = [json.loads(line) for line in out.with_suffix(".cache.jsonl").open()]
    assert len(cache) == 3  # the new pair's judgment was kept


def test_a_rerun_on_a_subset_finishes_and_pays_for_nothing_twice(tmp_path: Path):
    """Results of an earlier run's pairs in the batch folder were taken for strays: the run
    stopped without its output and every attempt paid for the failed pairs again."""
    modes = ["ok"] * 17 + ["garbage"] * 3
    pairs = write_pairs(tmp_path / "pairs.jsonl", modes)
    lines = pairs.read_text().splitlines()
    subset = tmp_path / "subset.jsonl"
    subset.write_text("\n".join(lines[:5] + lines[17:]) + "\n")  # 5 answered, the 3 failed
    out = tmp_path / "j.jsonl"
    with FakeOpenAI() as server:
        first = label(LabelConfig(pairs=str(pairs), out=str(out)), openai_judge(server, **FAST))
        assert first["failed"] == 3
        asked = dict(server.requests)
        kept = label(
            LabelConfig(pairs=str(subset), out=str(out), retry_errors=False),
            openai_judge(server, **FAST),
        )
        assert dict(server.requests) == asked  # nothing sent: everything is in the cache
        assert kept["cached"] == 8 and len(judgments(out)) == 8
        # Asking the failed pairs again (--retry_errors, the default) pays for them alone, once.
        again = label(LabelConfig(pairs=str(subset), out=str(out)), openai_judge(server, **FAST))
        assert again["judged_now"] == 3 and again["failed"] == 3
    new_requests = {d: server.requests[d] - asked.get(d, 0) for d in server.requests}
    assert {d for d, n in new_requests.items() if n} == {"d17", "d18", "d19"}
    assert set(judgments(out)) == {f"d{i}" for i in [0, 1, 2, 3, 4, 17, 18, 19]}


def test_a_moved_output_folder_reads_its_batches_where_they_now_are(tmp_path: Path):
    """The record named absolute paths: a folder moved after its batches finished failed with
    a bare [Errno 2] on the old path. It names its files relative to itself now."""
    import shutil

    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 4)
    old = tmp_path / "old" / "j.jsonl"
    with FakeOpenAI() as server:
        label(LabelConfig(pairs=str(pairs), out=str(old)), openai_judge(server, **FAST))
        record = json.loads(batch_record_path(old).read_text())
        assert all(
            not Path(b[name]).is_absolute()
            for b in record["batches"]
            for name in ("requests_file", "output_file")
        )
        shutil.move(tmp_path / "old", tmp_path / "new")
        new = tmp_path / "new" / "j.jsonl"
        new.with_suffix(".cache.jsonl").unlink()  # the results must be read from the batches
        asked = sum(server.requests.values())
        summary = label(LabelConfig(pairs=str(pairs), out=str(new)), openai_judge(server, **FAST))
        assert summary["judged_now"] == 4 and sum(server.requests.values()) == asked
        assert len(judgments(new)) == 4
        # Batch files gone altogether: named in one line, not a bare [Errno 2].
        shutil.rmtree(new.with_suffix(".batches"))
        new.with_suffix(".cache.jsonl").unlink()
        with pytest.raises(ValueError, match=r"j.batches.json: names .* which is not there"):
            label(LabelConfig(pairs=str(pairs), out=str(new)), openai_judge(server, **FAST))


def test_hf_has_no_batch_mode(tmp_path: Path):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"])
    with pytest.raises(ValueError, match="batch: the hf backend has no batch mode"):
        label(
            LabelConfig(pairs=str(pairs), out=str(tmp_path / "j.jsonl")),
            openai_judge(FakeOpenAI(), backend="hf", model="smollm2-135m", batch=True),
        )


def test_vllm_run_batch_reads_the_same_request_file(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(
        batch_module,
        "VLLM_RUN_BATCH",
        [sys.executable, "-m", "support.fake_openai", "run-batch"],
    )
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 4)
    out = tmp_path / "j.jsonl"
    summary = label(
        LabelConfig(pairs=str(pairs), out=str(out)),
        openai_judge(FakeOpenAI(), backend="vllm", base_url=None, prompt="binary", **FAST),
    )
    found = judgments(out)
    assert [found[f"d{i}"].label for i in range(4)] == [0, 1, 0, 1]
    assert all(j.judge.backend == "vllm-batch" and j.p_relevant is not None for j in found.values())
    assert summary["judged_now"] == 4


def test_the_batch_request_is_the_backends_request(tmp_path: Path):
    """One builder for the synchronous call and the batch line (o-series rules included)."""
    from core.records import Pair
    from data.judges.prompts import load_prompt

    with FakeOpenAI() as server:
        config = openai_judge(server, model="o3-mini", reasoning_effort="low", **FAST)
        prompt = load_prompt("binary")
        backend = ChatJudge(config, prompt)
        judge = batch_module.BatchJudge(backend, config, prompt, tmp_path / "b.json")
        pair = Pair(qid="q", query="what", doc_id="d", text="text")
        line = json.loads(judge.request_line(pair, "k", 0))
    assert line["body"] == backend.chat_request(pair)
    assert "temperature" not in line["body"] and line["body"]["reasoning_effort"] == "low"


@pytest.mark.parametrize("batch", [False, True], ids=["synchronous", "batch"])
def test_a_refusal_is_asked_once_and_a_200_error_body_keeps_the_providers_message(
    tmp_path: Path, batch: bool
):
    modes = ["ok"] * 4 + ["refusal", "error-body", "no-choices"]
    pairs = write_pairs(tmp_path / "pairs.jsonl", modes)
    out = tmp_path / "j.jsonl"
    extra = {**FAST, "batch_retry": "sync"} if batch else {}
    with FakeOpenAI() as server:
        label(
            LabelConfig(pairs=str(pairs), out=str(out)),
            openai_judge(server, max_retries=0, parse_retries=2, **extra),
        )
    found = judgments(out)
    assert "the model refused: I can't help with that." in found["d4"].error
    assert server.requests["d4"] == 1  # neither re-asked nor handed to the synchronous retry
    assert "The model is overloaded; try again later (503)" in found["d5"].error
    assert "no choices" in found["d6"].error
    assert all(found[f"d{i}"].error is None for i in range(4))


def test_an_endpoint_without_a_batch_api_says_so_not_a_vanished_batch(tmp_path: Path):
    """--batch against a local server (no /files route): the first call's 404 names the missing
    Batch API and says to run without --batch, instead of 'no longer exists at the provider'."""
    import httpx
    import openai

    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 2)
    with FakeOpenAI() as server:
        batches = batch_module.OpenAIBatches(openai_judge(server, **FAST))

        def missing(**_: object) -> None:
            request = httpx.Request("POST", f"{server.base_url}/files")
            raise openai.NotFoundError(
                "Not Found", response=httpx.Response(404, request=request), body=None
            )

        batches.client.files.create = missing
        with pytest.raises(
            batch_module.BatchError, match=r"has no Batch API .* run without --batch"
        ):
            batches.upload(pairs)
