"""Reliability round 4 (the hostile-but-fair test round), the API, text and teacher side, for
``python -m benchmarks.reliability``: each item's reported situation set up and run again (item 8:
the wait limit held for a first, large request; item 9: a soft hyphen or a no-break space inside a
query; the unclear errors: a model's refusal, a 200 body without choices or with an error object,
a request body that is not UTF-8; the teacher's answer shape asked of a server that constrains
output). Items 10 and 11 here are the round's unnumbered entries: the unclear errors and the
teacher against a small local model. A replay raises AssertionError with what went wrong, and returns None when the fix holds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def replay_first_request_within_the_wait(root: Path) -> None:
    """Item 8: with a 2 s wait limit (GRADER_MAX_WAIT_S) a 100-hit request was admitted because
    the queue was empty, and answered after 27.7 s. Scaled to a grader ten times as fast (100
    hits: 2.8 s): the request is refused at once with Retry-After and the number of hits that
    fit, and a request of that many is answered within the limit."""
    import asyncio
    import re
    import time

    from eval.api import MicroBatcher, QueueFull
    from measure.labelers import Hit, HitLabel

    class Grader:
        name = "slow"

        def label_many(self, requests: list) -> list:
            time.sleep(0.0277 * sum(len(hits) for _, _, hits in requests))
            return [[HitLabel(relevant=True) for _ in hits] for _, _, hits in requests]

    async def run() -> tuple[float, str, float]:
        batcher = MicroBatcher(Grader(), max_wait_s=2.0)  # type: ignore[arg-type]
        await batcher.warm_up()
        batcher.start()
        try:
            sent = time.monotonic()
            try:
                await batcher.label("q", [Hit(str(i), "x") for i in range(100)])
                refused = ""
            except QueueFull as exc:
                refused = f"{exc} (Retry-After {exc.retry_after})"
            first = time.monotonic() - sent
            fits = int(re.search(r"at most (\d+) hits", refused).group(1)) if refused else 1
            sent = time.monotonic()
            await batcher.label("q", [Hit(str(i), "x") for i in range(fits)])
            return first, refused, time.monotonic() - sent
        finally:
            await batcher.stop()

    first, refused, answered = asyncio.run(run())
    assert refused, f"the 100-hit request was admitted and answered after {first:.1f} s"
    assert first < 0.5, f"refused only after {first:.1f} s"
    assert answered <= 2.0 * 1.15, f"a request of the advised size waited {answered:.2f} s"


def replay_invisible_characters_inside_a_query(root: Path) -> None:
    """Item 9: a soft hyphen (U+00AD) or a no-break space (U+00A0) inside a query moved the
    grader's score (0.604 -> 0.773 / 0.438); the grader's input is now the plain query's."""
    from models.assets import TINY_TOKENIZER
    from models.input_format import GraderInputFormat, format_pairs
    from models.resolve import load_tokenizer

    tokenizer = load_tokenizer(str(TINY_TOKENIZER))
    fmt = GraderInputFormat.from_tokenizer(tokenizer, 256)
    document = ["An axon ends here."]
    plain = format_pairs(tokenizer, fmt, ["axon terminal"], document).input_ids
    for query in ("ax\u00adon terminal", "axon\u00a0terminal", "axon\u202fter\u00adminal"):
        seen = format_pairs(tokenizer, fmt, [query], document).input_ids
        assert seen == plain, f"{query!r} reached the grader as other tokens"


def replay_unclear_errors_named(root: Path) -> None:
    """The unclear errors: a model's refusal was recorded as an empty reply and billed three
    times; a 200 without choices or with an error object lost the provider's message; a body
    that is not UTF-8 got the API's generic 400. Each is now one line that says what happened."""
    import json

    from fastapi.testclient import TestClient

    from eval.api import create_app
    from measure.labelers import HitLabel, Labeler
    from models.llm_client import ChatClient, ChatRequest, ChatSettings
    from support.fake_openai import FakeOpenAI

    with FakeOpenAI() as server:
        settings = ChatSettings(
            model="fake", base_url=server.base_url, max_retries=0, parse_retries=2
        )
        requests = [
            ChatRequest([{"role": "user", "content": f"[[id={mode} mode={mode} rel=1]]"}], 8)
            for mode in ("refusal", "error-body", "no-choices")
        ]
        refused, error_body, no_choices = ChatClient(settings).complete(
            requests, usable=lambda text, finished: None if text else "empty"
        )
    assert server.requests["refusal"] == 1, f"a refusal asked {server.requests['refusal']} times"
    assert refused.error == "the model refused: I can't help with that.", refused.error
    assert "The model is overloaded" in (error_body.error or ""), error_body.error
    assert "no choices" in (no_choices.error or ""), no_choices.error

    class Fixed(Labeler):
        name = "fixed"

        def label(self, qid, query, hits):
            return [HitLabel(relevant=True, grade=3, score=0.9) for _ in hits]

    body = {"query": {"inputs": {"text": "café"}}, "hits": [{"id": "d1", "text": "x"}]}
    with TestClient(create_app(labeler=Fixed(), token="")) as client:
        answer = client.post(
            "/v1/eval/search",
            content=json.dumps(body, ensure_ascii=False).encode("latin-1"),
            headers={"content-type": "application/json"},
        )
    said = answer.json()["detail"]
    assert answer.status_code == 400 and "not UTF-8: byte 0xe9 at offset 34" in said, said


def replay_small_model_answers_in_form(root: Path) -> None:
    """The teacher against a small local model (SmolLM2 served by llama.cpp): trec-graded got 19
    of 20 replies unusable (a grade's definition, not its digit). Every prompt now carries its
    answer's schema and sends it where the server constrains output; against a fake server whose
    model rambles unless constrained, every prompt's replies are labels, and a server that
    refuses json_schema is asked with json_object and the schema."""
    import json

    from data.judges.backends import JudgeConfig
    from data.judges.prompts import available_prompts, load_prompt
    from data.label import LabelConfig, label
    from support.fake_openai import FakeOpenAI

    pairs = root / "pairs.jsonl"
    rows = [
        {
            "qid": f"q{i % 4}",
            "query": f"query {i % 4}",
            "doc_id": f"d{i}",
            "text": f"[[id=d{i} mode=rambles rel={i % 2}]] body",
        }
        for i in range(20)
    ]
    pairs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    for refused in ({}, {"json_schema": 500}):
        for name in available_prompts():
            with FakeOpenAI() as server:
                server.refused_formats = refused
                summary = label(
                    LabelConfig(pairs=str(pairs), out=str(root / f"{name}-{len(refused)}.jsonl")),
                    JudgeConfig(
                        backend="openai", model="smollm2", prompt=name, base_url=server.base_url
                    ),
                )
            asked = server.bodies[-1].get("response_format") or {}
            sent = (asked.get("json_schema") or {}).get("schema") or asked.get("schema")
            assert sent == load_prompt(name).json_schema, f"{name}: asked {asked or 'no shape'}"
            assert summary["failed"] == 0, f"{name}: {summary['failed']} of 20 replies unusable"


REPLAYS: list[tuple[int, str, Callable[[Path], None]]] = [
    (
        8,
        "round 4: wait limit held for a first, large request",
        replay_first_request_within_the_wait,
    ),
    (
        9,
        "round 4: soft hyphen, no-break space in a query",
        replay_invisible_characters_inside_a_query,
    ),
    (10, "round 4: refusal, error body, non-UTF-8 body named", replay_unclear_errors_named),
    (11, "round 4: a small local teacher answers in form", replay_small_model_answers_in_form),
]
