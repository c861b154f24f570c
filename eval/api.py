"""REST API: evaluate one query's ranked hits with the grader (the eval_search request shape).

    GRADER_MODEL=runs/export/grader uvicorn eval.api:app --host 127.0.0.1 --port 8000

    curl -s localhost:8000/v1/eval/search -H 'Content-Type: application/json' -d '{
      "query": {"inputs": {"text": "what is an axon terminal"}},
      "eval": {"fields": ["title", "text"], "debug": false},
      "hits": [{"id": "d1", "fields": {"title": "Axon", "text": "Axon terminals are ..."}}]}'

Settings are :class:`ApiSettings`, arguments of :func:`create_app`; the environment gives only
their defaults: ``GRADER_MODEL`` (exported grader or checkpoint), ``GRADER_API_TOKEN`` (when set,
requests need ``Authorization: Bearer TOKEN``), ``GRADER_MAX_HITS`` (100), ``GRADER_MAX_TEXT_CHARS``
(20000 per field), ``GRADER_MAX_BODY_BYTES`` (4 MiB), ``GRADER_MAX_REQUEST_TOKENS`` (65536 grader
input tokens per request), ``GRADER_MAX_QUEUED_PAIRS`` (1024), ``GRADER_BATCH_WAIT_MS`` (5),
``GRADER_BATCH_PAIRS`` (256). The model loads once at start-up; concurrent requests are gathered
into shared batches, and each request still succeeds or fails alone.

Every request's work is bounded: bad requests get 422 with the path of the offending field, a body
over the size limit 413, a request over the token budget 422, a full queue 503 with Retry-After,
and a request whose client went away is dropped before it is graded.
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from eval.labelers import Hit, HitLabel, Labeler
from eval.search import evaluate_query


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


@dataclass
class ApiSettings:
    """What the API serves and its limits (defaults from the ``GRADER_*`` environment variables)."""

    model: str | None = field(default_factory=lambda: os.environ.get("GRADER_MODEL"))
    token: str | None = field(default_factory=lambda: os.environ.get("GRADER_API_TOKEN") or None)
    max_hits: int = field(default_factory=lambda: _env_int("GRADER_MAX_HITS", 100))
    max_text_chars: int = field(default_factory=lambda: _env_int("GRADER_MAX_TEXT_CHARS", 20000))
    batch_wait_ms: float = field(
        default_factory=lambda: float(os.environ.get("GRADER_BATCH_WAIT_MS", "5"))
    )
    batch_pairs: int = field(default_factory=lambda: _env_int("GRADER_BATCH_PAIRS", 256))
    max_body_bytes: int = field(
        default_factory=lambda: _env_int("GRADER_MAX_BODY_BYTES", 4 * 1024 * 1024)
    )
    max_request_tokens: int = field(
        default_factory=lambda: _env_int("GRADER_MAX_REQUEST_TOKENS", 65536)
    )
    max_queued_pairs: int = field(default_factory=lambda: _env_int("GRADER_MAX_QUEUED_PAIRS", 1024))

    def __post_init__(self) -> None:
        for name in (
            "max_hits",
            "max_text_chars",
            "batch_pairs",
            "max_body_bytes",
            "max_request_tokens",
            "max_queued_pairs",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected >= 1, got {getattr(self, name)}")


def _valid_unicode(value: str) -> str:
    # JSON may carry a lone surrogate (\\ud800) that no tokenizer or UTF-8 encoder accepts.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("contains a lone surrogate: not valid Unicode text") from None
    return value


Text = Annotated[str, AfterValidator(_valid_unicode)]
FieldName = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_valid_unicode)]


class QueryInputs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: Text = Field(min_length=1)


class QueryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    inputs: QueryInputs


class EvalOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fields: list[FieldName] = Field(default_factory=lambda: ["text"], min_length=1, max_length=16)
    debug: bool = False
    k: int | None = Field(default=None, ge=1)


class HitIn(BaseModel):
    """A hit in any of the documented shapes, normalised to ``id`` + ``fields``:
    ``{"id", "fields": {...}}``, ``{"id", "title": ..., "text": ...}`` (text fields at the top
    level) and Pinecone's ``{"_id", "_score", "fields": {...}}``."""

    model_config = ConfigDict(extra="forbid")
    id: Text = Field(min_length=1, max_length=512)
    fields: dict[FieldName, Text] = Field(default_factory=dict)
    retrieval_score: float | None = None  # the retriever's own score (Pinecone's _score)

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "_id" in data and "id" not in data:
            data["id"] = data.pop("_id")
        if "_score" in data:
            data["retrieval_score"] = data.pop("_score")
        fields = data.get("fields")
        fields = dict(fields) if isinstance(fields, dict) else fields
        for key in [k for k in data if k not in cls.model_fields]:
            if isinstance(data[key], str) and isinstance(fields, dict | None):
                fields = fields or {}
                if key in fields:
                    continue  # "fields" wins; the duplicate stays and extra="forbid" names it
                fields[key] = data.pop(key)
        if fields is not None:
            data["fields"] = fields
        return data


class SearchEvalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: QueryIn
    eval: EvalOptions = Field(default_factory=EvalOptions)
    hits: list[HitIn] = Field(min_length=1)


def limit_problems(body: SearchEvalRequest, settings: ApiSettings) -> list[dict[str, Any]]:
    """Violations of the configured limits, in FastAPI's 422 format (one entry per field)."""

    def problem(loc: list[Any], msg: str) -> dict[str, Any]:
        return {"type": "value_error", "loc": ["body", *loc], "msg": msg, "input": None}

    problems = []
    if len(body.hits) > settings.max_hits:
        problems.append(
            problem(["hits"], f"{len(body.hits)} hits; the limit is {settings.max_hits}")
        )
    if body.eval.k is not None and body.eval.k > settings.max_hits:
        problems.append(problem(["eval", "k"], f"k={body.eval.k} exceeds {settings.max_hits}"))
    if len(body.query.inputs.text) > settings.max_text_chars:
        problems.append(
            problem(
                ["query", "inputs", "text"],
                f"{len(body.query.inputs.text)} characters; the limit is {settings.max_text_chars}",
            )
        )
    for i, hit in enumerate(body.hits):
        for name, text in hit.fields.items():
            if len(text) > settings.max_text_chars:
                problems.append(
                    problem(
                        ["hits", i, "fields", name],
                        f"field {name!r} has {len(text)} characters; the limit is "
                        f"{settings.max_text_chars}",
                    )
                )
    for name in body.eval.fields:
        missing = [i for i, hit in enumerate(body.hits) if name not in hit.fields]
        problems += [
            {
                "type": "missing",
                "loc": ["body", "hits", i, "fields", name],
                "msg": f"field {name!r} is missing",
                "input": None,
            }
            for i in missing
        ]
    return problems


class HitOut(BaseModel):
    index: int
    id: str
    fields: dict[str, str]
    relevant: bool
    relevance: int  # eval_search's 1-4 scale (4 highly ... 1 not relevant); >= 3 is relevant
    justification: str | None = None
    score: float | None = None
    grade: int | None = None


class Usage(BaseModel):
    evaluation_input_tokens: int


class SearchEvalResponse(BaseModel):
    metrics: dict[str, float]
    hits: list[HitOut]
    usage: Usage
    warnings: list[str] | None = None
    debug: dict[str, Any] | None = None


@dataclass
class _Job:
    qid: str
    query: str
    hits: list[Hit]
    future: asyncio.Future


class QueueFull(Exception):
    """More pairs waiting than ``max_queued_pairs``: the client should retry later (503)."""


