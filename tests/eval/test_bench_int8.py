"""The per-token int8 linear layer of ``eval.bench.int8``."""

from __future__ import annotations

import torch

from eval.bench.int8 import PerTokenInt8Linear, per_token_int8


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
