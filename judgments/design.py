"""Which queries (or hits) to have judged, and the estimate that stays valid for how they were
chosen.

A *design* draws the human sample from a population of units: the queries of the runs, or their
pooled top-k hits (``--human_pairs``).

- ``uniform``: a simple random sample of n units, what PPI++ (:mod:`judgments.ppi`) assumes.
- ``proportional``: the units are cut into H strata of near-equal size by the labeler's own signal
  (its per-unit *uncertainty*, or its *score*), and each stratum gets a simple random sample of
  n_h ∝ N_h units.
- ``neyman``: the same strata, n_h ∝ N_h·σ_h, where σ_h² is the labeler's own variance of the
  human value within the stratum: the mean of p(1 − p) over the units' hits, p its P(relevant).
  More judgments go where the labeler is least sure (Neyman allocation; active statistical
  inference, Zrnic & Candès 2024; stratified PPI, Fisch et al. 2024; LARA, Takehi et al. 2024).

Every stratum keeps at least three judged units (its variance must be estimable, and with two
it rests on one degree of freedom), so a unit's
inclusion probability n_h/N_h is known by construction. **What is estimated**: the mean human
value over the design's domain D (every query the draw was made from, or every hit of one run's
top k): the "all-query human value", a finite-population mean, not a mean over a larger world of
queries. The stratified difference estimator (PPI with known inclusion probabilities)

    θ̂ = (1/N_D) [ λ Σ_{i∈D} f_i + Σ_h (N_h/n_h) Σ_{i∈s_h} z_i ],   z_i = 1{i∈D} (Y_i − λ f_i)
    V̂ = (1/N_D²) Σ_h N_h² s²_h(z) / n_h

is design-unbiased for any fixed λ. V̂ treats each stratum's sample as drawn with replacement,
which overstates θ̂'s variance by the finite-population factor 1 − n_h/N_h: conservative. With the
factor (``finite_population=True``) V̂ is unbiased for the variance (tests/judgments/test_design.py
enumerates every sample of a small population) and the interval is about 30% narrower when half
the queries are judged, but on TREC DL 2019 its t interval covered the all-query value only
0.89-0.93 of the time at n = 20 (docs/results/sampling-designs.md), so it is not the default.
λ is tuned to minimise V̂ (one λ for all strata: a stratum holds too few judged units to tune its own), clipped
to [0, 1]; λ = 0 is the human-only (Horvitz-Thompson) estimate. The interval is Student's t with
Satterthwaite's degrees of freedom.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import ndtri, stdtrit

from core.errors import InputError
from core.io import fingerprint, write_json
from judgments.ppi import (
    INTERVALS,
    UNBOUNDED,
    Interval,
    MetricEstimates,
    hoeffding_half,
    on_lattice,
    pseudo_weight,
)
from measure.metrics.results import RunResults

DESIGNS = ("uniform", "proportional", "neyman")
UNITS = ("queries", "hits")
STRATA_BY = ("uncertainty", "score")
FORMAT = "relevance-grader draw 1"
# A new draw gives each stratum 3 units: with 2, a stratum's variance has one degree of freedom
# and two equal values make it 0. Draws written earlier with 2 are still read (at least 2).
MIN_DRAWN_PER_STRATUM = 3
MIN_PER_STRATUM = 2
Unit = Hashable  # a query id, or a (query id, document id) hit


@dataclass(frozen=True)
class Stratum:
    units: tuple[Unit, ...]  # every unit of the stratum, N_h
    drawn: tuple[Unit, ...]  # its simple random sample without replacement, n_h

    @property
    def inclusion(self) -> float:
        return len(self.drawn) / len(self.units)


@dataclass(frozen=True)
class Design:
    kind: str
    unit: str
    strata: tuple[Stratum, ...]
    strata_by: str | None = None
    seed: int = 0
    sources: dict[str, Any] = field(default_factory=dict)
    drawn_in_full: int | None = None  # a draw judged in part: how many units it drew

    def judged_part(self, judged: set[Unit]) -> Design:
        """The draw restricted to its ``judged`` units, each stratum's judged ones a uniform
        subsample of its drawn ones when the units were served in a random order; a stratum
        left with fewer than two is refused (its variance is not estimable)."""
        strata = []
        for i, stratum in enumerate(self.strata):
            kept = tuple(u for u in stratum.drawn if u in judged)
            if len(kept) < min(MIN_PER_STRATUM, len(stratum.units)):
                raise InputError(
                    f"draw: stratum {i} has {len(kept)} of its {len(stratum.drawn)} drawn "
                    f"{self.unit} judged; judge at least {MIN_PER_STRATUM} in every stratum"
                )
            strata.append(Stratum(stratum.units, kept))
        full = self.drawn_in_full or len(self.drawn)
        return replace(self, strata=tuple(strata), drawn_in_full=full)

    @property
    def drawn(self) -> list[Unit]:
        return [u for stratum in self.strata for u in stratum.drawn]

    @property
    def population(self) -> set[Unit]:
        return {u for stratum in self.strata for u in stratum.units}

    def describe(self) -> str:
        part = (
            f"; {len(self.drawn)} of the {self.drawn_in_full} drawn fully judged, the sample used"
            if self.drawn_in_full
            else ""
        )
        if self.kind == "uniform":
            size = self.drawn_in_full or len(self.drawn)
            return f"uniform draw of {size} of {len(self.population)} {self.unit}{part}"
        sizes = ", ".join(f"{len(s.drawn)}/{len(s.units)}" for s in self.strata)
        return (
            f"{self.kind} allocation over {len(self.strata)} strata by the labeler's "
            f"{self.strata_by} ({sizes} {self.unit} judged per stratum){part}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "design": self.kind,
            "unit": self.unit,
            "strata_by": self.strata_by,
            "seed": self.seed,
            "sources": self.sources,
            "strata": [
                {"units": [_dump(u) for u in s.units], "drawn": [_dump(u) for u in s.drawn]}
                for s in self.strata
            ],
        }


def _dump(unit: Unit) -> Any:
    return list(unit) if isinstance(unit, tuple) else unit


def _load(unit: Any) -> Unit:
    return tuple(unit) if isinstance(unit, list) else str(unit)


def design_from_dict(data: Mapping[str, Any], where: str = "draw") -> Design:
    """A design from its JSON form; a malformed one is one error naming ``where`` and the field."""
    if data.get("format") != FORMAT:
        raise InputError(f"{where}: not a draw file (format {data.get('format')!r})")
    kind, unit = data.get("design"), data.get("unit")
    if kind not in DESIGNS or unit not in UNITS:
        raise InputError(f"{where}: design/unit: unknown {kind!r}/{unit!r}")
    strata = []
    for i, item in enumerate(data.get("strata") or []):
        units = tuple(_load(u) for u in item["units"])
        drawn = tuple(_load(u) for u in item["drawn"])
        if not drawn or not set(drawn) <= set(units) or len(set(drawn)) != len(drawn):
            raise InputError(f"{where}: strata[{i}].drawn: not a sample of the stratum's units")
        strata.append(Stratum(units, drawn))
    if not strata:
        raise InputError(f"{where}: strata: the draw holds no stratum")
    return Design(
        kind,
        unit,
        tuple(strata),
        data.get("strata_by"),
        data.get("seed", 0),
        data.get("sources", {}),
    )


def read_design(path: str | Path, flag: str = "--draw") -> Design:
    """The draw file ``flag`` names (relevance-grader ppi --out); one missing is an error naming
    both, never read as no draw (a uniform sample), which would give a stratified sample the wrong
    estimator."""
    import json

    check_draw_file(path, flag)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not a draw file (invalid JSON at line {exc.lineno})") from None
    return design_from_dict(data, str(path))


def check_draw_file(path: str | Path, flag: str = "--draw") -> None:
    if not Path(path).is_file():
        what = "is a folder, not" if Path(path).is_dir() else "not found: give"
        raise FileNotFoundError(
            f"{flag}: {path} {what} a draw file (relevance-grader ppi --out writes one)"
        )


def write_design(path: str | Path, design: Design) -> None:
    write_json(path, design.to_dict())


def pooled_hits(per_query: Mapping[str, RunResults]) -> dict[tuple[str, str], float]:
    """{(qid, doc_id): P(relevant)} over every run's labelled top k (eval.search's per_query.json,
    its 0/1 verdict where the labeler gives no probability); a hit several runs share is one
    unit."""
    return {
        (qid, hit.id): hit.probability
        for queries in per_query.values()
        for qid, result in queries.items()
        for hit in result.hits
    }


def unit_signals(
    per_query: Mapping[str, RunResults], unit: str, metric: str
) -> tuple[dict[Unit, float], dict[Unit, float]]:
    """(score, uncertainty) of every unit from eval.search's per_query.json. A hit: P(relevant)
    and p(1 − p). A query: the labeler's ``metric`` averaged over the runs (left out where the
    labels lack it), and the mean p(1 − p) over its pooled hits."""
    hits = pooled_hits(per_query)
    if unit == "hits":
        return dict(hits), {h: p * (1 - p) for h, p in hits.items()}
    per_unit: dict[str, list[float]] = {}
    for (qid, _), p in hits.items():
        per_unit.setdefault(qid, []).append(p * (1 - p))
    scores: dict[str, list[float]] = {}
    for queries in per_query.values():
        for qid, result in queries.items():
            values = scores.setdefault(qid, [])
            value = result.metric(metric)
            if value is not None:
                values.append(float(value))
    score = {q: float(np.mean(v)) for q, v in scores.items() if v}
    return score, {q: float(np.mean(per_unit.get(q, [0.0]))) for q in scores}


def _tie_break(unit: Unit) -> str:
    return fingerprint(*(unit if isinstance(unit, tuple) else (unit,)))


def make_strata(values: Mapping[Unit, float], count: int) -> list[list[Unit]]:
    """``count`` strata of near-equal size, by ascending value (ties in a fixed hashed order)."""
    order = sorted(values, key=lambda u: (values[u], _tie_break(u)))
    bounds = np.linspace(0, len(order), count + 1).round().astype(int)
    return [order[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def allocate(sizes: Sequence[int], weights: Sequence[float], n: int) -> list[int]:
    """n judged units over strata of ``sizes``, as near n·w_h/Σw as the bounds allow: at least
    three per stratum (fewer only in a stratum that small), at most its size."""
    if n > sum(sizes):
        raise InputError(f"n: {n} units asked for, the population has {sum(sizes)}")
    alloc = [min(MIN_DRAWN_PER_STRATUM, size) for size in sizes]
    if sum(alloc) > n:
        raise InputError(
            f"n: {n} judged units cannot give each of {len(sizes)} strata "
            f"{MIN_DRAWN_PER_STRATUM}; "
            "judge more or give fewer --strata"
        )
    total = float(sum(weights))
    target = [
        n * w / total if total > 0 else n * s / sum(sizes)
        for w, s in zip(weights, sizes, strict=True)
    ]
    while sum(alloc) < n:
        open_ = [h for h in range(len(sizes)) if alloc[h] < sizes[h]]
        alloc[max(open_, key=lambda h: (target[h] - alloc[h], -h))] += 1
    return alloc


def draw_design(
    population: Iterable[Unit],
    n: int,
    kind: str = "uniform",
    *,
    unit: str = "queries",
    seed: int = 0,
    strata: int = 2,
    strata_by: str = "uncertainty",
    score: Mapping[Unit, float] | None = None,
    uncertainty: Mapping[Unit, float] | None = None,
    sources: dict[str, Any] | None = None,
) -> Design:
    """Draw n units under ``kind``; the stratified designs need the labeler's ``uncertainty``
    (and its ``score`` when the strata are by score) of every unit."""
    units = sorted(set(population))
    if kind == "uniform":
        groups, alloc = [units], [n]
        if n > len(units):
            raise InputError(f"n: {n} units asked for, the population has {len(units)}")
    else:
        if uncertainty is None or (strata_by == "score" and score is None):
            raise InputError(f"design: {kind} needs the labeler's labels (--labels)")
        values = uncertainty if strata_by == "uncertainty" else score
        groups = make_strata({u: values[u] for u in units}, strata)
        spread = [math.sqrt(float(np.mean([uncertainty[u] for u in g]))) for g in groups]
        if kind == "neyman" and not any(spread):
            raise InputError(
                "design: neyman needs the labeler's P(relevant) (its labels are all 0 or 1); "
                "use --design proportional"
            )
        weights = [
            len(g) * (s if kind == "neyman" else 1.0) for g, s in zip(groups, spread, strict=True)
        ]
        alloc = allocate([len(g) for g in groups], weights, n)
    rng = random.Random(seed)
    drawn = [tuple(sorted(rng.sample(sorted(g), m))) for g, m in zip(groups, alloc, strict=True)]
    return Design(
        kind,
        unit,
        tuple(Stratum(tuple(g), d) for g, d in zip(groups, drawn, strict=True)),
        None if kind == "uniform" else strata_by,
        seed,
        sources or {},
    )


def _stratum_terms(
    stratum: Stratum, labeler: Mapping[Unit, float], human: Mapping[Unit, float]
) -> tuple[np.ndarray, np.ndarray]:
    """(1{i∈D}·Y_i, 1{i∈D}·f_i) over the stratum's drawn units (D: the units ``labeler`` has)."""
    a = np.array([human[u] if u in labeler else 0.0 for u in stratum.drawn])
    b = np.array([labeler.get(u, 0.0) for u in stratum.drawn])
    return a, b


