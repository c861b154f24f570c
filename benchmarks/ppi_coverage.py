"""How well PPI++ intervals from a few human-judged queries cover the all-query human value.

    python -m benchmarks.ppi_coverage --search runs/main/search \\
        --runs runs/main/candidates/bm25.trec runs/main/candidates/dense.trec \\
               runs/main/candidates/dense-grader.trec \\
        --qrels data/collections/trec-dl-2019-passage/qrels.tsv --n 5 10 15 20 --draws 1000

Every query of the runs has human judgments, so the value to cover is known: each metric's mean
over all queries under the human judgments. For each n, ``draws`` random sets of n queries play
the human-judged subset (the others keep only the labeler's values, from ``eval.search``'s
``per_query.json``); the classical human-only interval and the PPI++ interval are computed on the
same draws. Reported per system, paired difference (each run against the first), metric and n:
coverage of both intervals, their mean widths, the width ratio, the effective number of human
queries, and the bias of the labeler's plain mean.

With ``--designs uniform proportional neyman`` the study also compares sampling designs
(:mod:`judgments.design`): for each n, ``draws`` samples under each design (strata by the labeler's
per-query uncertainty or score, from the same ``per_query.json``), each with the estimator valid
under its design, against uniform PPI++ on the uniform draws (the same seeds):

    python -m benchmarks.ppi_coverage --search grader=runs/main/search judge=runs/search-judge \
        --runs ... --qrels ... --designs uniform proportional neyman --strata 2

The intervals are those the tool reports: :func:`judgments.ppi.estimate_metric` with the metric's
bounds ((0, 1) for a system, (-1, 1) for a paired difference), read from its ``to_dict()`` as
``eval.search`` writes them to metrics.json; the same uniform draws serve every system, metric and
labeler. Where the human-judged sample is a large share of the population (TREC DL 2019: 20 of
43 queries), ``--finite_population true`` replaces them by the design-based estimator of a
one-stratum uniform :class:`judgments.design.Design` with the finite-population correction (human
only: λ = 0; PPI++: λ tuned), within the same bounds. ``--max_queries N`` studies a seeded sample
of N queries of the population (``--population_seed``). Each row also gives the share of
zero-width intervals. ``--out`` is strict JSON: a non-finite number is written as null.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.cli import bounded, choice, parse_config, run_main
from core.io import markdown_table, write_json
from data.beir import read_named_runs
from judgments.design import (
    DESIGNS,
    STRATA_BY,
    Design,
    design_estimate,
    design_mean,
    draw_design,
    unit_signals,
)
from judgments.ppi import INTERVALS, estimate_metric, paired_difference
from judgments.samples import human_metrics
from measure.metrics.results import PerQueryResults, RunResults

# eval.search's names of the five metrics at k = 10.
METRICS = ["ndcg@10", "map", "mrr", "precision@10", "hit@10"]
# Every metric lies in [0, 1], a paired difference of two in [-1, 1] (as eval.search bounds them).
SYSTEM_BOUNDS = (0.0, 1.0)
DIFFERENCE_BOUNDS = (-1.0, 1.0)
# An interval this narrow or narrower counts as zero width.
ZERO_WIDTH = 1e-12

# Row names: on uniform draws the design estimator (one stratum) is shown beside PPI++, the
# estimator eval.search uses for them.
DESIGN_ROWS = {
    "uniform": "uniform, design-based",
    "proportional": "proportional",
    "neyman": "neyman",
}


@dataclass
class CoverageConfig:
    search: list[str] = field(
        default_factory=list,
        metadata={
            "help": "eval.search output folders (per_query.json), NAME=DIR for several labelers."
        },
    )
    runs: list[str] = field(default_factory=list, metadata={"help": "The TREC runs they scored."})
    qrels: str = field(default="", metadata={"help": "Human judgments of every query."})
    n: list[int] = field(default_factory=lambda: [5, 10, 15, 20])
    draws: int = bounded(1000, 1, help="Random judged subsets per n.")
    metrics: list[str] = field(default_factory=lambda: list(METRICS))
    k: int = bounded(10, 1)
    alpha: float = bounded(0.05, 0, 1, open_low=True, open_high=True)
    interval: str = choice("t", INTERVALS, "The intervals' kind, as eval.search --interval.")
    seed: int = field(default=0)
    max_queries: int | None = bounded(
        None,
        2,
        help="Study a seeded sample of this many of the queries that the runs, the labels and "
        "the qrels share (the population whose all-query human value is covered).",
    )
    population_seed: int = field(default=0, metadata={"help": "Seed of the --max_queries sample."})
    designs: list[str] = field(
        default_factory=list,
        metadata={
            "help": f"Sampling designs to compare with uniform PPI++ ({', '.join(DESIGNS)})."
        },
    )
    strata: int = bounded(2, 1, help="Strata of the stratified designs.")
    strata_by: str = choice("uncertainty", STRATA_BY, "What the strata are cut by.")
    finite_population: bool = field(
        default=False,
        metadata={
            "help": "Intervals with the finite-population correction: the design-based "
            "estimator of a one-stratum uniform draw (and the designs' variance) with the factor "
            "1 - n/N, for a sample that is a large share of the queries."
        },
    )
    out: str | None = field(default=None, metadata={"help": "Write the figures as JSON here."})


def labeler_values(per_query: dict[str, RunResults]) -> dict[str, dict[str, dict[str, float]]]:
    """{run: {metric: {qid: value}}} from eval.search's per_query.json (its runs)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for run, queries in per_query.items():
        for qid, result in queries.items():
            for metric, value in result.metrics.items():
                if value is not None:  # an undefined value is no value
                    out.setdefault(run, {}).setdefault(metric, {})[qid] = value
    return out


