"""Judges behind one interface: ``run(pairs, on_result)`` calls ``on_result`` once per pair.

- :class:`ChatJudge`: the judge prompt and its parser on top of the project's one LLM client
  (``models.llm_client.ChatClient``: OpenAI-compatible endpoints, Azure OpenAI, a local
  transformers model, vLLM). With a local transformers model, direct-answer prompts (yes/no, one
  digit) are scored from the answer tokens' probabilities in one forward pass instead.
- :class:`QrelsBackend`: existing human judgments with a grade mapping.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.cli import bounded, choice
from core.errors import InputError
from core.records import JudgeInfo, Judgment, Pair, Usage, document_text, label_from_grade
from data.beir import graded_qrels, read_qrels
from data.judges.prompts import ParseError, Prompt, Verdict, parse_reply
from models.llm_client import (
    BATCH_BACKENDS,
    CHAT_BACKENDS,
    REMOTE_BACKENDS,
    ChatClient,
    ChatRequest,
    ChatSettings,
    Reply,
    json_option,
    reply_from_response,
)

logger = logging.getLogger(__name__)
BACKENDS = (*CHAT_BACKENDS, "qrels")
__all__ = ["BACKENDS", "BATCH_BACKENDS", "JudgeConfig", "make_backend"]
OnResult = Callable[[Judgment], None]
# Tokens of {"answer": "..."} around a direct answer (6 to 9 in common tokenizers, with spaces).
STRUCTURED_WRAPPER_TOKENS = 16


@dataclass
class JudgeConfig(ChatSettings):
    """Which judge labels the pairs, and how it is asked."""

    backend: str = choice("qrels", BACKENDS, "Who judges: an LLM's backend, or qrels (people).")
    prompt: str = field(
        default="binary", metadata={"help": "Prompt name in data/prompts/ or a YAML path."}
    )
    logprobs: bool = field(
        default=True,
        metadata={
            "help": "Ask for the answer token's log-probabilities where the endpoint gives them "
            "(direct prompts): judgments carry P(relevant) for soft-target training."
        },
    )
    # Sampling
    temperature: float = bounded(0.0, 0)
    samples: int = bounded(1, 1, help="Self-consistency: replies per pair, majority vote.")
    max_output_tokens: int | None = field(
        default=None, metadata={"help": "Default: the prompt's own limit."}
    )
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
            raise InputError("qrels: the qrels backend needs a qrels file (--qrels PATH)")
        grade_map = {int(k): int(v) for k, v in json_option(config.grade_map, "grade_map").items()}
        # A teacher's labels train the student: binary qrels need an explicit map.
        self.qrels = graded_qrels(read_qrels(config.qrels), config.qrels, grade_map, infer=False)
        if config.unjudged not in ("error", "zero"):
            raise InputError(f"unjudged: expected error or zero, got {config.unjudged!r}")

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
            elif not 0 <= value <= 3:
                error = f"qrels value {value} maps to grade {value}, outside 0-3"
                on_result(self.judgment(pair, None, error=error))
            else:
                verdict = Verdict(grade=value, label=label_from_grade(value), confidence=1.0)
                on_result(self.judgment(pair, verdict))


def answer_probability(prompt: Prompt, logprobs: Mapping[str, float]) -> float | None:
    """P(relevant) from the first answer token's alternatives, renormalised over the prompt's
    answers (yes/no, or grades 0-3 where relevant means >= 2); None when no answer is among them."""
    mass: dict[int, float] = {}
    for token, logprob in logprobs.items():
        word = token.strip().strip(".,!\"'*{}:").lower()
        if word in prompt.answers:
            value = prompt.answers[word]
            mass[value] = mass.get(value, 0.0) + math.exp(logprob)
    return prompt.relevant_share(mass)


def verdict_of(prompt: Prompt, text: str, finished: bool, logprobs: Mapping[str, float]) -> Verdict:
    """One reply's verdict, with P(relevant) from the answer token's log-probabilities where
    given; ParseError when it holds none (a cut-off reply is read only for direct prompts, whose
    answer comes first: other text may stop mid-analysis)."""
    if not finished and not prompt.direct_answer:
        raise ParseError("reply cut off at the token limit (finish_reason=length)")
    verdict = parse_reply(prompt, text)
    p_relevant = answer_probability(prompt, logprobs)
    return verdict if p_relevant is None else dataclasses.replace(verdict, p_relevant=p_relevant)


@dataclass
class ResponseVerdict:
    """What one chat completion body (a Batch API result line's) says about its pair: a verdict,
    or the problem; ``final`` when asking again cannot help (the model refused)."""

    verdict: Verdict | None
    problem: str
    usage: Usage
    final: bool = False


def verdict_from_response(prompt: Prompt, response: Any) -> ResponseVerdict:
    """The verdict of one chat completion body, or why there is none."""
    try:
        reply = reply_from_response(response)
    except ValueError as exc:
        return ResponseVerdict(None, str(exc), Usage())
    usage = Usage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens)
    if reply.refusal is not None:
        return ResponseVerdict(None, f"the model refused: {reply.refusal[:300]}", usage, True)
    try:
        verdict = verdict_of(prompt, reply.text, reply.finished[0], reply.logprobs[0])
    except ParseError as exc:
        return ResponseVerdict(None, str(exc), usage)
    return ResponseVerdict(verdict, "", usage)


class ChatJudge(Backend):
    """The judge prompt and its parser over :class:`ChatClient` (any chat backend)."""

    def __init__(self, config: JudgeConfig, prompt: Prompt, *, load: bool = True) -> None:
        super().__init__(config, prompt)
        self.client = ChatClient(config)
        self.name = config.backend
        if load and config.backend == "hf":
            self.client.local_model()  # a missing model fails before any work

    def document(self, pair: Pair) -> str:
        text = document_text(pair.text, pair.title)
        limit = self.config.max_document_chars
        return text[:limit] if limit and len(text) > limit else text

    def request(self, pair: Pair) -> ChatRequest:
        c = self.config
        return ChatRequest(
            messages=self.prompt.messages(pair.query, self.document(pair)),
            max_tokens=self.max_output_tokens,
            temperature=c.temperature,
            samples=max(1, c.samples),
            logprobs=c.logprobs and self.prompt.direct_answer and c.backend != "hf",
            json_schema=self.prompt.json_schema,
            schema_name=self.prompt.name,
            # A direct answer asked in its shape comes as {"answer": "yes"}: room for the wrapper.
            structured_max_tokens=(
                self.max_output_tokens + STRUCTURED_WRAPPER_TOKENS
                if self.prompt.direct_answer
                else None
            ),
        )

    def chat_request(self, pair: Pair) -> dict[str, Any]:
        """The chat-completions body for ``pair`` (a synchronous call's, a batch line's)."""
        return self.client.body(self.request(pair))

    def usable(self, text: str, finished: bool) -> str | None:
        try:
            verdict_of(self.prompt, text, finished, {})
        except ParseError as exc:
            return str(exc)
        return None

    def judgment_from_reply(self, pair: Pair, reply: Reply) -> Judgment:
        """The majority verdict of the reply's samples that hold one, or an error record."""
        usage = Usage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens)
        if reply.error is not None:
            return self.judgment(pair, None, usage, error=reply.error)
        verdicts, problem = [], ""
        for text, finished, logprobs in zip(
            reply.texts, reply.finished, reply.logprobs, strict=True
        ):
            try:
                verdicts.append(verdict_of(self.prompt, text, finished, logprobs))
            except ParseError as exc:
                problem = str(exc)
        if verdicts:
            return self.judgment(pair, majority(verdicts), usage)
        tries = f" after {reply.attempts} attempt(s)" if self.name in REMOTE_BACKENDS else ""
        return self.judgment(pair, None, usage, error=f"unparseable{tries}: {problem}")

    def run(self, pairs: Sequence[Pair], on_result: OnResult) -> None:
        if self.name == "hf" and self.prompt.direct_answer:
            return self._score(pairs, on_result)
        # The client reports each reply (hf: each batch) as it comes; vLLM's engine answers a
        # whole call at once, so it gets chunks whose judgments are kept as each ends.
        step = max(1, self.config.batch_size) * 64 if self.name == "vllm" else len(pairs) or 1
        for start in range(0, len(pairs), step):
            chunk = pairs[start : start + step]
            self.client.complete(
                [self.request(pair) for pair in chunk],
                lambda index, reply, chunk=chunk: on_result(
                    self.judgment_from_reply(chunk[index], reply)
                ),
                usable=self.usable,
            )
        return None

    def _score(self, pairs: Sequence[Pair], on_result: OnResult) -> None:
        """Direct prompts on a local model: the answer tokens' probabilities, one forward pass."""
        import numpy as np

        from models.generation import chat_input_ids
        from models.scoring import answer_token_probabilities, common_prefix_lengths

        model, tokenizer, _ = self.client.local_model()
        answer_ids = self.answer_token_ids(tokenizer)
        values = list(self.prompt.answers.values())
        step = max(1, self.config.batch_size) * 8
        for start in range(0, len(pairs), step):
            chunk = pairs[start : start + step]
            input_ids = [
                chat_input_ids(tokenizer, self.prompt.messages(p.query, self.document(p)))
                for p in chunk
            ]
            probs, _mass = answer_token_probabilities(
                model,
                input_ids,
                answer_ids,
                pad_token_id=tokenizer.pad_token_id,
                batch_size=self.config.batch_size,
                # A query's pairs share the prompt and the query: computed once per query.
                prefix_lengths=(
                    common_prefix_lengths(input_ids, [p.qid for p in chunk])
                    if self.config.prefix_cache
                    else None
                ),
            )
            for pair, ids, row in zip(chunk, input_ids, probs, strict=True):
                best = int(np.argmax(row))
                verdict = self.prompt.verdict_from_answer(values[best], float(row[best]))
                mass: dict[int, float] = {}
                for value, p in zip(values, row, strict=True):  # words may share a value
                    mass[value] = mass.get(value, 0.0) + float(p)
                verdict = dataclasses.replace(
                    verdict, rationale=None, p_relevant=self.prompt.relevant_share(mass)
                )
                usage = Usage(input_tokens=len(ids), output_tokens=1)
                on_result(self.judgment(pair, verdict, usage))

    def answer_token_ids(self, tokenizer: Any) -> list[int]:
        ids = [tokenizer(a, add_special_tokens=False)["input_ids"][0] for a in self.prompt.answers]
        if len(set(ids)) != len(ids):
            raise InputError(
                f"prompt {self.prompt.id}: answers {list(self.prompt.answers)} share a first token"
            )
        return ids

    def close(self) -> None:
        self.client.close()


def make_backend(config: JudgeConfig, prompt: Prompt) -> Backend:
    if config.backend == "qrels":
        return QrelsBackend(config, prompt)
    if config.backend not in BACKENDS:
        raise InputError(f"backend: expected one of {', '.join(BACKENDS)}, got {config.backend!r}")
    return ChatJudge(config, prompt)
