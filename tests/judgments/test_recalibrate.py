"""Refitting an export's threshold and temperature on a user's judged queries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.io import sha256_file
from judgments.recalibrate import RecalibrateConfig, recalibrate


@pytest.fixture(scope="module")
def tiny_export(tiny_grader_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from models.export import ExportConfig, export

    out = tmp_path_factory.mktemp("export") / "export"
    export(ExportConfig(checkpoint=str(tiny_grader_dir), out=str(out)))
    return out


@pytest.mark.slow
def test_the_copy_carries_the_refitted_threshold_and_the_same_weights(
    tiny_export: Path, tiny_dataset: Path, tmp_path: Path, capsys
):
    from models.grader import Grader

    out = tmp_path / "mine"
    report = recalibrate(
        RecalibrateConfig(
            export=str(tiny_export), judgments=str(tiny_dataset / "train.jsonl"), out=str(out)
        )
    )
    assert set(report["fit_queries"]).isdisjoint(report["held_out_queries"])
    assert report["before"]["pairs"] == report["after"]["pairs"] > 0
    shown = capsys.readouterr()  # the long scoring pass says what it does and shows progress
    assert "judged pairs with" in shown.out and "scoring: 100%" in shown.err
    assert report["round_trip_max_abs_difference"] <= 1e-4
    description = json.loads((out / "config.json").read_text())["grader"]
    assert description["threshold"] == report["after"]["threshold"]
    assert description["calibration"] == report["calibration"]
    assert (
        json.loads((out / "grader_config.json").read_text())["threshold"]
        == description["threshold"]
    )
    assert sha256_file(out / "model.safetensors") == sha256_file(tiny_export / "model.safetensors")
    reloaded = Grader.from_pretrained(out, device="cpu", dtype="float32")
    assert reloaded.threshold == pytest.approx(report["after"]["threshold"])
    assert reloaded.temperature == pytest.approx(report["calibration"]["temperature"])
    assert f"threshold ({report['after']['threshold']:.3f})" in (out / "README.md").read_text()


def test_bad_input_fails_before_any_work(tiny_export: Path, tiny_dataset: Path, tmp_path: Path):
    one_query = tmp_path / "one.jsonl"
    lines = (tiny_dataset / "train.jsonl").read_text().splitlines()
    first = json.loads(lines[0])["qid"]
    one_query.write_text("\n".join(x for x in lines if json.loads(x)["qid"] == first) + "\n")
    with pytest.raises(ValueError, match="at least 6 are needed"):
        recalibrate(
            RecalibrateConfig(
                export=str(tiny_export), judgments=str(one_query), out=str(tmp_path / "o")
            )
        )
    # Four queries split 2 + 2: a threshold fitted and tested on two queries each is refused.
    four = tmp_path / "four.jsonl"
    kept = list(dict.fromkeys(json.loads(x)["qid"] for x in lines))[:4]
    four.write_text("\n".join(x for x in lines if json.loads(x)["qid"] in kept) + "\n")
    with pytest.raises(ValueError, match="each side needs at least 3"):
        recalibrate(
            RecalibrateConfig(export=str(tiny_export), judgments=str(four), out=str(tmp_path / "o"))
        )
    with pytest.raises(ValueError, match="is inside --export"):
        recalibrate(
            RecalibrateConfig(
                export=str(tiny_export),
                judgments=str(tiny_dataset / "train.jsonl"),
                out=str(tiny_export / "inside"),
            )
        )


def test_an_out_that_holds_the_export_is_refused_even_with_overwrite(
    tiny_export: Path, tiny_dataset: Path, tmp_path: Path
):
    """Replacing a folder that holds the export would delete it (and the record would name a
    path that no longer exists): refused before any work, the export untouched."""
    import shutil

    holder = tmp_path / "holder"
    shutil.copytree(tiny_export, holder / "export")
    before = sorted(p.name for p in (holder / "export").iterdir())
    with pytest.raises(ValueError, match="would replace --export"):
        recalibrate(
            RecalibrateConfig(
                export=str(holder / "export"),
                judgments=str(tiny_dataset / "train.jsonl"),
                out=str(holder),
                overwrite=True,
            )
        )
    assert sorted(p.name for p in (holder / "export").iterdir()) == before


def test_the_judging_pages_folder_is_read_as_it_is(
    tiny_export: Path, tiny_dataset: Path, tmp_path: Path
):
    """Two assessors judged the same pairs on the page: one record per pair, the lower grade."""
    from judgments.store import JudgmentStore

    store = JudgmentStore(tmp_path / "judging")
    lines = (tiny_dataset / "train.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for name, shift in (("alice", 0), ("bob", 1)):
        for r in records:
            grade = 3 if r["label"] else shift  # bob calls the irrelevant ones related
            hit = {k: r[k] for k in ("qid", "query", "doc_id", "text")}
            store.add(hit | {"grade": grade, "assessor": name, "seconds": 1.0})
    store.close()
    report = recalibrate(
        RecalibrateConfig(
            export=str(tiny_export), judgments=str(tmp_path / "judging"), out=str(tmp_path / "o")
        )
    )
    pairs = {(r["qid"], r["doc_id"]) for r in records}
    fit = sum(1 for r in records if r["qid"] in report["fit_queries"])
    assert report["before"]["pairs"] == len(pairs) - fit  # each pair once, not once per assessor


def test_judgments_that_are_the_exports_own_validation_pairs_are_named(
    tiny_export: Path, tiny_dataset: Path, tmp_path: Path, caplog
):
    """The export names its dataset: judged pairs from its validation split (where the stored
    threshold was fitted) are counted in a warning and in recalibration.json."""
    import shutil

    export = tmp_path / "export"
    shutil.copytree(tiny_export, export)
    description = json.loads((export / "grader_config.json").read_text())
    description["data"] = {"dataset": str(tiny_dataset)}
    (export / "grader_config.json").write_text(json.dumps(description))
    judged = tmp_path / "judged.jsonl"
    validation = (tiny_dataset / "validation.jsonl").read_text()
    judged.write_text(validation + (tiny_dataset / "test.jsonl").read_text())
    report = recalibrate(
        RecalibrateConfig(export=str(export), judgments=str(judged), out=str(tmp_path / "o"))
    )
    overlap = report["export_data_overlap"]
    assert overlap["checked"] and overlap["train_pairs"] == 0
    assert overlap["validation_pairs"] == len(validation.splitlines())
    assert f"{overlap['validation_pairs']} of the" in caplog.text
    assert "are the export's validation pairs" in caplog.text
