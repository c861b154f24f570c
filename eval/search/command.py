"""The grader as labeler in the retrieval-metric pipeline (per query, and in bulk over runs).

    # one run, labelled by an exported grader (labels cached under OUT/labels/)
    relevance-grader search --run runs/candidates/dense.trec --corpus data/collections/trec-dl-2019-passage \\
        --labeler grader:runs/export/grader --k 10 --out runs/search/dense
    # several runs on the same queries: one table with paired significance tests (ranx)
    relevance-grader search --run runs/candidates/bm25.trec --compare runs/candidates/dense.trec \\
        --corpus data/collections/trec-dl-2019-passage --labeler grader:runs/export/grader --out runs/search/cmp

Library: :func:`evaluate_query` labels one query's ranked hits and returns per-hit labels, metrics
{ndcg@k, map, mrr, precision@k, recall@k (when the number of relevant documents is known), hit@k}
and usage. Metrics come from ranx: graded NDCG with the 2^rel − 1 gain (``ndcg_burges``); MAP,
MRR, precision, recall and hit rate on binary relevance (grade >= 2, or the labeler's verdict).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.cli import parse_config
from core.errors import InputError
from core.io import refuse_overlap
from core.provenance import write_provenance
from data.beir import read_named_runs, read_texts, write_trec_qrels
from eval.report.ppi_markdown import ppi_heading, ppi_table
from eval.search.human import read_human
from eval.search.ppi_report import report_ppi
from eval.search.settings import SEARCH_OUTPUTS, SearchEvalConfig, search_inputs
from measure.labelers import QrelsLabeler, make_labeler
from measure.metrics.labelling import label_runs
from measure.metrics.names import PRIMARY_METRIC
from measure.metrics.results import (
    HumanPerQuery,
    PerQueryResults,
    RunResults,
    SearchMetrics,
    Unusable,
)
from measure.metrics.retrieval import (
    compare_runs,
    inferred_qrels,
    mean_metrics,
    pooled_metrics,
    with_unretrieved,
)
from measure.metrics.significance import LabelerTests, labeler_tests, marked_table

logger = logging.getLogger(__name__)


def scoring_dtype() -> str:
    """The dtype models score in here (float32 on a CPU unless bf16 is asked for)."""
    from models.resolve import dtype_name

    try:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # a labeler without a model (qrels, judgments) needs no torch
        device = "cpu"
    return dtype_name(device)


def count_unusable(results: dict[str, RunResults]) -> Unusable | None:
    """The hits with an unusable reply by run (None when none): each such hit counts as not
    relevant, as an unjudged hit does; a warning names how many and the first."""
    found = [
        (name, qid, hit.id, hit.unusable)
        for name, per_query in results.items()
        for qid, result in per_query.items()
        for hit in result.hits
        if hit.unusable is not None
    ]
    counts = {name: sum(1 for found_in, *_ in found if found_in == name) for name in results}
    if not found:
        return None
    name, qid, doc_id, why = found[0]
    logger.warning(
        "labeler: %d hit(s) got an unusable reply and count as not relevant (first: %s %s/%s: "
        "%s); a re-run asks again",
        len(found),
        name,
        qid,
        doc_id,
        why,
    )
    return Unusable(counts=counts, rule="counted as not relevant, as an unjudged hit")


def warn_shallow_runs(runs: dict[str, Any], k: int) -> None:
    """A run with fewer than k hits for some queries is measured at k all the same (its missing
    ranks count as not relevant): say so, naming the run and its depth."""
    for name, run in runs.items():
        depths = [len(hits) for hits in run.values()]
        shallow = sum(depth < k for depth in depths)
        if shallow:
            logger.warning(
                "run %s: %d of its %d queries have fewer than k = %d hits (as few as %d); their "
                "missing ranks count as not relevant in P@%d, NDCG@%d and hit@%d (give --k %d "
                "to measure at the runs' depth)",
                name,
                shallow,
                len(depths),
                k,
                min(depths),
                k,
                k,
                k,
                min(depths),
            )


def per_query_text(results: dict[str, RunResults], means: dict[str, dict[str, float]]) -> str:
    """``trec_eval -q``'s layout, one block per run: ``runid all NAME``, then ``metric qid
    value`` for every query in the run's order and ``metric all mean`` for each metric. The
    metric names are this tool's (``ndcg@10`` uses exponential gains, so it is not trec_eval's
    ``ndcg_cut_10``: the names keep the two apart)."""
    lines = []
    for name, per_query in results.items():
        lines.append(f"runid\tall\t{name}")
        for metric in means[name]:
            lines += [
                f"{metric}\t{qid}\t{result.metrics[metric]:.4f}"
                for qid, result in per_query.items()
                if metric in result.metrics
            ]
        lines += [f"{metric}\tall\t{mean:.4f}" for metric, mean in means[name].items()]
    return "\n".join(lines) + "\n"


def labels_on_grade_scale(results: dict[str, RunResults]) -> dict[str, dict[str, int]]:
    """The labels as TREC qrels on the 0-3 scale, as a TREC qrels file is read back
    (data.beir.qrels_scale): a hit's grade, or its verdict as 3 (relevant) or 0."""
    return {
        qid: {
            hit.id: hit.grade if hit.grade is not None else 3 * int(hit.relevant)
            for per_query in results.values()
            if qid in per_query
            for hit in per_query[qid].hits
        }
        for qid in dict.fromkeys(q for per_query in results.values() for q in per_query)
    }


