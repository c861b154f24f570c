"""Building the zoo's systems: each a TREC run of every query, kept in ``OUT/systems/`` with a
stamp of what it was built from, so that a re-run builds only what changed (resumable).

A run's scores are its order (the first hit scored highest): fusions and reranks compute in full
precision, and the file keeps exactly that order, ties of rounding included.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.io import fingerprint, sha256_path, write_json
from core.records import document_text
from data.beir import Collection, Run, ranked, read_trec_run, write_trec_run
from data.candidates import BM25Retriever, corpus_embeddings, default_index_dir
from measure.labelers import Labeler
from measure.labelers.rerank import rerank
from measure.zoo.definition import (
    BM25System,
    DenseSystem,
    FileSystem,
    LinearSystem,
    RandomSystem,
    RerankSystem,
    RRFSystem,
    ShuffleSystem,
    System,
    ZooDefinition,
)

logger = logging.getLogger(__name__)


@dataclass
class Zoo:
    """The systems built (name → run, in the definition's order) and those that could not be,
    with why (a rerank whose scorer was not given, and what is made from it)."""

    runs: dict[str, Run] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # building (or reading) time
    reused: set[str] = field(default_factory=set)  # read from the files of an earlier build


def in_order(scores: Mapping[str, float], depth: int) -> dict[str, float]:
    """The top ``depth`` of ``scores`` (trec_eval's order) scored depth, depth − 1, ...: the
    order survives the file's six decimals."""
    top = ranked(scores)[:depth]
    return {doc_id: float(len(top) - i) for i, (doc_id, _) in enumerate(top)}


def corpus_texts(collection: Collection, doc_ids: list[str]) -> list[str]:
    """Each document as a retriever indexes it: its title on its own line, then its text."""
    return [document_text(collection.corpus[d].text, collection.corpus[d].title) for d in doc_ids]


def corpus_view(collection: Collection, system: BM25System | DenseSystem) -> tuple[list, list]:
    """The document ids and texts a retriever indexes: the corpus, a seeded share of it, or each
    document cut to its first words."""
    doc_ids = sorted(collection.corpus)
    if system.index_share < 1:
        kept = round(len(doc_ids) * system.index_share)
        doc_ids = sorted(random.Random(f"{system.seed}:share").sample(doc_ids, kept))
    texts = corpus_texts(collection, doc_ids)
    if system.first_words is not None:
        texts = [" ".join(text.split()[: system.first_words]) for text in texts]
    return doc_ids, texts


class ZooBuilder:
    def __init__(
        self,
        collection: Collection,
        qids: Sequence[str],
        scorers: Mapping[str, Labeler],
        out: Path,
        depth: int = 100,
        embedder: str = "minilm-l6",
        index_dir: Path | None = None,
    ) -> None:
        self.collection = collection
        self.qids = list(qids)
        self.scorers = scorers
        self.folder = out / "systems"
        self.depth = depth
        self.embedder_name = embedder
        self.index_dir = index_dir or default_index_dir()
        self._embedder = None
        self._collection_digest: str | None = None
        self._stamps: dict[str, str] = {}

    @property
    def embedder(self):
        if self._embedder is None:
            from models.embedder import Embedder

            self._embedder = Embedder.load(self.embedder_name)
        return self._embedder

    def digest(self, system: System) -> str:
        """What a system's run is made of: its definition, the collection, the queries, the
        depth, the scorer's identity and the systems it uses (by their own digests)."""
        if self._collection_digest is None:
            self._collection_digest = sha256_path(self.collection.root)
        parts = [system.model_dump_json(), self._collection_digest, str(self.depth), *self.qids]
        if isinstance(system, RerankSystem):
            parts.append(self.scorers[system.by].id)
        if isinstance(system, DenseSystem):
            parts.append(self.embedder_name)
        if isinstance(system, FileSystem):
            parts.append(sha256_path(system.path))
        return fingerprint(*parts, *(self._stamps[used] for used in system.uses()))

    def build(self, definition: ZooDefinition) -> Zoo:
        zoo = Zoo()
        self.folder.mkdir(parents=True, exist_ok=True)
        for system in definition.systems:
            why = self._cannot_build(system, zoo)
            if why:
                zoo.skipped[system.name] = why
                continue
            start = time.perf_counter()
            zoo.runs[system.name], built = self._run(system, zoo)
            zoo.seconds[system.name] = round(time.perf_counter() - start, 1)
            if not built:
                zoo.reused.add(system.name)
        return zoo

    def _cannot_build(self, system: System, zoo: Zoo) -> str | None:
        missing = [used for used in system.uses() if used in zoo.skipped]
        if missing:
            return f"uses {missing[0]!r}, which was not built"
        if isinstance(system, RerankSystem) and system.by not in self.scorers:
            return (
                f"its scorer {system.by!r} was not given (--labelers or --scorers {system.by}=SPEC)"
            )
        return None

    def _run(self, system: System, zoo: Zoo) -> tuple[Run, bool]:
        """The system's run, from its file when its stamp matches (False), else built (True)."""
        digest = self.digest(system)
        self._stamps[system.name] = digest
        path, stamp = self.folder / f"{system.name}.trec", self.folder / f"{system.name}.json"
        if path.exists() and _stamped(stamp) == digest:
            logger.info("system %s: built earlier (%s)", system.name, path)
            return read_trec_run(path), False
        print(f"building system {system.name} ({system.kind})", flush=True)
        run = {
            qid: in_order(scores, self.depth) for qid, scores in self._compute(system, zoo).items()
        }
        write_trec_run(path, run, tag=system.name)
        write_json(stamp, {"digest": digest, "system": system.model_dump()})
        return read_trec_run(path), True

    def _compute(self, system: System, zoo: Zoo) -> Run:
        if isinstance(system, BM25System):
            return self._bm25(system)
        if isinstance(system, DenseSystem):
            return self._dense(system)
        if isinstance(system, RerankSystem):
            return self._rerank(system, zoo.runs[system.of])
        if isinstance(system, ShuffleSystem):
            return shuffled(zoo.runs[system.of], system.within, system.seed)
        if isinstance(system, RRFSystem):
            return reciprocal_rank_fusion(self._fused(system, zoo), system.k)
        if isinstance(system, LinearSystem):
            first, second = self._fused(system, zoo)
            return linear_fusion(first, second, system.weight)
        if isinstance(system, FileSystem):
            return self._file(system)
        assert isinstance(system, RandomSystem)
        return random_run(sorted(self.collection.corpus), self.qids, self.depth, system.seed)

    def _queries(self) -> list[str]:
        return [self.collection.queries[qid] for qid in self.qids]

    def _bm25(self, system: BM25System) -> Run:
        doc_ids, texts = corpus_view(self.collection, system)
        retriever = BM25Retriever(
            self.collection, self.index_dir, system.k1, system.b, doc_ids=doc_ids, texts=texts
        )
        found = retriever.search(self._queries(), self.depth)
        return {qid: dict(hits) for qid, hits in zip(self.qids, found, strict=True)}

    def _dense(self, system: DenseSystem) -> Run:
        doc_ids, texts = corpus_view(self.collection, system)
        if system.first_words is None:
            # A share of the corpus holds the same texts: its rows of the whole corpus's stored
            # embeddings (the retrieval runs' own), not a second pass over the documents.
            all_ids = sorted(self.collection.corpus)
            rows = {doc_id: i for i, doc_id in enumerate(all_ids)}
            embedded = corpus_embeddings(
                self.embedder, corpus_texts(self.collection, all_ids), self.index_dir
            )
            documents = embedded[[rows[doc_id] for doc_id in doc_ids]]
        else:
            documents = corpus_embeddings(self.embedder, texts, self.index_dir)
        queries = self.embedder.encode(self._queries())
        depth = min(self.depth, len(doc_ids))
        if system.exact:
            scores = queries @ documents.T
            top = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
            hits = [
                [(int(i), float(row[i])) for i in order]
                for row, order in zip(scores, top, strict=True)
            ]
        else:
            hits = _hnsw_search(documents, queries, depth, system)
        return {
            qid: {doc_ids[i]: score for i, score in found}
            for qid, found in zip(self.qids, hits, strict=True)
        }

    def _file(self, system: FileSystem) -> Run:
        """The run file's judged queries; a document the corpus lacks is refused in one line."""
        from measure.labelers.rerank import check_run_against

        run = read_trec_run(system.path)
        check_run_against(run, system.path, self.collection)
        return {qid: run.get(qid, {}) for qid in self.qids}

    def _fused(self, system: RRFSystem | LinearSystem, zoo: Zoo) -> list[Run]:
        """The runs a fusion combines, each cut to its top ``depth`` hits when given."""
        runs = [zoo.runs[name] for name in system.of]
        if system.depth is None:
            return runs
        return [
            {qid: dict(ranked(hits)[: system.depth]) for qid, hits in run.items()} for run in runs
        ]

    def _rerank(self, system: RerankSystem, base: Run) -> Run:
        return rerank(base, self.collection, self.scorers[system.by], system.depth)


def _stamped(stamp: Path) -> str | None:
    """The digest a system's stamp records (None: no stamp, or a damaged one: build again)."""
    try:
        return json.loads(stamp.read_text(encoding="utf-8")).get("digest")
    except (OSError, ValueError, AttributeError):
        return None


def _hnsw_search(
    documents: np.ndarray, queries: np.ndarray, depth: int, system: DenseSystem
) -> list[list[tuple[int, float]]]:
    """An HNSW index (hnswlib, inner product on unit vectors) built for the system's settings:
    a few seconds for ten thousand documents, so it is not kept."""
    import hnswlib

    index = hnswlib.Index(space="ip", dim=documents.shape[1])
    index.init_index(
        max_elements=len(documents),
        ef_construction=system.ef_construction,
        M=system.m,
        random_seed=system.seed,
    )
    index.set_num_threads(1)  # the graph, hence the run, is the same on every machine
    index.add_items(documents, np.arange(len(documents)))
    index.set_ef(max(system.ef_search, depth))
    labels, distances = index.knn_query(queries, k=depth)
    return [
        [(int(i), float(1.0 - d)) for i, d in zip(row, dist, strict=True)]
        for row, dist in zip(labels, distances, strict=True)
    ]


def shuffled(run: Run, within: int, seed: int) -> Run:
    """The run with each query's top ``within`` hits in a random order (seeded by query)."""
    out: Run = {}
    for qid, scores in run.items():
        order = [doc_id for doc_id, _ in ranked(scores)]
        top = order[:within]
        random.Random(f"{seed}:{qid}").shuffle(top)
        new = top + order[within:]
        out[qid] = {doc_id: float(len(new) - i) for i, doc_id in enumerate(new)}
    return out


def reciprocal_rank_fusion(runs: Sequence[Run], k: int = 60) -> Run:
    """Σ 1 / (k + rank) over the runs that hold a document (Cormack et al., SIGIR 2009)."""
    out: Run = {}
    for qid in sorted(set().union(*runs)):
        fused: dict[str, float] = {}
        for run in runs:
            for rank, (doc_id, _) in enumerate(ranked(run.get(qid, {})), start=1):
                fused[doc_id] = fused.get(doc_id, 0.0) + 1.0 / (k + rank)
        out[qid] = fused
    return out


def _min_max(scores: Mapping[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    span = high - low
    return {doc_id: (s - low) / span if span > 0 else 1.0 for doc_id, s in scores.items()}


def linear_fusion(first: Run, second: Run, weight: float) -> Run:
    """weight × second + (1 − weight) × first, each min-max normalised per query; a document
    one run did not return counts as that run's minimum."""
    out: Run = {}
    for qid in sorted(set(first) | set(second)):
        a, b = _min_max(first.get(qid, {})), _min_max(second.get(qid, {}))
        out[qid] = {
            doc_id: (1 - weight) * a.get(doc_id, 0.0) + weight * b.get(doc_id, 0.0)
            for doc_id in set(a) | set(b)
        }
    return out


def random_run(doc_ids: Sequence[str], qids: Sequence[str], depth: int, seed: int) -> Run:
    """``depth`` documents of the corpus per query, drawn at random (seeded by query)."""
    out: Run = {}
    for qid in qids:
        drawn = random.Random(f"{seed}:{qid}").sample(list(doc_ids), min(depth, len(doc_ids)))
        out[qid] = {doc_id: float(len(drawn) - i) for i, doc_id in enumerate(drawn)}
    return out
