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
    graded_qrels,
    ranked,
    read_corpus,
    read_named_runs,
    read_qrels,
    read_queries,
    write_trec_qrels,
)
from data.cli import bounded, check_choices, choice, parse_config, run_main
from data.io import markdown_table, refuse_overlap, write_json
from data.provenance import write_provenance
from eval.labelers import Hit, HitLabel, Labeler, QrelsLabeler, make_labeler

logger = logging.getLogger(__name__)
PRIMARY_METRIC = "ndcg@{k}"


def in_trec_eval_order(run: Run, k: int | None = None) -> Run:
    """The run's top ``k`` (all when None) with scores replaced by strictly decreasing ones in
    :func:`data.beir.ranked`'s order, so that ranx, whose tie order is its own argsort's, sees the
    ranking trec_eval sees."""
    out: Run = {}
    for qid, scores in run.items():
        top = ranked(scores)[:k]
        out[qid] = {doc_id: float(len(top) - i) for i, (doc_id, _) in enumerate(top)}
    return out


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
        ranx_run = RanxRun(in_trec_eval_order(run))
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
    qids = list(ranx_run.keys())
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
    first_seen: dict[str, int] = {}
    for i, hit in enumerate(hits):
        if hit.doc_id in first_seen:
            raise ValueError(
                f"hits: id {hit.doc_id!r} is listed twice (hits {first_seen[hit.doc_id]} and {i})"
            )
        first_seen[hit.doc_id] = i
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
    stat_test: str = choice(
        "student",
        ("student", "fisher", "tukey"),
        "ranx's paired test: Student's t, Fisher's randomization or Tukey's HSD.",
    )
    out: str = field(default="runs/search", metadata={"help": "Output folder."})
    batch_queries: int = bounded(16, 1, help="Queries labelled per batched grader pass.")
    label_cache: str | None = field(
        default=None, metadata={"help": "Label cache folder (default: OUT/labels)."}
    )
    human: str | None = field(
        default=None,
        metadata={
            "help": "Human judgments of a random sample of the queries (qrels on the 0-3 scale, "
            "binary 0/1 read as 0/3, a judgments JSONL or an eval.annotate folder; a grade off the "
            "scale is refused): prediction-powered (PPI++) estimates and confidence "
            "intervals of every metric and paired difference. A sample not drawn by eval.ppi is "
            "checked: a warning when the judged queries' labeler NDCG@k differs from the other "
            "queries' (two-sided Mann-Whitney p < 0.01); metrics.json records how it was drawn."
        },
    )
    human_pairs: str | None = field(
        default=None,
        metadata={
            "help": "Human labels of a random sample of the runs' top-k hits (judgments JSONL or "
            "an eval.annotate folder): PPI++ estimates of each run's share of relevant hits in "
            "its top k. Each run's interval uses the judged hits in its top k; the others are "
            "ignored, with a warning and their count in metrics.json (judged_pairs_used)."
        },
    )
    draw: str | None = field(
        default=None,
        metadata={
            "help": "The eval.ppi draw file the human sample came from: the estimate valid under "
            "its design (found by itself in an eval.annotate folder)."
        },
    )
    alpha: float = bounded(
        0.05, 0, 1, help="1 - confidence level of the intervals.", open_low=True, open_high=True
    )
    interval: str = choice("t", ("t", "normal"), "Interval: Student's t (n - 1 df) or normal.")
    report: bool = field(
        default=True,
        metadata={"help": "Also write OUT/report.html, the evaluation as one page (eval.report)."},
    )

    def __post_init__(self) -> None:
        check_choices(self)  # YAML values too, before any labelling is paid for


def load_texts(config: SearchEvalConfig) -> tuple[dict, dict[str, str]]:
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
    corpus, queries = load_texts(config)
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


def human_qrels(path: str) -> Qrels:
    """Human grades from a qrels file, a judgments JSONL or an eval.annotate session folder (its
    assessors' grades folded into one per hit, as its qrels.txt holds them)."""
    from eval.annotate.store import as_qrels, fold, read_judgments, session_folder

    if session_folder(path) is not None or str(path).endswith(".jsonl"):
        return as_qrels(fold(read_judgments(path)))
    return on_grade_scale(graded_qrels(read_qrels(path), path), path)


