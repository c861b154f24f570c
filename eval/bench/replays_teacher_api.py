"""Reliability round 4 (the hostile-but-fair test round), the API, text and teacher side, for
``python -m eval.bench.reliability``: each item's reported situation set up and run again (item 8:
the wait limit held for a first, large request; item 9: a soft hyphen or a no-break space inside a
query; the unclear errors: a model's refusal, a 200 body without choices or with an error object,
a request body that is not UTF-8; the teacher's answer shape asked of a server that constrains
output). A replay raises AssertionError with what went wrong, and returns None when the fix holds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


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
    from eval.labelers import HitLabel, Labeler
    from models.llm_client import ChatClient, ChatRequest, ChatSettings
    from tests.support.fake_openai import FakeOpenAI

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


REPLAYS: list[tuple[int, str, Callable[[Path], None]]] = [
    (
        9,
        "round 4: soft hyphen, no-break space in a query",
        replay_invisible_characters_inside_a_query,
    ),
    (10, "round 4: refusal, error body, non-UTF-8 body named", replay_unclear_errors_named),
]
