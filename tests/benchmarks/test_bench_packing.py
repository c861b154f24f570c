"""Packed training (benchmarks.training's packed variants, models.packing.PackedCollator): the
loss of a packed batch equals the right-padded batch's on the same pairs, and it trains."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


@pytest.fixture(scope="module")
def tiny_classifier_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from models.random_model import RandomModelConfig, write_random_model

    out = tmp_path_factory.mktemp("random-model")
    return write_random_model(RandomModelConfig(out=str(out), shape="tiny", dtype="float32"))


def test_the_packed_loss_equals_the_padded_loss_on_the_same_pairs(tiny_classifier_dir: Path):
    from benchmarks.training import BenchTrainingConfig, packed_dataset
    from models.builder import GraderModelConfig, build_grader
    from models.input_format import GraderInputFormat
    from models.losses import build_loss
    from train.grader_data import GraderCollator
    from train.trainer import GraderTrainer

    model, tokenizer = build_grader(
        GraderModelConfig(model_name_or_path=str(tiny_classifier_dir), mode="full", max_length=512)
    )
    model = model.float().eval()
    config = BenchTrainingConfig(
        model=str(tiny_classifier_dir), steps=2, max_length=512, rows_per_step=3
    )
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=512)
    _, items, collator = packed_dataset(config, tokenizer, fmt)
    collator.attn_implementation = model.config._attn_implementation
    step = items[0]
    packed = collator([step])
    assert packed["input_ids"].shape == (3, 512)
    assert len(step["input_ids"]) > 3  # rows of several pairs
    padded = GraderCollator(tokenizer.pad_token_id)(
        [
            {"input_ids": x, "labels": y, "soft_targets": 0.0}
            for x, y in zip(step["input_ids"], step["labels"], strict=True)
        ]
    )
    trainer = GraderTrainer.__new__(GraderTrainer)  # compute_loss needs only the loss
    trainer.loss_fn = build_loss("cross_entropy")
    with torch.no_grad():
        packed_loss = trainer.compute_loss(model, packed)
        padded_loss = trainer.compute_loss(model, padded)
    torch.testing.assert_close(packed_loss, padded_loss, rtol=1e-5, atol=1e-5)


def test_packed_full_trains_two_steps(tiny_classifier_dir: Path):
    from benchmarks.training import BenchTrainingConfig, run_variant

    result = run_variant(
        BenchTrainingConfig(
            model=str(tiny_classifier_dir),
            steps=2,
            max_length=256,
            rows_per_step=2,
            variant="packed-full",
        )
    )
    assert result["padded_tokens"] == 2 * 2 * 256
    assert 0 < result["real_tokens"] <= result["padded_tokens"]
    assert result["real_tokens"] > 0.8 * result["padded_tokens"]  # rows nearly full
    assert result["real_tokens_per_s"] > 0


@pytest.mark.parametrize("packed", [True, False])
def test_a_packed_step_runs_under_the_trainers_mixed_precision(tiny_classifier_dir: Path, packed):
    """The packed loss calls the decoder itself, not the model's forward, which is where
    accelerate puts bf16 autocast: without the trainer's autocast around it, a bf16 run trained
    packed rows in float32 (a third of the speed on the H100, 2026-11-26)."""
    import tempfile

    from datasets import Dataset

    from benchmarks.training import BenchTrainingConfig, packed_dataset
    from models.builder import GraderModelConfig, build_grader
    from models.input_format import GraderInputFormat
    from models.losses import build_loss
    from train.config import GraderTrainingArguments
    from train.grader_data import GraderCollator
    from train.trainer import GraderTrainer

    model, tokenizer = build_grader(
        GraderModelConfig(model_name_or_path=str(tiny_classifier_dir), mode="full", max_length=256)
    )
    model = model.float()
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=256)
    config = BenchTrainingConfig(model="", steps=1, max_length=256, rows_per_step=2)
    ids, items, collator = packed_dataset(config, tokenizer, fmt)
    if packed:
        collator.attn_implementation = model.config._attn_implementation
        dataset = Dataset.from_list(items)
    else:
        collator = GraderCollator(tokenizer.pad_token_id)
        dataset = Dataset.from_dict({"input_ids": ids, "labels": [i % 2 for i in range(len(ids))]})
    seen: list[torch.dtype] = []
    projection = model.model.layers[0].self_attn.q_proj
    projection.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    args = GraderTrainingArguments(
        output_dir=tempfile.mkdtemp(),
        max_steps=1,
        per_device_train_batch_size=1 if packed else len(ids),
        bf16=True,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        eval_strategy="no",
        load_best_model_at_end=False,
        disable_tqdm=True,
    )
    trainer = GraderTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        data_collator=collator,
        loss_fn=build_loss("cross_entropy"),
    )
    trainer.train()
    assert seen and set(seen) == {torch.bfloat16}, seen
