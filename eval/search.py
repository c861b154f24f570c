"""The grader as labeler in the retrieval-metric pipeline (per query, and in bulk over runs).

    # one run, labelled by an exported grader (labels cached under OUT/labels/)
    python -m eval.search --run runs/candidates/dense.trec --corpus data/collections/trec-dl-2019-passage \\
        --labeler grader:runs/export/grader --k 10 --out runs/search/dense
    # several runs on the same queries: one table with paired significance tests (ranx)
    python -m eval.search --run runs/candidates/bm25.trec --compare runs/candidates/dense.trec \\
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from data.beir import (
    Collection,
    Qrels,
    Run,
    ranked,
    read_corpus,
    read_queries,
    read_trec_run,
    write_trec_qrels,
)
from data.cli import bounded, parse_config, run_main
from data.io import markdown_table, write_json
from eval.labelers import Hit, HitLabel, Labeler, QrelsLabeler, make_labeler

logger = logging.getLogger(__name__)
PRIMARY_METRIC = "ndcg@{k}"


def _ranx_metrics(
    graded: Qrels, binary: Qrels, run: Run, k: int, recall: bool
) -> dict[str, dict[str, float]]:
    """Per-query metrics with ranx; returns {metric: {qid: value}}."""
    import warnings

    from ranx import Qrels as RanxQrels
    from ranx import Run as RanxRun
    from ranx import evaluate

    names_binary = ["map", "mrr", f"precision@{k}", f"hit_rate@{k}"] + (
        [f"recall@{k}"] if recall else []
    )
    names_graded = [f"ndcg_burges@{k}"]
    out: dict[str, dict[str, float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranx_run = RanxRun(run)
        graded_scores = evaluate(
            RanxQrels(graded),
            ranx_run,
            names_graded,
            return_mean=False,
            make_comparable=True,
        )
        binary_scores = evaluate(
            RanxQrels(binary), ranx_run, names_binary, return_mean=False, make_comparable=True
        )
    qids = list(RanxRun(run).keys())
    rename = {f"ndcg_burges@{k}": f"ndcg@{k}", f"hit_rate@{k}": f"hit@{k}"}
    scores = {**_as_dict(graded_scores, names_graded), **_as_dict(binary_scores, names_binary)}
    for name, values in scores.items():
        out[rename.get(name, name)] = {qid: float(v) for qid, v in zip(qids, values, strict=True)}
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


def evaluate_query(
    query: str,
    hits: Sequence[Hit],
    labeler: Labeler,
    *,
    qid: str = "q",
    k: int = 10,
    num_relevant: int | None = None,
    labels: Sequence[HitLabel] | None = None,
) -> dict[str, Any]:
    """Label one query's ranked hits and compute its metrics."""
    if not hits:
        raise ValueError("hits: at least one hit is needed")
    labels = list(labels) if labels is not None else labeler.label(qid, query, hits)
    graded, binary = _qrels_from_labels(qid, hits, labels)
    _add_unretrieved_relevant(binary, graded, qid, num_relevant)
    run = {qid: {h.doc_id: float(len(hits) - i) for i, h in enumerate(hits)}}
    per_metric = _ranx_metrics(graded, binary, run, k, recall=num_relevant is not None)
    return {
        "hits": [
            {
                "index": i,
                "id": hit.doc_id,
                "relevant": label.relevant,
                "score": label.score,
                "grade": label.grade,
                "justification": label.justification,
            }
            for i, (hit, label) in enumerate(zip(hits, labels, strict=True))
        ],
        "metrics": {name: values[qid] for name, values in per_metric.items()},
        "usage": {"evaluation_input_tokens": sum(label.input_tokens for label in labels)},
    }


@dataclass
class SearchEvalConfig:
    run: str = field(default="", metadata={"help": "TREC run to evaluate."})
    compare: list[str] = field(
        default_factory=list, metadata={"help": "More runs to compare with --run."}
    )
    corpus: str = field(
        default="", metadata={"help": "BEIR folder (or corpus.jsonl) holding the documents."}
    )
    queries: str | None = field(
        default=None, metadata={"help": "queries.jsonl (default: beside the corpus)."}
    )
    labeler: str = field(
        default="",
        metadata={
            "help": "grader:PATH, judge:CONFIG.yaml, qrels:PATH, judgments:PATH, erag:READER.yaml, "
            "erag-em:READER.yaml, answers:QUERIES.jsonl or gold-doc:QRELS."
        },
    )
    k: int = bounded(10, 1, help="Cut-off: hits labelled per query and metric depth.")
    num_relevant_from: str | None = field(
        default=None,
        metadata={
            "help": "qrels file giving each query's number of relevant documents (recall@k)."
        },
    )
    stat_test: str = field(
        default="student", metadata={"help": "ranx paired test: student, fisher, tukey..."}
    )
    out: str = field(default="runs/search", metadata={"help": "Output folder."})
    batch_queries: int = bounded(16, 1, help="Queries labelled per batched grader pass.")
    label_cache: str | None = field(
        default=None, metadata={"help": "Label cache folder (default: OUT/labels)."}
    )


def _load_texts(config: SearchEvalConfig) -> tuple[dict, dict[str, str]]:
    path = Path(config.corpus)
    if path.is_dir():
        collection = Collection.load(path)
        return collection.corpus, read_queries(
            config.queries
        ) if config.queries else collection.queries
    if not config.queries:
        raise ValueError("queries: give --queries with a corpus.jsonl file")
    return read_corpus(path), read_queries(config.queries)


