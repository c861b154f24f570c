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
    outs = {"rerank": root / "candidates" / "dense-grader.trec", "agreement": root / "agreement"}
    (root / "stages").mkdir(parents=True)
    for name, module in (("rerank", "eval.rerank"), ("agreement", "eval.ranking_agreement")):
        command = [sys.executable, "-m", module, "--k", "10", "--out", str(outs[name])]
        (root / "stages" / f"{name}.json").write_text(json.dumps({"command": command}))
    return outs


@pytest.mark.parametrize(
    ("module", "stage"),
    [("eval.rerank", "rerank"), ("eval.ranking_agreement", "agreement"), ("data.build", "rerank")],
)
def test_a_stage_output_is_refused_by_every_command(tmp_path, monkeypatch, module, stage):
    """Before any work: the refusal names --out, the stage and the job; a path beside it is
    accepted by the guard (the command then asks for its other flags)."""
    import importlib

    monkeypatch.delenv(STAGE_ENV, raising=False)
    job = tmp_path / "main"
    outs = _job_with_stamps(job)
    main = importlib.import_module(module).main
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
