"""Repeated checks of one system against a baseline: false alarms and detection delay of a
fixed-level test repeated at every check against the confidence sequences of
:mod:`eval.history.stats`, by simulation from real per-query NDCG@10 values.

    python -m benchmarks.history_monitoring

Data: BM25 and the dense MiniLM retriever (``data.candidates``, judged queries only, top 10;
made once under ``--out`` and reused) on TREC DL 2019 passage (43 queries, NIST graded qrels) and
SciFact (300 test claims, binary qrels read as grade 3); per-query NDCG@10 with ranx
(:func:`measure.metrics.retrieval.ranx_metrics`). d_q = dense_q − BM25_q is the real per-query
paired difference between two real systems, m its mean.

Each check draws ``--per_check`` queries with replacement from the collection's queries and sees
their paired differences (monitored − baseline). Scenarios:

* null, recentred: the differences d_q − m (mean 0; the real distribution's shape and skew);
* null, sign-flip: ±d_q with a fair random sign per draw (the two systems exchangeable on each
  query: mean 0 exactly, the real magnitudes, symmetric);
* drop, proportional: d_q − m − s·dense_q with s = 0.03 / mean(dense): the monitored system
  loses the same share of its NDCG@10 on every query (mean drop 0.03, values stay in [0, 1]);
* drop, breaks: d_q − m − dense_q with probability p = 0.03 / mean(dense), else d_q − m: a few
  queries break (NDCG@10 → 0), the rest unchanged (mean drop 0.03).

An alarm is the regression gate (:func:`eval.history.stats.gate`, margin 0) failing: the upper
bound of the monitored − baseline interval below 0, at any of ``--checks`` checks. Every interval
is two-sided at 1 − alpha (``--alpha`` 0.10: a one-sided 5% test, the issue's target). Methods:
the paired t interval of each check's own queries (naive, per check); the t interval of every
query so far, re-tested at each check (naive, cumulative); the asymptotic confidence sequence
(ρ tuned for ``--planned_checks`` checks); the empirical-Bernstein confidence sequence, within
(−1 − |m|, 1 + |m|) (the recentred values' range). Monte Carlo standard errors: binomial for the
rates, a bootstrap over streams for the median checks to detection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

from core.cli import bounded, parse_config, run_main
from core.io import markdown_table

DROP = 0.03
CHUNK = 250  # streams simulated at once
METHODS = ("naive t, per check", "naive t, cumulative", "asymptotic CS", "Bernstein CS")
SCENARIOS = ("null, recentred", "null, sign-flip", "drop, proportional", "drop, breaks")


@dataclass
class MonitoringConfig:
    collections: list[str] = field(
        default_factory=lambda: [
            "trec-dl-2019=data/collections/trec-dl-2019-passage",
            "scifact=../shared/data/scifact",
        ],
        metadata={"help": "name=BEIR folder with qrels.tsv, one per collection."},
    )
    out: str = field(
        default="runs/history-monitoring",
        metadata={"help": "Where each collection's BM25 and dense runs are made once and kept."},
    )
    per_check: list[int] = field(
        default_factory=lambda: [20, 40], metadata={"help": "Queries drawn per check."}
    )
    checks: int = bounded(100, 1, help="Checks per monitoring stream.")
    streams: int = bounded(2000, 10, help="Simulated monitoring streams per scenario.")
    alpha: float = field(default=0.10, metadata={"help": "Two-sided level of every interval."})
    planned_checks: int = bounded(50, 1, help="Checks the asymptotic CS's ρ is tuned for.")
    seed: int = field(default=0)


def per_query_ndcg(name: str, folder: str, out: Path) -> dict[str, np.ndarray]:
    """{"bm25": values, "dense": values} on the collection's judged queries, same order."""
    from data.beir import graded_qrels, read_qrels, read_trec_run
    from data.candidates import CandidatesConfig, generate_candidates
    from measure.metrics.retrieval import ranx_metrics

    runs = out / name
    if not all((runs / f"{r}.trec").exists() for r in ("bm25", "dense")):
        generate_candidates(
            CandidatesConfig(collection=folder, out=str(runs), judged_queries_only=True, k=10)
        )
    path = Path(folder) / "qrels.tsv"
    graded = graded_qrels(read_qrels(path), path)
    binary = {q: {d: int(g >= 2) for d, g in docs.items()} for q, docs in graded.items()}
    qids = sorted(q for q, docs in binary.items() if any(docs.values()))
    values = {}
    for retriever in ("bm25", "dense"):
        run = read_trec_run(runs / f"{retriever}.trec")
        ndcg = ranx_metrics(graded, binary, run, 10, recall=False)["ndcg@10"]
        values[retriever] = np.array([ndcg.get(q, 0.0) for q in qids])
    return values


def scenario_draws(
    scenario: str,
    d: np.ndarray,
    dense: np.ndarray,
    shape: tuple[int, ...],
    rng: np.random.Generator,
) -> np.ndarray:
    """The paired differences every check of every stream sees, shape (streams, checks, n)."""
    m = float(d.mean())
    index = rng.integers(0, len(d), size=shape)
    if scenario == "null, recentred":
        return d[index] - m
    if scenario == "null, sign-flip":
        return d[index] * rng.choice([-1.0, 1.0], size=shape)
    share = DROP / float(dense.mean())
    if scenario == "drop, proportional":
        return d[index] - m - share * dense[index]
    broken = rng.random(shape) < share
    return d[index] - m - np.where(broken, dense[index], 0.0)


