"""eval.history.stats: the paired comparison (t and PPI++), the gate's decisions, and the
confidence sequences' time-uniform validity against a repeated fixed-level test."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from core.errors import InputError
from eval.history.stats import (
    MIN_HUMAN,
    ConfidenceSequence,
    asymptotic_bounds,
    bernstein_bounds,
    called,
    compare,
    fixed_t_bounds,
    gate,
    holm,
    monitor_gate,
)


def runs(n: int, shift: float, noise: float, seed: int) -> tuple[dict, dict]:
    """Two systems' per-query values in [0, 1]: B uniform, A = B + shift + noise, clipped."""
    rng = np.random.default_rng(seed)
    b = {f"q{i}": float(v) for i, v in enumerate(rng.uniform(0, 1, n))}
    a = {q: float(np.clip(v + shift + rng.normal(0, noise), 0, 1)) for q, v in b.items()}
    return a, b


def test_paired_t_matches_scipy_ttest_rel():
    a, b = runs(43, -0.03, 0.1, seed=1)
    b["only-in-b"] = 0.5  # not common: left out
    result = compare("ndcg@10", a, b, alpha=0.05)
    qids = sorted(a)
    x, y = np.array([a[q] for q in qids]), np.array([b[q] for q in qids])
    test = stats.ttest_rel(x, y)
    low, high = test.confidence_interval(0.95)
    assert result.queries == 43 and result.human_queries == 0
    assert result.estimate == pytest.approx(float(np.mean(x - y)))
    assert (result.low, result.high) == pytest.approx((low, high))
    assert result.method.startswith("paired t over the labeler's values of 43 common queries")


def test_moved_lists_the_largest_differences_first():
    a, b = runs(20, 0.0, 0.2, seed=2)
    moved = compare("ndcg@10", a, b).moved(3)
    sizes = [abs(d) for _, _, _, d in moved]
    everything = sorted((abs(a[q] - b[q]) for q in a), reverse=True)
    assert sizes == pytest.approx(everything[:3])
    assert all(d == pytest.approx(x - y) for _, x, y, d in moved)


def test_ppi_comparison_matches_ppi_py():
    import ppi_py

    a, b = runs(200, 0.04, 0.15, seed=3)
    rng = np.random.default_rng(4)
    judged = sorted(a)[:40]
    a_human = {q: float(np.clip(a[q] + rng.normal(0, 0.1), 0, 1)) for q in judged}
    b_human = {q: float(np.clip(b[q] + rng.normal(0, 0.1), 0, 1)) for q in judged}
    result = compare("ndcg@10", a, b, a_human, b_human)
    y = np.array([a_human[q] - b_human[q] for q in judged])
    f = np.array([a[q] - b[q] for q in judged])
    f_unjudged = np.array([a[q] - b[q] for q in sorted(a) if q not in a_human])
    low, high = ppi_py.ppi_mean_ci(y, f, f_unjudged, alpha=0.05)
    assert result.human_queries == 40 and result.method.startswith("PPI++ with 40 queries")
    assert result.estimate == pytest.approx(
        float(ppi_py.ppi_mean_pointestimate(y, f, f_unjudged)[0])
    )
    # ppi_py's interval is normal with population variances; ours is Student's t (df 39) with
    # sample variances: wider by the quantiles' ratio and at most sqrt(n / (n - 1)) more.
    ratio = (result.high - result.low) / float(high[0] - low[0])
    quantiles = stats.t.ppf(0.975, 39) / stats.norm.ppf(0.975)
    assert quantiles - 1e-9 <= ratio <= quantiles * np.sqrt(40 / 39) + 1e-9


def test_too_few_judged_queries_fall_back_to_the_paired_t():
    a, b = runs(30, 0.0, 0.1, seed=5)
    judged = sorted(a)[: MIN_HUMAN - 1]
    result = compare("ndcg@10", a, b, {q: a[q] for q in judged}, {q: b[q] for q in judged})
    assert result.human_queries == 0
    assert f"only {MIN_HUMAN - 1} query judged in both" in result.method
    # Judged in only one of the two evaluations: not a paired human difference.
    one_side = compare("ndcg@10", a, b, {q: a[q] for q in a}, {})
    assert "no human judgments cover both" in one_side.method


def test_fewer_than_two_common_queries_are_refused():
    with pytest.raises(InputError, match="share 1 queries"):
        compare("ndcg@10", {"q1": 0.5, "q2": 0.4}, {"q1": 0.3, "q3": 0.1})


