"""``benchmarks.int8``: its per-token int8 linear layer, and the benchmark on a query-likelihood
grader."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmarks.int8 import PerTokenInt8Linear, per_token_int8
from benchmarks.int8 import main as int8_benchmark
from models.builder import GraderModelConfig
from tests.train.conftest import args_for
from train.train import DataConfig, LossConfig, train


def test_per_token_int8_matches_float_and_survives_an_outlier_token():
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 48)
    inputs = torch.randn(2, 5, 64)
    inputs[0, 0] *= 1000  # a first token with massive activations, as LLMs have
    quantized = PerTokenInt8Linear(linear)
    expected, output = linear(inputs), quantized(inputs)
    assert output.shape == expected.shape and output.dtype == inputs.dtype
    # Every token keeps ~1% relative error, the outlier's neighbours included: with one scale for
    # the whole tensor the others would round to a handful of levels.
    error = (output - expected).norm(dim=-1) / expected.norm(dim=-1)
    assert error.max() < 0.03
    one_scale = inputs.abs().max() / 127
    flattened = linear(torch.round(inputs / one_scale) * one_scale)
    assert ((flattened - expected).norm(dim=-1) / expected.norm(dim=-1))[1].min() > 0.1


def test_per_token_int8_replaces_every_linear_but_the_head():
    model = torch.nn.ModuleDict(
        {
            "body": torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()),
            "score": torch.nn.Linear(8, 2),
        }
    )
    per_token_int8(model)
    assert isinstance(model["body"][0], PerTokenInt8Linear)
    assert isinstance(model["score"], torch.nn.Linear)


@pytest.mark.slow
def test_the_int8_benchmark_reads_a_query_likelihood_grader_with_every_layer_quantized(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path, capsys
):
    """``benchmarks.int8`` on a query-likelihood grader: the LM head stays float where asked, and
    the quantized head of the all-layers variant is read too (it has no float weight)."""
    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir), mode="query_likelihood", max_length=256
    )
    args = args_for(tmp_path, num_train_epochs=1, learning_rate=1e-2, head_learning_rate=1e-2)
    train(model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args)
    int8_benchmark(["--model", args.output_dir, "--data", str(tiny_dataset / "validation.jsonl")])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert table[0].split(" | ")[3] == "ROC-AUC"
    rows = {line.split(" | ")[0].removeprefix("| "): line.split(" | ") for line in table[1:]}
    assert set(rows) == {
        "float32",
        "bfloat16",
        "all but the head, per token × per channel (torch._int_mm)",
        "every linear layer, per tensor",
        "all but the head, per tensor",
        "all but the head, per channel",
        "all but the head and down_proj, per channel",
    }
    for cells in rows.values():
        assert 0.0 <= float(cells[3]) <= 1.0  # every variant scored every pair
