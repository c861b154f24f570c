"""How well one system ranking matches another: the statistics a labeler is judged by.

A labeler exists to decide between retrieval systems, so it is measured by the ranking of many
systems under its labels against the ranking under people's judgments (the reference), as the
TREC Auto-Judge track and the LLMJudge challenge measure LLM judges:

- Kendall's τ (τ-b, so ties in either ranking are allowed) and Spearman's ρ;
- τ_AP (Yilmaz, Aslam & Robertson, SIGIR 2008): τ with the swaps near the top weighted more, as
  a user reading a leaderboard from the top does. Ties in the labeler's ranking (a labeler that
  cannot tell two systems apart) are averaged over their orderings, Urbano & Marrero's τ_AP_a
  (ICTIR 2017); a pair of systems the reference ties counts as half concordant;
- whether the best system (top-1) and the best three (top-3 overlap) are the reference's, and
  the largest rank error with the system that suffered it;
- self-preference: how many places a labeler lifts the systems built on its own scores (the
  cosine for dense retrieval, a grader for its own rerank) above the reference's rank.

Each statistic takes the systems' mean metric values (one number per system, in one order); the
intervals come from :func:`bootstrap_interval`, which resamples the queries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

# A statistic of the systems' mean values under the reference and under the estimate (one number
# per system each), None where it is undefined (every system tied under the labeler).
Statistic = Callable[[np.ndarray, np.ndarray], float | None]


def _defined(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def all_tied(values: Sequence[float]) -> bool:
    return len(values) < 2 or float(np.ptp(np.asarray(values, dtype=np.float64))) == 0.0


def kendall_tau(reference: Sequence[float], estimate: Sequence[float]) -> float | None:
    """Kendall's τ-b between two scorings of the same systems (None: one of them ties all)."""
    if all_tied(reference) or all_tied(estimate):
        return None
    return _defined(stats.kendalltau(reference, estimate).statistic)


def spearman_rho(reference: Sequence[float], estimate: Sequence[float]) -> float | None:
    if all_tied(reference) or all_tied(estimate):
        return None
    return _defined(stats.spearmanr(reference, estimate).statistic)


def _agreement(reference: np.ndarray, above: int, below: int) -> float:
    """1 when the reference also ranks ``above`` over ``below``, ½ when it ties them, else 0."""
    return float(np.sign(reference[above] - reference[below]) + 1) / 2


def tau_ap(reference: Sequence[float], estimate: Sequence[float]) -> float | None:
    """AP correlation of the ``estimate``'s ranking (higher is better) against the reference's:
    2/(N−1) · Σ over positions m ≥ 2 of the estimate's ranking of C(m)/(m − 1) − 1, C(m) the
    systems above position m that the reference also ranks above it. A group of systems the
    estimate ties takes the mean over the group's orderings (exact, not sampled). None when the
    estimate ties every system."""
    ref = np.asarray(reference, dtype=np.float64)
    est = np.asarray(estimate, dtype=np.float64)
    n = len(est)
    if all_tied(est) or all_tied(ref):
        return None
    total = 0.0
    for i in range(n):
        strictly_above = [j for j in range(n) if est[j] > est[i]]
        mates = [j for j in range(n) if j != i and est[j] == est[i]]
        p, t = len(strictly_above), len(mates) + 1
        # i sits at one of the group's t positions at random: k of its mates above it.
        offsets = [k for k in range(t) if p + k > 0]
        if strictly_above:
            concordant = sum(_agreement(ref, j, i) for j in strictly_above)
            total += concordant * sum(1 / (p + k) for k in offsets) / t
        if mates:
            mean_mate = sum(_agreement(ref, j, i) for j in mates) / len(mates)
            total += mean_mate * sum(k / (p + k) for k in offsets) / t
    return 2 * total / (n - 1) - 1


def ranks(values: Sequence[float]) -> np.ndarray:
    """1 for the best (highest) value; tied values share their mean rank."""
    return stats.rankdata(-np.asarray(values, dtype=np.float64), method="average")


def top_overlap(reference: Sequence[float], estimate: Sequence[float], n: int) -> float | None:
    """The share of the reference's best ``n`` systems that are among the estimate's best ``n``
    (ties at the cut: the estimate's order by its value, then the reference's). None when the
    estimate ties every system."""
    if all_tied(estimate):
        return None
    ref, est = np.asarray(reference), np.asarray(estimate)
    best_ref = set(np.lexsort((np.arange(len(ref)), -ref))[:n])
    best_est = set(np.lexsort((-ref, -est))[:n])
    return len(best_ref & best_est) / n


@dataclass(frozen=True)
class RankError:
    places: float  # |rank under the estimate − rank under the reference|
    system: str
    reference_rank: float
    estimate_rank: float


def largest_rank_error(
    reference: Sequence[float], estimate: Sequence[float], names: Sequence[str]
) -> RankError:
    ref, est = ranks(reference), ranks(estimate)
    errors = np.abs(est - ref)
    worst = int(np.argmax(errors))
    return RankError(float(errors[worst]), names[worst], float(ref[worst]), float(est[worst]))


def lift(
    reference: Sequence[float], estimate: Sequence[float], own: Sequence[bool]
) -> float | None:
    """The mean number of places the estimate ranks the ``own`` systems above the reference's
    rank for them (negative: below). None without own systems."""
    mask = np.asarray(own, dtype=bool)
    if not mask.any():
        return None
    return float(np.mean(ranks(reference)[mask] - ranks(estimate)[mask]))


def bootstrap_interval(
    reference: np.ndarray,
    estimate: np.ndarray,
    statistic: Statistic,
    resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> tuple[float, float] | None:
    """Percentile interval of ``statistic`` over the queries: the queries (columns of the two
    systems × queries matrices) are drawn with replacement, both matrices alike, and each system's
    mean taken again. None when the statistic is undefined in a resample or has no spread over
    the resamples (an interval of zero width would claim certainty the queries do not give).
    The interval is widened to hold the statistic on all the queries where the percentiles miss
    it (a bounded statistic near its bound), so no estimate lies outside its interval."""
    point = statistic(reference.mean(axis=1), estimate.mean(axis=1))
    if point is None:
        return None
    rng = np.random.default_rng(seed)
    queries = reference.shape[1]
    values = []
    for _ in range(resamples):
        chosen = rng.integers(0, queries, queries)
        value = statistic(reference[:, chosen].mean(axis=1), estimate[:, chosen].mean(axis=1))
        if value is None:
            return None
        values.append(value)
    low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    low, high = min(float(low), point), max(float(high), point)
    if high - low <= 0:
        return None
    return low, high
