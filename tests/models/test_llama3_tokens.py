"""Llama-3-style tokenizers (BOS added on encode, no pad token, a reserved pad token, a chat template
that prints the BOS itself): training, scoring and export must see the same tokens."""

from __future__ import annotations

from pathlib import Path

from datasets import Dataset

from models.input_format import GraderInputFormat, format_pairs
from models.resolve import RESERVED_PAD_TOKEN, load_tokenizer


def test_the_reserved_pad_token_is_used_and_never_in_a_prompt(llama3_model_dir: Path):
    tokenizer = load_tokenizer(str(llama3_model_dir))
    assert tokenizer.pad_token == RESERVED_PAD_TOKEN
    assert tokenizer.pad_token_id not in (tokenizer.eos_token_id, tokenizer.bos_token_id)
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=256)
    ids = format_pairs(tokenizer, fmt, ["what is an axon"], ["An axon is ..."]).input_ids[0]
    assert tokenizer.pad_token_id not in ids
    assert ids.count(tokenizer.bos_token_id) == 1 and ids[0] == tokenizer.bos_token_id


def test_generative_training_sees_the_scoring_tokens_plus_the_answer(
    llama3_model_dir: Path, tmp_path: Path
):
    from models.builder import GraderModelConfig, build_grader
    from tests.train.conftest import args_for
    from train.recipes.answer_token import generative_trainer

    config = GraderModelConfig(
        model_name_or_path=str(llama3_model_dir), mode="generative", max_length=256
    )
    model, tokenizer = build_grader(config)
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=256)
    rows = {"query": ["what is an axon", "capital of france"], "text": ["An axon ...", "Paris"]}
    raw = Dataset.from_dict({**rows, "label": [1, 0]})
    trainer = generative_trainer(model, tokenizer, fmt, raw, None, args_for(tmp_path))
    scored = format_pairs(tokenizer, fmt, rows["query"], rows["text"]).input_ids
    yes, no = fmt.label_token_ids(tokenizer)[1], fmt.label_token_ids(tokenizer)[0]
    for row, prompt, answer in zip(trainer.train_dataset, scored, (yes, no), strict=True):
        ids = row["input_ids"]
        assert ids.count(tokenizer.bos_token_id) == 1  # TRL did not add a second BOS
        assert ids[: len(prompt)] == prompt and ids[len(prompt)] == answer
        assert ids[-1] == tokenizer.eos_token_id
        # The loss covers the answer and EOS only (TRL folds completion_mask into labels).
        assert [t for t in row["labels"] if t != -100] == ids[len(prompt) :]
