"""Classification metrics, calibration and thresholds for a grader's P(relevant).

Everything here is fitted on one split (validation) and applied to another (test): the
evaluated split never chooses its own threshold or temperature.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sklearn.metrics import precision_recall_curve

from data.metrics import binary_metrics, expected_calibration_error, require_both_classes
from models.scoring import apply_temperature

__all__ = [
    "Calibration",
    "best_f1_threshold",
    "binary_metrics",
    "expected_calibration_error",
    "fit_temperature",
]

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
