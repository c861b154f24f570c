"""The main job runs each stage from typed settings: the config objects the stage's command
parses, written to ``stages/NAME.yaml`` and read back by the command with ``--config`` (no flag
strings), each through its name in the ``relevance-grader`` table; a stamp of an earlier format is
no stamp (its stage re-runs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from core.cli import parse_config
from core.commands import COMMANDS
from core.errors import InputError
from core.job_stages import StageRecord, stage_times, stage_writing
from eval.jobs.pipeline import Pipeline, PipelineConfig, settings_mapping

REPO = Path(__file__).resolve().parents[2]
MAIN = str(REPO / "eval/configs/main.yaml")


def pipeline(tmp_path: Path, *flags: str) -> Pipeline:
    args = ["--config", MAIN, "--run_dir", str(tmp_path / "run"), *flags]
    (config,) = parse_config([PipelineConfig], args)
    return Pipeline(config)


SETTINGS = {
    "judged": ("--teacher_args", "--samples 3", "--train_args", "--labels graded"),
    "no qrels": ("--qrels", "none", "--teacher_backend", "openai", "--classifier_config", ""),
}


@pytest.mark.parametrize("flags", SETTINGS.values(), ids=SETTINGS.keys())
def test_the_config_file_a_stage_gets_parses_back_to_its_settings(tmp_path: Path, flags):
    job = pipeline(tmp_path, *flags)
    stages = job.stages()
    assert len({stage.command for stage in stages}) >= 7
    for stage in stages:
        path = tmp_path / f"{stage.slug}.yaml"
        path.write_text(yaml.safe_dump(settings_mapping(stage.configs), sort_keys=False))
        parsed = parse_config([type(config) for config in stage.configs], ["--config", str(path)])
        assert list(parsed) == stage.configs, stage.name
        assert stage.command in COMMANDS, stage.name
        argv = stage.argv(path)
        assert argv[-5:] == ["-m", "core.commands", stage.command, "--config", str(path)]
        assert stage.typed(path) == f"relevance-grader {stage.command} --config {path}"


def test_the_users_pass_through_flags_are_typed_settings(tmp_path: Path):
    stages = {s.name: s for s in pipeline(tmp_path, *SETTINGS["judged"]).stages()}
    label, judge = stages["teacher labels"].configs
    assert judge.samples == 3 and label.out == str(tmp_path / "run" / "labels" / "teacher.jsonl")
    (study,) = stages["cross-validation"].configs
    assert study.train_args == ["--labels", "graded"]
    with pytest.raises(InputError, match="teacher_args: --sample_s 3") as refused:
        pipeline(tmp_path, "--teacher_args", "--sample_s 3").stages()
    assert "\n" not in str(refused.value)


def test_a_stamp_of_an_earlier_format_is_no_stamp(tmp_path: Path):
    """An earlier format's stamp (no format_version, the settings as the command's flags) is not
    read as done, even where its digest was the stage's: the stage re-runs. A stamp of this
    release matches its digest and names what the stage writes."""
    job = pipeline(tmp_path)
    stage = job.retrieval_stage()
    stage.output.parent.mkdir(parents=True)
    stage.output.write_text("{}")
    (config,) = stage.configs
    earlier = {
        "fingerprint": stage.fingerprint(),
        "command": [sys.executable, "-m", "data.candidates", "--out", config.out],
    }
    job.stamp(stage).parent.mkdir(parents=True, exist_ok=True)
    job.stamp(stage).write_text(json.dumps(earlier))
    assert not job.is_done(stage, stage.fingerprint())
    assert stage_writing(config.out) is None
    path = job.config_file(stage)
    record = StageRecord(
        fingerprint=stage.fingerprint(),
        command=stage.argv(path),
        config=str(path),
        outs=stage.outs(),
        seconds=1.0,
    )
    record.write(job.stamp(stage))
    assert job.is_done(stage, stage.fingerprint())
    # The stamp names what the stage writes: a hand-run command may not write there.
    assert stage_writing(config.out) == (stage.slug, job.root.resolve())


class FakeClock:
    """perf_counter for the job: each stage's command takes ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.now, self.seconds = 0.0, seconds

    def perf_counter(self) -> float:
        return self.now


def test_a_stage_a_re_run_skips_keeps_the_time_it_took(tmp_path: Path, monkeypatch):
    """A re-run that skips every stage once wrote each at 0.0 s and a total of seconds: the
    stamp keeps what the stage took, and the reports say it was done earlier."""
    from eval.jobs import pipeline as pipeline_module
    from eval.report.markdown import report_markdown
    from measure.classification.summaries import JobSummary
    from tests.eval.report_inputs import make_main_job_folder, make_search_folders

    clock = FakeClock(42.5)
    monkeypatch.setattr(pipeline_module, "time", clock)

    def run_command(command, log):
        clock.now += clock.seconds
        stage.output.parent.mkdir(parents=True, exist_ok=True)
        stage.output.write_text("{}")
        return 0

    monkeypatch.setattr(pipeline_module, "_run_logged", run_command)
    first = pipeline(tmp_path)
    stage = first.retrieval_stage()
    first.run_stage(stage)
    assert first.timings == {"retrieval runs": 42.5} and first.done_earlier == []
    assert StageRecord.read(first.stamp(stage)).seconds == 42.5

    monkeypatch.setattr(pipeline_module, "_run_logged", None)  # a re-run runs nothing
    again = pipeline(tmp_path)
    again.run_stage(stage)
    assert again.timings == {"retrieval runs": 42.5}
    assert again.done_earlier == ["retrieval runs"]
    assert stage_times(
        SimpleNamespace(stage_seconds=again.timings, done_earlier=["retrieval runs"])
    ) == {"retrieval runs": "skipped (done earlier, 42.5 s)"}

    # The report of such a re-run (a main job folder whose summary says so).
    adi = REPO / "data" / "collections" / "adi"
    folder = make_main_job_folder(make_search_folders(adi, tmp_path)["human"], adi, tmp_path)
    report = report_markdown(JobSummary.read(folder / JobSummary.FILE))
    assert "total 12.5 s in this run, 1 of 2 stages done earlier (40.0 s when they ran)" in report
    assert "- retrieval runs: skipped (done earlier, 40.0 s)\n- metric pipeline: 3.0\n" in report
