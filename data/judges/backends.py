"""Judge backends behind one interface: ``run(pairs, on_result)`` calls ``on_result`` once per pair.

- ``openai``: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM server, Ollama,
  llama.cpp server, ...) through the ``openai`` SDK, asynchronously with a concurrency limit.
  The SDK retries 429, 5xx, connection errors and timeouts with exponential backoff and jitter and
  honours ``Retry-After``; we add a per-request timeout and re-ask when a reply cannot be parsed.
- ``azure``: the same through the SDK's Azure client (endpoint, deployment, api-version).
- ``hf``: a local transformers causal LM, batched. Direct-answer prompts (yes/no, one digit) are
  scored from the answer tokens' probabilities in one forward pass; other prompts generate.
- ``vllm``: offline batched generation (imported only when used).
- ``qrels``: existing human judgments with a grade mapping.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from data.beir import graded_qrels, read_qrels
from data.cli import bounded, choice
from data.judges.prompts import ParseError, Prompt, Verdict, parse_reply
from data.records import JudgeInfo, Judgment, Pair, Usage, document_text
from models.llm_client import (
    MalformedResponse,
    ServingSettings,
    endpoint_api_key,
    first_choice,
    first_token_logprobs,
    local_chat_model,
    openai_client,
    vllm_engine_for,
    vllm_first_logprobs,
)

logger = logging.getLogger(__name__)
BACKENDS = ("openai", "azure", "hf", "vllm", "qrels")
BATCH_BACKENDS = ("openai", "azure", "vllm")  # --batch: the Batch API, or vLLM's run_batch
# OpenAI's reasoning models reject temperature and max_tokens (o1, o3, o3-mini, o4-mini, gpt-5...).
REASONING_MODEL = re.compile(r"^(o\d|gpt-5)")
OnResult = Callable[[Judgment], None]
# Structured output, strictest first; a server that refuses one is asked with the next.
RESPONSE_FORMATS = ("json_schema", "json_object", "none")
# Words of a server's refusal of response_format (llama.cpp: "Input should be 'text' or
# 'json_object'"; others name the field or the schema).
_FORMAT_REFUSAL = re.compile(r"response_format|json_schema|json_object|schema", re.IGNORECASE)


@dataclass
class JudgeConfig(ServingSettings):
    """Which judge labels the pairs, and how it is asked."""

    backend: str = field(default="qrels", metadata={"help": f"One of {', '.join(BACKENDS)}."})
    model: str = field(
        default="",
        metadata={
            "help": "Model id (endpoint model, Azure deployment, local name/path such as smollm2-135m)."
        },
    )
    prompt: str = field(
        default="binary", metadata={"help": "Prompt name in data/prompts/ or a YAML path."}
    )
    # OpenAI-compatible endpoints (with ServingSettings')
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
        "Structured output asked of an OpenAI-compatible endpoint for JSON prompts (binary-cot, "
        "checklist): json_schema (OpenAI, vLLM, Ollama), json_object (llama.cpp's server), none "
        "(plain text; the same parser reads the JSON). A server that refuses the format asked is "
        "found on the run's first request and the next one down is used for the rest of the run.",
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
    logprobs: bool = field(
        default=True,
        metadata={
            "help": "Ask for the answer token's log-probabilities where the endpoint gives them "
            "(direct prompts): judgments carry P(relevant) for soft-target training."
        },
    )
    parse_retries: int = bounded(2, 0, help="Re-asks when a reply cannot be parsed.")
    # Sampling
    temperature: float = bounded(0.0, 0)
    samples: int = bounded(1, 1, help="Self-consistency: replies per pair, majority vote.")
    max_output_tokens: int | None = field(
        default=None, metadata={"help": "Default: the prompt's own limit."}
    )
    # Local models
    batch_size: int = bounded(8, 1, help="Pairs per forward pass (hf) or per call (vllm).")
    max_document_chars: int = bounded(6000, 1, help="Documents are cut to this many characters.")
    prefix_cache: bool = field(
        default=True,
        metadata={
            "help": "hf, direct prompts: compute the prompt and query shared by a query's pairs "
            "once (same probabilities; 1.5x the pairs/s on 300-character chunks)."
        },
    )
    # Human judgments
    qrels: str | None = field(default=None, metadata={"help": "qrels file for the qrels backend."})
    grade_map: str | None = field(
        default=None,
        metadata={
            "help": 'JSON map from qrels value to 0-3 grade, e.g. {"1": 2} for binary qrels.'
        },
    )
    unjudged: str = field(
        default="error", metadata={"help": "Pairs missing from the qrels: error or zero."}
    )
    # Batch API
    batch: bool = field(
        default=False,
        metadata={
            "help": "openai / azure: send the pairs through the provider's Batch API (about half "
            "the price; results within the completion window); vllm: vLLM's offline run_batch. "
            "Submitted batches are recorded beside --out and polled again by a re-run."
        },
    )
    batch_completion_window: str = field(default="24h", metadata={"help": "Batch API window."})
    batch_max_requests: int = bounded(50000, 1, help="Requests per batch (the provider's limit).")
    batch_max_bytes: int = bounded(
        200_000_000, 1, help="Bytes per batch request file (the provider's limit)."
    )
    batch_poll_seconds: float = bounded(30.0, 0, help="Seconds between polls of a batch.")
    batch_retry: str = choice(
        "batch",
        ("batch", "sync", "none"),
        "Pairs whose reply is not an answer (or whose request failed): asked again in a later "
        "batch (up to parse_retries times), synchronously, or left as error records.",
    )
    batch_price_factor: float = bounded(
        0.5, 0, help="Batch price as a share of the synchronous price, for the cost estimate."
    )
    # Cost
    price_input_per_mtok: float = field(
        default=0.0, metadata={"help": "Price per million input tokens."}
    )
    price_output_per_mtok: float = field(
        default=0.0, metadata={"help": "Price per million output tokens."}
    )

    @property
    def is_reasoning(self) -> bool:
        if self.reasoning != "auto":
            return self.reasoning == "yes"
        return bool(REASONING_MODEL.match(self.model.rsplit("/", 1)[-1].lower()))

    def sampling_settings(self, prompt: Prompt) -> dict[str, Any]:
        """What changes the judge's output besides the pair: part of every cache key."""
        settings: dict[str, Any] = {
            "temperature": self.temperature,
            "samples": self.samples,
            "max_output_tokens": self.max_output_tokens or prompt.max_output_tokens,
            "max_document_chars": self.max_document_chars,
        }
        if self.backend in ("openai", "azure"):
            settings["response_format"] = self.response_format
            if self.is_reasoning:
                settings["reasoning_effort"] = self.reasoning_effort
        if self.backend in ("openai", "azure", "vllm") and not self.is_reasoning:
            settings["logprobs"] = self.logprobs and prompt.direct_answer
        if self.backend == "qrels":
            settings = {"qrels": self.qrels, "grade_map": self.grade_map, "unjudged": self.unjudged}
        return settings


