"""Sampling designs for the human sample and their estimator: exact unbiasedness by enumerating
every sample, allocation, coverage in a simulation with known truth, and the draw file."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from judgments.design import (
    Design,
    Stratum,
    allocate,
    design_estimate,
    design_from_dict,
    design_mean,
    draw_design,
    make_strata,
    read_design,
    unit_signals,
    write_design,
)
from judgments.draw import draw_queries
from measure.metrics.results import PerQueryResults


def every_sample(strata: list[list[str]], sizes: list[int]):
    """Every stratified sample (one simple random sample per stratum), each as a Design."""
    choices = [itertools.combinations(units, n) for units, n in zip(strata, sizes, strict=True)]
    for drawn in itertools.product(*choices):
        yield Design(
            "proportional",
            "queries",
            tuple(Stratum(tuple(u), tuple(d)) for u, d in zip(strata, drawn, strict=True)),
        )


@pytest.mark.parametrize("lam", [0.0, 0.6, 1.0])
@pytest.mark.parametrize("domain_size", [9, 6])
def test_estimate_and_variance_are_unbiased_over_every_sample(lam: float, domain_size: int):
    """For a fixed λ, the mean of θ̂ over all equally likely samples is the domain's human mean,
    and the mean of V̂ is θ̂'s variance over them (a domain smaller than the population too, as
    one run's top-k hits within a draw over the pooled hits)."""
    rng = np.random.default_rng(0)
    units = [f"q{i}" for i in range(9)]
    human = dict(zip(units, rng.random(9), strict=True))
    labeler = {u: 0.5 * human[u] + 0.5 * rng.random() for u in units[:domain_size]}
    strata = [units[:4], units[4:]]
    estimates, variances = [], []
    for design in every_sample(strata, [2, 3]):
        interval = design_mean(design, labeler, human, 0.05, lam, "normal", finite_population=True)
        estimates.append(interval.estimate)
        variances.append((interval.width / 2 / 1.959963984540054) ** 2)
        # Without the finite-population factor: wider, never narrower (the default).
        assert design_mean(design, labeler, human, 0.05, lam, "normal").width >= interval.width
    assert len(estimates) == 6 * 10
    truth = np.mean([human[u] for u in labeler])
    assert np.mean(estimates) == pytest.approx(truth, abs=1e-12)
    assert np.mean(variances) == pytest.approx(np.var(estimates), rel=1e-9)


def test_the_uniform_design_draws_what_draw_queries_draws():
    qids = [str(i) for i in range(43)]
    design = draw_design(qids, 10, "uniform", seed=3)
    assert sorted(design.drawn) == draw_queries(qids, 10, seed=3)
    assert len(design.strata) == 1 and design.strata[0].inclusion == pytest.approx(10 / 43)


def test_allocation_follows_the_weights_within_bounds():
    assert allocate([20, 20], [20, 20], 10) == [5, 5]  # proportional
    assert allocate([20, 20], [20 * 0.1, 20 * 0.3], 12) == [3, 9]  # Neyman: σ 0.1 and 0.3
    assert allocate([20, 3], [0.0, 1.0], 10) == [7, 3]  # at least 3 each, at most the stratum
    # A stratum with 2 units would rest its variance on one degree of freedom.
    assert allocate([20, 20], [0.01, 1.0], 10) == [3, 7]
    with pytest.raises(ValueError, match="cannot give each of 3 strata 3"):
        allocate([10, 10, 10], [1, 1, 1], 8)
    strata = make_strata({f"q{i}": float(i % 7) for i in range(20)}, 3)
    assert [len(s) for s in strata] == [7, 6, 7]
    assert max(i % 7 for i in map(lambda u: int(u[1:]), strata[0])) <= min(
        i % 7 for i in map(lambda u: int(u[1:]), strata[2])
    )


def population(size: int, seed: int = 0) -> tuple[dict, dict, dict]:
    """Queries whose human value scatters around the labeler's by an amount the labeler knows:
    sure queries (p near 0 or 1) have human values near the labeler's, unsure ones do not."""
    rng = np.random.default_rng(seed)
    qids = [f"q{i}" for i in range(size)]
    p = rng.beta(0.4, 0.4, size)
    uncertainty = dict(zip(qids, p * (1 - p), strict=True))
    labeler = dict(zip(qids, p, strict=True))
    noise = rng.normal(size=size) * np.sqrt(p * (1 - p)) * 1.5
    human = {q: float(np.clip(p[i] - 0.2 + noise[i], 0, 1)) for i, q in enumerate(qids)}
    return labeler, human, uncertainty


def coverage(kind: str, draws: int = 1500, n: int = 30) -> tuple[float, float]:
    labeler, human, uncertainty = population(300)
    truth = np.mean(list(human.values()))
    covered, widths = 0, []
    for seed in range(draws):
        design = draw_design(
            labeler, n, kind, seed=seed, strata=3, score=labeler, uncertainty=uncertainty
        )
        interval = design_mean(design, labeler, human)
        covered += interval.low <= truth <= interval.high
        widths.append(interval.width)
    return covered / draws, float(np.mean(widths))


def test_neyman_covers_and_is_narrower_where_the_labeler_knows_its_uncertainty():
    uniform, uniform_width = coverage("uniform")
    neyman, neyman_width = coverage("neyman")
    assert 0.93 <= uniform <= 0.97 and 0.93 <= neyman <= 0.97, (uniform, neyman)
    assert neyman_width < 0.95 * uniform_width


