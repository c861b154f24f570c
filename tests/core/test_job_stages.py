"""A job's stage outputs are refused as any command's --out (core.cli.parse_config), unless
the job itself runs the command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from core.job_stages import STAGE_ENV


def _job_with_stamps(root: Path) -> dict[str, Path]:
    """A job folder whose stamps record a rerank stage (a file --out) and an agreement stage
    (a folder --out), as the main job writes them."""
    from core.job_stages import StageRecord

    outs = {"rerank": root / "candidates" / "dense-grader.trec", "agreement": root / "agreement"}
    for name in ("rerank", "ranking-agreement"):
        out = str(outs[name.removeprefix("ranking-")])
        config = str(root / "stages" / f"{name}.yaml")
        command = [sys.executable, "-m", "core.commands", name, "--config", config]
        record = StageRecord(fingerprint="x", command=command, config=config, outs=[out], seconds=1)
        record.write(root / "stages" / f"{name.removeprefix('ranking-')}.json")
    return outs


@pytest.mark.parametrize(
    ("command", "stage"),
    [("rerank", "rerank"), ("ranking-agreement", "agreement"), ("build", "rerank")],
)
def test_a_stage_output_is_refused_by_every_command(tmp_path, monkeypatch, command, stage):
    """Before any work: the refusal names --out, the stage and the job; a path beside it is
    accepted by the guard (the command then asks for its other flags)."""
    from core.commands import COMMANDS

    monkeypatch.delenv(STAGE_ENV, raising=False)
    job = tmp_path / "main"
    outs = _job_with_stamps(job)
    main = COMMANDS[command].main()
    with pytest.raises(ValueError) as refused:
        main(["--out", str(outs[stage])])
    message = str(refused.value)
    assert message.startswith("--out: ") and f"{stage!r} stage" in message and str(job) in message
    with pytest.raises(Exception) as other:  # past the guard: another check speaks
        main(["--out", str(job / "mine")])
    assert "stage" not in str(other.value)


def test_the_job_itself_may_write_its_stage(tmp_path, monkeypatch):
    from core.cli import parse_config
    from measure.labelers.rerank import RerankConfig

    outs = _job_with_stamps(tmp_path / "main")
    monkeypatch.setenv(STAGE_ENV, "1")
    (config,) = parse_config([RerankConfig], ["--out", str(outs["rerank"])])
    assert config.out == str(outs["rerank"])


def test_a_job_config_keeps_every_setting_and_refuses_unversioned_files(tmp_path):
    """config.json holds the job's settings flat, as before it was typed (None kept as null, no
    run_dir added to a config without one), plus its format version."""
    from core.job_stages import JobConfig

    settings = {"run_dir": "runs/main", "collection": "c", "qrels": None, "models": ["a"]}
    JobConfig.of(settings).write(tmp_path / JobConfig.FILE)
    written = json.loads((tmp_path / JobConfig.FILE).read_text())
    assert written == {"format_version": JobConfig.FORMAT_VERSION, **settings}
    read = JobConfig.read(tmp_path / JobConfig.FILE)
    assert read.run_dir == "runs/main" and read.qrels is None and read.settings() == settings
    study = JobConfig.of({"collection": "c", "qrels": "q.tsv"})
    assert "run_dir" not in study.dump() and study.qrels == "q.tsv"
    (tmp_path / "old.json").write_text(json.dumps(settings))  # no format_version
    with pytest.raises(ValueError, match=r"old\.json: no format version, .*re-run the stage"):
        JobConfig.read(tmp_path / "old.json")
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(ValueError, match=r"bad\.json: expected a JSON object, got list"):
        JobConfig.read(tmp_path / "bad.json")


def test_the_history_mark_is_no_stage_record(tmp_path):
    from core.job_stages import HistoryMark, HistoryRecorded, read_stage_record

    mark = HistoryRecorded(store="history.sqlite", fingerprint="abc")
    HistoryMark(recorded=mark).write(tmp_path / HistoryMark.FILE)
    assert read_stage_record(tmp_path / HistoryMark.FILE) is None
    assert HistoryMark.read(tmp_path / HistoryMark.FILE).recorded == mark
