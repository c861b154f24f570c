"""Cross-validated quality: out-of-fold predictions pooled over the folds, and paired per-query
differences between a grader and each baseline with a 95% interval.

Each judged query is a test query of exactly one fold, so the folds' test predictions
(``predictions.jsonl`` of ``relevance-grader evaluate``, each calibrated and thresholded on its own
fold's validation queries) together give one out-of-fold prediction per pair. From them:

- pooled metrics: ROC-AUC and PR-AUC of the calibrated probabilities, F1 and Cohen's κ of the
  decisions, and the mean per-query ROC-AUC over every query with both classes;
- the paired difference of per-query ROC-AUC, grader minus baseline, over the queries both label,
  with a Student-t 95% interval over queries. A grader *beats* a baseline only when that
  interval lies above zero.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from core.metrics import label_metrics, per_query_roc_auc

PREDICTIONS = "predictions.jsonl"


@dataclass
class OutOfFold:
    """One model's test predictions of every fold, concatenated (pairs with a reference label)."""

    qids: np.ndarray
    probabilities: np.ndarray
    decisions: np.ndarray
    labels: np.ndarray
    doc_ids: np.ndarray

    @classmethod
    def read(cls, folders: Sequence[Path], source: str) -> OutOfFold:
        rows = []
        for folder in folders:
            with open(folder / PREDICTIONS, encoding="utf-8") as handle:
                rows += [json.loads(line) for line in handle]
        column = f"{source}_label"
        usable = [r for r in rows if r.get(column) is not None and r["probability"] is not None]
        return cls(
            np.array([r["qid"] for r in usable]),
            np.array([r["probability"] for r in usable], dtype=np.float64),
            np.array([r["predicted"] for r in usable], dtype=int),
            np.array([r[column] for r in usable], dtype=int),
            np.array([r["doc_id"] for r in usable]),
        )

    def query_aucs(self) -> dict[str, float]:
        return per_query_roc_auc(self.probabilities, self.labels, self.qids)


class PooledMetrics(BaseModel):
    """One model's pooled out-of-fold metrics, as the study's and the main job's files hold
    them."""

    model_config = ConfigDict(extra="forbid")
    pairs: int
    queries: int
    roc_auc: float | None
    query_roc_auc: float | None
    pr_auc: float | None
    f1: float | None
    kappa: float | None
    precision: float | None
    recall: float | None

    @classmethod
    def of(cls, oof: OutOfFold) -> PooledMetrics:
        from sklearn.metrics import average_precision_score, roc_auc_score

        both = len(np.unique(oof.labels)) > 1
        decided = label_metrics(oof.labels, oof.decisions)
        per_query = oof.query_aucs()
        return cls(
            pairs=len(oof.labels),
            queries=len(np.unique(oof.qids)),
            roc_auc=float(roc_auc_score(oof.labels, oof.probabilities)) if both else None,
            query_roc_auc=float(np.mean(list(per_query.values()))) if per_query else None,
            pr_auc=float(average_precision_score(oof.labels, oof.probabilities)) if both else None,
            f1=decided.f1,
            kappa=decided.kappa,
            precision=decided.precision,
            recall=decided.recall,
        )

    def to_dict(self) -> dict[str, float | int | None]:
        return self.model_dump()


class PairedDifference(BaseModel):
    """Per-query ROC-AUC of ``model`` minus that of ``baseline`` over the queries both label,
    with its 95% interval and the verdict (``beats``: the interval lies above zero)."""

    model_config = ConfigDict(extra="forbid")
    model: str
    baseline: str
    queries: int
    mean: float | None
    low: float | None
    high: float | None
    beats: bool

    @classmethod
    def of(cls, model: str, baseline: str, ours: OutOfFold, theirs: OutOfFold) -> PairedDifference:
        mine, other = ours.query_aucs(), theirs.query_aucs()
        shared = sorted(set(mine) & set(other))
        differences = np.array([mine[q] - other[q] for q in shared])
        mean, low, high = mean_interval(differences)
        beats = low is not None and low > 0
        return cls(
            model=model,
            baseline=baseline,
            queries=len(shared),
            mean=mean,
            low=low,
            high=high,
            beats=beats,
        )


def mean_interval(
    values: np.ndarray, confidence: float = 0.95
) -> tuple[float | None, float | None, float | None]:
    """The mean and its Student-t interval (None where fewer than two values)."""
    from scipy import stats

    if len(values) < 2:
        return (float(values.mean()) if len(values) else None), None, None
    mean = float(values.mean())
    half = float(stats.t.ppf((1 + confidence) / 2, len(values) - 1) * stats.sem(values))
    return mean, mean - half, mean + half


class CrossValidationRecord(BaseModel):
    """The cross-validation's result in ``study.json`` and the main job's ``summary.json``."""

    model_config = ConfigDict(extra="forbid")
    folds: int
    source: str  # the rows' reference: "human" or "teacher"
    pooled: dict[str, PooledMetrics]
    differences: list[PairedDifference]
    beats_every_baseline: dict[str, bool]  # the graders' verdicts (baselines have none)


