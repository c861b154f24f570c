"""Validate JSONL record files (pairs or judgments) and report the first problem precisely.

    python -m data.validate --files pairs.jsonl --record pair
    python -m data.validate --files judgments.jsonl --record judgment --lenient true

Exit code 0 when every line is valid, 2 otherwise; problems print as ``file:line: field: problem``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from data.cli import parse_config, run_main
from data.io import RecordError, read_records
from data.records import RECORD_TYPES


@dataclass
class ValidateConfig:
    files: list[str] = field(default_factory=list, metadata={"help": "JSONL files to check."})
    record: str = field(default="judgment", metadata={"help": "Record type: pair or judgment."})
    lenient: bool = field(
        default=False, metadata={"help": "List every bad line instead of stopping at the first."}
    )


def validate(config: ValidateConfig) -> dict[str, int]:
    if config.record not in RECORD_TYPES:
        raise ValueError(f"record: expected one of {sorted(RECORD_TYPES)}, got {config.record!r}")
    if not config.files:
        raise ValueError("files: give at least one JSONL file")
    record_type = RECORD_TYPES[config.record]
    counts: dict[str, int] = {}
    problems: list[RecordError] = []
    for path in config.files:
        skipped: list[RecordError] | None = [] if config.lenient else None
        counts[path] = sum(1 for _ in read_records(path, record_type, skipped=skipped))
        problems.extend(skipped or [])
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        raise ValueError(f"{len(problems)} bad line(s)")
    return counts


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([ValidateConfig], args)
    for path, count in validate(config).items():
        print(f"{path}: {count} valid {config.record} record(s)")


if __name__ == "__main__":
    run_main(main)
