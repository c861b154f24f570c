"""The quality study's renderings: ``study.md`` (the pooled table with its paired intervals, mean ±
sd over the folds, ROC-AUC per fold, the learning curve) and its plots, from a ``study.json``
(``relevance-grader study`` writes both; the main job's ``cv/`` holds them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core.io import markdown_table
from measure.classification.baselines import BASELINES
from measure.classification.crossval import pooled_table
from measure.classification.summaries import METRICS, CurvePoint, MeanSd, StudySummary


def _cell(entry: MeanSd) -> str:
    if entry.mean is None:
        return "–"
    return f"{entry.mean:.3f}" + (f" ± {entry.sd:.3f}" if entry.sd is not None else "")


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def study_markdown(summary: StudySummary) -> str:
    lines = [
        f"# Quality study: {summary.collection}",
        "",
        f"{summary.folds} query-grouped folds (test queries per fold: "
        f"{summary.queries_per_fold}), at most {summary.max_pairs_per_query or 'all'} "
        "judged pairs per query; human judgments, relevant = grade ≥ 2. Thresholds, temperatures "
        "and model selection were fitted on validation queries inside each fold's training "
        "queries.",
        "",
        "## Pooled over the folds",
        "",
        "Every query tests in one fold: the folds' test predictions pooled, and the paired "
        "per-query ROC-AUC difference of each grader to each baseline with its 95% interval "
        "(a grader beats a baseline only when the interval lies above zero).",
        "",
        pooled_table(summary.cross_validation),
        "## Mean ± sd over folds",
        "",
        markdown_table(
            ["model", *METRICS, "beats BM25 and cosine (folds)", "seconds"],
            [
                [
                    model,
                    *(_cell(entry.metric(m)) for m in METRICS),
                    entry.beats_baselines_in_folds or "(baseline)",
                    f"{entry.seconds:.0f}",
                ]
                for model, entry in summary.models.items()
            ],
        ),
        "## Per fold (ROC-AUC)",
        "",
    ]
    models = list(summary.models)
    by_fold = {(r.fold, r.model): r.roc_auc for r in summary.per_fold}
    lines.append(
        markdown_table(
            ["fold", *models],
            [
                [fold, *(_number(by_fold.get((fold, model))) for model in models)]
                for fold in range(summary.folds)
            ],
        )
    )
    if summary.learning_curve:
        lines += [
            "## Learning curve (held-out ROC-AUC by training share)",
            "",
            markdown_table(
                ["share", "training queries (mean)", "training pairs (mean)", "ROC-AUC"],
                _curve_rows(summary.learning_curve),
            ),
        ]
    return "\n".join(lines)


def _curve_rows(curve: list[CurvePoint]) -> list[list[str]]:
    rows = []
    for share in sorted({p.share for p in curve}):
        points = [p for p in curve if p.share == share]
        aucs = [p.roc_auc for p in points if p.roc_auc is not None]
        rows.append(
            [
                f"{share:g}",
                f"{np.mean([p.train_queries for p in points]):.1f}",
                f"{np.mean([p.train_pairs for p in points]):.0f}",
                f"{np.mean(aucs):.3f} ± {np.std(aucs, ddof=1) if len(aucs) > 1 else 0:.3f}",
            ]
        )
    return rows


def write_plots(summary: StudySummary, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(summary.models)
    means = [summary.models[m].roc_auc.mean or 0 for m in models]
    sds = [summary.models[m].roc_auc.sd or 0 for m in models]
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(models)), 3.5))
    ax.bar(
        models,
        means,
        yerr=sds,
        capsize=4,
        color=["#999" if m in BASELINES else "#3b6" for m in models],
    )
    ax.set_ylabel("held-out ROC-AUC (mean ± sd over folds)")
    ax.set_ylim(0.4, 1.0)
    ax.axhline(0.5, color="k", lw=0.5, ls=":")
    fig.tight_layout()
    fig.savefig(out / "study_auc.png", dpi=120)
    plt.close(fig)
    if summary.learning_curve:
        fig, ax = plt.subplots(figsize=(4.5, 3.5))
        points = summary.learning_curve
        ax.scatter([p.train_pairs for p in points], [p.roc_auc for p in points])
        ax.set_xlabel("training pairs")
        ax.set_ylabel("held-out ROC-AUC")
        fig.tight_layout()
        fig.savefig(out / "learning_curve.png", dpi=120)
        plt.close(fig)
