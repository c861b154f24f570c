"""REST API: evaluate one query's ranked hits with the grader (the eval_search request shape).

    GRADER_MODEL=runs/export/grader uvicorn eval.api:app --host 127.0.0.1 --port 8000

    curl -s localhost:8000/v1/eval/search -H 'Content-Type: application/json' -d '{
      "query": {"inputs": {"text": "what is an axon terminal"}},
      "eval": {"fields": ["title", "text"], "debug": false},
      "hits": [{"id": "d1", "fields": {"title": "Axon", "text": "Axon terminals are ..."}}]}'

Settings (environment): ``GRADER_MODEL`` (exported grader or checkpoint), ``GRADER_API_TOKEN``
(when set, requests need ``Authorization: Bearer TOKEN``), ``GRADER_MAX_HITS`` (100),
``GRADER_MAX_TEXT_CHARS`` (20000 per field), ``GRADER_BATCH_WAIT_MS`` (5). The model loads once at
start-up; concurrent requests are gathered into shared batches (up to ``GRADER_BATCH_PAIRS``, 256).
Bad requests get 422 with the path of the offending field.
"""

from __future__ import annotations

import asyncio
import os
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, field_validator

from eval.labelers import Hit, HitLabel, Labeler
from eval.search import evaluate_query

MAX_HITS = int(os.environ.get("GRADER_MAX_HITS", "100"))
MAX_TEXT_CHARS = int(os.environ.get("GRADER_MAX_TEXT_CHARS", "20000"))


class QueryInputs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)


class QueryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    inputs: QueryInputs


class EvalOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fields: list[str] = Field(default_factory=lambda: ["text"], min_length=1, max_length=16)
    debug: bool = False
    k: int | None = Field(default=None, ge=1, le=MAX_HITS)


class HitIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=512)
    fields: dict[str, str]

    @field_validator("fields")
    @classmethod
    def _field_lengths(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if len(text) > MAX_TEXT_CHARS:
                raise ValueError(
                    f"field {name!r} has {len(text)} characters; the limit is {MAX_TEXT_CHARS}"
                )
        return value


class SearchEvalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: QueryIn
    eval: EvalOptions = Field(default_factory=EvalOptions)
    hits: list[HitIn] = Field(min_length=1, max_length=MAX_HITS)


class HitOut(BaseModel):
    index: int
    id: str
    fields: dict[str, str]
    relevant: bool
    justification: str | None = None
    score: float | None = None
    grade: int | None = None


class Usage(BaseModel):
    evaluation_input_tokens: int


class SearchEvalResponse(BaseModel):
    metrics: dict[str, float]
    hits: list[HitOut]
    usage: Usage
    debug: dict[str, Any] | None = None


@dataclass
class _Job:
    qid: str
    query: str
    hits: list[Hit]
    future: asyncio.Future


class MicroBatcher:
    """Gathers concurrent requests for up to ``wait_ms`` and labels them in one batched call."""

    def __init__(self, labeler: Labeler, wait_ms: float = 5.0, max_pairs: int = 256) -> None:
        self.labeler = labeler
        self.wait = wait_ms / 1000
        self.max_pairs = max_pairs
        self.queue: asyncio.Queue[_Job] = asyncio.Queue()
        self.task: asyncio.Task | None = None
        self.batches = 0

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()

    async def label(self, query: str, hits: list[Hit]) -> list[HitLabel]:
        future = asyncio.get_running_loop().create_future()
        await self.queue.put(_Job("q", query, hits, future))
        return await future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
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
            requests = [(f"q{i}", job.query, job.hits) for i, job in enumerate(jobs)]
            try:
                results = await asyncio.to_thread(self.labeler.label_many, requests)
                self.batches += 1
                for job, labels in zip(jobs, results, strict=True):
                    job.future.set_result(labels)
            except Exception as exc:  # the requests fail, the worker lives on
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(exc)


def create_app(labeler: Labeler | None = None, token: str | None = None) -> FastAPI:
    """The API; ``labeler`` defaults to the grader at ``$GRADER_MODEL``, loaded once at start-up."""
    token = (token if token is not None else os.environ.get("GRADER_API_TOKEN")) or None

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        nonlocal labeler
        if labeler is None:
            from eval.labelers import GraderLabeler

            model = os.environ.get("GRADER_MODEL")
            if not model:
                raise RuntimeError("set GRADER_MODEL to an exported grader folder")
            labeler = GraderLabeler(model)
        batcher = MicroBatcher(
            labeler,
            wait_ms=float(os.environ.get("GRADER_BATCH_WAIT_MS", "5")),
            max_pairs=int(os.environ.get("GRADER_BATCH_PAIRS", "256")),
        )
        batcher.start()
        app.state.batcher = batcher
        app.state.labeler = labeler
        yield
        await batcher.stop()

    app = FastAPI(title="relevance-grader", version="1", lifespan=lifespan)

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
        problems = [
            {
                "type": "missing",
                "loc": ["body", "hits", i, "fields", name],
                "msg": f"field {name!r} is missing",
                "input": None,
            }
            for i, hit in enumerate(body.hits)
            for name in body.eval.fields
            if name not in hit.fields
        ]
        if problems:
            raise RequestValidationError(problems)
        hits = [
            Hit(
                doc_id=hit.id,
                text="\n".join(hit.fields[name] for name in body.eval.fields if hit.fields[name]),
            )
            for hit in body.hits
        ]
        labels = await request.app.state.batcher.label(body.query.inputs.text, hits)
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
                    justification=label.justification,
                    score=label.score,
                    grade=label.grade,
                )
                for i, (hit, label) in enumerate(zip(body.hits, labels, strict=True))
            ],
            usage=Usage(evaluation_input_tokens=result["usage"]["evaluation_input_tokens"]),
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


def __getattr__(name: str) -> Any:
    # `uvicorn eval.api:app` builds the app on first access, so importing this module stays cheap.
    if name == "app":
        return create_app()
    raise AttributeError(name)
