"""The measured coverage of the intervals eval.search reports, per metric and number of judged
queries, from the coverage study (docs/results/ppi-coverage.md, 2026-11-26).
``judgments/coverage.json`` holds each studied population's lowest PPI++ coverage per metric and n
(over its systems and paired differences); what a user is shown is the lowest over **every**
population studied, with the population it was lowest on. A nominal 95% is a claim, this is the
evidence:

* below :data:`MIN_JUDGED_QUERIES` judged queries no interval is made at all (the study's
  smallest size, 5, covered as little as 0.720 for MAP; nothing below 5 was measured);
* a metric whose lowest measured coverage is below :data:`COVERAGE_TARGET` is marked † where its
  interval is shown;
* an n the study did not measure is marked ‡: the figure shown is the lowest at the studied sizes
  around it (coverage need not grow with n), not a measurement at that n.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from core.errors import InputError
from measure.metrics.ppi_record import MeasuredCoverage

COVERAGE_TARGET = 0.93
TABLE_VERSION = 2
# Fewer judged units than this get no interval. Chosen from the study: at n = 5, its smallest
# size, the lowest coverage of a nominal 95% interval was 0.720 (MAP), 0.857 (P@10), 0.876
# (NDCG@10) and 0.893 (MRR); at n = 10 it was 0.793, 0.898, 0.876 and 0.922, and it rises with n
# for every metric but P@10 and hit@10 on one-relevant and near-census populations
# (docs/results/ppi-coverage.md 2026-11-26). Below 5 nothing was measured.
MIN_JUDGED_QUERIES = 10
BELOW_TARGET = "†"
NOT_STUDIED = "‡"


@cache
def coverage_table() -> dict[str, Any]:
    """judgments/coverage.json: {"format_version", "confidence", "populations": [{"name",
    "queries", "estimator", "source", "command", "coverage": {metric: {n: c}}}]}; a table of
    another version is a bug of this checkout, refused in one line."""
    path = resources.files("judgments").joinpath("coverage.json")
    if not path.is_file():
        return {"populations": []}
    table = json.loads(path.read_text(encoding="utf-8"))
    if table.get("format_version") != TABLE_VERSION:
        raise ValueError(
            f"judgments/coverage.json: format_version {table.get('format_version')!r}, this "
            f"release reads {TABLE_VERSION} (regenerate it: python -m benchmarks.ppi_coverage_summary)"
        )
    return table


def _studied(metric: str, population: dict[str, Any], k: int) -> dict[str, float]:
    """{n: coverage} the population measured for ``metric`` of an evaluation at cut-off ``k``:
    a metric named with its cut-off (ndcg@10) as it is; MAP and MRR, which eval.search names
    without one, only where the study's runs were cut at the same k."""
    table = population["coverage"]
    bare, _, cutoff = metric.partition("@")
    if cutoff and metric in table:
        return table[metric]
    same_depth = int(cutoff or k) == population.get("k", 10)
    return table.get(bare, {}) if same_depth else {}


def _lowest_at(metric: str, size: int, k: int) -> tuple[float, str, int]:
    """(the lowest coverage of ``metric`` at a studied ``size`` over every population that
    studied it, that population's name, how many studied it)."""
    found = [
        (float(by_n[str(size)]), population["name"])
        for population in coverage_table()["populations"]
        if str(size) in (by_n := _studied(metric, population, k))
    ]
    value, name = min(found)
    return value, name, len(found)


def studied_sizes(metric: str, k: int = 10) -> list[int]:
    """The numbers of judged queries at which some population measured ``metric`` at ``k``."""
    sizes: set[str] = set()
    for population in coverage_table()["populations"]:
        sizes |= set(_studied(metric, population, k))
    return sorted(int(size) for size in sizes)


def measured_coverage(metric: str, n: int, k: int = 10) -> MeasuredCoverage | None:
    """The lowest coverage measured for ``metric`` (of an evaluation at cut-off ``k``) at ``n``
    over every population studied; where ``n`` itself was not studied, the lowest at the studied
    sizes around it (the largest not above it and the smallest not below it) with ``at_n`` naming
    the size (``at_n != n``: marked ‡). None where the metric or so small an n was not studied."""
    sizes = studied_sizes(metric, k)
    below = [size for size in sizes if size <= n]
    if not below:
        return None
    around = {below[-1], *[size for size in sizes if size >= n][:1]}
    lowest = {size: _lowest_at(metric, size, k) for size in around}
    at = min(around, key=lambda size: (lowest[size][0], size))
    value, population, count = lowest[at]
    return MeasuredCoverage(
        coverage=value,
        at_n=at,
        below_target=value < COVERAGE_TARGET,
        target=COVERAGE_TARGET,
        source=_sources(),
        population=population,
        populations=count,
    )


def _sources() -> str:
    return ", ".join(dict.fromkeys(p["source"] for p in coverage_table()["populations"]))


def coverage_marks(found: MeasuredCoverage | None, n: int) -> str:
    """The marks a metric carries beside an interval from ``n`` judged queries: † below the
    target, ‡ at an n the study did not measure (or did not measure the metric at all)."""
    if found is None:
        return NOT_STUDIED
    return (BELOW_TARGET if found.below_target else "") + (NOT_STUDIED if found.at_n != n else "")


def coverage_note(metric: str, found: MeasuredCoverage | None, n: int) -> str:
    """Beside an interval: its measured coverage in words, or that none was measured."""
    if found is None:
        return f"{NOT_STUDIED} coverage not measured for {metric} at n = {n}"
    where = f"lowest of {found.populations} populations, on {found.population}"
    if found.at_n != n:
        where = f"n = {n} not studied; at n = {found.at_n}, {where}"
    else:
        where = f"at n = {n}, {where}"
    mark = f" ({BELOW_TARGET} below the {found.target:.2f} target)" if found.below_target else ""
    return f"measured coverage {found.coverage:.3f} ({where}){mark}"


def coverage_legend() -> str:
    """The marks in words, for every table that prints them."""
    return (
        f"{BELOW_TARGET}: the lowest coverage measured for this metric at this number of judged "
        f"queries, over every population studied, is below {COVERAGE_TARGET:.2f}, so its nominal "
        f"interval claims more than measured; {NOT_STUDIED}: the coverage study did not measure "
        "this number of judged queries (the figure is the lowest at the studied sizes around it), "
        "or this metric at this cut-off"
    )


def require_judged(n: int, unit: str, where: str, minimum: int = MIN_JUDGED_QUERIES) -> None:
    """Refuse fewer than ``minimum`` judged ``unit`` (queries, or hits for --human_pairs); at
    :data:`MIN_JUDGED_QUERIES`, the least an interval is made from, naming the evidence."""
    if n >= minimum:
        return
    judged = f"{where} judges {n} {unit}" + (" in full" if unit == "queries" else "")
    if minimum < MIN_JUDGED_QUERIES:
        raise InputError(f"{judged}; at least {minimum} are needed")
    raise InputError(
        f"{judged}; an interval needs at least {minimum} ({_evidence()}): judge "
        f"{minimum - n} more, or leave the judgments out"
    )


def _evidence() -> str:
    """The study's worst case below the minimum, in words."""
    worst = []
    for population in coverage_table()["populations"]:
        for metric, by_n in population["coverage"].items():
            for size, value in by_n.items():
                if int(size) < MIN_JUDGED_QUERIES:
                    worst.append((float(value), int(size), metric))
    if not worst:
        return "no coverage was measured below it"
    value, size, metric = min(worst)
    return f"95% intervals from {size} judged queries covered as little as {value:.3f} ({metric})"
