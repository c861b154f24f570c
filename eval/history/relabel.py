"""Two stored evaluations made by different labelers or on different corpora, compared all the
same: both stored runs are labelled again by one labeler (``compare --relabel``), their metrics
computed against the labels pooled over the two (as eval.search pools its runs), and then paired
as any comparison is. Human judgments recorded with either evaluation do not carry over: the
comparison is the new labeler's alone, and says so."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.errors import InputError
from eval.history.stats import compare
from eval.history.store import EvaluationInfo, HistoryStore
from measure.labelers import make_labeler
from measure.metrics.labelling import label_runs
from measure.metrics.retrieval import inferred_qrels, pooled_metrics
from measure.metrics.settings import SearchEvalConfig

if TYPE_CHECKING:
    from eval.history.compare import CompareConfig, EvaluationComparison


def compare_relabelled(
    store: HistoryStore, a: EvaluationInfo, b: EvaluationInfo, config: CompareConfig
) -> EvaluationComparison:
    from eval.history.compare import EvaluationComparison, TopHits, stored_run

    if not config.corpus:
        raise InputError("relabel: give --corpus, the corpus holding both runs' documents")
    k = min(a.k, b.k)
    runs = {"A": stored_run(store, a), "B": stored_run(store, b)}
    common = sorted(set(runs["A"]) & set(runs["B"]))
    if len(common) < 2:
        raise InputError(f"{a.ref} and {b.ref} share {len(common)} queries; at least 2 are needed")
    runs = {name: {qid: run[qid] for qid in common} for name, run in runs.items()}
    settings = SearchEvalConfig(run="A", corpus=config.corpus, labeler=config.relabel, k=k)
    labeler = make_labeler(config.relabel, cache_dir=config.label_cache)
    results = label_runs(settings, labeler, runs)
    per_run = pooled_metrics(runs, results, k)
    metrics = config.metrics or list(per_run["A"])
    unknown = sorted(set(metrics) - set(per_run["A"]))
    if unknown:
        raise InputError(f"metrics: {unknown[0]} is not one of {', '.join(per_run['A'])}")
    compared = {
        metric: compare(
            metric,
            per_run["A"][metric],
            per_run["B"][metric],
            alpha=config.alpha,
            a_name=a.ref,
            b_name=b.ref,
        )
        for metric in metrics
    }
    graded, _ = inferred_qrels(results)
    labels = {
        qid: {doc: float(grade) for doc, grade in docs.items()} for qid, docs in graded.items()
    }
    hits = TopHits((runs["A"], runs["B"]), (labels, labels), k)
    first = next(iter(compared.values()))
    moved = hits.moved(first, config.moved) if config.moved else ()
    return EvaluationComparison(a, b, compared, moved, relabelled_by=config.relabel)
