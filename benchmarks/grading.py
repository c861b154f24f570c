"""Grading throughput: our inference path against the paper's released method and the pipeline.

    python -m benchmarks.grading                       # CPU: SmolLM2-135M on real TREC DL pairs
    python -m benchmarks.grading --model llama-1b-random --pairs 4000 --dtype bfloat16   # GPU: 1B shape

Paths, on the same pairs and model (``hits_per_query`` documents per query, as a request has):
- ours: length-sorted dynamic batches, inference mode (bf16 + SDPA on GPU), models.scoring;
- ours + shared prefix: each query's prompt + query computed once, its KV cache expanded over
  the query's documents (what ``Grader`` does);
- paper: every input padded to 512 tokens, batches of 40, argmax (their released evaluation code);
- pipeline: ``pipeline("text-classification")`` over the formatted texts;
- query likelihood: the main job's grader (``models.families.query_likelihood.scoring``): one pass
  per pair over its own template and one per distinct query for the prior, the LM head on the
  query's tokens.
Each of ours and the query-likelihood path is timed in every dtype asked for (on a CPU with bf16
instructions: float32, then bfloat16); the paper's and the pipeline's in the first. Reports pairs/s,
tokens/s (real tokens), the fraction of a plain GEMM's FLOP/s in that dtype measured in the same
run (from the exact forward FLOPs of the real tokens), MFU against the H100 peak on GPU, and
p50/p95 latency of one query with 10 and with 100 hits.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from benchmarks.common import (
    H100_BF16_FLOPS,
    forward_flops,
    llama_1b_config,
    machine,
    matmul_peak,
    print_table,
    trec_dl_pairs,
    trec_dl_query_pairs,
)
from core.cli import parse_config, run_main
from models.input_format import GraderInputFormat, format_pairs
from models.scoring import classifier_probabilities, shared_prefix_classifier_probabilities


@dataclass
class BenchGradingConfig:
    model: str = field(
        default="smollm2-135m", metadata={"help": "smollm2-135m, a path, or llama-1b-random."}
    )
    pairs: int = field(default=256)
    hits_per_query: int = field(
        default=10, metadata={"help": "Documents per query (0: random pairs across queries)."}
    )
    batch_size: int = field(default=32, metadata={"help": "Our path's max batch size."})
    max_batch_tokens: int = field(default=16384)
    max_length: int = field(default=512)
    dtype: str = field(
        default="auto",
        metadata={
            "help": "Dtypes to time, comma-separated, the first the baseline. auto: bfloat16 on "
            "GPU; float32 on CPU, then bfloat16 where the CPU has bf16 instructions."
        },
    )
    latency_repeats: int = field(default=20)
    skip_pipeline: bool = field(default=False)
    skip_query_likelihood: bool = field(default=False)
    peak_size: int | None = field(
        default=None,
        metadata={
            "help": "Side of the square GEMM that measures the peak (default: 2048 on a "
            "CPU, 8192 on a GPU; a small one keeps an emulated-bf16 CPU quick)."
        },
    )


@torch.inference_mode()
def paper_labels(model, tokenizer, input_ids, device) -> np.ndarray:
    """The paper's grading method: every input padded to 512 tokens, batches of 40, argmax."""
    labels = []
    for start in range(0, len(input_ids), 40):
        batch = tokenizer.pad(
            {"input_ids": input_ids[start : start + 40]},
            padding="max_length",
            max_length=512,
            return_tensors="pt",
        ).to(device)
        labels.append(model(**batch).logits.argmax(-1).cpu())
    return torch.cat(labels).numpy()


