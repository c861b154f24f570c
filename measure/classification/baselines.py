"""Untrained baselines that every grader must beat, scored on exactly the grader's pairs.

- ``bm25``: the BM25 score of the document for the query (bm25s, English stop words), with
  document frequencies from the whole collection when one is given, else from the documents of
  the scored pairs;
- ``cosine``: the cosine similarity of the query and document embeddings of the candidate
  retriever's own embedder (all-MiniLM-L6-v2 by default: mean pooling, L2 normalisation).

Both give unbounded scores; :class:`PlattScaling`, fitted on validation pairs only, turns them
into P(relevant) so that thresholds and calibration metrics mean the same as for a grader.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from core.errors import InputError
from core.records import document_text

BASELINES = ("bm25", "cosine")


def bm25_scores(
    queries: Sequence[str], documents: Sequence[str], corpus: Sequence[str] | None = None
) -> np.ndarray:
    """BM25 score of each (query, document) pair; IDF from ``corpus`` (default: the documents)."""
    from data.candidates import BM25Index

    index_texts = list(corpus) if corpus is not None else list(dict.fromkeys(documents))
    position = {text: i for i, text in enumerate(index_texts)}
    missing = [d for d in dict.fromkeys(documents) if d not in position]
    for text in missing:  # documents outside the given corpus still get a score
        position[text] = len(index_texts)
        index_texts.append(text)
    index = BM25Index(index_texts)
    scores = np.zeros(len(queries), dtype=np.float64)
    by_query: dict[str, list[int]] = {}
    for i, query in enumerate(queries):
        by_query.setdefault(query, []).append(i)
    for query, rows in by_query.items():
        all_scores = index.scores(query)  # 0 for a query of stop words: nothing to match
        for i in rows:
            scores[i] = float(all_scores[position[documents[i]]])
    return scores


def cosine_scores(
    queries: Sequence[str],
    documents: Sequence[str],
    corpus: Sequence[str] | None = None,
    embedder: str = "minilm-l6",
) -> np.ndarray:
    """Cosine similarity of query and document embeddings (each distinct text embedded once).

    Documents of ``corpus`` whose embeddings dense retrieval already stored
    (``data.candidates.corpus_embeddings``) are read from there, not embedded again."""
    from data.candidates import stored_document_vectors
    from models.embedder import Embedder

    model = Embedder.load(embedder)
    unique_queries = list(dict.fromkeys(queries))
    query_vectors = dict(zip(unique_queries, model.encode(unique_queries), strict=True))
    document_vectors = (
        stored_document_vectors(model, corpus, documents) if corpus is not None else {}
    )
    unique_documents = [d for d in dict.fromkeys(documents) if d not in document_vectors]
    document_vectors.update(
        zip(unique_documents, model.encode(unique_documents, show_progress=True), strict=True)
    )
    return np.array(
        [
            float(query_vectors[q] @ document_vectors[d])
            for q, d in zip(queries, documents, strict=True)
        ]
    )


def baseline_scores(
    name: str,
    queries: Sequence[str],
    texts: Sequence[str],
    titles: Sequence[str | None] | None = None,
    corpus: Sequence[str] | None = None,
) -> np.ndarray:
    """Raw scores of baseline ``name`` (one of ``BASELINES``) for each pair."""
    documents = [
        document_text(text, title)
        for text, title in zip(texts, titles or [None] * len(texts), strict=True)
    ]
    if name == "bm25":
        return bm25_scores(queries, documents, corpus)
    if name == "cosine":
        return cosine_scores(queries, documents, corpus)
    raise InputError(f"baseline: expected one of {', '.join(BASELINES)}, got {name!r}")


@dataclass
class PlattScaling:
    """P(relevant) = sigmoid(slope * score + intercept), fitted by logistic regression."""

    slope: float = 1.0
    intercept: float = 0.0

    @classmethod
    def fit(
        cls, scores: np.ndarray, labels: np.ndarray, source: str = "calibration pairs"
    ) -> PlattScaling:
        from sklearn.linear_model import LogisticRegression

        from core.metrics import require_both_classes

        require_both_classes(labels, source)
        model = LogisticRegression(C=1e4).fit(np.asarray(scores).reshape(-1, 1), labels)
        return cls(slope=float(model.coef_[0, 0]), intercept=float(model.intercept_[0]))

    def apply(self, scores: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(self.slope * np.asarray(scores) + self.intercept)))

    def to_dict(self) -> dict[str, Any]:
        return {"method": "platt", **asdict(self)}
