from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score, roc_auc_score

from core.metrics import (
    best_f1_threshold,
    binary_metrics,
    expected_calibration_error,
    fit_temperature,
)


def test_metrics_equal_scikit_learn_on_random_data():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 500)
    probabilities = np.clip(labels * 0.3 + rng.random(500) * 0.7, 0, 1)
    metrics = binary_metrics(probabilities, labels, 0.5)
    predictions = (probabilities >= 0.5).astype(int)
    assert metrics.accuracy == pytest.approx(accuracy_score(labels, predictions))
    assert metrics.precision == pytest.approx(precision_score(labels, predictions))
    assert metrics.recall == pytest.approx(recall_score(labels, predictions))
    assert metrics.f1 == pytest.approx(f1_score(labels, predictions))
    assert metrics.roc_auc == pytest.approx(roc_auc_score(labels, probabilities))


def test_per_query_auc_orders_documents_within_each_query_apart_from_the_offsets_between_queries():
    """Query a's scores all sit above query b's: pooled ROC-AUC is hurt by that offset, the per-
    query mean is not; a query whose pairs are all of one class is left out."""
    queries = np.array(["a"] * 4 + ["b"] * 4 + ["c"] * 2)
    labels = np.array([0, 0, 1, 1, 0, 0, 1, 1, 0, 0])
    probabilities = np.array([0.7, 0.8, 0.9, 0.95, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    metrics = binary_metrics(probabilities, labels, 0.5, queries)
    assert metrics.query_roc_auc == 1.0
    assert metrics.roc_auc == pytest.approx(roc_auc_score(labels, probabilities))
    assert metrics.roc_auc < 0.8
    flipped = probabilities.copy()
    flipped[4:8] = flipped[4:8][::-1]  # query b now ordered exactly wrong
    assert binary_metrics(flipped, labels, 0.5, queries).query_roc_auc == 0.5
    assert binary_metrics(probabilities, labels, 0.5).query_roc_auc is None
    assert binary_metrics(probabilities[8:], labels[8:], 0.5, queries[8:]).query_roc_auc is None


def test_known_confusion_gives_known_numbers():
    # TP 3, FP 1, FN 2, TN 4
    labels = np.array([1, 1, 1, 0, 1, 1, 0, 0, 0, 0])
    probabilities = np.array([0.9, 0.8, 0.7, 0.6, 0.4, 0.3, 0.2, 0.1, 0.1, 0.1])
    metrics = binary_metrics(probabilities, labels, 0.5)
    assert metrics.confusion_matrix == [[4, 1], [2, 3]]
    assert metrics.accuracy == pytest.approx(0.7)
    assert metrics.precision == pytest.approx(0.75)
    assert metrics.recall == pytest.approx(0.6)
    assert metrics.f1 == pytest.approx(2 * 0.75 * 0.6 / 1.35)


def test_ece_of_a_perfectly_calibrated_and_a_miscalibrated_case():
    assert expected_calibration_error(np.array([0.0, 1.0]), np.array([0, 1])) == pytest.approx(0.0)
    assert expected_calibration_error(
        np.array([0.9] * 10), np.array([1] * 5 + [0] * 5)
    ) == pytest.approx(0.4)


def test_temperature_scaling_lowers_ece_on_an_overconfident_model():
    rng = np.random.default_rng(1)
    true_p = rng.random(4000)
    labels = (rng.random(4000) < true_p).astype(int)
    logits = np.log(true_p) - np.log1p(-true_p)
    overconfident = 1 / (1 + np.exp(-3 * logits))  # logits scaled up: too sure
    half = 2000
    calibration = fit_temperature(overconfident[:half], labels[:half])
    assert calibration.temperature == pytest.approx(3.0, rel=0.15)
    before = expected_calibration_error(overconfident[half:], labels[half:])
    after = expected_calibration_error(calibration.apply(overconfident[half:]), labels[half:])
    assert after < before / 2


def test_best_f1_threshold_beats_half_on_shifted_scores():
    labels = np.array([1] * 10 + [0] * 90)
    probabilities = np.concatenate([np.full(10, 0.3), np.linspace(0.0, 0.25, 90)])
    threshold = best_f1_threshold(probabilities, labels)
    assert 0.25 < threshold <= 0.3
    assert binary_metrics(probabilities, labels, threshold).f1 == pytest.approx(1.0)


@pytest.mark.parametrize("fit", [best_f1_threshold, fit_temperature])
@pytest.mark.parametrize(("labels", "missing"), [([0, 0, 0], "relevant"), ([1, 1], "non-relevant")])
def test_a_threshold_or_temperature_is_never_fitted_on_one_class(fit, labels, missing):
    probabilities = np.linspace(0.1, 0.9, len(labels))
    with pytest.raises(
        ValueError, match=f"validation.jsonl: no {missing} pair among {len(labels)}"
    ):
        fit(probabilities, np.array(labels), "validation.jsonl")
