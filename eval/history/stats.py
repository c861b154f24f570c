"""The statistics of comparing two evaluations and of gating on the comparison, once or repeatedly.

Inputs are per-query values of one metric, {qid: value}: the labeler's value of every query and,
for the queries a person judged, the human value. Nothing here reads a store.

* :func:`compare` — candidate A against baseline B on the queries both have, paired (A − B per
  query). Where at least :data:`MIN_HUMAN` common queries were judged by a person in both
  evaluations, the interval is PPI++ on the paired differences (:func:`judgments.ppi.
  estimate_metric`: the labeler's differences on the other common queries, the human
  differences on the judged ones); otherwise the paired t interval over the labeler's
  differences (Agresti–Coull pseudo-observations, Wilson's or Hoeffding's interval at the
  bounds, as :func:`judgments.ppi.classical_mean` chooses). ``method`` says which, in words;
  ``basis`` names the interval in a few.
* :func:`holm` and :func:`called` — the one significance rule of this repository (as
  ``eval.search``): only the primary metric (NDCG@k) is called better or worse, by Holm's
  adjusted p-value over the comparisons made; every other metric's interval is marginal.
* :func:`gate` — a CI decision from a comparison and a margin. The decision uses the bound of the
  two-sided (1 − alpha) interval the comparison shows, so each mode is a one-sided test at level
  alpha / 2 (alpha = 0.05: 2.5%); pass ``alpha = 2 × level`` to :func:`compare` for a one-sided
  test at ``level``. A user reading the line sees the very interval the decision used.
* :class:`ConfidenceSequence` — the same question asked again and again (a daily check of a
  system against a fixed baseline), one observation per distinct query. A fixed-level test repeated at every check raises false
  alarms far above its level; a confidence sequence holds the mean paired difference at every
  check at once (time-uniform), so :func:`monitor_gate` may be asked after every check. Two are
  offered: ``"asymptotic"``, the asymptotic confidence sequence of Waudby-Smith, Arnold, Wu, Wang
  and Ramdas (Annals of Statistics 2024: Robbins' normal-mixture boundary with the running
  standard deviation, its ρ tuned for a planned number of queries), and ``"bernstein"``, the
  predictable plug-in empirical-Bernstein sequence of Waudby-Smith and Ramdas (JRSS-B 2024,
  "Estimating means of bounded random variables by betting"), valid at every finite n for values
  in ``bounds`` but wider. ``benchmarks/history_monitoring.py`` measures both on real per-query
  NDCG@10 values (docs/results/history-monitoring.md).

As everywhere in this repository, no interval shown has zero width or excludes its estimate.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from core.errors import InputError
from judgments.coverage import MIN_JUDGED_QUERIES
from judgments.ppi import Interval, classical_mean, estimate_metric, no_spread
from measure.metrics.significance import holm_adjusted

# Fewer judged queries than this in both evaluations: the paired t over the labeler's values
# (no PPI++ interval is made from fewer, as everywhere: judgments.coverage).
MIN_HUMAN = MIN_JUDGED_QUERIES
MODES = ("regression", "non-inferiority")
SEQUENCES = ("asymptotic", "bernstein")

Values = Mapping[Hashable, float]
Moved = tuple[str, float, float, float]  # qid, A's value, B's value, A − B


@dataclass(frozen=True)
class PairedComparison:
    """Candidate A − baseline B on one metric: the mean paired difference and its two-sided
    (1 − alpha) interval. ``differences`` holds every common query's labeler values, largest
    absolute difference first."""

    metric: str
    queries: int  # common queries
    human_queries: int  # of those, judged by a person in both evaluations (0: labeler only)
    estimate: float
    low: float
    high: float
    alpha: float
    method: str
    differences: tuple[Moved, ...] = field(repr=False)
    a_name: str = "candidate"
    b_name: str = "baseline"
    interval: str = "classical (t)"  # judgments.ppi's Interval.method: the interval used
    # The two-sided p-value of "no difference" from the interval's statistic; None where the
    # interval has none (Wilson's, Hoeffding's).
    p_value: float | None = None

    @property
    def basis(self) -> str:
        """The interval actually used, in a few words, for a one-line log."""
        name = interval_name(self.interval)
        if self.human_queries:
            return f"{name}, {self.human_queries} of {self.queries} queries judged"
        return f"{name} over {self.queries} queries"

    def moved(self, n: int = 10) -> list[Moved]:
        """The ``n`` queries whose value moved most between B and A (labeler values)."""
        return list(self.differences[:n])


@dataclass(frozen=True)
class SequenceState:
    """A confidence sequence after its latest check: the mean paired difference (A − B) over
    every query seen so far and a (1 − alpha) interval valid at every check at once."""

    metric: str
    estimate: float
    low: float
    high: float
    n: int  # paired differences seen
    checks: int
    alpha: float
    method: str
    a_name: str = "candidate"
    b_name: str = "baseline"

    @property
    def basis(self) -> str:
        checks = "1 check" if self.checks == 1 else f"{self.checks} checks"
        return f"{self.method} CS, {self.n} distinct queries over {checks}"


@dataclass(frozen=True)
class GateDecision:
    passed: bool
    reason: str  # one line for a CI log


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise InputError(f"alpha: expected 0 < alpha < 1, got {alpha}")


def interval_name(method: str) -> str:
    """judgments.ppi's name of an interval (``Interval.method``) in a few words: which interval
    it is, with the pseudo-observations or the fallback that made it."""
    base = method.split(";")[0]
    if base.startswith("PPI"):
        name = "PPI++"
    elif "Wilson" in base:
        name = "Wilson interval"
    elif "Hoeffding" in base:
        name = "Hoeffding interval (no spread)"
    else:
        name = "paired t"
    if "pseudo-observations" in base:
        name += " with Agresti–Coull pseudo-observations"
    if "not estimable" in method:
        name += " on the judged queries alone (PPI++ not estimable)"
    return name


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given (eval.search's rule)."""
    adjusted = holm_adjusted(dict(enumerate(p_values)))
    return [adjusted[i] for i in range(len(p_values))]