def label_runs(
    config: SearchEvalConfig, labeler: Labeler, runs: dict[str, Run]
) -> dict[str, dict[str, Any]]:
    """Per-run, per-query labels and metrics; every (query, doc) is labelled once across runs."""
    corpus, queries = _load_texts(config)
    results: dict[str, dict[str, Any]] = {}
    for name, run in runs.items():
        per_query: dict[str, Any] = {}
        qids = sorted(run)
        bar = tqdm(total=len(qids), desc=f"labelling {name}", unit="query")
        for start in range(0, len(qids), config.batch_queries):
            batch = []
            for qid in qids[start : start + config.batch_queries]:
                if qid not in queries:
                    raise KeyError(f"query {qid!r} of {name} is not in the queries file")
                hits = []
                for doc_id, _ in ranked(run[qid])[: config.k]:
                    doc = corpus.get(doc_id)
                    if doc is None:
                        raise KeyError(f"document {doc_id!r} of {name} is not in the corpus")
                    hits.append(Hit(doc_id=doc_id, text=doc.text, title=doc.title or None))
                batch.append((qid, queries[qid], hits))
            labelled = labeler.label_many(batch)
            for (qid, _, hits), labels in zip(batch, labelled, strict=True):
                per_query[qid] = {
                    "hits": [
                        {
                            "index": i,
                            "id": h.doc_id,
                            "relevant": lab.relevant,
                            "score": lab.score,
                            "grade": lab.grade,
                            "justification": lab.justification,
                        }
                        for i, (h, lab) in enumerate(zip(hits, labels, strict=True))
                    ],
                    "usage": {"evaluation_input_tokens": sum(lab.input_tokens for lab in labels)},
                }
            bar.update(len(batch))
        bar.close()
        results[name] = per_query
    return results


def pooled_metrics(
    runs: dict[str, Run],
    results: dict[str, dict[str, Any]],
    k: int,
    num_relevant: QrelsLabeler | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """Per-run, per-query metrics against the labels pooled over all runs (as TREC pools
    judgments), so that every run is scored against the same relevant set."""
    graded, binary = inferred_qrels(results)
    out = {}
    for name, run in runs.items():
        top = {qid: dict(ranked(run[qid])[:k]) for qid in results[name]}
        graded_q = {qid: dict(graded.get(qid, {})) for qid in top}
        binary_q = {qid: dict(binary.get(qid, {})) for qid in top}
        if num_relevant is not None:
            for qid in top:
                _add_unretrieved_relevant(binary_q, graded_q, qid, num_relevant.num_relevant(qid))
        out[name] = _ranx_metrics(graded_q, binary_q, top, k, recall=num_relevant is not None)
    return out


def mean_metrics(per_metric: dict[str, dict[str, float]]) -> dict[str, float]:
    return {
        name: sum(values.values()) / len(values) for name, values in per_metric.items() if values
    }


def inferred_qrels(results: dict[str, dict[str, Any]]) -> tuple[Qrels, Qrels]:
    """The labels as qrels (graded and binary), merged across runs."""
    graded: Qrels = {}
    binary: Qrels = {}
    for per_query in results.values():
        for qid, result in per_query.items():
            for hit in result["hits"]:
                grade = hit["grade"] if hit["grade"] is not None else int(hit["relevant"])
                graded.setdefault(qid, {})[hit["id"]] = grade
                binary.setdefault(qid, {})[hit["id"]] = int(hit["relevant"])
    return graded, binary


def compare_runs(
    runs: dict[str, Run], graded: Qrels, binary: Qrels, k: int, stat_test: str
) -> dict[str, Any]:
    """ranx comparison with paired significance tests, on the inferred labels."""
    import warnings

    from ranx import Qrels as RanxQrels
    from ranx import Run as RanxRun
    from ranx import compare

    tables = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranx_runs = []
        for name, run in runs.items():
            ranx_run = RanxRun(run)
            ranx_run.name = name
            ranx_runs.append(ranx_run)
        for qrels, metrics in (
            (graded, [f"ndcg_burges@{k}"]),
            (binary, ["map", "mrr", f"precision@{k}"]),
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


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([SearchEvalConfig], args)
    if not config.run or not config.corpus or not config.labeler:
        raise ValueError("give --run, --corpus and --labeler")
    out = Path(config.out)
    labeler = make_labeler(config.labeler, cache_dir=config.label_cache or out / "labels")
    run_paths = [config.run, *config.compare]
    runs = {Path(p).stem: read_trec_run(p) for p in run_paths}
    results = label_runs(config, labeler, runs)
    counts = QrelsLabeler(config.num_relevant_from) if config.num_relevant_from else None
    per_run = pooled_metrics(runs, results, config.k, counts)
    for name, per_metric in per_run.items():
        for qid, result in results[name].items():
            result["metrics"] = {
                metric: values[qid] for metric, values in per_metric.items() if qid in values
            }
    summary = {name: mean_metrics(per_metric) for name, per_metric in per_run.items()}
    graded, binary = inferred_qrels(results)
    write_trec_qrels(out / "inferred_qrels.txt", graded)
    write_json(out / "per_query.json", results)
    report: dict[str, Any] = {"labeler": config.labeler, "k": config.k, "mean": summary}
    if len(runs) > 1:
        report["comparison"] = compare_runs(runs, graded, binary, config.k, config.stat_test)
    write_json(out / "metrics.json", report)
    print(metrics_table(summary), end="")
    if "comparison" in report:
        for key, table in report["comparison"].items():
            if key.startswith("table_"):
                print(table)
    print(f"wrote {out}/metrics.json, per_query.json, inferred_qrels.txt (TREC format)")
    logger.debug(json.dumps(summary))


if __name__ == "__main__":
    run_main(main)
