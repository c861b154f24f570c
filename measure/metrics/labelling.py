"""Labelling runs: every run's top-k hits through one labeler (cached by the labeler)."""

from __future__ import annotations

from collections.abc import Mapping

from tqdm.auto import tqdm

from core.errors import InputError
from data.beir import Document, Run, ranked
from measure.labelers import Hit, Labeler
from measure.metrics.results import HitResult, QueryResult, QueryUsage, RunResults


def label_runs(
    labeler: Labeler,
    runs: Mapping[str, Run],
    corpus: Mapping[str, Document],
    queries: Mapping[str, str],
    k: int,
    *,
    batch_queries: int = 16,
) -> dict[str, RunResults]:
    """Each run's top ``k`` hits of every query, labelled by ``labeler`` ``batch_queries`` queries
    at a time: per-run, per-query results (their metrics still to be set). The texts come from
    ``corpus`` and ``queries`` (``data.beir.read_texts`` reads them); a cached labeler
    (``make_labeler`` with a cache folder) labels each (query, doc) once across runs."""
    results: dict[str, RunResults] = {}
    for name, run in runs.items():
        per_query: RunResults = {}
        qids = sorted(run)
        bar = tqdm(total=len(qids), desc=f"labelling {name}", unit="query")
        for start in range(0, len(qids), batch_queries):
            batch = []
            for qid in qids[start : start + batch_queries]:
                if qid not in queries:
                    raise InputError(f"query {qid!r} of {name} is not in the queries file")
                hits = []
                for doc_id, _ in ranked(run[qid])[:k]:
                    doc = corpus.get(doc_id)
                    if doc is None:
                        raise InputError(f"document {doc_id!r} of {name} is not in the corpus")
                    hits.append(Hit(doc_id=doc_id, text=doc.text, title=doc.title or None))
                batch.append((qid, queries[qid], hits))
            labelled = labeler.label_many(batch)
            for (qid, _, hits), labels in zip(batch, labelled, strict=True):
                per_query[qid] = QueryResult(
                    hits=[
                        HitResult.of(i, h.doc_id, lab)
                        for i, (h, lab) in enumerate(zip(hits, labels, strict=True))
                    ],
                    usage=QueryUsage(
                        evaluation_input_tokens=sum(lab.input_tokens for lab in labels)
                    ),
                )
            bar.update(len(batch))
        bar.close()
        results[name] = per_query
    return results
