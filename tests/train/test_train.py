from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from core.cli import parse_config
from core.metrics import classification_metrics
from models.builder import MODES, GraderModelConfig, build_grader, load_trained, read_grader_config
from models.grader import Grader
from models.input_format import format_pairs
from tests.train.conftest import PARSERS, args_for
from train.train import DataConfig, LossConfig, train

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "train" / "configs").glob("*.yaml"))


def logged_losses(metrics: dict) -> list[float]:
    history = metrics["history"]
    key = "train_loss" if "train_loss" in history[0] else "loss"
    return [float(h[key]) for h in history if key in h and "epoch" in h and "eval_loss" not in h]


@pytest.mark.parametrize("config_path", CONFIGS, ids=lambda p: p.name)
def test_every_training_config_parses(config_path: Path):
    """As written for GPUs, and on this CPU without --use_cpu (the parent refuses bf16 there)."""
    model_config, _data, loss_config, args = parse_config(
        PARSERS, ["--config", str(config_path), "--output_dir", "x"]
    )
    assert args.use_cpu == (not torch.cuda.is_available())
    assert model_config.mode in MODES
    assert loss_config.loss in ("cross_entropy", "contrastive")
    assert args.lr_scheduler_type.value == "cosine_with_min_lr"
    assert args.lr_scheduler_kwargs == {"min_lr_rate": 0.1}
    assert args.metric_for_best_model == "f1" and args.load_best_model_at_end
    if config_path.name.startswith("llama"):
        assert model_config.model_name_or_path == "meta-llama/Llama-3.2-1B-Instruct" and args.bf16
    elif config_path.name.startswith("minilm"):  # the cross-encoder reads the retriever's weights
        assert model_config.model_name_or_path == "minilm-l6"
        assert model_config.family.name == "cross_encoder" and not args.bf16
    else:
        assert model_config.model_name_or_path == "smollm2-135m"


def test_accelerate_variants_parse():
    from accelerate.commands.config.config_args import load_config_from_file

    ddp = load_config_from_file(str(REPO / "train/configs/accelerate/ddp.yaml"))
    fsdp = load_config_from_file(str(REPO / "train/configs/accelerate/fsdp.yaml"))
    assert str(ddp.distributed_type).endswith("MULTI_GPU") and str(fsdp.distributed_type).endswith(
        "FSDP"
    )
    assert fsdp.fsdp_config["fsdp_transformer_layer_cls_to_wrap"] == "LlamaDecoderLayer"


