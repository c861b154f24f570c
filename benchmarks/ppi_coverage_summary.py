"""The coverage studies' populations in judgments/coverage.json: each population's lowest PPI++
coverage per metric and n, kept apart, so that what a user is shown is the lowest over every
population (judgments.coverage) and names the one it was lowest on.

    python -m benchmarks.ppi_coverage_summary --inputs runs/coverage/scifact.json \\
        runs/coverage/squad.json --names "SciFact, 300 queries" "SQuAD dev, 1,000 queries" \\
        --source "docs/results/ppi-coverage.md 2026-11-26" --out judgments/coverage.json

Each input is a ``benchmarks.ppi_coverage --out`` file, one population; its entry's cells are
the lowest PPI++ coverage over every labeler and system (each run and paired difference) at that
n. A population already in ``--out`` under the same name is replaced; the others are kept (the
studies' --out files of earlier populations need not be at hand). The output (strict JSON) is
{"format_version", "confidence", "note", "populations": [{"name", "labeler", "queries", "k"
(the runs' cut-off), "estimator", "source", "command", "coverage": {metric: {n: coverage}}}]}.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.ppi_coverage import lowest_ppi_coverage
from core.cli import parse_config, run_main
from core.io import strict, write_json
from judgments.coverage import TABLE_VERSION


@dataclass
class SummaryConfig:
    inputs: list[str] = field(
        default_factory=list, metadata={"help": "benchmarks.ppi_coverage --out files."}
    )
    names: list[str] = field(
        default_factory=list,
        metadata={"help": "Each input's population name (default: its labelers and size)."},
    )
    source: str = field(default="", metadata={"help": "Where the study is recorded."})
    command: str = field(
        default="", metadata={"help": "The commands of the study (default: this command)."}
    )
    out: str = field(default="judgments/coverage.json")


def population(result: dict[str, Any], name: str, source: str, command: str) -> dict[str, Any]:
    """One study's --out file as a population entry."""
    labeler = ", ".join(result["intervals"])
    queries = result["population"]["queries"]
    return {
        "name": name or f"{queries} queries, labeler {labeler}",
        "labeler": labeler,
        "queries": queries,
        "k": result["config"]["k"],
        "estimator": result["estimator"],
        "source": source,
        "command": command,
        "coverage": lowest_ppi_coverage([result]),
    }


def summary(config: SummaryConfig, argv: Sequence[str], kept: dict[str, Any]) -> dict[str, Any]:
    """The table: ``kept`` (the current --out) with the inputs' populations added or replaced."""
    if not config.inputs:
        raise ValueError("inputs: give the coverage studies' --out files")
    if config.names and len(config.names) != len(config.inputs):
        raise ValueError(f"names: {len(config.names)} given for {len(config.inputs)} inputs")
    results = [json.loads(Path(path).read_text()) for path in config.inputs]
    levels = {round(r["confidence"], 6) for r in results} | (
        {round(kept["confidence"], 6)} if kept.get("populations") else set()
    )
    if len(levels) != 1:
        raise ValueError(f"inputs: studies at different confidence levels ({sorted(levels)})")
    command = config.command or " ".join(["python -m benchmarks.ppi_coverage_summary", *argv])
    names = config.names or [""] * len(results)
    added = [
        population(result, name, config.source, command)
        for result, name in zip(results, names, strict=True)
    ]
    replaced = {entry["name"] for entry in added}
    others = [p for p in kept.get("populations", []) if p["name"] not in replaced]
    return strict(
        {
            "format_version": TABLE_VERSION,
            "confidence": levels.pop(),
            "note": kept.get("note", ""),
            "populations": [*others, *added],
        }
    )


def _current(path: str) -> dict[str, Any]:
    """The table at ``path`` (empty when there is none or it is of another version)."""
    if not Path(path).is_file():
        return {}
    table = json.loads(Path(path).read_text(encoding="utf-8"))
    return table if table.get("format_version") == TABLE_VERSION else {}


def main(args: Sequence[str] | None = None) -> None:
    argv = list(args) if args is not None else sys.argv[1:]
    (config,) = parse_config([SummaryConfig], argv)
    result = summary(config, argv, _current(config.out))
    write_json(config.out, result)
    for entry in result["populations"]:
        print(f"{entry['name']}: {json.dumps(entry['coverage'])}")


if __name__ == "__main__":
    run_main(main)
