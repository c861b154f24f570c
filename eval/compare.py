"""Compare evaluation results in one table (the paper's layout), as Markdown, CSV and JSON.

    python -m eval.compare --results runs/eval/zero-shot/metrics.json runs/eval/grader/metrics.json \\
        --labels human --out runs/eval/comparison

Rows: one per ``metrics.json`` from ``python -m eval.checkpoint``; columns: model | accuracy |
precision | recall | F1 | κ | ROC-AUC | per-query ROC-AUC | PR-AUC | ECE | threshold, at the
validation-chosen threshold where one was fitted, else at 0.5. Baseline rows (``eval.checkpoint --baseline``: BM25,
the embedder's cosine) are marked, and every other row says whether its ROC-AUC beats all of them:
a grader that does not is flagged, not hidden.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data.cli import check_choices, choice, parse_config, run_main
from data.io import atomic_writer, markdown_table, write_json
from data.metrics import SCALAR_METRICS

COLUMNS = (*SCALAR_METRICS, "ece", "threshold")


@dataclass
class CompareConfig:
    results: list[str] = field(default_factory=list, metadata={"help": "metrics.json files."})
    labels: str = choice("teacher", ("teacher", "human"), "Which reference labels.")
    out: str | None = field(default=None, metadata={"help": "Write OUT.md, OUT.csv and OUT.json."})

    def __post_init__(self) -> None:
        check_choices(self)


def comparison_rows(results: Sequence[dict[str, Any]], labels: str) -> list[dict[str, Any]]:
    rows = []
    for result in results:
        entry = result["metrics"].get(labels)
        if entry is None:
            continue
        metrics = entry.get("at_validation_threshold", entry["at_0.5"])
        baseline = (result.get("config") or {}).get("baseline")
        row = {"model": result["name"], "baseline": bool(baseline), "pairs": metrics["pairs"]}
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


def to_markdown(rows: list[dict[str, Any]], labels: str) -> str:
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
    return "\n".join(lines) + "\n"


def compare(config: CompareConfig) -> list[dict[str, Any]]:
    if not config.results:
        raise ValueError("results: give one or more metrics.json files")
    results = []
    for path in config.results:
        try:
            results.append(json.loads(Path(path).read_text()))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}: (file): invalid JSON: {exc.msg}") from None
    rows = comparison_rows(results, config.labels)
    if config.out:
        with atomic_writer(f"{config.out}.md") as handle:
            handle.write(to_markdown(rows, config.labels))
        with atomic_writer(f"{config.out}.csv") as handle:
            writer = csv.DictWriter(
                handle, fieldnames=["model", "baseline", "pairs", *COLUMNS, "beats_baselines"]
            )
            writer.writeheader()
            writer.writerows(rows)
        write_json(f"{config.out}.json", rows)
    return rows


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([CompareConfig], args)
    print(to_markdown(compare(config), config.labels))


if __name__ == "__main__":
    run_main(main)
