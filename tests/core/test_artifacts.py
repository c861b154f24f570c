"""Typed files between stages (core.artifacts): written and read through one model, an older
version upgraded or refused and a newer one refused, each in one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import InputError
from measure.metrics.ranking_agreement import LabelerAgreement, RankingAgreement


def _agreement() -> RankingAgreement:
    return RankingAgreement(
        metric="ndcg@10",
        reference="qrels:H",
        scores={"qrels:H": {"a": 0.5, "b": 0.4}, "grader:G": {"a": 0.6, "b": 0.3}},
        agreement={
            "grader:G": LabelerAgreement(
                kendall_tau=1.0, kendall_p=1.0, spearman_rho=1.0, ranking=["a", "b"]
            )
        },
        reference_ranking=["a", "b"],
    )


def test_written_and_read_back_with_its_format_version(tmp_path: Path):
    path = tmp_path / RankingAgreement.FILE
    _agreement().write(path)
    assert json.loads(path.read_text())["format_version"] == RankingAgreement.FORMAT_VERSION
    assert RankingAgreement.read(path) == _agreement()


def test_a_file_from_before_versions_is_read(tmp_path: Path):
    """agreement.json of earlier releases has no format_version and the same shape."""
    data = _agreement().model_dump(mode="json")
    del data["format_version"]
    path = tmp_path / "agreement.json"
    path.write_text(json.dumps(data))
    assert RankingAgreement.read(path).agreement["grader:G"].kendall_tau == 1.0


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            {"format_version": 99},
            "format version 99 is newer than this release reads (1); upgrade relevance-grader to read it",
        ),
        (
            {"scores": {"qrels:H": {"a": "high"}}},
            "scores.qrels:H.a: Input should be a valid number, unable to parse string as a number",
        ),
        ({"reference_ranking": None}, "reference_ranking: Input should be a valid list"),
        ({"surprise": 1}, "surprise: Extra inputs are not permitted"),
    ],
)
def test_a_file_that_does_not_fit_is_one_line_naming_it(tmp_path: Path, change, problem):
    path = tmp_path / "agreement.json"
    path.write_text(json.dumps({**_agreement().model_dump(mode="json"), **change}))
    with pytest.raises(InputError) as refused:
        RankingAgreement.read(path)
    assert str(refused.value) == f"{path}: {problem}"


def test_not_json_is_one_line(tmp_path: Path):
    path = tmp_path / "agreement.json"
    path.write_text("{truncated")
    with pytest.raises(InputError, match=r"agreement\.json: not JSON"):
        RankingAgreement.read(path)


def test_an_undefined_tau_is_written_read_and_shown_as_such(tmp_path: Path):
    """A labeler that scores every run alike ranks nothing: scipy's NaN is written as null, read
    back as None and printed as undefined, never a crash after the labelling was paid for."""
    import math

    from measure.metrics.ranking_agreement import _defined

    tied = _agreement().model_copy(
        update={
            "agreement": {
                "grader:G": LabelerAgreement(
                    kendall_tau=_defined(math.nan),
                    kendall_p=_defined(math.nan),
                    spearman_rho=_defined(math.nan),
                    ranking=["a", "b"],
                )
            }
        }
    )
    path = tmp_path / RankingAgreement.FILE
    tied.write(path)
    entry = RankingAgreement.read(path).agreement["grader:G"]
    assert entry.kendall_tau is None and entry.tau_text() == "undefined (tied scores)"