def load(config: BenchGradingConfig, device: str, dtype: torch.dtype):
    from models.resolve import load_model, load_tokenizer

    if config.model == "llama-1b-random":
        from transformers import LlamaForSequenceClassification

        from models.assets import TINY_TOKENIZER

        torch.manual_seed(0)
        model = LlamaForSequenceClassification(llama_1b_config()).to(dtype)
        tokenizer = load_tokenizer(str(TINY_TOKENIZER))  # token ids differ, lengths are what matter
        model.config.pad_token_id = tokenizer.pad_token_id
    else:
        model, tokenizer = load_model(config.model, task="classification", dtype=dtype)
    return model.to(device).eval(), tokenizer


def load_causal_lm(config: BenchGradingConfig, device: str, dtype: torch.dtype, tokenizer):
    """The same model (or shape) with its LM head, for the query-likelihood path."""
    if config.model == "llama-1b-random":
        from transformers import LlamaForCausalLM

        torch.manual_seed(0)
        model = LlamaForCausalLM(llama_1b_config()).to(dtype)
        model.config.pad_token_id = tokenizer.pad_token_id
    else:
        from models.resolve import load_model

        model, _ = load_model(config.model, task="causal-lm", dtype=dtype)
    return model.to(device).eval()


def timed(fn, sync: bool) -> float:
    if sync:
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if sync:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def bench_dtypes(config: BenchGradingConfig, device: str) -> list[torch.dtype]:
    """The dtypes to time; the first is the baseline the others are compared with."""
    if config.dtype != "auto":
        return [getattr(torch, name.strip()) for name in config.dtype.split(",")]
    if device == "cuda":
        return [torch.bfloat16]
    from models.resolve import cpu_has_fast_bf16

    return [torch.float32, torch.bfloat16] if cpu_has_fast_bf16() else [torch.float32]


