"""Shared-prefix scoring: each query's prompt + query tokens run once for all of its documents,
and the scores equal the plain forward pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from models.input_format import GraderInputFormat, format_pairs
from models.scoring import classifier_probabilities, prefix_groups

QUERIES = ["what is an axon terminal"] * 5 + ["capital of france"] * 4 + ["x"]
DOCUMENTS = [
    "Axon terminals are the distal terminations of the branches of an axon. " * (i % 3 + 1)
    + f"Passage {i}."
    for i in range(10)
]


@pytest.fixture(scope="module")
def classifier(tiny_model_dir: Path):
    from models.builder import GraderModelConfig, build_grader

    config = GraderModelConfig(model_name_or_path=str(tiny_model_dir), mode="full", max_length=200)
    model, tokenizer = build_grader(config)
    return model.eval(), tokenizer, GraderInputFormat.from_tokenizer(tokenizer, max_length=200)


def test_pairs_of_one_query_share_their_prefix_and_only_those(classifier):
    _, tokenizer, fmt = classifier
    pairs = format_pairs(tokenizer, fmt, QUERIES, DOCUMENTS)
    groups = prefix_groups(pairs.input_ids, pairs.prefix_lengths)
    assert sorted(sorted(members) for _, members in groups) == [
        [0, 1, 2, 3, 4],
        [5, 6, 7, 8],
        [9],
    ]
    for length, members in groups:
        head = pairs.input_ids[members[0]][:length]
        assert all(pairs.input_ids[i][:length] == head for i in members)
        assert "Query:" in tokenizer.decode(head)


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1, 3, 32])
def test_shared_prefix_scores_equal_the_plain_forward_pass(classifier, batch_size: int):
    from models.scoring import shared_prefix_classifier_probabilities

    model, tokenizer, fmt = classifier
    pairs = format_pairs(tokenizer, fmt, QUERIES, DOCUMENTS)
    assert any(pairs.truncated)  # long documents cut, short ones padded in the same batch
    plain = classifier_probabilities(model, pairs.input_ids, batch_size=batch_size)
    shared = shared_prefix_classifier_probabilities(
        model, pairs.input_ids, pairs.prefix_lengths, batch_size=batch_size
    )
    np.testing.assert_allclose(shared, plain, atol=1e-5)


def test_the_grader_and_its_labeler_use_the_shared_prefix(tiny_grader_dir: Path, monkeypatch):
    import models.scoring as scoring_module
    from measure.labelers import GraderLabeler, Hit

    calls = []
    real = scoring_module.shared_prefix_classifier_probabilities

    def counting(*args, **kwargs):
        calls.append(len(args[1]))
        return real(*args, **kwargs)

    monkeypatch.setattr(scoring_module, "shared_prefix_classifier_probabilities", counting)
    labeler = GraderLabeler(str(tiny_grader_dir))
    labeler.grader.prefix_cache = True
    hits = [Hit(f"d{i}", text) for i, text in enumerate(DOCUMENTS[:4])]
    shared = [label.score for label in labeler.label("q", QUERIES[0], hits)]
    labeler.grader.prefix_cache = False
    plain = [label.score for label in labeler.label("q", QUERIES[0], hits)]
    assert calls == [4]
    np.testing.assert_allclose(shared, plain, atol=1e-5)
