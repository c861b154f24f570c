"""The labelers: the cache, the grader's labels and batching, and the qrels labeler."""

from __future__ import annotations

from pathlib import Path

from data.beir import read_qrels
from measure.labelers import CachedLabeler, Hit, HitLabel, QrelsLabeler
from measure.metrics.results import HitResult, QueryResult
from tests.doubles import DictLabeler


def test_labels_are_cached_and_reused_across_instances(tmp_path: Path):
    inner = DictLabeler({"a": 3})
    cached = CachedLabeler(inner, tmp_path / "labels.jsonl")
    hits = [Hit("a", "text a"), Hit("b", "text b")]
    first = cached.label("q1", "query", hits)
    cached.label("q1", "query", hits)
    cached.close()
    assert inner.calls == 1
    again = CachedLabeler(
        DictLabeler({}), tmp_path / "labels.jsonl"
    )  # a new process, a blank labeler
    assert again.label("q1", "query", hits) == first and again.inner.calls == 0


def test_grader_labels_carry_a_justification_and_the_1_to_4_scale(tiny_grader_dir: Path):
    from measure.labelers import GraderLabeler

    labeler = GraderLabeler(str(tiny_grader_dir))
    labels = labeler.label("q1", "axon", [Hit("a", "axon text"), Hit("b", "other")])
    for label in labels:
        assert f"{label.score:.3f}" in label.justification and "threshold" in label.justification
        assert (label.relevance >= 3) == label.relevant and 1 <= label.relevance <= 4
    assert HitLabel(relevant=False, score=0.1, threshold=0.4).relevance == 1
    assert HitLabel(relevant=False, score=0.3, threshold=0.4).relevance == 2
    assert HitLabel(relevant=True, score=0.5, threshold=0.4).relevance == 3
    assert HitLabel(relevant=True, score=0.9, threshold=0.4).relevance == 4


def test_grader_labeler_batches_several_queries(tiny_grader_dir: Path):
    from measure.labelers import GraderLabeler

    labeler = GraderLabeler(str(tiny_grader_dir))
    hits = [Hit("a", "axon text"), Hit("b", "other")]
    batched = labeler.label_many([("q1", "axon", hits), ("q2", "paris", hits[:1])])
    assert [len(x) for x in batched] == [2, 1]
    single = labeler.label("q1", "axon", hits)
    assert [round(x.score, 5) for x in batched[0]] == [round(x.score, 5) for x in single]


def test_qrels_labeler_counts_relevant(adi_dir: Path):
    labeler = QrelsLabeler(str(adi_dir / "qrels.tsv"), label_threshold=1)
    assert labeler.num_relevant("1") == len(read_qrels(adi_dir / "qrels.tsv")["1"])


def test_a_cached_grader_labeler_loads_no_model_when_every_label_is_cached(
    tiny_grader_dir: Path, tmp_path: Path, monkeypatch
):
    """The ranking agreement re-reads labels the metric pipeline made: the grader's id comes from
    its description, the same as from the loaded grader, and the model is never loaded."""
    from measure.labelers import GraderLabeler, make_labeler
    from models.grader import Grader

    hits = [Hit("a", "axon text"), Hit("b", "other")]
    first = make_labeler(f"grader:{tiny_grader_dir}", cache_dir=tmp_path)
    labels = first.label("q1", "axon", hits)
    loaded = GraderLabeler(str(tiny_grader_dir))
    assert loaded.grader is not None and loaded.id == GraderLabeler(str(tiny_grader_dir)).id

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded for labels in the cache")

    monkeypatch.setattr(Grader, "from_pretrained", refuse)
    again = make_labeler(f"grader:{tiny_grader_dir}", cache_dir=tmp_path)
    assert again.label("q1", "axon", hits) == labels


def test_an_unusable_reply_is_left_out_counted_and_never_cached(tmp_path: Path, caplog):
    """A judge's unusable reply no longer crashes eval.search: the hit counts as not relevant
    (as an unjudged hit), is counted in metrics.json, and is asked again on the next run."""
    from eval.search.command import count_unusable
    from measure.labelers import Labeler

    class Flaky(Labeler):
        name = id = "flaky"
        calls = 0

        def label(self, qid, query, hits):
            Flaky.calls += len(hits)
            return [
                HitLabel(relevant=False, unusable="no digit in the reply")
                if h.doc_id == "bad"
                else HitLabel(relevant=True, grade=3)
                for h in hits
            ]

    hits = [Hit(doc_id="good", text="a"), Hit(doc_id="bad", text="b")]
    cached = CachedLabeler(Flaky(), tmp_path / "labels.jsonl")
    labels = cached.label_many([("q1", "query", hits)])[0]
    assert [label.unusable for label in labels] == [None, "no digit in the reply"]
    cached.close()
    again = CachedLabeler(Flaky(), tmp_path / "labels.jsonl")
    again.label_many([("q1", "query", hits)])
    assert Flaky.calls == 3  # the good hit came from the cache, the bad one was asked again
    again.close()
    hits = [
        HitResult(id="good", relevant=True),
        HitResult(id="bad", relevant=False, unusable="no digit"),
    ]
    results = {"run": {"q1": QueryResult(hits=hits)}}
    unusable = count_unusable(results)
    assert unusable is not None and unusable.counts == {"run": 1}
    assert "1 hit(s) got an unusable reply" in caplog.text
