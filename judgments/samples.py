"""People's samples of judgments, read as qrels (qrels, a judgments JSONL or a judging session)
and against the runs and the draw: which queries are fully judged, the metrics the judgments
give, how the sample was drawn. The search command's use of them is :mod:`eval.search.human`."""

from __future__ import annotations

import logging
from typing import Any

from core.errors import InputError
from data.beir import (
    Qrels,
    Run,
    graded_qrels,
    is_beir_tsv,
    qrels_scale,
    ranked,
    read_qrels,
)
from measure.metrics.ppi_record import SampleDescription
from measure.metrics.retrieval import ranx_metrics

logger = logging.getLogger(__name__)


def human_qrels(path: str, scale: str | None = None) -> Qrels:
    """Human grades from a qrels file, a judgments JSONL or a relevance-grader annotate session
    folder (its assessors' grades folded into one per hit, as its qrels.txt holds them). A qrels
    file's values are on ``scale`` (eval.search --human_scale), else on its format's
    (:func:`data.beir.qrels_scale`: TREC qrels 0-3, a BEIR TSV of 0/1 scores binary); judgments
    carry their grades."""
    from judgments.store import as_qrels, fold, read_judgments, session_folder

    if session_folder(path) is not None or str(path).endswith(".jsonl"):
        return as_qrels(fold(read_judgments(path)))
    return on_grade_scale(graded_qrels(read_qrels(path), path, scale=scale), path)


def human_scale(path: str, scale: str | None = None) -> str:
    """The scale ``path``'s values are read on, in words (metrics.json and the table say it)."""
    from judgments.store import session_folder

    if session_folder(path) is not None or str(path).endswith(".jsonl"):
        return "0-3 (the judgments' grades)"
    read = qrels_scale(path, read_qrels(path), scale)
    if scale is not None:
        return f"{read} (--human_scale)"
    rule = "a BEIR TSV of 0/1 scores: 1 read as 3" if read == "binary" else "TREC-format qrels"
    if read == "0-3" and is_beir_tsv(path):
        rule = "a BEIR TSV with grades above 1"
    return f"{read} ({rule})"


def on_grade_scale(qrels: Qrels, path: str) -> Qrels:
    """Human qrels on the 0-3 scale, as a judgments file must be; a grade off it is refused (NDCG's
    gain 2^g - 1 would count a 4 as 15, a relevant 3 as 7)."""
    from core.records import MAX_GRADE

    off = sorted(
        (q, d, g) for q, docs in qrels.items() for d, g in docs.items() if not 0 <= g <= MAX_GRADE
    )
    if off:
        qid, doc_id, grade = off[0]
        raise InputError(
            f"human: {path}: grade {grade} of {qid}/{doc_id} is off the 0-{MAX_GRADE} scale "
            f"({len(off)} such pair(s)); map the grades onto 0-{MAX_GRADE} first"
        )
    return qrels


def realised_sample(design, judged: set, unit: str, flag: str):
    """Before any labelling: the design the judgments realise. Every judged unit must be drawn;
    a draw judged in part gives the draw restricted to its judged units, with the true n, which
    is a uniform subsample of the draw (of each stratum) because judgments.annotate serves the units
    in a random order: a warning says how many were judged."""
    if design is None:
        return None
    if design.unit != unit:
        raise InputError(f"{flag}: the draw samples {design.unit}; {flag} needs a draw of {unit}")
    extra = sorted(map(str, judged - set(design.drawn)))
    if extra:
        raise InputError(
            f"{flag}: {len(extra)} judged {unit} were not drawn (first: {extra[0]}); the "
            "judgments must be the draw's sample"
        )
    if judged >= set(design.drawn):
        return design
    realised = design.judged_part(judged)
    logger.warning(
        "%s: %d of the %d drawn %s are fully judged; the estimates use those %d (a uniform "
        "subsample of the draw, as relevance-grader annotate serves %s in a random order): judge "
        "the rest for narrower intervals",
        flag,
        len(realised.drawn),
        len(design.drawn),
        unit,
        len(realised.drawn),
        unit,
    )
    return realised


