"""crossfit:STUDY: each query is labelled by the fold's grader that held it out, with that fold's
fitted threshold and temperature, so a grader ranks systems only on queries it never trained on."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from core.errors import InputError
from measure.labelers import GraderLabeler, Hit, make_labeler


def fold(study: Path, k: int, grader: Path, queries: list[str], threshold: float, temp: float):
    row = study / f"fold-{k}" / "grader"
    shutil.copytree(grader, row / "grader")
    metrics = {
        "format_version": 1,
        "threshold": threshold,
        "calibration": {"method": "temperature", "temperature": temp},
    }
    (row / "metrics.json").write_text(json.dumps(metrics))
    lines = [json.dumps({"qid": q, "doc_id": "d", "probability": 0.5}) for q in queries]
    (row / "predictions.jsonl").write_text("\n".join(lines) + "\n")


HITS = [Hit("d1", "Axon terminals release neurotransmitters."), Hit("d2", "A cake recipe.")]


def test_each_query_is_labelled_by_the_fold_that_held_it_out(
    tiny_grader_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.INFO, logger="models.grader")
    study = tmp_path / "cv"
    fold(study, 0, tiny_grader_dir, ["q1", "q2"], threshold=0.01, temp=1.0)
    fold(study, 1, tiny_grader_dir, ["q3"], threshold=0.99, temp=0.5)
    labeler = make_labeler(f"crossfit:{study}")
    plain = GraderLabeler(str(tiny_grader_dir)).label("q", "what is an axon", HITS)
    labels = labeler.label_many(
        [("q1", "what is an axon", HITS), ("q3", "what is an axon", HITS), ("q2", "cake", HITS)]
    )
    # Fold 0: the plain grader's P(relevant) (temperature 1) at its own low threshold.
    assert [x.score for x in labels[0]] == pytest.approx([x.score for x in plain], abs=1e-6)
    assert all(x.relevant and x.threshold == 0.01 for x in labels[0])
    # Fold 1: its temperature moves the probabilities away from 0.5, its threshold is its own.
    for tempered, raw in zip(labels[1], plain, strict=True):
        assert abs(tempered.score - 0.5) > abs(raw.score - 0.5) and tempered.threshold == 0.99
    assert not any(x.relevant for x in labels[1])
    assert len(labels[2]) == 2 and labels[2][0].threshold == 0.01  # back in request order
    # Each fold's grader is loaded with its fitted threshold: no "labels use 0.5" said of it
    # (the plain grader above, loaded without one, is).
    unset = [r.getMessage() for r in caplog.records if "no stored threshold" in r.getMessage()]
    assert unset and not [message for message in unset if str(study) in message]


def test_a_query_no_fold_held_out_and_a_broken_study_are_one_line(tiny_grader_dir, tmp_path):
    study = tmp_path / "cv"
    fold(study, 0, tiny_grader_dir, ["q1"], threshold=0.5, temp=1.0)
    with pytest.raises(InputError, match="query q9 is in no fold's held-out queries"):
        make_labeler(f"crossfit:{study}").label_many([("q9", "x", HITS)])
    fold(study, 1, tiny_grader_dir, ["q1"], threshold=0.5, temp=1.0)
    with pytest.raises(InputError, match="query q1 is held out by both"):
        make_labeler(f"crossfit:{study}")
    with pytest.raises(InputError, match="has no fold-K/classifier/ folder"):
        make_labeler(f"crossfit:{study}#classifier")


def test_the_label_cache_keys_on_every_fold(tiny_grader_dir: Path, tmp_path: Path):
    """A fold re-fitted (another threshold) is another labeler: its cached labels are not reused."""
    study = tmp_path / "cv"
    fold(study, 0, tiny_grader_dir, ["q1"], threshold=0.3, temp=1.0)
    before = make_labeler(f"crossfit:{study}").id
    metrics = study / "fold-0" / "grader" / "metrics.json"
    metrics.write_text(metrics.read_text().replace("0.3", "0.4"))
    assert make_labeler(f"crossfit:{study}").id != before
