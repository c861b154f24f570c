"""Candidate pairs: the top-k documents per query from one or more retrievers.

    relevance-grader candidates --collection data/collections/trec-dl-2019-passage --out runs/candidates
    relevance-grader candidates --collection data/collections/adi --retrievers bm25 --k 5 --out /tmp/adi
    relevance-grader candidates --config my-candidates.yaml --k 100   # a YAML of the fields below

Each retriever writes ``{out}/{name}.pairs.jsonl`` (pairs with ``rank`` and ``retriever_score``)
and ``{out}/{name}.trec`` (a TREC run), so later steps can label and compare them;
``{out}/pool.pairs.jsonl`` holds every retrieved pair once (TREC-style pooling of the retrievers'
top-k: what a teacher labels when the collection has no qrels). Retrievers:

- ``dense``: a sentence embedder (default ``minilm-l6``, offline) + an HNSW index (hnswlib, inner
  product on unit vectors = cosine), as in the paper (bge-small + HNSW, top-5).
- ``bm25``: bm25s (Lucene BM25 variant, English stop words).

Embeddings and indexes are named by the content they were built from (corpus, embedder) and kept
in the machine's cache (``<cache>/indexes``, or ``--index_dir``), so every run and stage on this
machine builds each one once; each file is written under a temporary name and renamed into
place, so processes that build the same index at once never read a half-written one.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from core.cli import bounded, parse_config, run_main
from core.errors import InputError
from core.io import fingerprint, write_json, write_jsonl
from core.records import Pair, document_text
from data.beir import Collection, Run, write_trec_run

if TYPE_CHECKING:
    from models.embedder import Embedder

logger = logging.getLogger(__name__)
RETRIEVERS = ("dense", "bm25")
POOL_FILE = "pool.pairs.jsonl"


@dataclass
class CandidatesConfig:
    collection: str = field(
        default="data/collections/trec-dl-2019-passage",
        metadata={"help": "BEIR-layout folder (corpus.jsonl, queries.jsonl, optional qrels.tsv)."},
    )
    out: str = field(default="runs/candidates", metadata={"help": "Output folder."})
    retrievers: list[str] = field(
        default_factory=lambda: ["dense", "bm25"], metadata={"help": "dense and/or bm25."}
    )
    k: int = bounded(10, 1, help="Documents per query (the paper used 5).")
    embedder: str = field(
        default="minilm-l6", metadata={"help": "Embedder name or path for dense retrieval."}
    )
    embed_batch_size: int = bounded(64, 1)
    embed_max_length: int = field(
        default=256, metadata={"help": "Token limit per text for the embedder."}
    )
    hnsw_m: int = field(default=32, metadata={"help": "HNSW graph degree."})
    hnsw_ef_construction: int = field(default=200)
    hnsw_ef_search: int = field(default=200, metadata={"help": "Search breadth (>= k)."})
    judged_queries_only: bool = field(
        default=False, metadata={"help": "Only queries that have qrels."}
    )
    device: str | None = field(
        default=None, metadata={"help": "Embedder device (cpu, cuda); default: cpu."}
    )
    index_dir: str | None = field(
        default=None,
        metadata={"help": "Where embeddings and indexes are kept (default: <cache>/indexes)."},
    )


def default_index_dir() -> Path:
    """The machine-wide home of content-keyed embeddings and indexes (beside the models)."""
    from core.io import cache_dir

    return cache_dir() / "indexes"


def _temporary(path: Path) -> Path:
    """A name of this process's own beside ``path``, renamed over it once complete."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _doc_text(collection: Collection, doc_id: str) -> str:
    doc = collection.corpus[doc_id]
    return document_text(doc.text, doc.title)


def corpus_texts(collection: Collection) -> list[str]:
    """Every document as the retrievers and baselines read it, in the order of its id: the order
    the retrievers index, so that the cosine baseline finds the dense index's embeddings."""
    return [_doc_text(collection, doc_id) for doc_id in sorted(collection.corpus)]


def stored_embeddings_path(embedder: Embedder, texts: Sequence[str], index_dir: Path) -> Path:
    """Where the embeddings of ``texts`` (in that order) by ``embedder`` are kept: named by the
    embedder, its token limit, its numerics and the texts, so that nothing computed otherwise is
    ever read back."""
    model = embedder.model
    # dtype and attention kernel: embeddings computed another way differ in their last bits.
    numerics = f"{model.dtype}/{model.config._attn_implementation}"
    key = fingerprint(embedder.name, str(embedder.max_length), numerics, *texts)
    return index_dir / f"dense-{key}.npy"