def with_differences(
    values: dict[str, dict[str, dict[str, float]]], runs: Sequence[str]
) -> dict[str, dict[str, dict[str, float]]]:
    """Each run's per-query values and each other run's paired difference with the first."""
    first, *others = runs
    systems = {name: values[name] for name in runs}
    return systems | {
        f"{other} - {first}": {
            m: paired_difference(values[other][m], values[first][m]) for m in values[first]
        }
        for other in others
    }


def uniform_draws(qids: Sequence[str], n: int, draws: int, seed: int) -> list[Design]:
    """``draws`` simple random samples of n of ``qids``, each a one-stratum uniform Design
    (seeded as :func:`design_draws` seeds them)."""
    return [draw_design(qids, n, "uniform", seed=seed * 1_000_003 + i) for i in range(draws)]


def reported_intervals(
    design: Design,
    labeler: Mapping[str, float],
    human: Mapping[str, float],
    config: CoverageConfig,
    bounds: tuple[float, float],
) -> dict[str, Any]:
    """The estimates of one draw as eval.search reports them (``MetricEstimates.to_dict()``:
    ``human_only`` and ``ppi`` intervals within ``bounds``)."""
    drawn = {q: human[q] for q in design.drawn}
    if config.finite_population:
        estimates = design_estimate(
            design, labeler, drawn, config.alpha, config.interval, bounds, finite_population=True
        )
    else:
        estimates = estimate_metric(labeler, drawn, config.alpha, config.interval, bounds)
    return estimates.to_dict()


