"""The next-token read-out runs the LM head on the last real position only, and equals the
full-logits computation it replaces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from models.scoring import answer_token_probabilities, last_token, next_token_logits, pad_right


@pytest.fixture(scope="module")
def causal_lm(tiny_model_dir: Path):
    from models.resolve import load_model

    model, tokenizer = load_model(str(tiny_model_dir), task="causal-lm", dtype=torch.float32)
    return model.eval(), tokenizer


def test_next_token_logits_equal_the_full_logits_at_the_last_real_token(causal_lm):
    model, tokenizer = causal_lm
    inputs = [[5, 9, 14, 22, 7, 31], [8, 3], [40, 41, 42, 43]]  # unequal lengths: right padding
    ids, mask = pad_right(inputs, tokenizer.pad_token_id, model.device)
    with torch.inference_mode():
        full = model(input_ids=ids, attention_mask=mask, logits_to_keep=0).logits
        expected = last_token(full, mask)
        got = next_token_logits(model, ids, mask)
    assert got.shape == (3, full.shape[-1])
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_answer_probabilities_do_not_depend_on_batching(causal_lm):
    model, tokenizer = causal_lm
    inputs = [[5, 9, 14, 22, 7, 31], [8, 3], [40, 41, 42, 43], [12] * 9]
    answers = [10, 20]
    with torch.inference_mode():
        one, mass_one = answer_token_probabilities(
            model, inputs, answers, pad_token_id=tokenizer.pad_token_id, batch_size=1
        )
        many, mass_many = answer_token_probabilities(
            model, inputs, answers, pad_token_id=tokenizer.pad_token_id, batch_size=4
        )
    torch.testing.assert_close(torch.tensor(one), torch.tensor(many), rtol=1e-5, atol=1e-5)
    assert ((one.sum(1) - 1).__abs__() < 1e-5).all() and (mass_many > 0).all()
    torch.testing.assert_close(
        torch.tensor(mass_one), torch.tensor(mass_many), rtol=1e-4, atol=1e-7
    )


def test_common_prefix_lengths_by_hand():
    from models.scoring import common_prefix_lengths

    inputs = [[1, 2, 3, 4], [1, 2, 3, 9, 9], [1, 2, 7], [5, 6], [1, 2, 3]]
    groups = ["a", "a", "b", "c", "b"]
    # a: [1,2,3] shared; b: [1,2] shared; c: alone
    assert common_prefix_lengths(inputs, groups) == [3, 3, 2, 0, 2]


def test_shared_prefix_answer_probabilities_equal_the_plain_pass(causal_lm):
    from models.scoring import common_prefix_lengths

    model, tokenizer = causal_lm
    prompt = [5, 9, 14, 22, 7, 31, 3]
    inputs = [[*prompt, 40, 41], [*prompt, 8], [*prompt, 42, 43, 44, 45], [12, 13, 14], [12, 13]]
    prefix = common_prefix_lengths(inputs, ["q1", "q1", "q1", "q2", "q2"])
    assert prefix == [7, 7, 7, 2, 2]
    with torch.inference_mode():
        plain, mass = answer_token_probabilities(
            model, inputs, [10, 20], pad_token_id=tokenizer.pad_token_id, batch_size=2
        )
        shared, shared_mass = answer_token_probabilities(
            model,
            inputs,
            [10, 20],
            pad_token_id=tokenizer.pad_token_id,
            batch_size=2,
            prefix_lengths=prefix,
        )
    torch.testing.assert_close(torch.tensor(shared), torch.tensor(plain), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.tensor(shared_mass), torch.tensor(mass), rtol=1e-4, atol=1e-6)


def test_relevant_probability_and_grades_read_binary_and_graded_heads_alike():
    from models.scoring import decided_grades, relevant_probability

    binary = np.array([[0.7, 0.3], [0.2, 0.8]])
    np.testing.assert_allclose(relevant_probability(binary), [0.3, 0.8])
    graded = np.array([[0.1, 0.5, 0.3, 0.1], [0.05, 0.05, 0.3, 0.6], [0.4, 0.1, 0.45, 0.05]])
    np.testing.assert_allclose(relevant_probability(graded, 2), [0.4, 0.9, 0.5])
    # The argmax grade of the first row is 1, but a pair labelled relevant gets a relevant grade.
    grades = decided_grades(graded, np.array([True, True, False]), relevant_from=2)
    np.testing.assert_array_equal(grades, [2, 3, 0])


def test_cpu_batches_hold_a_bounded_number_of_padded_tokens():
    """On a CPU, batches stay near CPU_BATCH_TOKENS padded tokens (what runs fastest there);
    elsewhere only the given caps apply. Every index is in exactly one batch, longest first."""
    from models.scoring import CPU_BATCH_TOKENS, length_sorted_batches

    lengths = [100] * 40 + [30] * 100 + [2 * CPU_BATCH_TOKENS]
    for device, cap in (("cpu", CPU_BATCH_TOKENS), ("cuda", 16384), (None, 16384)):
        batches = list(length_sorted_batches(lengths, 64, 16384, device))
        assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
        padded = [max(lengths[i] for i in batch) * len(batch) for batch in batches]
        # An input longer than the cap goes alone; every other batch keeps under it.
        assert all(p <= cap or len(b) == 1 for p, b in zip(padded, batches, strict=True))
        assert all(len(batch) <= 64 for batch in batches)
    assert next(length_sorted_batches(lengths, 64, 16384, "cpu")) == [len(lengths) - 1]
    assert len(list(length_sorted_batches(lengths, 64, 16384, "cpu"))) > len(
        list(length_sorted_batches(lengths, 64, 16384, "cuda"))
    )
