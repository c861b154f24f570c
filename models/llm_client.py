"""The project's one way to an LLM: the teacher's judge (``data.judges``), the synthetic-query
writer (``data.synthesize``) and the RAG reader (``measure.labelers.reader``) are each a prompt
and a parser on top of :class:`ChatClient`.

- Backend names are declared here once (:data:`CHAT_BACKENDS`, :data:`BATCH_BACKENDS`).
- ``openai`` / ``azure``: any OpenAI-compatible chat-completions endpoint (OpenAI, a vLLM server,
  Ollama, llama.cpp's server) or Azure OpenAI, asynchronously with a concurrency limit. The SDK
  retries 429, 5xx, connection errors and timeouts with backoff and honours ``Retry-After``; a
  reply the caller cannot use is asked again (``parse_retries``); a server that refuses
  structured output is found on the run's first request and asked the next way down.
- ``hf``: a local transformers chat model, batched by length.
- ``vllm``: vLLM's offline engine (imported only when used).

Request bodies (reasoning-model rules, log-probabilities, structured output) are built by
:meth:`ChatClient.body` for a synchronous call and a Batch API line alike, and a chat completion's
body is read by :func:`reply_from_response` in both.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.cli import bounded, choice
from core.errors import InputError

logger = logging.getLogger(__name__)

CHAT_BACKENDS = ("openai", "azure", "hf", "vllm")
REMOTE_BACKENDS = ("openai", "azure")
BATCH_BACKENDS = ("openai", "azure", "vllm")  # the provider's Batch API, or vLLM's run_batch
# OpenAI's reasoning models reject temperature and max_tokens (o1, o3, o3-mini, o4-mini, gpt-5...).
REASONING_MODEL = re.compile(r"^(o\d|gpt-5)")
# Structured output, strictest first; a server that refuses one is asked with the next.
RESPONSE_FORMATS = ("json_schema", "json_object", "none")
# Words of a server's refusal of response_format (llama.cpp: "Input should be 'text' or
# 'json_object'"; others name the field or the schema).
_FORMAT_REFUSAL = re.compile(r"response_format|json_schema|json_object|schema", re.IGNORECASE)


@dataclass
class ServingSettings:
    """How an LLM is reached: an OpenAI-compatible endpoint, or a local hf / vLLM model."""

    # OpenAI-compatible endpoints
    base_url: str | None = field(
        default=None, metadata={"help": "Endpoint base URL (default: the SDK's)."}
    )
    api_key_env: str = field(
        default="OPENAI_API_KEY", metadata={"help": "Environment variable with the key."}
    )
    concurrency: int = bounded(8, 1, help="Requests in flight at once.")
    max_retries: int = bounded(6, 0, help="Retries on 429/5xx/connection errors/timeouts.")
    request_timeout: float = bounded(60.0, 0, help="Seconds per request.", open_low=True)
    # Local models
    dtype: str = field(default="auto", metadata={"help": "float32, bfloat16, float16 or auto."})
    device: str | None = field(
        default=None, metadata={"help": "cpu or cuda (default: cuda when available)."}
    )
    # vLLM
    tensor_parallel_size: int = bounded(
        1, 1, help="GPUs one vLLM model is split over (a 70B: 4-8)."
    )
    max_model_len: int | None = bounded(
        None, 1, help="vLLM context length (default: the model's; lower it to fit the KV cache)."
    )
    gpu_memory_utilization: float = bounded(
        0.9, 0, 1, help="Share of each GPU's memory vLLM may take.", open_low=True
    )


@dataclass
class ChatSettings(ServingSettings):
    """Which chat model answers and how it is asked, whatever asks it (judge, writer, reader)."""

    backend: str = choice("openai", CHAT_BACKENDS, "Where the model runs.")
    model: str = field(
        default="",
        metadata={
            "help": "Model id (endpoint model, Azure deployment, local name/path such as smollm2-135m)."
        },
    )
    extra_headers: str | None = field(
        default=None, metadata={"help": 'JSON object of headers, e.g. {"X-Org": "a"}.'}
    )
    azure_endpoint: str | None = field(
        default=None, metadata={"help": "Azure OpenAI endpoint URL."}
    )
    azure_api_version: str = field(default="2024-10-21")
    response_format: str = choice(
        "json_schema",
        RESPONSE_FORMATS,
        "Structured output asked of an OpenAI-compatible endpoint, in every judge prompt's answer "
        "shape (binary-cot's and checklist's JSON, binary's and trec-graded's {\"answer\": ...}): "
        "json_schema (OpenAI, vLLM, Ollama, llama.cpp's llama-server), json_object with the "
        "schema (llama-cpp-python's server), none (plain text; the same parser reads either). A "
        "server that refuses the format asked is found on the run's first request and the next "
        "one down is used for the rest of the run.",
    )
    token_limit_field: str = field(
        default="max_tokens",
        metadata={"help": "max_tokens, or max_completion_tokens (reasoning models use it always)."},
    )
    reasoning: str = choice(
        "auto",
        ("auto", "yes", "no"),
        "Reasoning model (o1/o3/o4/gpt-5): no temperature or logprobs, max_completion_tokens with "
        "room for reasoning tokens. auto: from the model name.",
    )
    reasoning_effort: str | None = field(
        default=None, metadata={"help": "low, medium or high (reasoning models only)."}
    )
    reasoning_tokens: int = bounded(
        4096, 0, help="Completion tokens a reasoning model may spend before its answer."
    )
    parse_retries: int = bounded(2, 0, help="Re-asks when a reply cannot be used (endpoints).")
    batch_size: int = bounded(8, 1, help="Prompts per forward pass (hf) or per call (vllm).")
    max_batch_tokens: int | None = bounded(
        None, 1, help="hf: prompt tokens per generate call (long prompts go fewer at a time)."
    )

    @property
    def is_reasoning(self) -> bool:
        if self.reasoning != "auto":
            return self.reasoning == "yes"
        return bool(REASONING_MODEL.match(self.model.rsplit("/", 1)[-1].lower()))


@dataclass
class ChatRequest:
    """One conversation to answer: ``samples`` replies of up to ``max_tokens`` tokens."""

    messages: list[dict[str, str]]
    max_tokens: int
    temperature: float = 0.0
    samples: int = 1
    logprobs: bool = False  # the first token's top alternatives, where the backend gives them
    json_schema: dict[str, Any] | None = None  # structured output, where the endpoint takes it
    schema_name: str = "reply"
    # max_tokens when the reply is asked in the schema's shape (a one-word answer wrapped in
    # {"answer": ...} needs room for the wrapper); None: max_tokens
    structured_max_tokens: int | None = None


@dataclass
class Reply:
    """A request's replies, one per sample; ``error`` when the request failed (nothing usable)."""

    texts: list[str] = field(default_factory=list)
    finished: list[bool] = field(default_factory=list)  # False: cut off at the token limit
    logprobs: list[dict[str, float]] = field(default_factory=list)  # answer token, per sample
    input_tokens: int = 0  # every attempt's, as billed
    output_tokens: int = 0
    attempts: int = 0
    error: str | None = None
    refusal: str | None = None  # the model declined (the message's refusal field): final

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""

    def add(self, other: Reply) -> None:
        """Count ``other`` (one attempt) as billed: its tokens and one more attempt."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.attempts += 1


OnReply = Callable[[int, Reply], None]  # (request index, its reply), as each arrives
# (text, finished) -> why the reply cannot be used, or None: such a reply is asked again.
Usable = Callable[[str, bool], str | None]


class MalformedResponse(ValueError):
    """A 200 reply whose body is not a chat completion (invalid JSON, text/plain, no choices, an
    error object)."""


def _field(value: Any, name: str) -> Any:
    """``value[name]`` of a dict, else the attribute (an SDK object keeps unknown fields too)."""
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def provider_error(body: Any) -> str | None:
    """The provider's own message in a reply's body, or None: an ``error`` object (OpenAI,
    OpenRouter, proxies: ``{"error": {"message": ...}}``, or a string) at the top or in a choice,
    or vLLM's ``{"object": "error", "message": ...}``."""
    places = [body, *(_field(body, "choices") or [])] if not isinstance(body, str) else []
    for place in places:
        error = _field(place, "error")
        if isinstance(error, str) and error.strip():
            return error.strip()
        if error:
            message = _field(error, "message") or json.dumps(error, default=str)
            code = _field(error, "code") or _field(error, "type")
            return f"{message} ({code})" if code else str(message)
    if _field(body, "object") == "error" and _field(body, "message"):
        return str(_field(body, "message"))
    return None