def _weights(stratum: Stratum, finite_population: bool) -> float:
    """N_h² / n_h, times 1 − n_h/N_h with ``finite_population``: the stratum's weight in V̂."""
    big, small = len(stratum.units), len(stratum.drawn)
    return big * big / small * ((1 - small / big) if finite_population else 1.0)


def _check_design_inputs(
    design: Design, labeler: Mapping[Unit, float], human: Mapping[Unit, float]
) -> None:
    outside = sorted(map(str, set(labeler) - design.population))
    if outside:
        raise InputError(
            f"{len(outside)} {design.unit} are not in the draw's population (first: {outside[0]}); "
            "draw from the runs you evaluate"
        )
    missing = sorted(str(u) for u in design.drawn if u in labeler and u not in human)
    if missing:
        raise InputError(
            f"human: {len(missing)} drawn {design.unit} have no human judgment "
            f"(first: {missing[0]}); judge every drawn unit"
        )
    for i, stratum in enumerate(design.strata):
        if len(stratum.drawn) < min(MIN_PER_STRATUM, len(stratum.units)):
            raise InputError(f"draw: stratum {i} has {len(stratum.drawn)} judged unit(s)")
    if sum(1 for u in design.drawn if u in labeler) < 2:
        raise InputError(f"human: fewer than 2 judged {design.unit} fall in the evaluated set")


