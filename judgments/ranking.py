"""A few human-judged queries and a labeler, as a system ranking: how close to the ranking under
all the judgments does a labeler's ranking come once PPI++ corrects each system's metric with n
randomly judged queries, and how close do those n queries come on their own?

Both answer with Kendall's τ against the systems' mean metric under every judged query, over
many random draws of the n queries (the spread says how much one draw may miss by).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from judgments.ppi import power_tuned_lambda
from measure.metrics.system_ranking import kendall_tau


@dataclass(frozen=True)
class DrawnTaus:
    """τ over ``draws`` random draws of ``judged`` queries: their mean, standard deviation and
    5th-95th percentiles (None where a draw left every system tied)."""

    judged: int
    draws: int
    mean: float | None
    sd: float | None
    low: float | None
    high: float | None
    undefined: int  # draws whose ranking tied every system


def _summary(taus: list[float | None], judged: int) -> DrawnTaus:
    defined = np.array([t for t in taus if t is not None])
    if not len(defined):
        return DrawnTaus(judged, len(taus), None, None, None, None, len(taus))
    low, high = np.quantile(defined, [0.05, 0.95])
    return DrawnTaus(
        judged,
        len(taus),
        float(defined.mean()),
        float(defined.std(ddof=1)) if len(defined) > 1 else None,
        float(low),
        float(high),
        len(taus) - len(defined),
    )


def ppi_estimates(human: np.ndarray, labeler: np.ndarray, judged: np.ndarray) -> np.ndarray:
    """Each system's PPI++ mean (power-tuned λ per system, as :func:`judgments.ppi.ppi_mean`)
    from the human values of the ``judged`` queries (a boolean mask over the columns) and the
    labeler's values of all of them."""
    estimates = np.empty(human.shape[0])
    for s in range(human.shape[0]):
        y, f, f_tilde = human[s, judged], labeler[s, judged], labeler[s, ~judged]
        lam = power_tuned_lambda(y, f, f_tilde)
        estimates[s] = lam * f_tilde.mean() + (y - lam * f).mean()
    return estimates


def _masks(queries: int, judged: int, draws: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    masks = []
    for _ in range(draws):
        mask = np.zeros(queries, dtype=bool)
        mask[rng.choice(queries, judged, replace=False)] = True
        masks.append(mask)
    return masks


def corrected_ranking_taus(
    human: np.ndarray, labeler: np.ndarray, judged: int, draws: int = 200, seed: int = 0
) -> DrawnTaus:
    """τ between the systems' PPI++ estimates and their means under every judged query, over
    ``draws`` draws of ``judged`` queries (systems × queries matrices)."""
    reference = human.mean(axis=1)
    taus = [
        kendall_tau(reference, ppi_estimates(human, labeler, mask))
        for mask in _masks(human.shape[1], judged, draws, seed)
    ]
    return _summary(taus, judged)


def people_only_taus(human: np.ndarray, judged: int, draws: int = 200, seed: int = 0) -> DrawnTaus:
    """τ between the systems' means over ``judged`` random queries alone and over every judged
    query: what the same judging effort gives without a labeler."""
    reference = human.mean(axis=1)
    taus = [
        kendall_tau(reference, human[:, mask].mean(axis=1))
        for mask in _masks(human.shape[1], judged, draws, seed)
    ]
    return _summary(taus, judged)
