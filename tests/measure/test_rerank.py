"""A grader rerank stores its scores in the label cache that the metric pipeline reads: the pairs
it scored are never scored again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from data.beir import Collection, ranked, read_trec_run, write_trec_run
from eval import search as search_module
from measure.labelers import rerank as rerank_module


def test_metric_pipeline_reuses_the_rerank_scores(
    adi_dir: Path, tiny_grader_dir: Path, tmp_path: Path, monkeypatch
):
    collection = Collection.load(adi_dir)
    qids = sorted(collection.queries)[:3]
    docs = sorted(collection.corpus)
    run = {q: {d: float(10 - i) for i, d in enumerate(docs[n : n + 6])} for n, q in enumerate(qids)}
    write_trec_run(tmp_path / "first.trec", run)
    cache = tmp_path / "labels"
    scored: list[int] = []
    from measure.labelers import GraderLabeler

    original = GraderLabeler.label_many

    def counting(self, requests):
        scored.append(sum(len(hits) for _, _, hits in requests))
        return original(self, requests)

    monkeypatch.setattr(GraderLabeler, "label_many", counting)
    rerank_module.main(
        [
            "--run", str(tmp_path / "first.trec"), "--corpus", str(adi_dir),
            "--grader", str(tiny_grader_dir), "--k", "4", "--out", str(tmp_path / "reranked.trec"),
            "--label_cache", str(cache),
        ]
    )  # fmt: skip
    assert sum(scored) == 12  # 3 queries x top 4
    reranked = read_trec_run(tmp_path / "reranked.trec")
    assert all(set(reranked[q]) == set(run[q]) for q in qids)  # the hits below the top 4 kept
    scored.clear()
    search_module.main(
        [
            "--run", str(tmp_path / "reranked.trec"), "--compare", str(tmp_path / "first.trec"),
            "--corpus", str(adi_dir), "--labeler", f"grader:{tiny_grader_dir}", "--k", "4",
            "--out", str(tmp_path / "search"), "--label_cache", str(cache),
        ]
    )  # fmt: skip
    assert sum(scored) == 0  # the reranked run's pairs and the first run's top 4 are the same pairs


def test_an_output_that_cannot_be_written_is_refused_before_grading(
    adi_dir: Path, tmp_path: Path, monkeypatch, capsys
):
    from core.cli import run_main

    def no_grading(*args, **kwargs):
        raise AssertionError("the grader was loaded before --out was checked")

    monkeypatch.setattr(rerank_module, "make_labeler", no_grading)
    run = tmp_path / "run.trec"
    write_trec_run(run, {"1": {"1": 1.0}})
    (tmp_path / "a-folder").mkdir()
    for out, message in (
        (tmp_path / "a-folder", "out: .* is a folder"),
        (run, "out: .* would replace --run"),
        (tmp_path / "run.trec" / "x.trec", "is a file, not a folder"),
    ):
        args = ["--run", str(run), "--corpus", str(adi_dir), "--grader", "g", "--out", str(out)]
        with pytest.raises(SystemExit) as exit_info:
            run_main(rerank_module.main, args)
        assert exit_info.value.code == 2
        assert re.search(message, capsys.readouterr().err)


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ({"nosuchquery": {"1": 1.0}}, "query 'nosuchquery' is not in .*queries.jsonl"),
        ({"1": {"1": 2.0, "nosuchdoc": 1.0}}, "document 'nosuchdoc' .* is not in .*corpus.jsonl"),
    ],
)
def test_unknown_queries_and_documents_are_named_before_grading(
    adi_dir: Path, tmp_path: Path, monkeypatch, capsys, run, message
):
    from core.cli import run_main

    monkeypatch.setattr(rerank_module, "make_labeler", pytest.fail)
    path = tmp_path / "run.trec"
    write_trec_run(path, run)
    out = tmp_path / "o.trec"
    args = ["--run", str(path), "--corpus", str(adi_dir), "--grader", "g", "--out", str(out)]
    with pytest.raises(SystemExit):
        run_main(rerank_module.main, args)
    assert re.search(message, capsys.readouterr().err)


def test_the_hits_below_the_reranked_top_k_keep_their_order_after_it(adi_dir: Path):
    from measure.labelers import HitLabel, Labeler

    class ByLength(Labeler):
        name = "by-length"

        def label(self, qid, query, hits):
            return [HitLabel(relevant=True, score=1 / (1 + len(h.doc_id))) for h in hits]

    collection = Collection.load(adi_dir)
    ranking = ["10", "2", "30", "4", "5"]  # the run's order, depth 5
    run = {"1": {d: float(5 - i) for i, d in enumerate(ranking)}}
    reranked = rerank_module.rerank(run, collection, ByLength(), k=2)
    # The top 2 by the grader ("2" scores higher than "10"), then "30", "4", "5" as they were.
    assert [d for d, _ in ranked(reranked["1"])] == ["2", "10", "30", "4", "5"]