def fully_judged(path: str, runs: dict[str, Run], k: int) -> set[str] | None:
    """The queries of a relevance-grader annotate session whose every hit in each run's top k is
    judged (a query judged in part would count its unjudged hits as not relevant, so it is left out,
    with a warning); None for a qrels file (its unjudged hits are not relevant, as trec_eval reads
    them)."""
    from judgments.store import JudgingSession, session_folder

    folder = session_folder(path)
    if folder is None:
        return None
    session = JudgingSession.of_folder(folder)
    judged_k = session.k if session else k
    if judged_k < k:
        raise InputError(
            f"human: {path} judged each run's top {judged_k}, and relevance-grader search measures "
            f"the top {k} (the k differs): give --k {judged_k}, or judge the session's hits to "
            f"depth {k}"
        )
    qrels = human_qrels(path)
    complete = {
        qid
        for qid in qrels
        if all(
            doc_id in qrels[qid]
            for run in runs.values()
            if qid in run
            for doc_id, _ in ranked(run[qid])[:k]
        )
    }
    partial = sorted(set(qrels) - complete)
    if partial:
        logger.warning(
            "human: %s: %d queries are judged in part and left out (first: %s); their other "
            "hits in the runs' top %d are not judged yet",
            path,
            len(partial),
            partial[0],
            k,
        )
    return complete


def human_metrics(
    path: str,
    runs: dict[str, Run],
    k: int,
    only: set[str] | None = None,
    scale: str | None = None,
    minimum: int = 2,
) -> dict[str, dict[str, dict[str, float]]]:
    """Per-run, per-query metrics of the queries that ``path`` judges (of those in ``only``,
    where given), under those judgments as trec_eval reads them (every judged document counts
    towards the ideal ranking; an unjudged hit is not relevant), on ``scale``; fewer than
    ``minimum`` judged queries are refused (eval.search: judgments.coverage.MIN_JUDGED_QUERIES)."""
    from core.records import label_from_grade
    from judgments.coverage import require_judged

    qrels = human_qrels(path, scale)
    if only is not None:
        qrels = {qid: docs for qid, docs in qrels.items() if qid in only}
    # A query no run has is a wrong file, said before the count of judged queries.
    for name, run in runs.items():
        missing = sorted(set(qrels) - set(run))
        if missing:
            raise InputError(
                f"human: {path} judges {len(missing)} queries that {name} does not have "
                f"(first: {missing[0]}); give judgments for queries of the run"
            )
    require_judged(len(qrels), "queries", f"human: {path}", minimum)
    out = {}
    for name, run in runs.items():
        top = {qid: dict(ranked(run[qid])[:k]) for qid in qrels}
        graded = {qid: dict(qrels[qid]) for qid in top}
        binary = {qid: {d: label_from_grade(g) for d, g in qrels[qid].items()} for qid in top}
        out[name] = ranx_metrics(graded, binary, top, k, recall=False)
    return out


def describe_sample(design: Any) -> SampleDescription:
    """How the human sample was drawn, for metrics.json: relevance-grader ppi's draw (its design,
    seed and sources), or unknown (read as a simple random sample, which PPI++ needs)."""
    if design is None:
        return SampleDescription(drawn_by=None, design="unknown: read as a simple random sample")
    return SampleDescription(
        drawn_by="relevance-grader ppi",
        design=design.describe(),
        seed=design.seed,
        sources=design.sources,
    )


def judged_queries(human: dict[str, dict[str, dict[str, float]]]) -> set[str]:
    """The queries of :func:`human_metrics`' values."""
    return {qid for values in next(iter(human.values())).values() for qid in values}


def read_human_pairs(path: str) -> dict[tuple[str, str], int]:
    """{(qid, doc_id): 0/1} from a judgments JSONL of human labels or a relevance-grader annotate
    folder (several assessors' labels folded into one per hit; error records refused)."""
    from judgments.store import fold, read_judgments

    try:
        labels = fold(read_judgments(path), "label")
    except ValueError as exc:
        raise InputError(f"human_pairs: {exc}") from None
    if len(labels) < 2:
        raise InputError(f"human_pairs: {path} labels {len(labels)} pairs; at least 2 are needed")
    return labels
