"""The registry of scoring families and training modes, and what each mode makes trainable."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from models.builder import GraderModelConfig, build_grader
from models.families import (
    ANSWER_TOKEN,
    CLASSIFIER,
    CROSS_ENCODER,
    FAMILIES,
    MODES,
    QUERY_LIKELIHOOD,
    family_of,
    family_of_description,
    training_mode,
)
from models.grader_config import GraderDescription
from train.recipes import recipe_for


def test_every_mode_has_a_registered_family_and_every_family_a_recipe():
    assert set(FAMILIES) == {"classifier", "answer_token", "query_likelihood", "cross_encoder"}
    assert {training_mode(name).family for name in MODES} == set(FAMILIES)
    for family in FAMILIES.values():
        assert recipe_for(family).family == family.name
    assert family_of("generative-lora") is ANSWER_TOKEN
    assert family_of("cross_encoder") is CROSS_ENCODER
    assert family_of("zero-shot") is ANSWER_TOKEN  # a zero-shot causal LM reads P(yes)
    assert family_of_description(GraderDescription()) is CLASSIFIER  # from before the modes
    with pytest.raises(ValueError, match="mode: unknown mode 'nosuch'"):
        family_of("nosuch")


def test_only_the_families_with_a_classification_head_take_graded_labels():
    assert {f.name for f in FAMILIES.values() if f.supports_graded} == {
        "classifier",
        "cross_encoder",
    }
    for name in MODES:
        if family_of(name).supports_graded:
            assert GraderModelConfig(mode=name, labels="graded", trainable_layers=1).num_labels == 4
        else:
            with pytest.raises(ValueError, match="labels=graded"):
                GraderModelConfig(mode=name, labels="graded")


def trainable(model: torch.nn.Module) -> set[str]:
    return {name for name, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_each_mode_builds_its_familys_model_with_the_right_parameters_trainable(
    mode: str, model_dir_for
):
    config = GraderModelConfig(
        model_name_or_path=str(model_dir_for(mode)), mode=mode, trainable_layers=1, max_length=64
    )
    model, _ = build_grader(config)
    family, spec = family_of(mode), training_mode(mode)
    is_classifier = type(model).__name__.endswith("ForSequenceClassification") or hasattr(
        model.base_model, "score"
    )
    assert is_classifier == (family.task == "classification")
    names = trainable(model)
    last = model.config.num_hidden_layers - 1
    if spec.lora:
        assert names and all("lora_" in n or "modules_to_save" in n for n in names)
        assert any("score" in n for n in names) == (family is CLASSIFIER)
    elif spec.cached_states:
        top = {n for n in names if ".layers." in n}
        assert all(f".layers.{last}." in n for n in top)
        assert bool(top) == (mode != "frozen")  # frozen trains the head alone
        assert any(n.startswith("score") for n in names) == (family is CLASSIFIER)
        if family is QUERY_LIKELIHOOD:
            assert "lm_head.weight" not in names  # the read-out stays the language model's
    else:
        assert names == {n for n, _ in model.named_parameters()}


def test_only_the_classifier_reads_the_query_likelihood_prompt(tiny_model_dir):
    """prompt_format query-likelihood gives a classifier the query-likelihood grader's prompt (so
    a frozen head beside that grader shares its pass); the answer-token family refuses it."""
    from transformers import AutoTokenizer

    from core.errors import InputError
    from models.families import family_of
    from models.families.query_likelihood.scoring import query_likelihood_format

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    fmt = family_of("frozen").input_format(tokenizer, 192, "query-likelihood", "tiny")
    assert fmt == query_likelihood_format(192)
    with pytest.raises(InputError, match="query-likelihood"):
        family_of("generative").input_format(tokenizer, 192, "query-likelihood", "tiny")


def test_the_cross_encoder_reads_the_pair_only_from_a_pair_tokenizer(
    tiny_bert_dir: Path, tiny_model_dir: Path
):
    """The cross-encoder takes no prompt, and a tokenizer without a [CLS] q [SEP] d [SEP] pair
    layout (a decoder's) is refused in one line naming the model."""
    from transformers import AutoTokenizer

    from core.errors import InputError

    bert = AutoTokenizer.from_pretrained(tiny_bert_dir)
    fmt = CROSS_ENCODER.input_format(bert, 128, "auto", "tiny-bert")
    assert (fmt.id, fmt.pair, fmt.max_length) == ("cross-encoder@1", True, 128)
    assert fmt.template == "[CLS] {query} [SEP] {document} [SEP]"
    with pytest.raises(InputError, match=r"max_length: .* reads at most 512 tokens, got 1024"):
        CROSS_ENCODER.input_format(bert, 1024, "auto", "tiny-bert")
    with pytest.raises(InputError, match="prompt_format: a cross-encoder reads no prompt"):
        CROSS_ENCODER.input_format(bert, 128, "chat", "tiny-bert")
    llama = AutoTokenizer.from_pretrained(tiny_model_dir)
    with pytest.raises(InputError, match=r"model_name_or_path: .* builds no \[CLS\] query"):
        CROSS_ENCODER.input_format(llama, 128, "auto", "tiny-llama")