def tested_p(comparison: PairedComparison) -> float:
    """The p-value a comparison brings to Holm's adjustment, as eval.search's: its interval's;
    where the interval has no statistic (Wilson's, Hoeffding's), 1 when it holds 0 and alpha
    otherwise (known only to be below alpha: never called among several)."""
    if comparison.p_value is not None:
        return comparison.p_value
    return 1.0 if comparison.low <= 0 <= comparison.high else comparison.alpha


def _verdict(comparison: PairedComparison, significant: bool) -> str:
    if not significant:
        return "no difference shown"
    return "A better" if comparison.estimate > 0 else "A worse"


def called(comparisons: Sequence[PairedComparison]) -> list[tuple[str, float | None]]:
    """The primary metric's comparisons made together (one per pair of evaluations compared),
    each called as eval.search calls its runs' differences: "A better" or "A worse" when its
    Holm-adjusted p-value (over these comparisons) is below alpha, else "no difference shown";
    with that adjusted p-value. A single comparison whose interval has no p-value (Wilson's,
    Hoeffding's) is called by its interval (Holm over one test is the test itself), with None."""
    if len(comparisons) == 1 and comparisons[0].p_value is None:
        c = comparisons[0]
        return [(_verdict(c, not c.low <= 0 <= c.high), None)]
    adjusted = holm([tested_p(c) for c in comparisons])
    return [(_verdict(c, p < c.alpha), p) for c, p in zip(comparisons, adjusted, strict=True)]


def _moved(a: Values, b: Values, common: list) -> tuple[Moved, ...]:
    rows = [(str(q), float(a[q]), float(b[q]), float(a[q] - b[q])) for q in common]
    return tuple(sorted(rows, key=lambda row: (-abs(row[3]), row[0])))


def compare(
    metric: str,
    a_labeler: Values,
    b_labeler: Values,
    a_human: Values | None = None,
    b_human: Values | None = None,
    alpha: float = 0.05,
    bounds: tuple[float, float] = (-1.0, 1.0),
    a_name: str = "candidate",
    b_name: str = "baseline",
) -> PairedComparison:
    """A − B on the queries both evaluations have (``bounds``: the range of a difference; a
    metric in [0, 1] gives (−1, 1)). Human values count only for queries judged in both."""
    _check_alpha(alpha)
    common = sorted(set(a_labeler) & set(b_labeler), key=str)
    if len(common) < 2:
        raise InputError(
            f"{metric}: {a_name} and {b_name} share {len(common)} queries; at least 2 are needed"
        )
    labeler = {q: float(a_labeler[q] - b_labeler[q]) for q in common}
    judged = [q for q in common if q in (a_human or {}) and q in (b_human or {})]
    interval: Interval
    if len(judged) >= MIN_HUMAN:
        assert a_human is not None and b_human is not None  # judged is empty otherwise
        human = {q: float(a_human[q] - b_human[q]) for q in judged}
        interval = estimate_metric(labeler, human, alpha, "t", bounds).ppi
        method = f"PPI++ with {len(judged)} queries judged in both ({interval.method})"
    else:
        interval = classical_mean(list(labeler.values()), alpha, "t", bounds)
        covered = (
            "no human judgments cover both"
            if not judged
            else f"only {len(judged)} query judged in both (PPI++ needs {MIN_HUMAN})"
        )
        method = f"paired t over the labeler's values of {len(common)} common queries; {covered}"
        if interval.method != "classical (t)":  # binary or constant values: say how it was done
            method += f" ({interval.method})"
        judged = []
    return PairedComparison(
        metric=metric,
        queries=len(common),
        human_queries=len(judged),
        estimate=interval.estimate,
        low=interval.low,
        high=interval.high,
        alpha=alpha,
        method=method,
        differences=_moved(a_labeler, b_labeler, common),
        a_name=a_name,
        b_name=b_name,
        interval=interval.method,
        p_value=interval.p_value(),
    )


