"""The benchmarks' former command names, named in older docs and issues, still run the moved
modules from a checkout: ``python -m eval.bench.NAME`` (benchmarks/NAME.py, benchmarks/gpu/NAME.py)
and ``python -m eval.downstream`` (benchmarks/downstream)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MOVED = sorted(
    path
    for folder in (REPO / "benchmarks", REPO / "benchmarks" / "gpu")
    for path in folder.glob("*.py")
    if 'if __name__ == "__main__"' in path.read_text(encoding="utf-8")
)


def test_every_former_benchmark_name_finds_the_moved_module():
    assert {path.stem for path in MOVED} >= {"reliability", "grading", "fast_path"}
    for path in MOVED:
        spec = importlib.util.find_spec(f"eval.bench.{path.stem}")
        assert spec is not None and Path(spec.origin) == path, path.stem


@pytest.mark.slow
@pytest.mark.parametrize(
    ("former", "usage"),
    [
        ("eval.bench.reliability", "usage:"),
        ("eval.downstream", "usage:"),
    ],
)
def test_the_former_commands_run(former: str, usage: str):
    result = subprocess.run(
        [sys.executable, "-m", former, "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(usage)
