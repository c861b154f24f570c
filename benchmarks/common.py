"""Shared helpers for the benchmarks: real TREC DL pairs, model shapes, FLOP counts, machine info."""

from __future__ import annotations

import json
import platform
import random
import time

import torch

from core.io import markdown_table
from data import COLLECTIONS

TREC_DL = COLLECTIONS / "trec-dl-2019-passage"
# H100 SXM bf16 dense peak as measured in practice (~790 TFLOP/s).
H100_BF16_FLOPS = 790e12


def trec_dl_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (query, passage) pairs from the TREC DL 2019 judged pool, seeded."""
    from data.beir import Collection

    collection = Collection.load(TREC_DL)
    pairs = [
        (collection.queries[q], collection.corpus[d].text)
        for q, docs in collection.qrels.items()
        for d in docs
    ]
    random.Random(seed).shuffle(pairs)
    return pairs[:n]


def trec_dl_query_pairs(n: int, per_query: int, seed: int = 0) -> list[tuple[str, str]]:
    """About ``n`` (query, passage) pairs, ``per_query`` judged passages for each query taken
    (like one eval_search request's hits), seeded."""
    from data.beir import Collection

    collection = Collection.load(TREC_DL)
    rng = random.Random(seed)
    qids = sorted(collection.qrels)
    rng.shuffle(qids)
    pairs: list[tuple[str, str]] = []
    while len(pairs) < n:
        for qid in qids:
            docs = sorted(collection.qrels[qid])
            rng.shuffle(docs)
            pairs += [
                (collection.queries[qid], collection.corpus[d].text) for d in docs[:per_query]
            ]
            if len(pairs) >= n:
                break
    return pairs[:n]


def llama_1b_config():
    """The Llama-3.2-1B shape with a 2-label head (random weights are enough for speed)."""
    from models.random_model import llama_config

    config = llama_config("llama-3.2-1b")
    config.num_labels = 2
    return config


def forward_flops(config, tokens: int, seq_len: int) -> float:
    """Forward FLOPs: 2 x matmul parameters per token + attention (causal, QK^T and AV)."""
    h, layers = config.hidden_size, config.num_hidden_layers
    kv = config.num_key_value_heads * (h // config.num_attention_heads)
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * config.intermediate_size  # q,o + k,v + MLP
    matmul_params = layers * per_layer
    attention = layers * 2 * 2 * seq_len * h / 2  # causal half of QK^T and AV, per token
    return tokens * (2 * matmul_params + attention)


def matmul_peak(dtype: torch.dtype, device: str, size: int | None = None) -> float:
    """FLOP/s of a plain square GEMM in ``dtype`` on ``device``, best of five: the machine's
    practical matmul peak, measured in the same run as the paths it is compared with. It goes
    through ``F.linear``, the kernel a model's layers use: on a CPU without bf16 instructions a
    bf16 ``a @ b`` takes a fallback about 20 times slower than that."""
    size = size or (8192 if device == "cuda" else 2048)
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    best = float("inf")
    for _ in range(6):  # the first is a warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        torch.nn.functional.linear(a, b)
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def cpu_name() -> str:
    from models.resolve import read_cpuinfo

    for line in read_cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return platform.processor()


def machine() -> dict:
    from models.resolve import cpu_has_fast_bf16

    info = {
        "machine": platform.machine(),
        "cpu": cpu_name(),
        "cpu_bf16_instructions": cpu_has_fast_bf16(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    import transformers

    info["transformers"] = transformers.__version__
    return info


def print_table(title: str, header: list[str], rows: list[list], info: dict | None = None) -> None:
    print(f"\n### {title}\n")
    cells = [[f"{x:,.2f}" if isinstance(x, float) else x for x in row] for row in rows]
    print(markdown_table(header, cells), end="")
    if info:
        print(f"\n{json.dumps(info)}")
