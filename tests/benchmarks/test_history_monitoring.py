"""benchmarks.history_monitoring: the scenarios have the means they claim, and the monitors'
alarms are read off the bounds as the gate reads them."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from benchmarks.history_monitoring import (
    DROP,
    METHODS,
    SCENARIOS,
    delay,
    first_alarm,
    scenario_draws,
    upper_bounds,
)


@pytest.fixture
def systems() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    bm25 = rng.uniform(0, 0.8, 43)
    dense = np.clip(bm25 + rng.normal(0.2, 0.25, 43), 0, 1)
    return dense - bm25, dense


def test_null_scenarios_have_mean_zero_and_drops_lose_the_drop(systems):
    d, dense = systems
    rng = np.random.default_rng(1)
    means = {s: float(scenario_draws(s, d, dense, (200_000,), rng).mean()) for s in SCENARIOS}
    assert means["null, recentred"] == pytest.approx(0, abs=2e-3)
    assert means["null, sign-flip"] == pytest.approx(0, abs=2e-3)
    assert means["drop, proportional"] == pytest.approx(-DROP, abs=2e-3)
    assert means["drop, breaks"] == pytest.approx(-DROP, abs=2e-3)


def test_alarms_and_delays_are_read_off_the_upper_bounds():
    upper = np.array([[0.1, -0.1, 0.2], [0.1, 0.1, 0.1], [-0.2, 0.3, 0.1]])
    first = first_alarm(upper)
    assert first.tolist() == [2, 0, 1]
    median, p90 = delay(first, 3, np.random.default_rng(2))
    assert median.startswith("2") and p90 == "> 3"


def test_every_method_bounds_every_check(systems):
    d, dense = systems
    x = scenario_draws("null, recentred", d, dense, (5, 4, 10), np.random.default_rng(3))
    for method in METHODS:
        upper = upper_bounds(method, x, 0.1, 40, (-1.5, 1.5))
        assert upper.shape == (5, 4) and np.all(np.isfinite(upper))
    # The cumulative t at the last check is the t interval of all 40 values.
    flat = x.reshape(5, 40)
    half = upper_bounds("naive t, cumulative", x, 0.1, 40, (-1.5, 1.5))[:, -1] - flat.mean(axis=1)
    expected = stats.t.ppf(0.95, 39) * flat.std(axis=1, ddof=1) / np.sqrt(40)
    assert half == pytest.approx(expected)
