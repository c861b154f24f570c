"""grader_config.json as a typed file (models.grader_config.GraderDescription): written and read
back key for key; descriptions of an earlier format, newer or damaged ones refused in one line
naming the file (and the field)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import InputError
from models.builder import read_grader_config, save_grader_config
from models.grader_config import GraderDescription, read_description

# A training checkpoint's description as training writes it.
CHECKPOINT = {
    "format_version": 1,
    "mode": "query_likelihood",
    "base_model": "smollm2-135m",
    "model": {"model_name_or_path": "smollm2-135m", "mode": "query_likelihood", "labels": "binary"},
    "input_format": {"name": "query-likelihood", "version": 1, "max_length": 192},
    "label_names": ["not_relevant", "relevant"],
    "relevant_from": 1,
    "loss": {"loss": "cross_entropy", "class_weights": [1.0, 3.0]},
    "data": {"dataset": "runs/x/dataset/fold-0", "train_pairs": 810, "manifest": {"seed": 42}},
    "parameters": {"total": 134515008, "trainable": 0},
    "query_likelihood": {"scale": 0.15, "bias": -1.8, "marker": "Q:", "backbone": "smollm2-135m"},
    "metrics": {"eval_loss": 0.57, "epoch": 1.0},
}
# What export adds: threshold, calibration, evaluation with a null inside.
EXPORTED = CHECKPOINT | {
    "threshold": 0.318,
    "calibration": {"method": "temperature", "temperature": 0.49},
    "label_threshold": {"scale": "0-3", "relevant_when_grade_at_least": 2},
    "evaluation": {"metrics": {"teacher": {"at_0.5": {"roc_auc": None}}}, "pairs": 270},
}


def write_raw(folder: Path, data: object, name: str = "grader_config.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))
    return folder / name


@pytest.mark.parametrize("written", [CHECKPOINT, EXPORTED], ids=["checkpoint", "export"])
def test_descriptions_read_and_write_back_as_they_were(tmp_path: Path, written: dict):
    write_raw(tmp_path, written)
    description = read_grader_config(tmp_path)
    assert description is not None and description.mode == "query_likelihood"
    assert description.query_likelihood and description.query_likelihood.backbone == "smollm2-135m"
    assert description.parameters and description.parameters.trainable == 0
    assert description.data and description.data.dataset == "runs/x/dataset/fold-0"
    save_grader_config(tmp_path / "again", description)
    again = json.loads((tmp_path / "again" / "grader_config.json").read_text())
    assert again == written


def test_a_description_without_a_format_version_is_refused_in_one_line(tmp_path: Path):
    """A checkpoint's description written before the file had a format version: not read as
    this release's (no upgrade), one line naming the file."""
    path = write_raw(tmp_path, {k: v for k, v in CHECKPOINT.items() if k != "format_version"})
    with pytest.raises(InputError) as caught:
        read_grader_config(tmp_path)
    assert str(caught.value) == (
        f"{path}: no format version, but this release reads version 1: "
        "re-run the stage that wrote it"
    )


def test_the_threshold_and_temperature_of_an_export(tmp_path: Path):
    write_raw(tmp_path, EXPORTED)
    description = GraderDescription.read(tmp_path / "grader_config.json")
    assert (description.threshold, description.temperature) == (0.318, 0.49)
    assert GraderDescription.from_data(CHECKPOINT, "x").temperature == 1.0  # none fitted yet
    assert GraderDescription.from_data(CHECKPOINT, "x").threshold is None


def test_keys_this_release_does_not_know_are_kept(tmp_path: Path):
    write_raw(tmp_path, EXPORTED | {"note": {"by": "a user"}})
    description = read_grader_config(tmp_path)
    assert description is not None and description.dump()["note"] == {"by": "a user"}


def test_the_description_in_config_json_is_read_where_the_file_is_missing(tmp_path: Path):
    write_raw(tmp_path, {"architectures": ["X"], "grader": EXPORTED}, "config.json")
    description = read_description(tmp_path)
    assert description is not None and description.threshold == 0.318
    write_raw(tmp_path, {"grader": EXPORTED | {"threshold": 2}}, "config.json")
    with pytest.raises(InputError, match=r"config\.json: grader: threshold: expected a prob"):
        read_description(tmp_path)
    write_raw(tmp_path, {"architectures": ["X"]}, "config.json")
    assert read_description(tmp_path) is None and read_description(tmp_path / "none") is None


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"format_version": 2}, "format version 2 is newer than this release reads (1)"),
        ({"threshold": 1.5}, "threshold: expected a probability in (0, 1), got 1.5"),
        ({"threshold": 0}, "threshold: expected a probability in (0, 1), got 0"),
        ({"threshold": True}, "threshold: expected a probability in (0, 1), got True"),
        ({"relevant_from": "two"}, "relevant_from: Input should be a valid integer"),
        ({"query_likelihood": {"scale": 1.0}}, "query_likelihood.bias: Field required"),
        ({"parameters": {"total": 3}}, "parameters.trainable: Field required"),
    ],
)
def test_a_newer_or_damaged_description_is_one_line_naming_the_file_and_field(
    tmp_path: Path, change: dict, expected: str
):
    path = write_raw(tmp_path, EXPORTED | change)
    with pytest.raises(InputError) as caught:
        read_grader_config(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and expected in message
    assert len(message.splitlines()) == 1


def test_an_export_check_reads_back_and_one_of_an_earlier_format_is_refused(tmp_path):
    """export_check.json is written with its format version; one without (as it was first
    written) is refused in one line."""
    import json

    from models.grader_config import ExportCheck

    fields = {"out": "export", "pairs_checked": 8, "max_abs_difference": 2e-5, "tolerance": 1e-4}
    ExportCheck(**fields).write(tmp_path / ExportCheck.FILE)
    assert json.loads((tmp_path / ExportCheck.FILE).read_text()) == {"format_version": 1, **fields}
    check = ExportCheck.read(tmp_path / ExportCheck.FILE)
    assert check.passed and check.pairs_checked == 8
    assert not ExportCheck(**{**fields, "max_abs_difference": 1.0}).passed
    (tmp_path / "old.json").write_text(json.dumps(fields))
    with pytest.raises(InputError, match=r"old\.json: no format version, .*re-run the stage"):
        ExportCheck.read(tmp_path / "old.json")
