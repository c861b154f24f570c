"""The SQuAD evaluation subset never holds a question that a training mix uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data.beir import Collection
from data.squad import SquadSubsetConfig, build_subset

REPO = Path(__file__).resolve().parents[2]


def test_subset_leaves_out_training_questions(tmp_path: Path):
    source = tmp_path / "squad"
    source.mkdir()
    (source / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": f"a0-p{i}", "title": "A", "text": f"t{i}"}) + "\n" for i in range(3)
        )
    )
    queries = [
        {"_id": f"q{i}", "text": f"question {i}?", "answers": [f"t{i % 3}"],
         "metadata": {"gold_doc": f"a0-p{i % 3}", "article": "A"}}
        for i in range(6)
    ]  # fmt: skip
    (source / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (source / "README.txt").write_text("SQuAD v1.1 dev, CC BY-SA 4.0\n")
    mix = tmp_path / "mix.jsonl"
    mix.write_text(
        "".join(
            json.dumps({"qid": f"squad:q{i}", "query": "?", "doc_id": "d", "text": "t", "grade": 3})
            + "\n"
            for i in (0, 1, 2)
        )
    )
    out = tmp_path / "out"
    config = SquadSubsetConfig(source=str(source), out=str(out), questions=3, exclude=[str(mix)])
    manifest = build_subset(config)
    collection = Collection.load(out)
    assert sorted(collection.queries) == ["q3", "q4", "q5"]  # all that are left
    assert collection.qrels == {"q3": {"a0-p0": 1}, "q4": {"a0-p1": 1}, "q5": {"a0-p2": 1}}
    assert len(collection.corpus) == 3 and manifest["excluded_training_questions"] == 3
    assert "CC BY-SA 4.0" in (out / "SOURCE.txt").read_text()
    with pytest.raises(ValueError, match="only 3 eligible"):
        build_subset(
            SquadSubsetConfig(source=str(source), out=str(out), questions=4, exclude=[str(mix)])
        )


def test_committed_subset_is_disjoint_from_the_training_mixes():
    from data.squad import training_questions

    root = REPO / "data" / "collections"
    trained = training_questions(
        [
            str(root / "qa-training-mix/judgments.jsonl"),
            str(root / "qa-training-mix-large/judgments.jsonl"),
        ]
    )
    collection = Collection.load(root / "squad-dev")
    assert len(collection.queries) == 1000 and len(collection.corpus) == 2067
    assert trained and not (set(collection.queries) & trained)