def tested_on_labels(report: SearchMetrics, config: SearchEvalConfig) -> LabelerTests | None:
    """The paired tests on the labeler's labels under the one significance rule (the primary
    metric Holm-adjusted over the pairs of runs, at --alpha); None for a single run."""
    if report.comparison is None:
        return None
    primary = PRIMARY_METRIC.format(k=config.k)
    means = {run: values[primary] for run, values in report.mean.items()}
    return labeler_tests(
        report.p_value, list(report.mean), means, primary, config.alpha, config.stat_test
    )


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([SearchEvalConfig], args)
    if not config.run or not config.corpus or not config.labeler:
        raise InputError("give --run, --corpus and --labeler")
    out = Path(config.out)
    run_paths = [config.run, *config.compare]
    refuse_overlap("out", out, search_inputs(config), writes=SEARCH_OUTPUTS)
    runs = read_named_runs(run_paths)  # bad runs are found before a grader is loaded
    if config.track:  # a name the store cannot keep, an unusable store: before any labelling
        from eval.history.names import check_recordable
        from eval.history.store import open_store

        run_name, run = next(iter(runs.items()))
        check_recordable(config.system, config.version, run_name, run)
        open_store(config.track).close()
    warn_shallow_runs(runs, config.k)
    labeler = make_labeler(config.labeler, cache_dir=config.label_cache or out / "labels")
    if not labeler.verdicts:
        raise InputError(
            f"labeler: {config.labeler} gives a score, not a verdict on each hit; rank systems "
            "with it in `relevance-grader zoo` (with a calibration), or rerank by it"
        )
    human, human_pairs, (query_design, pair_design) = read_human(config, runs)
    corpus, queries = read_texts(config.corpus, config.queries)
    results = label_runs(
        labeler, runs, corpus, queries, config.k, batch_queries=config.batch_queries
    )
    unusable = count_unusable(results)
    counts = QrelsLabeler(config.num_relevant_from) if config.num_relevant_from else None
    extra = config.extra_metrics()
    per_run = pooled_metrics(runs, results, config.k, counts, extra)
    for name, per_metric in per_run.items():
        for qid, result in results[name].items():
            result.metrics = {
                metric: values[qid] for metric, values in per_metric.items() if qid in values
            }
    summary = {name: mean_metrics(per_metric) for name, per_metric in per_run.items()}
    graded, binary = inferred_qrels(results)
    write_trec_qrels(out / "inferred_qrels.txt", labels_on_grade_scale(results))
    PerQueryResults(runs=results).write(out / PerQueryResults.FILE)
    if human is not None:  # the judged queries' values under people's judgments
        HumanPerQuery(human=config.human or "", values=human).write(out / HumanPerQuery.FILE)
    else:
        (out / HumanPerQuery.FILE).unlink(missing_ok=True)  # an earlier evaluation's
    (out / "per_query.txt").write_text(per_query_text(results, summary), encoding="utf-8")
    comparison = None
    if len(runs) > 1:
        tested = with_unretrieved(graded, binary, counts)  # R as the summary's MAP has it
        comparison = compare_runs(runs, *tested, config.k, config.stat_test, extra)
    report = SearchMetrics(
        labeler=config.labeler,
        k=config.k,
        # The labeler's scores depend on it: a figure says which arithmetic produced it.
        scoring_dtype=scoring_dtype(),
        mean=summary,
        unusable=unusable,
        comparison=comparison,
        ppi=report_ppi(config, per_run, results, human, human_pairs, (query_design, pair_design)),
    )
    report.write(out / SearchMetrics.FILE)
    print(marked_table(summary, tested_on_labels(report, config)), end="")
    if report.ppi is not None:
        print(f"\n{ppi_heading(report.ppi, config.k)}\n")
        print(ppi_table(report.ppi), end="")
    write_provenance(out, "search", config, None if args is None else list(args))
    print(f"wrote {out}/metrics.json, per_query.json and .txt, inferred_qrels.txt (TREC format)")
    logger.debug(json.dumps(summary))
    if config.report:
        from eval.report.page import write_report

        print(f"wrote {write_report(out)}")
    if config.track:
        from eval.history.record import record_folder

        print(record_folder(config.track, out, config.system, config.version, config.note))
