"""How big a batch runs fastest on this CPU, for the two models every main job runs.

    python -m benchmarks.cpu_batches
    python -m benchmarks.cpu_batches --passages 2000 --pairs 240 --caps 512,1024,2048,4096
    python -m benchmarks.cpu_batches --models embedder --attention sdpa --threads 1 2 --passages 300


MiniLM embedding TREC DL passages (with each attention kernel) and SmolLM2-135M's query
likelihood of TREC DL pairs, in float32 and, on a CPU with bf16 instructions, in bf16, for each
cap on the padded tokens of a batch (``models.scoring.length_sorted_batches``); cap 0 is the old
way, 64 inputs a batch whatever their length; ``--threads`` runs each cell at each torch thread
count. Each cell is the best of ``repeats`` timed passes after a warm-up, with the 1-minute load
average (``uptime``'s first figure) read when the cell finished: on a machine shared with other
jobs the figures depend on it. ``models.scoring.CPU_BATCH_TOKENS`` and the embedder's attention on a CPU were
chosen from this table (docs/benchmarks/main-job.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

import torch

from benchmarks.common import machine, print_table, trec_dl_pairs
from core.cli import parse_config, run_main

BATCH_SIZE = 64


@dataclass
class BenchCpuBatchesConfig:
    passages: int = field(default=600, metadata={"help": "Passages the embedder encodes."})
    pairs: int = field(default=100, metadata={"help": "Pairs whose query likelihood is computed."})
    caps: list[int] = field(
        default_factory=lambda: [0, 512, 1024, 2048, 4096],
        metadata={"help": "Padded tokens per batch to try (0: 64 inputs a batch, no cap)."},
    )
    repeats: int = field(default=2)
    threads: list[int] = field(
        default_factory=lambda: [torch.get_num_threads()],
        metadata={"help": "torch thread counts to try (default: torch's own, one per core)."},
    )
    models: list[str] = field(
        default_factory=lambda: ["embedder", "smollm2"],
        metadata={
            "help": "Which to time: embedder (MiniLM), smollm2 (SmolLM2-135M's query likelihood)."
        },
    )
    attention: list[str] = field(
        default_factory=lambda: ["sdpa", "eager"],
        metadata={"help": "The embedder's attention kernels to try."},
    )


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op threads set to ``count`` while inside."""
    saved = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def load_average() -> float:
    """The 1-minute load average, as ``uptime`` prints it first."""
    return round(os.getloadavg()[0], 2)


def measured(rows: list[list], row: list) -> None:
    """Keep ``row`` and print it at once: a long sweep on a busy machine shows each cell."""
    rows.append(row)
    print(" | ".join(f"{x:,.2f}" if isinstance(x, float) else str(x) for x in row), flush=True)


@contextmanager
def batch_cap(tokens: int) -> Iterator[None]:
    """Batches of at most ``tokens`` padded tokens on the CPU (0: no cap) while inside."""
    from models import scoring

    saved = scoring.CPU_BATCH_TOKENS
    scoring.CPU_BATCH_TOKENS = tokens or 10**9
    try:
        yield
    finally:
        scoring.CPU_BATCH_TOKENS = saved


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    run()  # warm-up: first-call allocations and kernel choices
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def dtypes() -> list[torch.dtype]:
    from models.resolve import cpu_has_fast_bf16

    return [torch.float32, *([torch.bfloat16] if cpu_has_fast_bf16() else [])]


def embedder_rows(config: BenchCpuBatchesConfig) -> list[list]:
    from models.embedder import Embedder

    texts = [passage for _, passage in trec_dl_pairs(config.passages, seed=1)]
    rows = []
    for dtype in dtypes():
        embedder = Embedder.load("minilm-l6", dtype=dtype)
        tokens = sum(len(x) for x in embedder.tokenizer(texts, truncation=True)["input_ids"])
        for attention in config.attention:
            embedder.model.set_attn_implementation(attention)
            for cap in config.caps:
                for threads in config.threads:
                    with batch_cap(cap), torch_threads(threads):
                        run = partial(embedder.encode, texts, batch_size=BATCH_SIZE)
                        seconds = best_seconds(run, config.repeats)
                    name = [
                        "MiniLM-L6 embedding",
                        str(dtype),
                        attention,
                        cap or "none (64 a batch)",
                    ]
                    speed = [len(texts) / seconds, tokens / seconds, load_average()]
                    measured(rows, [*name, threads, *speed])
    return rows


def query_likelihood_rows(config: BenchCpuBatchesConfig) -> list[list]:
    from models.families.query_likelihood.scoring import pmi_scores, query_likelihood_format
    from models.input_format import format_pairs
    from models.resolve import load_model

    pairs = trec_dl_pairs(config.pairs, seed=2)
    fmt = query_likelihood_format(192)
    rows = []
    for dtype in dtypes():
        model, tokenizer = load_model("smollm2-135m", task="causal-lm", dtype=dtype)
        ids = format_pairs(tokenizer, fmt, *zip(*pairs, strict=True)).input_ids
        tokens = sum(map(len, ids))
        for cap in config.caps:
            for threads in config.threads:
                with batch_cap(cap), torch_threads(threads):
                    run = partial(
                        pmi_scores, model.eval(), tokenizer, fmt, ids, batch_size=BATCH_SIZE
                    )
                    seconds = best_seconds(run, config.repeats)
                name = [
                    "SmolLM2-135M query likelihood",
                    str(dtype),
                    "sdpa",
                    cap or "none (64 a batch)",
                ]
                speed = [len(ids) / seconds, tokens / seconds, load_average()]
                measured(rows, [*name, threads, *speed])
    return rows


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([BenchCpuBatchesConfig], args)
    rows = []
    if "embedder" in config.models:
        rows += embedder_rows(config)
    if "smollm2" in config.models:
        rows += query_likelihood_rows(config)
    print_table(
        "Padded tokens per batch on this CPU",
        [
            "model",
            "dtype",
            "attention",
            "padded tokens per batch",
            "threads",
            "inputs/s",
            "tokens/s",
            "load average (1 min)",
        ],
        rows,
        machine(),
    )


if __name__ == "__main__":
    run_main(main)