def _json_option(value: str | dict | None, name: str) -> dict:
    if value is None or isinstance(value, dict):
        return value or {}
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}: expected a JSON object, got {value!r} ({exc.msg})") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{name}: expected a JSON object, got {value!r}")
    return parsed


def majority(verdicts: Sequence[Verdict]) -> Verdict:
    """Self-consistency: the most frequent grade (or label); agreement becomes the confidence."""
    if len(verdicts) == 1:
        return verdicts[0]
    keys = [v.grade if v.grade is not None else v.label for v in verdicts]
    winner, votes = Counter(keys).most_common(1)[0]
    chosen = next(v for v, k in zip(verdicts, keys, strict=True) if k == winner)
    return Verdict(
        grade=chosen.grade,
        label=chosen.label,
        confidence=votes / len(verdicts),
        rationale=chosen.rationale,
        p_relevant=(
            sum(v.p_relevant for v in verdicts) / len(verdicts)  # type: ignore[misc]
            if all(v.p_relevant is not None for v in verdicts)
            else sum(v.label for v in verdicts) / len(verdicts)
        ),
    )


class Backend:
    """Base: builds judgments; subclasses produce verdicts."""

    name = "base"

    def __init__(self, config: JudgeConfig, prompt: Prompt) -> None:
        self.config = config
        self.prompt = prompt
        self.max_output_tokens = config.max_output_tokens or prompt.max_output_tokens

    @property
    def judge_info(self) -> JudgeInfo:
        return JudgeInfo(
            model=self.config.model,
            prompt=self.prompt.name,
            prompt_version=self.prompt.version,
            backend=self.name,
        )

    def document(self, pair: Pair) -> str:
        text = document_text(pair.text, pair.title)
        limit = self.config.max_document_chars
        return text[:limit] if limit and len(text) > limit else text

    def chat_request(self, pair: Pair) -> dict[str, Any]:
        """The chat-completions request for ``pair`` (a synchronous call's body, a batch line's)."""
        messages = self.prompt.messages(pair.query, self.document(pair))
        return chat_request_body(self.config, self.prompt, self.max_output_tokens, messages)

    def judgment(
        self,
        pair: Pair,
        verdict: Verdict | None,
        usage: Usage | None = None,
        error: str | None = None,
    ) -> Judgment:
        base = pair.pair_fields()
        extra: dict[str, Any] = {"judge": self.judge_info, "usage": usage or Usage()}
        if verdict is None:
            return Judgment(**base, **extra, error=error or "no verdict")
        if verdict.p_relevant is not None:
            extra["p_relevant"] = verdict.p_relevant
        return Judgment(
            **base,
            **extra,
            grade=verdict.grade,
            label=verdict.label,
            confidence=verdict.confidence,
            rationale=verdict.rationale,
        )

    def judgment_from_replies(
        self,
        pair: Pair,
        replies: Sequence[str],
        usage: Usage,
        finished: Sequence[bool] | None = None,
    ) -> Judgment:
        """Parse every finished sampled reply; the majority verdict, or an error when none parses
        (a cut-off reply is read only for direct prompts, whose answer comes first: other text
        may stop mid-analysis)."""
        verdicts, problem = [], ""
        for index, text in enumerate(replies):
            if finished is not None and not finished[index] and not self.prompt.direct_answer:
                problem = "reply cut off at the token limit"
                continue
            try:
                verdicts.append(parse_reply(self.prompt, text))
            except ParseError as exc:
                problem = str(exc)
        if verdicts:
            return self.judgment(pair, majority(verdicts), usage)
        return self.judgment(pair, None, usage, error=f"unparseable: {problem}")

    def run(
        self, pairs: Sequence[Pair], on_result: OnResult
    ) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (clients, models)."""


class QrelsBackend(Backend):
    name = "qrels"

    def __init__(self, config: JudgeConfig, prompt: Prompt) -> None:
        super().__init__(config, prompt)
        if not config.qrels:
            raise ValueError("qrels: the qrels backend needs a qrels file (--qrels PATH)")
        grade_map = {int(k): int(v) for k, v in _json_option(config.grade_map, "grade_map").items()}
        # A teacher's labels train the student: binary qrels need an explicit map.
        self.qrels = graded_qrels(read_qrels(config.qrels), config.qrels, grade_map, infer=False)
        if config.unjudged not in ("error", "zero"):
            raise ValueError(f"unjudged: expected error or zero, got {config.unjudged!r}")

    @property
    def judge_info(self) -> JudgeInfo:
        return JudgeInfo(
            model=f"human:{os.path.basename(self.config.qrels or '')}",
            prompt="qrels",
            backend="qrels",
        )

    def run(self, pairs: Sequence[Pair], on_result: OnResult) -> None:
        for pair in pairs:
            value = self.qrels.get(pair.qid, {}).get(pair.doc_id)
            if value is None and self.config.unjudged == "zero":
                value = 0
            if value is None:
                on_result(self.judgment(pair, None, error="no human judgment for this pair"))
                continue
            grade = value
            if not 0 <= grade <= 3:
                on_result(
                    self.judgment(
                        pair, None, error=f"qrels value {value} maps to grade {grade}, outside 0-3"
                    )
                )
                continue
            from data.records import label_from_grade

            on_result(
                self.judgment(
                    pair, Verdict(grade=grade, label=label_from_grade(grade), confidence=1.0)
                )
            )


def answer_probability(prompt: Prompt, logprobs: Mapping[str, float]) -> float | None:
    """P(relevant) from the first answer token's alternatives, renormalised over the prompt's
    answers (yes/no, or grades 0-3 where relevant means >= 2); None when no answer is among them."""
    mass: dict[int, float] = {}
    for token, logprob in logprobs.items():
        word = token.strip().strip(".,!\"'*").lower()
        if word in prompt.answers:
            value = prompt.answers[word]
            mass[value] = mass.get(value, 0.0) + math.exp(logprob)
    return prompt.relevant_share(mass)


def chat_request_body(
    config: JudgeConfig, prompt: Prompt, max_output_tokens: int, messages: list[dict[str, str]]
) -> dict[str, Any]:
    """The chat-completions request for one pair: the synchronous calls and the batch lines alike
    (o-series rules, log-probabilities for direct prompts, structured output for JSON prompts)."""
    request: dict[str, Any] = {"model": config.model, "messages": messages}
    if config.is_reasoning:
        # Reasoning tokens count against max_completion_tokens: room for them and the answer.
        request["max_completion_tokens"] = max_output_tokens + config.reasoning_tokens
        if config.reasoning_effort:
            request["reasoning_effort"] = config.reasoning_effort
    else:
        request["temperature"] = config.temperature
        request[config.token_limit_field] = max_output_tokens
        if config.logprobs and prompt.direct_answer:
            request["logprobs"] = True
            request["top_logprobs"] = 5
    if prompt.json_schema and config.response_format == "json_schema":
        request["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": prompt.name.replace("-", "_"),
                "schema": prompt.json_schema,
                "strict": True,
            },
        }
    elif prompt.json_schema and config.response_format == "json_object":
        request["response_format"] = {"type": "json_object"}
    return request


def verdict_from_response(prompt: Prompt, response: Any) -> tuple[Verdict | None, str, Usage]:
    """(verdict, problem, usage) of one chat completion: the verdict with P(relevant) from the
    answer token's log-probabilities where given, or None and why (malformed, cut off, not an
    answer)."""
    usage = Usage()
    if getattr(response, "usage", None):
        usage = Usage(
            input_tokens=response.usage.prompt_tokens or 0,
            output_tokens=response.usage.completion_tokens or 0,
        )
    try:
        text, finished = first_choice(response)
    except MalformedResponse as exc:
        return None, str(exc), usage
    if not finished and not prompt.direct_answer:
        # Text inside an unfinished analysis is not a verdict; a direct answer comes first, so a
        # cut-off direct reply still holds it.
        return None, "reply cut off at the token limit (finish_reason=length)", usage
    try:
        verdict = parse_reply(prompt, text)
    except ParseError as exc:
        return None, str(exc), usage
    p_relevant = answer_probability(prompt, first_token_logprobs(response))
    if p_relevant is not None:
        verdict = dataclasses.replace(verdict, p_relevant=p_relevant)
    return verdict, "", usage


class OpenAIBackend(Backend):
    """Chat completions against any OpenAI-compatible endpoint (or Azure OpenAI)."""

    name = "openai"

    def __init__(self, config: JudgeConfig, prompt: Prompt) -> None:
        super().__init__(config, prompt)
        import openai

        if not config.model:
            raise ValueError("model: the openai backend needs a model name (--model)")
        if config.response_format not in RESPONSE_FORMATS:
            raise ValueError(
                f"response_format: expected one of {', '.join(RESPONSE_FORMATS)}, got "
                f"{config.response_format!r}"
            )
        # Until the server has accepted a request with this run's response_format, a refusal
        # of it is looked for (once: the first pair goes alone, without the SDK's retries).
        self.format_settled = not (prompt.json_schema and config.response_format != "none")
        self.openai = openai
        self.headers = _json_option(config.extra_headers, "extra_headers")
        if config.backend == "azure":
            if not config.azure_endpoint:
                raise ValueError("azure_endpoint: the azure backend needs --azure_endpoint")
            self.name = "azure"
        endpoint_api_key(config.api_key_env, config.base_url)  # a missing key fails before any work
        self.client: Any = None

    def _new_client(self) -> Any:
        # A client per run: its connections belong to that run's event loop (asyncio.run).
        azure = self.config.backend == "azure"
        return openai_client(
            self.config,
            headers=self.headers,
            azure_endpoint=self.config.azure_endpoint if azure else None,
            azure_api_version=self.config.azure_api_version,
        )

    async def _create(self, pair: Pair) -> Any:
        """One chat completion for ``pair``. While the response format is not settled, the
        request goes without the SDK's retries (a refusal is not worth six), and a refusal of the
        format is answered by the next format down, remembered for the rest of the run."""
        while not self.format_settled:
            request = self.chat_request(pair)
            if "response_format" not in request:
                self.format_settled = True
                break
            try:
                response = await self.client.with_options(max_retries=0).chat.completions.create(
                    **request
                )
            except self.openai.APIError as exc:
                status = getattr(exc, "status_code", None)
                if status not in (None, 401, 403, 429) and _FORMAT_REFUSAL.search(str(exc)):
                    self._fall_back(request["response_format"]["type"], exc)
                    continue
                return await self._retry(request, exc)  # not about the format
            self.format_settled = True
            return response
        return await self.client.chat.completions.create(**self.chat_request(pair))

    async def _retry(self, request: dict[str, Any], exc: Any) -> Any:
        """The SDK's remaining retries of a request whose first try failed (it counts as one),
        after the wait the SDK would have made; an error the SDK never retries is final."""
        status = getattr(exc, "status_code", None)
        retryable = status is None or status in (408, 409, 429) or status >= 500
        if not retryable or self.config.max_retries == 0:
            raise exc
        response = getattr(exc, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        try:
            wait = min(float(retry_after), 60.0) if retry_after else 0.5
        except ValueError:
            wait = 0.5
        await asyncio.sleep(wait)
        client = self.client.with_options(max_retries=self.config.max_retries - 1)
        return await client.chat.completions.create(**request)

    def _fall_back(self, refused: str, exc: Any) -> None:
        fallback = RESPONSE_FORMATS[RESPONSE_FORMATS.index(refused) + 1]
        logger.warning(
            "%s refused response_format %s (%s: %s); asking with %s for the rest of this run "
            "(--response_format %s skips this check)",
            self.config.base_url or self.config.azure_endpoint or "the endpoint",
            refused,
            exc.status_code,
            str(exc)[:200],
            fallback,
            fallback,
        )
        self.config = dataclasses.replace(self.config, response_format=fallback)

    async def _judge(self, pair: Pair, semaphore: asyncio.Semaphore) -> Judgment:
        usage = Usage()
        verdicts: list[Verdict] = []
        async with semaphore:
            for _ in range(max(1, self.config.samples)):
                problem = ""
                for _attempt in range(self.config.parse_retries + 1):
                    try:
                        response = await self._create(pair)
                        first_choice(response)  # a malformed body fails this pair alone
                    except self.openai.APIError as exc:
                        # The SDK already retried what is retryable; this pair failed.
                        status = getattr(exc, "status_code", None)
                        return self.judgment(
                            pair,
                            None,
                            usage,
                            error=f"request failed ({status or type(exc).__name__}): {exc}",
                        )
                    except ValueError as exc:  # invalid JSON, text/plain: this pair alone fails
                        detail = (
                            str(exc)
                            if isinstance(exc, MalformedResponse)
                            else f"malformed response body: invalid JSON ({exc})"
                        )
                        return self.judgment(pair, None, usage, error=f"request failed: {detail}")
                    verdict, problem, used = verdict_from_response(self.prompt, response)
                    usage.input_tokens += used.input_tokens
                    usage.output_tokens += used.output_tokens
                    if verdict is None:
                        continue
                    verdicts.append(verdict)
                    break
                else:
                    return self.judgment(
                        pair,
                        None,
                        usage,
                        error=f"unparseable after {self.config.parse_retries + 1} attempt(s): {problem}",
                    )
        return self.judgment(pair, majority(verdicts), usage)

    def run(self, pairs: Sequence[Pair], on_result: OnResult) -> None:
        async def main() -> None:
            self.client = self._new_client()
            semaphore = asyncio.Semaphore(max(1, self.config.concurrency))
            rest = list(pairs)
            if rest and not self.format_settled:  # the format is settled on one request
                on_result(await self._judge(rest.pop(0), semaphore))
            tasks = [asyncio.ensure_future(self._judge(pair, semaphore)) for pair in rest]
            try:
                for finished in asyncio.as_completed(tasks):
                    on_result(await finished)
            finally:
                for task in tasks:
                    task.cancel()
                await self.client.close()

        asyncio.run(main())


class HFBackend(Backend):
    """A local transformers causal LM (``smollm2-135m`` offline, or any hub/local model)."""

    name = "hf"

    def __init__(self, config: JudgeConfig, prompt: Prompt) -> None:
        super().__init__(config, prompt)
        if not config.model:
            raise ValueError("model: the hf backend needs a model (e.g. smollm2-135m)")
        self.model, self.tokenizer, _ = local_chat_model(config, config.model)

    def encode(self, pair: Pair) -> list[int]:
        from models.generation import chat_input_ids

        return chat_input_ids(self.tokenizer, self.prompt.messages(pair.query, self.document(pair)))

    def answer_token_ids(self) -> list[int]:
        ids = []
        for answer in self.prompt.answers:
            tokens = self.tokenizer(answer, add_special_tokens=False)["input_ids"]
            ids.append(tokens[0])
        if len(set(ids)) != len(ids):
            raise ValueError(
                f"prompt {self.prompt.id}: answers {list(self.prompt.answers)} share a first token"
            )
        return ids

    def run(self, pairs: Sequence[Pair], on_result: OnResult) -> None:
        step = max(1, self.config.batch_size) * 8
        for start in range(0, len(pairs), step):
            chunk = pairs[start : start + step]
            if self.prompt.direct_answer:
                self._score(chunk, on_result)
            else:
                self._generate(chunk, on_result)

    def _score(self, pairs: Sequence[Pair], on_result: OnResult) -> None:
        import numpy as np

        from models.scoring import answer_token_probabilities, common_prefix_lengths

        input_ids = [self.encode(p) for p in pairs]
        probs, _mass = answer_token_probabilities(
            self.model,
            input_ids,
            self.answer_token_ids(),
            pad_token_id=self.tokenizer.pad_token_id,
            batch_size=self.config.batch_size,
            # A query's pairs share the prompt and the query: computed once per query.
            prefix_lengths=(
                common_prefix_lengths(input_ids, [p.qid for p in pairs])
                if self.config.prefix_cache
                else None
            ),
        )
        values = list(self.prompt.answers.values())
        for pair, ids, row in zip(pairs, input_ids, probs, strict=True):
            best = int(np.argmax(row))
            verdict = self.prompt.verdict_from_answer(values[best], float(row[best]))
            mass: dict[int, float] = {}
            for value, p in zip(values, row, strict=True):  # several words may share a value
                mass[value] = mass.get(value, 0.0) + float(p)
            p_relevant = self.prompt.relevant_share(mass)
            verdict = Verdict(verdict.grade, verdict.label, verdict.confidence, None, p_relevant)
            on_result(self.judgment(pair, verdict, Usage(input_tokens=len(ids), output_tokens=1)))

    def _generate(self, pairs: Sequence[Pair], on_result: OnResult) -> None:
        from models.generation import generate

        batch_size = max(1, self.config.batch_size)
        samples = max(1, self.config.samples)
        for start in range(0, len(pairs), batch_size):
            chunk = pairs[start : start + batch_size]
            generations = generate(
                self.model,
                self.tokenizer,
                [self.encode(p) for p in chunk],
                max_new_tokens=self.max_output_tokens,
                samples=samples,
                temperature=self.config.temperature,
            )
            for pair, generation in zip(chunk, generations, strict=True):
                usage = Usage(
                    input_tokens=generation.input_tokens, output_tokens=generation.output_tokens
                )
                on_result(
                    self.judgment_from_replies(pair, generation.texts, usage, generation.finished)
                )


class VLLMBackend(Backend):
    """vLLM offline batched generation (``pip install vllm``; imported only when used)."""

    name = "vllm"

    def __init__(self, config: JudgeConfig, prompt: Prompt) -> None:
        super().__init__(config, prompt)
        self.vllm, self.llm = vllm_engine_for(config, config.model)
        self.want_logprobs = config.logprobs and prompt.direct_answer

    def run(self, pairs: Sequence[Pair], on_result: OnResult) -> None:
        params = self.vllm.SamplingParams(
            n=max(1, self.config.samples),
            temperature=self.config.temperature,
            max_tokens=self.max_output_tokens,
            logprobs=5 if self.want_logprobs else None,
        )
        step = max(1, self.config.batch_size) * 64
        for start in range(0, len(pairs), step):
            chunk = pairs[start : start + step]
            conversations = [self.prompt.messages(p.query, self.document(p)) for p in chunk]
            outputs = self.llm.chat(conversations, params, use_tqdm=False)
            for pair, output in zip(chunk, outputs, strict=True):
                usage = Usage(
                    input_tokens=len(output.prompt_token_ids or []),
                    output_tokens=sum(len(c.token_ids) for c in output.outputs),
                )
                judgment = self.judgment_from_replies(
                    pair,
                    [c.text for c in output.outputs],
                    usage,
                    [c.finish_reason != "length" for c in output.outputs],
                )
                probabilities = [
                    answer_probability(self.prompt, vllm_first_logprobs(c)) for c in output.outputs
                ]
                if judgment.error is None and all(p is not None for p in probabilities):
                    judgment = judgment.model_copy(
                        update={"p_relevant": sum(probabilities) / len(probabilities)}  # type: ignore[arg-type]
                    )
                on_result(judgment)


def make_backend(config: JudgeConfig, prompt: Prompt) -> Backend:
    if config.backend in ("openai", "azure"):
        return OpenAIBackend(config, prompt)
    if config.backend == "hf":
        return HFBackend(config, prompt)
    if config.backend == "vllm":
        return VLLMBackend(config, prompt)
    if config.backend == "qrels":
        return QrelsBackend(config, prompt)
    raise ValueError(f"backend: expected one of {', '.join(BACKENDS)}, got {config.backend!r}")
