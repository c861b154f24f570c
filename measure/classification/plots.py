"""Evaluation plots (matplotlib, PNG): PR and ROC curves, confusion matrix, reliability, histogram."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def reliability_bins(
    probabilities: np.ndarray, labels: np.ndarray, bins: int = 15
) -> tuple[list[float], list[float], list[int]]:
    """Equal-width bins of P(relevant) (empty ones left out): each bin's mean probability, its
    fraction of relevant pairs and its number of pairs (the reliability diagram's points)."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    edges = np.linspace(0, 1, bins + 1)
    index = np.clip(np.digitize(probabilities, edges[1:-1], right=True), 0, bins - 1)
    centers, accuracy, counts = [], [], []
    for b in range(bins):
        mask = index == b
        if mask.any():
            centers.append(float(probabilities[mask].mean()))
            accuracy.append(float(labels[mask].mean()))
            counts.append(int(mask.sum()))
    return centers, accuracy, counts


def write_plots(
    probabilities: np.ndarray,
    labels: np.ndarray,
    out: str | Path,
    prefix: str = "",
    threshold: float = 0.5,
    bins: int = 15,
) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import ConfusionMatrixDisplay, PrecisionRecallDisplay, RocCurveDisplay

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def save(fig, name: str) -> None:
        path = out / f"{prefix}{name}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    if len(np.unique(labels)) > 1:
        fig, ax = plt.subplots(figsize=(5, 4))
        PrecisionRecallDisplay.from_predictions(labels, probabilities, ax=ax)
        ax.set_title("Precision-recall")
        save(fig, "pr_curve")
        fig, ax = plt.subplots(figsize=(5, 4))
        RocCurveDisplay.from_predictions(labels, probabilities, ax=ax)
        ax.plot([0, 1], [0, 1], linestyle=":", color="grey")
        ax.set_title("ROC")
        save(fig, "roc_curve")
    fig, ax = plt.subplots(figsize=(4, 4))
    ConfusionMatrixDisplay.from_predictions(
        labels,
        (probabilities >= threshold).astype(int),
        labels=[0, 1],
        display_labels=["not relevant", "relevant"],
        ax=ax,
        colorbar=False,
    )
    ax.set_title(f"Confusion at threshold {threshold:.2f}")
    save(fig, "confusion_matrix")

    edges = np.linspace(0, 1, bins + 1)
    centers, accuracy, _ = reliability_bins(probabilities, labels, bins)
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.plot([0, 1], [0, 1], linestyle=":", color="grey", label="perfect calibration")
    ax.plot(centers, accuracy, marker="o", label="grader")
    ax.set_xlabel("mean predicted P(relevant)")
    ax.set_ylabel("fraction relevant")
    ax.set_title("Reliability diagram")
    ax.legend()
    save(fig, "reliability")

    fig, ax = plt.subplots(figsize=(5, 4))
    ax.hist(probabilities[labels == 0], bins=edges, alpha=0.6, label="not relevant")
    ax.hist(probabilities[labels == 1], bins=edges, alpha=0.6, label="relevant")
    ax.axvline(threshold, color="black", linestyle="--", label=f"threshold {threshold:.2f}")
    ax.set_xlabel("P(relevant)")
    ax.set_ylabel("pairs")
    ax.set_title("Scores by label")
    ax.legend()
    save(fig, "score_histogram")
    return written
