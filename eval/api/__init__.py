"""REST API: evaluate one query's ranked hits with the grader (the eval_search request shape).

    GRADER_MODEL=runs/export/grader uvicorn eval.api:app --host 127.0.0.1 --port 8000

    curl -s localhost:8000/v1/eval/search -H 'Content-Type: application/json' -d '{
      "query": {"inputs": {"text": "what is an axon terminal"}},
      "eval": {"fields": ["title", "text"], "debug": false},
      "hits": [{"id": "d1", "fields": {"title": "Axon", "text": "Axon terminals are ..."}}]}'

The service is split by concern: ``settings`` (:class:`ApiSettings`), ``schemas`` (request and
response bodies), ``batcher`` (:class:`MicroBatcher`) and ``server`` (:func:`create_app`; ``app`` is the application itself, for uvicorn).
Settings are :class:`ApiSettings`, arguments of :func:`create_app`; the environment gives only
their defaults: ``GRADER_MODEL`` (exported grader or checkpoint), ``GRADER_API_TOKEN`` (when set,
requests need ``Authorization: Bearer TOKEN``), ``GRADER_MAX_HITS`` (100), ``GRADER_MAX_TEXT_CHARS``
(20000 per field), ``GRADER_MAX_BODY_BYTES`` (4 MiB), ``GRADER_MAX_REQUEST_TOKENS`` (65536 grader
input tokens per request), ``GRADER_MAX_QUEUED_PAIRS`` (1024), ``GRADER_MAX_WAIT_S`` (30), ``GRADER_BATCH_WAIT_MS`` (5),
``GRADER_BATCH_PAIRS`` (256). The model loads once at start-up; concurrent requests are gathered
into shared batches, and each request still succeeds or fails alone.

Every request's work is bounded: bad requests get 422 with the path of the offending field (a body
that is not JSON: the parser's reason and where), a body over the size limit 413 (chunked bodies
too), a body that is not UTF-8 400 (naming the byte), one nested too deeply to parse 400 (where), a
request over the token budget 422, a full queue, one that would keep it waiting over
``GRADER_MAX_WAIT_S`` or one that alone would take longer (at the rate measured at start-up, then
on recent batches) 503 with Retry-After, and a request whose client went away is dropped before
it is graded.
"""

from __future__ import annotations

from typing import Any

from eval.api.batcher import MicroBatcher, QueueFull
from eval.api.schemas import SearchEvalRequest, SearchEvalResponse
from eval.api.server import create_app
from eval.api.settings import ApiSettings

__all__ = [
    "ApiSettings",
    "MicroBatcher",
    "QueueFull",
    "SearchEvalRequest",
    "SearchEvalResponse",
    "create_app",
]

_app: Any = None


def __getattr__(name: str) -> Any:
    # `uvicorn eval.api:app` builds the app on first access (once), so importing stays cheap.
    global _app
    if name == "app":
        if _app is None:
            _app = create_app()
        return _app
    raise AttributeError(name)
