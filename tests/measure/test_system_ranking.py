"""The statistics a labeler's system ranking is judged by (measure.metrics.system_ranking)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from measure.metrics.system_ranking import (
    bootstrap_interval,
    kendall_tau,
    largest_rank_error,
    lift,
    ranks,
    spearman_rho,
    tau_ap,
    top_overlap,
)

# The example of Urbano's ircor (and pyircor) documentation: tauAP(x, y) = 0.7491182, y the
# ranking being evaluated.
TRUE = [0.06, 0.2, 0.27, 0.37, 0.57, 0.63, 0.66, 0.9, 0.91, 0.94]
ESTIMATED = [0.37, 0.06, 0.2, 0.27, 0.57, 0.66, 0.63, 0.91, 0.9, 0.94]


def yilmaz(reference, estimate) -> float:
    """τ_AP straight from Yilmaz et al.'s definition, for rankings without ties."""
    order = sorted(range(len(estimate)), key=lambda i: -estimate[i])
    total = 0.0
    for m in range(1, len(order)):
        item = order[m]
        above = order[:m]
        total += sum(reference[j] > reference[item] for j in above) / m
    return 2 * total / (len(order) - 1) - 1


def test_tau_ap_matches_the_published_example_and_the_definition():
    assert tau_ap(TRUE, ESTIMATED) == pytest.approx(0.7491182, abs=1e-7)
    rng = np.random.default_rng(3)
    for _ in range(20):
        reference, estimate = rng.random(9), rng.random(9)
        assert tau_ap(reference, estimate) == pytest.approx(yilmaz(reference, estimate))


def test_tau_rho_and_ranks_are_scipys_with_and_without_ties():
    """Written out for speed (the bootstrap asks each a thousand times per interval), they are
    scipy's τ-b, Spearman's ρ and average ranks, ties in either ranking included."""
    from scipy import stats

    rng = np.random.default_rng(11)
    for trial in range(300):
        n = int(rng.integers(2, 30))
        reference = rng.integers(0, 4, n).astype(float) if trial % 2 else rng.random(n)
        estimate = rng.integers(0, 4, n).astype(float) if trial % 3 else rng.random(n)
        np.testing.assert_array_equal(ranks(estimate), stats.rankdata(-estimate))
        if np.ptp(reference) == 0 or np.ptp(estimate) == 0:
            assert kendall_tau(reference, estimate) is None
            assert spearman_rho(reference, estimate) is None
            continue
        tau = stats.kendalltau(reference, estimate).statistic
        rho = stats.spearmanr(reference, estimate).statistic
        assert kendall_tau(reference, estimate) == pytest.approx(tau, abs=1e-12)
        assert spearman_rho(reference, estimate) == pytest.approx(rho, abs=1e-12)


def test_a_system_without_a_number_gives_no_statistic():
    """A NaN mean (a system no query could score) makes every ranking statistic undefined, as
    scipy's would be, not a value computed around it."""
    reference, estimate = [0.1, 0.4, 0.3, 0.2], [0.2, float("nan"), 0.1, 0.4]
    for statistic in (kendall_tau, spearman_rho, tau_ap):
        assert statistic(reference, estimate) is None
        assert statistic(estimate, reference) is None


def test_tau_ap_is_one_for_the_same_order_and_minus_one_reversed_and_weighs_the_top():
    values = list(range(8))
    assert tau_ap(values, values) == pytest.approx(1.0)
    assert tau_ap(values, values[::-1]) == pytest.approx(-1.0)
    # One swap, at the top or at the bottom: the same τ, a lower τ_AP at the top.
    top_swap = [*values[:6], values[7], values[6]]
    bottom_swap = [values[1], values[0], *values[2:]]
    assert kendall_tau(values, top_swap) == pytest.approx(kendall_tau(values, bottom_swap))
    assert tau_ap(values, top_swap) < tau_ap(values, bottom_swap)


def test_tau_ap_with_ties_is_the_mean_over_the_orderings_of_each_tied_group():
    rng = np.random.default_rng(7)
    for _ in range(10):
        reference = rng.random(7)
        estimate = rng.integers(0, 3, 7).astype(float)  # groups of tied systems
        if len(set(estimate)) < 2:
            continue
        # Every way to break the ties, as small offsets inside each group.
        groups = {v: [i for i in range(7) if estimate[i] == v] for v in set(estimate)}
        values = []
        for orders in itertools.product(*(itertools.permutations(g) for g in groups.values())):
            broken = estimate.copy()
            for order in orders:
                for position, i in enumerate(order):
                    broken[i] += (len(order) - position) * 1e-3
            values.append(yilmaz(reference, broken))
        assert tau_ap(reference, estimate) == pytest.approx(np.mean(values))


def test_a_labeler_that_ties_every_system_has_no_ranking_statistics():
    reference = [0.3, 0.5, 0.4]
    assert kendall_tau(reference, [1.0, 1.0, 1.0]) is None
    assert tau_ap(reference, [1.0, 1.0, 1.0]) is None
    assert top_overlap(reference, [1.0, 1.0, 1.0], 1) is None


def test_top_overlap_largest_error_and_lift():
    names = ["a", "b", "c", "d", "e"]
    reference = [5, 4, 3, 2, 1]  # a best
    estimate = [4, 3, 2, 1, 5]  # e lifted from last to first
    assert top_overlap(reference, estimate, 1) == 0.0
    assert top_overlap(reference, estimate, 3) == pytest.approx(2 / 3)
    error = largest_rank_error(reference, estimate, names)
    assert (error.system, error.places, error.reference_rank, error.estimate_rank) == (
        "e",
        4.0,
        5.0,
        1.0,
    )
    assert lift(reference, estimate, [False, False, False, False, True]) == 4.0
    assert lift(reference, estimate, [True, True, False, False, False]) == -1.0
    assert lift(reference, estimate, [False] * 5) is None


def test_the_bootstrap_interval_holds_the_estimate_and_is_never_zero_wide():
    rng = np.random.default_rng(0)
    quality = np.linspace(0.2, 0.8, 6)[:, None]
    human = quality + rng.normal(0, 0.2, (6, 40))
    labeler = quality + rng.normal(0, 0.3, (6, 40))
    point = kendall_tau(human.mean(axis=1), labeler.mean(axis=1))
    low, high = bootstrap_interval(human, labeler, kendall_tau, resamples=300)
    assert low <= point <= high and high > low
    # A labeler that agrees in every resample has no spread: no interval rather than [1, 1].
    assert bootstrap_interval(human, human, kendall_tau, resamples=100) is None
    assert bootstrap_interval(human, np.ones_like(human), kendall_tau, resamples=100) is None
