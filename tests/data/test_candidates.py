from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from core.io import read_records
from core.records import Pair
from data.beir import Collection, read_trec_run
from data.candidates import CandidatesConfig, generate_candidates


def recall(run: dict, qrels: dict) -> float:
    return sum(len(set(run.get(q, {})) & set(rel)) / len(rel) for q, rel in qrels.items()) / len(
        qrels
    )


def test_bm25_finds_known_documents_on_adi(adi_dir: Path, tmp_path: Path):
    report = generate_candidates(
        CandidatesConfig(collection=str(adi_dir), out=str(tmp_path), retrievers=["bm25"], k=5)
    )
    run = read_trec_run(tmp_path / "bm25.trec")
    qrels = Collection.load(adi_dir).qrels
    assert "46" in run["1"] and {"12", "71"} <= set(run["2"])  # relevant ADI documents
    assert recall(run, qrels) > 0.25
    pairs = list(read_records(tmp_path / "bm25.pairs.jsonl", Pair))
    assert len(pairs) == report["bm25"]["pairs"]
    first = [p for p in pairs if p.qid == "1"]
    assert [p.rank for p in first] == list(range(1, len(first) + 1))
    assert first[0].retriever_score >= first[-1].retriever_score
    # Another run reuses the index kept for this corpus.
    index = tmp_path / "index"
    config = CandidatesConfig(
        collection=str(adi_dir), out=str(tmp_path / "a"), retrievers=["bm25"], index_dir=str(index)
    )
    generate_candidates(dataclasses.replace(config, k=5))
    (saved,) = [path for path in index.iterdir() if path.name.startswith("bm25-")]
    built = saved.stat().st_mtime_ns
    generate_candidates(dataclasses.replace(config, out=str(tmp_path / "b"), k=5))
    assert read_trec_run(tmp_path / "b" / "bm25.trec") == run
    assert saved.stat().st_mtime_ns == built and len(list(index.iterdir())) == 1


def test_unknown_retriever_is_rejected(adi_dir: Path, tmp_path: Path):
    with pytest.raises(ValueError, match="retrievers: unknown"):
        generate_candidates(
            CandidatesConfig(collection=str(adi_dir), out=str(tmp_path), retrievers=["splade"])
        )


def test_a_judged_query_missing_from_the_queries_file_is_named(adi_dir: Path, tmp_path: Path):
    """It was `error: 1` (a bare KeyError)."""
    import shutil

    collection = tmp_path / "adi"
    shutil.copytree(adi_dir, collection)
    queries = (collection / "queries.jsonl").read_text().splitlines()
    (collection / "queries.jsonl").write_text("\n".join(queries[1:]) + "\n")  # drops query 1
    with pytest.raises(ValueError, match=r"judged quer\(ies\) .* not in .*queries.jsonl.*'1'"):
        generate_candidates(
            CandidatesConfig(
                collection=str(collection),
                out=str(tmp_path / "out"),
                retrievers=["bm25"],
                judged_queries_only=True,
            )
        )


@pytest.mark.slow
def test_dense_minilm_hnsw_finds_known_documents_on_adi(adi_dir: Path, tmp_path: Path):
    index = tmp_path / "index"
    config = CandidatesConfig(
        collection=str(adi_dir), out=str(tmp_path), retrievers=["dense"], k=5, index_dir=str(index)
    )
    generate_candidates(config)
    run = read_trec_run(tmp_path / "dense.trec")
    assert "17" in run["1"] and {"43", "45", "60"} <= set(run["3"])
    assert recall(run, Collection.load(adi_dir).qrels) > 0.25
    assert len(list(index.glob("dense-*.npy"))) == 1
    built = {path: path.stat().st_mtime_ns for path in index.iterdir()}
    other_run = tmp_path / "other"  # another run on the same machine reuses embeddings and index
    generate_candidates(dataclasses.replace(config, out=str(other_run)))
    assert read_trec_run(other_run / "dense.trec") == run
    assert {path: path.stat().st_mtime_ns for path in index.iterdir()} == built
    assert not list(index.glob(".*tmp"))  # nothing half-written left behind


def test_one_bm25_for_retrieval_and_the_baseline(adi_dir: Path, tmp_path: Path):
    """The retriever's scores and the BM25 baseline's pair scores (IDF from the whole corpus) are
    the same numbers: both come from data.candidates.BM25Index."""
    from core.records import document_text
    from data.candidates import make_retriever
    from measure.classification.baselines import bm25_scores

    collection = Collection.load(adi_dir)
    retriever = make_retriever("bm25", collection, tmp_path / "indexes")
    qid = sorted(collection.queries)[0]
    query = collection.queries[qid]
    hits = retriever.search([query], 5)[0]
    texts = {d: document_text(doc.text, doc.title) for d, doc in collection.corpus.items()}
    corpus = [texts[d] for d in sorted(texts)]
    scores = bm25_scores([query] * len(hits), [texts[d] for d, _ in hits], corpus)
    assert hits and scores == pytest.approx([score for _, score in hits], rel=1e-5)
    assert list(scores) == sorted(scores, reverse=True)
    with pytest.raises(ValueError, match="retriever: expected one of"):
        make_retriever("splade", collection, tmp_path / "indexes")


@pytest.mark.slow
def test_the_cosine_baseline_reads_the_dense_index_embeddings(
    adi_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Embedded once per run: the cosine baseline takes its corpus documents' vectors from the
    embeddings dense retrieval stored, embeds only the rest, and scores as if it had embedded
    them itself."""
    import numpy as np

    import data.candidates
    from data.candidates import corpus_texts, make_retriever
    from measure.classification.baselines import cosine_scores
    from models.embedder import Embedder

    collection = Collection.load(adi_dir)
    corpus = corpus_texts(collection)
    queries, documents = (
        ["computer indexing", "retrieval systems"],
        [corpus[3], "not in the corpus"],
    )
    fresh = cosine_scores(queries, documents)  # nothing stored yet: every text embedded

    monkeypatch.setattr(data.candidates, "default_index_dir", lambda: tmp_path / "indexes")
    make_retriever("dense", collection)  # stores the corpus embeddings
    embedded: list[str] = []
    encode = Embedder.encode

    def counted(self, texts, *args, **kwargs):
        embedded.extend(texts)
        return encode(self, texts, *args, **kwargs)

    monkeypatch.setattr(Embedder, "encode", counted)
    reused = cosine_scores(queries, documents, corpus)
    assert embedded == [*queries, "not in the corpus"]
    np.testing.assert_allclose(reused, fresh, atol=1e-5)
