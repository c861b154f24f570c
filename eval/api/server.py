"""The FastAPI application: authentication, body limits, the eval_search route and health."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from eval.api.batcher import MicroBatcher, QueueFull
from eval.api.schemas import HitOut, SearchEvalRequest, SearchEvalResponse, Usage, limit_problems
from eval.api.settings import ApiSettings
from measure.labelers import Hit, Labeler
from measure.metrics.retrieval import QueryEvaluation, evaluate_query


def _printable(value: Any) -> Any:
    """A JSON-safe copy: strings with lone surrogates are escaped rather than failing the reply."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list | tuple):
        return [_printable(item) for item in value]
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    return value


def _not_an_object(content_type: str | None) -> str:
    """What is wrong with a body that did not reach the route as a JSON object: most often the
    content type (FastAPI reads a body as JSON only under application/json)."""
    if not content_type or "json" not in content_type.lower():
        return (
            f"the body must be a JSON object sent with Content-Type: application/json (this "
            f"request's content type: {content_type or 'none'})"
        )
    return 'the body must be a JSON object ({"query": ..., "hits": [...]}), not a list or a value'


class BodyLimit:
    """Refuses a request body over ``max_bytes`` with 413, whether its size is announced
    (Content-Length) or not (chunked: counted as it arrives, never buffered past the limit).

    A plain ASGI middleware: the ``@app.middleware("http")`` kind wraps the receive channel, and
    behind it a route never sees its client disconnect, so abandoned requests were graded.
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self, size: str) -> HTTPException:
        return HTTPException(
            status_code=413, detail=f"body of {size} bytes; the limit is {self.max_bytes}"
        )

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"").decode()
        if length.isdigit() and int(length) > self.max_bytes:
            response = JSONResponse(
                status_code=413, content={"detail": self._too_large(length).detail}
            )
            await response(scope, receive, send)
            return
        received = 0

        async def counted_receive() -> dict:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise self._too_large(f"more than {self.max_bytes}")
            return message

        await self.app(scope, counted_receive, send)


def _lifespan(settings: ApiSettings, labeler: Labeler | None):
    """Start-up: the labeler (the grader at ``settings.model`` unless one is given), warmed up
    behind a started micro-batcher; shut-down: the batcher stopped."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        nonlocal labeler
        if labeler is None:
            from measure.labelers import GraderLabeler

            if not settings.model:
                raise RuntimeError("set GRADER_MODEL (or ApiSettings.model) to an exported grader")
            labeler = GraderLabeler(settings.model)
        batcher = MicroBatcher(
            labeler,
            wait_ms=settings.batch_wait_ms,
            max_pairs=settings.batch_pairs,
            max_queued=settings.max_queued_pairs,
            max_wait_s=settings.max_wait_s,
        )
        await batcher.warm_up()
        batcher.start()
        app.state.batcher = batcher
        app.state.labeler = labeler
        yield
        await batcher.stop()

    return lifespan


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 with each problem's type, place and message (FastAPI's own handler echoes the input,
    which fails on undecodable text with a 500)."""
    errors = [
        {key: error[key] for key in ("type", "loc", "msg") if key in error}
        for error in exc.errors()
    ]
    for error in errors:  # pydantic's prefix of a validator's own message says nothing
        error["msg"] = str(error.get("msg", "")).removeprefix("Value error, ")
    for error in errors:
        if error.get("type") == "model_attributes_type" and list(error["loc"]) == ["body"]:
            error["msg"] = _not_an_object(request.headers.get("content-type"))
    for error, raw in zip(errors, exc.errors(), strict=True):
        if error.get("type") == "json_invalid":  # FastAPI's message leaves out what and where
            error["msg"] = _not_json(raw, exc.body)
    return JSONResponse(status_code=422, content={"detail": _printable(errors)})


def _line_and_column(text: bytes | str, offset: int) -> str:
    """``line L, column C`` of ``offset`` in ``text`` (both counted from 1)."""
    newline = b"\n" if isinstance(text, bytes) else "\n"
    before = text[:offset]
    return f"line {before.count(newline) + 1}, column {offset - (before.rfind(newline) + 1) + 1}"


def _not_json(error: dict[str, Any], body: Any) -> str:
    """The JSON parser's reason and where: "not valid JSON: Expecting value at offset 9 (line 1,
    column 10)"."""
    reason = (error.get("ctx") or {}).get("error", "JSON decode error")
    offset = error["loc"][-1] if error.get("loc") else None
    if not isinstance(offset, int) or not isinstance(body, str | bytes):
        return f"not valid JSON: {reason}"
    return f"not valid JSON: {reason} at offset {offset} ({_line_and_column(body, offset)})"


def _not_utf8(error: UnicodeDecodeError) -> str:
    """Where a body stops being UTF-8: the byte, its offset, line and column, and the text before."""
    data = bytes(error.object)
    context = data[: error.start][-40:].decode("utf-8", "replace")
    return (
        f"the body is not UTF-8: byte 0x{data[error.start]:02x} at offset {error.start} "
        f"({_line_and_column(data, error.start)}), after {context!r}; send JSON encoded as UTF-8"
    )


DEEP = 64  # nesting levels: a search request needs 4, the JSON parser gives up near 1000


def _too_deep(data: bytes) -> str:
    """What the JSON parser's recursion limit means for a body: how deep it nests, and where it
    first nests deeper than :data:`DEEP` (brackets inside strings do not count)."""
    depth, in_string, escaped, past = 0, False, False, None
    for offset, byte in enumerate(data):
        if in_string:
            escaped, in_string = (False, True) if escaped else (byte == 0x5C, byte != 0x22)
        elif byte == 0x22:  # "
            in_string = True
        elif byte in b"[{":
            depth += 1
            if depth > DEEP:
                past = offset
                break
        elif byte in b"]}":
            depth -= 1
    where = "" if past is None else f" from offset {past} ({_line_and_column(data, past)}) on"
    return (
        f"the body is nested too deeply to parse: its arrays and objects nest more than {DEEP} "
        f"levels deep{where} (a search request nests 4)"
    )


