"""Validate JSONL record files (pairs or judgments) and report every bad line precisely.

    relevance-grader validate --files pairs.jsonl --record pair
    relevance-grader validate --files a.jsonl b.jsonl --record judgment

Exit code 0 when every line is valid, 2 otherwise; every bad line of every file prints as
``error: file:line: field: problem``, then a count. A line is bad as ``data.build`` would refuse it:
a record that does not validate, or a document with nothing to read (no title, a blank text).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.cli import parse_config, run_main
from core.errors import InputError
from core.io import RecordError, read_numbered_records
from core.records import EMPTY_DOCUMENT, RECORD_TYPES, is_empty_document


@dataclass
class ValidateConfig:
    files: list[str] = field(default_factory=list, metadata={"help": "JSONL files to check."})
    record: str = field(default="judgment", metadata={"help": "Record type: pair or judgment."})


def validate(config: ValidateConfig) -> dict[str, int]:
    if config.record not in RECORD_TYPES:
        raise InputError(f"record: expected one of {sorted(RECORD_TYPES)}, got {config.record!r}")
    if not config.files:
        raise InputError("files: give at least one JSONL file")
    record_type = RECORD_TYPES[config.record]
    counts: dict[str, int] = {}
    problems: list[RecordError] = []
    for path in config.files:  # every bad line of every file, not only the first
        skipped: list[RecordError] = []
        counts[path] = 0
        for number, record in read_numbered_records(path, record_type, skipped=skipped):
            if is_empty_document(record):  # as data.build refuses it
                skipped.append(RecordError(path, number, "text", EMPTY_DOCUMENT))
            else:
                counts[path] += 1
        problems.extend(sorted(skipped, key=lambda problem: problem.line))
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        raise InputError(f"{len(problems)} bad line(s) in {len(config.files)} file(s)")
    return counts


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([ValidateConfig], args)
    for path, count in validate(config).items():
        print(f"{path}: {count} valid {config.record} record(s)")


if __name__ == "__main__":
    run_main(main)
