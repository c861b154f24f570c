"""The measured coverage of the intervals eval.search reports, per metric and number of judged
queries, from the coverage study on large query populations (docs/results.md, 2026-11-26;
``judgments/coverage.json`` holds its lowest PPI++ coverage per metric and n). Every interval shown to
a user carries the coverage measured for its metric at its n, and a metric measured below
:data:`COVERAGE_TARGET` is marked where it is shown: a nominal 95% is a claim, this is the
evidence."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

from measure.metrics.ppi_record import MeasuredCoverage

COVERAGE_TARGET = 0.93


@cache
def coverage_table() -> dict[str, Any]:
    """judgments/coverage.json: {"source", "command", "confidence", "coverage": {metric: {n: c}}};
    an empty table where the study has not been recorded."""
    path = resources.files("judgments").joinpath("coverage.json")
    if not path.is_file():
        return {"coverage": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def _studied_name(metric: str) -> str:
    """The study's name of ``metric``: MAP and MRR with or without their cut-off."""
    table = coverage_table()["coverage"]
    if metric in table:
        return metric
    bare = re.sub(r"@\d+$", "", metric)
    return bare if bare in table else metric


def measured_coverage(metric: str, n: int) -> MeasuredCoverage | None:
    """The lowest coverage the study measured for ``metric`` at the studied sizes around ``n``
    (the largest not above it and the smallest not below it: coverage need not grow with n),
    with the size it was lowest at and whether it is below the target; None where the metric or
    so small an n was not studied."""
    by_n = coverage_table()["coverage"].get(_studied_name(metric))
    if not by_n:
        return None
    sizes = sorted(int(size) for size in by_n)
    below = [size for size in sizes if size <= n]
    if not below:
        return None
    around = {below[-1], *[size for size in sizes if size >= n][:1]}
    at = min(around, key=lambda size: (float(by_n[str(size)]), size))
    value = float(by_n[str(at)])
    return MeasuredCoverage(
        coverage=value,
        at_n=at,
        below_target=value < COVERAGE_TARGET,
        target=COVERAGE_TARGET,
        source=coverage_table().get("source", ""),
    )


def coverage_note(metric: str, n: int) -> str:
    """Beside an interval: its measured coverage in words, or that none was measured."""
    found = measured_coverage(metric, n)
    if found is None:
        return f"coverage not measured for {metric} at n = {n}"
    mark = " (below the 0.93 target)" if found.below_target else ""
    return f"measured coverage {found.coverage:.3f} at n = {found.at_n}{mark}"
