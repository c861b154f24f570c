"""``padding_free: true`` (train.padding_free, TRL's padding_free for the generative modes): a
flattened batch gives every pair the padded batch's logits, loss and gradients, trains the same
run, runs under the trainer's mixed precision and under DDP."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest
import torch

from models.builder import GraderModelConfig
from models.losses import build_loss
from tests.conftest import TWO_PROCESS_LAUNCH
from tests.train.conftest import args_for
from train.grader_data import GraderCollator
from train.padding_free import PaddingFreeCollator
from train.train import DataConfig, LossConfig, train
from train.trainer import GraderTrainer

REPO = Path(__file__).resolve().parents[2]


def tiny_classifier(attn_implementation: str = "sdpa", lora: bool = False) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForSequenceClassification

    from models.random_model import SHAPES

    config = LlamaConfig(**{**SHAPES["tiny"], "vocab_size": 256}, num_labels=2, pad_token_id=0)
    torch.manual_seed(0)
    model = LlamaForSequenceClassification(config).float()
    model.set_attn_implementation(attn_implementation)
    if lora:
        from peft import LoraConfig, TaskType, get_peft_model

        model = get_peft_model(
            model,
            LoraConfig(
                task_type=TaskType.SEQ_CLS,
                r=4,
                target_modules=["q_proj", "v_proj"],
                init_lora_weights=False,  # non-zero adapters: they must be applied
                modules_to_save=["score"],
            ),
        )
    return model


def pairs(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [
        {
            "input_ids": [rng.randrange(3, 250) for _ in range(rng.randint(1, 60))],
            "labels": i % 2,
            "soft_targets": rng.random(),
        }
        for i in range(n)
    ]


def loss_logits_and_gradients(model, batch, loss: str = "cross_entropy"):
    trainer = GraderTrainer.__new__(GraderTrainer)  # compute_loss needs only the loss
    trainer.loss_fn = build_loss(loss, soft_targets=loss == "cross_entropy")
    model.zero_grad()
    value, outputs = trainer.compute_loss(model, batch, return_outputs=True)
    value.backward()
    gradients = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return value.detach(), outputs.logits.detach(), gradients


@pytest.mark.parametrize(
    ("attn_implementation", "lora", "loss"),
    [
        ("sdpa", False, "cross_entropy"),
        ("eager", False, "cross_entropy"),
        ("sdpa", True, "cross_entropy"),
        ("sdpa", False, "contrastive"),
    ],
)
def test_a_flattened_batch_gives_each_pair_the_padded_batchs_logits_loss_and_gradients(
    attn_implementation: str, lora: bool, loss: str
):
    model = tiny_classifier(attn_implementation, lora)
    features = pairs(7)
    flat = PaddingFreeCollator(attn_implementation)(features)
    assert flat["input_ids"].shape == (1, sum(len(f["input_ids"]) for f in features))
    assert "attention_mask" not in flat  # the position ids mark the pairs
    padded = GraderCollator(0)(features)
    flat_loss, flat_logits, flat_grads = loss_logits_and_gradients(model, flat, loss)
    padded_loss, padded_logits, padded_grads = loss_logits_and_gradients(model, padded, loss)
    torch.testing.assert_close(flat_logits, padded_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(flat_loss, padded_loss, rtol=1e-5, atol=1e-6)
    assert flat_grads.keys() == padded_grads.keys() and flat_grads
    for name, gradient in flat_grads.items():
        torch.testing.assert_close(gradient, padded_grads[name], rtol=1e-4, atol=1e-6, msg=name)


def test_each_pair_is_read_at_its_own_last_token():
    """Changing one pair's tokens changes that pair's logits alone: no pair sees another."""
    model = tiny_classifier().eval()
    features = pairs(5, seed=3)
    collate = PaddingFreeCollator("sdpa")
    trainer = GraderTrainer.__new__(GraderTrainer)
    trainer.loss_fn = build_loss("cross_entropy")
    with torch.no_grad():
        _, before = trainer.compute_loss(model, collate(features), return_outputs=True)
        features[2]["input_ids"] = [7] * 9
        _, after = trainer.compute_loss(model, collate(features), return_outputs=True)
    changed = (before.logits - after.logits).abs().amax(dim=1) > 1e-6
    assert changed.tolist() == [False, False, True, False, False]


def train_tiny(model_dir: Path, dataset: Path, out: Path, mode: str = "full", **overrides):
    settings = {
        "max_steps": 4,
        "per_device_train_batch_size": 8,
        "eval_strategy": "no",
        "learning_rate": 1e-3,
        **overrides,
    }
    args = args_for(out, **settings)
    return train(
        # No LoRA dropout: its random masks would fall differently on a flattened batch.
        GraderModelConfig(
            model_name_or_path=str(model_dir),
            mode=mode,
            max_length=256,
            lora_r=4,
            lora_dropout=0.0,
        ),
        DataConfig(dataset=str(dataset)),
        LossConfig(),
        args,
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["full", "lora", "generative"])
def test_a_padding_free_run_follows_the_padded_run_step_for_step(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path, mode: str
):
    """Same seed, same batches: the padding-free run logs the padded run's losses (the classifier
    through train.padding_free, the generative mode through TRL's padding_free), and its saved
    grader scores as the padded run's does."""
    from models.grader import Grader

    runs = {}
    for padding_free in (False, True):
        out = tmp_path / f"padding_free-{padding_free}"
        metrics = train_tiny(tiny_model_dir, tiny_dataset, out, mode, padding_free=padding_free)
        losses = [e["loss"] for e in metrics["history"] if "loss" in e]
        runs[padding_free] = (losses, Grader.from_pretrained(out / "out", device="cpu"))
    (padded_losses, padded), (flat_losses, flat) = runs[False], runs[True]
    assert len(flat_losses) == 4
    assert flat_losses == pytest.approx(padded_losses, rel=1e-4, abs=1e-5)
    documents = ["axon terminal definition the passage", "the passage talks about something"]
    scores = [grader.score("query 1 axon", documents) for grader in (padded, flat)]
    assert scores[1] == pytest.approx(scores[0], abs=1e-4)