def on_grade_scale(qrels: Qrels, path: str) -> Qrels:
    """Human qrels on the 0-3 scale, as a judgments file must be; a grade off it is refused (NDCG's
    gain 2^g - 1 would count a 4 as 15, a relevant 3 as 7)."""
    from data.records import MAX_GRADE

    off = sorted(
        (q, d, g) for q, docs in qrels.items() for d, g in docs.items() if not 0 <= g <= MAX_GRADE
    )
    if off:
        qid, doc_id, grade = off[0]
        raise ValueError(
            f"human: {path}: grade {grade} of {qid}/{doc_id} is off the 0-{MAX_GRADE} scale "
            f"({len(off)} such pair(s)); map the grades onto 0-{MAX_GRADE} first"
        )
    return qrels


def human_design(config: SearchEvalConfig):
    """The design the human sample was drawn under (:class:`eval.design.Design`): --draw, or the
    draw recorded by the eval.annotate session that holds the judgments; None for a sample of
    unknown design (read as a uniform draw)."""
    from eval.annotate.store import read_session, session_folder
    from eval.design import design_from_dict, read_design

    if config.draw:
        return read_design(config.draw)
    for path in (config.human, config.human_pairs):
        folder = session_folder(path) if path else None
        draw = read_session(folder).get("draw") if folder else None
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
        raise ValueError(f"draw: a draw of {design.unit} is for {flag}; give {flag}")
    return (design, None) if design.unit == "queries" else (None, design)


def check_sample(design, judged: set, unit: str, flag: str) -> None:
    """Before any labelling: the human sample is the draw's (every drawn unit judged, nothing
    else judged) and its unit is the one ``flag`` estimates with."""
    if design is None:
        return
    if design.unit != unit:
        raise ValueError(f"{flag}: the draw samples {design.unit}; {flag} needs a draw of {unit}")
    extra = sorted(map(str, judged - set(design.drawn)))
    missing = sorted(map(str, set(design.drawn) - judged))
    if extra or missing:
        raise ValueError(
            f"{flag}: the judgments are not the draw's sample ({len(missing)} drawn {unit} not "
            f"judged, {len(extra)} judged but not drawn; first: {(missing or extra)[0]})"
        )


def check_judged_hits(path: str, runs: dict[str, Run], k: int) -> None:
    """An eval.annotate session's judged queries must have every hit of each run's top k judged
    (an unjudged hit would count as not relevant)."""
    from eval.annotate.store import session_folder

    if session_folder(path) is None:
        return
    qrels = human_qrels(path)
    for name, run in runs.items():
        for qid in sorted(set(qrels) & set(run)):
            for doc_id, _ in ranked(run[qid])[:k]:
                if doc_id not in qrels[qid]:
                    raise ValueError(
                        f"human: {path}: run {name}'s top {k} of query {qid!r} holds {doc_id!r}, "
                        "which is not judged; judge it on the page (the same runs, --k >= "
                        f"{k}) or give eval.search the runs and k that were judged"
                    )


def human_metrics(
    path: str, runs: dict[str, Run], k: int
) -> dict[str, dict[str, dict[str, float]]]:
    """Per-run, per-query metrics of the queries that ``path`` judges, under those judgments as
    trec_eval reads them (every judged document counts towards the ideal ranking; an unjudged hit
    is not relevant)."""
    from data.records import label_from_grade

    qrels = human_qrels(path)
    if len(qrels) < 2:
        raise ValueError(f"human: {path} judges {len(qrels)} queries; an interval needs at least 2")
    out = {}
    for name, run in runs.items():
        missing = sorted(set(qrels) - set(run))
        if missing:
            raise ValueError(
                f"human: {path} judges {len(missing)} queries that {name} does not have "
                f"(first: {missing[0]}); give judgments for queries of the run"
            )
        top = {qid: dict(ranked(run[qid])[:k]) for qid in qrels}
        graded = {qid: dict(qrels[qid]) for qid in top}
        binary = {qid: {d: label_from_grade(g) for d, g in qrels[qid].items()} for qid in top}
        out[name] = _ranx_metrics(graded, binary, top, k, recall=False)
    return out