def coverage(
    labeler: Mapping[str, float],
    human: Mapping[str, float],
    designs: Sequence[Design],
    config: CoverageConfig,
    bounds: tuple[float, float],
) -> dict[str, float]:
    """Over the draws: how often each reported interval holds the all-query human value (the
    mean of ``human`` over the queries of ``labeler``), their mean widths, the share of
    zero-width ones, where PPI++ missed, and the median number of human queries its interval is
    worth."""
    qids = sorted(labeler)
    truth = float(np.mean([human[q] for q in qids]))
    hits = {"classical": 0, "ppi": 0}
    zero = {"classical": 0, "ppi": 0}
    widths: dict[str, list[float]] = {"classical": [], "ppi": []}
    below = above = 0
    effective = []
    for design in designs:
        reported = reported_intervals(design, labeler, human, config, bounds)
        for name, key in (("classical", "human_only"), ("ppi", "ppi")):
            low, high = float(reported[key]["low"]), float(reported[key]["high"])
            hits[name] += low <= truth <= high
            widths[name].append(high - low)
            zero[name] += high - low <= ZERO_WIDTH
            if name == "ppi":
                below += high < truth
                above += low > truth
        worth = reported.get("effective_human_queries")
        effective.append(math.nan if worth is None else float(worth))
    draws = len(designs)
    return {
        "truth": truth,
        "labeler_bias": float(np.mean([labeler[q] for q in qids])) - truth,
        "coverage_classical": hits["classical"] / draws,
        "coverage_ppi": hits["ppi"] / draws,
        "width_classical": float(np.mean(widths["classical"])),
        "width_ppi": float(np.mean(widths["ppi"])),
        "zero_width_classical": zero["classical"] / draws,
        "zero_width_ppi": zero["ppi"] / draws,
        # The PPI++ interval missed by lying wholly below / above the human value.
        "ppi_miss_below": below / draws,
        "ppi_miss_above": above / draws,
        # Median over the draws where it is defined (both widths positive).
        "effective_queries": _median(effective),
    }


