"""How well PPI++ intervals from a few human-judged queries cover the all-query human value.

    python -m eval.bench.ppi_coverage --search runs/main/search \\
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
(:mod:`eval.design`): for each n, ``draws`` samples under each design (strata by the labeler's
per-query uncertainty or score, from the same ``per_query.json``), each with the estimator valid
under its design, against uniform PPI++ on the uniform draws (the same seeds):

    python -m eval.bench.ppi_coverage --search grader=runs/main/search judge=runs/search-judge \
        --runs ... --qrels ... --designs uniform proportional neyman --strata 2
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from data.beir import read_named_runs
from data.core.cli import bounded, choice, parse_config, run_main
from data.core.io import markdown_table, write_json
from eval.design import DESIGNS, STRATA_BY, Design, design_mean, draw_design, unit_signals
from eval.ppi import classical_mean, effective_queries, paired_difference, ppi_mean
from eval.search.human import human_metrics

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
    metrics: list[str] = field(default_factory=lambda: ["ndcg@10", "precision@10"])
    k: int = bounded(10, 1)
    alpha: float = bounded(0.05, 0, 1, open_low=True, open_high=True)
    seed: int = field(default=0)
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
        metadata={"help": "The designs' variance with the finite-population correction."},
    )
    out: str | None = field(default=None, metadata={"help": "Write the figures as JSON here."})


def labeler_values(per_query: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """{run: {metric: {qid: value}}} from eval.search's per_query.json."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for run, queries in per_query.items():
        for qid, result in queries.items():
            for metric, value in result["metrics"].items():
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


def coverage(
    labeler: dict[str, float],
    human: dict[str, float],
    n: int,
    draws: int,
    alpha: float,
    rng: random.Random,
) -> dict[str, float]:
    qids = sorted(set(labeler) & set(human))
    truth = float(np.mean([human[q] for q in qids]))
    hits = {"classical": 0, "ppi": 0}
    widths: dict[str, list[float]] = {"classical": [], "ppi": []}
    effective = []
    for _ in range(draws):
        judged = set(rng.sample(qids, n))
        y = [human[q] for q in qids if q in judged]
        f = [labeler[q] for q in qids if q in judged]
        rest = [labeler[q] for q in qids if q not in judged]
        classical = classical_mean(y, alpha)
        ppi = ppi_mean(y, f, rest, alpha)
        for name, interval in (("classical", classical), ("ppi", ppi)):
            hits[name] += interval.low <= truth <= interval.high
            widths[name].append(interval.width)
        effective.append(effective_queries(n, classical, ppi))
    return {
        "truth": truth,
        "labeler_bias": float(np.mean([labeler[q] for q in qids])) - truth,
        "coverage_classical": hits["classical"] / draws,
        "coverage_ppi": hits["ppi"] / draws,
        "width_classical": float(np.mean(widths["classical"])),
        "width_ppi": float(np.mean(widths["ppi"])),
        "effective_queries": float(np.median(effective)),
    }


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


def _uniform_ppi(design: Design, labeler: dict, human: dict, alpha: float):
    judged = set(design.drawn)
    y = [human[q] for q in design.drawn]
    f = [labeler[q] for q in design.drawn]
    return ppi_mean(y, f, [v for q, v in labeler.items() if q not in judged], alpha)


def design_estimator(config: CoverageConfig):
    def estimate(design: Design, labeler: dict, human: dict, alpha: float):
        return design_mean(
            design, labeler, human, alpha, finite_population=config.finite_population
        )

    return estimate


def design_rows(
    labeler: dict, human: dict, qids: list[str], config: CoverageConfig, signals: tuple
) -> list[dict[str, Any]]:
    """Coverage and mean width of each design's interval, and uniform PPI++'s on the uniform
    draws, per system, metric and n."""
    rows = []
    for n in config.n:
        draws = {
            kind: design_draws(kind, qids, n, config, signals)
            for kind in dict.fromkeys(["uniform", *config.designs])
        }
        for system in human:
            for metric in config.metrics:
                f = {q: labeler[system][metric][q] for q in qids}
                y = {q: human[system][metric][q] for q in qids}
                truth = float(np.mean(list(y.values())))
                estimators = {"uniform PPI++": (draws["uniform"], _uniform_ppi)}
                estimators |= {
                    DESIGN_ROWS[kind]: (draws[kind], design_estimator(config))
                    for kind in config.designs
                }
                for name, (designs, estimate) in estimators.items():
                    intervals = [estimate(d, f, y, config.alpha) for d in designs]
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


def study(config: CoverageConfig) -> dict[str, Any]:
    runs = read_named_runs(config.runs, "runs")
    systems = with_differences(human_metrics(config.qrels, runs, config.k), list(runs))
    results: dict[str, Any] = {"intervals": {}, "designs": {}}
    for spec in config.search:
        name, _, folder = spec.rpartition("=")
        name = name or Path(folder).name
        per_query = json.loads((Path(folder) / "per_query.json").read_text())
        labeler = with_differences(labeler_values(per_query), list(runs))
        rng = random.Random(config.seed)
        results["intervals"][name] = [
            {"system": system, "metric": metric, "n": n}
            | coverage(
                labeler[system][metric], systems[system][metric], n, config.draws, config.alpha, rng
            )
            for system in systems
            for metric in config.metrics
            for n in config.n
        ]
        if config.designs:
            qids = sorted(set(labeler[next(iter(runs))][config.metrics[0]]))
            signals = unit_signals({r: per_query[r] for r in runs}, "queries", config.metrics[0])
            results["designs"][name] = design_rows(labeler, systems, qids, config, signals)
    return results


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
    ]
    for labeler, rows in results["intervals"].items():
        print(
            f"\n### Labeler: {labeler} ({config.draws} draws per n, t intervals, {1 - config.alpha:.0%})\n"
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
                f"{r['effective_queries']:.1f}",
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
        write_json(config.out, results)


if __name__ == "__main__":
    run_main(main)
