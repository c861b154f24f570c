"""The coverage study (benchmarks.ppi_coverage) on a small synthetic population whose all-query
human value is known: every metric, the reported (bounded) intervals, the finite-population
correction, a sampled population, zero-width shares, strict JSON and the per-metric summary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.ppi_coverage import (
    METRICS,
    CoverageConfig,
    lowest_ppi_coverage,
    reported_intervals,
    uniform_draws,
)
from benchmarks.ppi_coverage import main as coverage_study
from benchmarks.ppi_coverage_summary import main as summarize
from data.beir import read_trec_run, write_trec_qrels, write_trec_run
from judgments.samples import human_metrics
from measure.metrics.results import PerQueryResults


def _strict_json(path: Path):
    def refuse(name: str):
        raise ValueError(f"{path}: {name} is not strict JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.fixture(scope="module")
def population(tmp_path_factory) -> Path:
    """120 queries of 20 judged documents, graded 0-3 with a per-query share of relevant ones; two
    runs of 10 hits (one finds the relevant ones more often); a labeler whose per-query values are the human ones plus a
    bias and noise, cut to [0, 1], for all five metrics."""
    folder = tmp_path_factory.mktemp("population")
    rng = np.random.default_rng(1)
    qids = [f"q{i:03d}" for i in range(120)]
    qrels, runs = {}, {}
    for q in qids:
        share = rng.beta(1.2, 1.5)
        qrels[q] = {f"{q}-d{j}": int(rng.choice(4, p=_grades(share))) for j in range(20)}
    # bm25 retrieves 10 of the 20 at random, dense the 10 with the highest noisy grade.
    runs["bm25"] = {
        q: {d: float(rng.normal()) for d in rng.permutation(sorted(qrels[q]))[:10]} for q in qids
    }
    runs["dense"] = {}
    for q in qids:
        noisy = {d: g + rng.normal(0, 1.5) for d, g in qrels[q].items()}
        runs["dense"][q] = dict(sorted(noisy.items(), key=lambda kv: -kv[1])[:10])
    for name, run in runs.items():
        write_trec_run(folder / f"{name}.trec", run)
    write_trec_qrels(folder / "qrels.txt", qrels)
    human = human_metrics(str(folder / "qrels.txt"), runs, 10)
    per_query = {
        name: {
            q: {
                "metrics": {
                    m: float(np.clip(human[name][m][q] + 0.2 + rng.normal(0, 0.1), 0, 1))
                    for m in METRICS
                },
                "hits": [{"id": f"{q}-d0", "score": 0.7, "relevant": True}],
            }
            for q in qids
        }
        for name in runs
    }
    (folder / "search").mkdir()
    (folder / "search" / "per_query.json").write_text(
        json.dumps({"format_version": 1, "runs": per_query})
    )
    return folder


def _grades(share: float) -> list[float]:
    return [1 - share, share * 0.3, share * 0.4, share * 0.3]


def _args(folder: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--search",
        f"grader={folder / 'search'}",
        "--runs",
        str(folder / "bm25.trec"),
        str(folder / "dense.trec"),
        "--qrels",
        str(folder / "qrels.txt"),
        "--out",
        str(out),
        *extra,
    ]


@pytest.mark.slow
def test_every_metric_system_and_n_is_studied_with_its_reported_interval(population, tmp_path):
    out = tmp_path / "coverage.json"
    coverage_study(_args(population, out, "--n", "5", "10", "--draws", "60"))
    results = _strict_json(out)
    rows = results["intervals"]["grader"]
    assert results["population"]["queries"] == 120
    assert {(r["system"], r["metric"], r["n"]) for r in rows} == {
        (s, m, n) for s in ("bm25", "dense", "dense - bm25") for m in METRICS for n in (5, 10)
    }
    for r in rows:
        for key in ("coverage_classical", "coverage_ppi", "zero_width_classical", "zero_width_ppi"):
            assert 0.0 <= r[key] <= 1.0, (key, r)
        assert r["ppi_miss_below"] + r["ppi_miss_above"] == pytest.approx(1 - r["coverage_ppi"])
    # The figures are those of the intervals eval.search reports, on the study's own draws.
    config = CoverageConfig(draws=60, n=[10])
    per_query = PerQueryResults.read(population / "search" / "per_query.json").runs
    labeler = {q: v.metrics["hit@10"] for q, v in per_query["dense"].items()}
    runs = {"dense": read_trec_run(population / "dense.trec")}
    human = human_metrics(str(population / "qrels.txt"), runs, 10)["dense"]["hit@10"]
    truth = np.mean(list(human.values()))
    reported = [
        reported_intervals(d, labeler, human, config, (0.0, 1.0))["ppi"]
        for d in uniform_draws(sorted(labeler), 10, 60, 0)
    ]
    row = next(r for r in rows if (r["system"], r["metric"], r["n"]) == ("dense", "hit@10", 10))
    assert row["truth"] == pytest.approx(truth)
    assert row["coverage_ppi"] == pytest.approx(
        np.mean([i["low"] <= truth <= i["high"] for i in reported])
    )
    assert row["zero_width_ppi"] == pytest.approx(
        np.mean([i["high"] - i["low"] <= 1e-12 for i in reported])
    )
    assert row["width_ppi"] == pytest.approx(np.mean([i["high"] - i["low"] for i in reported]))


def test_coverage_is_near_the_nominal_level_where_the_t_interval_holds(population, tmp_path):
    """NDCG@10 and P@10 spread widely over the queries: a broken study (a wrong all-query value,
    draws that are not random, intervals not the reported ones) would not land near 0.95."""
    out = tmp_path / "coverage.json"
    coverage_study(
        _args(
            population, out, "--n", "20", "--draws", "300", "--metrics", "ndcg@10", "precision@10"
        )
    )
    rows = _strict_json(out)["intervals"]["grader"]
    for r in rows:
        assert 0.87 <= r["coverage_classical"] <= 0.995, r
        # PPI++ may exceed it: its variance counts the labeler's mean over the unjudged queries
        # as sampled, where the all-query value fixes it.
        assert r["coverage_ppi"] >= 0.87, r
        # The labeler tracks the human values: PPI++ is narrower and removes its bias.
        assert r["width_ppi"] < r["width_classical"], r
        assert r["labeler_bias"] > 0.05 or r["system"] == "dense - bm25", r
    summary = lowest_ppi_coverage([_strict_json(out)])
    assert summary.keys() == {"ndcg@10", "precision@10"}
    assert summary["ndcg@10"]["20"] == min(
        r["coverage_ppi"] for r in rows if r["metric"] == "ndcg@10"
    )
    written = tmp_path / "summary.json"
    written.write_text(
        json.dumps(
            {
                "format_version": 2,
                "confidence": 0.95,
                "note": "kept",
                "populations": [{"name": "held-out", "coverage": {"ndcg@10": {"20": 0.5}}}],
            }
        )
    )
    argv = ["--inputs", str(out), "--names", "synthetic", "--source", "here", "--out"]
    summarize([*argv, str(written)])
    # Each input is a population of its own; one already in the table under another name is
    # kept, so the lowest over every population studied is what a user is shown.
    assert _strict_json(written) == {
        "format_version": 2,
        "confidence": 0.95,
        "note": "kept",
        "populations": [
            {"name": "held-out", "coverage": {"ndcg@10": {"20": 0.5}}},
            {
                "name": "synthetic",
                "labeler": "grader",
                "queries": 120,
                "k": 10,
                "estimator": "judgments.ppi.estimate_metric, as eval.search reports it",
                "source": "here",
                "command": f"python -m benchmarks.ppi_coverage_summary {' '.join(argv)} {written}",
                "coverage": summary,
            },
        ],
    }
    summarize([*argv, str(written)])  # the same population again replaces it
    assert [p["name"] for p in _strict_json(written)["populations"]] == ["held-out", "synthetic"]


def test_finite_population_correction_and_a_sampled_population(population, tmp_path):
    """40 of the 120 queries, 30 of them judged: the corrected intervals are about half as wide
    (sqrt(1 - 30/40)) and still cover; n larger than the population is refused."""
    plain, corrected = tmp_path / "plain.json", tmp_path / "fpc.json"
    common = ["--n", "30", "--draws", "150", "--metrics", "ndcg@10", "--max_queries", "40"]
    coverage_study(_args(population, plain, *common))
    coverage_study(_args(population, corrected, *common, "--finite_population", "true"))
    a, b = _strict_json(plain), _strict_json(corrected)
    assert a["population"]["queries"] == b["population"]["queries"] == 40
    assert "finite-population" in b["estimator"]
    for r, s in zip(a["intervals"]["grader"], b["intervals"]["grader"], strict=True):
        assert r["truth"] == s["truth"]
        assert 0.4 < s["width_classical"] / r["width_classical"] < 0.65, (r, s)
        assert s["coverage_classical"] >= 0.85 and s["coverage_ppi"] >= 0.85, s
    with pytest.raises(ValueError, match="the population has 40"):
        coverage_study(_args(population, tmp_path / "x.json", "--n", "41", "--max_queries", "40"))


@pytest.mark.slow
def test_the_coverage_study_reads_search_outputs_and_reports_both_intervals(tmp_path: Path, capsys):
    """A labeler that equals the human values plus a constant (and a little noise): PPI++ removes
    the bias and its interval is far narrower than the human-only one, covering the all-query
    value."""

    rng = np.random.default_rng(0)
    qids = [f"q{i}" for i in range(30)]
    qrels, runs, per_query = {}, {}, {}
    for q in qids:
        relevant = int(rng.integers(0, 6))
        qrels[q] = {f"{q}-d{j}": 3 if j < relevant else 0 for j in range(10)}
    for name in ("a", "b"):
        runs[name] = {
            q: {f"{q}-d{j}": float(-j if name == "a" else j) for j in range(10)} for q in qids
        }
        write_trec_run(tmp_path / f"{name}.trec", runs[name])
    write_trec_qrels(tmp_path / "qrels.txt", qrels)
    human = human_metrics(str(tmp_path / "qrels.txt"), runs, 10)
    for name in runs:
        per_query[name] = {
            q: {
                # Off by a constant, with a little noise: a rectifier with no spread at all is
                # not a variance (the interval falls back to human-only there).
                "metrics": {
                    "precision@10": min(
                        1.0, human[name]["precision@10"][q] + 0.3 + 0.01 * ((i * 7) % 5 - 2)
                    )
                },
                # The labeler's P(relevant) of each hit: sure of some queries, unsure of others.
                "hits": [{"id": f"{q}-d0", "score": 0.5 if i % 2 else 0.95, "relevant": True}],
            }
            for i, q in enumerate(qids)
        }
    (tmp_path / "search").mkdir()
    (tmp_path / "search" / "per_query.json").write_text(
        json.dumps({"format_version": 1, "runs": per_query})
    )
    coverage_study(
        [
            "--search",
            f"grader={tmp_path / 'search'}",
            "--runs",
            str(tmp_path / "a.trec"),
            str(tmp_path / "b.trec"),
            "--qrels",
            str(tmp_path / "qrels.txt"),
            "--metrics",
            "precision@10",
            "--n",
            "8",
            "--draws",
            "200",
            "--designs",
            "uniform",
            "neyman",
            "--out",
            str(tmp_path / "coverage.json"),
        ]
    )
    results = json.loads((tmp_path / "coverage.json").read_text())
    rows = results["intervals"]["grader"]
    assert {r["system"] for r in rows} == {"a", "b", "b - a"}
    a = next(r for r in rows if r["system"] == "a")
    assert a["labeler_bias"] > 0.15
    assert a["coverage_ppi"] >= 0.9 and a["width_ppi"] < 0.7 * a["width_classical"]
    designs = {(r["design"], r["system"]): r for r in results["designs"]["grader"]}
    assert {d for d, _ in designs} == {"uniform PPI++", "uniform, design-based", "neyman"}
    assert all(r["coverage"] >= 0.85 for r in designs.values())
    # A labeler off by a constant: every design's PPI++ interval is far narrower than human-only.
    assert designs[("neyman", "a")]["width"] < 0.7 * a["width_classical"]
    out = capsys.readouterr().out
    assert "coverage, PPI++" in out and "| neyman | precision@10 | 8 |" in out
