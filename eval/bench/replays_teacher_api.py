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


REPLAYS: list[tuple[int, str, Callable[[Path], None]]] = [
    (
        9,
        "round 4: soft hyphen, no-break space in a query",
        replay_invisible_characters_inside_a_query,
    ),
]
