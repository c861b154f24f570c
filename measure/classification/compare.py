"""Compare evaluation results in one table (the paper's layout), as Markdown, CSV and JSON.

    relevance-grader compare --results runs/eval/zero-shot/metrics.json runs/eval/grader/metrics.json \\
        --labels human --out runs/eval/comparison

Rows: one per ``metrics.json`` from ``relevance-grader evaluate``; columns: model | accuracy |
precision | recall | F1 | κ | ROC-AUC | per-query ROC-AUC | PR-AUC | ECE | threshold, at the
validation-chosen threshold where one was fitted, else at 0.5. Baseline rows (``relevance-grader
evaluate --baseline``: BM25, the embedder's cosine) are marked, and every other row says whether its
ROC-AUC beats all of them: a grader that does not is flagged, not hidden.

A result evaluated without the asked-for labels (``--labels human`` over a baseline evaluated
against the teacher's labels only) has no row: it is named with the reason under the table, in
every output (``left_out`` in the JSON), and a verdict made without a baseline says so.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from core.cli import check_choices, choice, parse_config, run_main
from core.errors import InputError
from core.io import atomic_writer, markdown_table, write_json
from core.metrics import SCALAR_METRICS
from measure.classification.checkpoint import CheckpointMetrics

COLUMNS = (*SCALAR_METRICS, "ece", "threshold")


@dataclass
class CompareConfig:
    results: list[str] = field(default_factory=list, metadata={"help": "metrics.json files."})
    labels: str = choice("teacher", ("teacher", "human"), "Which reference labels.")
    out: str | None = field(default=None, metadata={"help": "Write OUT.md, OUT.csv and OUT.json."})

    def __post_init__(self) -> None:
        check_choices(self)


def left_out_reason(result: CheckpointMetrics, labels: str) -> str | None:
    """Why a result has no row against ``labels`` (None: it has one)."""
    available = sorted(result.metrics)
    if labels in available:
        return None
    if not available:
        return "it holds no metrics (not a relevance-grader evaluate metrics.json)"
    fix = "--labels both" + (" --qrels QRELS" if labels == "human" else "")
    return (
        f"evaluated against {' and '.join(available)} labels only, not {labels} "
        f"(re-run relevance-grader evaluate with {fix})"
    )


def left_out_results(
    results: Sequence[CheckpointMetrics], paths: Sequence[str], labels: str
) -> list[dict[str, Any]]:
    """Every result without a row against ``labels``: its file, name, whether a baseline, why."""
    left = []
    for result, path in zip(results, paths, strict=True):
        reason = left_out_reason(result, labels)
        if reason is not None:
            left.append(
                {
                    "result": path,
                    "model": result.name,
                    "baseline": bool(result.baseline),
                    "reason": reason,
                }
            )
    return left


def comparison_rows(results: Sequence[CheckpointMetrics], labels: str) -> list[dict[str, Any]]:
    rows = []
    for result in results:
        entry = result.metrics.get(labels)
        if entry is None:
            continue
        metrics = entry.decided
        row = {"model": result.name, "baseline": bool(result.baseline), "pairs": metrics["pairs"]}
        row.update({column: metrics.get(column) for column in COLUMNS})
        rows.append(row)
    baseline_aucs = [r["roc_auc"] for r in rows if r["baseline"] and r["roc_auc"] is not None]
    for row in rows:
        row["beats_baselines"] = (
            None
            if row["baseline"] or not baseline_aucs or row["roc_auc"] is None
            else bool(row["roc_auc"] > max(baseline_aucs))
        )
    return rows


def left_out_markdown(left_out: Sequence[dict[str, Any]]) -> list[str]:
    """Lines naming each result left out and why, and what that does to the verdicts."""
    if not left_out:
        return []
    lines = ["", f"Left out ({len(left_out)}):", ""]
    lines += [
        f"- {'baseline: ' if r['baseline'] else ''}{r['model']} ({r['result']}): {r['reason']}"
        for r in left_out
    ]
    baselines = [r["model"] for r in left_out if r["baseline"]]
    if baselines:
        lines += [
            "",
            f"The verdicts are against the baselines shown only, not {', '.join(baselines)}.",
        ]
    return lines


def to_markdown(
    rows: list[dict[str, Any]], labels: str, left_out: Sequence[dict[str, Any]] = ()
) -> str:
    header = ["model", "pairs", *COLUMNS, "beats baselines (ROC-AUC)"]
    verdicts = {None: "–", True: "yes", False: "**NO**"}
    cells = [
        [
            f"baseline: {row['model']}" if row["baseline"] else str(row["model"]),
            row["pairs"],
            *("–" if row[c] is None else f"{row[c]:.3f}" for c in COLUMNS),
            "(baseline)" if row["baseline"] else verdicts[row["beats_baselines"]],
        ]
        for row in rows
    ]
    lines = [f"Against {labels} labels.", "", markdown_table(header, cells).rstrip("\n")]
    losers = [r["model"] for r in rows if r["beats_baselines"] is False]
    if losers:
        lines += [
            "",
            f"**Warning**: {', '.join(losers)} rank(s) pairs no better than an untrained baseline "
            "(ROC-AUC); such labels carry less information than the retriever's own scores.",
        ]
    return "\n".join(lines + left_out_markdown(left_out)) + "\n"


def read_results(paths: Sequence[str]) -> list[CheckpointMetrics]:
    """Each relevance-grader evaluate metrics.json; one of another shape is one line naming it."""
    return [CheckpointMetrics.read(path) for path in paths]


class Comparison(TypedDict):
    """OUT.json: the table's rows and the results left out of it."""

    labels: str
    rows: list[dict[str, Any]]  # one per result: model, baseline, pairs, the columns
    left_out: list[dict[str, Any]]  # each result without a row, and why


def compare(config: CompareConfig) -> Comparison:
    """The table's rows and the results left out of it (written to OUT.* when ``out`` is set)."""
    if not config.results:
        raise InputError("results: give one or more metrics.json files")
    results = read_results(config.results)
    left_out = left_out_results(results, config.results, config.labels)
    if len(left_out) == len(results):
        named = "; ".join(f"{r['result']}: {r['reason']}" for r in left_out)
        raise InputError(f"labels: no result has {config.labels} labels ({named})")
    comparison: Comparison = {
        "labels": config.labels,
        "rows": comparison_rows(results, config.labels),
        "left_out": left_out,
    }
    if config.out:
        write_comparison(comparison, config.out)
    return comparison


def write_comparison(comparison: Comparison, out: str) -> None:
    """OUT.md (the table and what was left out), OUT.csv (the rows) and OUT.json (both)."""
    with atomic_writer(f"{out}.md") as handle:
        handle.write(to_markdown(comparison["rows"], comparison["labels"], comparison["left_out"]))
    with atomic_writer(f"{out}.csv") as handle:
        writer = csv.DictWriter(
            handle, fieldnames=["model", "baseline", "pairs", *COLUMNS, "beats_baselines"]
        )
        writer.writeheader()
        writer.writerows(comparison["rows"])
    write_json(f"{out}.json", comparison)


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([CompareConfig], args)
    comparison = compare(config)
    print(to_markdown(comparison["rows"], config.labels, comparison["left_out"]))


if __name__ == "__main__":
    run_main(main)
