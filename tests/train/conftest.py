"""Fixtures and helpers of the training tests: a tiny learnable dataset and quiet arguments."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from data.build import BuildConfig, build_dataset
from models.builder import GraderModelConfig
from train.train import DataConfig, GraderTrainingArguments, LossConfig

PARSERS = [GraderModelConfig, DataConfig, LossConfig, GraderTrainingArguments]


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Judgments whose relevance is visible in the text, so a tiny model can learn it."""
    root = tmp_path_factory.mktemp("ds")
    rng = random.Random(0)
    lines = []
    for q in range(16):
        for d in range(6):
            grade = rng.choice([0, 0, 1, 2, 3])
            text = ("axon terminal definition " * grade) + "the passage talks about something"
            lines.append(
                {
                    "qid": f"q{q}",
                    "query": f"query {q} axon",
                    "doc_id": f"d{q}-{d}",
                    "text": text,
                    "grade": grade,
                }
            )
    (root / "j.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    build_dataset(
        BuildConfig(judgments=[str(root / "j.jsonl")], out=str(root / "ds"), save_dataset=False)
    )
    return root / "ds"


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