def design_lambda(
    design: Design,
    labeler: Mapping[Unit, float],
    human: Mapping[Unit, float],
    finite_population: bool = False,
) -> float:
    """The λ in [0, 1] that minimises the estimated variance of θ̂(λ)."""
    numerator = denominator = 0.0
    for stratum in design.strata:
        if len(stratum.drawn) < 2:
            continue
        a, b = _stratum_terms(stratum, labeler, human)
        weight = _weights(stratum, finite_population)
        centred = b - b.mean()
        numerator += weight * float(np.dot(a - a.mean(), centred)) / (len(b) - 1)
        denominator += weight * float(np.dot(centred, centred)) / (len(b) - 1)
    return float(np.clip(numerator / denominator, 0.0, 1.0)) if denominator > 0 else 0.0


def design_mean(
    design: Design,
    labeler: Mapping[Unit, float],
    human: Mapping[Unit, float],
    alpha: float = 0.05,
    lam: float | None = None,
    interval: str = "t",
    finite_population: bool = False,
    bounds: tuple[float, float] = UNBOUNDED,
) -> Interval:
    """The mean of the human value over the units ``labeler`` covers (the domain D), from the
    labeler's value of every unit of D and the human value of the drawn ones, valid under
    ``design``. ``lam`` None tunes λ; 0 is the human-only estimate. Within finite ``bounds`` the
    rules of :mod:`judgments.ppi` hold: binary human values get pseudo-observations at the bounds in
    each stratum's variance, no interval has zero width (Hoeffding's where the judged values
    have no spread), and an estimate outside the range gives the human-only interval."""
    if interval not in INTERVALS:
        raise InputError(f"interval: expected one of {', '.join(INTERVALS)}, got {interval!r}")
    _check_design_inputs(design, labeler, human)
    tuned = lam is None
    if lam is None:
        lam = design_lambda(design, labeler, human, finite_population)
    size = len(labeler)
    judged = sorted((u for u in design.drawn if u in labeler), key=str)
    binary = on_lattice(np.array([human[u] for u in judged]), bounds)
    total = lam * sum(labeler.values())
    parts = []  # (variance term g_h, n_h) per stratum
    for stratum in design.strata:
        a, b = _stratum_terms(stratum, labeler, human)
        total += len(stratum.units) / len(stratum.drawn) * float(np.sum(a - lam * b))
        if len(a) > 1:
            variance = _stratum_variance(a, b, lam, alpha, bounds if binary else None, len(judged))
            parts.append((_weights(stratum, finite_population) * variance / size**2, len(a)))
    estimate = total / size
    variance = sum(g for g, _ in parts)
    name = "stratified" if len(design.strata) > 1 else "design-based"
    method = f"{name} PPI++ ({interval})" if tuned else f"{name} λ={lam:g} ({interval})"
    if binary:
        method = method[:-1] + ", pseudo-observations at the bounds)"
    # Rounding (a λ that fits the judged values exactly) leaves ~1e-17: no variance either.
    if variance <= 1e-15 and not _census(design, finite_population):
        if lam != 0:
            return _human_only(design, labeler, human, alpha, interval, finite_population, bounds)
        return _hoeffding(design, labeler, estimate, alpha, bounds, name)
    if not bounds[0] <= estimate <= bounds[1]:
        return _human_only(design, labeler, human, alpha, interval, finite_population, bounds)
    df = _degrees_of_freedom(parts) if interval == "t" else None
    se = math.sqrt(variance)
    half = _quantile(alpha, parts, interval) * se
    result = Interval(
        estimate,
        estimate - half,
        estimate + half,
        len(judged),
        size - len(judged),
        lam,
        method,
        se,
        df,
    )
    return result.clipped(*bounds)


