"""Repository contracts: stage imports point one way, every step answers --help, configs load."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STAGES = ("data", "models", "train", "eval")
# DESIGN.md: train and eval may import data and models; models and data import neither.
FORBIDDEN = {"data": {"train", "eval"}, "models": {"train", "eval"}}


def stage_files(stage: str) -> list[Path]:
    return sorted(p for p in (REPO / stage).rglob("*.py") if "__pycache__" not in p.parts)


def imported_stages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names & set(STAGES)


@pytest.mark.parametrize("stage", sorted(FORBIDDEN))
def test_imports_point_one_way(stage: str):
    offenders = {
        str(path.relative_to(REPO)): sorted(imported_stages(path) & FORBIDDEN[stage])
        for path in stage_files(stage)
        if imported_stages(path) & FORBIDDEN[stage]
    }
    assert offenders == {}


def step_modules() -> list[str]:
    modules = []
    for stage in STAGES:
        for path in stage_files(stage):
            if 'if __name__ == "__main__"' in path.read_text(encoding="utf-8"):
                parts = path.relative_to(REPO).with_suffix("").parts
                modules.append(".".join(parts[:-1] if parts[-1] == "__main__" else parts))
    return modules


def test_there_are_steps():
    assert {"data.validate", "models.prepare"} <= set(step_modules())


@pytest.mark.parametrize("module", step_modules())
def test_every_step_prints_help(module: str):
    result = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout


# Each YAML location and the test that loads every file in it.
YAML_LOADED_BY = {
    "accelerate_config.yaml": "tests/test_accelerate_config.py",
    "train/configs/*.yaml": "tests/train/test_train.py::test_every_training_config_parses",
    "train/configs/accelerate/*.yaml": "tests/train/test_train.py::test_accelerate_variants_parse",
    "data/prompts/*.yaml": "tests/data/test_label.py::test_every_prompt_loads_with_name_version_and_slots",
    "eval/configs/main.yaml": "tests/eval/test_pipeline.py::test_main_config_parses",
    "eval/configs/study*.yaml": "tests/eval/test_study.py::test_study_configs_parse",
    "eval/configs/squad.yaml": "tests/eval/test_downstream.py::test_squad_config_parses",
    "eval/configs/reader-*.yaml": "tests/eval/test_downstream.py::test_squad_config_parses",
    "eval/configs/judge-*.yaml": "tests/eval/test_downstream.py::test_squad_config_parses",
}


def test_every_yaml_config_is_loaded_by_a_test():
    """A new YAML file outside these locations needs a test that loads it (and an entry here)."""
    covered = {path for pattern in YAML_LOADED_BY for path in REPO.glob(pattern)}
    configs = {
        p
        for p in REPO.rglob("*.y*ml")
        if not any(part.startswith(".") for part in p.relative_to(REPO).parts)
    }
    assert sorted(str(p.relative_to(REPO)) for p in configs - covered) == []
    assert len(list(REPO.glob("train/configs/*.yaml"))) >= 10