@pytest.mark.parametrize("name", ["ddp.yaml", "fsdp.yaml"])
def test_multi_gpu_configs_take_the_process_count_from_the_launch(name: str):
    """No GPU count is written into the multi-GPU configs: the launch gives it, and accelerate
    refuses to start without it instead of launching a wrong number of processes."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    config = str(REPO / "train/configs/accelerate" / name)
    parser = launch_command_parser()
    args = parser.parse_args(["--config_file", config, "--num_processes", "4", "-m", "train"])
    _validate_launch_command(args)
    assert args.num_processes == 4
    with pytest.raises(ValueError, match="num_processes"):
        _validate_launch_command(parser.parse_args(["--config_file", config, "-m", "train"]))


@pytest.mark.parametrize(
    ("mode", "loss"),
    [
        ("full", "cross_entropy"),
        ("full", "contrastive"),
        ("lora", "cross_entropy"),
        ("frozen", "cross_entropy"),
        ("top_layers", "cross_entropy"),
    ],
)
def test_modes_and_losses_train_with_decreasing_loss_and_reload_identically(
    mode: str, loss: str, tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir), mode=mode, max_length=256, lora_r=8
    )
    args = args_for(
        tmp_path,
        num_train_epochs=8 if mode in ("frozen", "top_layers") else 3,
        learning_rate=1e-2 if mode in ("frozen", "top_layers") else 2e-3,
    )
    metrics = train(
        model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(loss=loss), args
    )
    losses = logged_losses(metrics)
    assert np.mean(losses[-2:]) < np.mean(losses[:2]), losses
    # Relevance is visible in the text: held-out pairs separate, and the head has not collapsed
    # to the majority class (whose F1 would be 0).
    assert metrics["eval_roc_auc"] >= 0.8 and metrics["eval_f1"] > 0.5, metrics
    out = Path(args.output_dir)
    info = read_grader_config(out)
    assert info and info.mode == mode and info.input_format["name"] == "grader-chat"
    assert (out / "tokenizer.json").exists()
    if mode == "lora":
        assert (out / "adapter_config.json").exists()
    # The saved model is the trained one: reloaded, it scores the validation split exactly as the
    # Trainer's last evaluation did (for cached-state modes: full forward vs bottom + top passes).
    validation = [json.loads(line) for line in (tiny_dataset / "validation.jsonl").open()]
    grader = Grader.from_pretrained(out, dtype="float32", device="cpu")
    reloaded = grader.raw_probabilities(
        [r["query"] for r in validation], [r["text"] for r in validation]
    )
    again = classification_metrics(reloaded, np.array([r["label"] for r in validation]))
    assert again["roc_auc"] == pytest.approx(metrics["eval_roc_auc"], abs=1e-6)
    assert again["f1"] == pytest.approx(metrics["eval_f1"], abs=1e-6)
    # The trained head survived the round trip (not a fresh random head).
    fresh, _ = build_grader(
        GraderModelConfig(model_name_or_path=str(tiny_model_dir), mode="full", max_length=256)
    )
    model, tokenizer = load_trained(out)
    pairs = format_pairs(
        tokenizer, grader.input_format, ["query 1 axon"], ["axon terminal definition"]
    )
    batch = tokenizer.pad({"input_ids": pairs.input_ids}, return_tensors="pt")
    with torch.no_grad():
        assert not torch.allclose(fresh.eval()(**batch).logits, model.eval()(**batch).logits)


def test_frozen_mode_leaves_the_backbone_bit_identical(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir), mode="frozen", max_length=256
    )
    before, _ = build_grader(model_config)
    args = args_for(tmp_path, cache_states=False, num_train_epochs=2)
    train(model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args)
    after, _ = load_trained(args.output_dir)
    backbone_before = {k: v for k, v in before.state_dict().items() if not k.startswith("score.")}
    backbone_after = {k: v for k, v in after.state_dict().items() if not k.startswith("score.")}
    assert backbone_before.keys() == backbone_after.keys()
    assert all(torch.equal(backbone_before[k], backbone_after[k]) for k in backbone_before)
    assert not torch.equal(before.score.weight, after.score.weight)


def test_frozen_fast_path_trains_the_same_head_as_the_plain_path(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir), mode="frozen", max_length=256
    )
    heads = {}
    for cached in (True, False):
        # One batch holds the whole train split, so both paths see identical gradients.
        args = args_for(
            tmp_path / str(cached),
            cache_states=cached,
            per_device_train_batch_size=256,
            num_train_epochs=5,
            state_dtype="float32",
            learning_rate=1e-2,
            eval_strategy="no",
        )
        train(model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args)
        model, _ = load_trained(args.output_dir)
        heads[cached] = model.score.weight.detach().clone()
    assert not torch.equal(heads[True], build_grader(model_config)[0].score.weight)
    torch.testing.assert_close(heads[True], heads[False], rtol=1e-3, atol=1e-5)


def test_generative_mode_trains_and_scores_p_yes(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir), mode="generative", max_length=256
    )
    args = args_for(tmp_path, num_train_epochs=3, learning_rate=5e-3, eval_strategy="epoch")
    metrics = train(model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args)
    # Training on P(yes) learns: the loss falls, and held-out pairs separate.
    losses = logged_losses(metrics)
    assert all(np.isfinite(losses)) and np.mean(losses[-2:]) < np.mean(losses[:2]), losses
    assert metrics["eval_roc_auc"] >= 0.8, metrics
    assert read_grader_config(args.output_dir).mode == "generative"
    model, _ = load_trained(args.output_dir)
    assert model.config.architectures[0].endswith("ForCausalLM")


def test_small_updates_are_not_lost_with_bf16_weights(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    """dtype bfloat16 + bf16 autocast trains float32 master weights: an lr 1e-5 step moves
    (almost) every weight, where pure bf16 storage would round most of those steps away."""
    from safetensors.torch import load_file

    from models.builder import build_grader

    config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir), mode="full", dtype="bfloat16", max_length=256
    )
    model, _ = build_grader(config)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    args = args_for(tmp_path, learning_rate=1e-5, max_steps=2, bf16=True, num_train_epochs=1)
    train(config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args)
    after = load_file(tmp_path / "out" / "model.safetensors")
    name = "model.layers.0.mlp.down_proj.weight"
    moved = (after[name].float() != before[name]).float().mean().item()
    assert after[name].dtype == torch.float32 and moved > 0.9
    # The same step on bf16 storage: most updates vanish (why master weights are needed).
    weight = before[name].to(torch.bfloat16)
    stepped = (weight.float() + 1e-5 * torch.sign(torch.randn_like(weight.float()))).to(
        torch.bfloat16
    )
    assert (stepped != weight).float().mean().item() < 0.2


def test_lora_on_a_bf16_base_needs_autocast(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir), mode="lora", dtype="bfloat16", max_length=256
    )
    with pytest.raises(ValueError, match="bf16: true"):
        train(config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args_for(tmp_path))


def test_prompt_format_plain_is_trained_and_stored(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir), mode="frozen", prompt_format="plain", max_length=256
    )
    train(
        config,
        DataConfig(dataset=str(tiny_dataset)),
        LossConfig(),
        args_for(tmp_path, num_train_epochs=1),
    )
    stored = read_grader_config(tmp_path / "out").input_format
    assert stored["name"] == "grader-plain" and "<|im_start|>" not in stored["template"]


@pytest.mark.parametrize("mode", ["full", "lora", "top_layers", "generative", "query_likelihood"])
def test_activation_checkpointing_works_in_every_mode(
    mode: str, tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path, monkeypatch
):
    """``activation_checkpointing: true`` reaches the decoder layers that train, and they still
    learn (a reentrant checkpoint over inputs without gradients would silently stop that)."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    import train.train as train_module

    built = {}
    real_build = train_module.build_grader

    def build(config):
        model, tokenizer = real_build(config)
        built["model"] = model
        built["before"] = {
            n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad
        }
        return model, tokenizer

    monkeypatch.setattr(train_module, "build_grader", build)
    config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir), mode=mode, trainable_layers=1, max_length=256
    )
    args = args_for(tmp_path, max_steps=2, activation_checkpointing=True, learning_rate=1e-3)
    train(config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args)
    model = built["model"]
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    trained_layers = [layer for layer in layers if any(p.requires_grad for p in layer.parameters())]
    assert trained_layers and all(layer.gradient_checkpointing for layer in trained_layers)
    moved = [
        n
        for n, p in model.named_parameters()
        if n in built["before"] and ".layers." in n and not torch.equal(p, built["before"][n])
    ]
    assert moved, "no decoder-layer weight changed under activation checkpointing"


