"""Labelers that are untrained scores: what a grader must do better than, and what a retrieval
system is built from (the zoo's reranks use them as scorers).

- ``cosine:EMBEDDER``: the cosine of the query's and the document's embeddings (the dense
  retriever's own score; ``minilm-l6`` is the embedded all-MiniLM-L6-v2);
- ``bm25:COLLECTION``: the document's BM25 score for the query, document frequencies from the
  collection's corpus (the BM25 retriever's own score);
- ``constant:``: every hit relevant (a labeler that knows nothing);
- ``random:SEED``: P(relevant) uniform at random per pair, relevant from 0.5.

The first two give a score, not a verdict (``verdicts`` False): their ``relevant`` is False and
means nothing until a calibration fitted on validation queries turns the score into P(relevant)
and a threshold (the system leaderboard's ``--calibrations``, from a study's baseline rows).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cached_property

import numpy as np

from core.records import document_text
from data.beir import Collection
from measure.labelers import Hit, HitLabel, Labeler

Requests = Sequence[tuple[str, str, Sequence[Hit]]]


class CosineLabeler(Labeler):
    """With ``corpus`` (a collection's texts in the order the dense retriever indexes them), the
    documents' vectors are read from the embeddings the retriever stored for it: the cosine is
    the retriever's own score, and labelling a zoo's pool embeds no document again."""

    verdicts = False

    def __init__(self, embedder: str, corpus: Sequence[str] | None = None) -> None:
        self.embedder_name = embedder
        self.name = f"cosine:{embedder}"
        self.corpus = corpus

    @cached_property
    def embedder(self):
        from models.embedder import Embedder

        return Embedder.load(self.embedder_name)

    @property
    def id(self) -> str:
        model = self.embedder.model
        # Embeddings computed another way differ in their last bits (as the index's key says).
        return f"{self.name}:{self.embedder.max_length}:{model.dtype}"

    def label_many(self, requests: Requests) -> list[list[HitLabel]]:
        queries = list(dict.fromkeys(query for _, query, _ in requests))
        texts = list(
            dict.fromkeys(document_text(h.text, h.title) for _, _, hits in requests for h in hits)
        )
        query_vectors = dict(zip(queries, self.embedder.encode(queries), strict=True))
        text_vectors = self._stored(texts)
        unstored = [text for text in texts if text not in text_vectors]
        text_vectors.update(zip(unstored, self.embedder.encode(unstored), strict=True))
        return [
            [
                HitLabel(
                    relevant=False,
                    score=float(
                        query_vectors[query] @ text_vectors[document_text(h.text, h.title)]
                    ),
                )
                for h in hits
            ]
            for _, query, hits in requests
        ]

    def _stored(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        if self.corpus is None:
            return {}
        from data.candidates import stored_document_vectors

        return stored_document_vectors(self.embedder, self.corpus, texts)


class BM25Labeler(Labeler):
    verdicts = False

    def __init__(self, collection: str) -> None:
        self.collection_path = collection
        self.name = f"bm25:{collection}"

    @cached_property
    def retriever(self):
        from data.candidates import BM25Retriever, default_index_dir

        index_dir = default_index_dir()
        index_dir.mkdir(parents=True, exist_ok=True)
        return BM25Retriever(Collection.load(self.collection_path), index_dir)

    @property
    def id(self) -> str:
        from core.io import sha256_path

        return f"bm25:{sha256_path(self.collection_path)}"

    def label_many(self, requests: Requests) -> list[list[HitLabel]]:
        position = {doc_id: i for i, doc_id in enumerate(self.retriever.doc_ids)}
        out = []
        for _, query, hits in requests:
            scores = self.retriever.index.scores(query)  # 0 for a query of stop words
            out.append(
                [HitLabel(relevant=False, score=float(scores[position[h.doc_id]])) for h in hits]
            )
        return out


class ConstantLabeler(Labeler):
    """Every hit relevant: a system's metrics then only say how many hits it returned."""

    name = "constant"

    def label(self, qid: str, query: str, hits: Sequence[Hit]) -> list[HitLabel]:
        return [HitLabel(relevant=True) for _ in hits]


class RandomLabeler(Labeler):
    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.name = f"random:{seed}"

    def score(self, qid: str, doc_id: str) -> float:
        """Uniform in [0, 1), the same for a pair on every call and machine."""
        digest = hashlib.sha256(f"{self.seed}\0{qid}\0{doc_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def label(self, qid: str, query: str, hits: Sequence[Hit]) -> list[HitLabel]:
        scores = np.array([self.score(qid, h.doc_id) for h in hits])
        return [HitLabel(relevant=bool(s >= 0.5), score=float(s)) for s in scores]
