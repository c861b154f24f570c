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
from data.cli import bounded, parse_config, run_main
from data.io import markdown_table, write_json
from eval.ppi import classical_mean, effective_queries, paired_difference, ppi_mean
from eval.search import human_metrics


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
    out: str | None = field(default=None, metadata={"help": "Write the figures as JSON here."})


def labeler_values(folder: Path) -> dict[str, dict[str, dict[str, float]]]:
    """{run: {metric: {qid: value}}} from eval.search's per_query.json."""
    per_query = json.loads((folder / "per_query.json").read_text())
    out: dict[str, dict[str, dict[str, float]]] = {}
    for run, queries in per_query.items():
        for qid, result in queries.items():
            for metric, value in result["metrics"].items():
                out.setdefault(run, {}).setdefault(metric, {})[qid] = value
    return out


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


def study(config: CoverageConfig) -> dict[str, Any]:
    runs = read_named_runs(config.runs, "runs")
    human = human_metrics(config.qrels, runs, config.k)
    first, *others = runs
    systems = {name: human[name] for name in runs}
    systems |= {
        f"{other} - {first}": {
            m: paired_difference(human[other][m], human[first][m]) for m in human[first]
        }
        for other in others
    }
    results: dict[str, Any] = {}
    for spec in config.search:
        name, _, folder = spec.rpartition("=")
        values = labeler_values(Path(folder))
        labeler = {run: values[run] for run in runs}
        labeler |= {
            f"{other} - {first}": {
                m: paired_difference(values[other][m], values[first][m]) for m in values[first]
            }
            for other in others
        }
        rng = random.Random(config.seed)
        results[name or Path(folder).name] = [
            {"system": system, "metric": metric, "n": n}
            | coverage(
                labeler[system][metric], systems[system][metric], n, config.draws, config.alpha, rng
            )
            for system in systems
            for metric in config.metrics
            for n in config.n
        ]
    return results


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
    for labeler, rows in results.items():
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
    if config.out:
        write_json(config.out, results)


if __name__ == "__main__":
    run_main(main)