def _number(value: float) -> str:
    if value == 0:
        return "0"  # a margin of 0, not "−0.000"
    return f"{value:+.3f}".replace("-", "−")


def gate(
    comparison: PairedComparison | SequenceState, margin: float = 0.0, mode: str = "regression"
) -> GateDecision:
    """Pass or fail candidate A against baseline B (the comparison is A − B; larger is better).

    ``regression``: fail only when the data show A worse than B by more than ``margin`` (the
    interval's upper bound is below −margin). ``non-inferiority``: pass only when the data show A
    is not worse by more than ``margin`` (the lower bound is above −margin). Either is a one-sided
    test at level alpha / 2 of the comparison's two-sided (1 − alpha) interval."""
    if mode not in MODES:
        raise InputError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    if not margin >= 0:
        raise InputError(f"margin: expected a number >= 0, got {margin}")
    c = comparison
    shown = (
        f"{c.metric}: {c.a_name} − {c.b_name} = {_number(c.estimate)} "
        f"[{_number(c.low)}, {_number(c.high)}] ({1 - c.alpha:.0%}, {c.basis})"
    )
    threshold = _number(-margin)
    if mode == "regression":
        if c.high < -margin:
            return GateDecision(False, f"FAIL {shown} is below {threshold}")
        return GateDecision(True, f"PASS {shown}: no regression beyond {threshold} shown")
    if c.low > -margin:
        return GateDecision(True, f"PASS {shown} is above {threshold}: not worse than the margin")
    return GateDecision(
        False, f"FAIL {shown} reaches {threshold}: non-inferiority within the margin not shown"
    )


def monitor_gate(
    state: SequenceState, margin: float = 0.0, mode: str = "regression"
) -> GateDecision:
    """:func:`gate` on a confidence sequence's latest state: safe to ask after every check."""
    return gate(state, margin, mode)


def asymptotic_rho2(alpha: float, planned_n: int) -> float:
    """ρ² that makes the normal-mixture boundary tightest at ``planned_n`` observations
    (Waudby-Smith et al. 2024, the closed form of their tuning)."""
    log_term = -2 * math.log(alpha)
    return (log_term + math.log(log_term + 1)) / planned_n