def _median(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(np.median(finite)) if finite else math.nan


def estimator_name(config: CoverageConfig) -> str:
    if config.finite_population:
        return "design-based (one-stratum uniform draw) with the finite-population correction"
    return "judgments.ppi.estimate_metric, as eval.search reports it"


def design_draws(
    kind: str, qids: list[str], n: int, config: CoverageConfig, signals: tuple[dict, dict]
) -> list[Design]:
    """``config.draws`` samples of n queries under ``kind``, seeded alike for every design."""
    score, uncertainty = signals
    return [
        draw_design(
            qids,
            n,
            kind,
            seed=config.seed * 1_000_003 + i,
            strata=config.strata,
            strata_by=config.strata_by,
            score=score,
            uncertainty=uncertainty,
        )
        for i in range(config.draws)
    ]


def _uniform_ppi(design: Design, labeler: dict, human: dict, config: CoverageConfig, bounds):
    """eval.search's PPI++ interval of a uniform draw."""
    drawn = {q: human[q] for q in design.drawn}
    estimates = estimate_metric(labeler, drawn, config.alpha, config.interval, bounds)
    return estimates.ppi


def _design_ppi(design: Design, labeler: dict, human: dict, config: CoverageConfig, bounds):
    """The design-based PPI++ interval valid under ``design``, within ``bounds``."""
    drawn = {q: human[q] for q in design.drawn}
    return design_mean(
        design,
        labeler,
        drawn,
        config.alpha,
        None,
        config.interval,
        finite_population=config.finite_population,
        bounds=bounds,
    )


def design_rows(
    labeler: dict,
    human: dict,
    qids: list[str],
    config: CoverageConfig,
    signals: tuple,
    runs: Sequence[str],
) -> list[dict[str, Any]]:
    """Coverage and mean width of each design's interval, and uniform PPI++'s on the uniform
    draws, per system, metric and n (``runs``: the systems; the others are differences)."""
    rows = []
    for n in config.n:
        draws = {
            kind: design_draws(kind, qids, n, config, signals)
            for kind in dict.fromkeys(["uniform", *config.designs])
        }
        for system in human:
            bounds = SYSTEM_BOUNDS if system in runs else DIFFERENCE_BOUNDS
            for metric in config.metrics:
                f = {q: labeler[system][metric][q] for q in qids}
                y = {q: human[system][metric][q] for q in qids}
                truth = float(np.mean(list(y.values())))
                estimators = {"uniform PPI++": (draws["uniform"], _uniform_ppi)}
                estimators |= {
                    DESIGN_ROWS[kind]: (draws[kind], _design_ppi) for kind in config.designs
                }
                for name, (designs, estimate) in estimators.items():
                    intervals = [estimate(d, f, y, config, bounds) for d in designs]
                    rows.append(
                        {"design": name, "system": system, "metric": metric, "n": n}
                        | {
                            "coverage": float(
                                np.mean([i.low <= truth <= i.high for i in intervals])
                            ),
                            "width": float(np.mean([i.width for i in intervals])),
                        }
                    )
    return rows


def population(
    config: CoverageConfig,
    labelers: Mapping[str, Mapping[str, Any]],
    human: Mapping[str, Mapping[str, Mapping[str, float]]],
) -> list[str]:
    """The queries studied: those that every labeler and the human judgments give a value, or a
    seeded sample of ``--max_queries`` of them."""
    metric = config.metrics[0]
    qids = set.intersection(
        *(set(values[metric]) for values in human.values()),
        *(set(values[metric]) for labeler in labelers.values() for values in labeler.values()),
    )
    ordered = sorted(qids)
    if config.max_queries is not None and config.max_queries < len(ordered):
        ordered = sorted(random.Random(config.population_seed).sample(ordered, config.max_queries))
    too_many = [n for n in config.n if n > len(ordered)]
    if too_many:
        raise ValueError(
            f"n: {too_many[0]} judged queries asked for, the population has {len(ordered)}"
        )
    return ordered


def _restricted(
    values: Mapping[str, Mapping[str, Mapping[str, float]]], qids: Sequence[str]
) -> dict[str, dict[str, dict[str, float]]]:
    return {
        system: {metric: {q: per[q] for q in qids} for metric, per in metrics.items()}
        for system, metrics in values.items()
    }


def study(config: CoverageConfig) -> dict[str, Any]:
    runs = read_named_runs(config.runs, "runs")
    all_human = with_differences(human_metrics(config.qrels, runs, config.k), list(runs))
    unknown = [m for m in config.metrics if m not in all_human[next(iter(runs))]]
    if unknown:
        names = ", ".join(all_human[next(iter(runs))])
        raise ValueError(f"metrics: {unknown[0]!r} is not one of eval.search's ({names})")
    per_queries: dict[str, dict[str, RunResults]] = {}
    labelers: dict[str, Any] = {}
    for spec in config.search:
        name, _, folder = spec.rpartition("=")
        name = name or Path(folder).name
        per_queries[name] = PerQueryResults.read(Path(folder) / PerQueryResults.FILE).runs
        labelers[name] = with_differences(labeler_values(per_queries[name]), list(runs))
    qids = population(config, labelers, all_human)
    systems = _restricted(all_human, qids)
    draws = {n: uniform_draws(qids, n, config.draws, config.seed) for n in config.n}
    results: dict[str, Any] = {
        "population": {"queries": len(qids), "max_queries": config.max_queries},
        "estimator": estimator_name(config),
        "confidence": 1 - config.alpha,
        "config": asdict(config),
        "intervals": {},
        "designs": {},
    }
    for name, per_query in per_queries.items():
        labeler = _restricted(labelers[name], qids)
        results["intervals"][name] = [
            {"system": system, "metric": metric, "n": n, "population": len(qids)}
            | coverage(
                labeler[system][metric],
                systems[system][metric],
                draws[n],
                config,
                SYSTEM_BOUNDS if system in runs else DIFFERENCE_BOUNDS,
            )
            for system in systems
            for metric in config.metrics
            for n in config.n
        ]
        if config.designs:
            signals = unit_signals({r: per_query[r] for r in runs}, "queries", config.metrics[0])
            results["designs"][name] = design_rows(
                labeler, systems, qids, config, signals, list(runs)
            )
    return results


def lowest_ppi_coverage(results: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """{metric: {n: the lowest PPI++ coverage over every labeler and system}} of study results
    (``--out`` files)."""
    out: dict[str, dict[str, float]] = {}
    for result in results:
        for rows in result["intervals"].values():
            for r in rows:
                cell = out.setdefault(r["metric"], {})
                cell[str(r["n"])] = min(cell.get(str(r["n"]), 1.0), r["coverage_ppi"])
    return {m: dict(sorted(c.items(), key=lambda kv: int(kv[0]))) for m, c in out.items()}


def design_table(rows: list[dict[str, Any]]) -> str:
    """Per design, metric and n: the lowest and mean coverage over the systems, the mean width,
    and the width against uniform PPI++ on the same systems."""
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r["design"], r["metric"], r["n"]), []).append(r)
    table = []
    for (design, metric, n), group in cells.items():
        base = cells[("uniform PPI++", metric, n)]
        ratios = [g["width"] / b["width"] for g, b in zip(group, base, strict=True) if b["width"]]
        ratio = f"{np.mean(ratios):.2f}" if ratios else "–"
        table.append(
            [
                design,
                metric,
                n,
                f"{min(g['coverage'] for g in group):.3f}",
                f"{np.mean([g['coverage'] for g in group]):.3f}",
                f"{np.mean([g['width'] for g in group]):.3f}",
                ratio,
            ]
        )
    header = ["design", "metric", "n", "lowest coverage", "mean coverage", "mean width"]
    return markdown_table([*header, "width vs uniform PPI++"], sorted(table, key=_order))


