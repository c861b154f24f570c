"""A job's stage folders are the job's: a command run by hand that names one as its ``--out``
would overwrite the stage's output under the stamp that says it is up to date, so the next
resume would skip it and the job's report would mix two runs. The main job runs its stages with
:data:`STAGE_ENV` set; a command started without it refuses such an ``--out``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.artifacts import Artifact
from core.errors import InputError

STAGE_ENV = "RELEVANCE_GRADER_JOB_STAGE"  # set by the main job for the stages it runs


class StageRecord(Artifact):
    """``JOB/stages/NAME.json``: the stamp of a finished stage, the digest of its settings and
    inputs (the job skips the stage while it matches), the command it ran, the config file the
    command read, the outputs it writes and how long it took. A stamp of another format version
    is no stamp: the job re-runs its stage."""

    FILE = "NAME.json"
    FORMAT_VERSION = 2
    fingerprint: str
    command: list[str]
    config: str  # the YAML the command read (--config)
    outs: list[str]  # the --out of each of the stage's settings
    seconds: float  # the time the stage took when it ran


class JobConfig(Artifact):
    """``JOB/config.json``: the settings a job ran with, its config's fields as they were (flat,
    every one kept for the report's settings table). The report reads two of them: ``run_dir``
    (recorded relative to the folder the job ran in) and ``qrels``."""

    model_config = ConfigDict(extra="allow")  # the rest of the job's settings, shown as they are
    FILE = "config.json"
    FORMAT_VERSION = 1
    run_dir: str | None = None  # the main job's; the cross-validation's config has none
    qrels: str | None = None  # the human judgments (None: a corpus without them)

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> JobConfig:
        """The file of a job's settings (its config dataclass, ``asdict``)."""
        return cls.validated(dict(settings), cls.FILE)

    def settings(self) -> dict[str, Any]:
        """Every setting the file holds (an open mapping: each job's config has its own)."""
        return self.model_dump(mode="json", exclude={"format_version"}, exclude_unset=True)

    def dump(self) -> dict[str, Any]:
        # exclude_unset, not exclude_defaults: a setting that is None (qrels: none) stays, as
        # null, and a job config without run_dir gets none.
        return {"format_version": self.format_version, **self.settings()}


class HistoryRecorded(BaseModel):
    """Where the metric stage's evaluation was recorded, and from which stage result."""

    model_config = ConfigDict(extra="forbid")
    store: str
    fingerprint: str


class HistoryMark(Artifact):
    """``JOB/stages/history.json``: the --track store the main job recorded its evaluation in,
    with the fingerprint of the metric stage it came from (a resumed job records it once)."""

    FILE = "history.json"
    FORMAT_VERSION = 1
    recorded: HistoryRecorded


def read_stage_record(path: Path) -> StageRecord | None:
    """The stamp at ``path``; None for a file of the folder that is no stamp (the history mark)."""
    try:
        return StageRecord.read(path)
    except (InputError, OSError):
        return None


def stage_writing(out: str | os.PathLike[str]) -> tuple[str, Path] | None:
    """(stage name, job folder) when ``out`` is what a stage a job's stamp
    (``JOB/stages/NAME.json``) records writes, else None."""
    target = Path(out).resolve()
    for job in target.parents:
        stamps = job / "stages"
        if not stamps.is_dir():
            continue
        for path in sorted(stamps.glob("*.json")):
            record = read_stage_record(path)
            if record and any(Path(p).resolve() == target for p in record.outs):
                return path.stem, job
    return None


def refuse_job_stage(flag: str, out: str | os.PathLike[str]) -> None:
    """Refuse ``flag``'s ``out`` where it is a job's stage folder, unless the job runs it."""
    if os.environ.get(STAGE_ENV):
        return
    found = stage_writing(out)
    if found:
        name, job = found
        raise InputError(
            f"{flag}: {out} is the {name!r} stage's output of the job in {job}; writing it "
            "would overwrite that job's results: give another --out"
        )


def stage_time_text(seconds: float | None, done_earlier: bool) -> str:
    """How a report states a stage's time: the seconds it took in this run, or, for a stage a
    re-run skipped, the time it took when it ran (kept in its stamp)."""
    if not done_earlier:
        return "time not recorded" if seconds is None else f"{seconds}"
    took = "time not recorded" if seconds is None else f"{seconds} s"
    return f"skipped (done earlier, {took})"


def total_note(summary: Any) -> str:
    """After a job's total time: what the stages it skipped took when they ran (``summary``: a
    ``JobSummary``; empty when the run skipped none)."""
    if not summary.done_earlier:
        return ""
    earlier = [summary.stage_seconds.get(name) for name in summary.done_earlier]
    recorded = [s for s in earlier if s is not None]
    took = f"{round(sum(recorded), 1)} s when they ran" if recorded else "times not recorded"
    if recorded and len(recorded) < len(earlier):
        took += f" ({len(earlier) - len(recorded)} not recorded)"
    count = len(summary.done_earlier)
    return f" in this run, {count} of {len(summary.stage_seconds)} stages done earlier ({took})"


def stage_times(summary: Any) -> dict[str, str]:
    """Each stage's time as reports state it (``summary``: a ``JobSummary``)."""
    return {
        name: stage_time_text(seconds, name in summary.done_earlier)
        for name, seconds in summary.stage_seconds.items()
    }
