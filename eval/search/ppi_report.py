"""The PPI++ part of eval.search's report: every run's metrics corrected by the human sample, with
intervals, and the relevant share of hits from a sample of judged hits (their Markdown table is
eval.report.ppi_markdown's)."""

from __future__ import annotations

import logging
from typing import Any

from eval.search.human import check_random_sample
from eval.search.settings import SearchEvalConfig
from judgments.coverage import (
    MIN_JUDGED_QUERIES,
    measured_coverage,
    require_judged,
)
from judgments.samples import describe_sample, human_scale, judged_queries
from measure.metrics.names import PRIMARY_METRIC
from measure.metrics.ppi_record import (
    EstimateRecord,
    Estimates,
    IntervalRecord,
    Multiplicity,
    PpiRecord,
)
from measure.metrics.results import RunResults
from measure.metrics.significance import holm_adjusted, multiplicity_rule

logger = logging.getLogger(__name__)


def _stratified(design: Any) -> bool:
    """A stratified draw gets the estimator valid under its design; a uniform one (or a sample
    of unknown design) gets PPI++, which measured as wide or narrower on uniform draws."""
    return design is not None and design.kind != "uniform"


def estimator_name(config: SearchEvalConfig, design: Any) -> str:
    if not _stratified(design):
        return f"PPI++ with a power-tuned lambda, {config.interval} interval"
    return (
        f"PPI++ under the draw's design ({design.describe()}): the mean over the "
        f"{len(design.population)} {design.unit} drawn from, {config.interval} interval"
    )


def ppi_estimates(
    config: SearchEvalConfig,
    per_run: dict[str, dict[str, dict[str, float]]],
    human: dict[str, dict[str, dict[str, float]]],
    design: Any = None,
) -> PpiRecord:
    """For every run and metric, and every compared run's paired difference with the first: the
    labeler's mean over all queries, the human-only interval and the PPI++ interval (``human``:
    :func:`human_metrics`); under ``design`` (an :class:`judgments.design.Design` of queries) the
    estimates valid under it."""
    from judgments.design import design_estimate
    from judgments.ppi import estimate_metric, paired_difference

    def estimates(
        labeler: dict[str, dict[str, float]],
        truth: dict[str, dict[str, float]],
        bounds: tuple[float, float],
    ) -> Estimates:
        return {
            metric: (
                design_estimate(
                    design, values, truth[metric], config.alpha, config.interval, bounds
                )
                if _stratified(design)
                else estimate_metric(values, truth[metric], config.alpha, config.interval, bounds)
            ).record()
            for metric, values in labeler.items()
            if metric in truth
        }

    first, *others = per_run
    judged = {qid for values in human[first].values() for qid in values}
    differences: dict[str, Estimates] = {}
    for other in others:
        labeler_diff = {
            m: paired_difference(per_run[other][m], per_run[first][m]) for m in per_run[first]
        }
        human_diff = {
            m: paired_difference(human[other][m], human[first][m])
            for m in human[first]
            if m in human[other]
        }
        # Every metric lies in [0, 1], a difference of two in [-1, 1].
        differences[f"{other} - {first}"] = estimates(labeler_diff, human_diff, (-1.0, 1.0))
    primary = PRIMARY_METRIC.format(k=config.k)
    return PpiRecord(
        human=config.human,
        judged_queries=len(judged),
        estimator=estimator_name(config, design),
        confidence=1 - config.alpha,
        runs={name: estimates(per_run[name], human[name], (0.0, 1.0)) for name in per_run},
        differences=differences,
        measured_coverage={
            metric: measured_coverage(metric, len(judged), config.k) for metric in human[first]
        },
        multiplicity=holm(differences, primary, config.alpha),
    )


def holm(differences: dict[str, Estimates], primary: str, alpha: float) -> Multiplicity:
    """Holm's step-down adjustment of the PPI++ differences' p-values on the primary metric, over
    the compared runs (written into each entry as ``p_holm``); the other metrics' intervals stay
    marginal (:mod:`measure.metrics.significance`, the rule of every table), and the rule is
    returned in words for the table's and the report's legend."""
    tested: dict[int, EstimateRecord] = {}  # the primary metric's entries, by identity
    for metrics in differences.values():
        for metric, entry in metrics.items():
            entry.p_value = _p_value(entry.ppi)
            if metric == primary:
                tested[id(entry)] = entry
    adjusted = holm_adjusted({key: entry.p_value for key, entry in tested.items()})
    for key, entry in tested.items():
        entry.p_holm = adjusted[key]
    rule = multiplicity_rule(primary, len(tested), alpha, "PPI++ difference(s)")
    return Multiplicity(primary=primary, method="holm", alpha=alpha, rule=rule)


