"""Does a cheaper inference dtype keep a grader's ranking? Float32 against bf16 and int8, same pairs.

    python -m benchmarks.int8 --model runs/main/export --data runs/main/dataset/validation.jsonl --pairs 210

Variants: the whole model in bfloat16 (what ``auto`` picks on CPUs with bf16 instructions);
PyTorch's dynamic quantization of the linear layers (int8 weights, each batch's activations
quantized with one scale) in four variants: every linear layer per tensor, all but the head per
tensor, all but the head per output channel, all but the head and the MLP down-projections per
channel (where LLM activation outliers enter); and int8 with one scale per token for the
activations and per output channel for the weights (``torch._int_mm``), all but the head, which
keeps one outlier token (the first one's are large) from flattening the rest. The head is the
classifier's ``score`` layer, or the LM head that a query-likelihood or generative grader reads.
For each: max |ΔP(relevant)| against float32, Spearman's ρ of the scores, ROC-AUC against the
pairs' labels, and the speed-up. The project's target for a cheaper path is ROC-AUC within 0.005
of float32, which needs ρ very close to 1.
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

from benchmarks.common import machine, print_table

HEADS = ("score", "lm_head")


class PerTokenInt8Linear(torch.nn.Module):
    """A linear layer in int8: weights scaled per output channel once, activations per token at
    each call, the product accumulated in int32 by ``torch._int_mm`` and scaled back."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        weight = linear.weight.detach().float()
        scale = weight.abs().amax(dim=1).clamp(min=1e-12) / 127
        int8_weight = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8)
        self.register_buffer("int8_weight_t", int8_weight.t().contiguous())
        self.register_buffer("weight_scale", scale)
        self.bias = linear.bias

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        rows = inputs.reshape(-1, inputs.shape[-1]).float()
        scale = rows.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127
        int8_rows = torch.round(rows / scale).clamp(-127, 127).to(torch.int8)
        output = torch._int_mm(int8_rows, self.int8_weight_t) * scale * self.weight_scale
        if self.bias is not None:
            output = output + self.bias
        return output.to(inputs.dtype).reshape(*inputs.shape[:-1], -1)


def per_token_int8(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with every linear layer but the head replaced by ``PerTokenInt8Linear``."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Linear) and name not in HEADS:
                setattr(module, name, PerTokenInt8Linear(child))
    return model


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
    grader.raw_probabilities(queries[:2], documents[:2])  # warm-up, as for every variant
    start = time.perf_counter()
    reference = grader.raw_probabilities(queries, documents)
    float_seconds = time.perf_counter() - start
    linear = {n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    body = {n for n in linear if n.split(".")[-1] not in HEADS}
    dynamic_variants = {
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

    def dynamic_int8(spec: dict) -> torch.nn.Module:
        with warnings.catch_warnings():  # torch marks the quantized-tensor API for a later move
            warnings.simplefilter("ignore", UserWarning)
            return quantize_dynamic(copy.deepcopy(model), spec, dtype=torch.qint8)

    variants = {
        # Loaded as ``auto`` loads it: ``.to(torch.bfloat16)`` would also round RoPE's frequencies.
        "bfloat16": lambda: (
            Grader.from_pretrained(options.model, device="cpu", dtype="bfloat16").model
        ),
        **{name: lambda spec=spec: dynamic_int8(spec) for name, spec in dynamic_variants.items()},
        "all but the head, per token × per channel (torch._int_mm)": lambda: per_token_int8(
            copy.deepcopy(model)
        ),
    }
    table = [["float32", "0", "1", auc(reference), 1.0]]
    for name, build in variants.items():
        grader.model = build()
        grader.raw_probabilities(queries[:2], documents[:2])  # warm-up: kernels, allocations
        start = time.perf_counter()
        scores = grader.raw_probabilities(queries, documents)
        seconds = time.perf_counter() - start
        rho = float(spearmanr(scores, reference)[0])
        table.append(
            [
                name,
                f"{np.abs(scores - reference).max():.2g}",
                f"{rho:.4f}",  # 0.99 and 0.9999 are far apart for an AUC target of 0.005
                auc(scores),
                float_seconds / seconds,
            ]
        )
    print_table(
        f"Cheaper dtypes against float32 ({options.model}, {len(rows)} pairs of {options.data})",
        ["variant", "max |ΔP|", "Spearman ρ", "ROC-AUC", "speed-up"],
        table,
        machine(),
    )


if __name__ == "__main__":
    main()
