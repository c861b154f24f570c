"""Retrieval metrics through ranx, with trec_eval's tie rule: one query's hits (the library's
:func:`evaluate_query`), a run's queries pooled, and paired tests between runs.

Graded NDCG with the 2^rel − 1 gain (``ndcg_burges``); MAP, MRR, precision, recall and hit rate
on binary relevance (grade >= 2, or the labeler's verdict)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import InputError
from core.io import markdown_table
from data.beir import (
    Qrels,
    Run,
    ranked,
)
from measure.labelers import Hit, HitLabel, Labeler, QrelsLabeler
from measure.metrics.names import JUDGED, MetricName, parse_metric, standard_metric_names
from measure.metrics.results import HitResult, RunResults


def in_trec_eval_order(run: Run, k: int | None = None) -> Run:
    """The run's top ``k`` (all when None) with scores replaced by strictly decreasing ones in
    :func:`data.beir.ranked`'s order, so that ranx, whose tie order is its own argsort's, sees the
    ranking trec_eval sees."""
    out: Run = {}
    for qid, scores in run.items():
        top = ranked(scores)[:k]
        out[qid] = {doc_id: float(len(top) - i) for i, (doc_id, _) in enumerate(top)}
    return out


def ranx_metrics(
    graded: Qrels,
    binary: Qrels,
    run: Run,
    k: int,
    recall: bool,
    extra: Sequence[MetricName] = (),
) -> dict[str, dict[str, float]]:
    """Per-query metrics with ranx, the standard set and ``extra`` (judged@c aside: it needs
    the labels' provenance, :func:`judged_at`); returns {metric: {qid: value}}."""
    import warnings

    from ranx import Qrels as RanxQrels
    from ranx import Run as RanxRun
    from ranx import evaluate

    wanted = [
        *(parse_metric(name, k) for name in standard_metric_names(k, recall)),
        *(m for m in extra if m.base != JUDGED),
    ]
    out: dict[str, dict[str, float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranx_run = RanxRun(in_trec_eval_order(run))
        qids = list(ranx_run.keys())
        for qrels, graded_metric in ((graded, True), (binary, False)):
            metrics = [m for m in wanted if m.graded == graded_metric]
            names = [m.ranx for m in metrics]
            scores = _as_dict(
                evaluate(
                    RanxQrels(qrels), ranx_run, names, return_mean=False, make_comparable=True
                ),
                names,
            )
            for metric in metrics:
                values = scores[metric.ranx]
                out[metric.name] = {q: float(v) for q, v in zip(qids, values, strict=True)}
    return out


def judged_at(
    top: dict[str, list[str]], judged: dict[str, set[str]], extra: Sequence[MetricName]
) -> dict[str, dict[str, float]]:
    """judged@c for each ``extra`` judged metric: per query, the share of its top c hits (of
    those it has, when fewer) that are in ``judged``."""
    out: dict[str, dict[str, float]] = {}
    for metric in (m for m in extra if m.base == JUDGED):
        assert metric.cutoff is not None
        out[metric.name] = {
            qid: sum(d in judged.get(qid, ()) for d in docs[: metric.cutoff])
            / max(1, len(docs[: metric.cutoff]))
            for qid, docs in top.items()
        }
    return out


def _as_dict(scores: Any, names: list[str]) -> dict[str, Any]:
    """ranx returns a dict for several metrics and a bare array for one."""
    return scores if isinstance(scores, dict) else {names[0]: scores}


def _qrels_from_labels(
    qid: str, hits: Sequence[Hit], labels: Sequence[HitLabel]
) -> tuple[Qrels, Qrels]:
    graded = {qid: {h.doc_id: lab.gain_grade for h, lab in zip(hits, labels, strict=True)}}
    binary = {qid: {h.doc_id: int(lab.relevant) for h, lab in zip(hits, labels, strict=True)}}
    return graded, binary


def _add_unretrieved_relevant(
    binary: Qrels, graded: Qrels, qid: str, num_relevant: int | None
) -> None:
    """Recall needs every relevant document; stand-ins for those the list missed."""
    if num_relevant is None:
        return
    found = sum(binary[qid].values())
    for i in range(max(0, num_relevant - found)):
        binary[qid][f"__unretrieved_{i}"] = 1
        graded[qid].setdefault(f"__unretrieved_{i}", 0)


def metrics_table(mean: dict[str, dict[str, float]], digits: int = 4) -> str:
    """One row per run of its mean metrics (Markdown)."""
    names = sorted(next(iter(mean.values())))
    rows = [[run, *(f"{values[m]:.{digits}f}" for m in names)] for run, values in mean.items()]
    return markdown_table(["run", *names], rows)


@dataclass
class QueryEvaluation:
    """:func:`evaluate_query`'s result: each hit's label, the query's metrics and the labeler's
    input tokens."""

    hits: list[HitResult]
    metrics: dict[str, float]
    evaluation_input_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "hits": [hit.model_dump(mode="json") for hit in self.hits],
            "metrics": self.metrics,
            "usage": {"evaluation_input_tokens": self.evaluation_input_tokens},
        }


def evaluate_query(
    query: str,
    hits: Sequence[Hit],
    labeler: Labeler,
    *,
    qid: str = "q",
    k: int = 10,
    num_relevant: int | None = None,
    labels: Sequence[HitLabel] | None = None,
    extra: Sequence[MetricName] = (),
) -> QueryEvaluation:
    """Label one query's ranked hits (or take their ``labels``) and compute its metrics."""
    if not hits:
        raise InputError("hits: at least one hit is needed")
    first_seen: dict[str, int] = {}
    for i, hit in enumerate(hits):
        if hit.doc_id in first_seen:
            raise InputError(
                f"hits: id {hit.doc_id!r} is listed twice (hits {first_seen[hit.doc_id]} and {i})"
            )
        first_seen[hit.doc_id] = i
    labels = list(labels) if labels is not None else labeler.label(qid, query, hits)
    graded, binary = _qrels_from_labels(qid, hits, labels)
    _add_unretrieved_relevant(binary, graded, qid, num_relevant)
    run = {qid: {h.doc_id: float(len(hits) - i) for i, h in enumerate(hits)}}
    per_metric = ranx_metrics(graded, binary, run, k, num_relevant is not None, extra)
    judged = {h.doc_id for h, label in zip(hits, labels, strict=True) if label.has_judgment}
    per_metric |= judged_at({qid: [h.doc_id for h in hits[:k]]}, {qid: judged}, extra)
    return QueryEvaluation(
        hits=[
            HitResult.of(i, hit.doc_id, label)
            for i, (hit, label) in enumerate(zip(hits, labels, strict=True))
        ],
        metrics={name: values[qid] for name, values in per_metric.items()},
        evaluation_input_tokens=sum(label.input_tokens for label in labels),
    )


def pooled_metrics(
    runs: dict[str, Run],
    results: dict[str, RunResults],
    k: int,
    num_relevant: QrelsLabeler | None = None,
    extra: Sequence[MetricName] = (),
) -> dict[str, dict[str, dict[str, float]]]:
    """Per-run, per-query metrics against the labels pooled over all runs (as TREC pools
    judgments), so that every run is scored against the same relevant set."""
    graded, binary = inferred_qrels(results)
    judged = judged_docs(results)
    out = {}
    for name, run in runs.items():
        top = {qid: dict(ranked(run[qid])[:k]) for qid in results[name]}
        graded_q = {qid: dict(graded.get(qid, {})) for qid in top}
        binary_q = {qid: dict(binary.get(qid, {})) for qid in top}
        if num_relevant is not None:
            for qid in top:
                _add_unretrieved_relevant(binary_q, graded_q, qid, num_relevant.num_relevant(qid))
        out[name] = ranx_metrics(graded_q, binary_q, top, k, num_relevant is not None, extra)
        in_order = {qid: [doc for doc, _ in ranked(run[qid])[:k]] for qid in top}
        out[name] |= judged_at(in_order, judged, extra)
    return out


def judged_docs(results: dict[str, RunResults]) -> dict[str, set[str]]:
    """Per query, the hits some run's labels hold a judgment for."""
    judged: dict[str, set[str]] = {}
    for per_query in results.values():
        for qid, result in per_query.items():
            docs = judged.setdefault(qid, set())
            docs.update(hit.id for hit in result.hits if hit.judged)
    return judged


def with_unretrieved(
    graded: Qrels, binary: Qrels, num_relevant: QrelsLabeler | None
) -> tuple[Qrels, Qrels]:
    """The pooled labels with stand-ins for the relevant documents no run retrieved (R from
    ``num_relevant``), as :func:`pooled_metrics` scores against: the significance tests must
    test the same MAP the summary reports."""
    if num_relevant is None:
        return graded, binary
    graded = {qid: dict(docs) for qid, docs in graded.items()}
    binary = {qid: dict(docs) for qid, docs in binary.items()}
    for qid in list(binary):
        _add_unretrieved_relevant(binary, graded, qid, num_relevant.num_relevant(qid))
    return graded, binary


def mean_metrics(per_metric: dict[str, dict[str, float]]) -> dict[str, float]:
    return {
        name: sum(values.values()) / len(values) for name, values in per_metric.items() if values
    }


def inferred_qrels(results: dict[str, RunResults]) -> tuple[Qrels, Qrels]:
    """The labels as qrels (graded and binary), merged across runs."""
    graded: Qrels = {}
    binary: Qrels = {}
    for per_query in results.values():
        for qid, result in per_query.items():
            for hit in result.hits:
                graded.setdefault(qid, {})[hit.id] = hit.gain_grade
                binary.setdefault(qid, {})[hit.id] = int(hit.relevant)
    return graded, binary


def compare_runs(
    runs: dict[str, Run],
    graded: Qrels,
    binary: Qrels,
    k: int,
    stat_test: str,
    extra: Sequence[MetricName] = (),
) -> dict[str, Any]:
    """ranx comparison with paired significance tests on the inferred labels, over each run's
    top ``k`` in trec_eval's order (the depth and order of the summary's metrics)."""
    import warnings

    from ranx import Qrels as RanxQrels
    from ranx import Run as RanxRun
    from ranx import compare

    tables = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranx_runs = []
        for name, run in runs.items():
            ranx_run = RanxRun(in_trec_eval_order(run, k))
            ranx_run.name = name
            ranx_runs.append(ranx_run)
        tested = [m for m in extra if m.base != JUDGED]
        for qrels, metrics in (
            (graded, [f"ndcg_burges@{k}", *(m.ranx for m in tested if m.graded)]),
            (binary, ["map", "mrr", f"precision@{k}", *(m.ranx for m in tested if not m.graded)]),
        ):
            report = compare(
                RanxQrels(qrels),
                ranx_runs,
                metrics=metrics,
                stat_test=stat_test,
                make_comparable=True,
            )
            tables.update({metric: report.to_dict() for metric in metrics})
            tables[f"table_{metrics[0]}"] = str(report)
    return tables


def label_list_metrics(lists: dict[str, Sequence[float]], k: int) -> dict[str, dict[str, float]]:
    """Metrics of ranked lists from their own labels in [0, 1] (binary, or eRAG's F1 per
    document), {qid: metrics}: NDCG@k with the labels as linear gains against the ideal order of
    the list's labels and MRR of the first label >= 0.5, through ranx; precision = the mean label
    over k and hit = the largest label (for binary labels, ranx's precision and hit rate)."""
    import warnings

    from ranx import Qrels as RanxQrels
    from ranx import Run as RanxRun
    from ranx import evaluate

    tops = {qid: [float(v) for v in values[:k]] for qid, values in lists.items()}
    out = {
        qid: {"precision": sum(top) / k, "hit": max(top, default=0.0), "mrr": 0.0, "ndcg": 0.0}
        for qid, top in tops.items()
    }
    run = {
        qid: {f"d{i}": float(len(top) - i) for i in range(len(top))} for qid, top in tops.items()
    }
    # ranx takes integer relevance: the labels in millionths are the same linear gains.
    gains = {
        q: {f"d{i}": round(v * 1e6) for i, v in enumerate(t) if v > 0} for q, t in tops.items()
    }
    found = {q: {f"d{i}": 1 for i, v in enumerate(t) if v >= 0.5} for q, t in tops.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for metric, qrels in ((f"ndcg@{k}", gains), ("mrr", found)):
            judged = {q: docs for q, docs in qrels.items() if docs}
            if not judged:
                continue
            scores = evaluate(
                RanxQrels(judged),
                RanxRun({q: run[q] for q in judged}),
                metric,
                return_mean=False,
                make_comparable=True,
            )
            for qid, value in zip(judged, scores, strict=True):
                out[qid][metric.split("@")[0]] = float(value)
    return out


def compile_ranx(k: int = 10) -> None:
    """Have ranx compile what the commands use, on a toy run: ranx compiles its metrics and tests
    with numba on first use (about 20 s on 2 cores) and keeps them in numba's cache beside it, so
    ``install.sh`` runs this once instead of a user's first evaluation paying for it."""
    from ranx import Qrels, Run, evaluate

    from measure.metrics.names import STAT_TESTS

    graded = {"q1": {"d1": 3, "d2": 0}, "q2": {"d3": 2, "d4": 1}}
    binary = {qid: {d: int(g >= 2) for d, g in docs.items()} for qid, docs in graded.items()}
    runs = {
        "a": {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d4": 2.0, "d3": 1.0}},
        "b": {"q1": {"d2": 2.0, "d1": 1.0}, "q2": {"d3": 2.0}},
    }
    ranx_metrics(graded, binary, runs["a"], k, recall=True)
    # The labeler leaderboard's human ranking: trec_eval's NDCG (linear gains), P and MAP at k.
    evaluate(Qrels(graded), Run(runs["a"]), [f"ndcg@{k}", f"precision@{k}", f"map@{k}"])
    for stat_test in STAT_TESTS:
        compare_runs(runs, graded, binary, k, stat_test)
    label_list_metrics({"q1": [1.0, 0.0, 0.5]}, k)
