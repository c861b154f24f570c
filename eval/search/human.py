"""People's judgments as eval.search takes them (--human, --human_pairs, --draw): the design they
were drawn under, the check that a sample not drawn by relevance-grader ppi looks random, and the
reading of both files. Reading a sample itself is :mod:`judgments.samples`."""

from __future__ import annotations

import logging
from typing import Any

from core.errors import InputError
from data.beir import (
    Run,
)
from eval.search.settings import SearchEvalConfig
from judgments.coverage import MIN_JUDGED_QUERIES
from judgments.samples import (
    fully_judged,
    human_metrics,
    judged_queries,
    read_human_pairs,
    realised_sample,
)
from measure.metrics.names import PRIMARY_METRIC
from measure.metrics.ppi_record import SampleCheck

logger = logging.getLogger(__name__)
RANDOM_SAMPLE_P = 0.01


def human_design(config: SearchEvalConfig):
    """The design the human sample was drawn under (:class:`judgments.design.Design`): --draw, or the
    draw recorded by the judgments.annotate session that holds the judgments; None for a sample of
    unknown design (read as a uniform draw)."""
    from judgments.design import design_from_dict, read_design
    from judgments.store import JudgingSession, session_folder

    if config.draw:
        return read_design(config.draw)
    for path in (config.human, config.human_pairs):
        folder = session_folder(path) if path else None
        session = JudgingSession.of_folder(folder) if folder else None
        draw = session.draw if session else None
        if draw:
            return design_from_dict(draw, str(folder))
    return None


def sample_designs(config: SearchEvalConfig) -> tuple[Any, Any]:
    """(the design of --human's queries, the design of --human_pairs' hits); None: uniform."""
    design = human_design(config)
    if design is None:
        return None, None
    flag = "--human" if design.unit == "queries" else "--human_pairs"
    if not (config.human if design.unit == "queries" else config.human_pairs):
        raise InputError(f"draw: a draw of {design.unit} is for {flag}; give {flag}")
    return (design, None) if design.unit == "queries" else (None, design)


def check_random_sample(
    config: SearchEvalConfig,
    per_run: dict[str, dict[str, dict[str, float]]],
    judged: set[str],
    design: Any,
) -> SampleCheck | None:
    """A sample of unknown design, checked against what a random draw would give: the first
    run's labeler NDCG@k of the judged and of the other queries, compared by a two-sided
    Mann-Whitney (rank-sum) test, with a warning below p = RANDOM_SAMPLE_P. None for an
    relevance-grader ppi draw (random by construction; a stratified one is meant to differ)."""
    from scipy.stats import mannwhitneyu

    if design is not None:
        return None
    run, per_metric = next(iter(per_run.items()))
    metric = PRIMARY_METRIC.format(k=config.k)
    inside = [v for q, v in sorted(per_metric[metric].items()) if q in judged]
    outside = [v for q, v in sorted(per_metric[metric].items()) if q not in judged]
    if len(inside) < 2 or len(outside) < 2:
        return None
    p = float(mannwhitneyu(inside, outside, alternative="two-sided").pvalue)
    p = 1.0 if p != p else p  # every value tied: nothing to tell them apart
    if p < RANDOM_SAMPLE_P:
        logger.warning(
            "human: %s: the judged queries' labeler %s on %s (mean %.3f) is unlike the other "
            "queries' (mean %.3f; Mann-Whitney p = %.2g < %g): PPI++ is valid only for a random "
            "sample of the queries; draw them with relevance-grader ppi",
            config.human,
            metric,
            run,
            sum(inside) / len(inside),
            sum(outside) / len(outside),
            p,
            RANDOM_SAMPLE_P,
        )
    test = f"two-sided Mann-Whitney of the labeler's {metric} on {run}, judged vs other queries"
    return SampleCheck(test=test, p=p, random_plausible=p >= RANDOM_SAMPLE_P)


def read_human(config: SearchEvalConfig, runs: dict[str, Run]) -> tuple[Any, Any, tuple]:
    """(--human's per-run metrics, --human_pairs' labels, their designs), checked against the
    runs and the draw before any hit is labelled."""
    query_design, pair_design = sample_designs(config)
    human = None
    if config.human:
        complete = fully_judged(config.human, runs, config.k)
        human = human_metrics(
            config.human,
            runs,
            config.k,
            only=complete,
            scale=config.declared_human_scale,
            minimum=MIN_JUDGED_QUERIES,
        )
        query_design = realised_sample(query_design, judged_queries(human), "queries", "--human")
    human_pairs = read_human_pairs(config.human_pairs) if config.human_pairs else None
    if human_pairs is not None:
        pair_design = realised_sample(pair_design, set(human_pairs), "hits", "--human_pairs")
    return human, human_pairs, (query_design, pair_design)
