"""Compare evaluation results in one table (the paper's layout), as Markdown, CSV and JSON.

    python -m eval.compare --results runs/eval/zero-shot/metrics.json runs/eval/grader/metrics.json \\
        --labels human --out runs/eval/comparison

Rows: one per ``metrics.json`` from ``python -m eval.checkpoint``; columns: model | accuracy |
precision | recall | F1 | κ | ROC-AUC | PR-AUC | ECE | threshold, at the validation-chosen
threshold where one was fitted, else at 0.5.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data.cli import parse_config, run_main
from data.io import atomic_writer, write_json

COLUMNS = (
    "accuracy",
    "precision",
    "recall",
    "f1",
    "kappa",
    "roc_auc",
    "pr_auc",
    "ece",
    "threshold",
)


@dataclass
class CompareConfig:
    results: list[str] = field(default_factory=list, metadata={"help": "metrics.json files."})
    labels: str = field(default="teacher", metadata={"help": "Which reference: teacher or human."})
    out: str | None = field(default=None, metadata={"help": "Write OUT.md, OUT.csv and OUT.json."})


def comparison_rows(results: Sequence[dict[str, Any]], labels: str) -> list[dict[str, Any]]:
    rows = []
    for result in results:
        entry = result["metrics"].get(labels)
        if entry is None:
            continue
        metrics = entry.get("at_validation_threshold", entry["at_0.5"])
        row = {"model": result["name"], "pairs": metrics["pairs"]}
        row.update({column: metrics.get(column) for column in COLUMNS})
        rows.append(row)
    return rows


def to_markdown(rows: list[dict[str, Any]], labels: str) -> str:
    header = ["model", "pairs", *COLUMNS]
    lines = [
        f"Against {labels} labels.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in rows:
        cells = [str(row["model"]), str(row["pairs"])]
        cells += ["–" if row[c] is None else f"{row[c]:.3f}" for c in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
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
            writer = csv.DictWriter(handle, fieldnames=["model", "pairs", *COLUMNS])
            writer.writeheader()
            writer.writerows(rows)
        write_json(f"{config.out}.json", rows)
    return rows


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([CompareConfig], args)
    print(to_markdown(compare(config), config.labels))


if __name__ == "__main__":
    run_main(main)