# Below this p the judged queries' labeler values are called implausible for a random draw.
RANDOM_SAMPLE_P = 0.01


def describe_sample(design: Any) -> dict[str, Any]:
    """How the human sample was drawn, for metrics.json: eval.ppi's draw (its design, seed and
    sources), or unknown (read as a simple random sample, which PPI++ needs)."""
    if design is None:
        return {"drawn_by": None, "design": "unknown: read as a simple random sample"}
    return {
        "drawn_by": "eval.ppi",
        "design": design.describe(),
        "seed": design.seed,
        "sources": design.sources,
    }


def check_random_sample(
    config: SearchEvalConfig,
    per_run: dict[str, dict[str, dict[str, float]]],
    judged: set[str],
    design: Any,
) -> dict[str, Any] | None:
    """A sample of unknown design, checked against what a random draw would give: the first
    run's labeler NDCG@k of the judged and of the other queries, compared by a two-sided
    Mann-Whitney (rank-sum) test, with a warning below p = RANDOM_SAMPLE_P. None for an
    eval.ppi draw (random by construction; a stratified one is meant to differ)."""
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
            "sample of the queries; draw them with eval.ppi",
            config.human,
            metric,
            run,
            sum(inside) / len(inside),
            sum(outside) / len(outside),
            p,
            RANDOM_SAMPLE_P,
        )
    test = f"two-sided Mann-Whitney of the labeler's {metric} on {run}, judged vs other queries"
    return {"test": test, "p": p, "random_plausible": p >= RANDOM_SAMPLE_P}


def judged_queries(human: dict[str, dict[str, dict[str, float]]]) -> set[str]:
    """The queries of :func:`human_metrics`' values."""
    return {qid for values in next(iter(human.values())).values() for qid in values}


def _stratified(design: Any) -> bool:
    """A stratified draw gets the estimator valid under its design; a uniform one (or a sample
    of unknown design) gets PPI++, which measured as wide or narrower on uniform draws."""
    return design is not None and design.kind != "uniform"


def _estimator(config: SearchEvalConfig, design: Any) -> str:
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
) -> dict[str, Any]:
    """For every run and metric, and every compared run's paired difference with the first: the
    labeler's mean over all queries, the human-only interval and the PPI++ interval (``human``:
    :func:`human_metrics`); under ``design`` (an :class:`eval.design.Design` of queries) the
    estimates valid under it."""
    from eval.design import design_estimate
    from eval.ppi import estimate_metric, paired_difference

    def estimates(
        labeler: dict[str, dict[str, float]],
        truth: dict[str, dict[str, float]],
        bounds: tuple[float, float],
    ) -> dict[str, Any]:
        return {
            metric: (
                design_estimate(
                    design, values, truth[metric], config.alpha, config.interval, bounds
                )
                if _stratified(design)
                else estimate_metric(values, truth[metric], config.alpha, config.interval, bounds)
            ).to_dict()
            for metric, values in labeler.items()
            if metric in truth
        }

    first, *others = per_run
    judged = {qid for values in human[first].values() for qid in values}
    report: dict[str, Any] = {
        "human": config.human,
        "judged_queries": len(judged),
        "estimator": _estimator(config, design),
        "confidence": 1 - config.alpha,
        # Every metric lies in [0, 1], a difference of two in [-1, 1].
        "runs": {name: estimates(per_run[name], human[name], (0.0, 1.0)) for name in per_run},
        "differences": {},
    }
    for other in others:
        labeler_diff = {
            m: paired_difference(per_run[other][m], per_run[first][m]) for m in per_run[first]
        }
        human_diff = {
            m: paired_difference(human[other][m], human[first][m])
            for m in human[first]
            if m in human[other]
        }
        report["differences"][f"{other} - {first}"] = estimates(
            labeler_diff, human_diff, (-1.0, 1.0)
        )
    return report