@pytest.mark.slow
def test_a_padding_free_step_runs_under_the_trainers_mixed_precision(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The flattened batch goes through the model's own forward, where accelerate puts bf16
    autocast (calling the decoder itself had trained packed rows in float32 on the H100)."""
    from transformers.models.llama import modeling_llama

    seen: list[torch.dtype] = []
    forward = modeling_llama.LlamaAttention.forward

    def recording(self, hidden_states, *args, **kwargs):
        seen.append(self.q_proj(hidden_states).dtype)
        return forward(self, hidden_states, *args, **kwargs)

    monkeypatch.setattr(modeling_llama.LlamaAttention, "forward", recording)
    train_tiny(tiny_model_dir, tiny_dataset, tmp_path, padding_free=True, bf16=True, max_steps=1)
    assert seen and set(seen) == {torch.bfloat16}, seen


@pytest.mark.slow
def test_padding_free_training_keeps_ddp_processes_in_step(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    """Two processes, each with its own pairs: the gradients are averaged across them (the
    forward goes through DDP), so both end with the same weights, and those of the padded run."""
    command = [
        *TWO_PROCESS_LAUNCH,
        str(REPO / "tests/train/ddp_padding_free.py"),
        str(tiny_model_dir),
        str(tiny_dataset),
        str(tmp_path / "out"),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    rows = [
        json.loads(line.removeprefix("weights "))
        for line in result.stdout.splitlines()
        if line.startswith("weights ")
    ]
    by_run = {(row["padding_free"], row["rank"]): row["checksum"] for row in rows}
    assert set(by_run) == {(p, r) for p in (False, True) for r in (0, 1)}
    assert by_run[(True, 0)] == pytest.approx(by_run[(True, 1)], rel=1e-6)
    assert by_run[(True, 0)] == pytest.approx(by_run[(False, 0)], rel=1e-4)
    assert "find_unused_parameters" not in result.stderr
