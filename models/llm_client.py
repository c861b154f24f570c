"""How the project reaches an LLM, for the teacher's judge backends (``data.judges.backends``)
and the RAG reader (``eval.downstream.reader``) alike: the serving settings, an OpenAI-compatible
(or Azure) client, a local transformers chat model, a vLLM engine, and the reading of a chat
completion's reply and log-probabilities."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from data.cli import bounded


@dataclass
class ServingSettings:
    """How an LLM is reached, shared by the judge (JudgeConfig) and the RAG reader
    (eval.downstream.reader.ReaderConfig): an OpenAI-compatible endpoint, or a local hf / vLLM model."""

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


class MalformedResponse(ValueError):
    """A 200 reply whose body is not a chat completion (invalid JSON, text/plain, no choices)."""


def first_choice(response: Any) -> tuple[str, bool]:
    """(text, finished) of a chat completion's first choice; MalformedResponse for anything else."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        shown = response if isinstance(response, str) else type(response).__name__
        raise MalformedResponse(f"malformed response body: {str(shown)[:120]!r}")
    message = getattr(choices[0], "message", None)
    text = getattr(message, "content", None) or ""
    return text, getattr(choices[0], "finish_reason", "stop") != "length"


def first_token_logprobs(response: Any) -> dict[str, float]:
    """{token text: log-probability} of the first answer token's alternatives ({} if absent)."""
    try:
        first = response.choices[0].logprobs.content[0]
    except (AttributeError, IndexError, TypeError):
        return {}
    return {alt.token: alt.logprob for alt in (first.top_logprobs or [])}


def endpoint_api_key(api_key_env: str, base_url: str | None) -> str:
    """The key for an OpenAI-compatible endpoint: from ``$api_key_env``; a local server
    (``base_url`` given) takes any key, and the SDK refuses to start without one."""
    api_key = os.environ.get(api_key_env) or ("not-needed" if base_url else None)
    if api_key is None:
        raise ValueError(f"api_key_env: set ${api_key_env} to the endpoint's key")
    return api_key


def openai_client(
    settings: ServingSettings,
    *,
    headers: dict[str, str] | None = None,
    azure_endpoint: str | None = None,
    azure_api_version: str | None = None,
    asynchronous: bool = True,
) -> Any:
    """An OpenAI (or, with ``azure_endpoint``, Azure OpenAI) client, async unless told otherwise;
    the SDK retries 429, 5xx, connection errors and timeouts with backoff and honours Retry-After."""
    import openai

    options: dict[str, Any] = {
        "api_key": endpoint_api_key(settings.api_key_env, settings.base_url),
        "max_retries": settings.max_retries,
        "timeout": settings.request_timeout,
        "default_headers": headers or None,
    }
    if azure_endpoint:
        azure = openai.AsyncAzureOpenAI if asynchronous else openai.AzureOpenAI
        return azure(azure_endpoint=azure_endpoint, api_version=azure_api_version, **options)
    client = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return client(base_url=settings.base_url, **options)


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
        raise ValueError(f"model {model!r} has no chat template; use an instruct model")
    return loaded, tokenizer, device


def vllm_engine_for(settings: ServingSettings, model: str) -> tuple[Any, Any]:
    """(the vllm module, an offline engine) for ``model`` with the settings' parallelism."""
    from models.generation import vllm_engine

    return vllm_engine(
        model,
        dtype=settings.dtype,
        tensor_parallel_size=settings.tensor_parallel_size,
        max_model_len=settings.max_model_len,
        gpu_memory_utilization=settings.gpu_memory_utilization,
    )


def vllm_first_logprobs(completion: Any) -> dict[str, float]:
    """{decoded token: log-probability} at a vLLM completion's first position ({} if absent)."""
    steps = getattr(completion, "logprobs", None) or []
    if not steps:
        return {}
    return {(entry.decoded_token or ""): entry.logprob for entry in steps[0].values()}


@dataclass
class Completion:
    """One conversation's reply from :class:`ChatModel`; ``error`` when the request failed (the
    reply is then empty and nothing was paid for it)."""

    text: str
    finished: bool = True  # False: the reply ran into the token limit
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None


OnCompletion = Callable[[int, Completion], None]  # (conversation index, its reply)