def test_cached_state_modes_refuse_fsdp_clearly(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path, monkeypatch
):
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    config = GraderModelConfig(model_name_or_path=str(tiny_model_dir), mode="top_layers")
    with pytest.raises(ValueError, match="DDP"):
        train(config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args_for(tmp_path))


def test_bf16_falls_back_to_fp16_on_gpus_without_it(monkeypatch):
    from train.train import supported_precision

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla T4")
    assert supported_precision(True, False) == (False, True)
    assert supported_precision(True, False, use_cpu=True) == (True, False)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert supported_precision(True, False) == (True, False)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["full", "top_layers", "lora"])
def test_a_graded_grader_learns_the_grades_and_labels_with_them(
    mode: str, tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    """labels: graded trains a 0-3 head on the teacher's grades; P(relevant) is the mass of
    grades >= 2 (what AUC, the threshold and the API read) and each hit gets a grade on the side
    of its binary label, which the metric pipeline uses as its NDCG gain."""
    from scipy.stats import spearmanr

    from measure.labelers import GraderLabeler, Hit

    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir),
        mode=mode,
        max_length=256,
        labels="graded",
        trainable_layers=1,
        lora_r=8,
    )
    args = args_for(tmp_path, num_train_epochs=8, learning_rate=1e-2 if mode != "full" else 1e-3)
    metrics = train(model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args)
    assert metrics["eval_roc_auc"] >= 0.8 and 0 <= metrics["eval_grade_mae"] < 1.0, metrics
    info = read_grader_config(args.output_dir)
    assert info.label_names[3] == "perfectly_relevant" and info.relevant_from == 2

    grader = Grader.from_pretrained(args.output_dir, dtype="float32", device="cpu")
    assert grader.graded and grader.model.config.num_labels == 4
    validation = [json.loads(line) for line in (tiny_dataset / "validation.jsonl").open()]
    queries, texts = [r["query"] for r in validation], [r["text"] for r in validation]
    pairs = grader.encode_pairs(queries, texts)
    batch = grader.tokenizer.pad({"input_ids": pairs.input_ids}, return_tensors="pt")
    with torch.no_grad():
        by_hand = torch.softmax(grader.model(**batch).logits.float(), -1)[:, 2:].sum(-1)
    np.testing.assert_allclose(grader.raw_probabilities(queries, texts), by_hand, atol=1e-5)

    labeler = GraderLabeler(args.output_dir, grader=grader)
    hits = [Hit(doc_id=str(i), text=text) for i, text in enumerate(texts)]
    labels = labeler.label("q", queries[0], hits)
    grades = np.array([label.grade for label in labels])
    assert all((label.grade >= 2) == label.relevant for label in labels)
    assert all(label.relevance == label.grade + 1 for label in labels)  # eval_search's 1-4
    assert spearmanr(grades, [r["grade"] for r in validation]).statistic > 0.5
    np.testing.assert_array_equal(grader.grade(queries[0], texts), grades)


