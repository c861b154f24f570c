"""Every training mode under DDP with two CPU processes, launched as the README launches on GPUs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from models.families import MODES
from tests.conftest import TWO_PROCESS_LAUNCH

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_every_mode_trains_under_ddp_on_two_cpu_processes_without_use_cpu(
    model_dir_for, tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    """The README's multi-GPU launch on a machine without a GPU: no --use_cpu is needed, every
    mode's parameters all receive gradients (so DDP runs without find_unused_parameters and does
    not warn about it), and both ranks finish."""
    command = [
        *TWO_PROCESS_LAUNCH,
        str(REPO / "tests/train/ddp_modes.py"),
        str(tiny_model_dir),
        str(tiny_dataset),
        str(tmp_path / "out"),
        *(f"{mode}={model_dir_for(mode)}" for mode in MODES),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    finished = [
        json.loads(line.removeprefix("finished "))
        for line in result.stdout.splitlines()
        if line.startswith("finished ")
    ]
    assert [row["mode"] for row in finished] == list(MODES)
    assert all(row["world_size"] == 2 for row in finished)
    assert all(row["train_loss"] == row["train_loss"] for row in finished)  # not NaN
    assert "find_unused_parameters" not in result.stderr
    assert "doesn't support bf16" not in result.stderr
