"""The RAG system's reader: an LLM that answers a question from retrieved passages.

eRAG asks it once per retrieved document (that document alone); the end-to-end reference asks it
once per ranked list (the top-k together, in-prompt augmentation). Backends:

- ``hf``: a local transformers causal LM (default: the embedded SmolLM2-135M-Instruct), batched;
- ``openai``: any OpenAI-compatible chat endpoint (OpenAI, a ``vllm serve`` or Ollama server);
- ``vllm``: vLLM offline batched generation (imported only when used).

:class:`CachedReader` keeps every answer in an append-only JSONL keyed by the reader's settings,
the question and the passages, with the time, tokens and peak memory it cost, so a killed run
resumes without asking again and costs are reported from the run that paid them.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from core.cli import bounded, choice
from core.errors import InputError
from core.io import KeyedCache, fingerprint
from data.qa import extract_short_answer
from models.llm_client import CHAT_BACKENDS, ChatClient, ChatRequest, ChatSettings


@dataclass
class ReaderConfig(ChatSettings):
    """Which LLM reads the retrieved passages, and how it is asked (a short-answer QA prompt)."""

    backend: str = choice("hf", CHAT_BACKENDS, "Where the reader runs.")
    model: str = field(
        default="smollm2-135m",
        metadata={"help": "Local name/path (hf, vllm) or the endpoint's model name (openai)."},
    )
    system: str = field(
        # Short on purpose: the system message is in every eRAG prompt (a 20-token one cost 11%
        # of the reader's time on 300-character chunks, for the same F1).
        default="Answer with the shortest span from the passages.",
        metadata={"help": "System message."},
    )
    user: str = field(
        default="{passages}\nQuestion: {question}\nShort answer:",
        metadata={"help": "User message with {passages} and {question} slots."},
    )
    max_new_tokens: int = bounded(16, 1, help="Answer length limit in tokens.")
    temperature: float = bounded(0.0, 0)
    max_passage_chars: int = bounded(2000, 1, help="Each passage is cut to this many characters.")
    batch_size: int = bounded(32, 1, help="Prompts per generate call (hf) or per vLLM call.")
    max_batch_tokens: int | None = bounded(
        4096, 1, help="hf: prompt tokens per generate call (long prompts go fewer at a time)."
    )

    def __post_init__(self) -> None:
        if self.backend not in CHAT_BACKENDS:
            raise InputError(f"backend: expected one of {CHAT_BACKENDS}, got {self.backend!r}")
        for slot in ("{passages}", "{question}"):
            if slot not in self.user:
                raise InputError(f"user: the template needs a {slot} slot")

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str], ignore: Sequence[str] = ()) -> ReaderConfig:
        """The reader a YAML of these fields describes; keys in ``ignore`` belong to its caller
        (eRAG's ``answers:``)."""
        import yaml

        from core.cli import check_bounds, check_yaml_config

        check_yaml_config(str(path), [cls], others=ignore)
        settings = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        settings = {k: v for k, v in settings.items() if k not in ignore}
        unknown = set(settings) - set(cls.__dataclass_fields__)
        if unknown:
            raise InputError(f"{path}: unknown reader settings {sorted(unknown)}")
        config = cls(**settings)
        check_bounds(config)
        return config

    @property
    def id(self) -> str:
        """What changes an answer besides the question and passages (the cache key)."""
        keys = ("backend", "model", "system", "user", "max_new_tokens", "temperature")
        settings = {k: getattr(self, k) for k in keys} | {"chars": self.max_passage_chars}
        return f"reader:{fingerprint(json.dumps(settings, sort_keys=True))}"

    def messages(self, question: str, passages: Sequence[str]) -> list[dict[str, str]]:
        blocks = []
        for number, passage in enumerate(passages, start=1):
            text = passage[: self.max_passage_chars]
            blocks.append(f"Passage: {text}\n" if len(passages) == 1 else f"[{number}] {text}\n")
        user = self.user.format(passages="".join(blocks), question=question)
        return [
            {"role": "system", "content": self.system.strip()},
            {"role": "user", "content": user.strip()},
        ]


@dataclass
class ReaderOutput:
    reply: str
    answer: str
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0  # this prompt's share of its batch's wall time
    peak_memory_mib: float = 0.0  # its batch's peak memory above the reader's idle footprint


@contextmanager
def peak_memory(device: str) -> Iterator[dict[str, float]]:
    """Peak memory of the block in MiB above its start: CUDA allocations on a GPU, the process's
    resident set on a CPU (sampled every 5 ms from /proc, where there is one); 0 elsewhere."""
    result = {"peak_mib": 0.0}
    if device not in ("cpu",) and not device.startswith("cuda"):
        yield result  # a server or vLLM's own allocator: not this process's to measure
        return
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        yield result
        torch.cuda.synchronize()
        result["peak_mib"] = (torch.cuda.max_memory_allocated() - base) / 2**20
        return
    statm = Path("/proc/self/statm")
    if not statm.exists():
        yield result
        return
    page = os.sysconf("SC_PAGE_SIZE")

    def rss() -> int:
        return int(statm.read_text().split()[1]) * page

    base, peak, stop = rss(), [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss())
            stop.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield result
    finally:
        stop.set()
        sampler.join()
        result["peak_mib"] = max(0, max(peak[0], rss()) - base) / 2**20


class Reader:
    """Answers (question, passages) items one batch at a time."""

    device = "cpu"

    def __init__(self, config: ReaderConfig) -> None:
        self.config = config

    @property
    def id(self) -> str:
        return self.config.id

    def answer_batch(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[ReaderOutput]:
        start = time.perf_counter()
        with peak_memory(self.device) as memory:
            outputs = self._answer(items)
        share = (time.perf_counter() - start) / max(1, len(items))
        for output in outputs:
            output.seconds = share
            output.peak_memory_mib = memory["peak_mib"]
        return outputs

    def _answer(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[ReaderOutput]:
        raise NotImplementedError  # pragma: no cover - abstract


def _output(reply: str, input_tokens: int, output_tokens: int) -> ReaderOutput:
    return ReaderOutput(
        reply=reply,
        answer=extract_short_answer(reply),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


class ChatReader(Reader):
    """A reader over the project's one LLM client (``models.llm_client.ChatClient``): a local
    transformers model, an OpenAI-compatible endpoint or a vLLM engine."""

    def __init__(self, config: ReaderConfig) -> None:
        super().__init__(config)
        self.chat = ChatClient(config)
        if config.backend == "hf":
            self.device = self.chat.local_model()[2]
            # One-time set-up (thread pools, lazy buffers) kept out of the first batch's cost.
            self._answer([("warm up", ["warm up"])])
        else:
            self.device = "remote" if config.backend in ("openai", "azure") else config.backend

    def _answer(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[ReaderOutput]:
        c = self.config
        completions = self.chat.complete(
            [
                ChatRequest(
                    c.messages(q, p), max_tokens=c.max_new_tokens, temperature=c.temperature
                )
                for q, p in items
            ]
        )
        failed = next((r.error for r in completions if r.error), None)
        if failed:
            raise RuntimeError(f"reader request failed ({c.model}): {failed}")
        return [_output(r.text, r.input_tokens, r.output_tokens) for r in completions]


def make_reader(config: ReaderConfig) -> Reader:
    return ChatReader(config)


def _cached_output(line: dict) -> ReaderOutput:
    output = ReaderOutput(**line["output"])
    # Read the answer off the reply again: a better extraction needs no new call.
    output.answer = extract_short_answer(output.reply)
    return output


class CachedReader:
    """Answers cached in an append-only JSONL (one flushed line per answer); the model is loaded
    only when something is missing."""

    def __init__(self, config: ReaderConfig, cache_path: str | os.PathLike[str]) -> None:
        self.config = config
        self.cache_path = Path(cache_path)
        self.cache = KeyedCache(self.cache_path, _cached_output)
        self._reader: Reader | None = None
        self.calls = 0  # batches sent to the model in this process

    @classmethod
    def in_folder(cls, config: ReaderConfig, folder: str | os.PathLike[str]) -> CachedReader:
        """The cache of this reader's answers in ``folder`` (one file per reader setting)."""
        return cls(config, Path(folder) / f"reader-{config.id.removeprefix('reader:')}.jsonl")

    @property
    def reader(self) -> Reader:
        if self._reader is None:
            self._reader = make_reader(self.config)
        return self._reader

    def key(self, question: str, passages: Sequence[str]) -> str:
        return fingerprint(self.config.id, question, *passages)

    def answer(
        self, items: Sequence[tuple[str, Sequence[str]]], desc: str = "reading"
    ) -> list[ReaderOutput]:
        keys = [self.key(q, p) for q, p in items]
        item_of = dict(zip(keys, items, strict=True))
        missing = {key: item_of[key] for key in self.cache.missing(keys)}
        if missing:
            # Similar lengths batch together: less padding in every generate call.
            todo = sorted(missing.items(), key=lambda kv: len(kv[1][0]) + sum(map(len, kv[1][1])))
            step = self.config.batch_size
            with tqdm(total=len(todo), desc=desc, unit="answer") as bar:
                for start in range(0, len(todo), step):
                    batch = todo[start : start + step]
                    outputs = self.reader.answer_batch([item for _, item in batch])
                    self.calls += 1
                    for (key, _), output in zip(batch, outputs, strict=True):
                        self.cache.put(key, {"output": asdict(output)})
                    bar.update(len(batch))
            self.cache.close()
        return [self.cache[key] for key in keys]
