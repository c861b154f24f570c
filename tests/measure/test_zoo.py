"""The system zoo: its definition file, its systems and their cache (measure.zoo)."""

from __future__ import annotations

import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from core.errors import InputError
from data.beir import Collection, ranked
from measure.labelers import HitLabel, Labeler
from measure.zoo.build import (
    ZooBuilder,
    linear_fusion,
    random_run,
    reciprocal_rank_fusion,
    shuffled,
)
from measure.zoo.definition import read_zoo
from tests.doubles import DictLabeler

ZOO = """
systems:
  - {name: bm25, kind: bm25}
  - {name: bm25-k0.9-b0.4, kind: bm25, k1: 0.9, b: 0.4}
  - {name: bm25-first5words, kind: bm25, first_words: 5}
  - {name: bm25-half-index, kind: bm25, index_share: 0.5}
  - {name: fused, kind: rrf, of: [bm25, bm25-first5words]}
  - {name: bm25-reranked, kind: rerank, of: bm25, by: scorer, depth: 20}
  - {name: bm25-shuffled, kind: shuffle, of: bm25, within: 5}
  - {name: random, kind: random}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "zoo.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("systems:\n  - {name: a, kind: bm25}\n  - {name: b, kind: bm2}\n", "systems.1"),
        ("systems:\n  - {name: a, kind: bm25, k1: -1}\n  - {name: b, kind: bm25}\n", "k1"),
        ("systems:\n  - {name: a, kind: shuffle, of: b}\n  - {name: b, kind: bm25}\n", "before"),
        ("systems:\n  - {name: a, kind: bm25}\n  - {name: a, kind: bm25}\n", "twice"),
        ("systems:\n  - {name: a b, kind: bm25}\n  - {name: c, kind: bm25}\n", "file name"),
        ("systems:\n  - {name: a, kind: bm25, colour: red}\n  - {name: c, kind: bm25}\n", "colour"),
    ],
)
def test_a_bad_zoo_file_is_one_line_naming_the_file_and_the_field(tmp_path, text, problem):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as error:
        read_zoo(path)
    assert str(path) in str(error.value) and problem in str(error.value)


def test_every_committed_zoo_loads():
    for path in sorted(Path("eval/configs/zoo").glob("*.yaml")):
        assert len(read_zoo(path).systems) >= 12, path


def test_fusions_shuffles_and_random_runs():
    a = {"q": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}
    b = {"q": {"d3": 9.0, "d4": 1.0}}
    rrf = reciprocal_rank_fusion([a, b], k=60)["q"]
    assert rrf["d3"] == pytest.approx(1 / 63 + 1 / 61) and rrf["d4"] == pytest.approx(1 / 62)
    linear = linear_fusion(a, b, 0.25)["q"]
    # min-max: a gives d1 1, d2 .5, d3 0; b gives d3 1, d4 0.
    assert linear == pytest.approx({"d1": 0.75, "d2": 0.375, "d3": 0.25, "d4": 0.0})
    run = {"q": {f"d{i}": float(20 - i) for i in range(20)}}
    mixed = shuffled(run, 5, seed=1)["q"]
    order = [d for d, _ in ranked(mixed)]
    assert set(order[:5]) == {f"d{i}" for i in range(5)} and order[5:] == [
        f"d{i}" for i in range(5, 20)
    ]
    assert order[:5] != [f"d{i}" for i in range(5)]  # seed 1 moves them
    assert shuffled(run, 5, seed=1) == shuffled(run, 5, seed=1)
    drawn = random_run([f"d{i}" for i in range(50)], ["q1", "q2"], 10, seed=0)
    assert drawn == random_run([f"d{i}" for i in range(50)], ["q1", "q2"], 10, seed=0)
    assert drawn["q1"] != drawn["q2"] and len(drawn["q1"]) == 10


def builder(collection, scorers, out, index_dir):
    return ZooBuilder(collection, sorted(collection.qrels), scorers, out, 20, index_dir=index_dir)


def test_the_zoo_is_built_once_and_rebuilds_only_what_changed(tmp_path, adi_dir):
    collection = Collection.load(adi_dir)
    scorer = DictLabeler({doc_id: len(doc_id) % 4 for doc_id in collection.corpus})
    out, index_dir = tmp_path / "zoo", tmp_path / "indexes"
    zoo = builder(collection, {"scorer": scorer}, out, index_dir).build(
        read_zoo(write(tmp_path, ZOO))
    )
    assert list(zoo.runs) == [
        "bm25", "bm25-k0.9-b0.4", "bm25-first5words", "bm25-half-index", "fused",
        "bm25-reranked", "bm25-shuffled", "random",
    ]  # fmt: skip
    assert not zoo.reused
    assert zoo.runs["bm25"] != zoo.runs["bm25-k0.9-b0.4"]
    assert zoo.runs["bm25"] != zoo.runs["bm25-first5words"]
    # The half index never returns the documents it left out.
    returned = {d for scores in zoo.runs["bm25-half-index"].values() for d in scores}
    assert len(returned) <= round(len(collection.corpus) / 2)

    calls = scorer.calls
    changed = ZOO.replace("within: 5", "within: 3")
    again = builder(collection, {"scorer": scorer}, out, index_dir).build(
        read_zoo(write(tmp_path, changed))
    )
    assert scorer.calls == calls  # the rerank came from its file
    assert set(again.runs) - again.reused == {"bm25-shuffled"}
    assert again.runs["bm25"] == zoo.runs["bm25"]
    assert again.runs["bm25-reranked"] == zoo.runs["bm25-reranked"]
    assert again.runs["bm25-shuffled"] != zoo.runs["bm25-shuffled"]


def test_a_rerank_without_its_scorer_is_skipped_with_what_uses_it(tmp_path, adi_dir):
    collection = Collection.load(adi_dir)
    text = ZOO + "  - {name: shuffled-rerank, kind: shuffle, of: bm25-reranked}\n"
    zoo = builder(collection, {}, tmp_path / "zoo", tmp_path / "ix").build(
        read_zoo(write(tmp_path, text))
    )
    assert "--labelers or --scorers scorer=SPEC" in zoo.skipped["bm25-reranked"]
    assert "bm25-reranked" in zoo.skipped["shuffled-rerank"]
    assert "bm25" in zoo.runs and "bm25-reranked" not in zoo.runs


class Favourite(Labeler):
    """Scores one document per query 1, the others 0."""

    def __init__(self, favourite: dict[str, str]) -> None:
        self.favourite = favourite

    def label(self, qid, query, hits):
        return [
            HitLabel(relevant=False, score=float(h.doc_id == self.favourite[qid])) for h in hits
        ]


def test_a_rerank_orders_the_top_by_its_scorer(tmp_path, adi_dir):
    collection = Collection.load(adi_dir)
    definition = read_zoo(write(tmp_path, ZOO))
    base = (
        builder(collection, {}, tmp_path / "base", tmp_path / "ix").build(definition).runs["bm25"]
    )
    # Each query's 10th BM25 hit (or its last) becomes the scorer's favourite.
    favourite = {qid: ranked(scores)[min(9, len(scores) - 1)][0] for qid, scores in base.items()}
    zoo = builder(collection, {"scorer": Favourite(favourite)}, tmp_path / "zoo", tmp_path / "ix")
    reranked = zoo.build(definition).runs["bm25-reranked"]
    for qid, doc_id in favourite.items():
        assert ranked(reranked[qid])[0][0] == doc_id
        assert set(reranked[qid]) == set(base[qid])  # the same hits, another order


class CountingEmbedder:
    """A stand-in for the MiniLM embedder: a fixed random vector per text, and every text it was
    asked to encode."""

    name, max_length = "counting", 64
    model = SimpleNamespace(dtype="float32", config=SimpleNamespace(_attn_implementation="eager"))

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts, **_):
        self.encoded += list(texts)
        rows = [np.random.default_rng(zlib.crc32(t.encode())).normal(size=8) for t in texts]
        vectors = np.array(rows, dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_a_share_of_the_corpus_reads_the_whole_corpus_s_stored_embeddings(tmp_path, adi_dir):
    """The half index embeds nothing again: its documents' rows of the whole corpus's stored
    embeddings (a second pass over the documents cost the main job minutes)."""
    collection = Collection.load(adi_dir)
    zoo_file = write(
        tmp_path,
        "systems:\n  - {name: whole, kind: dense, exact: true}\n"
        "  - {name: half, kind: dense, exact: true, index_share: 0.5}\n",
    )
    build = builder(collection, {}, tmp_path / "zoo", tmp_path / "indexes")
    build._embedder = embedder = CountingEmbedder()
    zoo = build.build(read_zoo(zoo_file))
    corpus = [t for t in embedder.encoded if t not in set(build._queries())]
    assert len(corpus) == len(collection.corpus)  # the whole corpus, once
    for qid, hits in zoo.runs["half"].items():
        whole = zoo.runs["whole"][qid]  # the same vectors: the documents both return, one order
        half_order = [d for d, _ in ranked(hits) if d in whole]
        assert half_order == [d for d, _ in ranked(whole) if d in hits]


def test_a_fusion_with_a_depth_fuses_only_each_system_s_top_hits(tmp_path, adi_dir):
    """The main job's compact zoo fuses the top 10s its grader has already scored: a fusion cut
    to a depth returns no document outside the fused systems' top hits (a deeper hit would be a
    new pair for every labeler)."""
    collection = Collection.load(adi_dir)
    text = ZOO + (
        "  - {name: fused-top3, kind: rrf, of: [bm25, bm25-first5words], depth: 3}\n"
        "  - {name: linear-top3, kind: linear, of: [bm25, bm25-first5words], depth: 3}\n"
    )
    zoo = builder(collection, {}, tmp_path / "zoo", tmp_path / "ix").build(
        read_zoo(write(tmp_path, text))
    )
    for qid in zoo.runs["bm25"]:
        tops = {
            d
            for name in ("bm25", "bm25-first5words")
            for d, _ in ranked(zoo.runs[name].get(qid, {}))[:3]
        }
        for fused in ("fused-top3", "linear-top3"):
            assert set(zoo.runs[fused].get(qid, {})) == tops
    assert any(len(scores) > 6 for scores in zoo.runs["fused"].values())  # uncut: deeper


def test_the_cosine_labeler_reads_the_dense_retriever_s_stored_vectors(tmp_path, adi_dir):
    """Labelling a zoo's pool with the cosine embeds no document the dense systems embedded (it
    re-embedded the pool: 80 of the main job's leaderboard stage's seconds), and scores with the
    retriever's own vectors."""
    from data.candidates import corpus_embeddings, corpus_texts
    from measure.labelers import Hit
    from measure.labelers.scores import CosineLabeler

    collection = Collection.load(adi_dir)
    corpus = corpus_texts(collection)
    embedder = CountingEmbedder()
    stored = corpus_embeddings(embedder, corpus, tmp_path / "ix")
    labeler = CosineLabeler("counting", corpus)
    labeler.__dict__["embedder"] = embedder  # the cached property, filled
    embedder.encoded.clear()
    qid, query = next(iter(collection.queries.items()))
    doc_ids = sorted(collection.corpus)[:5]
    hits = [Hit(d, collection.corpus[d].text, collection.corpus[d].title or None) for d in doc_ids]
    unstored = Hit("new", "a text no corpus holds", None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("data.candidates.default_index_dir", lambda: tmp_path / "ix")
        labels = labeler.label_many([(qid, query, [*hits, unstored])])[0]
    assert embedder.encoded == [query, "a text no corpus holds"]
    (query_vector,) = CountingEmbedder().encode([query])
    row = {d: i for i, d in enumerate(sorted(collection.corpus))}
    for doc_id, label in zip(doc_ids, labels, strict=False):
        assert label.score == pytest.approx(float(query_vector @ stored[row[doc_id]]))