def reply_from_response(response: Any) -> Reply:
    """One chat completion (an SDK object, or a Batch API result body) as a one-sample Reply;
    MalformedResponse, with the provider's message where the body has one, when it is not one. A
    refusal (the message's ``refusal`` field, structured output's way to decline) is kept as such."""
    choices = getattr(response, "choices", None)
    problem = provider_error(response)
    if problem is not None:
        raise MalformedResponse(f"a 200 response with an error in its body: {problem[:300]}")
    if not isinstance(choices, list) or not choices:
        if isinstance(choices, list):
            raise MalformedResponse("a 200 response with no choices (an empty list)")
        shown = response if isinstance(response, str) else type(response).__name__
        raise MalformedResponse(f"malformed response body: {str(shown)[:120]!r}")
    first = choices[0]
    message = getattr(first, "message", None)
    text = getattr(message, "content", None) or ""
    refusal = getattr(message, "refusal", None)
    usage = getattr(response, "usage", None)
    return Reply(
        texts=[text],
        finished=[getattr(first, "finish_reason", "stop") != "length"],
        logprobs=[answer_token_logprobs(first)],
        input_tokens=(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0,
        output_tokens=(getattr(usage, "completion_tokens", 0) or 0) if usage else 0,
        attempts=1,
        refusal=str(refusal) if refusal else None,
    )


def answer_token_logprobs(choice_: Any) -> dict[str, float]:
    """{token text: log-probability} of the alternatives at a choice's answer token ({} if
    absent): its first token, or in a JSON reply (``{"answer": "yes"}``, constrained output) the
    first token of the first value (after the first key's colon)."""
    try:
        content = list(choice_.logprobs.content)
    except (AttributeError, TypeError):
        return {}
    if not content:
        return {}
    at, before = content[0], ""
    if content[0].token.lstrip().startswith("{"):
        at = None
        for entry in content:
            if ":" in before and entry.token.strip().strip('{}[]":, '):
                at = entry
                break
            before += entry.token
    if at is None:
        return {}
    return {alt.token: alt.logprob for alt in (at.top_logprobs or [])}


def json_option(value: str | dict | None, name: str) -> dict:
    """A flag that holds a JSON object (headers, a grade map), checked."""
    if value is None or isinstance(value, dict):
        return value or {}
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}: expected a JSON object, got {value!r} ({exc.msg})") from None
    if not isinstance(parsed, dict):
        raise InputError(f"{name}: expected a JSON object, got {value!r}")
    return parsed