async def http_error(request: Request, exc: StarletteHTTPException) -> Any:
    """FastAPI's own answer to an HTTPException, except for its "There was an error parsing the
    body" (400), which says here what was wrong: the encoding, or nesting too deep to parse."""
    if isinstance(exc.__cause__, UnicodeDecodeError):
        return JSONResponse(status_code=400, content={"detail": _not_utf8(exc.__cause__)})
    if isinstance(exc.__cause__, RecursionError):
        detail = _too_deep(await request.body())  # read already: the route parsed it
        return JSONResponse(status_code=400, content={"detail": detail})
    return await http_exception_handler(request, exc)


async def healthz(request: Request) -> dict[str, Any]:
    labeler = getattr(request.app.state, "labeler", None)
    return {
        "status": "ok" if labeler is not None else "loading",
        "labeler": getattr(labeler, "name", None),
    }


def _request_hits(body: SearchEvalRequest, labeler: Labeler, settings: ApiSettings) -> list[Hit]:
    """The request's hits as the labeler reads them, refused (422) over the request's limits."""
    problems = limit_problems(body, settings)
    if problems:
        raise RequestValidationError(problems)
    hits = [Hit(hit.id, *body.eval.document(hit)) for hit in body.hits]
    tokens = labeler.input_tokens(body.query.inputs.text, hits)
    if tokens is not None and tokens > settings.max_request_tokens:
        message = (
            f"{tokens} grader input tokens; the limit per request is "
            f"{settings.max_request_tokens}: send fewer or shorter hits"
        )
        raise RequestValidationError(
            [{"type": "value_error", "loc": ["body", "hits"], "msg": message}]
        )
    return hits


async def _labels_or_gone(request: Request, query: str, hits: list[Hit]) -> Any:
    """The hits' labels from the batcher; a 499 response when the caller leaves first (the
    batcher drops a request it has not started), 503 with Retry-After when it is full."""
    labelling = asyncio.ensure_future(request.app.state.batcher.label(query, hits))
    try:
        while True:
            done, _ = await asyncio.wait({labelling}, timeout=0.25)
            if done:
                return labelling.result()
            if await request.is_disconnected():
                labelling.cancel()
                return JSONResponse(status_code=499, content={"detail": "client went away"})
    except QueueFull as exc:
        raise HTTPException(
            status_code=503, detail=str(exc), headers={"Retry-After": str(exc.retry_after)}
        ) from None


def _response(
    body: SearchEvalRequest, labels: list, labeler: Labeler, result: QueryEvaluation, k: int
) -> SearchEvalResponse:
    from eval.search.command import scoring_dtype  # as eval.search records it

    metrics = result.metrics
    return SearchEvalResponse(
        metrics={
            "ndcg": metrics[f"ndcg@{k}"],
            "map": metrics["map"],
            "mrr": metrics["mrr"],
            f"precision@{k}": metrics[f"precision@{k}"],
            f"hit@{k}": metrics[f"hit@{k}"],
        },
        hits=[
            HitOut(
                index=i,
                id=hit.id,
                fields={name: hit.fields[name] for name in body.eval.read(hit)},
                relevant=label.relevant,
                relevance=label.relevance,
                justification=label.justification,
                score=label.score,
                grade=label.grade,
            )
            for i, (hit, label) in enumerate(zip(body.hits, labels, strict=True))
        ],
        usage=Usage(evaluation_input_tokens=result.evaluation_input_tokens),
        scoring_dtype=scoring_dtype(),
        warnings=labeler.query_warnings(body.query.inputs.text) or None,
    )


def create_app(
    labeler: Labeler | None = None,
    token: str | None = None,
    settings: ApiSettings | None = None,
) -> FastAPI:
    """The API; ``labeler`` defaults to the grader at ``settings.model``, loaded once at start-up.

    ``token`` overrides ``settings.token`` ("" turns authentication off).
    """
    settings = settings or ApiSettings()
    token = (token if token is not None else settings.token) or None
    app = FastAPI(title="relevance-grader", version="1", lifespan=_lifespan(settings, labeler))
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, http_error)  # type: ignore[arg-type]
    app.get("/healthz")(healthz)

    def authorize(request: Request) -> None:
        if token is not None and request.headers.get("authorization", "") != f"Bearer {token}":
            raise HTTPException(status_code=401, detail="missing or wrong bearer token")

    @app.post(
        "/v1/eval/search", response_model=SearchEvalResponse, response_model_exclude_none=True
    )
    async def eval_search(
        body: SearchEvalRequest, request: Request, _: None = Depends(authorize)
    ) -> SearchEvalResponse:
        started = time.perf_counter()
        labeler = request.app.state.labeler
        hits = _request_hits(body, labeler, settings)
        labels = await _labels_or_gone(request, body.query.inputs.text, hits)
        if isinstance(labels, JSONResponse):
            return labels  # type: ignore[return-value]
        labelled = time.perf_counter()
        k = body.eval.k or len(hits)
        result = evaluate_query(body.query.inputs.text, hits, labeler, k=k, labels=labels)
        response = _response(body, labels, labeler, result, k)
        if body.eval.debug:
            response.debug = {
                "probabilities": [label.score for label in labels],
                "timings_ms": {
                    "labelling": round((labelled - started) * 1000, 2),
                    "total": round((time.perf_counter() - started) * 1000, 2),
                },
                "labeler": labeler.name,
            }
        return response

    return app