def read_human_pairs(path: str) -> dict[tuple[str, str], int]:
    """{(qid, doc_id): 0/1} from a judgments JSONL of human labels or an eval.annotate folder
    (several assessors' labels folded into one per hit; error records refused)."""
    from eval.annotate.store import fold, read_judgments

    try:
        labels = fold(read_judgments(path), "label")
    except ValueError as exc:
        raise ValueError(f"human_pairs: {exc}") from None
    if len(labels) < 2:
        raise ValueError(f"human_pairs: {path} labels {len(labels)} pairs; at least 2 are needed")
    return labels


def pair_estimates(
    config: SearchEvalConfig,
    results: dict[str, dict[str, Any]],
    human: dict[tuple[str, str], int],
    design: Any = None,
) -> dict[str, Any]:
    """Each run's share of relevant hits in its top k, from the labeler's label of every hit and
    the human labels of a random sample of hits (PPI++ over pairs; under ``design``, a draw of
    hits, the estimate valid under it)."""
    from eval.design import design_estimate
    from eval.ppi import estimate_metric

    out = {}
    for name, per_query in results.items():
        labeler = _top_k_labels(per_query)
        truth = {pair: float(human[pair]) for pair in labeler if pair in human}
        if len(truth) < 2:
            raise ValueError(
                f"human_pairs: {config.human_pairs} labels {len(truth)} of {name}'s top-{config.k} "
                "hits; at least 2 are needed"
            )
        arguments = (config.alpha, config.interval, (0.0, 1.0))
        if _stratified(design):
            estimates = design_estimate(design, labeler, truth, *arguments)
        else:
            estimates = estimate_metric(labeler, truth, *arguments)
        out[name] = {"relevant share": estimates.to_dict()}
    return out


def _top_k_labels(per_query: dict[str, Any]) -> dict[tuple[str, str], float]:
    """{(qid, doc_id): the labeler's 0/1} of one run's labelled top k."""
    return {
        (qid, hit["id"]): float(hit["relevant"])
        for qid, result in per_query.items()
        for hit in result["hits"]
    }


def pairs_used(
    config: SearchEvalConfig, results: dict[str, dict[str, Any]], human: dict
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
                "eval.ppi --unit hits --k %d draws one)",
                config.human_pairs,
                len(human) - count,
                len(human),
                name,
                config.k,
                count,
                config.k,
            )
    return used


def ppi_table(report: dict[str, Any]) -> str:
    """The PPI report as one Markdown table."""

    def cell(interval: dict[str, float]) -> str:
        return f"{interval['estimate']:.3f} [{interval['low']:.3f}, {interval['high']:.3f}]"

    rows = [
        [
            system,
            metric,
            f"{entry['labeler_mean']:.3f}",
            cell(entry["human_only"]),
            cell(entry["ppi"]),
            f"{entry['ppi']['lam']:.2f}",
            f"{entry['effective_human_queries']:.1f}",
        ]
        for group in ("runs", "differences", "pairs")
        if group in report
        for system, metrics in report[group].items()
        for metric, entry in metrics.items()
    ]
    confidence = f"{report['confidence']:.0%}"
    header = [
        "system",
        "metric",
        "labeler mean",
        f"human only ({confidence})",
        f"PPI++ ({confidence})",
        "λ",
        "worth (human queries)",
    ]
    return markdown_table(header, rows)


def _ppi_heading(ppi: dict[str, Any], k: int) -> str:
    """The line above the PPI table: what was judged, and how many sampled hits each run used."""
    used = ppi.get("judged_pairs_used") or {}
    hits = f"{ppi.get('judged_pairs', 0)} sampled hits"
    if any(count < ppi["judged_pairs"] for count in used.values()):
        counts = ", ".join(f"{name} {count}" for name, count in used.items())
        hits += f" (in each run's top {k}, the ones used: {counts}; the others ignored)"
    queries = f"{ppi['judged_queries']} queries"
    heading = f"With human judgments for {queries} and {hits} ({ppi['estimator']}):"
    if ppi.get("judged_queries") and "sample" in ppi:
        heading += f"\nThe judged queries: {ppi['sample']['design']}"
    return heading


