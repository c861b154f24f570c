"""A job's stage folders are the job's: a command run by hand that names one as its ``--out``
would overwrite the stage's output under the stamp that says it is up to date, so the next
resume would skip it and the job's report would mix two runs. The main job runs its stages with
:data:`STAGE_ENV` set; a command started without it refuses such an ``--out``."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from core.artifacts import Artifact
from core.errors import InputError

STAGE_ENV = "RELEVANCE_GRADER_JOB_STAGE"  # set by the main job for the stages it runs


class StageRecord(Artifact):
    """``JOB/stages/NAME.json``: the stamp of a finished stage, the digest of its settings and
    inputs (the job skips the stage while it matches), the command it ran, the config file the
    command read and the outputs it writes. Stamps of earlier releases (no format_version) hold
    the command's flags instead of a config file, ``--out`` among them."""

    FILE = "NAME.json"
    FORMAT_VERSION = 1
    SAME_SHAPE_SINCE = 0
    fingerprint: str = ""
    command: list[str] = Field(default_factory=list)
    config: str | None = None  # the YAML the command read (--config)
    outs: list[str] = Field(default_factory=list)  # the --out of each of the stage's settings

    def written(self) -> list[str]:
        """What the stage writes: its recorded outs, else its command's --out flags."""
        flags = self.command
        return self.outs or [flags[i + 1] for i, arg in enumerate(flags[:-1]) if arg == "--out"]


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
            if record and any(Path(p).resolve() == target for p in record.written()):
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
