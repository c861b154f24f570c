"""The one HTTP client of a search endpoint (:class:`SearchClient`: requests from the engine's
templates, retried with backoff on what a later try may cure) and the hits read from its answers."""

from __future__ import annotations

import logging
import math
import time
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from core.errors import InputError
from data.engine.config import (
    MISSING,
    EngineConfig,
    expand_environment,
    fill_body,
    fill_text,
    keys_of,
    resolve,
)

logger = logging.getLogger(__name__)
RETRY_WAIT_CAP = 30.0  # seconds: the longest wait between two tries (Retry-After included)


class Hit(BaseModel):
    id: str
    score: float | None = None
    text: str | None = None


class Answer(BaseModel):
    """One query's answer as the partial file keeps it."""

    qid: str
    hits: list[Hit]


class EngineError(InputError):
    """The endpoint could not answer (a timeout, a refusal, a 5xx past the retries); what was
    answered before is kept."""


class SearchClient:
    """The one HTTP client of a search endpoint: requests filled from the engine's templates,
    retried with backoff on what a later try may cure."""

    def __init__(self, engine: EngineConfig, source: str) -> None:
        self.engine = engine
        self.source = source
        self.url = expand_environment(engine.url, f"{source}: url")
        headers = {
            name: expand_environment(value, f"{source}: headers.{name}")
            for name, value in engine.headers.items()
        }
        if engine.body is not None:  # every ${VAR} checked before the first request
            fill_body(engine.body, "", 0, f"{source}: body")
        url = httpx.URL(self._fill_url("q", 1))
        if url.scheme not in ("http", "https") or not url.host:
            raise InputError(f"{source}: url: expected http:// or https:// and a host")
        self.client = httpx.Client(headers=headers, timeout=engine.timeout)

    def shown_url(self) -> str:
        """The endpoint without its query string or user info (either may hold a key)."""
        url = httpx.URL(self.url.replace("{query}", "").replace("{k}", ""))
        return f"{url.scheme}://{url.host}{f':{url.port}' if url.port else ''}{url.path}"

    def _fill_url(self, query: str, k: int) -> str:
        fields = {"query": quote(query, safe=""), "k": str(k)}
        return fill_text(self.engine.url, fields, f"{self.source}: url")

    def _request(self, query: str, k: int) -> httpx.Response:
        url = self._fill_url(query, k)
        body = self.engine.body
        payload = fill_body(body, query, k, f"{self.source}: body") if body is not None else None
        return self.client.request(self.engine.method, url, json=payload)

    def ask(self, qid: str, query: str, k: int) -> Any:
        """The JSON answer to one query, after up to ``retries`` retries."""
        retries = self.engine.retries
        for attempt in range(retries + 1):
            wait = self.engine.retry_wait * 2**attempt
            try:
                response = self._request(query, k)
            except httpx.TimeoutException:
                problem = f"no answer within {self.engine.timeout:g} s (timeout)"
            except httpx.TransportError as exc:
                problem = f"cannot connect ({type(exc).__name__})"
            else:
                if 300 <= response.status_code < 400:
                    raise EngineError(self._redirected(qid, response))
                if response.status_code < 400:
                    return self._json(qid, response)
                problem = f"HTTP {response.status_code}"
                if response.status_code != 429 and response.status_code < 500:
                    raise EngineError(self._failure(qid, problem, response, tried=False))
                told = retry_after(response.headers.get("retry-after"))  # 0 included
                wait = wait if told is None else told
            if attempt < retries:
                logger.warning("query %s: %s from %s; retrying", qid, problem, self.shown_url())
                time.sleep(min(wait, RETRY_WAIT_CAP))
        raise EngineError(self._failure(qid, problem, None, tried=True))

    def _redirected(self, qid: str, response: httpx.Response) -> str:
        """A 3xx is never followed: the request's headers (an API key) would go wherever it
        points, another host included, and its body is not the endpoint's answer."""
        location = response.headers.get("location")
        where = "(no Location header)"
        if location:
            target = response.request.url.join(location)
            port = f":{target.port}" if target.port else ""
            where = f"{target.scheme}://{target.host}{port}{target.path}"  # no query: a key?
        return (
            f"query {qid}: HTTP {response.status_code} from {self.shown_url()}: it redirects to "
            f"{where}; put the address it should ask in {self.source}'s url (redirects are not "
            "followed: the request's headers may hold a key)"
        )

    def _failure(self, qid: str, problem: str, response: Any, tried: bool) -> str:
        said = f" ({response.text[:200].strip()!r})" if response is not None else ""
        after = f" after {self.engine.retries} retries" if tried else ""
        return f"query {qid}: {problem}{said} from {self.shown_url()}{after}"

    def _json(self, qid: str, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            kind = response.headers.get("content-type", "no content type")
            raise EngineError(
                f"query {qid}: the answer from {self.shown_url()} is not JSON ({kind}: "
                f"{response.text[:80].strip()!r})"
            ) from None

    def close(self) -> None:
        self.client.close()


def retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait by a ``Retry-After`` header (RFC 9110, 10.2.3: whole seconds or an
    HTTP-date), within [0, RETRY_WAIT_CAP]; a date past is 0; None for no header or one that is
    neither (``-1``, ``nan``, a date that does not parse), where the backoff decides."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return min(float(value), RETRY_WAIT_CAP)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; an obsolete form may come without a zone
        when = when.replace(tzinfo=timezone.utc)
    seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return min(max(seconds, 0.0), RETRY_WAIT_CAP)


def _text(value: Any) -> str | None:
    """A hit's text as a document: a string, or a list of strings (highlights, chunks) joined."""
    if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
        value = "\n".join(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    return value if isinstance(value, str) and value.strip() else None


def parse_hits(engine: EngineConfig, source: str, qid: str, answer: Any, k: int) -> list[Hit]:
    """The first ``k`` hits of an answer; a path the answer does not hold is one line."""
    hits = resolve(answer, engine.hits)
    if not isinstance(hits, list):
        kind = "null" if hits is None else f"a {type(hits).__name__}"
        found = "matches nothing" if hits is MISSING else f"is {kind}, not a list,"
        raise InputError(
            f"{source}: path {engine.hits!r} {found} in the response to query {qid} "
            f"(top-level {keys_of(answer)})"
        )
    return [_hit(engine, source, qid, i, hit) for i, hit in enumerate(hits[:k], start=1)]


def _hit(engine: EngineConfig, source: str, qid: str, number: int, hit: Any) -> Hit:
    doc_id = resolve(hit, engine.id)
    if doc_id is MISSING or doc_id is None or isinstance(doc_id, dict | list):
        raise InputError(
            f"{source}: path {engine.id!r} matches no id in hit {number} of query {qid} "
            f"({keys_of(hit)})"
        )
    doc_id = str(doc_id)
    if engine.id_after and engine.id_after in doc_id:
        doc_id = doc_id.rsplit(engine.id_after, 1)[1]
    if not doc_id or any(c.isspace() for c in doc_id):
        raise InputError(
            f"query {qid}: hit {number}'s id {doc_id!r} is empty or holds whitespace, "
            "which a TREC run cannot hold"
        )
    score = None
    if engine.score is not None:
        score = resolve(hit, engine.score)
        number_like = isinstance(score, int | float) and not isinstance(score, bool)
        if not number_like or not math.isfinite(score):
            raise InputError(
                f"{source}: path {engine.score!r} matches no finite number in hit {number} of query "
                f"{qid} ({keys_of(hit)}); write `score: null` to rank by the engine's order"
            )
    text = _text(resolve(hit, engine.text)) if engine.text is not None else None
    return Hit(id=doc_id, score=score, text=text)
