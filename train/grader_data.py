"""Tokenized datasets, collator and metrics for training the grader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset, load_dataset
from transformers import PreTrainedTokenizerBase

from models.input_format import GraderInputFormat, format_pairs

SOFT_TARGETS = ("none", "p_relevant", "grade")


def load_split(dataset_dir: str | Path, split: str) -> Dataset | None:
    """A split written by ``python -m data.build`` (``{split}.jsonl``), or None when absent."""
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
) -> Dataset:
    """input_ids / labels / soft_targets / length columns (documents cut to fit ``fmt.max_length``)."""
    if soft_targets not in SOFT_TARGETS:
        raise ValueError(f"soft_targets: expected one of {SOFT_TARGETS}, got {soft_targets!r}")

    def encode(batch: dict[str, list]) -> dict[str, list]:
        titles = batch.get("title") or [None] * len(batch["query"])
        formatted = format_pairs(tokenizer, fmt, batch["query"], batch["text"], titles)
        rows = [
            dict(zip(batch, values, strict=True)) for values in zip(*batch.values(), strict=True)
        ]
        return {
            "input_ids": formatted.input_ids,
            "labels": [int(label) for label in batch["label"]],
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
        width = max(len(f["input_ids"]) for f in features)
        if self.pad_to_multiple_of:
            width = -(-width // self.pad_to_multiple_of) * self.pad_to_multiple_of
        input_ids = torch.full((len(features), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(features), width), dtype=torch.long)
        for row, feature in enumerate(features):
            ids = feature["input_ids"]
            input_ids[row, : len(ids)] = torch.as_tensor(ids)
            attention_mask[row, : len(ids)] = 1
        batch = {"input_ids": input_ids, "attention_mask": attention_mask}
        if "labels" in features[0]:
            batch["labels"] = torch.tensor([int(f["labels"]) for f in features], dtype=torch.long)
        if "soft_targets" in features[0]:
            batch["soft_targets"] = torch.tensor(
                [float(f["soft_targets"]) for f in features], dtype=torch.float32
            )
        return batch


def classification_metrics(
    probabilities: np.ndarray, labels: np.ndarray, threshold: float = 0.5
) -> dict[str, float]:
    """Accuracy, precision, recall, F1 (scikit-learn) and ROC-AUC from P(relevant)."""
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support, roc_auc_score

    predictions = (probabilities >= threshold).astype(int)
    precision, recall, f1, _ = precision_recall_fscore_support(
        labels, predictions, average="binary", zero_division=0
    )
    metrics = {
        "accuracy": float(accuracy_score(labels, predictions)),
        "precision": float(precision),
        "recall": float(recall),
        "f1": float(f1),
    }
    if len(np.unique(labels)) > 1:
        metrics["roc_auc"] = float(roc_auc_score(labels, probabilities))
    return metrics


def compute_metrics(prediction) -> dict[str, float]:
    logits = (
        prediction.predictions[0]
        if isinstance(prediction.predictions, tuple)
        else prediction.predictions
    )
    logits = torch.as_tensor(logits).float()
    probabilities = torch.softmax(logits, dim=-1)[:, 1].numpy()
    return classification_metrics(probabilities, np.asarray(prediction.label_ids).astype(int))