def corpus_embeddings(
    embedder: Embedder, texts: Sequence[str], index_dir: Path | None = None, batch_size: int = 64
) -> np.ndarray:
    """The embeddings of a corpus's ``texts`` (rows in their order), computed once per content
    and kept in ``index_dir`` (default: the machine's cache): dense retrieval builds its index on
    them and the cosine baseline reads its documents' rows from them."""
    path = stored_embeddings_path(embedder, texts, index_dir or default_index_dir())
    if path.exists():
        embeddings = np.load(path)
        logger.info("reusing %d document embeddings from %s", len(embeddings), path)
        return embeddings
    embeddings = embedder.encode(
        texts, batch_size=batch_size, show_progress=True, desc="embedding corpus"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(_temporary(path), "wb") as handle:
        np.save(handle, embeddings)
    os.replace(_temporary(path), path)
    return embeddings


def stored_document_vectors(
    embedder: Embedder, corpus: Sequence[str], wanted: Iterable[str], index_dir: Path | None = None
) -> dict[str, np.ndarray]:
    """The rows of the ``wanted`` texts in the embeddings :func:`corpus_embeddings` stored for
    ``corpus`` (its texts in index order), read without loading the rest; empty when none are
    stored. The cosine baseline and labeler score with the dense retriever's own vectors, so a
    corpus is embedded once and the cosine is exactly the retriever's score."""
    path = stored_embeddings_path(embedder, corpus, index_dir or default_index_dir())
    if not path.exists():
        return {}
    wanted = set(wanted)
    rows = np.load(path, mmap_mode="r")
    return {text: np.asarray(rows[i]) for i, text in enumerate(corpus) if text in wanted}


class DenseRetriever:
    """Embedder + HNSW index over a corpus, persisted in ``index_dir`` and reused."""

    def __init__(self, config: CandidatesConfig, collection: Collection, index_dir: Path) -> None:
        import hnswlib

        from models.embedder import Embedder

        self.config = config
        self.doc_ids = sorted(collection.corpus)
        texts = corpus_texts(collection)
        self.embedder = Embedder.load(
            config.embedder, max_length=config.embed_max_length, device=config.device
        )
        embeddings = corpus_embeddings(
            self.embedder, texts, index_dir, batch_size=config.embed_batch_size
        )
        index_path = stored_embeddings_path(self.embedder, texts, index_dir).with_suffix(".hnsw")
        self.index = hnswlib.Index(space="ip", dim=embeddings.shape[1])
        if index_path.exists():
            self.index.load_index(str(index_path), max_elements=len(self.doc_ids))
        else:
            self.index.init_index(
                max_elements=len(self.doc_ids),
                ef_construction=config.hnsw_ef_construction,
                M=config.hnsw_m,
            )
            self.index.add_items(embeddings, np.arange(len(self.doc_ids)))
            self.index.save_index(str(_temporary(index_path)))
            os.replace(_temporary(index_path), index_path)

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        k = min(k, len(self.doc_ids))
        self.index.set_ef(max(self.config.hnsw_ef_search, k))
        vectors = self.embedder.encode(list(queries), batch_size=self.config.embed_batch_size)
        labels, distances = self.index.knn_query(vectors, k=k)
        # hnswlib's "ip" space returns 1 - inner product; report the cosine similarity.
        return [
            [(self.doc_ids[int(i)], float(1.0 - d)) for i, d in zip(row, dist, strict=True)]
            for row, dist in zip(labels, distances, strict=True)
        ]


class BM25Index:
    """The project's one BM25: bm25s (Lucene's variant) over texts with English stop words, for
    retrieval and for the BM25 baseline's pair scores alike. With ``path``, kept there and reused."""

    def __init__(
        self, texts: Sequence[str], path: Path | None = None, k1: float = 1.5, b: float = 0.75
    ) -> None:
        import bm25s

        self.bm25s = bm25s
        if path is not None and (path / "params.index.json").exists():
            self.model = bm25s.BM25.load(str(path))
            return
        self.model = bm25s.BM25(k1=k1, b=b)
        show = len(texts) > 10_000
        self.model.index(
            bm25s.tokenize(list(texts), stopwords="en", show_progress=show), show_progress=show
        )
        if path is not None:
            staging = _temporary(path)
            self.model.save(str(staging), show_progress=False)
            try:
                staging.rename(path)
            except OSError:  # another process put the same index in place first
                shutil.rmtree(staging, ignore_errors=True)

    def terms(self, query: str) -> list[str]:
        """The query's indexed terms (none for a query of stop words or one-letter words)."""
        return self.bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[
            0
        ]

    def scores(self, query: str) -> np.ndarray:
        """The score of every indexed text for ``query`` (all 0 when it has no indexed term)."""
        terms = self.terms(query)
        if not terms:
            return np.zeros(self.model.scores["num_docs"], dtype=np.float64)
        return np.asarray(self.model.get_scores(terms), dtype=np.float64)

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        """(position, score) of each query's top k; a zero score (no query term matched) is no
        hit: BM25 has no opinion."""
        tokens = self.bm25s.tokenize(
            list(queries), stopwords="en", return_ids=False, show_progress=False
        )
        results, scores = self.model.retrieve(tokens, k=k, show_progress=False)
        return [
            [(int(i), float(s)) for i, s in zip(row, srow, strict=True) if s > 0]
            for row, srow in zip(results, scores, strict=True)
        ]


class BM25Retriever:
    """:class:`BM25Index` over a corpus, persisted in ``index_dir`` and reused. ``doc_ids`` and
    ``texts`` (in their order) index another view of the corpus than the whole of it, as the
    system zoo's variants do (half of it, its first words); ``k1`` and ``b`` are BM25's."""

    def __init__(
        self,
        collection: Collection,
        index_dir: Path,
        k1: float = 1.5,
        b: float = 0.75,
        doc_ids: Sequence[str] | None = None,
        texts: Sequence[str] | None = None,
    ) -> None:
        self.doc_ids = list(doc_ids) if doc_ids is not None else sorted(collection.corpus)
        texts = list(texts) if texts is not None else corpus_texts(collection)
        key = fingerprint("bm25s", f"k1={k1}", f"b={b}", *self.doc_ids, *texts)
        self.index = BM25Index(texts, index_dir / f"bm25-{key}", k1=k1, b=b)

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        found = self.index.search(queries, min(k, len(self.doc_ids)))
        return [[(self.doc_ids[i], score) for i, score in hits] for hits in found]


def make_retriever(
    name: str,
    collection: Collection,
    index_dir: Path | None = None,
    settings: CandidatesConfig | None = None,
) -> DenseRetriever | BM25Retriever:
    """Retriever ``name`` (one of :data:`RETRIEVERS`) over ``collection``, its index kept in
    ``index_dir`` (default: the machine's cache) and built once per content."""
    if name not in RETRIEVERS:
        raise InputError(f"retriever: expected one of {', '.join(RETRIEVERS)}, got {name!r}")
    index_dir = index_dir or default_index_dir()
    index_dir.mkdir(parents=True, exist_ok=True)
    if name == "bm25":
        return BM25Retriever(collection, index_dir)
    return DenseRetriever(settings or CandidatesConfig(), collection, index_dir)


def generate_candidates(config: CandidatesConfig) -> dict[str, dict]:
    unknown = set(config.retrievers) - set(RETRIEVERS)
    if unknown:
        raise InputError(
            f"retrievers: unknown {sorted(unknown)}; expected some of {list(RETRIEVERS)}"
        )
    if config.k < 1:
        raise InputError("k: must be at least 1")
    collection = Collection.load(config.collection)
    if not collection.queries:
        raise InputError(
            f"collection: {collection.root} has no queries.jsonl; write your queries there, or "
            "have a teacher write some with relevance-grader synthesize"
        )
    qids = sorted(collection.qrels if config.judged_queries_only else collection.queries)
    unknown = [qid for qid in qids if qid not in collection.queries]
    if unknown:
        raise InputError(
            f"judged_queries_only: {len(unknown)} judged quer(ies) of {collection.root}'s qrels "
            f"are not in {collection.root / 'queries.jsonl'} (e.g. {unknown[0]!r}); add their "
            "text there, or remove their judgments"
        )
    queries = [collection.queries[q] for q in qids]
    out = Path(config.out)
    index_dir = Path(config.index_dir) if config.index_dir else None
    report: dict[str, dict] = {}
    pool: dict[tuple[str, str], Pair] = {}  # the first retriever's record of each pair
    for name in config.retrievers:
        start = time.perf_counter()
        retriever = make_retriever(name, collection, index_dir, config)
        built = time.perf_counter()
        hits = retriever.search(queries, config.k)
        searched = time.perf_counter()
        run: Run = {qid: dict(found) for qid, found in zip(qids, hits, strict=True) if found}
        write_trec_run(out / f"{name}.trec", run, tag=name)
        pairs = list(collection.pairs(run))
        count = write_jsonl(out / f"{name}.pairs.jsonl", pairs)
        for pair in pairs:
            pool.setdefault((pair.qid, pair.doc_id), pair)
        report[name] = {
            "queries": len(run),
            "pairs": count,
            "index_seconds": round(built - start, 2),
            "search_seconds": round(searched - built, 2),
            "run": str(out / f"{name}.trec"),
            "pairs_file": str(out / f"{name}.pairs.jsonl"),
        }
        logger.info("%s: %d pairs for %d queries", name, count, len(run))
    pooled = write_jsonl(out / POOL_FILE, sorted(pool.values(), key=lambda pair: pair.qid))
    write_json(
        out / "candidates.json",
        {
            "config": asdict(config),
            "retrievers": report,
            "pool": {"pairs": pooled, "pairs_file": str(out / POOL_FILE)},
        },
    )
    return report


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([CandidatesConfig], args)
    report = generate_candidates(config)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    run_main(main)
