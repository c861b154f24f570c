"""Tokenized datasets, collator and metrics for training the grader."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import torch
from datasets import Dataset, load_dataset
from transformers import PreTrainedTokenizerBase

from core.errors import InputError
from core.metrics import classification_metrics
from core.records import DEFAULT_RELEVANCE_THRESHOLD
from data.build import read_manifest
from models.input_format import GraderInputFormat, format_pairs
from models.scoring import pad_right, relevant_probability

SOFT_TARGETS = ("none", "p_relevant", "grade")


def load_split(dataset_dir: str | Path, split: str) -> Dataset | None:
    """A split written by ``relevance-grader build`` (``{split}.jsonl``), or None when absent."""
    path = Path(dataset_dir) / f"{split}.jsonl"
    if not path.exists():
        return None
    return load_dataset("json", data_files=str(path), split="train")


def soft_target(row: dict[str, Any], source: str) -> float:
    if source == "p_relevant" and row.get("p_relevant") is not None:
        return float(row["p_relevant"])
    if source == "grade" and row.get("grade") is not None:
        return float(row["grade"]) / 3.0
    return float(row["label"])


def tokenize(
    dataset: Dataset,
    tokenizer: PreTrainedTokenizerBase,
    fmt: GraderInputFormat,
    soft_targets: str = "none",
    num_proc: int | None = None,
    target: str = "label",
) -> Dataset:
    """input_ids / labels / soft_targets / length columns (documents cut to fit ``fmt.max_length``).
    ``labels`` holds the binary ``label``, or the 0-3 ``grade`` for a graded head (``target``)."""
    if soft_targets not in SOFT_TARGETS:
        raise InputError(f"soft_targets: expected one of {SOFT_TARGETS}, got {soft_targets!r}")

    def encode(batch: dict[str, list]) -> dict[str, list]:
        titles = batch.get("title") or [None] * len(batch["query"])
        formatted = format_pairs(tokenizer, fmt, batch["query"], batch["text"], titles)
        rows = [
            dict(zip(batch, values, strict=True)) for values in zip(*batch.values(), strict=True)
        ]
        return {
            "input_ids": formatted.input_ids,
            "labels": [int(label) for label in batch[target]],
            "soft_targets": [soft_target(row, soft_targets) for row in rows],
            "length": [len(ids) for ids in formatted.input_ids],
        }

    return dataset.map(
        encode,
        batched=True,
        remove_columns=dataset.column_names,
        num_proc=num_proc,
        desc="tokenizing",
    )


class GraderCollator:
    """Right-pads a batch to its own longest sequence (no fixed 512 padding)."""

    def __init__(self, pad_token_id: int, pad_to_multiple_of: int | None = None) -> None:
        self.pad_token_id = pad_token_id
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = pad_right(
            [f["input_ids"] for f in features],
            self.pad_token_id,
            pad_to_multiple_of=self.pad_to_multiple_of,
        )
        batch = {"input_ids": input_ids, "attention_mask": attention_mask}
        if "labels" in features[0]:
            batch["labels"] = torch.tensor([int(f["labels"]) for f in features], dtype=torch.long)
        if "soft_targets" in features[0]:
            batch["soft_targets"] = torch.tensor(
                [float(f["soft_targets"]) for f in features], dtype=torch.float32
            )
        return batch


def missing_grades(dataset: Dataset) -> list[int]:
    """Row numbers (0-based) without a 0-3 grade: a graded head cannot train on them."""
    if "grade" not in dataset.column_names:
        return list(range(len(dataset)))
    return [i for i, grade in enumerate(dataset["grade"]) if grade is None]


def class_probabilities(predictions: Any) -> np.ndarray:
    """Softmax over the classes of a Trainer's predictions (the logits, first of a tuple)."""
    logits = predictions[0] if isinstance(predictions, tuple) else predictions
    return torch.softmax(torch.as_tensor(logits).float(), dim=-1).numpy()


def prediction_probabilities(predictions: Any, relevant_from: int = 1) -> np.ndarray:
    """P(relevant) per pair from a Trainer's predictions (the relevant classes' mass)."""
    return relevant_probability(class_probabilities(predictions), relevant_from)


def compute_metrics(prediction, relevant_from: int = 1) -> dict[str, float]:
    """Binary metrics of P(relevant) (the relevant classes' mass); a graded head's predictions
    are also scored against the grades (accuracy of the likeliest grade, error of the expected)."""
    probabilities = class_probabilities(prediction.predictions)
    targets = np.asarray(prediction.label_ids).astype(int)
    metrics = classification_metrics(
        relevant_probability(probabilities, relevant_from), (targets >= relevant_from).astype(int)
    )
    if probabilities.shape[1] > 2:
        expected = probabilities @ np.arange(probabilities.shape[1])
        metrics["grade_accuracy"] = float(np.mean(probabilities.argmax(axis=1) == targets))
        metrics["grade_mae"] = float(np.mean(np.abs(expected - targets)))
    return metrics


def label_threshold(dataset_dir: str) -> int:
    """The grade from which the dataset's pairs are relevant (data.build's label_threshold)."""
    manifest = read_manifest(dataset_dir)
    return manifest.label_threshold if manifest else DEFAULT_RELEVANCE_THRESHOLD


class ManifestSummary(TypedDict, total=False):
    """What a grader's description records of its dataset's manifest.json (empty without one)."""

    counts: dict[str, Any] | None  # per split, data.build's counts
    sources: list[dict[str, str]] | None  # each judgments file and its digest
    seed: int | None


def manifest_summary(dataset_dir: str) -> ManifestSummary:
    manifest = read_manifest(dataset_dir)
    if manifest is None:
        return {}
    # As the description held them before the manifest was typed (None where absent).
    written = manifest.dump()
    return {
        "counts": written.get("counts"),
        "sources": written.get("sources"),
        "seed": manifest.seed,
    }
