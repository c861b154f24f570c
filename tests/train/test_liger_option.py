"""``use_liger_kernel`` (transformers' switch): refused in one line where Liger's kernels cannot
run (no CUDA GPU, no liger-kernel package), and otherwise handed to the Trainer of every recipe."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.cli import parse_config
from core.errors import InputError
from models.builder import GraderModelConfig
from tests.commands import run_command
from tests.train.conftest import PARSERS, args_for
from train.train import DataConfig, LossConfig, train

REPO = Path(__file__).resolve().parents[2]


def test_use_liger_kernel_on_a_cpu_is_refused_while_parsing():
    with pytest.raises(InputError, match=r"^use_liger_kernel: .*CUDA GPU.*cpu; leave it false"):
        parse_config(PARSERS, ["--use_liger_kernel", "true", "--use_cpu", "true"])


def test_a_gpu_without_the_liger_package_is_refused_by_name(monkeypatch: pytest.MonkeyPatch):
    import torch
    import transformers.utils

    from models.speed import liger_unavailable

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(transformers.utils, "is_liger_kernel_available", lambda: False)
    reason = liger_unavailable("cuda")
    assert reason is not None and "pip install liger-kernel" in reason and "\n" not in reason


@pytest.mark.slow
def test_the_training_command_refuses_liger_on_a_cpu_in_one_line(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    """Exit 2 and one line, before any model loads (it used to load the model, tokenize and
    fail inside the Trainer with transformers' ImportError traceback)."""
    result = run_command(
        [
            "train",
            "--config",
            str(REPO / "train/configs/smollm2-135m-C-full.yaml"),
            "--model_name_or_path",
            str(tiny_model_dir),
            "--dataset",
            str(tiny_dataset),
            "--output_dir",
            str(tmp_path / "out"),
            "--max_steps",
            "1",
            "--use_liger_kernel",
            "true",
        ]
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: use_liger_kernel: Liger's kernels are Triton kernels")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["full", "generative"])
def test_use_liger_kernel_reaches_the_trainer_of_each_recipe(
    tiny_model_dir: Path,
    tiny_dataset: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
):
    """Where Liger can run, the flag and its kernel config go to transformers' own
    ``apply_liger_kernel`` on the model being trained (the kernels themselves need a GPU: here
    the call is recorded instead)."""
    import transformers.trainer

    import models.speed

    applied: list[tuple[str, dict | None]] = []
    monkeypatch.setattr(models.speed, "liger_unavailable", lambda device: None)
    monkeypatch.setattr(
        transformers.trainer,
        "apply_liger_kernel",
        lambda model, config: applied.append((type(model).__name__, config)),
    )
    args = args_for(
        tmp_path,
        max_steps=1,
        eval_strategy="no",
        use_liger_kernel=True,
        liger_kernel_config={"rope": True},
    )
    train(
        GraderModelConfig(model_name_or_path=str(tiny_model_dir), mode=mode, max_length=256),
        DataConfig(dataset=str(tiny_dataset)),
        LossConfig(),
        args,
    )
    expected = "LlamaForSequenceClassification" if mode == "full" else "LlamaForCausalLM"
    assert [name for name, _ in applied] == [expected]
    assert applied[0][1]["rope"] is True


def test_options_that_do_not_apply_are_refused_before_any_model_loads(
    monkeypatch: pytest.MonkeyPatch,
):
    import train.config
    from train.config import check_combination

    for option in ("padding_free", "use_liger_kernel"):
        args = args_for(Path("/tmp/unused"))
        setattr(args, option, True)  # set after parsing, which refuses Liger on a CPU itself
        with pytest.raises(InputError, match=rf"^{option}: mode=frozen trains a small top"):
            check_combination(
                GraderModelConfig(model_name_or_path="x", mode="frozen"),
                DataConfig(),
                LossConfig(),
                args,
            )
    # A family whose model cannot read pairs apart from position ids (an encoder's, say).
    monkeypatch.setattr(train.config, "PADDING_FREE_FAMILIES", ("answer_token",))
    with pytest.raises(InputError, match=r"^padding_free: the classifier family has no"):
        check_combination(
            GraderModelConfig(model_name_or_path="x", mode="full"),
            DataConfig(),
            LossConfig(),
            args_for(Path("/tmp/unused"), padding_free=True),
        )
