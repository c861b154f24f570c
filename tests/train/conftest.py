"""Fixtures and helpers of the training tests: a tiny learnable dataset and quiet arguments."""

from __future__ import annotations

from pathlib import Path

from models.builder import GraderModelConfig
from train.train import DataConfig, GraderTrainingArguments, LossConfig

PARSERS = [GraderModelConfig, DataConfig, LossConfig, GraderTrainingArguments]


def args_for(tmp_path: Path, **overrides) -> GraderTrainingArguments:
    settings = dict(
        output_dir=str(tmp_path / "out"),
        report_to="none",
        learning_rate=2e-3,
        num_train_epochs=3,
        per_device_train_batch_size=16,
        logging_steps=1,
        save_strategy="no",
        load_best_model_at_end=False,
        use_cpu=True,
        disable_tqdm=True,
    )
    settings.update(overrides)
    return GraderTrainingArguments(**settings)