def time_dtype(
    config: BenchGradingConfig,
    device: str,
    dtype: torch.dtype,
    pairs: list[tuple[str, str]],
    baseline: tuple[str, np.ndarray, dict] | None,
) -> tuple[list[list], list[list], np.ndarray, int, dict]:
    """Rows of every path in one dtype (the paper's and the pipeline's only for the baseline, when
    ``baseline`` is None), latency rows, our path's probabilities, the mean input length and the
    classifier head's weights. Each dtype loads the model as a user would (a float32 model cast
    with ``.to`` would also round RoPE's frequencies) and takes the baseline's head, which an
    untrained checkpoint initialises at random. The random 1B shape is built in float32 and cast,
    so that its dtypes share weights."""
    dtype_name = str(dtype).removeprefix("torch.")
    model, tokenizer = load(config, device, dtype)
    if baseline is not None:
        model.score.load_state_dict(baseline[2])
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=config.max_length)
    encoded = format_pairs(tokenizer, fmt, [q for q, _ in pairs], [d for _, d in pairs])
    input_ids = encoded.input_ids
    real_tokens = sum(len(x) for x in input_ids)
    mean_length = int(real_tokens / len(pairs))
    peak = matmul_peak(dtype, device, config.peak_size)
    print(f"{dtype_name}: measured GEMM peak {peak / 1e9:,.0f} GFLOP/s")
    sync = device == "cuda"
    rows: list[list] = []

    def add_row(name: str, seconds: float, tokens: int = real_tokens) -> None:
        flops = forward_flops(model.config, tokens, mean_length)
        row = [name, dtype_name, len(pairs) / seconds, tokens / seconds, seconds]
        row.append(100 * flops / seconds / peak)
        if device == "cuda":
            row.append(100 * flops / seconds / H100_BF16_FLOPS)
        rows.append(row)

    def ours(ids: list[list[int]] = input_ids) -> np.ndarray:
        return classifier_probabilities(
            model, ids, batch_size=config.batch_size, max_batch_tokens=config.max_batch_tokens
        )

    plain = ours()[:, 1]  # also the warm-up
    name = "ours: length-sorted dynamic batches"
    if baseline is not None:
        name += f" (max |ΔP| vs {baseline[0]} {np.abs(plain - baseline[1]).max():.1e})"
    add_row(name, timed(ours, sync))

    def ours_prefix() -> np.ndarray:
        return shared_prefix_classifier_probabilities(
            model, input_ids, encoded.prefix_lengths, batch_size=config.batch_size
        )

    difference = float(np.abs(ours_prefix()[:, 1] - plain).max())
    add_row(f"ours + shared prefix (max |ΔP| {difference:.1e})", timed(ours_prefix, sync))

    if baseline is None:

        def paper() -> None:
            paper_labels(model, tokenizer, input_ids, device)

        add_row("paper: padded to 512, batch 40, argmax", timed(paper, sync))

    if baseline is None and not config.skip_pipeline:
        from transformers import pipeline

        classify = pipeline(
            "text-classification", model=model, tokenizer=tokenizer, device=model.device
        )
        texts = encoded.texts
        add_row(
            "pipeline('text-classification')",
            timed(
                lambda: classify(
                    texts, batch_size=config.batch_size, truncation=True, max_length=512
                ),
                sync,
            ),
        )

    if not config.skip_query_likelihood:
        from models.families.query_likelihood.scoring import (
            pmi_scores,
            query_likelihood_format,
            split_inputs,
        )

        causal_lm = load_causal_lm(config, device, dtype, tokenizer)
        ql_format = query_likelihood_format(config.max_length)
        ql_ids = format_pairs(
            tokenizer, ql_format, [q for q, _ in pairs], [d for _, d in pairs]
        ).input_ids

        def query_likelihood() -> np.ndarray:
            return pmi_scores(
                causal_lm,
                tokenizer,
                ql_format,
                ql_ids,
                batch_size=config.batch_size,
                max_batch_tokens=config.max_batch_tokens,
            )

        query_likelihood()  # warm-up
        seconds = timed(query_likelihood, sync)
        split = split_inputs(tokenizer, ql_format, ql_ids)
        # Its own inputs: the pairs in the query-likelihood template and each query's prior.
        tokens = sum(map(len, ql_ids)) + sum(map(len, split.prior_ids))
        add_row(f"ours: query likelihood (+ {len(split.prior_ids)} query priors)", seconds, tokens)

    latency_rows = []
    for hits in (10, 100):
        times = [
            timed(lambda ids=input_ids[:hits]: ours(ids), sync)
            for _ in range(config.latency_repeats)
        ]
        latency_rows.append(
            [
                f"1 query, {hits} hits",
                dtype_name,
                1000 * statistics.median(times),
                1000 * float(np.percentile(times, 95)),
            ]
        )
    return rows, latency_rows, plain, mean_length, model.score.state_dict()


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([BenchGradingConfig], args)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    pairs = (
        trec_dl_query_pairs(config.pairs, config.hits_per_query)
        if config.hits_per_query
        else trec_dl_pairs(config.pairs)
    )
    rows, latency_rows = [], []
    baseline: tuple[str, np.ndarray, dict] | None = None
    for dtype in bench_dtypes(config, device):
        dtype_rows, dtype_latency, plain, mean_length, head = time_dtype(
            config, device, dtype, pairs, baseline
        )
        rows += dtype_rows
        latency_rows += dtype_latency
        baseline = baseline or (dtype_rows[0][1], plain, head)

    header = ["path", "dtype", "pairs/s", "real tokens/s", "seconds", "% of GEMM peak"]
    header += ["MFU % (H100)"] if device == "cuda" else []
    paper_row = next(row for row in rows if row[0].startswith("paper"))
    for row in rows:
        row.append(row[2] / paper_row[2])
    header.append("× paper")
    print_table(
        f"Grading throughput ({config.model}, {len(pairs)} TREC DL pairs, mean {mean_length} tokens)",
        header,
        rows,
        machine(),
    )
    print_table(
        "Latency of one request (ours)", ["request", "dtype", "p50 ms", "p95 ms"], latency_rows
    )


if __name__ == "__main__":
    run_main(main)
