"""A job's stage folders are the job's: a command run by hand that names one as its ``--out``
would overwrite the stage's output under the stamp that says it is up to date, so the next
resume would skip it and the job's report would mix two runs. The main job runs its stages with
:data:`STAGE_ENV` set; a command started without it refuses such an ``--out``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from core.errors import InputError

STAGE_ENV = "RELEVANCE_GRADER_JOB_STAGE"  # set by the main job for the stages it runs


def stage_writing(out: str | os.PathLike[str]) -> tuple[str, Path] | None:
    """(stage name, job folder) when ``out`` is the ``--out`` of a stage a job's stamp
    (``JOB/stages/NAME.json``, its ``command``) records, else None."""
    target = Path(out).resolve()
    for job in target.parents:
        stamps = job / "stages"
        if not stamps.is_dir():
            continue
        for stamp in sorted(stamps.glob("*.json")):
            try:
                command = json.loads(stamp.read_text(encoding="utf-8")).get("command") or []
            except (OSError, ValueError, AttributeError):
                continue
            outs = [command[i + 1] for i, arg in enumerate(command[:-1]) if arg == "--out"]
            if any(Path(path).resolve() == target for path in outs):
                return stamp.stem, job
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
