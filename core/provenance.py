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

from core.io import write_json

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


def machine() -> dict[str, Any]:
    """The machine in words: operating system, architecture, CPU count, GPU when torch sees one."""
    info: dict[str, Any] = {
        "system": f"{platform.system()} {platform.release()}",
        "architecture": platform.machine(),
        "cpus": os.cpu_count(),
    }
    torch = sys.modules.get("torch")  # only when the command already uses it: no import cost
    if torch is not None and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def environment() -> dict[str, Any]:
    """Versions, machine and date of this process."""
    return {"date": now(), "versions": package_versions(), "machine": machine()}


def command_line(module: str, args: list[str] | None = None) -> str:
    """The command as a user would type it again: ``python -m MODULE ARGS``."""
    args = sys.argv[1:] if args is None else args
    return shlex.join(["python", "-m", module, *args])


def write_provenance(
    out: str | os.PathLike[str], module: str, config: Any, args: list[str] | None = None
) -> dict[str, Any]:
    """Write ``OUT/provenance.json``: the command, its settings (a dataclass), the working folder
    its relative paths are relative to, and :func:`environment`."""
    record = {
        "command": command_line(module, args),
        "config": asdict(config) if is_dataclass(config) else dict(config),
        "cwd": str(Path.cwd()),
        **environment(),
    }
    write_json(Path(out) / PROVENANCE_FILE, record)
    return record