def endpoint_api_key(api_key_env: str, base_url: str | None) -> str:
    """The key for an OpenAI-compatible endpoint: from ``$api_key_env``; a local server
    (``base_url`` given) takes any key, and the SDK refuses to start without one."""
    api_key = os.environ.get(api_key_env) or ("not-needed" if base_url else None)
    if api_key is None:
        raise InputError(f"api_key_env: set ${api_key_env} to the endpoint's key")
    return api_key


def openai_client(settings: ChatSettings, *, asynchronous: bool = True) -> Any:
    """An OpenAI (or, for the azure backend, Azure OpenAI) client, async unless told otherwise;
    the SDK retries 429, 5xx, connection errors and timeouts with backoff and honours Retry-After."""
    import openai

    options: dict[str, Any] = {
        "api_key": endpoint_api_key(settings.api_key_env, settings.base_url),
        "max_retries": settings.max_retries,
        "timeout": settings.request_timeout,
        "default_headers": json_option(settings.extra_headers, "extra_headers") or None,
    }
    if settings.backend == "azure":
        azure = openai.AsyncAzureOpenAI if asynchronous else openai.AzureOpenAI
        return azure(
            azure_endpoint=settings.azure_endpoint,
            api_version=settings.azure_api_version,
            **options,
        )
    client = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    made = client(base_url=settings.base_url, **options)
    # Said once: without --base_url the SDK takes OPENAI_BASE_URL, else api.openai.com (paid).
    source = (
        "--base_url"
        if settings.base_url
        else ("OPENAI_BASE_URL" if os.environ.get("OPENAI_BASE_URL") else "the SDK's default")
    )
    logger.info("endpoint: %s (from %s)", made.base_url, source)
    return made