def held_out_warning(
    cross: CrossValidationRecord, names: Mapping[str, str], labeler: str = "grader"
) -> str | None:
    """The report's first words when the grader that labels the runs (``labeler``, the row the
    main job exports) does not beat every baseline on held-out queries: which baselines it does
    not beat, with their paired intervals, which labeler did best, and that the runs' metrics
    under its labels are not to be trusted; None when it beats them (or is not in the study)."""
    if cross.beats_every_baseline.get(labeler, True):
        return None
    name = names.get(labeler, labeler)
    unbeaten = "; ".join(
        f"{names.get(d.baseline, d.baseline)}: Δ {_signed(d.mean)} "
        f"[{_signed(d.low)}, {_signed(d.high)}]"
        for d in cross.differences
        if d.model == labeler and not d.beats
    )
    scores = {
        model: metrics.query_roc_auc
        for model, metrics in cross.pooled.items()
        if metrics.query_roc_auc is not None
    }
    best = max(scores, key=scores.__getitem__) if scores else None
    shown = "; ".join(f"{names.get(m, m)} {v:.3f}" for m, v in scores.items())
    if best == labeler:
        standing = f"It scores highest (per-query ROC-AUC: {shown}), but not measurably so. "
    elif best:
        standing = f"The best labeler there was {names.get(best, best)} ({shown}). "
    else:
        standing = ""
    return (
        f"Not trustworthy: the grader ({name}) does not beat every baseline on held-out "
        f"queries (per-query ROC-AUC difference, 95% interval not above zero: {unbeaten}). "
        f"{standing}The runs' metrics under the grader's labels below are not to be trusted as "
        "a measure of relevance; PPI++ estimates, where shown, are corrected by the human "
        "judgments."
    )


def cross_validate(
    fold_outputs: Sequence[Mapping[str, Path]],
    graders: Sequence[str],
    baselines: Sequence[str],
    source: str,
) -> CrossValidationRecord:
    """Pooled metrics of every model and the graders' paired differences to each baseline.

    ``fold_outputs[k][model]`` is the folder of ``model``'s evaluation on fold k's test queries.
    """
    models = list(dict.fromkeys(m for outputs in fold_outputs for m in outputs))
    oof = {m: OutOfFold.read([out[m] for out in fold_outputs], source) for m in models}
    differences = [
        PairedDifference.of(grader, baseline, oof[grader], oof[baseline])
        for grader in graders
        for baseline in baselines
    ]
    pooled = {model: PooledMetrics.of(oof[model]) for model in models}
    verdicts = {
        model: all(d.beats for d in differences if d.model == model)
        for model in pooled
        if any(d.model == model for d in differences)
    }
    return CrossValidationRecord(
        folds=len(fold_outputs),
        source=source,
        pooled=pooled,
        differences=differences,
        beats_every_baseline=verdicts,
    )


POOLED_COLUMNS = (
    ("roc_auc", "ROC-AUC"),
    ("query_roc_auc", "per-query ROC-AUC"),
    ("pr_auc", "PR-AUC"),
    ("f1", "F1"),
    ("kappa", "κ"),
)


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.3f}"


def difference_cell(difference: PairedDifference) -> str:
    """``+0.012 [-0.030, +0.054]``: the mean paired difference and its 95% interval."""
    low, high = difference.low, difference.high
    interval = "" if low is None else f" [{_signed(low)}, {_signed(high)}]"
    return _signed(difference.mean) + interval


def pooled_table(cross: CrossValidationRecord, names: Mapping[str, str] | None = None) -> str:
    """The cross-validation's pooled metrics, one row per model, with each grader's paired
    difference to every baseline and the verdict."""
    from core.io import markdown_table

    names = names or {}
    differences = cross.differences
    baselines = list(dict.fromkeys(d.baseline for d in differences))
    header = ["labeler", "pairs", *(title for _, title in POOLED_COLUMNS)]
    header += [f"Δ per-query ROC-AUC vs {names.get(b, b)} (95% CI)" for b in baselines]
    header.append("beats both baselines" if len(baselines) == 2 else "beats the baselines")
    rows = []
    for model, metrics in cross.pooled.items():
        mine = {d.baseline: d for d in differences if d.model == model}
        verdict = cross.beats_every_baseline.get(model)
        rows.append(
            [
                names.get(model, model) + (" (baseline)" if model in baselines else ""),
                metrics.pairs,
                *(_number(getattr(metrics, key)) for key, _ in POOLED_COLUMNS),
                *(difference_cell(mine[b]) if b in mine else "–" for b in baselines),
                "(baseline)"
                if model in baselines
                else {True: "yes", False: "**no**", None: "–"}[verdict],
            ]
        )
    return markdown_table(header, rows)


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"
