"""Two stored evaluations made by different labelers or on different corpora, compared all the
same: both stored runs are labelled again by one labeler (``compare --relabel``), their metrics
computed against the labels pooled over the two (as eval.search pools its runs), and then paired
as any comparison is. Human judgments recorded with either evaluation do not carry over: the
comparison is the new labeler's alone, and says so."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.errors import InputError
from data.beir import Run, read_texts
from eval.history.stats import PairedComparison, compare
from eval.history.store import EvaluationInfo
from measure.labelers import make_labeler
from measure.metrics.labelling import label_runs
from measure.metrics.retrieval import inferred_qrels, pooled_metrics


@dataclass(frozen=True)
class Relabelled:
    """Both runs on their common queries, the one labeler's labels of their hits, A − B per
    metric."""

    runs: tuple[Run, Run]
    labels: dict[str, dict[str, float]]  # qid -> doc -> the labeler's label
    metrics: dict[str, PairedComparison]


def relabel_and_compare(
    runs: tuple[Run, Run],
    a: EvaluationInfo,
    b: EvaluationInfo,
    *,
    labeler: str,
    corpus: str | None,
    metrics: Sequence[str],
    alpha: float,
    label_cache: str | None,
) -> Relabelled:
    if not corpus:
        raise InputError("relabel: give --corpus, the corpus holding both runs' documents")
    k = min(a.k, b.k)
    common = sorted(set(runs[0]) & set(runs[1]))
    if len(common) < 2:
        raise InputError(f"{a.ref} and {b.ref} share {len(common)} queries; at least 2 are needed")
    both = {name: {qid: run[qid] for qid in common} for name, run in zip("AB", runs, strict=True)}
    documents, queries = read_texts(corpus)
    results = label_runs(make_labeler(labeler, cache_dir=label_cache), both, documents, queries, k)
    per_run = pooled_metrics(both, results, k)
    metrics = list(metrics) or list(per_run["A"])
    unknown = sorted(set(metrics) - set(per_run["A"]))
    if unknown:
        raise InputError(f"metrics: {unknown[0]} is not one of {', '.join(per_run['A'])}")
    compared = {
        metric: compare(
            metric,
            per_run["A"][metric],
            per_run["B"][metric],
            alpha=alpha,
            a_name=a.ref,
            b_name=b.ref,
        )
        for metric in metrics
    }
    graded, _ = inferred_qrels(results)
    labels = {
        qid: {doc: float(grade) for doc, grade in docs.items()} for qid, docs in graded.items()
    }
    return Relabelled((both["A"], both["B"]), labels, compared)