def test_constant_differences_never_give_a_zero_width_interval():
    b = {f"q{i}": 0.5 for i in range(10)}
    a = {q: 0.4 for q in b}
    result = compare("ndcg@10", a, b)
    assert result.estimate == pytest.approx(-0.1)
    assert result.low < result.estimate < result.high
    assert "Hoeffding" in result.method


def test_a_clear_regression_fails_the_gate():
    a, b = runs(43, -0.15, 0.05, seed=6)
    result = compare("ndcg@10", a, b, a_name="dense@v4", b_name="dense@v3")
    decision = gate(result, margin=0.02)
    assert not decision.passed
    assert decision.reason.startswith("FAIL ndcg@10: dense@v4 − dense@v3 = −0.")
    assert "(95%, paired t over 43 queries) is below −0.020" in decision.reason
    assert "\n" not in decision.reason


def test_a_drop_within_the_margin_passes_the_regression_gate():
    a, b = runs(43, -0.01, 0.05, seed=7)
    result = compare("ndcg@10", a, b)
    assert result.high > -0.05  # the data do not show a drop beyond 0.05
    assert gate(result, margin=0.05).passed
    assert gate(result, margin=0.05).reason.startswith("PASS")


def test_non_inferiority_needs_evidence():
    # Noisy and few: the regression gate passes (no drop shown), non-inferiority does not.
    a, b = runs(8, 0.0, 0.3, seed=8)
    noisy = compare("ndcg@10", a, b)
    assert gate(noisy, 0.02, "regression").passed
    assert not gate(noisy, 0.02, "non-inferiority").passed
    # Many queries, no change: the lower bound clears the margin.
    a, b = runs(400, 0.0, 0.02, seed=9)
    precise = compare("ndcg@10", a, b)
    assert precise.low > -0.02
    assert gate(precise, 0.02, "non-inferiority").passed


def test_the_gate_uses_the_bound_it_shows():
    a, b = runs(43, -0.03, 0.08, seed=10)
    result = compare("ndcg@10", a, b)
    assert result.high < 0  # a drop the data show
    # The regression gate fails exactly when the shown upper bound is below -margin, and
    # non-inferiority passes exactly when the shown lower bound is above it.
    for margin in (0.0, -result.high - 1e-6, -result.high + 1e-6, -result.low + 1e-6, 0.2):
        assert gate(result, margin).passed == (result.high >= -margin)
        assert gate(result, margin, "non-inferiority").passed == (result.low > -margin)


def test_the_gate_refuses_bad_settings():
    a, b = runs(10, 0.0, 0.1, seed=11)
    result = compare("ndcg@10", a, b)
    with pytest.raises(InputError, match="mode"):
        gate(result, 0.0, "superiority")
    with pytest.raises(InputError, match="margin"):
        gate(result, -0.1)


def test_confidence_sequence_contains_the_mean_and_is_wider_than_the_fixed_interval():
    rng = np.random.default_rng(12)
    x = np.clip(rng.normal(0.02, 0.2, 400), -1, 1)
    true_mean = float(np.mean(np.clip(rng.normal(0.02, 0.2, 1_000_000), -1, 1)))
    fixed_low, fixed_high = fixed_t_bounds(x[None, :], 0.05)
    for method in ("asymptotic", "bernstein"):
        sequence = ConfidenceSequence(alpha=0.05, planned_n=400, method=method)
        for chunk in np.split(x, 10):
            state = sequence.update(chunk)
            assert state.low <= true_mean <= state.high
            assert state.low <= state.estimate <= state.high
        assert state.n == 400 and state.checks == 10
        assert state.high - state.low > float(fixed_high[0] - fixed_low[0])


def test_the_bernstein_sequence_holds_the_bounds():
    x = np.array([1.0, 1.0, 1.0, -1.0, 1.0])
    _, low, high = bernstein_bounds(x, 0.05)
    assert np.all(low >= -1) and np.all(high <= 1) and np.all(high > low)
    with pytest.raises(InputError, match="lie in"):
        ConfidenceSequence(method="bernstein").update([1.5])


def test_repeated_fixed_tests_raise_false_alarms_and_the_sequences_do_not():
    """400 unchanged systems, each checked 30 times on 20 fresh queries: an alarm is a
    regression call (upper bound below 0) at any check."""
    rng = np.random.default_rng(13)
    streams, checks, per_check, alpha = 400, 30, 20, 0.10
    x = np.clip(rng.normal(0.0, 0.2, (streams, checks, per_check)), -1, 1)
    _, naive_high = fixed_t_bounds(x, alpha)
    naive = float(np.mean(np.any(naive_high < 0, axis=1)))
    flat = x.reshape(streams, checks * per_check)
    at_checks = np.arange(per_check - 1, checks * per_check, per_check)
    _, _, asym_high = asymptotic_bounds(flat, alpha, checks * per_check)
    _, _, bern_high = bernstein_bounds(flat, alpha)
    asymptotic = float(np.mean(np.any(asym_high[:, at_checks] < 0, axis=1)))
    bernstein = float(np.mean(np.any(bern_high[:, at_checks] < 0, axis=1)))
    # One-sided level alpha / 2 = 5% per check; 30 checks inflate it many-fold.
    assert naive > 0.4
    tolerance = 3 * np.sqrt(0.05 * 0.95 / streams)
    assert asymptotic <= alpha / 2 + tolerance
    assert bernstein <= alpha / 2 + tolerance


