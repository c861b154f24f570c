"""Where a result came from: the command, its settings, the package versions, the machine, the date.

A command that writes results calls :func:`write_provenance` beside them, so a report made later
(or on another machine) can say how the numbers were produced.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import shlex
import sys
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.artifacts import Artifact

PROVENANCE_FILE = "provenance.json"
# The packages whose versions decide the numbers (scoring, metrics, intervals).
PACKAGES = (
    "relevance-grader",
    "torch",
    "transformers",
    "peft",
    "ranx",
    "numpy",
    "scipy",
    "scikit-learn",
    "matplotlib",
)


def package_versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Installed version of each package (absent ones are left out)."""
    versions = {"python": platform.python_version()}
    for name in packages:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


class Machine(BaseModel):
    """The machine in words: operating system, architecture, CPU count, GPU when torch sees one."""

    model_config = ConfigDict(extra="forbid")
    system: str
    architecture: str
    cpus: int | None  # os.cpu_count(): None where it cannot tell
    gpu: str | None = None


class Environment(BaseModel):
    """Versions, machine and date of a process."""

    model_config = ConfigDict(extra="forbid")
    date: str
    versions: dict[str, str]  # package -> version (absent packages left out)
    machine: Machine

    def to_json(self) -> dict[str, Any]:
        """As provenance.json holds it (no gpu key without one), for the report's page."""
        return self.model_dump(mode="json", exclude_defaults=True)


class ProvenanceRecord(Artifact):
    """``OUT/provenance.json``: the command, its settings, the folder its relative paths are
    relative to, and the :class:`Environment` it ran in."""

    FILE = PROVENANCE_FILE
    FORMAT_VERSION = 1
    command: str
    config: dict[str, Any]  # the command's settings: each command's own fields
    cwd: str
    date: str
    versions: dict[str, str]
    machine: Machine

    def environment(self) -> Environment:
        return Environment(date=self.date, versions=self.versions, machine=self.machine)


def machine() -> Machine:
    """This machine."""
    torch = sys.modules.get("torch")  # only when the command already uses it: no import cost
    return Machine(
        system=f"{platform.system()} {platform.release()}",
        architecture=platform.machine(),
        cpus=os.cpu_count(),
        gpu=torch.cuda.get_device_name(0)
        if torch is not None and torch.cuda.is_available()
        else None,
    )


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def environment() -> Environment:
    """Versions, machine and date of this process."""
    return Environment(date=now(), versions=package_versions(), machine=machine())


def command_line(command: str, args: list[str] | None = None) -> str:
    """The command as a user would type it again: ``relevance-grader COMMAND ARGS``."""
    args = sys.argv[1:] if args is None else args
    return shlex.join(["relevance-grader", *command.split(), *args])


def write_provenance(
    out: str | os.PathLike[str], command: str, config: Any, args: list[str] | None = None
) -> ProvenanceRecord:
    """Write ``OUT/provenance.json``: the command, its settings (a dataclass), the working folder
    its relative paths are relative to, and :func:`environment`."""
    here = environment()
    record = ProvenanceRecord(
        command=command_line(command, args),
        config=asdict(config) if is_dataclass(config) else dict(config),
        cwd=str(Path.cwd()),
        date=here.date,
        versions=here.versions,
        machine=here.machine,
    )
    record.write(Path(out) / PROVENANCE_FILE)
    return record