def local_chat_model(settings: ServingSettings, model: str) -> tuple[Any, Any, str]:
    """(model, tokenizer, device) of a local transformers instruct model, in eval mode on the
    settings' device (CUDA when present) and dtype (``auto``: bf16 where fast)."""
    import torch

    from models.resolve import inference_dtype, load_model

    device = settings.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = inference_dtype(device) if settings.dtype == "auto" else getattr(torch, settings.dtype)
    loaded, tokenizer = load_model(model, task="causal-lm", dtype=dtype)
    loaded.to(device).eval()
    if tokenizer.chat_template is None:
        raise InputError(f"model {model!r} has no chat template; use an instruct model")
    return loaded, tokenizer, device


def vllm_first_logprobs(completion: Any) -> dict[str, float]:
    """{decoded token: log-probability} at a vLLM completion's first position ({} if absent)."""
    steps = getattr(completion, "logprobs", None) or []
    if not steps:
        return {}
    return {(entry.decoded_token or ""): entry.logprob for entry in steps[0].values()}


def check_settings(settings: ChatSettings) -> None:
    """What a backend needs, checked before any work (a missing key, model or endpoint)."""
    if settings.backend not in CHAT_BACKENDS:
        raise InputError(
            f"backend: expected one of {', '.join(CHAT_BACKENDS)}, got {settings.backend!r}"
        )
    if not settings.model:
        raise InputError(f"model: the {settings.backend} backend needs a model name (--model)")
    if settings.response_format not in RESPONSE_FORMATS:
        raise InputError(
            f"response_format: expected one of {', '.join(RESPONSE_FORMATS)}, got "
            f"{settings.response_format!r}"
        )
    if settings.backend == "azure" and not settings.azure_endpoint:
        raise InputError("azure_endpoint: the azure backend needs --azure_endpoint")
    if settings.backend in REMOTE_BACKENDS:
        json_option(settings.extra_headers, "extra_headers")
        endpoint_api_key(settings.api_key_env, settings.base_url)