def _order(row: list) -> tuple:
    designs = ["uniform PPI++", *DESIGN_ROWS.values()]
    return (row[1], row[2], designs.index(row[0]))


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([CoverageConfig], args)
    if not (config.search and config.runs and config.qrels):
        raise ValueError("give --search, --runs and --qrels")
    results = study(config)
    header = [
        "system",
        "metric",
        "n",
        "human value",
        "labeler bias",
        "coverage, human only",
        "coverage, PPI++",
        "width, human only",
        "width, PPI++",
        "width ratio",
        "worth (queries)",
        "zero width, human only",
        "zero width, PPI++",
    ]
    for labeler, rows in results["intervals"].items():
        print(
            f"\n### Labeler: {labeler} ({results['population']['queries']} queries, "
            f"{config.draws} draws per n, {config.interval} intervals, {1 - config.alpha:.0%}; "
            f"{results['estimator']})\n"
        )
        table = [
            [
                r["system"],
                r["metric"],
                r["n"],
                f"{r['truth']:.3f}",
                f"{r['labeler_bias']:+.3f}",
                f"{r['coverage_classical']:.3f}",
                f"{r['coverage_ppi']:.3f}",
                f"{r['width_classical']:.3f}",
                f"{r['width_ppi']:.3f}",
                f"{r['width_ppi'] / r['width_classical']:.2f}" if r["width_classical"] else "–",
                _format(r["effective_queries"], ".1f"),
                f"{r['zero_width_classical']:.3f}",
                f"{r['zero_width_ppi']:.3f}",
            ]
            for r in rows
        ]
        print(markdown_table(header, table), end="")
    for labeler, rows in results["designs"].items():
        print(
            f"\n### Sampling designs, labeler {labeler} ({config.draws} draws per n and design; "
            f"{config.strata} strata by the labeler's {config.strata_by}"
            f"{'; with the finite-population correction' if config.finite_population else ''})\n"
        )
        print(design_table(rows), end="")
    if config.out:
        write_json(config.out, results)  # strict JSON: a non-finite number as null


def _format(value: float, spec: str) -> str:
    return format(value, spec) if math.isfinite(value) else "–"


if __name__ == "__main__":
    run_main(main)
