"""Classification metrics, calibration and thresholds for a grader's P(relevant).

Everything here is fitted on one split (validation) and applied to another (test): the
evaluated split never chooses its own threshold or temperature.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    cohen_kappa_score,
    confusion_matrix,
    precision_recall_curve,
    precision_recall_fscore_support,
    roc_auc_score,
)

from models.scoring import apply_temperature

EPS = 1e-7


def binary_metrics(
    probabilities: np.ndarray, labels: np.ndarray, threshold: float = 0.5
) -> dict[str, Any]:
    """Accuracy, precision, recall, F1, κ, confusion at ``threshold``; ROC-AUC, PR-AUC, ECE overall."""
    labels = np.asarray(labels).astype(int)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    predictions = (probabilities >= threshold).astype(int)
    precision, recall, f1, _ = precision_recall_fscore_support(
        labels, predictions, average="binary", zero_division=0
    )
    both = len(np.unique(labels)) > 1
    return {
        "pairs": len(labels),
        "positive_rate": float(labels.mean()),
        "threshold": float(threshold),
        "accuracy": float(accuracy_score(labels, predictions)),
        "precision": float(precision),
        "recall": float(recall),
        "f1": float(f1),
        "kappa": float(cohen_kappa_score(labels, predictions))
        if both or len(np.unique(predictions)) > 1
        else 0.0,
        "roc_auc": float(roc_auc_score(labels, probabilities)) if both else None,
        "pr_auc": float(average_precision_score(labels, probabilities)) if both else None,
        "ece": expected_calibration_error(probabilities, labels),
        "confusion_matrix": confusion_matrix(labels, predictions, labels=[0, 1]).tolist(),
    }


def expected_calibration_error(
    probabilities: np.ndarray, labels: np.ndarray, bins: int = 15
) -> float:
    """ECE of P(relevant) with equal-width bins: sum over bins of |accuracy − confidence| · share."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    labels = np.asarray(labels).astype(float)
    edges = np.linspace(0.0, 1.0, bins + 1)
    index = np.clip(np.digitize(probabilities, edges[1:-1], right=True), 0, bins - 1)
    total = 0.0
    for b in range(bins):
        mask = index == b
        if mask.any():
            total += mask.mean() * abs(labels[mask].mean() - probabilities[mask].mean())
    return float(total)


def best_f1_threshold(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """The probability threshold that maximises F1 on the given (validation) data."""
    precision, recall, thresholds = precision_recall_curve(labels, probabilities)
    f1 = 2 * precision * recall / np.maximum(precision + recall, EPS)
    if len(thresholds) == 0:
        return 0.5
    return float(thresholds[int(np.argmax(f1[:-1]))])


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), EPS, 1 - EPS)
    return np.log(p) - np.log1p(-p)


@dataclass
class Calibration:
    """Temperature scaling on the logit of P(relevant) (for 2 classes: the logit difference)."""

    method: str = "temperature"
    temperature: float = 1.0

    def apply(self, probabilities: np.ndarray) -> np.ndarray:
        return apply_temperature(probabilities, self.temperature)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fit_temperature(probabilities: np.ndarray, labels: np.ndarray) -> Calibration:
    """The temperature that minimises the negative log-likelihood on the given (validation) data."""
    from scipy.optimize import minimize_scalar

    z = _logit(probabilities)
    y = np.asarray(labels).astype(float)

    def nll(log_t: float) -> float:
        p = 1.0 / (1.0 + np.exp(-z / np.exp(log_t)))
        p = np.clip(p, EPS, 1 - EPS)
        return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())

    result = minimize_scalar(nll, bounds=(-5.0, 5.0), method="bounded")
    return Calibration(temperature=float(np.exp(result.x)))
