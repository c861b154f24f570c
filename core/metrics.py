"""Binary classification metrics, calibration and thresholds: the one implementation that
training, evaluation, recalibration and judge agreement use (scikit-learn and scipy underneath).

Thresholds and temperatures are fitted on one split (validation) and applied to another (test):
the evaluated split never chooses its own threshold or temperature."""

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

from core.errors import InputError

SCALAR_METRICS = (
    "accuracy",
    "precision",
    "recall",
    "f1",
    "kappa",
    "roc_auc",
    "query_roc_auc",
    "pr_auc",
)


def per_query_roc_auc(
    probabilities: np.ndarray, labels: np.ndarray, queries: np.ndarray
) -> dict[str, float]:
    """Each query's ROC-AUC among its own pairs, for the queries with both classes."""
    labels, queries = np.asarray(labels).astype(int), np.asarray(queries)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    return {
        str(q): float(roc_auc_score(labels[queries == q], probabilities[queries == q]))
        for q in np.unique(queries)
        if len(np.unique(labels[queries == q])) > 1
    }


def require_both_classes(labels: Any, source: str) -> None:
    """Refuse to fit a threshold or a calibration on labels of one class: with no relevant pair
    (or none that is not) any fit is degenerate (a threshold near 0 that calls every pair
    relevant, a temperature near 0) and would pass silently."""
    values = np.asarray(labels).astype(int)
    relevant = int((values == 1).sum())
    if relevant == 0 or relevant == len(values):
        missing = "relevant" if relevant == 0 else "non-relevant"
        raise InputError(
            f"{source}: no {missing} pair among {len(values)}; a threshold or calibration is "
            "fitted on both classes (judge more queries, or pairs with both labels)"
        )


def query_roc_auc(
    probabilities: np.ndarray, labels: np.ndarray, queries: np.ndarray
) -> float | None:
    """Mean over queries of the ROC-AUC among each query's own pairs (queries with both classes):
    how well a query's documents are ordered, apart from how scores compare across queries
    (pooled ROC-AUC needs both). None when no query has both classes."""
    aucs = per_query_roc_auc(probabilities, labels, queries)
    return float(np.mean(list(aucs.values()))) if aucs else None


@dataclass
class LabelMetrics:
    """:func:`label_metrics`: how hard predictions agree with labels."""

    accuracy: float
    precision: float
    recall: float
    f1: float
    kappa: float
    confusion_matrix: list[list[int]]  # [[TN, FP], [FN, TP]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BinaryMetrics:
    """:func:`binary_metrics`; ``to_dict`` is the object the metrics files hold, keys in this
    order."""

    pairs: int
    positive_rate: float
    threshold: float
    accuracy: float
    precision: float
    recall: float
    f1: float
    kappa: float
    confusion_matrix: list[list[int]]
    roc_auc: float | None  # None with one class
    query_roc_auc: float | None  # None without queries, or no query with both classes
    pr_auc: float | None
    ece: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def binary_metrics(
    probabilities: np.ndarray,
    labels: np.ndarray,
    threshold: float = 0.5,
    queries: np.ndarray | None = None,
) -> BinaryMetrics:
    """:func:`label_metrics` at ``threshold``, plus ROC-AUC, PR-AUC and ECE of the probabilities,
    and with each pair's query given, the per-query ROC-AUC (:func:`query_roc_auc`)."""
    labels = np.asarray(labels).astype(int)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    both = len(np.unique(labels)) > 1
    return BinaryMetrics(
        pairs=len(labels),
        positive_rate=float(labels.mean()),
        threshold=float(threshold),
        **label_metrics(labels, (probabilities >= threshold).astype(int)).to_dict(),
        roc_auc=float(roc_auc_score(labels, probabilities)) if both else None,
        query_roc_auc=None if queries is None else query_roc_auc(probabilities, labels, queries),
        pr_auc=float(average_precision_score(labels, probabilities)) if both else None,
        ece=expected_calibration_error(probabilities, labels),
    )


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


def label_metrics(labels: np.ndarray, predictions: np.ndarray) -> LabelMetrics:
    """Accuracy, precision, recall, F1, Cohen's κ and the confusion matrix of hard predictions."""
    labels = np.asarray(labels).astype(int)
    predictions = np.asarray(predictions).astype(int)
    precision, recall, f1, _ = precision_recall_fscore_support(
        labels, predictions, average="binary", zero_division=0
    )
    varied = len(np.unique(labels)) > 1 or len(np.unique(predictions)) > 1
    return LabelMetrics(
        accuracy=float(accuracy_score(labels, predictions)),
        precision=float(precision),
        recall=float(recall),
        f1=float(f1),
        kappa=float(cohen_kappa_score(labels, predictions)) if varied else 0.0,
        confusion_matrix=confusion_matrix(labels, predictions, labels=[0, 1]).tolist(),
    )


def classification_metrics(
    probabilities: np.ndarray, labels: np.ndarray, threshold: float = 0.5
) -> dict[str, float]:
    """The scalar entries of :func:`binary_metrics` (what training logs each evaluation)."""
    metrics = binary_metrics(probabilities, labels, threshold).to_dict()
    return {k: metrics[k] for k in SCALAR_METRICS if metrics[k] is not None}


EPS = 1e-7


def best_f1_threshold(
    probabilities: np.ndarray, labels: np.ndarray, source: str = "labels"
) -> float:
    """The probability threshold that maximises F1 on the given (validation) data (both classes
    needed; ``source`` names the data in the error)."""
    require_both_classes(labels, source)
    precision, recall, thresholds = precision_recall_curve(labels, probabilities)
    f1 = 2 * precision * recall / np.maximum(precision + recall, EPS)
    if len(thresholds) == 0:
        return 0.5
    return float(thresholds[int(np.argmax(f1[:-1]))])


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), EPS, 1 - EPS)
    return np.log(p) - np.log1p(-p)


def apply_temperature(probabilities: np.ndarray, temperature: float) -> np.ndarray:
    """Temperature scaling of P(relevant): sigmoid(logit(p) / T). For two classes the logit of p
    is the logit difference, so this equals softmax(logits / T)[:, 1]."""
    return 1.0 / (1.0 + np.exp(-_logit(probabilities) / temperature))


@dataclass
class Calibration:
    """Temperature scaling on the logit of P(relevant) (for 2 classes: the logit difference)."""

    method: str = "temperature"
    temperature: float = 1.0

    def apply(self, probabilities: np.ndarray) -> np.ndarray:
        return apply_temperature(probabilities, self.temperature)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fit_temperature(
    probabilities: np.ndarray, labels: np.ndarray, source: str = "labels"
) -> Calibration:
    """The temperature that minimises the negative log-likelihood on the given (validation) data
    (both classes needed; ``source`` names the data in the error)."""
    from scipy.optimize import minimize_scalar

    require_both_classes(labels, source)

    z = _logit(probabilities)
    y = np.asarray(labels).astype(float)

    def nll(log_t: float) -> float:
        p = 1.0 / (1.0 + np.exp(-z / np.exp(log_t)))
        p = np.clip(p, EPS, 1 - EPS)
        return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())

    result = minimize_scalar(nll, bounds=(-5.0, 5.0), method="bounded")
    return Calibration(temperature=float(np.exp(result.x)))