def compare_runs(
    runs: dict[str, Run], graded: Qrels, binary: Qrels, k: int, stat_test: str
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


# What eval.search writes into --out (the folder may hold other files, the runs among them).
SEARCH_OUTPUTS = ("metrics.json", "per_query.json", "inferred_qrels.txt", "labels")


def search_inputs(config: SearchEvalConfig) -> list[tuple[str, str | None]]:
    """(flag, path) of every file or folder the command reads, the labeler's among them."""
    labeler_path = config.labeler.partition(":")[2]
    return [
        ("run", config.run),
        *(("compare", path) for path in config.compare),
        ("corpus", config.corpus),
        ("human", config.human),
        ("human_pairs", config.human_pairs),
        ("labeler", labeler_path if Path(labeler_path).exists() else None),
    ]


def read_human(config: SearchEvalConfig, runs: dict[str, Run]) -> tuple[Any, Any, tuple]:
    """(--human's per-run metrics, --human_pairs' labels, their designs), checked against the
    runs and the draw before any hit is labelled."""
    designs = sample_designs(config)
    human = human_metrics(config.human, runs, config.k) if config.human else None
    if config.human and human is not None:
        check_judged_hits(config.human, runs, config.k)
        check_sample(designs[0], judged_queries(human), "queries", "--human")
    human_pairs = read_human_pairs(config.human_pairs) if config.human_pairs else None
    if human_pairs is not None:
        check_sample(designs[1], set(human_pairs), "hits", "--human_pairs")
    return human, human_pairs, designs


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([SearchEvalConfig], args)
    if not config.run or not config.corpus or not config.labeler:
        raise ValueError("give --run, --corpus and --labeler")
    out = Path(config.out)
    run_paths = [config.run, *config.compare]
    refuse_overlap("out", out, search_inputs(config), writes=SEARCH_OUTPUTS)
    runs = read_named_runs(run_paths)  # bad runs are found before a grader is loaded
    labeler = make_labeler(config.labeler, cache_dir=config.label_cache or out / "labels")
    human, human_pairs, (query_design, pair_design) = read_human(config, runs)
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
    if human is not None:
        report["ppi"] = ppi_estimates(config, per_run, human, query_design)
        report["ppi"]["sample"] = describe_sample(query_design) | {
            "check": check_random_sample(config, per_run, judged_queries(human), query_design)
        }
    if human_pairs is not None:
        pairs = pair_estimates(config, results, human_pairs, pair_design)
        report.setdefault(
            "ppi",
            {
                "runs": {},
                "differences": {},
                "judged_queries": 0,
                "confidence": 1 - config.alpha,
                "estimator": _estimator(config, pair_design),
            },
        )
        report["ppi"]["pairs"] = pairs
        report["ppi"]["judged_pairs"] = len(human_pairs)
        report["ppi"]["judged_pairs_used"] = pairs_used(config, results, human_pairs)
        report["ppi"]["pairs_sample"] = describe_sample(pair_design)
    write_json(out / "metrics.json", report)
    print(metrics_table(summary), end="")
    if "comparison" in report:
        for key, table in report["comparison"].items():
            if key.startswith("table_"):
                print(table)
    if "ppi" in report:
        print(f"\n{_ppi_heading(report['ppi'], config.k)}\n")
        print(ppi_table(report["ppi"]), end="")
    write_provenance(out, "eval.search", config, None if args is None else list(args))
    print(f"wrote {out}/metrics.json, per_query.json, inferred_qrels.txt (TREC format)")
    logger.debug(json.dumps(summary))
    if config.report:
        from eval.report.page import write_report

        print(f"wrote {write_report(out)}")


if __name__ == "__main__":
    run_main(main)