def _stratum_variance(
    a: np.ndarray,
    b: np.ndarray,
    lam: float,
    alpha: float,
    bounds: tuple[float, float] | None,
    judged: int,
) -> float:
    """s²_h(z) of z = a − λb; with ``bounds`` (binary human values), Agresti-Coull
    pseudo-observations at the bounds with the stratum's share of z²/2 each, as in
    :func:`judgments.ppi.rectifier_variance`, scaled so that the stratum's n_h is kept."""
    z = a - lam * b
    if bounds is None:
        return float(np.var(z, ddof=1))
    weight = pseudo_weight(alpha) * len(z) / judged
    values = np.concatenate([z, np.asarray(bounds, dtype=np.float64) - lam * float(b.mean())])
    weights = np.concatenate([np.ones(len(z)), [weight, weight]])
    mean = float(np.average(values, weights=weights))
    spread = float(np.sum(weights * (values - mean) ** 2) / (np.sum(weights) - 1))
    return spread * len(z) / (len(z) + 2 * weight)


def _census(design: Design, finite_population: bool) -> bool:
    """Every unit judged, with the finite-population correction: the mean is known exactly."""
    return finite_population and all(len(s.drawn) == len(s.units) for s in design.strata)


def _human_only(
    design: Design,
    labeler: Mapping[Unit, float],
    human: Mapping[Unit, float],
    alpha: float,
    interval: str,
    finite_population: bool,
    bounds: tuple[float, float],
) -> Interval:
    """The human-only design estimate, where PPI++'s is not estimable (no spread in the
    labeler's error, or an estimate outside the range); ``method`` says so."""
    result = design_mean(design, labeler, human, alpha, 0.0, interval, finite_population, bounds)
    return replace(result, method=f"{result.method}; PPI++ not estimable here")