class ChatModel:
    """Plain chat completion over the same backends as the judge and the reader: a list of
    conversations in, one :class:`Completion` per conversation out, in order.

    For callers that need free text rather than a verdict (the synthetic-query writer).
    ``reasoning`` follows OpenAI's reasoning models: no temperature, and ``max_completion_tokens``
    with ``reasoning_tokens`` of room before the reply."""

    def __init__(
        self,
        settings: ServingSettings,
        backend: str,
        model: str,
        *,
        reasoning: bool = False,
        reasoning_tokens: int = 4096,
        azure_endpoint: str | None = None,
        azure_api_version: str | None = None,
        batch_size: int = 8,
        max_batch_tokens: int | None = None,
    ) -> None:
        if backend not in CHAT_BACKENDS:
            raise ValueError(
                f"backend: expected one of {', '.join(CHAT_BACKENDS)}, got {backend!r}"
            )
        if not model:
            raise ValueError("model: the chat model needs a name (--model)")
        if backend == "azure" and not azure_endpoint:
            raise ValueError("azure_endpoint: the azure backend needs --azure_endpoint")
        self.settings = settings
        self.backend = backend
        self.model = model
        self.reasoning = reasoning
        self.reasoning_tokens = reasoning_tokens
        self.azure_endpoint = azure_endpoint
        self.azure_api_version = azure_api_version
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self._local: Any = None
        if backend in ("openai", "azure"):
            endpoint_api_key(settings.api_key_env, settings.base_url)  # fails before any work

    def complete(
        self,
        conversations: list[list[dict[str, str]]],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        on_result: OnCompletion | None = None,
    ) -> list[Completion]:
        """One completion per conversation, in order. ``on_result(index, completion)`` is called
        as each reply arrives (as the judge backends' ``on_result`` is), so a caller can keep
        every finished reply before the whole list is done (a kill loses only those in flight)."""
        if not conversations:
            return []
        out: list[Completion | None] = [None] * len(conversations)

        def arrived(index: int, completion: Completion) -> None:
            out[index] = completion
            if on_result is not None:
                on_result(index, completion)

        if self.backend == "hf":
            self._complete_hf(conversations, max_tokens, temperature, arrived)
        elif self.backend == "vllm":
            self._complete_vllm(conversations, max_tokens, temperature, arrived)
        else:
            self._complete_openai(conversations, max_tokens, temperature, arrived)
        return [c for c in out if c is not None]

    def local_device(self) -> str:
        """The device a local (hf) model runs on; loads it."""
        if self._local is None:
            self._local = local_chat_model(self.settings, self.model)
        return self._local[2]

    def _complete_hf(
        self, conversations, max_tokens: int, temperature: float, arrived: OnCompletion
    ) -> None:
        from models.generation import chat_input_ids, generate
        from models.scoring import length_sorted_batches

        self.local_device()
        model, tokenizer, _device = self._local
        ids = [chat_input_ids(tokenizer, messages) for messages in conversations]
        # Long prompts go fewer at a time (max_batch_tokens): 32 x 450 tokens runs 1.4x slower
        # on a 2-core CPU than the same prompts 8 or 16 at a time.
        lengths = [len(x) for x in ids]
        for batch in length_sorted_batches(lengths, self.batch_size, self.max_batch_tokens):
            replies = generate(
                model,
                tokenizer,
                [ids[i] for i in batch],
                max_new_tokens=max_tokens,
                temperature=temperature,
            )
            for i, reply in zip(batch, replies, strict=True):
                arrived(
                    i,
                    Completion(
                        reply.texts[0], reply.finished[0], reply.input_tokens, reply.output_tokens
                    ),
                )

    def _complete_vllm(
        self, conversations, max_tokens: int, temperature: float, arrived: OnCompletion
    ) -> None:
        if self._local is None:
            self._local = vllm_engine_for(self.settings, self.model)
        vllm, engine = self._local
        params = vllm.SamplingParams(temperature=temperature, max_tokens=max_tokens)
        outputs = engine.chat(conversations, params, use_tqdm=False)
        for i, o in enumerate(outputs):
            arrived(
                i,
                Completion(
                    o.outputs[0].text,
                    getattr(o.outputs[0], "finish_reason", "stop") != "length",
                    len(o.prompt_token_ids or []),
                    len(o.outputs[0].token_ids),
                ),
            )

    def request(self, messages: list[dict[str, str]], max_tokens: int, temperature: float) -> dict:
        """The chat-completions request body for one conversation."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.reasoning:
            body["max_completion_tokens"] = max_tokens + self.reasoning_tokens
        else:
            body["temperature"] = temperature
            body["max_tokens"] = max_tokens
        return body

    def _complete_openai(
        self, conversations, max_tokens: int, temperature: float, arrived: OnCompletion
    ) -> None:
        import asyncio

        import openai

        async def ask(client: Any, semaphore: asyncio.Semaphore, messages) -> Completion:
            async with semaphore:
                try:
                    response = await client.chat.completions.create(
                        **self.request(messages, max_tokens, temperature)
                    )
                    text, finished = first_choice(response)
                except openai.APIError as exc:  # the SDK already retried what is retryable
                    status = getattr(exc, "status_code", None)
                    return Completion(
                        "", error=f"request failed ({status or type(exc).__name__}): {exc}"
                    )
                except ValueError as exc:  # a 200 whose body is not a completion
                    return Completion("", error=f"request failed: {exc}")
            usage = response.usage
            return Completion(
                text,
                finished,
                (usage.prompt_tokens or 0) if usage else 0,
                (usage.completion_tokens or 0) if usage else 0,
            )

        async def indexed(index: int, coroutine: Any) -> tuple[int, Completion]:
            return index, await coroutine

        async def main() -> None:
            client = openai_client(
                self.settings,
                azure_endpoint=self.azure_endpoint if self.backend == "azure" else None,
                azure_api_version=self.azure_api_version,
            )
            semaphore = asyncio.Semaphore(self.settings.concurrency)
            tasks = [
                asyncio.ensure_future(indexed(i, ask(client, semaphore, m)))
                for i, m in enumerate(conversations)
            ]
            try:
                for finished in asyncio.as_completed(tasks):
                    arrived(*await finished)
            finally:
                for task in tasks:
                    task.cancel()
                await client.close()

        asyncio.run(main())


CHAT_BACKENDS = ("hf", "openai", "azure", "vllm")
