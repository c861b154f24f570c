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

# A statistic of the systems' mean values under the reference and under the estimate (one number
# per system each), None where it is undefined (every system tied under the labeler).
Statistic = Callable[[np.ndarray, np.ndarray], float | None]


def _defined(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def all_tied(values: Sequence[float]) -> bool:
    v = np.asarray(values, dtype=np.float64)
    return len(v) < 2 or bool(v.max() == v.min())


def _undefined(reference: np.ndarray, estimate: np.ndarray) -> bool:
    """No ranking statistic between these: one of them ties every system, or holds a value that
    is no number (scipy answers NaN there; a rank computed around it would be invented)."""
    finite = np.isfinite(reference).all() and np.isfinite(estimate).all()
    return not finite or all_tied(reference) or all_tied(estimate)


def kendall_tau(reference: Sequence[float], estimate: Sequence[float]) -> float | None:
    """Kendall's τ-b between two scorings of the same systems (None: one of them ties all):
    (concordant − discordant pairs) / √((pairs − pairs tied in one) · (pairs − tied in the
    other)), as scipy.stats.kendalltau computes it. Written out because the bootstrap asks it a
    thousand times per interval, where scipy's checks cost a hundred times the sum."""
    ref = np.asarray(reference, dtype=np.float64)
    est = np.asarray(estimate, dtype=np.float64)
    if _undefined(ref, est):
        return None
    # Each pair twice (i, j and j, i) and the diagonal's n zeros: halve the sums, drop n.
    n = len(ref)
    ref_order = np.sign(ref[:, None] - ref[None, :])
    est_order = np.sign(est[:, None] - est[None, :])
    pairs = n * (n - 1) // 2
    ref_ties = (n * n - np.count_nonzero(ref_order) - n) // 2
    est_ties = (n * n - np.count_nonzero(est_order) - n) // 2
    concordance = float((ref_order * est_order).sum()) / 2
    return _defined(concordance / math.sqrt((pairs - ref_ties) * (pairs - est_ties)))


def spearman_rho(reference: Sequence[float], estimate: Sequence[float]) -> float | None:
    """Spearman's ρ: Pearson's correlation of the average ranks (scipy.stats.spearmanr's)."""
    if _undefined(np.asarray(reference, dtype=np.float64), np.asarray(estimate, dtype=np.float64)):
        return None
    ref, est = ranks(reference), ranks(estimate)
    ref, est = ref - ref.mean(), est - est.mean()
    return _defined(float(ref @ est) / math.sqrt(float(ref @ ref) * float(est @ est)))


def tau_ap(reference: Sequence[float], estimate: Sequence[float]) -> float | None:
    """AP correlation of the ``estimate``'s ranking (higher is better) against the reference's:
    2/(N−1) · Σ over positions m ≥ 2 of the estimate's ranking of C(m)/(m − 1) − 1, C(m) the
    systems above position m that the reference also ranks above it. A group of systems the
    estimate ties takes the mean over the group's orderings (exact, not sampled). None when the
    estimate ties every system.

    System i with p systems strictly above it and t − 1 tied with it sits at one of t positions
    p + k (k = 0 … t − 1) with equal chance; at position p + k (counted from 0) the systems above
    it are the p, each concordant where the reference agrees (½ where the reference ties), and k
    of its mates, each concordant with the mates' mean agreement. Hence the harmonic sums."""
    ref = np.asarray(reference, dtype=np.float64)
    est = np.asarray(estimate, dtype=np.float64)
    n = len(est)
    if _undefined(ref, est):
        return None
    # agree[j, i]: 1 when the reference ranks j over i, ½ when it ties them, else 0.
    agree = (np.sign(ref[:, None] - ref[None, :]) + 1) / 2
    above = est[:, None] > est[None, :]
    mates = (est[:, None] == est[None, :]) & ~np.eye(n, dtype=bool)
    p = above.sum(axis=0)
    t = mates.sum(axis=0) + 1
    harmonic = np.concatenate([[0.0], np.cumsum(1 / np.arange(1, 2 * n + 1))])
    # Σ 1/(p + k) over the positions p + k > 0, and Σ k/(p + k) = positions − p · Σ 1/(p + k).
    inverse = harmonic[p + t - 1] - harmonic[np.maximum(p, 1) - 1]
    positions = np.where(p > 0, t, t - 1)
    weighted = positions - p * inverse
    concordant = (agree * above).sum(axis=0)
    mean_mate = (agree * mates).sum(axis=0) / np.maximum(t - 1, 1)
    total = (concordant * inverse + mean_mate * weighted) / t
    return float(2 * total.sum() / (n - 1) - 1)


def ranks(values: Sequence[float]) -> np.ndarray:
    """1 for the best (highest) value; tied values share their mean rank (scipy.stats.rankdata's
    "average" of the negated values, without its per-call checks)."""
    v = np.asarray(values, dtype=np.float64)
    better = (v[None, :] > v[:, None]).sum(axis=1)
    tied = (v[None, :] == v[:, None]).sum(axis=1)
    return better + (tied + 1) / 2


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
