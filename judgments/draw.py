"""The draw command (``relevance-grader ppi``): which queries (or hits) people judge, uniform or
stratified by the labeler's uncertainty, sized by a pilot or a target width; the design it
records is read back by judgments.annotate and eval.search. The estimators are :mod:`judgments.ppi`."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.cli import bounded, check_choices, choice, parse_config, run_main
from core.errors import InputError
from judgments.coverage import MIN_JUDGED_QUERIES
from judgments.ppi import INTERVALS, Interval, queries_for_width, width_for_queries
from measure.metrics.results import PerQueryResults, RunResults


def draw_queries(qids: Sequence[str], n: int, seed: int = 0) -> list[str]:
    """A seeded simple random sample of the queries to have judged (PPI needs a random sample)."""
    if n > len(qids):
        raise InputError(f"n: {n} queries asked for, the run has {len(qids)}")
    return sorted(random.Random(seed).sample(sorted(qids), n))


@dataclass
class DrawConfig:
    run: str = field(
        default="",
        metadata={"help": "TREC run (or queries.jsonl; a corpus.jsonl is refused) to draw from."},
    )
    n: int = bounded(
        20,
        MIN_JUDGED_QUERIES,
        help=f"Queries (or hits) to have judged; relevance-grader search makes no interval from "
        f"fewer than {MIN_JUDGED_QUERIES} (judgments.coverage).",
    )
    seed: int = field(default=0)
    design: str = choice(
        "uniform",
        ("uniform", "proportional", "neyman"),
        "uniform: a simple random sample; proportional / neyman: strata by the labeler's "
        "--strata_by, judged in proportion to their size / to size x the labeler's uncertainty "
        "(needs --labels).",
    )
    unit: str = choice(
        "queries", ("queries", "hits"), "Draw whole queries (--human) or hits (--human_pairs)."
    )
    labels: str | None = field(
        default=None,
        metadata={
            "help": "relevance-grader search output (folder or per_query.json): the labeler's "
            "labels of every run's top k, for strata and the hit pool."
        },
    )
    strata: int = bounded(2, 1, help="Strata of the proportional and neyman designs.")
    strata_by: str = choice(
        "uncertainty",
        ("uncertainty", "score"),
        "Cut strata by the labeler's uncertainty (mean p(1 - p) of the hits) or its --metric.",
    )
    k: int = bounded(10, 1, help="Hits per query in the pool of --unit hits without --labels.")
    out: str | None = field(
        default=None,
        metadata={
            "help": "Write the draw (design, strata, sample) here, for relevance-grader annotate."
        },
    )
    pilot: str | None = field(
        default=None,
        metadata={
            "help": "metrics.json of a relevance-grader search run with --human: size n for a "
            "width."
        },
    )
    metric: str = field(
        default="ndcg@10",
        metadata={"help": "Metric whose width --pilot sizes (and the score of --strata_by score)."},
    )
    target_width: float | None = bounded(
        None,
        0,
        help="With --pilot: the PPI++ interval width to reach (widths scale as 1/sqrt(n)); a "
        "width that more units than the run has would need is refused, naming the width they "
        "reach.",
        open_low=True,
    )
    interval: str = choice("t", INTERVALS, "Interval of the pilot.")

    def __post_init__(self) -> None:
        check_choices(self)  # a library call too: no draw smaller than an interval needs


def read_labels(path: str) -> dict[str, RunResults]:
    """The runs' labelled top k of eval.search's per_query.json (or the folder holding it)."""
    from pathlib import Path

    file = Path(path) / PerQueryResults.FILE if Path(path).is_dir() else Path(path)
    if not file.is_file():
        raise FileNotFoundError(
            f"labels: {file} not found (a relevance-grader search output folder)"
        )
    return PerQueryResults.read(file).runs


def _run_queries(path: str) -> list[str]:
    from pathlib import Path

    from data.beir import read_queries, read_trec_run

    if path.endswith(".jsonl"):
        _refuse_corpus(path)
        return sorted(read_queries(path))
    if not Path(path).is_file():
        raise FileNotFoundError(f"run: {path} not found")
    return sorted(read_trec_run(path))


def _refuse_corpus(path: str) -> None:
    """A corpus.jsonl read as queries would draw document ids: a file named so, or whose first
    record has a ``title`` (every BEIR corpus line has one, a query line none), is refused."""
    from pathlib import Path

    from core.io import iter_json_lines

    if not Path(path).is_file():
        raise FileNotFoundError(f"run: {path} not found")
    first = next((obj for _, obj in iter_json_lines(path)), None)
    if Path(path).name == "corpus.jsonl" or (isinstance(first, dict) and "title" in first):
        raise InputError(
            f"run: {path} is a corpus (documents, not queries); give a TREC run or the "
            "collection's queries.jsonl"
        )


def _run_hits(path: str, k: int) -> list[tuple[str, str]]:
    from data.beir import ranked, read_trec_run

    run = read_trec_run(path)
    return [(qid, doc_id) for qid in sorted(run) for doc_id, _ in ranked(run[qid])[:k]]


def _sized(config: DrawConfig, population: int) -> int:
    """--n, or the n that --pilot says reaches --target_width; a width that the population's
    units cannot reach is refused with the width they can."""
    if not config.pilot:
        return config.n
    if config.target_width is None:
        raise InputError("target_width: give the interval width to reach with --pilot")
    pilot = _pilot_interval(config.pilot, config.metric)
    needed = queries_for_width(pilot, config.target_width)
    if needed > population:
        reachable = math.ceil(width_for_queries(pilot, population) * 1000) / 1000
        raise InputError(
            f"target_width: a {config.metric} interval of width {config.target_width:g} needs about "
            f"{needed} judged {config.unit}, and the run has {population}; judging all of them "
            f"reaches about {reachable:g} as relevance-grader search's interval (which treats the "
            f"{config.unit} as a sample of many more), while their own mean is then known exactly "
            f"(give --target_width {reachable:g} or more, or judge all {population})"
        )
    print(
        f"{needed} judged {config.unit} for a {config.metric} interval of width "
        f"{config.target_width:g} (the pilot's {pilot.n} gave {pilot.width:.3g})"
    )
    return needed


def _pilot_interval(path: str, metric: str) -> Interval:
    """The first run's PPI++ interval of ``metric`` in an eval.search metrics.json."""
    from measure.metrics.results import SearchMetrics

    report = SearchMetrics.read(path).ppi
    first = next(iter(report.runs.values()), None) if report else None
    if first is None or metric not in first:
        raise InputError(f"pilot: {path} has no PPI estimate of {metric} (run with --human)")
    ppi = first[metric].ppi
    return Interval(ppi.estimate, ppi.low, ppi.high, ppi.n, 0, ppi.lam, "")


