"""Grading throughput: our inference path against the paper's released method and the pipeline.

    python -m eval.bench.grading                       # CPU: SmolLM2-135M on real TREC DL pairs
    python -m eval.bench.grading --model llama-1b-random --pairs 4000 --dtype bfloat16   # GPU: 1B shape

Paths, on the same pairs and model (``hits_per_query`` documents per query, as a request has):
- ours: length-sorted dynamic batches, inference mode (bf16 + SDPA on GPU), models.scoring;
- ours + shared prefix: each query's prompt + query computed once, its KV cache expanded over
  the query's documents (what ``Grader`` does);
- paper: every input padded to 512 tokens, batches of 40, argmax (their released evaluation code);
- pipeline: ``pipeline("text-classification")`` over the formatted texts;
- query likelihood: the main job's grader (``models.query_likelihood``): one pass per pair over
  its own template and one per distinct query for the prior, the LM head on the query's tokens.
Reports pairs/s, tokens/s (real tokens), MFU on GPU from the exact forward FLOPs, and p50/p95
latency of one query with 10 and with 100 hits.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from data.cli import parse_config, run_main
from eval.bench.common import (
    H100_BF16_FLOPS,
    forward_flops,
    llama_1b_config,
    machine,
    print_table,
    trec_dl_pairs,
    trec_dl_query_pairs,
)
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
    dtype: str = field(default="auto", metadata={"help": "auto: bfloat16 on GPU, float32 on CPU."})
    latency_repeats: int = field(default=20)
    skip_pipeline: bool = field(default=False)
    skip_query_likelihood: bool = field(default=False)


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


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([BenchGradingConfig], args)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = (
        getattr(torch, config.dtype)
        if config.dtype != "auto"
        else (torch.bfloat16 if device == "cuda" else torch.float32)
    )
    model, tokenizer = load(config, device, dtype)
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=config.max_length)
    pairs = (
        trec_dl_query_pairs(config.pairs, config.hits_per_query)
        if config.hits_per_query
        else trec_dl_pairs(config.pairs)
    )
    encoded = format_pairs(tokenizer, fmt, [q for q, _ in pairs], [d for _, d in pairs])
    input_ids = encoded.input_ids
    real_tokens = sum(len(x) for x in input_ids)
    sync = device == "cuda"
    rows = []

    def ours() -> np.ndarray:
        return classifier_probabilities(
            model, input_ids, batch_size=config.batch_size, max_batch_tokens=config.max_batch_tokens
        )

    ours()  # warm-up
    seconds = timed(ours, sync)
    rows.append(
        [
            "ours: length-sorted dynamic batches",
            len(pairs) / seconds,
            real_tokens / seconds,
            seconds,
        ]
    )

    def ours_prefix() -> np.ndarray:
        return shared_prefix_classifier_probabilities(
            model, input_ids, encoded.prefix_lengths, batch_size=config.batch_size
        )

    difference = float(np.abs(ours_prefix()[:, 1] - ours()[:, 1]).max())
    seconds_prefix = timed(ours_prefix, sync)
    rows.append(
        [
            f"ours + shared prefix (max |ΔP| {difference:.1e})",
            len(pairs) / seconds_prefix,
            real_tokens / seconds_prefix,
            seconds_prefix,
        ]
    )

    @torch.inference_mode()
    def paper() -> None:
        for start in range(0, len(input_ids), 40):
            batch = tokenizer.pad(
                {"input_ids": input_ids[start : start + 40]},
                padding="max_length",
                max_length=512,
                return_tensors="pt",
            ).to(device)
            model(**batch).logits.argmax(-1).cpu()

    seconds_paper = timed(paper, sync)
    rows.append(
        [
            "paper: padded to 512, batch 40, argmax",
            len(pairs) / seconds_paper,
            real_tokens / seconds_paper,
            seconds_paper,
        ]
    )

    if not config.skip_pipeline:
        from transformers import pipeline

        classify = pipeline(
            "text-classification", model=model, tokenizer=tokenizer, device=model.device
        )
        texts = encoded.texts
        seconds_pipe = timed(
            lambda: classify(texts, batch_size=config.batch_size, truncation=True, max_length=512),
            sync,
        )
        rows.append(
            [
                "pipeline('text-classification')",
                len(pairs) / seconds_pipe,
                real_tokens / seconds_pipe,
                seconds_pipe,
            ]
        )

    tokens = dict.fromkeys((row[0] for row in rows), real_tokens)
    if not config.skip_query_likelihood:
        from models.query_likelihood import pmi_scores, query_likelihood_format, split_inputs

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
        seconds_ql = timed(query_likelihood, sync)
        split = split_inputs(tokenizer, ql_format, ql_ids)
        name = f"ours: query likelihood (+ {len(split.prior_ids)} query priors)"
        # Its own inputs: the pairs in the query-likelihood template and each query's prior.
        tokens[name] = sum(map(len, ql_ids)) + sum(map(len, split.prior_ids))
        rows.append([name, len(pairs) / seconds_ql, tokens[name] / seconds_ql, seconds_ql])
        del causal_lm

    if device == "cuda":
        mean_length = int(real_tokens / len(pairs))
        for row in rows:
            flops = forward_flops(model.config, tokens[row[0]], mean_length)
            row.append(100 * flops / row[3] / H100_BF16_FLOPS)
    header = ["path", "pairs/s", "real tokens/s", "seconds"] + (
        ["MFU %"] if device == "cuda" else []
    )
    paper_row = next(row for row in rows if row[0].startswith("paper"))
    for row in rows:
        row.append(row[1] / paper_row[1])
    header.append("× paper")
    print_table(
        f"Grading throughput ({config.model}, {len(pairs)} TREC DL pairs, mean {real_tokens / len(pairs):.0f} tokens)",
        header,
        rows,
        machine(),
    )

    latency_rows = []
    for hits in (10, 100):
        subset = input_ids[:hits]
        times = [
            timed(
                lambda s=subset: classifier_probabilities(
                    model, s, batch_size=config.batch_size, max_batch_tokens=config.max_batch_tokens
                ),
                sync,
            )
            for _ in range(config.latency_repeats)
        ]
        latency_rows.append(
            [
                f"1 query, {hits} hits",
                1000 * statistics.median(times),
                1000 * float(np.percentile(times, 95)),
            ]
        )
    print_table("Latency of one request (ours)", ["request", "p50 ms", "p95 ms"], latency_rows)


if __name__ == "__main__":
    run_main(main)
