"""Typed files between stages (core.artifacts): written and read through one model; a file of
an older version (or of none) refused with "re-run the stage that wrote it" and a newer one with
"upgrade", each in one line naming the file."""

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


@pytest.mark.parametrize(
    ("version", "found"), [(None, "no format version"), (0, "format version 0")]
)
def test_a_file_of_an_older_format_is_refused_with_the_stage_to_re_run(
    tmp_path: Path, version, found
):
    """Until the first release there is no upgrade code: a file without a format_version or
    of an older one (here the same shape) is one line naming it and saying what to re-run."""
    data = _agreement().model_dump(mode="json")
    del data["format_version"]
    if version is not None:
        data["format_version"] = version
    path = tmp_path / "agreement.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as refused:
        RankingAgreement.read(path)
    assert str(refused.value) == (
        f"{path}: {found}, but this release reads version 1: re-run the stage that wrote it"
    )


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
