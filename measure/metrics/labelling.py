"""Labelling runs: every run's top-k hits through one labeler (cached by the labeler)."""

from __future__ import annotations

from pathlib import Path

from tqdm.auto import tqdm

from core.errors import InputError
from data.beir import (
    Collection,
    Run,
    ranked,
    read_corpus,
    read_queries,
)
from measure.labelers import Hit, Labeler
from measure.metrics.settings import (
    HitResult,
    QueryResult,
    QueryUsage,
    RunResults,
    SearchEvalConfig,
)


def load_texts(config: SearchEvalConfig) -> tuple[dict, dict[str, str]]:
    path = Path(config.corpus)
    if path.is_dir():
        collection = Collection.load(path)
        return collection.corpus, read_queries(
            config.queries
        ) if config.queries else collection.queries
    if not config.queries:
        raise InputError("queries: give --queries with a corpus.jsonl file")
    return read_corpus(path), read_queries(config.queries)


def label_runs(
    config: SearchEvalConfig, labeler: Labeler, runs: dict[str, Run]
) -> dict[str, RunResults]:
    """Per-run, per-query labels (per_query.json's results, their metrics still to be set);
    every (query, doc) is labelled once across runs."""
    corpus, queries = load_texts(config)
    results: dict[str, RunResults] = {}
    for name, run in runs.items():
        per_query: RunResults = {}
        qids = sorted(run)
        bar = tqdm(total=len(qids), desc=f"labelling {name}", unit="query")
        for start in range(0, len(qids), config.batch_queries):
            batch = []
            for qid in qids[start : start + config.batch_queries]:
                if qid not in queries:
                    raise InputError(f"query {qid!r} of {name} is not in the queries file")
                hits = []
                for doc_id, _ in ranked(run[qid])[: config.k]:
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
