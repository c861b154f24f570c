"""Prediction-powered inference (PPI++) for retrieval metrics: a labeler's metric on every query,
corrected by human judgments on a random few, with a confidence interval.

The unit is the query. For a metric (NDCG@k, P@k, MAP, ...) let f_i be query i's value under the
labeler (a grader, an LLM judge) and Y_i its value under human judgments. With human judgments
for n randomly chosen queries and the labeler's values f̃_j for the N other queries,

    θ̂(λ) = λ · mean(f̃) + mean(Y − λ·f)                    (Angelopoulos et al., Science 2023)
    Var θ̂(λ) = λ² Var(f̃) / N + Var(Y − λ·f) / n

λ = 1 is PPI; λ = 0 the classical mean of the n human values; power tuning (PPI++, Angelopoulos,
Duchi and Zrnic 2023) picks λ̂ = Cov(Y, f) / ((1 + n/N) Var(f)), clipped to [0, 1], so a labeler
that carries nothing falls back to the classical interval instead of widening it. A difference
between two systems on the same queries is the same estimator on the per-query differences
(paired). The interval is Student's t with n − 1 degrees of freedom (``interval="t"``); ``"normal"``
with population variances reproduces ``ppi_py``'s ``ppi_mean_ci``.

Within a metric's range (``bounds``) no interval has zero width and no estimate lies outside its
interval: binary values (hit@k, a hit's relevance, and paired differences of those) get Wilson's
interval (human only) or Agresti-Coull pseudo-observations at the bounds in the PPI++ variance
(Brown, Cai & DasGupta 2001: the Wald interval fails near a bound); judged values with no spread
get Hoeffding's interval; a PPI++ estimate outside the range, or a rectifier with no spread, gives
the human-only interval, said in ``method``. What coverage these intervals reach at which n is
measured, per metric, in docs/results/ppi-coverage.md (``judgments.coverage`` carries the
table).

The draw of the queries to judge (``relevance-grader ppi``) is :mod:`judgments.draw`; the
estimators under a stratified design are :mod:`judgments.design`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from scipy import stats

from core.errors import InputError
from judgments.coverage import MIN_JUDGED_QUERIES
from measure.metrics.ppi_record import EstimateRecord, IntervalRecord

INTERVALS = ("t", "normal")
UNBOUNDED = (-math.inf, math.inf)


@dataclass(frozen=True)
class Interval:
    """A mean's point estimate and two-sided confidence interval. Built by this module's
    functions with ``bounds`` (a metric's range), the estimate lies in the range and inside its
    interval, and the interval has positive width."""

    estimate: float
    low: float
    high: float
    n: int  # human-judged queries
    unjudged: int  # queries with the labeler's value only
    lam: float  # 0: classical (human only); 1: plain PPI
    method: str
    # The standard error and the t's degrees of freedom (None: normal) behind a t or normal
    # interval; None for Wilson's and Hoeffding's, which have none.
    se: float | None = None
    df: float | None = None

    @property
    def width(self) -> float:
        return self.high - self.low

    def p_value(self) -> float | None:
        """Two-sided p-value of "the mean is 0" from the statistic the interval inverts (a paired
        difference's test); None where the interval is not a t or normal one."""
        if self.se is None or self.se <= 0:
            return None
        statistic = abs(self.estimate) / self.se
        tail = stats.norm.sf(statistic) if self.df is None else stats.t.sf(statistic, self.df)
        return float(min(1.0, 2 * tail))

    def clipped(self, low: float, high: float) -> Interval:
        """The interval and its estimate cut to the range the quantity can take (coverage is
        kept: the quantity lies in the range)."""
        estimate = float(min(max(self.estimate, low), high))
        # min/max with the estimate: rounding (Wilson's 1 - 1e-16) must not leave it outside.
        return replace(
            self,
            estimate=estimate,
            low=float(min(max(self.low, low), estimate)),
            high=float(max(min(self.high, high), estimate)),
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "width": self.width}

    def record(self) -> IntervalRecord:
        """As metrics.json's ``ppi`` section holds it."""
        return IntervalRecord(**asdict(self), width=self.width)


def _quantile(alpha: float, n: int, interval: str) -> float:
    if interval == "t":
        return float(stats.t.ppf(1 - alpha / 2, df=n - 1))
    return float(stats.norm.ppf(1 - alpha / 2))


def _check(human: np.ndarray, judged: np.ndarray, alpha: float, interval: str) -> None:
    if interval not in INTERVALS:
        raise InputError(f"interval: expected one of {', '.join(INTERVALS)}, got {interval!r}")
    if not 0 < alpha < 1:
        raise InputError(f"alpha: expected 0 < alpha < 1, got {alpha}")
    if len(human) < 2:
        raise InputError(f"human judgments: at least 2 judged queries are needed, got {len(human)}")
    if len(judged) != len(human):
        raise InputError(
            "the labeler's and the human values of the judged queries differ in number"
        )


def _finite(bounds: tuple[float, float]) -> bool:
    return math.isfinite(bounds[0]) and math.isfinite(bounds[1])


def on_lattice(values: np.ndarray, bounds: tuple[float, float]) -> bool:
    """Whether every value is a bound or 0: a binary metric (hit@k, a hit's relevance) in [0, 1],
    or a paired difference of two in [-1, 1]. Near the bounds such values have a sample variance
    that is often 0 or too small, so the Wald/t interval undercovers (Brown, Cai & DasGupta
    2001); they get pseudo-observations at the bounds instead."""
    if not _finite(bounds):
        return False
    points = np.array(sorted({bounds[0], 0.0, bounds[1]}))
    return bool(np.all(np.min(np.abs(values[:, None] - points[None, :]), axis=1) < 1e-12))


def no_spread(values: np.ndarray) -> bool:
    """Values all alike up to rounding (a tuned λ that fits the judged values exactly leaves a
    spread of ~1e-17, which must not pass for a variance)."""
    scale = max(1.0, float(np.max(np.abs(values)))) if len(values) else 1.0
    return float(np.ptp(values)) <= 1e-9 * scale


def pseudo_weight(alpha: float) -> float:
    """Agresti and Coull's pseudo-observations: z²/2 at each bound (about 2 at 95%)."""
    return float(stats.norm.ppf(1 - alpha / 2)) ** 2 / 2


def wilson(values: np.ndarray, alpha: float, bounds: tuple[float, float]) -> tuple[float, float]:
    """Wilson's score interval for the mean of values that are all one bound or the other."""
    low, high = bounds
    n, share = len(values), float(np.mean((values - low) / (high - low)))
    z = float(stats.norm.ppf(1 - alpha / 2))
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return low + (centre - half) * (high - low), low + (centre + half) * (high - low)


def hoeffding_half(weights: np.ndarray, alpha: float, span: float) -> float:
    """Hoeffding's half-width for Σ c_i X_i of independent X_i in a range of ``span`` (a mean:
    c_i = 1/n). It holds for sampling without replacement too (Hoeffding 1963, section 6)."""
    return span * math.sqrt(math.log(2 / alpha) / 2 * float(np.sum(np.square(weights))))


def _weighted_variance(values: np.ndarray, weights: np.ndarray, ddof: int) -> float:
    mean = float(np.average(values, weights=weights))
    return float(np.sum(weights * (values - mean) ** 2) / (np.sum(weights) - ddof))


def classical_mean(
    human: Sequence[float],
    alpha: float = 0.05,
    interval: str = "t",
    bounds: tuple[float, float] = UNBOUNDED,
) -> Interval:
    """The mean of the human values alone and its interval. Within finite ``bounds``: values at
    the two bounds get Wilson's interval, values on {low, 0, high} (a difference of binary
    metrics) Agresti-Coull pseudo-observations in the variance, and values with no spread
    Hoeffding's interval; never a zero-width interval. Unbounded values with no spread are not
    estimable (an error)."""
    y = np.asarray(human, dtype=np.float64)
    _check(y, y, alpha, interval)
    mean, n = float(y.mean()), len(y)
    if on_lattice(y, bounds) and set(np.round(y, 12)) <= {bounds[0], bounds[1]}:
        low, high = wilson(y, alpha, bounds)
        return Interval(mean, low, high, n, 0, 0.0, "classical (Wilson)").clipped(*bounds)
    if on_lattice(y, bounds):
        weight = pseudo_weight(alpha)
        values = np.concatenate([y, bounds])
        weights = np.concatenate([np.ones(n), [weight, weight]])
        variance = _weighted_variance(values, weights, ddof=1) / (n + 2 * weight)
        se = math.sqrt(variance)
        half = _quantile(alpha, n, interval) * se
        method = f"classical ({interval}, pseudo-observations at the bounds)"
        result = Interval(mean, mean - half, mean + half, n, 0, 0.0, method, se, _df(n, interval))
        return result.clipped(*bounds)
    if no_spread(y):
        return _no_spread(mean, n, alpha, bounds)
    ddof = 1 if interval == "t" else 0
    se = float(y.std(ddof=ddof)) / math.sqrt(n)
    half = _quantile(alpha, n, interval) * se
    method = f"classical ({interval})"
    result = Interval(mean, mean - half, mean + half, n, 0, 0.0, method, se, _df(n, interval))
    return result.clipped(*bounds)


def _df(n: int, interval: str) -> float | None:
    return float(n - 1) if interval == "t" else None


def _no_spread(mean: float, n: int, alpha: float, bounds: tuple[float, float]) -> Interval:
    """Judged values that are all alike say nothing of their variance: Hoeffding's interval,
    which needs only the range."""
    if not _finite(bounds):
        raise InputError(
            f"not estimable at n = {n}: the {n} judged values are all {mean:g} and the metric's "
            "range is unknown; judge more queries"
        )
    half = hoeffding_half(np.full(n, 1 / n), alpha, bounds[1] - bounds[0])
    method = "classical (Hoeffding: the judged values have no spread)"
    return Interval(mean, mean - half, mean + half, n, 0, 0.0, method).clipped(*bounds)


def power_tuned_lambda(
    human: Sequence[float], judged: Sequence[float], unjudged: Sequence[float]
) -> float:
    """PPI++'s variance-minimising λ for a mean, clipped to [0, 1]."""
    y, f, f_tilde = (np.asarray(v, dtype=np.float64) for v in (human, judged, unjudged))
    n, big_n = len(y), len(f_tilde)
    if big_n == 0:
        return 0.0
    covariance = float(np.mean((y - y.mean()) * (f - f.mean())))
    variance = float(np.var(np.concatenate([f, f_tilde]), ddof=1))
    if variance == 0.0:
        return 0.0  # a constant labeler carries nothing
    return float(np.clip(covariance / ((1 + n / big_n) * variance), 0.0, 1.0))


def ppi_mean(
    human: Sequence[float],
    judged: Sequence[float],
    unjudged: Sequence[float],
    alpha: float = 0.05,
    lam: float | None = None,
    interval: str = "t",
    bounds: tuple[float, float] = UNBOUNDED,
) -> Interval:
    """The prediction-powered mean: ``human`` and ``judged`` are the human and labeler values of
    the judged queries (same order), ``unjudged`` the labeler's values of the other queries.
    ``lam`` None tunes λ (PPI++); 1 is PPI; 0 is the classical interval. Within finite
    ``bounds``, binary human values get pseudo-observations at the bounds in the rectifier's
    variance (the estimate stays unbiased); a rectifier with no spread, or an estimate outside
    the range, gives the human-only interval instead, said in ``method``."""
    y, f, f_tilde = (np.asarray(v, dtype=np.float64) for v in (human, judged, unjudged))
    _check(y, f, alpha, interval)
    n, big_n = len(y), len(f_tilde)
    if big_n == 0:  # every query is judged: nothing to add
        return classical_mean(y, alpha, interval, bounds)
    tuned = lam is None
    lam = power_tuned_lambda(y, f, f_tilde) if lam is None else float(lam)
    if lam == 0:  # the labeler carries nothing here: the human-only interval
        return replace(classical_mean(y, alpha, interval, bounds), unjudged=big_n)
    method = f"PPI++ ({interval})" if tuned else f"PPI λ={lam:g} ({interval})"
    ddof = 1 if interval == "t" else 0
    estimate = float(lam * f_tilde.mean() + (y - lam * f).mean())
    rectifier = rectifier_variance(y, f, lam, alpha, ddof, bounds)
    if rectifier is None:
        return _human_only(y, big_n, alpha, interval, bounds, "the labeler's error has no spread")
    variance = (lam * f_tilde).var(ddof=min(ddof, big_n - 1)) / big_n + rectifier
    se = math.sqrt(variance)
    half = _quantile(alpha, n, interval) * se
    if on_lattice(y, bounds):
        method = method[:-1] + ", pseudo-observations at the bounds)"
    result = Interval(
        estimate, estimate - half, estimate + half, n, big_n, lam, method, se, _df(n, interval)
    )
    if not bounds[0] <= estimate <= bounds[1]:
        return _human_only(y, big_n, alpha, interval, bounds, "its estimate fell outside the range")
    return result.clipped(*bounds)


def rectifier_variance(
    y: np.ndarray, f: np.ndarray, lam: float, alpha: float, ddof: int, bounds: tuple[float, float]
) -> float | None:
    """Var(Y − λf)/n over the judged queries; None when it has no spread (not estimable). Binary
    human values (:func:`on_lattice`) get Agresti-Coull pseudo-observations: z²/2 queries whose
    human value is each bound and whose labeler value is the judged mean, so that a labeler that
    matched every judged query still leaves room for the ones it would miss."""
    rectifier = y - lam * f
    if on_lattice(y, bounds):
        weight = pseudo_weight(alpha)
        pseudo = np.asarray(bounds, dtype=np.float64) - lam * float(f.mean())
        values = np.concatenate([rectifier, pseudo])
        weights = np.concatenate([np.ones(len(y)), [weight, weight]])
        return _weighted_variance(values, weights, ddof) / (len(y) + 2 * weight)
    if no_spread(rectifier):
        return None
    return float(rectifier.var(ddof=ddof)) / len(y)


def _human_only(
    y: np.ndarray, unjudged: int, alpha: float, interval: str, bounds: tuple[float, float], why: str
) -> Interval:
    classical = classical_mean(y, alpha, interval, bounds)
    method = f"{classical.method}; PPI++ not estimable here: {why}"
    return replace(classical, unjudged=unjudged, method=method)


def effective_queries(
    n: int, classical: Interval, ppi: Interval, population: int | None = None
) -> float | None:
    """How many human-judged queries the PPI interval is worth: the n at which the classical
    interval would be as narrow (widths scale as 1/sqrt(n)), capped at ``population`` (the
    number of queries: judging every one is the most there is to be worth; the 1/sqrt(n) law
    knows no population and passes it); None where a width is not positive."""
    if ppi.width <= 0 or classical.width <= 0:
        return None
    worth = n * (classical.width / ppi.width) ** 2
    return worth if population is None else min(worth, float(population))


def queries_for_width(pilot: Interval, target_width: float) -> int:
    """Judged queries needed for an interval of ``target_width``, from a pilot interval on
    ``pilot.n`` queries (widths scale as 1/sqrt(n))."""
    if target_width <= 0:
        raise InputError(f"target_width: expected > 0, got {target_width}")
    if pilot.width <= 0:
        raise InputError(
            f"pilot: its interval on {pilot.n} queries has no width, so it cannot size a draw; "
            "re-run relevance-grader search --human with this release (its intervals always have a "
            "width)"
        )
    # A rounding error in the widths must not ask for one more query than the law says; fewer
    # than judgments.coverage.MIN_JUDGED_QUERIES get no interval.
    return max(MIN_JUDGED_QUERIES, math.ceil(pilot.n * (pilot.width / target_width) ** 2 - 1e-9))


def width_for_queries(pilot: Interval, n: int) -> float:
    """The interval width ``n`` judged queries reach, from a pilot interval on ``pilot.n``."""
    return pilot.width * math.sqrt(pilot.n / n)


@dataclass
class MetricEstimates:
    """One metric of one system (or one paired difference): the labeler's plain mean over every
    query, the human-only classical interval and the PPI++ interval."""

    labeler_mean: float
    classical: Interval
    ppi: Interval
    queries: int
    # The range the quantity can take; the intervals were computed within it.
    bounds: tuple[float, float] = UNBOUNDED

    def to_dict(self) -> dict[str, Any]:
        return {
            "labeler_mean": self.labeler_mean,
            "queries": self.queries,
            "human_only": self.classical.to_dict(),
            "ppi": self.ppi.to_dict(),
            "effective_human_queries": self.worth(),
        }

    def record(self) -> EstimateRecord:
        """As metrics.json's ``ppi`` section holds it."""
        return EstimateRecord(
            labeler_mean=self.labeler_mean,
            queries=self.queries,
            human_only=self.classical.record(),
            ppi=self.ppi.record(),
            effective_human_queries=self.worth(),
        )

    def worth(self) -> float | None:
        """:func:`effective_queries`, capped at the queries (or hits) of the population."""
        return effective_queries(self.classical.n, self.classical, self.ppi, self.queries)


def estimate_metric(
    labeler: Mapping[Hashable, float],
    human: Mapping[Hashable, float],
    alpha: float = 0.05,
    interval: str = "t",
    bounds: tuple[float, float] = UNBOUNDED,
) -> MetricEstimates:
    """Per-query values under the labeler (every query) and under human judgments (the judged
    queries) → the three estimates, their intervals cut to ``bounds`` (a metric's range). Every
    judged query must have a labeler value."""
    missing = sorted(set(human) - set(labeler))
    if missing:
        raise InputError(
            f"human judgments for {len(missing)} queries the run does not have (first: {missing[0]})"
        )
    judged = sorted(human)
    unjudged = sorted(set(labeler) - set(human))
    y = [human[q] for q in judged]
    f = [labeler[q] for q in judged]
    f_tilde = [labeler[q] for q in unjudged]
    return MetricEstimates(
        labeler_mean=float(np.mean(list(labeler.values()))),
        classical=classical_mean(y, alpha, interval, bounds),
        ppi=ppi_mean(y, f, f_tilde, alpha, interval=interval, bounds=bounds),
        queries=len(labeler),
        bounds=bounds,
    )


def paired_difference(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """Per-query a − b over the queries both have."""
    return {q: a[q] - b[q] for q in sorted(set(a) & set(b))}