def test_monitor_gate_reads_like_the_gate():
    sequence = ConfidenceSequence(alpha=0.05, planned_n=200, metric="ndcg@10")
    rng = np.random.default_rng(14)
    for _ in range(5):
        state = sequence.update(np.clip(rng.normal(-0.3, 0.1, 40), -1, 1))
    decision = monitor_gate(state, margin=0.02)
    assert not decision.passed
    assert "asymptotic CS, 200 distinct queries over 5 checks" in decision.reason


def test_the_gate_at_alpha_is_a_one_sided_test_at_half_alpha():
    """compare(alpha=0.10)'s upper bound is the one-sided 95% bound: the regression gate on it
    is scipy's one-sided paired t test at 5% (margin 0)."""
    a, b = runs(43, -0.02, 0.08, seed=15)
    result = compare("ndcg@10", a, b, alpha=0.10)
    qids = sorted(a)
    x, y = np.array([a[q] for q in qids]), np.array([b[q] for q in qids])
    one_sided = stats.ttest_rel(x, y, alternative="less")
    assert result.high == pytest.approx(one_sided.confidence_interval(0.95).high)
    assert gate(result, 0.0).passed == (one_sided.pvalue >= 0.05)


def test_no_ppi_comparison_from_fewer_judged_queries_than_an_interval_needs():
    """Five queries judged in both evaluations made a PPI++ interval; the minimum that every
    PPI++ interval needs (judgments.coverage) holds here too: the labeler's paired t instead."""
    from judgments.coverage import MIN_JUDGED_QUERIES

    a, b = runs(30, 0.0, 0.1, seed=5)
    judged = sorted(a)[:5]
    result = compare("ndcg@10", a, b, {q: a[q] for q in judged}, {q: b[q] for q in judged})
    assert result.human_queries == 0 and result.method.startswith("paired t")
    assert f"(PPI++ needs {MIN_JUDGED_QUERIES})" in result.method
    judged = sorted(a)[:MIN_JUDGED_QUERIES]
    result = compare("ndcg@10", a, b, {q: a[q] for q in judged}, {q: b[q] for q in judged})
    assert result.human_queries == MIN_JUDGED_QUERIES and result.method.startswith("PPI++")


def test_holm_matches_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    p_values = [0.01, 0.04, 0.03, 0.2, 0.005]
    _, expected, _, _ = multitest.multipletests(p_values, method="holm")
    assert holm(p_values) == pytest.approx(list(expected))


def test_the_call_is_the_t_test_of_the_comparison_and_holm_over_several():
    a, b = runs(40, 0.05, 0.1, seed=3)
    result = compare("ndcg@10", a, b)
    expected = stats.ttest_rel(list(a.values()), list(b.values())).pvalue
    assert result.p_value == pytest.approx(expected)
    ((verdict, p),) = called([result])
    assert p == pytest.approx(expected) and verdict == (
        "A better" if p < 0.05 else "no difference shown"
    )
    # Three comparisons made together: each p-value Holm-adjusted over the three.
    results = [
        compare("ndcg@10", *runs(40, shift, 0.2, seed=i)) for i, shift in enumerate((0, 0.02, 0.1))
    ]
    adjusted = [p for _, p in called(results)]
    assert adjusted == pytest.approx(holm([r.p_value for r in results]))


def test_an_interval_without_a_statistic_is_called_alone_by_its_interval_only():
    """Differences with no spread get Hoeffding's interval, which has no p-value: one such
    comparison is called by its interval (Holm over one test); among several, as eval.search,
    it counts as p = alpha, never below it."""
    a = {f"q{i}": 0.9 for i in range(400)}
    b = {f"q{i}": 0.1 for i in range(400)}
    result = compare("ndcg@10", a, b)
    assert "Hoeffding" in result.basis and result.p_value is None and result.low > 0
    assert called([result]) == [("A better", None)]
    other = compare("ndcg@10", *runs(40, 0.0, 0.2, seed=1))
    assert called([result, other])[0][0] == "no difference shown"
