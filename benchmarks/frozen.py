"""Frozen-backbone training: cached-feature fast path against the plain Trainer path, on CPU.

    python -m benchmarks.frozen --dataset runs/dataset --train_pairs 512 --epochs 3

Both paths train the same head (SmolLM2-135M, 3 epochs, validation each epoch); the table gives
wall time, the speed-up and validation F1 of each.
"""

from __future__ import annotations

import platform
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from core.cli import parse_config, run_main
from core.io import markdown_table
from models.builder import GraderModelConfig
from train.train import DataConfig, GraderTrainingArguments, LossConfig, train


@dataclass
class BenchFrozenConfig:
    dataset: str = field(
        default="runs/dataset", metadata={"help": "Folder from `relevance-grader build`."}
    )
    model: str = field(default="smollm2-135m")
    train_pairs: int = field(default=512)
    eval_pairs: int = field(default=256)
    epochs: int = field(default=3)
    max_length: int = field(default=512)
    batch_size: int = field(default=8)


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([BenchFrozenConfig], args)
    rows = []
    for cached in (True, False):
        out = tempfile.mkdtemp(prefix="bench-frozen-")
        training = GraderTrainingArguments(
            output_dir=out,
            report_to="none",
            num_train_epochs=config.epochs,
            learning_rate=1e-3,
            per_device_train_batch_size=config.batch_size,
            per_device_eval_batch_size=config.batch_size * 2,
            cache_states=cached,
            save_strategy="no",
            load_best_model_at_end=False,
            use_cpu=True,
            disable_tqdm=True,
            logging_steps=50,
        )
        start = time.perf_counter()
        metrics = train(
            GraderModelConfig(
                model_name_or_path=config.model, mode="frozen", max_length=config.max_length
            ),
            DataConfig(
                dataset=config.dataset,
                max_train_samples=config.train_pairs,
                max_eval_samples=config.eval_pairs,
            ),
            LossConfig(),
            training,
        )
        rows.append(
            (
                "cached states" if cached else "whole network each step",
                time.perf_counter() - start,
                metrics.get("eval_f1"),
            )
        )
    fast, plain = rows[0][1], rows[1][1]
    print()
    seconds = f"seconds ({config.epochs} epochs, {config.train_pairs} train / {config.eval_pairs} val pairs)"
    table = [[name, f"{s:.1f}", f"{f1:.3f}"] for name, s, f1 in rows]
    print(markdown_table(["path", seconds, "validation F1"], table), end="")
    print(
        f"speed-up: {plain / fast:.2f}x on {platform.machine()} with {torch.get_num_threads()} threads"
    )


if __name__ == "__main__":
    run_main(main)
