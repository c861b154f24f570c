"""What the API serves and its limits; the ``GRADER_*`` environment variables give the defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from core.errors import InputError


def _env_number(name: str, default: float, kind: type = int) -> Any:
    """The ``GRADER_*`` variable ``name`` as ``kind`` (``int`` or ``float``), named when malformed."""
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return kind(value)
    except ValueError:
        expected = "a whole number" if kind is int else "a number"
        raise InputError(f"{name}: expected {expected}, got {value!r}") from None


def _env_int(name: str, default: int) -> int:
    return _env_number(name, default, int)


def _env_float(name: str, default: float) -> float:
    return _env_number(name, default, float)


@dataclass
class ApiSettings:
    """What the API serves and its limits (defaults from the ``GRADER_*`` environment variables)."""

    model: str | None = field(default_factory=lambda: os.environ.get("GRADER_MODEL"))
    token: str | None = field(default_factory=lambda: os.environ.get("GRADER_API_TOKEN") or None)
    max_hits: int = field(default_factory=lambda: _env_int("GRADER_MAX_HITS", 100))
    max_text_chars: int = field(default_factory=lambda: _env_int("GRADER_MAX_TEXT_CHARS", 20000))
    batch_wait_ms: float = field(default_factory=lambda: _env_float("GRADER_BATCH_WAIT_MS", 5.0))
    batch_pairs: int = field(default_factory=lambda: _env_int("GRADER_BATCH_PAIRS", 256))
    max_body_bytes: int = field(
        default_factory=lambda: _env_int("GRADER_MAX_BODY_BYTES", 4 * 1024 * 1024)
    )
    max_request_tokens: int = field(
        default_factory=lambda: _env_int("GRADER_MAX_REQUEST_TOKENS", 65536)
    )
    max_queued_pairs: int = field(default_factory=lambda: _env_int("GRADER_MAX_QUEUED_PAIRS", 1024))
    # A request that would wait longer than this, behind the queue or alone (its own hits at the
    # rate measured at start-up, then on recent batches), is refused at once (503 with
    # Retry-After, naming the hits that fit) instead of timing out in the client.
    max_wait_s: float = field(default_factory=lambda: _env_float("GRADER_MAX_WAIT_S", 30.0))

    def __post_init__(self) -> None:
        for name in (
            "max_hits",
            "max_text_chars",
            "batch_pairs",
            "max_body_bytes",
            "max_request_tokens",
            "max_queued_pairs",
            "max_wait_s",
        ):
            if getattr(self, name) < 1:
                raise InputError(f"{name}: expected >= 1, got {getattr(self, name)}")
