"""Packed rows (models.packing) give the right-padded path's logits: same tokens, positions and
attention, several sequences side by side in rows of a fixed width."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from models.packing import (
    first_fit_decreasing,
    pack,
    packed_classifier_probabilities,
    packed_logits,
)
from models.scoring import classifier_probabilities, last_token, pad_right

WIDTH = 64


# flex_attention on a CPU compiles through inductor's C++ backend, which fails to build its kernel
# on some CPUs (torch 2.13, AVX512); the GPU run checks it (benchmarks.gpu.gpu_steps levers, max |dP|).
FLEX_ON_GPU_ONLY = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="flex_attention is checked on a GPU"
)


def random_sequences(n: int, seed: int = 0, low: int = 1, high: int = 60, vocab: int = 200):
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(rng.randint(low, high))] for _ in range(n)]


def classifier(attn_implementation: str):
    from transformers import LlamaConfig, LlamaForSequenceClassification

    from models.random_model import SHAPES

    config = LlamaConfig(**{**SHAPES["tiny"], "vocab_size": 256}, num_labels=2, pad_token_id=0)
    torch.manual_seed(0)
    model = LlamaForSequenceClassification(config).float().eval()
    model.set_attn_implementation(attn_implementation)
    return model


def test_packing_keeps_every_sequence_once_and_never_exceeds_the_width():
    sequences = random_sequences(200, seed=1)
    lengths = [len(s) for s in sequences]
    rows = first_fit_decreasing(lengths, WIDTH)
    assert sorted(i for row in rows for i in row) == list(range(len(sequences)))
    assert max(sum(lengths[i] for i in row) for row in rows) <= WIDTH
    # Nearly full rows: first-fit decreasing needs few more rows than the tokens' lower bound.
    assert len(rows) <= -(-sum(lengths) // WIDTH) + 3

    batch = pack(sequences, WIDTH, pad_id=0, rows=rows, num_rows=len(rows) + 2)
    assert batch.input_ids.shape == (len(rows) + 2, WIDTH)
    assert sorted(batch.order) == list(range(len(sequences)))
    assert batch.real_tokens == sum(lengths)
    for k, index in enumerate(batch.order):
        row, end = int(batch.seq_rows[k]), int(batch.seq_ends[k])
        n = lengths[index]
        assert batch.input_ids[row, end - n + 1 : end + 1].tolist() == sequences[index]
        assert batch.position_ids[row, end - n + 1 : end + 1].tolist() == list(range(n))
    mask = batch.attention_mask("sdpa")
    assert mask.shape == (len(rows) + 2, 1, WIDTH, WIDTH)
    assert mask.diagonal(dim1=-2, dim2=-1).all()  # every query sees at least itself: no NaN


def test_a_sequence_longer_than_the_width_is_refused():
    with pytest.raises(ValueError, match="longer than the row width 8"):
        first_fit_decreasing([3, 9, 2], 8)
    with pytest.raises(ValueError, match="longer than the row width"):
        packed_classifier_probabilities(classifier("sdpa"), [[5] * 9], row_width=8)
    with pytest.raises(ValueError, match="empty"):
        first_fit_decreasing([3, 0], 8)
    with pytest.raises(ValueError, match="rows needed"):
        pack([[1] * 6, [2] * 6], 8, 0, num_rows=1)


@pytest.mark.slow
@pytest.mark.parametrize(
    "attn_implementation",
    ["sdpa", "eager", pytest.param("flex_attention", marks=FLEX_ON_GPU_ONLY)],
)
def test_packed_logits_equal_the_right_padded_logits(attn_implementation):
    sequences = random_sequences(24, seed=2)
    model = classifier("sdpa")
    expected = classifier_probabilities(model, sequences, batch_size=8)
    ids, mask = pad_right(sequences, 0)
    with torch.inference_mode():
        hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        expected_logits = model.score(last_token(hidden, mask))
    if attn_implementation != "sdpa":
        try:
            model.set_attn_implementation(attn_implementation)
        except Exception as exc:  # flex_attention needs a recent torch
            pytest.skip(f"{attn_implementation}: {exc}")
    batch = pack(sequences, WIDTH, pad_id=0)
    assert batch.input_ids.shape[0] < len(sequences)  # several sequences share a row
    with torch.inference_mode():
        logits = packed_logits(model, batch)
    torch.testing.assert_close(logits, expected_logits[batch.order], rtol=1e-5, atol=1e-5)
    got = packed_classifier_probabilities(model, sequences, row_width=WIDTH, rows_per_batch=3)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_the_position_ids_alone_mark_the_sequences_for_sdpa_too():
    """transformers' own packed-sequence detection (attention_mask None, restarting positions)
    gives the same logits as the 4D mask, for every row of a batch."""
    sequences = random_sequences(16, seed=3)
    model = classifier("sdpa")
    batch = pack(sequences, WIDTH, pad_id=0)
    with torch.inference_mode():
        with_mask = packed_logits(model, batch)
        hidden = model.model(  # no cache: transformers looks for packing only without one
            input_ids=batch.input_ids, position_ids=batch.position_ids, use_cache=False
        ).last_hidden_state
        from_positions = model.score(hidden[batch.seq_rows, batch.seq_ends])
    torch.testing.assert_close(from_positions, with_mask, rtol=1e-5, atol=1e-5)


def test_a_peft_model_packs_through_its_lora_layers_and_head():
    from peft import LoraConfig, TaskType, get_peft_model

    sequences = random_sequences(10, seed=4)
    model = get_peft_model(
        classifier("sdpa"),
        LoraConfig(
            task_type=TaskType.SEQ_CLS,
            r=4,
            target_modules=["q_proj", "v_proj"],
            init_lora_weights=False,  # non-zero adapters: they must be applied
        ),
    ).eval()
    expected = classifier_probabilities(model, sequences, batch_size=4)
    got = packed_classifier_probabilities(model, sequences, row_width=WIDTH, rows_per_batch=2)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
