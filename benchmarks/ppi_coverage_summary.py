"""The lowest PPI++ coverage per metric and n over coverage studies, as one small JSON file.

    python -m benchmarks.ppi_coverage_summary --inputs runs/coverage/scifact.json \\
        runs/coverage/squad.json --source "docs/results.md 2026-11-26" --out judgments/coverage.json

Each input is an ``benchmarks.ppi_coverage --out`` file; a cell is the lowest PPI++ coverage over
every labeler and system (each run and paired difference) of every input at that n. The output
(strict JSON) is {"source", "command", "confidence", "coverage": {metric: {n: coverage}}}.
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


@dataclass
class SummaryConfig:
    inputs: list[str] = field(
        default_factory=list, metadata={"help": "benchmarks.ppi_coverage --out files."}
    )
    source: str = field(default="", metadata={"help": "Where the study is recorded."})
    command: str = field(
        default="", metadata={"help": "The commands of the study (default: this command)."}
    )
    out: str = field(default="judgments/coverage.json")


def summary(config: SummaryConfig, argv: Sequence[str]) -> dict[str, Any]:
    if not config.inputs:
        raise ValueError("inputs: give the coverage studies' --out files")
    results = [json.loads(Path(path).read_text()) for path in config.inputs]
    confidence = {round(r["confidence"], 6) for r in results}
    if len(confidence) != 1:
        raise ValueError(f"inputs: studies at different confidence levels ({sorted(confidence)})")
    return strict(
        {
            "source": config.source,
            "command": config.command
            or " ".join(["python -m benchmarks.ppi_coverage_summary", *argv]),
            "confidence": confidence.pop(),
            "coverage": lowest_ppi_coverage(results),
        }
    )


def main(args: Sequence[str] | None = None) -> None:
    argv = list(args) if args is not None else sys.argv[1:]
    (config,) = parse_config([SummaryConfig], argv)
    result = summary(config, argv)
    write_json(config.out, result)
    print(json.dumps(result["coverage"], indent=1))


if __name__ == "__main__":
    run_main(main)