def _hoeffding(
    design: Design,
    labeler: Mapping[Unit, float],
    estimate: float,
    alpha: float,
    bounds: tuple[float, float],
    name: str,
) -> Interval:
    """Judged values with no spread: Hoeffding's interval for the weighted sum of the judged
    units' values (each weighs N_h / (n_h N_D)); not estimable without a finite range."""
    judged = [
        len(s.units) / len(s.drawn) / len(labeler)
        for s in design.strata
        for u in s.drawn
        if u in labeler
    ]
    if not (math.isfinite(bounds[0]) and math.isfinite(bounds[1])):
        raise InputError(
            f"not estimable at n = {len(judged)}: the judged values have no spread and the "
            "metric's range is unknown; judge more units"
        )
    half = hoeffding_half(np.array(judged), alpha, bounds[1] - bounds[0])
    method = f"{name} (Hoeffding: the judged values have no spread)"
    size = len(labeler)
    result = Interval(
        estimate, estimate - half, estimate + half, len(judged), size - len(judged), 0.0, method
    )
    return result.clipped(*bounds)


def _quantile(alpha: float, parts: list[tuple[float, int]], interval: str) -> float:
    """Student's t with Satterthwaite's degrees of freedom (normal for ``interval="normal"``)."""
    if interval == "normal":
        return float(ndtri(1 - alpha / 2))
    return float(stdtrit(_degrees_of_freedom(parts), 1 - alpha / 2))