def draw(config: DrawConfig):
    """The draw ``config`` asks for (an :class:`judgments.design.Design`)."""
    from judgments.design import draw_design, unit_signals

    if not config.run and not config.labels:
        raise InputError("run: give --run RUN.trec (or a queries.jsonl, or --labels) to draw from")
    score = uncertainty = None
    if config.labels:
        score, uncertainty = unit_signals(read_labels(config.labels), config.unit, config.metric)
        population = sorted(uncertainty)
        if config.strata_by == "score" and len(score) < len(uncertainty):
            raise InputError(
                f"metric: {config.labels} has no {config.metric} for some queries; give --metric "
                "as relevance-grader search names it (e.g. ndcg@10)"
            )
    elif config.unit == "hits":
        population = _run_hits(config.run, config.k)
    else:
        population = _run_queries(config.run)
    if config.labels and config.run and config.unit == "queries":
        others = sorted(set(_run_queries(config.run)) ^ set(population))
        if others:
            raise InputError(
                f"labels: {config.labels} and {config.run} hold different queries "
                f"(e.g. {others[0]!r}); label the run with relevance-grader search first"
            )
    sources = {"run": config.run or None, "labels": config.labels, "metric": config.metric}
    return draw_design(
        population,
        _sized(config, len(population)),
        config.design,
        unit=config.unit,
        seed=config.seed,
        strata=config.strata,
        strata_by=config.strata_by,
        score=score,
        uncertainty=uncertainty,
        sources=sources | ({"k": config.k} if config.unit == "hits" and not config.labels else {}),
    )


def judging_workload(config: DrawConfig, design: Any) -> str | None:
    """The work the draw asks of people, said before anyone starts: the hits of the drawn queries
    in the run's top k (the judging page pools every run's top k, so more with several runs)."""
    if design.unit != "queries" or not config.run or config.run.endswith(".jsonl"):
        return None
    drawn = set(design.drawn)
    mine = sum(1 for qid, _ in _run_hits(config.run, config.k) if qid in drawn)
    return (
        f"workload: the {len(drawn)} drawn queries have {mine} hits in this run's top {config.k} "
        "to judge (relevance-grader annotate pools every run's top k: more with several runs; at "
        f"a typical 20-40 s a hit, {mine * 20 / 60:.0f}-{mine * 40 / 60:.0f} minutes; the page then shows "
        "your own pace)"
    )


def main(args: Sequence[str] | None = None) -> None:
    import sys

    from judgments.design import write_design

    (config,) = parse_config([DrawConfig], args)
    design = draw(config)
    for unit in design.drawn:
        print(" ".join(unit) if isinstance(unit, tuple) else unit)
    workload = judging_workload(config, design)
    if workload:
        print(workload, file=sys.stderr)
    if config.out:
        write_design(config.out, design)
        print(f"wrote {config.out}: {design.describe()}", file=sys.stderr)
    else:
        print(
            f"{design.describe()}, seed {design.seed}: give --out FILE to record the draw, "
            "and relevance-grader search --draw FILE records it in metrics.json",
            file=sys.stderr,
        )


if __name__ == "__main__":
    run_main(main)