def test_design_estimate_ignores_nothing_it_needs_and_refuses_what_is_missing():
    labeler, human, uncertainty = population(40)
    design = draw_design(labeler, 8, "neyman", strata=2, uncertainty=uncertainty)
    estimates = design_estimate(design, labeler, human, bounds=(0.0, 1.0)).to_dict()
    assert estimates["ppi"]["n"] == 8 and estimates["queries"] == 40
    assert "stratified PPI++" in estimates["ppi"]["method"]
    missing = {q: human[q] for q in design.drawn[1:]}
    with pytest.raises(ValueError, match="1 drawn queries have no human judgment"):
        design_mean(design, labeler, missing)
    with pytest.raises(ValueError, match="not in the draw's population"):
        design_mean(design, labeler | {"elsewhere": 0.5}, human)


def test_the_draw_file_round_trips_and_a_bad_one_is_one_error(tmp_path: Path):
    hits = {("q1", "d1"): 0.9, ("q1", "d2"): 0.5, ("q2", "d1"): 0.1, ("q2", "d3"): 0.6}
    uncertainty = {h: p * (1 - p) for h, p in hits.items()}
    design = draw_design(hits, 4, "proportional", unit="hits", uncertainty=uncertainty, seed=1)
    write_design(tmp_path / "draw.json", design)
    again = read_design(tmp_path / "draw.json")
    assert again == design and ("q1", "d2") in again.population
    broken = design.to_dict()
    broken["strata"][0]["drawn"] = ["q9"]
    with pytest.raises(ValueError, match=r"draw.json: strata\[0\].drawn: not a sample"):
        design_from_dict(broken, "draw.json")
    (tmp_path / "bad.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match=r"bad\.json: not a draw file"):
        read_design(tmp_path / "bad.json")


def test_signals_come_from_the_labelers_per_query_output():
    per_query = {
        "a": {
            "q1": {"hits": [{"id": "d1", "score": 0.5, "relevant": True}], "metrics": {"m": 1.0}},
            "q2": {"hits": [{"id": "d2", "score": None, "relevant": False}], "metrics": {"m": 0.0}},
        },
        "b": {
            "q1": {"hits": [{"id": "d3", "score": 0.9, "relevant": True}], "metrics": {"m": 0.5}},
            "q2": {"hits": [{"id": "d2", "score": None, "relevant": False}], "metrics": {"m": 0.2}},
        },
    }
    runs = PerQueryResults.model_validate({"runs": per_query}).runs
    score, uncertainty = unit_signals(runs, "queries", "m")
    assert score == pytest.approx({"q1": 0.75, "q2": 0.1})
    assert uncertainty == pytest.approx({"q1": (0.25 + 0.09) / 2, "q2": 0.0})
    hits, spread = unit_signals(runs, "hits", "m")
    assert set(hits) == {("q1", "d1"), ("q1", "d3"), ("q2", "d2")}
    assert spread[("q1", "d1")] == pytest.approx(0.25)


def test_the_draw_command_records_its_design_and_needs_labels_to_stratify(tmp_path: Path, capsys):
    from judgments.draw import main as draw
    from tests.judgments.test_annotate import make_inputs

    inputs = make_inputs(tmp_path, queries=12)
    with pytest.raises(ValueError, match="neyman needs the labeler's labels"):
        draw(["--run", str(inputs["a"]), "--design", "neyman", "--n", "10"])
    labels = ["--labels", str(tmp_path / "labels"), "--n", "10", "--seed", "3"]
    draw([*labels, "--design", "neyman", "--out", str(tmp_path / "draw.json")])
    printed = capsys.readouterr()
    design = read_design(tmp_path / "draw.json")
    assert printed.out.split() == [str(u) for u in design.drawn]
    assert design.kind == "neyman" and len(design.strata) == 2 and len(design.population) == 12
    assert "neyman allocation over 2 strata" in printed.err
    # The uniform draw of the same queries is the draw eval.ppi always made.
    draw([*labels, "--out", str(tmp_path / "uniform.json")])
    uniform = read_design(tmp_path / "uniform.json")
    assert sorted(uniform.drawn) == draw_queries([f"q{i}" for i in range(1, 13)], 10, seed=3)


@pytest.mark.parametrize("seed", range(60))
def test_design_intervals_have_width_and_hold_their_estimate(seed: int):
    """Stratified and uniform draws of bounded values near the top, binary or not, with a
    labeler that matches or not: width > 0, inside the range, the estimate inside."""
    rng = np.random.default_rng(seed)
    units = [f"q{i}" for i in range(40)]
    binary = seed % 2 == 0
    truth = {u: 1.0 if binary else 0.7 for u in units}
    if seed % 3:
        truth |= {u: float(rng.random() < 0.5) if binary else rng.random() for u in units[:4]}
    labeler = (
        truth
        if seed % 5 == 0
        else {u: float(np.clip(v - 0.2 * rng.random(), 0, 1)) for u, v in truth.items()}
    )
    kind = ("uniform", "proportional", "neyman")[seed % 3]
    uncertainty = {u: 0.1 + 0.01 * i for i, u in enumerate(units)}
    design = draw_design(units, 9, kind, seed=seed, strata=3, uncertainty=uncertainty)
    estimates = design_estimate(design, labeler, truth, bounds=(0.0, 1.0))
    for interval in (estimates.classical, estimates.ppi):
        assert interval.width > 0, interval
        assert 0.0 <= interval.low <= interval.estimate <= interval.high <= 1.0, interval
