"""The main job's ``report.md``: its summary (``summary.json``) as Markdown, the held-out quality
with its paired intervals and ROC-AUC per fold, the retrieval runs under the grader's labels, the
labeler leaderboard, the PPI++ estimates, and each stage's time. The job writes it and prints it;
the README's block (eval.report.readme) and the page (eval.report.page) read the same summary."""

from __future__ import annotations

from core.io import markdown_table
from core.job_stages import stage_times, total_note
from eval.report.leaderboard_markdown import leaderboard_markdown
from eval.report.ppi_markdown import ppi_table
from measure.classification.crossval import held_out_warning, pooled_table
from measure.classification.summaries import JobSummary
from measure.metrics.retrieval import metrics_table


def cross_validation_markdown(summary: JobSummary) -> list[str]:
    """The held-out quality: the pooled table with its paired intervals, then ROC-AUC per fold."""
    cross, names = summary.cross_validation, summary.names
    source = "human judgments" if cross.source == "human" else "teacher labels"
    models = list(cross.pooled)
    by_fold = {(r.fold, r.model): r.roc_auc for r in summary.per_fold}
    per_fold = markdown_table(
        ["fold", "test queries", *(names.get(m, m) for m in models)],
        [
            [fold, queries, *(_number(by_fold.get((fold, m))) for m in models)]
            for fold, queries in enumerate(summary.queries_per_fold)
        ],
    )
    return [
        f"{summary.folds}-fold cross-validation by query against the {source}: every judged "
        "query tests in one fold, thresholds and calibrations are fitted on validation queries "
        "inside each fold's training side, and the folds' test predictions are pooled. Δ is the "
        "per-query ROC-AUC difference, grader minus baseline, with its 95% interval over "
        "queries; the grader beats a baseline only when the interval lies above zero.",
        "",
        pooled_table(cross, names),
        "ROC-AUC per fold:",
        "",
        per_fold,
        f"The grader of fold {summary.export_fold} is exported and labels the retrieval runs "
        "below.",
        "",
    ]


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def report_markdown(summary: JobSummary) -> str:
    warning = held_out_warning(summary.cross_validation, summary.names)
    lines = [
        "# Main job report",
        "",
        *([f"**{warning}**", ""] if warning else []),
        f"Run directory `{summary.run_dir}`; total {summary.seconds} s"
        f"{total_note(summary)}; models scored in "
        f"{summary.scoring_dtype or 'an unrecorded dtype'}.",
        "",
        "## Held-out quality",
        "",
        *cross_validation_markdown(summary),
        "## Retrieval runs labelled by the grader",
        "",
    ]
    lines += [metrics_table(summary.search, digits=3)]
    if summary.leaderboard is not None:
        lines += ["", leaderboard_markdown(summary.leaderboard, level=2).rstrip("\n")]
    else:
        lines += ["", "No labeler leaderboard: it needs human judgments (--qrels) and a --zoo."]
    if summary.ppi:
        ppi = summary.ppi
        metric = next(m for m in next(iter(summary.search.values())) if m.startswith("ndcg@"))
        truth = ", ".join(
            f"{run} {values[metric]:.3f}"
            for run, values in (summary.human_all_queries or {}).items()
        )
        lines += [
            "",
            f"## The grader's metrics corrected by {ppi.judged_queries} human-judged queries",
            "",
            f"The grader labels every query; {ppi.judged_queries} queries drawn at random also "
            f"keep their human judgments ({ppi.estimator}). What the estimates estimate, "
            f"{metric} under all of the human judgments (every judged passage in the ideal "
            f"ranking): {truth}.",
            "",
            ppi_table(ppi).rstrip("\n"),
        ]
    lines += ["", "## Stage times (s)", ""]
    lines += [f"- {name}: {text}" for name, text in stage_times(summary).items()]
    return "\n".join(lines) + "\n"
