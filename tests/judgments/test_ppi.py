"""Prediction-powered estimates: hand-worked values, ppi_py's reference implementation, coverage
in a simulation with known truth, and eval.search --human end to end."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from data.beir import read_qrels, read_trec_run, write_trec_qrels
from judgments.draw import draw_queries
from judgments.ppi import (
    Interval,
    MetricEstimates,
    classical_mean,
    effective_queries,
    estimate_metric,
    power_tuned_lambda,
    ppi_mean,
    queries_for_width,
)
from measure.metrics.ppi_record import PpiRecord
from measure.metrics.results import SearchMetrics
from tests.commands import run_command


def test_hand_worked_ppi_and_classical_intervals():
    human, judged, unjudged = [1.0, 0.0, 1.0, 1.0], [1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]
    # λ = 1: the labeler's mean on the unjudged queries plus the mean correction on the judged.
    plain = ppi_mean(human, judged, unjudged, lam=1.0)
    assert plain.estimate == pytest.approx(0.5 + 0.25)
    rectifier_var = np.var([0.0, 0.0, 1.0, 0.0], ddof=1)  # human - labeler on the judged queries
    imputed_var = np.var(unjudged, ddof=1)
    half = stats.t.ppf(0.975, 3) * math.sqrt(imputed_var / 4 + rectifier_var / 4)
    assert (plain.low, plain.high) == pytest.approx((0.75 - half, 0.75 + half))
    classical = classical_mean(human)
    half = stats.t.ppf(0.975, 3) * np.std(human, ddof=1) / 2
    assert (classical.estimate, classical.low, classical.high) == pytest.approx(
        (0.75, 0.75 - half, 0.75 + half)
    )
    # λ = 0 is the classical interval, whatever the labeler says.
    zero = ppi_mean(human, judged, unjudged, lam=0.0)
    assert (zero.estimate, zero.low, zero.high) == pytest.approx(
        (classical.estimate, classical.low, classical.high)
    )
    # Tuned λ: Cov(Y, f) / ((1 + n/N) Var(f over all queries)), clipped to [0, 1].
    covariance = np.mean((np.array(human) - 0.75) * (np.array(judged) - 0.5))
    expected = covariance / ((1 + 4 / 4) * np.var(judged + unjudged, ddof=1))
    assert power_tuned_lambda(human, judged, unjudged) == pytest.approx(expected)


@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.4])
def test_normal_intervals_equal_ppi_py(lam):
    ppi_py = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(7)
    human = rng.random(15)
    judged = 0.7 * human + 0.3 * rng.random(15)
    unjudged = rng.random(40)
    ours = ppi_mean(human, judged, unjudged, alpha=0.1, lam=lam, interval="normal")
    low, high = ppi_py.ppi_mean_ci(human, judged, unjudged, alpha=0.1, lam=lam)
    estimate = ppi_py.ppi_mean_pointestimate(human, judged, unjudged, lam=lam)
    assert ours.estimate == pytest.approx(float(np.ravel(estimate)[0]), abs=1e-12)
    assert (ours.low, ours.high) == pytest.approx(
        (float(np.ravel(low)[0]), float(np.ravel(high)[0])), abs=1e-12
    )


def simulate(n: int, big_n: int, draws: int, noise: float, seed: int = 0) -> dict[str, float]:
    """Queries with a true metric Y ~ Beta and a biased labeler f = 0.5 + 0.5 Y + noise: how often
    each interval covers the population mean, and their mean widths."""
    rng = np.random.default_rng(seed)
    truth = 2 / (2 + 5)  # mean of Beta(2, 5)
    covered = {"classical": 0, "ppi": 0}
    widths = {"classical": 0.0, "ppi": 0.0}
    for _ in range(draws):
        y = rng.beta(2, 5, n + big_n)
        f = np.clip(0.5 + 0.5 * y + noise * rng.normal(size=n + big_n), 0, 1)
        classical = classical_mean(y[:n])
        ppi = ppi_mean(y[:n], f[:n], f[n:])
        for name, interval in (("classical", classical), ("ppi", ppi)):
            covered[name] += interval.low <= truth <= interval.high
            widths[name] += interval.width / draws
    return {f"{k}_coverage": v / draws for k, v in covered.items()} | {
        f"{k}_width": v for k, v in widths.items()
    }


def test_coverage_is_nominal_with_a_biased_labeler_and_narrower_than_human_only():
    result = simulate(n=30, big_n=300, draws=2000, noise=0.05)
    assert 0.93 <= result["ppi_coverage"] <= 0.97, result
    assert 0.93 <= result["classical_coverage"] <= 0.97, result
    assert result["ppi_width"] < 0.8 * result["classical_width"], result  # the labeler helps


def test_a_useless_labeler_does_not_widen_the_interval():
    rng = np.random.default_rng(3)
    ratios = []
    for _ in range(200):
        human = rng.random(20)
        labeler = rng.random(220)  # unrelated to the truth
        ppi = ppi_mean(human, labeler[:20], labeler[20:])
        ratios.append(ppi.width / classical_mean(human).width)
    assert np.median(ratios) < 1.05


def test_effective_queries_and_sizing_follow_the_square_root_law():
    classical = classical_mean([0.1, 0.5, 0.3, 0.9])
    half_as_wide = classical.__class__(
        0.5, 0.5 - classical.width / 4, 0.5 + classical.width / 4, 4, 10, 1.0, ""
    )
    assert effective_queries(4, classical, half_as_wide) == pytest.approx(16)
    assert queries_for_width(half_as_wide, half_as_wide.width / 2) == 16
    assert draw_queries([str(i) for i in range(50)], 5, seed=1) == draw_queries(
        [str(i) for i in range(49, -1, -1)], 5, seed=1
    )


def test_what_the_labeler_is_worth_never_exceeds_the_queries_there_are():
    """A labeler that nearly matches people on 43 queries, 20 of them judged: by the 1/sqrt(n)
    law its PPI++ interval is worth far more than 43 judged queries, which there are not. It is
    capped at the population, and the table says it is."""
    from eval.report.ppi_markdown import worth_text

    rng = np.random.default_rng(0)
    human = {f"q{i}": float(v) for i, v in enumerate(rng.random(43))}
    labeler = {q: min(1.0, max(0.0, v + rng.normal(0, 0.02))) for q, v in human.items()}
    judged = {q: human[q] for q in sorted(human)[:20]}
    estimates = estimate_metric(labeler, judged, bounds=(0.0, 1.0))
    law = effective_queries(20, estimates.classical, estimates.ppi)
    assert law > 43
    record = estimates.record()
    assert record.effective_human_queries == estimates.to_dict()["effective_human_queries"] == 43
    assert worth_text(record, "queries") == "43 queries (all: capped)"
    # A file written before the cap is capped where it is shown.
    record.effective_human_queries = law
    assert worth_text(record, "queries") == "43 queries (all: capped)"


def test_no_draw_smaller_than_an_interval_needs():
    """eval.ppi --n below the minimum judged queries is refused before any draw, and a pilot
    never sizes one below it."""
    from core.cli import parse_config
    from judgments.coverage import MIN_JUDGED_QUERIES
    from judgments.draw import DrawConfig

    with pytest.raises(ValueError, match=f"n: expected >= {MIN_JUDGED_QUERIES}, got 5"):
        parse_config([DrawConfig], ["--run", "x.trec", "--n", "5"])
    with pytest.raises(ValueError, match=f"n: expected >= {MIN_JUDGED_QUERIES}, got 5"):
        DrawConfig(run="x.trec", n=5)  # the library path too
    wide = classical_mean([0.1, 0.5, 0.3, 0.9] * 5)
    assert queries_for_width(wide, wide.width * 3) == MIN_JUDGED_QUERIES


def _pilot(path: Path, width: float, n: int) -> Path:
    """An eval.search metrics.json whose bm25 NDCG@10 interval has ``width`` on ``n`` queries."""
    interval = Interval(0.5, 0.5 - width / 2, 0.5 + width / 2, n, 33, 1.0, "t")
    entry = MetricEstimates(0.5, interval, interval, n + 33).record()
    ppi = PpiRecord(
        judged_queries=n,
        estimator="PPI++",
        confidence=0.95,
        runs={"bm25": {"ndcg@10": entry}},
        differences={},
    )
    SearchMetrics(labeler="qrels", k=10, mean={"bm25": {"ndcg@10": 0.5}}, ppi=ppi).write(path)
    return path


def test_a_target_width_the_run_cannot_reach_is_refused_with_the_width_it_can(
    tmp_path: Path, capsys
):
    from data.beir import write_trec_run
    from judgments.draw import DrawConfig, draw

    write_trec_run(tmp_path / "run.trec", {f"q{i}": {"d": 1.0} for i in range(43)})
    pilot = _pilot(tmp_path / "metrics.json", width=0.3, n=10)  # 0.1 needs 10 * 3^2 = 90
    config = DrawConfig(run=str(tmp_path / "run.trec"), pilot=str(pilot), target_width=0.1)
    with pytest.raises(ValueError, match=r"needs about 90 judged queries, and the run has 43; "
                       r"judging all of them reaches about 0\.145"):  # fmt: skip
        draw(config)
    config.target_width = 0.15
    assert len(draw(config).drawn) == 40  # 10 * (0.3 / 0.15)^2
    assert "40 judged queries for a ndcg@10 interval of width 0.15" in capsys.readouterr().out


def test_bad_input_is_one_clear_error():
    with pytest.raises(ValueError, match="at least 2 judged queries"):
        ppi_mean([1.0], [1.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="queries the run does not have"):
        estimate_metric({"q1": 0.5, "q2": 0.4}, {"q1": 0.5, "q9": 0.1})


def search(
    adi_dir: Path, tmp_path: Path, human: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    from core.cli import cli_args

    options = cli_args(
        run=tmp_path / "c" / "bm25.trec",
        compare=[tmp_path / "c" / "dense.trec"],
        corpus=adi_dir,
        labeler=f"judgments:{tmp_path / 'labels.jsonl'}",
        human=human,
        out=tmp_path / "s",
        k=5,
    )
    return run_command(["search", *options, *extra])


@pytest.mark.slow
def test_search_reports_ppi_estimates_from_a_judged_subset(adi_dir: Path, tmp_path: Path):
    from data.candidates import CandidatesConfig, generate_candidates

    generate_candidates(
        CandidatesConfig(
            collection=str(adi_dir), out=str(tmp_path / "c"), retrievers=["bm25", "dense"], k=10
        )
    )
    runs = {name: read_trec_run(tmp_path / "c" / f"{name}.trec") for name in ("bm25", "dense")}
    qrels = read_qrels(adi_dir / "qrels.tsv")
    # A generous labeler: every retrieved document of the top 5 is relevant.
    with open(tmp_path / "labels.jsonl", "w") as handle:
        for run in runs.values():
            for qid, docs in run.items():
                for doc_id in sorted(docs, key=docs.get, reverse=True)[:5]:
                    record = {"qid": qid, "query": "q", "doc_id": doc_id, "text": "t", "grade": 3}
                    handle.write(json.dumps(record | {"label": 1}) + "\n")
    # People also labelled a random sample of 40 retrieved hits.
    hits = sorted(
        {
            (q, d)
            for run in runs.values()
            for q, docs in run.items()
            for d in sorted(docs, key=docs.get, reverse=True)[:5]
        }
    )
    sample = [hits[i] for i in np.random.default_rng(0).choice(len(hits), 40, replace=False)]
    with open(tmp_path / "hits.jsonl", "w") as handle:
        for q, d in sample:
            record = {
                "qid": q,
                "query": "q",
                "doc_id": d,
                "text": "t",
                "label": int(d in qrels.get(q, {})),
            }
            handle.write(json.dumps(record) + "\n")
    judged = draw_queries(sorted(qrels), 12, seed=0)
    write_trec_qrels(
        tmp_path / "human.qrels", {q: {d: 3 * g for d, g in qrels[q].items()} for q in judged}
    )
    result = search(
        adi_dir, tmp_path, tmp_path / "human.qrels", "--human_pairs", str(tmp_path / "hits.jsonl")
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "s" / "metrics.json").read_text())["ppi"]
    assert report["judged_queries"] == 12
    bm25 = report["runs"]["bm25"]["precision@5"]
    assert bm25["labeler_mean"] == pytest.approx(1.0)  # the labeler's plain mean is all bias
    assert bm25["ppi"]["estimate"] < 0.6  # the judged queries correct it
    assert bm25["ppi"]["low"] <= bm25["human_only"]["estimate"] <= bm25["ppi"]["high"]
    assert "dense - bm25" in report["differences"]
    share = report["pairs"]["bm25"]["relevant share"]
    assert report["judged_pairs"] == 40 and share["labeler_mean"] == pytest.approx(1.0)
    assert share["ppi"]["high"] < 0.8  # the sampled hits show most are not relevant
    assert "PPI++" in result.stdout and "human judgments for 12 queries" in result.stdout

    # Judgments for a query the runs do not have: refused before any labelling.
    write_trec_qrels(tmp_path / "bad.qrels", {"nosuch": {"d": 3}, judged[0]: {"d": 3}})
    bad = search(adi_dir, tmp_path, tmp_path / "bad.qrels")
    assert bad.returncode == 2
    assert "bad.qrels judges 1 queries that bm25 does not have (first: nosuch)" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1

    # A labeler that left a hit unlabelled: one line naming the labels file and the pair.
    labels = (tmp_path / "labels.jsonl").read_text().splitlines()
    missing = json.loads(labels[0])
    kept = [
        line
        for line in labels
        if (json.loads(line)["qid"], json.loads(line)["doc_id"])
        != (missing["qid"], missing["doc_id"])
    ]
    (tmp_path / "labels.jsonl").write_text("\n".join(kept) + "\n")
    unlabelled = search(adi_dir, tmp_path, tmp_path / "human.qrels")
    assert unlabelled.returncode == 2
    assert f"no judgment for query {missing['qid']!r}, document {missing['doc_id']!r}" in (
        unlabelled.stderr
    )


def test_a_corpus_given_as_the_run_is_refused_not_drawn_as_queries(adi_dir: Path, tmp_path: Path):
    from judgments.draw import DrawConfig, draw

    with pytest.raises(ValueError, match=r"run: .*corpus.jsonl is a corpus \(documents, not"):
        draw(DrawConfig(run=str(adi_dir / "corpus.jsonl"), n=10))
    renamed = tmp_path / "docs.jsonl"  # any name: a corpus line has a title
    renamed.write_text((adi_dir / "corpus.jsonl").read_text())
    with pytest.raises(ValueError, match="is a corpus"):
        draw(DrawConfig(run=str(renamed), n=10))
    assert len(draw(DrawConfig(run=str(adi_dir / "queries.jsonl"), n=10)).drawn) == 10


# Intervals at the bounds: never zero width, the estimate in its range and inside its interval.


def _hit_at_10(judged_hits: int, judged: int = 10, queries: int = 43) -> tuple[dict, dict]:
    """A labeler that says every query has a hit but three; ``judged_hits`` of the ``judged``
    queries have one under human judgment (where the labeler also says so)."""
    labeler = {f"q{i}": 1.0 if i < queries - 3 else 0.0 for i in range(queries)}
    human = {f"q{i}": 1.0 if i < judged_hits else 0.0 for i in range(judged)}
    labeler.update({q: v for q, v in human.items()})
    return labeler, human


def test_ten_judged_queries_all_with_a_hit_give_a_wide_interval_that_holds_0_95():
    labeler, human = _hit_at_10(10)
    estimates = estimate_metric(labeler, human, bounds=(0.0, 1.0))
    for interval in (estimates.classical, estimates.ppi):
        assert interval.width > 0.2, interval
        assert interval.low <= 0.95 <= interval.high, interval
    assert "Wilson" in estimates.classical.method
    assert math.isfinite(estimates.to_dict()["effective_human_queries"])


def test_a_labeler_that_matches_every_judged_query_still_leaves_width():
    # λ is 1 here: the labeler agrees on all ten judged queries (one of them a miss) and is
    # constant on the rest, so the rectifier Y - f is 0 on every judged query.
    labeler = {f"q{i}": 1.0 for i in range(43)}
    human = {f"q{i}": 1.0 for i in range(10)}
    labeler["q0"] = human["q0"] = 0.0
    ppi = estimate_metric(labeler, human, bounds=(0.0, 1.0)).ppi
    assert ppi.lam == 1.0
    assert ppi.width > 0.1, ppi
    assert ppi.low <= ppi.estimate <= ppi.high


def test_an_estimate_below_the_range_is_clipped_and_stays_inside_its_interval():
    # The labeler scores the judged queries far above the unjudged ones and above the people:
    # PPI's estimate would be below 0 (MAP cannot be).
    rng = np.random.default_rng(1)
    labeler = {f"q{i}": 0.05 * rng.random() for i in range(43)}
    human = {}
    for i in range(10):
        labeler[f"q{i}"], human[f"q{i}"] = 0.3 + 0.3 * (i % 2), 0.1 * (i % 2)
    raw = ppi_mean(
        [human[q] for q in sorted(human)],
        [labeler[q] for q in sorted(human)],
        [v for q, v in labeler.items() if q not in human],
    )
    assert raw.estimate < 0  # unbounded, the estimator leaves the range
    for interval in estimate_metric(labeler, human, bounds=(0.0, 1.0)).to_dict().values():
        if isinstance(interval, dict):
            assert 0.0 <= interval["low"] <= interval["estimate"] <= interval["high"] <= 1.0
            assert interval["width"] > 0


def test_judged_values_with_no_spread_get_hoeffdings_interval_or_are_not_estimable():
    classical = classical_mean([0.5] * 8, bounds=(0.0, 1.0))
    assert "Hoeffding" in classical.method
    assert classical.width == pytest.approx(2 * math.sqrt(math.log(2 / 0.05) / 16))
    with pytest.raises(ValueError, match="not estimable at n = 8"):
        classical_mean([0.5] * 8)
    # A paired difference of hit@10 that is 0 on every judged query: pseudo-observations at -1
    # and 1 give it width, centred on the unbiased 0.
    difference = classical_mean([0.0] * 10, bounds=(-1.0, 1.0))
    assert difference.estimate == 0.0 and difference.low < -0.1 and difference.high > 0.1


@pytest.mark.parametrize("seed", range(200))
def test_no_interval_is_zero_width_or_misses_its_estimate(seed: int):
    """Random small samples of bounded metrics, binary and not, near the bounds: every reported
    interval has width, lies in the range and holds its estimate."""
    rng = np.random.default_rng(seed)
    bounds = ((0.0, 1.0), (-1.0, 1.0))[seed % 2]
    n, big_n = int(rng.integers(2, 12)), int(rng.integers(0, 40))
    kind = seed % 4
    if kind < 2:  # binary (or a difference of binaries), mostly at the top
        values = rng.choice([bounds[0], 0.0, 1.0] if bounds[0] < 0 else [0.0, 1.0], n + big_n)
        values = np.where(rng.random(n + big_n) < 0.8, 1.0, values)
    else:  # continuous near a bound
        values = np.clip(rng.choice([0.0, 1.0, rng.random()], n + big_n), *bounds)
    labeler = np.clip(values + rng.normal(0, 0.3, n + big_n) * (rng.random() < 0.5), *bounds)
    human = {f"q{i}": float(values[i]) for i in range(n)}
    estimates = estimate_metric(
        {f"q{i}": float(v) for i, v in enumerate(labeler)}, human, bounds=bounds
    )
    for interval in (estimates.classical, estimates.ppi):
        assert interval.width > 0, interval
        assert bounds[0] <= interval.low <= interval.estimate <= interval.high <= bounds[1]
    assert json.loads(json.dumps(estimates.to_dict(), allow_nan=False))


def test_a_pilot_without_width_cannot_size_a_draw():
    pilot = classical_mean([0.1, 0.5, 0.3, 0.9])
    flat = pilot.__class__(0.5, 0.5, 0.5, 4, 10, 1.0, "")
    with pytest.raises(ValueError, match="no width"):
        queries_for_width(flat, 0.1)


def test_the_draw_says_how_many_hits_it_asks_people_to_judge(tmp_path: Path, capsys):
    from data.beir import write_trec_run
    from judgments.draw import main as draw_main

    run = {f"q{i}": {f"d{j}": float(-j) for j in range(12)} for i in range(30)}
    write_trec_run(tmp_path / "run.trec", run)
    draw_main(["--run", str(tmp_path / "run.trec"), "--n", "10", "--k", "10"])
    err = capsys.readouterr().err
    assert "workload: the 10 drawn queries have 100 hits in this run's top 10" in err


def test_a_spread_left_by_rounding_is_no_spread():
    """A tuned λ that fits the judged values exactly leaves ~1e-17, not a variance (it gave
    zero-width intervals in 4 of 3,000 draws of the coverage study)."""
    from judgments.ppi import no_spread

    assert no_spread(np.array([1 / 3, 1 / 3 + 1e-17, 1 / 3]))
    assert not no_spread(np.array([0.30, 0.31]))
    interval = classical_mean([1 / 3, 1 / 3 + 1e-17, 1 / 3, 1 / 3], bounds=(0.0, 1.0))
    assert "Hoeffding" in interval.method and interval.width > 0.5