def test_a_graded_grader_refuses_pairs_without_a_grade(tiny_model_dir: Path, tmp_path: Path):
    from data.build import BuildConfig, build_dataset

    lines = [
        {"qid": f"q{i % 4}", "query": "q", "doc_id": f"d{i}", "text": "t", "label": i // 4 % 2}
        for i in range(24)
    ]
    (tmp_path / "j.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    build_dataset(
        BuildConfig(
            judgments=[str(tmp_path / "j.jsonl")], out=str(tmp_path / "ds"), save_dataset=False
        )
    )
    model_config = GraderModelConfig(model_name_or_path=str(tiny_model_dir), labels="graded")
    with pytest.raises(ValueError, match=r"ds/train\.jsonl line 1: field `grade` is missing"):
        train(
            model_config, DataConfig(dataset=str(tmp_path / "ds")), LossConfig(), args_for(tmp_path)
        )


def test_a_large_model_is_not_trained_on_a_cpu_nobody_asked_for(monkeypatch):
    """No GPU and no --use_cpu: a 1B full fine-tune would start on the CPU and take days."""
    from train import config as train_config
    from train.config import GraderTrainingArguments
    from train.train import MAX_CPU_TRAINABLE, refuse_large_cpu_training

    monkeypatch.setattr(train_config, "accelerator_available", lambda: False)
    implicit = GraderTrainingArguments(output_dir="/tmp/x", report_to="none")
    with pytest.raises(ValueError, match="give --use_cpu true"):
        refuse_large_cpu_training(MAX_CPU_TRAINABLE + 1, implicit)
    refuse_large_cpu_training(135_000_000, implicit)  # the embedded student trains on a CPU
    asked = GraderTrainingArguments(output_dir="/tmp/x", report_to="none", use_cpu=True)
    refuse_large_cpu_training(MAX_CPU_TRAINABLE + 1, asked)  # asked for: it runs