def _p_value(interval: IntervalRecord) -> float:
    """The paired difference's p-value of "no difference" from its interval's statistic; where
    the interval has none (Hoeffding's), 1 unless the interval excludes 0, then its alpha."""
    from judgments.ppi import Interval

    p = Interval(**{k: getattr(interval, k) for k in Interval.__dataclass_fields__}).p_value()
    if p is not None:
        return p
    return 1.0 if interval.low <= 0 <= interval.high else 0.05


def pair_estimates(
    config: SearchEvalConfig,
    results: dict[str, RunResults],
    human: dict[tuple[str, str], int],
    design: Any = None,
) -> dict[str, Estimates]:
    """Each run's share of relevant hits in its top k, from the labeler's label of every hit and
    the human labels of a random sample of hits (PPI++ over pairs; under ``design``, a draw of
    hits, the estimate valid under it)."""
    from judgments.design import design_estimate
    from judgments.ppi import estimate_metric

    out = {}
    for name, per_query in results.items():
        labeler = _top_k_labels(per_query)
        truth = {pair: float(human[pair]) for pair in labeler if pair in human}
        where = f"human_pairs: {config.human_pairs} (in {name}'s top {config.k})"
        require_judged(len(truth), "hits", where, MIN_JUDGED_QUERIES)
        arguments = (config.alpha, config.interval, (0.0, 1.0))
        if _stratified(design):
            estimates = design_estimate(design, labeler, truth, *arguments)
        else:
            estimates = estimate_metric(labeler, truth, *arguments)
        out[name] = {"relevant share": estimates.record()}
    return out


def _top_k_labels(per_query: RunResults) -> dict[tuple[str, str], float]:
    """{(qid, doc_id): the labeler's P(relevant)} of one run's labelled top k (its 0/1 verdict
    where it gives no probability): the probability carries more of what the labeler knows, so
    PPI++ gains more from it."""
    return {
        (qid, hit.id): hit.probability for qid, result in per_query.items() for hit in result.hits
    }


def pairs_used(
    config: SearchEvalConfig, results: dict[str, RunResults], human: dict
) -> dict[str, int]:
    """{run: judged hits in its top k}, the ones its interval uses; a warning names each run that
    leaves judged hits out (they say nothing about its top k, and the judged hits must be a random
    sample of the hits measured)."""
    used = {name: len(set(_top_k_labels(q)) & set(human)) for name, q in results.items()}
    for name, count in used.items():
        if count < len(human):
            logger.warning(
                "human_pairs: %s: %d of the %d judged hits are not in %s's top %d and are "
                "ignored; its interval uses %d (judge a random sample of the runs' top-k hits: "
                "relevance-grader ppi --unit hits --k %d draws one)",
                config.human_pairs,
                len(human) - count,
                len(human),
                name,
                config.k,
                count,
                config.k,
            )
    return used


def report_ppi(
    config: SearchEvalConfig,
    per_run: dict[str, dict[str, dict[str, float]]],
    results: dict[str, RunResults],
    human: dict[str, dict[str, dict[str, float]]] | None,
    human_pairs: dict[tuple[str, str], int] | None,
    designs: tuple[Any, Any],
) -> PpiRecord | None:
    """metrics.json's ``ppi``: the runs' metrics corrected by --human's judged queries, and the
    relevant share of hits from --human_pairs' judged hits, each with how its sample was drawn;
    None without human judgments."""
    query_design, pair_design = designs
    ppi: PpiRecord | None = None
    if human is not None:
        ppi = ppi_estimates(config, per_run, human, query_design)
        ppi.human_scale = human_scale(config.human or "", config.declared_human_scale)
        ppi.sample = describe_sample(query_design)
        ppi.sample.check = check_random_sample(config, per_run, judged_queries(human), query_design)
    if human_pairs is not None:
        ppi = ppi or PpiRecord(
            runs={},
            differences={},
            judged_queries=0,
            confidence=1 - config.alpha,
            estimator=estimator_name(config, pair_design),
        )
        ppi.pairs = pair_estimates(config, results, human_pairs, pair_design)
        ppi.judged_pairs = len(human_pairs)
        ppi.judged_pairs_used = pairs_used(config, results, human_pairs)
        ppi.pairs_sample = describe_sample(pair_design)
    return ppi