class MicroBatcher:
    """Gathers concurrent requests for up to ``wait_ms`` and labels them in one batched call.

    At most ``max_queued`` pairs wait or run at once (more: :class:`QueueFull`); a request whose
    caller stopped waiting (its future cancelled) is dropped before it is graded.
    """

    def __init__(
        self,
        labeler: Labeler,
        wait_ms: float = 5.0,
        max_pairs: int = 256,
        max_queued: int = 1024,
    ) -> None:
        self.labeler = labeler
        self.wait = wait_ms / 1000
        self.max_pairs = max_pairs
        self.max_queued = max_queued
        self.pending = 0  # pairs queued or being labelled
        self.queue: asyncio.Queue[_Job] = asyncio.Queue()
        self.task: asyncio.Task | None = None
        self.batches = 0
        self.dropped = 0
        # One labelling thread for the server's life: each new thread that calls torch on a CPU
        # builds its own OpenMP team (measured: 3-7 s per call from asyncio.to_thread's pool,
        # 0.3 s from one reused thread).
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="labeler")

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def _label_many(self, requests: list[tuple[str, str, list[Hit]]]) -> list[list[HitLabel]]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, self.labeler.label_many, requests)

    async def warm_up(self) -> None:
        """One tiny labelling call, so the first client does not pay the start-up cost."""
        await self._label_many([("warm-up", "warm up", [Hit("warm-up", "warm up")])])

    async def label(self, query: str, hits: list[Hit]) -> list[HitLabel]:
        if self.pending and self.pending + len(hits) > self.max_queued:
            raise QueueFull(f"{self.pending} pairs are waiting; the limit is {self.max_queued}")
        future = asyncio.get_running_loop().create_future()
        self.pending += len(hits)
        try:
            await self.queue.put(_Job("q", query, hits, future))
            return await future
        finally:
            self.pending -= len(hits)

    async def _next_jobs(self) -> list[_Job]:
        loop = asyncio.get_running_loop()
        jobs = [await self.queue.get()]
        pairs = len(jobs[0].hits)
        deadline = loop.time() + self.wait
        while pairs < self.max_pairs:
            timeout = deadline - loop.time()
            if timeout <= 0:
                break
            try:
                job = await asyncio.wait_for(self.queue.get(), timeout)
            except TimeoutError:
                break
            jobs.append(job)
            pairs += len(job.hits)
        live = [job for job in jobs if not job.future.done()]  # callers gone: not graded
        self.dropped += len(jobs) - len(live)
        return live

    async def _run(self) -> None:
        while True:
            jobs = await self._next_jobs()
            if not jobs:
                continue
            requests = [(f"q{i}", job.query, job.hits) for i, job in enumerate(jobs)]
            try:
                results = await self._label_many(requests)
                self.batches += 1
                for job, labels in zip(jobs, results, strict=True):
                    if not job.future.done():
                        job.future.set_result(labels)
            except Exception:
                # One bad request must not fail the others batched with it: each is labelled
                # alone, and only the one that fails again gets the error.
                for job in jobs:
                    if job.future.done():
                        continue
                    try:
                        labels = await self._label_many([("q0", job.query, job.hits)])
                        if not job.future.done():
                            job.future.set_result(labels[0])
                    except Exception as exc:  # the worker lives on
                        if not job.future.done():
                            job.future.set_exception(exc)