class ChatClient:
    """Requests in, one :class:`Reply` per request out, in order, over any backend.

    ``on_reply(index, reply)`` is called as each reply arrives, so a caller keeps every finished
    reply before the whole list is done (a kill loses only those in flight)."""

    def __init__(self, settings: ChatSettings) -> None:
        check_settings(settings)
        self.settings = settings
        self.response_format = settings.response_format
        self._local: Any = None
        self._client: Any = None
        self._format_settled = False

    @property
    def name(self) -> str:
        return self.settings.backend

    @property
    def accepted_response_format(self) -> str | None:
        """The structured output an endpoint took in this client's run: the one asked for, or
        the one it fell back to after a refusal (json_schema, json_object, none); None for a
        local backend, or before an endpoint answered a request that asked for it."""
        if self.name not in ("openai", "azure") or not self._format_settled:
            return None
        return self.response_format

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """The chat-completions body of one sample of ``request`` (a synchronous call's, a batch
        line's): o-series rules, log-probabilities, structured output."""
        s = self.settings
        body: dict[str, Any] = {"model": s.model, "messages": request.messages}
        structured = bool(request.json_schema) and self.response_format != "none"
        max_tokens = request.max_tokens
        if structured and request.structured_max_tokens:
            max_tokens = max(max_tokens, request.structured_max_tokens)
        if s.is_reasoning:
            # Reasoning tokens count against max_completion_tokens: room for them and the answer.
            body["max_completion_tokens"] = max_tokens + s.reasoning_tokens
            if s.reasoning_effort:
                body["reasoning_effort"] = s.reasoning_effort
        else:
            body["temperature"] = request.temperature
            body[s.token_limit_field] = max_tokens
            if request.logprobs:
                body["logprobs"] = True
                body["top_logprobs"] = 5
        if structured and self.response_format == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name.replace("-", "_"),
                    "schema": request.json_schema,
                    "strict": True,
                },
            }
        elif structured and self.response_format == "json_object":
            # llama.cpp's server and llama-cpp-python constrain json_object to a "schema" here.
            body["response_format"] = {"type": "json_object", "schema": request.json_schema}
        return body

    def complete(
        self,
        requests: Sequence[ChatRequest],
        on_reply: OnReply | None = None,
        usable: Usable | None = None,
    ) -> list[Reply]:
        """Every request's reply, in order; an endpoint's reply that ``usable`` rejects is asked
        again up to ``parse_retries`` times (a local model at temperature 0 would repeat it)."""
        out: list[Reply | None] = [None] * len(requests)

        def arrived(index: int, reply: Reply) -> None:
            out[index] = reply
            if on_reply is not None:
                on_reply(index, reply)

        if not requests:
            return []
        if self.name == "hf":
            self._complete_hf(requests, arrived)
        elif self.name == "vllm":
            self._complete_vllm(requests, arrived)
        else:
            asyncio.run(self._complete_remote(requests, arrived, usable))
        return [reply for reply in out if reply is not None]

    def local_model(self) -> tuple[Any, Any, str]:
        """(model, tokenizer, device) of the hf backend's model; loaded on first use."""
        if self._local is None:
            self._local = local_chat_model(self.settings, self.settings.model)
        return self._local

    def close(self) -> None:
        self._local = None

    def _complete_hf(self, requests: Sequence[ChatRequest], arrived: OnReply) -> None:
        from models.generation import chat_input_ids, generate
        from models.scoring import length_sorted_batches

        model, tokenizer, _device = self.local_model()
        ids = [chat_input_ids(tokenizer, request.messages) for request in requests]
        # Long prompts go fewer at a time (max_batch_tokens): 32 x 450 tokens runs 1.4x slower
        # on a 2-core CPU than the same prompts 8 or 16 at a time.
        lengths = [len(x) for x in ids]
        settings = self.settings
        for batch in length_sorted_batches(lengths, settings.batch_size, settings.max_batch_tokens):
            for group in _same_sampling(requests, batch):
                first = requests[group[0]]
                replies = generate(
                    model,
                    tokenizer,
                    [ids[i] for i in group],
                    max_new_tokens=first.max_tokens,
                    samples=first.samples,
                    temperature=first.temperature,
                )
                for i, made in zip(group, replies, strict=True):
                    arrived(
                        i,
                        Reply(
                            made.texts,
                            made.finished,
                            [{} for _ in made.texts],
                            made.input_tokens,
                            made.output_tokens,
                            attempts=1,
                        ),
                    )

    def _complete_vllm(self, requests: Sequence[ChatRequest], arrived: OnReply) -> None:
        if self._local is None:
            from models.generation import vllm_engine

            s = self.settings
            self._local = vllm_engine(
                s.model,
                dtype=s.dtype,
                tensor_parallel_size=s.tensor_parallel_size,
                max_model_len=s.max_model_len,
                gpu_memory_utilization=s.gpu_memory_utilization,
            )
        vllm, engine = self._local
        for group in _same_sampling(requests, list(range(len(requests)))):
            first = requests[group[0]]
            params = vllm.SamplingParams(
                n=first.samples,
                temperature=first.temperature,
                max_tokens=first.max_tokens,
                logprobs=5 if first.logprobs else None,
            )
            outputs = engine.chat([requests[i].messages for i in group], params, use_tqdm=False)
            for i, output in zip(group, outputs, strict=True):
                arrived(
                    i,
                    Reply(
                        [c.text for c in output.outputs],
                        [getattr(c, "finish_reason", "stop") != "length" for c in output.outputs],
                        [vllm_first_logprobs(c) for c in output.outputs],
                        len(output.prompt_token_ids or []),
                        sum(len(c.token_ids) for c in output.outputs),
                        attempts=1,
                    ),
                )

    async def _complete_remote(
        self, requests: Sequence[ChatRequest], arrived: OnReply, usable: Usable | None
    ) -> None:
        # A client per run: its connections belong to that run's event loop (asyncio.run).
        self._client = openai_client(self.settings)
        semaphore = asyncio.Semaphore(self.settings.concurrency)
        order = list(range(len(requests)))
        try:
            if self._format_unsettled(requests):
                first = order.pop(0)  # the format is settled on one request, alone
                arrived(first, await self._ask(requests[first], semaphore, usable))
            tasks = [
                asyncio.ensure_future(self._indexed(i, requests[i], semaphore, usable))
                for i in order
            ]
            try:
                for finished in asyncio.as_completed(tasks):
                    arrived(*await finished)
            finally:
                for task in tasks:
                    task.cancel()
        finally:
            await self._client.close()

    def _format_unsettled(self, requests: Sequence[ChatRequest]) -> bool:
        """Whether a refusal of structured output is still to be looked for."""
        wanted = self.response_format != "none" and any(r.json_schema for r in requests)
        return wanted and not self._format_settled

    async def _indexed(
        self, index: int, request: ChatRequest, semaphore: asyncio.Semaphore, usable: Usable | None
    ) -> tuple[int, Reply]:
        return index, await self._ask(request, semaphore, usable)

    async def _ask(
        self, request: ChatRequest, semaphore: asyncio.Semaphore, usable: Usable | None
    ) -> Reply:
        """Every sample of one request, each asked again while ``usable`` rejects it."""
        import openai

        total = Reply()
        async with semaphore:
            for _ in range(request.samples):
                for _attempt in range(self.settings.parse_retries + 1 if usable else 1):
                    try:
                        one = reply_from_response(await self._create(request))
                    except openai.APIError as exc:  # the SDK already retried what is retryable
                        status = getattr(exc, "status_code", None)
                        total.error = f"request failed ({status or type(exc).__name__}): {exc}"
                        return total
                    except ValueError as exc:  # invalid JSON, text/plain: this request alone
                        detail = (
                            str(exc)
                            if isinstance(exc, MalformedResponse)
                            else f"malformed response body: invalid JSON ({exc})"
                        )
                        total.error = f"request failed: {detail}"
                        return total
                    total.add(one)
                    if one.refusal is not None:  # an answer, not a slip: asking again costs
                        total.refusal = one.refusal
                        total.error = f"the model refused: {one.refusal[:300]}"
                        return total
                    if usable is None or usable(one.text, one.finished[0]) is None:
                        break
                total.texts += one.texts
                total.finished += one.finished
                total.logprobs += one.logprobs
        return total

    async def _create(self, request: ChatRequest) -> Any:
        """One chat completion. Until the server has taken a structured-output request, one goes
        without the SDK's retries (a refusal is not worth six), and a refusal of the format is
        answered by the next format down, remembered for the rest of the run."""
        import openai

        while not self._format_settled:
            body = self.body(request)
            if "response_format" not in body:
                self._format_settled = True
                break
            try:
                response = await self._client.with_options(max_retries=0).chat.completions.create(
                    **body
                )
            except openai.APIError as exc:
                status = getattr(exc, "status_code", None)
                if status not in (None, 401, 403, 429) and _FORMAT_REFUSAL.search(str(exc)):
                    self._fall_back(body["response_format"]["type"], exc)
                    continue
                return await self._retry(body, exc)  # not about the format
            self._format_settled = True
            return response
        return await self._client.chat.completions.create(**self.body(request))

    async def _retry(self, body: dict[str, Any], exc: Any) -> Any:
        """The SDK's remaining retries of a request whose first try failed (it counts as one),
        after the wait the SDK would have made; an error the SDK never retries is final."""
        status = getattr(exc, "status_code", None)
        retryable = status is None or status in (408, 409, 429) or status >= 500
        if not retryable or self.settings.max_retries == 0:
            raise exc
        response = getattr(exc, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        try:
            wait = min(float(retry_after), 60.0) if retry_after else 0.5
        except ValueError:
            wait = 0.5
        await asyncio.sleep(wait)
        client = self._client.with_options(max_retries=self.settings.max_retries - 1)
        return await client.chat.completions.create(**body)

    def _fall_back(self, refused: str, exc: Any) -> None:
        fallback = RESPONSE_FORMATS[RESPONSE_FORMATS.index(refused) + 1]
        logger.warning(
            "%s refused response_format %s (%s: %s); asking with %s for the rest of this run "
            "(--response_format %s skips this check)",
            self.settings.base_url or self.settings.azure_endpoint or "the endpoint",
            refused,
            exc.status_code,
            str(exc)[:200],
            fallback,
            fallback,
        )
        self.response_format = fallback


def _same_sampling(requests: Sequence[ChatRequest], indices: list[int]) -> list[list[int]]:
    """``indices`` grouped by sampling settings (one generate call takes one set)."""
    groups: dict[tuple, list[int]] = {}
    for i in indices:
        r = requests[i]
        groups.setdefault((r.max_tokens, r.samples, r.temperature, r.logprobs), []).append(i)
    return list(groups.values())
