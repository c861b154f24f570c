"""The fast path's options, each on and off in one process, on a GPU (or a CPU, as a smoke test).

    relevance-grader random-model --out runs/llama-3.2-1b-random --shape llama-3.2-1b --dtype bfloat16
    python -m benchmarks.gpu.fast_path --model runs/llama-3.2-1b-random --out runs/fast-path.jsonl
    # CPU smoke test: a tiny random model, a few pairs, dynamo's tracing without inductor's build
    relevance-grader random-model --out runs/tiny-random --shape tiny --dtype float32
    python -m benchmarks.gpu.fast_path --model runs/tiny-random --pairs 12 --steps 2 --warmup 1 \\
        --compile_backend eager --out runs/fast-path-cpu.jsonl

Grading (``Grader``'s options, ``models.speed``) on real TREC DL 2019 pairs, ten per query as a
request has them: the plain path (length-sorted batches of 16,384 tokens), the paper's method
(every input padded to 512, batches of 40, argmax), ``compile`` (bucketed static shapes,
compiled decoder layers), ``liger_kernel``, and both. Training (the training config's options,
``benchmarks.training``): full fine-tuning at batch 16 plain, ``padding_free``, the paper's
padding to 512, ``use_liger_kernel``, and padding-free with Liger; timed after ``--warmup`` steps.

Every part gives pairs/s and real tokens/s, and the share of the GEMM rate measured in the same
process (an 8192-square bf16 matrix product on a GPU) that the exact FLOPs of the real tokens
make (MFU on real tokens); grading parts also their speed against the paper's method and their
largest difference in P(relevant) from the plain path. Each part writes one line to ``--out``
(JSONL) as it ends, with the device, versions, command and date; a part that fails records its
error and the others go on; a part whose option cannot run here (Liger without a CUDA GPU or
its package) is recorded as skipped with the reason. Liger's kernels patch transformers' Llama
classes for the rest of the process, so its parts come last. The table of every part is printed
at the end.
"""

from __future__ import annotations

import datetime
import gc
import json
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from core.cli import parse_config, run_main

GRADING_PARTS = ("plain", "paper", "compile", "liger", "compile-liger")
TRAINING_PARTS = ("plain", "padding_free", "paper", "liger", "padding_free-liger")
PARTS = (
    "gemm",
    *(f"grading-{p}" for p in GRADING_PARTS if "liger" not in p),
    *(f"training-{p}" for p in TRAINING_PARTS if "liger" not in p),
    *(f"grading-{p}" for p in GRADING_PARTS if "liger" in p),
    *(f"training-{p}" for p in TRAINING_PARTS if "liger" in p),
)


@dataclass
class FastPathConfig:
    model: str = field(
        metadata={"help": "A classifier or causal-LM folder (relevance-grader random-model)."}
    )
    out: str = field(default="runs/fast-path.jsonl", metadata={"help": "The JSONL file."})
    pairs: int = field(default=4000, metadata={"help": "Grading pairs (TREC DL 2019)."})
    max_length: int = field(default=512)
    grading_batch_tokens: int = field(default=16384)
    batch_size: int = field(default=16, metadata={"help": "Training pairs a step."})
    steps: int = field(default=30, metadata={"help": "Training steps a part."})
    warmup: int = field(default=10, metadata={"help": "Steps before the timed ones."})
    compile_backend: str = field(
        default="inductor",
        metadata={"help": "torch.compile's backend for the compile parts (eager: a CPU check)."},
    )
    parts: list[str] = field(
        default_factory=lambda: list(PARTS), metadata={"help": f"A subset of {', '.join(PARTS)}."}
    )