def upper_bounds(
    method: str, x: np.ndarray, alpha: float, planned_n: int, bounds: tuple[float, float]
) -> np.ndarray:
    """Each stream's upper bound of monitored − baseline after each check: (streams, checks)."""
    from eval.history.stats import asymptotic_bounds, bernstein_bounds, fixed_t_bounds

    streams, checks, n = x.shape
    if method == "naive t, per check":
        return fixed_t_bounds(x, alpha)[1]
    flat = x.reshape(streams, checks * n)
    at_checks = np.arange(n - 1, checks * n, n)
    if method == "naive t, cumulative":
        t = np.arange(1, checks * n + 1, dtype=np.float64)[at_checks]
        sums, squares = np.cumsum(flat, axis=1)[:, at_checks], np.cumsum(flat**2, axis=1)
        mean = sums / t
        variance = (squares[:, at_checks] - t * mean**2) / (t - 1)
        half = stats.t.ppf(1 - alpha / 2, t - 1) * np.sqrt(np.maximum(variance, 0) / t)
        return mean + half
    if method == "asymptotic CS":
        return asymptotic_bounds(flat, alpha, planned_n, bounds)[2][:, at_checks]
    return bernstein_bounds(flat, alpha, bounds)[2][:, at_checks]


def first_alarm(upper: np.ndarray) -> np.ndarray:
    """The check (1-based) of each stream's first alarm; 0 where none."""
    alarm = upper < 0
    return np.where(alarm.any(axis=1), alarm.argmax(axis=1) + 1, 0)


def rate(hits: np.ndarray) -> str:
    p = float(np.mean(hits))
    return f"{p:.1%} ± {math.sqrt(p * (1 - p) / len(hits)):.1%}"


def delay(first: np.ndarray, checks: int, rng: np.random.Generator) -> tuple[str, str]:
    """Median (± bootstrap SE) and 90th percentile of checks to detection, a stream never
    alarmed counting as after the last check (shown as > checks)."""
    times = np.where(first > 0, first, checks + 1).astype(np.float64)

    def show(value: float) -> str:
        return f"> {checks}" if value > checks else f"{value:.0f}"

    median = float(np.median(times))
    boot = np.median(times[rng.integers(0, len(times), size=(200, len(times)))], axis=1)
    se = "" if median > checks else f" ± {float(np.std(boot)):.1f}"
    return show(median) + se, show(float(np.quantile(times, 0.9, method="higher")))


def simulate(
    config: MonitoringConfig, d: np.ndarray, dense: np.ndarray, n: int, rng: np.random.Generator
) -> dict[str, list[str]]:
    """{method: cells} for one collection and queries per check."""
    m = float(d.mean())
    bounds = (-1.0 - abs(m), 1.0 + abs(m))
    cells: dict[str, list[str]] = {method: [] for method in METHODS}
    for scenario in SCENARIOS:
        first = {method: [] for method in METHODS}
        for start in range(0, config.streams, CHUNK):  # bounded memory: CHUNK streams at a time
            shape = (min(CHUNK, config.streams - start), config.checks, n)
            x = scenario_draws(scenario, d, dense, shape, rng)
            for method in METHODS:
                upper = upper_bounds(method, x, config.alpha, config.planned_checks * n, bounds)
                first[method].append(first_alarm(upper))
        for method in METHODS:
            alarms = np.concatenate(first[method])
            cells[method].append(rate(alarms > 0))
            if scenario.startswith("drop"):
                cells[method].extend(delay(alarms, config.checks, rng))
    return cells


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([MonitoringConfig], args)
    rng = np.random.default_rng(config.seed)
    header = [
        "collection (queries)",
        "queries per check",
        "method",
        "false alarms, null recentred",
        "false alarms, null sign-flip",
    ]
    for drop in ("proportional", "breaks"):
        header += [f"caught, drop {drop}", "median checks", "p90 checks"]
    rows = []
    for name, folder in (item.split("=", 1) for item in config.collections):
        values = per_query_ndcg(name, folder, Path(config.out))
        d, dense = values["dense"] - values["bm25"], values["dense"]
        print(
            f"{name}: {len(d)} queries, NDCG@10 BM25 {values['bm25'].mean():.3f}, dense "
            f"{dense.mean():.3f}, d = dense − BM25: mean {d.mean():+.3f}, sd {d.std(ddof=1):.3f}"
        )
        for n in config.per_check:
            for method, cells in simulate(config, d, dense, n, rng).items():
                rows.append([f"{name} ({len(d)})", n, method, *cells])
    print(
        f"\n{config.streams} streams of {config.checks} checks per cell; alarm: the upper bound of "
        f"monitored − baseline below 0; intervals two-sided at {1 - config.alpha:.0%} "
        f"(one-sided {config.alpha / 2:.0%}); asymptotic CS tuned for {config.planned_checks} "
        f"checks; seed {config.seed}\n"
    )
    print(markdown_table(header, rows))


if __name__ == "__main__":
    run_main(main)