def _printable(value: Any) -> Any:
    """A JSON-safe copy: strings with lone surrogates are escaped rather than failing the reply."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list | tuple):
        return [_printable(item) for item in value]
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    return value


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

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        nonlocal labeler
        if labeler is None:
            from eval.labelers import GraderLabeler

            if not settings.model:
                raise RuntimeError("set GRADER_MODEL (or ApiSettings.model) to an exported grader")
            labeler = GraderLabeler(settings.model)
        batcher = MicroBatcher(
            labeler,
            wait_ms=settings.batch_wait_ms,
            max_pairs=settings.batch_pairs,
            max_queued=settings.max_queued_pairs,
        )
        await batcher.warm_up()
        batcher.start()
        app.state.batcher = batcher
        app.state.labeler = labeler
        yield
        await batcher.stop()

    app = FastAPI(title="relevance-grader", version="1", lifespan=lifespan)

    @app.middleware("http")
    async def limit_body(request: Request, call_next):
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > settings.max_body_bytes:
            return JSONResponse(
                status_code=413,
                content={
                    "detail": f"body of {length} bytes; the limit is {settings.max_body_bytes}"
                },
            )
        return await call_next(request)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes the input, which fails on undecodable text (a 500).
        errors = [
            {key: error[key] for key in ("type", "loc", "msg") if key in error}
            for error in exc.errors()
        ]
        return JSONResponse(status_code=422, content={"detail": _printable(errors)})

    def authorize(request: Request) -> None:
        if token is None:
            return
        if request.headers.get("authorization", "") != f"Bearer {token}":
            raise HTTPException(status_code=401, detail="missing or wrong bearer token")

    @app.get("/healthz")
    async def healthz(request: Request) -> dict[str, Any]:
        labeler_ = getattr(request.app.state, "labeler", None)
        return {
            "status": "ok" if labeler_ is not None else "loading",
            "labeler": getattr(labeler_, "name", None),
        }

    @app.post(
        "/v1/eval/search", response_model=SearchEvalResponse, response_model_exclude_none=True
    )
    async def eval_search(
        body: SearchEvalRequest, request: Request, _: None = Depends(authorize)
    ) -> SearchEvalResponse:
        started = time.perf_counter()
        problems = limit_problems(body, settings)
        if problems:
            raise RequestValidationError(problems)
        hits = [
            Hit(
                doc_id=hit.id,
                text="\n".join(hit.fields[name] for name in body.eval.fields if hit.fields[name]),
            )
            for hit in body.hits
        ]
        labeler = request.app.state.labeler
        tokens = labeler.input_tokens(body.query.inputs.text, hits)
        if tokens is not None and tokens > settings.max_request_tokens:
            raise RequestValidationError(
                [
                    {
                        "type": "value_error",
                        "loc": ["body", "hits"],
                        "msg": f"{tokens} grader input tokens; the limit per request is "
                        f"{settings.max_request_tokens}: send fewer or shorter hits",
                    }
                ]
            )
        labelling = asyncio.ensure_future(
            request.app.state.batcher.label(body.query.inputs.text, hits)
        )
        try:
            while True:
                done, _ = await asyncio.wait({labelling}, timeout=0.25)
                if done:
                    labels = labelling.result()
                    break
                if await request.is_disconnected():
                    labelling.cancel()  # the batcher drops it if it has not started
                    return JSONResponse(status_code=499, content={"detail": "client went away"})
        except QueueFull as exc:
            raise HTTPException(
                status_code=503, detail=str(exc), headers={"Retry-After": "1"}
            ) from None
        labelled = time.perf_counter()
        k = body.eval.k or len(hits)
        result = evaluate_query(
            body.query.inputs.text, hits, request.app.state.labeler, k=k, labels=labels
        )
        response = SearchEvalResponse(
            metrics={
                "ndcg": result["metrics"][f"ndcg@{k}"],
                "map": result["metrics"]["map"],
                "mrr": result["metrics"]["mrr"],
                f"precision@{k}": result["metrics"][f"precision@{k}"],
                f"hit@{k}": result["metrics"][f"hit@{k}"],
            },
            hits=[
                HitOut(
                    index=i,
                    id=hit.id,
                    fields={name: hit.fields[name] for name in body.eval.fields},
                    relevant=label.relevant,
                    relevance=label.relevance,
                    justification=label.justification,
                    score=label.score,
                    grade=label.grade,
                )
                for i, (hit, label) in enumerate(zip(body.hits, labels, strict=True))
            ],
            usage=Usage(evaluation_input_tokens=result["usage"]["evaluation_input_tokens"]),
            warnings=request.app.state.labeler.query_warnings(body.query.inputs.text) or None,
        )
        if body.eval.debug:
            response.debug = {
                "probabilities": [label.score for label in labels],
                "timings_ms": {
                    "labelling": round((labelled - started) * 1000, 2),
                    "total": round((time.perf_counter() - started) * 1000, 2),
                },
                "labeler": request.app.state.labeler.name,
            }
        return response

    return app


_app: FastAPI | None = None


def __getattr__(name: str) -> Any:
    # `uvicorn eval.api:app` builds the app on first access (once), so importing stays cheap.
    global _app
    if name == "app":
        if _app is None:
            _app = create_app()
        return _app
    raise AttributeError(name)