class Recorder:
    """Each part's record, appended to the JSONL file as the part ends."""

    def __init__(self, out: Path, sync: bool) -> None:
        import transformers

        self.out, self.sync = out, sync
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("", encoding="utf-8")
        self.common = {
            "device": torch.cuda.get_device_name(0) if sync else "cpu",
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "command": " ".join(["python", "-m", "benchmarks.gpu.fast_path", *sys.argv[1:]]),
        }
        self.records: list[dict[str, Any]] = []

    def record(self, part: str, **fields: Any) -> None:
        now = datetime.datetime.now().isoformat(timespec="seconds")
        line = {"part": part, "date": now, **self.common, **fields}
        self.records.append(line)
        with open(self.out, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, default=str) + "\n")
        print(json.dumps(line, default=str)[:400], flush=True)

    def run(self, part: str, measure: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        try:
            figures = measure()
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.record(
                part, status="failed", error=error, traceback=traceback.format_exc()[-2000:]
            )
            return None
        finally:
            gc.collect()
            if self.sync:
                torch.cuda.empty_cache()
        self.record(part, status="ok", **figures)
        return figures


# ----------------------------------------------------------------------------- training


def step_timer():
    """A Trainer callback that notes the time at the end of every optimizer step (device
    synchronized), so that throughput is read after the warm-up steps."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []

        def on_step_end(self, args, state, control, **kwargs):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.times.append(time.perf_counter())

    return StepTimer()


def training_throughput(
    config: FastPathConfig, variant: str, peak: float, **options: bool
) -> dict[str, Any]:
    """One variant of ``benchmarks.training`` at the config's batch, with its steady rates after
    ``warmup`` steps and its MFU on real tokens (3 x the exact forward FLOPs) against ``peak``."""
    import transformers.trainer

    from benchmarks.common import H100_BF16_FLOPS
    from benchmarks.training import BenchTrainingConfig, run_variant

    timer = step_timer()
    transformers.trainer.DEFAULT_CALLBACKS.append(timer)  # run_variant builds its own Trainer
    try:
        result = run_variant(
            BenchTrainingConfig(
                model=config.model,
                steps=config.steps,
                batch_size=config.batch_size,
                max_length=config.max_length,
                variant=variant,
                **options,
            )
        )
    finally:
        transformers.trainer.DEFAULT_CALLBACKS.remove(timer)
    if len(timer.times) <= config.warmup:
        raise ValueError(f"warmup {config.warmup} leaves no timed step of {len(timer.times)}")
    steady = len(timer.times) - config.warmup
    seconds = timer.times[-1] - timer.times[config.warmup - 1] if config.warmup else None
    steps_per_s = steady / seconds if seconds else result["steps_per_s"]
    per_step = {
        key: result[key] / len(timer.times) for key in ("pairs", "real_tokens", "useful_flops")
    }
    figures = dict(result)
    figures.update(
        batch_size=config.batch_size,
        warmup_steps=config.warmup,
        mean_real_tokens=round(result["real_tokens"] / result["pairs"], 1),
        steady_steps_per_s=steps_per_s,
        pairs_per_s=steps_per_s * per_step["pairs"],
        real_tokens_per_s=steps_per_s * per_step["real_tokens"],
        fraction_of_gemm=per_step["useful_flops"] * steps_per_s / peak,
    )
    if torch.cuda.is_available():
        figures["mfu_real_percent_790"] = (
            100 * per_step["useful_flops"] * steps_per_s / H100_BF16_FLOPS
        )
    return figures


# ----------------------------------------------------------------------------- grading


class Grading:
    """The grading parts on one model and one set of pairs, each checked against the plain path."""

    def __init__(self, config: FastPathConfig, device: str, dtype: torch.dtype, peak: float):
        from benchmarks.common import forward_flops, trec_dl_query_pairs
        from benchmarks.grading import BenchGradingConfig, load
        from models.input_format import GraderInputFormat, format_pairs

        self.config, self.sync, self.peak = config, device == "cuda", peak
        bench = BenchGradingConfig(model=config.model, max_length=config.max_length)
        self.model, self.tokenizer = load(bench, device, dtype)
        pairs = trec_dl_query_pairs(config.pairs, 10)
        fmt = GraderInputFormat.from_tokenizer(self.tokenizer, max_length=config.max_length)
        queries, documents = [q for q, _ in pairs], [d for _, d in pairs]
        self.ids = format_pairs(self.tokenizer, fmt, queries, documents).input_ids
        self.real = sum(map(len, self.ids))
        self.useful = sum(forward_flops(self.model.config, len(x), len(x)) for x in self.ids)
        self.plain_p: np.ndarray | None = None
        self.paper_rate: float | None = None

    def figures(self, score: Callable[[], np.ndarray], reads_p: bool = True) -> dict[str, Any]:
        from benchmarks.grading import timed

        began = time.perf_counter()
        first = score()  # warm-up (compiling, for the compile parts), and the scores checked
        if self.sync:
            torch.cuda.synchronize()
        warmup_s = time.perf_counter() - began
        seconds = timed(score, self.sync)
        figures: dict[str, Any] = {
            "pairs": len(self.ids),
            "mean_real_tokens": round(self.real / len(self.ids), 1),
            "warmup_pass_s": round(warmup_s, 2),
            "seconds": seconds,
            "pairs_per_s": len(self.ids) / seconds,
            "real_tokens_per_s": self.real / seconds,
            "forward_flops": self.useful,  # exact, of the real tokens
            "fraction_of_gemm": self.useful / seconds / self.peak,
        }
        if reads_p and self.plain_p is None:
            self.plain_p = first[:, 1]
        elif reads_p:
            figures["max_abs_dp_vs_plain"] = float(np.abs(first[:, 1] - self.plain_p).max())
        if self.paper_rate:
            figures["x_paper"] = figures["pairs_per_s"] / self.paper_rate
        return figures

    def plain(self) -> dict[str, Any]:
        from models.scoring import classifier_probabilities

        tokens = self.config.grading_batch_tokens
        return self.figures(
            lambda: classifier_probabilities(
                self.model, self.ids, batch_size=32, max_batch_tokens=tokens
            )
        )

    def paper(self) -> dict[str, Any]:
        from benchmarks.grading import paper_labels

        device = next(self.model.parameters()).device
        figures = self.figures(
            lambda: paper_labels(self.model, self.tokenizer, self.ids, device), reads_p=False
        )
        self.paper_rate = figures["pairs_per_s"]
        return figures

    def compiled(self) -> dict[str, Any]:
        from models.speed import bucket_batches, bucketed_classifier_probabilities, compile_layers

        counters = torch._dynamo.utils.counters["stats"]
        graphs = counters["unique_graphs"]
        compile_layers(self.model, backend=self.config.compile_backend)
        try:
            figures = self.figures(
                lambda: bucketed_classifier_probabilities(
                    self.model, self.ids, self.config.grading_batch_tokens
                )
            )
        finally:
            uncompile(self.model)
        batches = bucket_batches([len(x) for x in self.ids], self.config.grading_batch_tokens)
        return {
            **figures,
            "compile_backend": self.config.compile_backend,
            "shapes": len({b[:2] for b in batches}),
            "graphs_compiled": counters["unique_graphs"] - graphs,
            "padded_tokens": sum(width * rows for width, rows, _ in batches),
        }


def uncompile(model: torch.nn.Module) -> None:
    """Undo ``models.speed.compile_layers`` (the parts after run eager)."""
    import models.speed
    from models.backbone import decoder

    for layer in decoder(model).layers:
        layer._compiled_call_impl = None
    models.speed._compiled.discard(model)
    torch._dynamo.reset()


# ----------------------------------------------------------------------------- the run


def measure(config: FastPathConfig) -> list[dict[str, Any]]:
    from benchmarks.common import matmul_peak
    from models.speed import apply_liger, liger_unavailable

    unknown = sorted(set(config.parts) - set(PARTS))
    if unknown:
        from core.errors import InputError

        raise InputError(f"parts: unknown {unknown}; expected some of {', '.join(PARTS)}")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    recorder = Recorder(Path(config.out), device == "cuda")
    wanted = [part for part in PARTS if part in config.parts]

    def gemm() -> dict[str, Any]:
        return {"tflops": matmul_peak(dtype, device, 8192 if device == "cuda" else 256) / 1e12}

    peak = (recorder.run("gemm", gemm) or {"tflops": float("nan")})["tflops"] * 1e12
    grading = Grading(config, device, dtype, peak)
    no_liger = liger_unavailable(device)
    liger_applied = False
    for part in wanted[1:]:
        kind, option = part.split("-", 1)
        if "liger" in option and no_liger:
            recorder.record(part, status="skipped", reason=no_liger)
            continue
        if kind == "grading":
            grading.model.to(device)
            if "liger" in option and not liger_applied:
                apply_liger(grading.model)
                liger_applied = True
            measure_part = {
                "plain": grading.plain,
                "paper": grading.paper,
                "compile": grading.compiled,
                "liger": grading.plain,
                "compile-liger": grading.compiled,
            }[option]
            recorder.run(part, measure_part)
        else:
            grading.model.to("cpu")  # its memory, for training
            variant = "padded-full" if option == "paper" else "ours-full"
            options = {
                "padding_free": option.startswith("padding_free"),
                "use_liger_kernel": "liger" in option,
            }
            recorder.run(part, partial(training_throughput, config, variant, peak, **options))
    print_table(recorder.records)
    return recorder.records


def print_table(records: Sequence[dict[str, Any]]) -> None:
    """Every part's figures as a Markdown table on stdout, each against the paper's method of its
    kind (grading or training) where that part ran."""
    from core.io import markdown_table

    paper = {
        line["part"].split("-")[0]: line["pairs_per_s"]
        for line in records
        if line["part"].endswith("-paper") and line["status"] == "ok"
    }
    rows = []
    for line in (line for line in records if line["part"] != "gemm"):
        rate, share = line.get("pairs_per_s"), line.get("fraction_of_gemm")
        against = paper.get(line["part"].split("-")[0])
        rows.append(
            [
                line["part"],
                line["status"],
                rate,
                line.get("real_tokens_per_s"),
                f"{100 * share:.1f}%" if share is not None else None,
                rate / against if rate and against else None,
                line.get("max_abs_dp_vs_plain"),
                line.get("reason") or line.get("error"),
            ]
        )
    header = [
        "part",
        "status",
        "pairs/s",
        "real tokens/s",
        "of GEMM",
        "x paper",
        "max |dP|",
        "note",
    ]
    print(markdown_table(header, [[cell(x) for x in row] for row in rows]))


def cell(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:,.3g}" if isinstance(value, float) else str(value)


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([FastPathConfig], args)
    measure(config)


if __name__ == "__main__":
    run_main(main)
