"""Does dynamic int8 keep a grader's ranking? Float32 against int8 variants on the same pairs.

    python -m eval.bench.int8 --model runs/main/export --data runs/main/dataset/validation.jsonl --pairs 210

PyTorch's dynamic quantization (int8 weights, activations quantized per batch) of the linear
layers, in four variants: every linear layer per tensor; all but the head per tensor; all but the
head per output channel; all but the head and the MLP down-projections per channel (where LLM
activation outliers enter). The head is the classifier's ``score`` layer, or the LM head that a
query-likelihood or generative grader reads. For each: max |ΔP(relevant)| against float32,
Spearman's ρ of the scores, ROC-AUC against the pairs' labels, and the speed-up. The project's
target for an int8 path is ROC-AUC within 0.005 of float32, which needs ρ very close to 1.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
import warnings

import numpy as np
import torch
from scipy.stats import spearmanr
from sklearn.metrics import roc_auc_score

from eval.bench.common import machine, print_table


def main(argv: list[str] | None = None) -> None:
    from torch.ao.quantization import (
        default_dynamic_qconfig,
        per_channel_dynamic_qconfig,
        quantize_dynamic,
    )

    from models.grader import Grader

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="runs/main/export")
    parser.add_argument("--data", default="runs/main/dataset/test.jsonl")
    parser.add_argument("--pairs", type=int, default=60)
    options = parser.parse_args(argv)
    with open(options.data, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle][: options.pairs]
    queries, documents = [r["query"] for r in rows], [r["text"] for r in rows]
    grader = Grader.from_pretrained(options.model, device="cpu", dtype="float32")
    model = grader.model
    start = time.perf_counter()
    reference = grader.raw_probabilities(queries, documents)
    float_seconds = time.perf_counter() - start
    linear = {n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    body = {n for n in linear if n.split(".")[-1] not in ("score", "lm_head")}
    variants = {
        "every linear layer, per tensor": dict.fromkeys(linear, default_dynamic_qconfig),
        "all but the head, per tensor": dict.fromkeys(body, default_dynamic_qconfig),
        "all but the head, per channel": dict.fromkeys(body, per_channel_dynamic_qconfig),
        "all but the head and down_proj, per channel": {
            n: per_channel_dynamic_qconfig for n in body if not n.endswith("down_proj")
        },
    }
    labels = np.array([r["label"] for r in rows])

    def auc(scores: np.ndarray) -> str:
        return f"{roc_auc_score(labels, scores):.3f}" if len(np.unique(labels)) > 1 else "–"

    table = [["float32", "0", 1.0, auc(reference), 1.0]]
    for name, spec in variants.items():
        with warnings.catch_warnings():  # torch marks the quantized-tensor API for a later move
            warnings.simplefilter("ignore", UserWarning)
            grader.model = quantize_dynamic(copy.deepcopy(model), spec, dtype=torch.qint8)
        start = time.perf_counter()
        scores = grader.raw_probabilities(queries, documents)
        seconds = time.perf_counter() - start
        rho = float(spearmanr(scores, reference)[0])
        table.append(
            [
                name,
                f"{np.abs(scores - reference).max():.2g}",
                rho,
                auc(scores),
                float_seconds / seconds,
            ]
        )
    print_table(
        f"Dynamic int8 against float32 ({options.model}, {len(rows)} pairs of {options.data})",
        ["variant", "max |ΔP|", "Spearman ρ", "ROC-AUC", "speed-up"],
        table,
        machine(),
    )


if __name__ == "__main__":
    main()