def _degrees_of_freedom(parts: list[tuple[float, int]]) -> float:
    """Satterthwaite's degrees of freedom of Σ g_h, each g_h on n_h − 1."""
    variance = sum(g for g, _ in parts)
    spread = sum(g * g / (n - 1) for g, n in parts)
    df = variance**2 / spread if spread > 0 else max(1, sum(n for _, n in parts) - len(parts))
    return float(max(df, 1.0))


def design_estimate(
    design: Design,
    labeler: Mapping[Unit, float],
    human: Mapping[Unit, float],
    alpha: float = 0.05,
    interval: str = "t",
    bounds: tuple[float, float] = UNBOUNDED,
    finite_population: bool = False,
) -> MetricEstimates:
    """:func:`judgments.ppi.estimate_metric` under a design: the labeler's plain mean, the
    human-only design estimate and the design's PPI++ estimate (only the drawn units' human values
    count)."""
    drawn = {u: human[u] for u in design.drawn if u in human}
    common = {"interval": interval, "finite_population": finite_population, "bounds": bounds}
    return MetricEstimates(
        labeler_mean=float(np.mean(list(labeler.values()))),
        classical=design_mean(design, labeler, drawn, alpha, 0.0, **common),
        ppi=design_mean(design, labeler, drawn, alpha, None, **common),
        queries=len(labeler),
        bounds=bounds,
    )