def asymptotic_bounds(
    x: np.ndarray, alpha: float, planned_n: int, bounds: tuple[float, float] = (-1.0, 1.0)
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The asymptotic confidence sequence after each observation along the last axis of ``x``:
    (mean, low, high). The half-width is σ̂_t · sqrt(2(tρ² + 1)/(t²ρ²) · log(sqrt(tρ² + 1)/α))
    with σ̂_t the running standard deviation; before two observations, or while they have no
    spread, σ̂ is the largest a value in ``bounds`` can have (half the range), never 0."""
    x = np.asarray(x, dtype=np.float64)
    t = np.arange(1, x.shape[-1] + 1, dtype=np.float64)
    mean = np.cumsum(x, axis=-1) / t
    second = np.cumsum(x * x, axis=-1) / t
    sigma = np.sqrt(np.maximum(second - mean * mean, 0.0))
    widest = (bounds[1] - bounds[0]) / 2
    sigma = np.where((t < 2) | (sigma <= 1e-9 * widest), widest, sigma)
    rho2 = asymptotic_rho2(alpha, planned_n)
    growth = t * rho2 + 1
    half = sigma * np.sqrt(2 * growth / (t * t * rho2) * np.log(np.sqrt(growth) / alpha))
    return mean, np.maximum(mean - half, bounds[0]), np.minimum(mean + half, bounds[1])


def bernstein_bounds(
    x: np.ndarray, alpha: float, bounds: tuple[float, float] = (-1.0, 1.0), cap: float = 0.5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The predictable plug-in empirical-Bernstein confidence sequence (Waudby-Smith and Ramdas
    2024, Theorem 2 with their λ_t = sqrt(2 log(2/α) / (σ̂²_{t−1} t log(1 + t))) ∧ ``cap``) after
    each observation along the last axis of ``x``: (weighted mean, low, high). Values are mapped
    from ``bounds`` to [0, 1] and back; validity holds at every n for values in ``bounds``."""
    span = bounds[1] - bounds[0]
    y = (np.asarray(x, dtype=np.float64) - bounds[0]) / span
    t = np.arange(1, y.shape[-1] + 1, dtype=np.float64)
    # Running mean and variance with one pseudo-observation (1/2, variance 1/4): predictable.
    mu = (0.5 + np.cumsum(y, axis=-1)) / (t + 1)
    var = (0.25 + np.cumsum((y - mu) ** 2, axis=-1)) / (t + 1)
    pad = [(0, 0)] * (y.ndim - 1) + [(1, 0)]
    mu_before = np.pad(mu[..., :-1], pad, constant_values=0.5)
    var_before = np.pad(var[..., :-1], pad, constant_values=0.25)
    log_term = math.log(2 / alpha)
    lam = np.minimum(np.sqrt(2 * log_term / (var_before * t * np.log1p(t))), cap)
    penalty = (y - mu_before) ** 2 * (-np.log1p(-lam) - lam)  # v_i ψ_E(λ_i)
    weight = np.cumsum(lam, axis=-1)
    centre = np.cumsum(lam * y, axis=-1) / weight
    half = (log_term + np.cumsum(penalty, axis=-1)) / weight
    low = np.maximum(centre - half, 0.0) * span + bounds[0]
    high = np.minimum(centre + half, 1.0) * span + bounds[0]
    return centre * span + bounds[0], low, high


class ConfidenceSequence:
    """Accumulates the per-query paired differences (A − B) of successive checks and returns,
    after each, an interval for their mean that holds at every check at once with probability
    1 − alpha. Each difference must be of a query not seen before (the observations are
    independent draws of queries): a query checked again is no new observation, and the caller
    (history monitor) gives each distinct query once. It assumes the differences of all checks
    share one mean: after a deliberate change of either system, start a new sequence. ``planned_n`` is the number of differences
    (all checks together, e.g. 50 checks × 40 queries) at which the asymptotic sequence is
    tightest; it stays valid before and after."""

    def __init__(
        self,
        alpha: float = 0.05,
        planned_n: int = 1000,
        method: str = "asymptotic",
        bounds: tuple[float, float] = (-1.0, 1.0),
        metric: str = "metric",
        a_name: str = "candidate",
        b_name: str = "baseline",
    ) -> None:
        _check_alpha(alpha)
        if method not in SEQUENCES:
            raise InputError(f"method: expected one of {', '.join(SEQUENCES)}, got {method!r}")
        if planned_n < 1:
            raise InputError(f"planned_n: expected a positive number of queries, got {planned_n}")
        self.alpha, self.planned_n, self.method, self.bounds = alpha, planned_n, method, bounds
        self.metric, self.a_name, self.b_name = metric, a_name, b_name
        self.values = np.empty(0)
        self.checks = 0

    def update(self, differences: np.ndarray | list[float]) -> SequenceState:
        new = np.asarray(differences, dtype=np.float64).ravel()
        if len(new) == 0:
            raise InputError("update: a check needs at least one paired difference")
        if np.any((new < self.bounds[0]) | (new > self.bounds[1])) or not np.all(np.isfinite(new)):
            raise InputError(f"update: paired differences must lie in {self.bounds}")
        self.values = np.concatenate([self.values, new])
        self.checks += 1
        if self.method == "asymptotic":
            _, low, high = asymptotic_bounds(self.values, self.alpha, self.planned_n, self.bounds)
        else:
            _, low, high = bernstein_bounds(self.values, self.alpha, self.bounds)
        # The plain mean is the estimate shown; the interval is widened to hold it if needed.
        estimate = float(self.values.mean())
        lower, upper = min(float(low[-1]), estimate), max(float(high[-1]), estimate)
        if no_spread(np.array([lower, upper])):  # never a zero-width interval
            lower, upper = float(self.bounds[0]), float(self.bounds[1])
        return SequenceState(
            metric=self.metric,
            estimate=estimate,
            low=lower,
            high=upper,
            n=len(self.values),
            checks=self.checks,
            alpha=self.alpha,
            method=self.method,
            a_name=self.a_name,
            b_name=self.b_name,
        )


def fixed_t_bounds(x: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The two-sided (1 − alpha) paired t interval of each row of ``x`` (one check's
    differences): the fixed-level test a naive monitor repeats at every check."""
    n = x.shape[-1]
    mean = x.mean(axis=-1)
    half = stats.t.ppf(1 - alpha / 2, n - 1) * x.std(axis=-1, ddof=1) / math.sqrt(n)
    return mean - half, mean + half
