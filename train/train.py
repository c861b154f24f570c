"""Fine-tune the grader: full, frozen backbone or LoRA with a classification head, or generative.

    # CPU, the embedded student (small variants of the paper's runs)
    python -m train --config train/configs/smollm2-135m-lora.yaml --dataset runs/dataset
    python -m train --config train/configs/smollm2-135m-frozen.yaml --dataset runs/dataset --num_train_epochs 3
    # one GPU (bf16) or several (DDP/FSDP configs in train/configs/accelerate/)
    accelerate launch --config_file accelerate_config.yaml -m train \\
        --config train/configs/llama-3.2-1b-C-full.yaml --dataset runs/dataset

Every ``--key value`` overrides the YAML. The dataset is a folder written by ``python -m data.build``
(``train.jsonl``, ``validation.jsonl``). Evaluation runs on the validation split each epoch with F1
choosing the best checkpoint, which is loaded at the end and saved to ``output_dir`` with its
tokenizer and ``grader_config.json`` (input format name/version/template, mode, loss, data).
Frozen mode takes a fast path by default: the backbone's pooled features are computed once and
only the head trains on them (``--frozen_feature_cache false`` for the plain path).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import Trainer, TrainerCallback, TrainingArguments, get_scheduler, set_seed

from data.cli import parse_config, run_main
from models.builder import (
    GraderModelConfig,
    build_grader,
    count_parameters,
    grader_info,
    save_grader_config,
)
from models.input_format import GraderInputFormat
from models.losses import build_loss
from train.grader_data import (
    GraderCollator,
    classification_metrics,
    compute_metrics,
    load_split,
    tokenize,
)

logger = logging.getLogger(__name__)


@dataclass
class DataConfig:
    dataset: str = field(
        default="runs/dataset", metadata={"help": "Folder from `python -m data.build`."}
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Cap on training pairs (debugging)."}
    )
    max_eval_samples: int | None = field(default=None)
    soft_targets: str = field(
        default="none", metadata={"help": "none, p_relevant or grade (cross-entropy only)."}
    )


@dataclass
class LossConfig:
    loss: str = field(default="cross_entropy", metadata={"help": "cross_entropy or contrastive."})
    class_weights: list[float] | None = field(
        default=None, metadata={"help": "Weights for labels 0 and 1."}
    )
    label_smoothing: float = field(default=0.0)
    margin: float = field(default=1.0, metadata={"help": "Contrastive margin m."})


@dataclass
class GraderTrainingArguments(TrainingArguments):
    """TrainingArguments with the paper's defaults (AdamW, lr 2e-5, cosine to 10% of peak)."""

    output_dir: str = field(default="runs/grader")
    learning_rate: float = field(default=2e-5)
    lr_scheduler_type: str = field(default="cosine_with_min_lr")
    lr_scheduler_kwargs: dict | str | None = field(default_factory=lambda: {"min_lr_rate": 0.1})
    num_train_epochs: float = field(default=1.0)
    per_device_train_batch_size: int = field(default=8)
    per_device_eval_batch_size: int = field(default=16)
    eval_strategy: str = field(default="epoch")
    save_strategy: str = field(default="epoch")
    save_total_limit: int | None = field(default=2)
    logging_steps: float = field(default=10)
    metric_for_best_model: str | None = field(default="f1")
    greater_is_better: bool | None = field(default=True)
    load_best_model_at_end: bool = field(default=True)
    report_to: None | str | list[str] = field(default="tensorboard")  # noqa: RUF036 - as in the parent
    train_sampling_strategy: str = field(default="group_by_length")
    remove_unused_columns: bool = field(default=False)
    seed: int = field(default=42)
    early_stopping_patience: int | None = field(
        default=None, metadata={"help": "Stop after this many evaluations without improvement."}
    )
    frozen_feature_cache: bool = field(
        default=True, metadata={"help": "Frozen mode: train the head on cached backbone features."}
    )
    feature_dtype: str = field(
        default="auto",
        metadata={
            "help": "Frozen fast path: dtype of the feature pass (auto: bf16 on GPU/AMX CPU)."
        },
    )


class GraderTrainer(Trainer):
    """Trainer with a swappable loss (models.losses) on the classification logits."""

    def __init__(self, *args: Any, loss_fn: torch.nn.Module, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loss_fn = loss_fn

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        inputs = dict(inputs)
        labels = inputs.pop("labels")
        soft_targets = inputs.pop("soft_targets", None)
        outputs = model(**inputs)
        loss = self.loss_fn(outputs.logits, labels, soft_targets)
        return (loss, outputs) if return_outputs else loss


class GraderConfigCallback(TrainerCallback):
    """Writes grader_config.json into every checkpoint, so each one is self-describing."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info

    def on_save(self, args, state, control, **kwargs):
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if checkpoint.exists():
            save_grader_config(checkpoint, self.info)


@torch.inference_mode()
def pooled_features(model, input_ids: Sequence[list[int]], batch_size: int = 16) -> torch.Tensor:
    """The backbone's last-layer hidden state at each sequence's last real token: what the head reads."""
    from models.scoring import _pad, length_sorted_batches

    backbone = model.base_model
    pad_id = model.config.pad_token_id
    out = torch.zeros((len(input_ids), model.config.hidden_size), dtype=torch.float32)
    batches = list(length_sorted_batches([len(x) for x in input_ids], batch_size, 16384))
    for batch in tqdm(batches, desc="backbone features", unit="batch"):
        seqs = [input_ids[i] for i in batch]
        ids, mask = _pad(seqs, pad_id, model.device)
        hidden = backbone(input_ids=ids, attention_mask=mask).last_hidden_state
        last = torch.tensor([len(s) - 1 for s in seqs], device=hidden.device)
        out[batch] = hidden[torch.arange(len(seqs), device=hidden.device), last].float().cpu()
    return out


def train_head_on_features(
    head: torch.nn.Linear,
    train_features: torch.Tensor,
    train_labels: torch.Tensor,
    train_soft: torch.Tensor,
    args: GraderTrainingArguments,
    loss_fn: torch.nn.Module,
    eval_features: torch.Tensor | None = None,
    eval_labels: np.ndarray | None = None,
) -> list[dict[str, float]]:
    """Train the classification head on cached features with the Trainer's optimizer and schedule."""
    generator = torch.Generator().manual_seed(args.seed)
    batch_size = args.per_device_train_batch_size
    steps_per_epoch = math.ceil(len(train_features) / batch_size)
    epochs = math.ceil(args.num_train_epochs)
    optimizer = torch.optim.AdamW(
        head.parameters(),
        lr=args.learning_rate,
        betas=(args.adam_beta1, args.adam_beta2),
        eps=args.adam_epsilon,
        weight_decay=args.weight_decay,
    )
    kwargs = args.lr_scheduler_kwargs if isinstance(args.lr_scheduler_kwargs, dict) else {}
    total = steps_per_epoch * epochs
    scheduler = get_scheduler(
        args.lr_scheduler_type,
        optimizer,
        args.get_warmup_steps(total),
        total,
        scheduler_specific_kwargs=kwargs,
    )
    history: list[dict[str, float]] = []
    best_state, best_f1 = None, -1.0
    weight = head.weight
    for epoch in range(epochs):
        order = torch.randperm(len(train_features), generator=generator)
        losses = []
        for start in range(0, len(order), batch_size):
            index = order[start : start + batch_size]
            logits = head(train_features[index].to(weight.dtype))
            loss = loss_fn(logits, train_labels[index], train_soft[index])
            loss.backward()
            if args.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(head.parameters(), args.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            losses.append(loss.item())
        record = {"epoch": epoch + 1, "train_loss": float(np.mean(losses))}
        if eval_features is not None and eval_labels is not None:
            with torch.no_grad():
                probabilities = torch.softmax(head(eval_features.to(weight.dtype)).float(), -1)[
                    :, 1
                ].numpy()
            record.update(
                {
                    f"eval_{k}": v
                    for k, v in classification_metrics(probabilities, eval_labels).items()
                }
            )
            if record["eval_f1"] > best_f1:
                best_f1, best_state = (
                    record["eval_f1"],
                    {k: v.clone() for k, v in head.state_dict().items()},
                )
        history.append(record)
        logger.info("frozen head: %s", record)
    if best_state is not None and args.load_best_model_at_end:
        head.load_state_dict(best_state)
    return history


def train(
    model_config: GraderModelConfig,
    data_config: DataConfig,
    loss_config: LossConfig,
    args: GraderTrainingArguments,
) -> dict[str, Any]:
    set_seed(args.seed)
    model, tokenizer = build_grader(model_config)
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=model_config.max_length)
    train_raw = load_split(data_config.dataset, "train")
    if train_raw is None:
        raise FileNotFoundError(
            f"{data_config.dataset}/train.jsonl not found (run `python -m data.build` first)"
        )
    eval_raw = load_split(data_config.dataset, "validation")
    if data_config.max_train_samples:
        train_raw = train_raw.select(range(min(data_config.max_train_samples, len(train_raw))))
    if eval_raw is not None and data_config.max_eval_samples:
        eval_raw = eval_raw.select(range(min(data_config.max_eval_samples, len(eval_raw))))
    info = grader_info(
        model_config,
        fmt.to_dict(),
        loss=asdict(loss_config),
        data={
            "dataset": data_config.dataset,
            "train_pairs": len(train_raw),
            "validation_pairs": len(eval_raw) if eval_raw is not None else 0,
            "train_positive_rate": float(np.mean(train_raw["label"])),
            "manifest": _manifest_summary(data_config.dataset),
        },
        label_names=["not_relevant", "relevant"],
        parameters=count_parameters(model),
    )
    if model_config.generative:
        from train.generative import train_generative

        return train_generative(model, tokenizer, fmt, train_raw, eval_raw, args, info)
    if (
        model_config.mode != "frozen"
        and data_config.soft_targets != "none"
        and loss_config.loss != "cross_entropy"
    ):
        raise ValueError("soft_targets: only the cross_entropy loss uses soft targets")
    loss_fn = build_loss(
        loss_config.loss,
        class_weights=loss_config.class_weights,
        label_smoothing=loss_config.label_smoothing,
        soft_targets=data_config.soft_targets != "none",
        margin=loss_config.margin,
    )
    train_ds = tokenize(train_raw, tokenizer, fmt, data_config.soft_targets)
    eval_ds = (
        tokenize(eval_raw, tokenizer, fmt, data_config.soft_targets)
        if eval_raw is not None
        else None
    )
    output_dir = Path(args.output_dir)
    start = time.perf_counter()
    if model_config.mode == "frozen" and args.frozen_feature_cache:
        history = _train_frozen_fast(model, train_ds, eval_ds, args, loss_fn)
        metrics = {k: v for k, v in history[-1].items() if k != "epoch"} if history else {}
        best = max((h for h in history if "eval_f1" in h), key=lambda h: h["eval_f1"], default=None)
        if best:
            metrics.update({k: v for k, v in best.items() if k.startswith("eval_")})
        metrics["history"] = history
    else:
        metrics = _train_with_trainer(model, tokenizer, train_ds, eval_ds, args, loss_fn, info)
    metrics["train_seconds"] = round(time.perf_counter() - start, 2)
    model_to_save = model
    model_to_save.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    info["metrics"] = {k: v for k, v in metrics.items() if k != "history"}
    save_grader_config(output_dir, info)
    (output_dir / "train_results.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics


def _manifest_summary(dataset_dir: str) -> dict[str, Any]:
    path = Path(dataset_dir) / "manifest.json"
    if not path.exists():
        return {}
    manifest = json.loads(path.read_text())
    return {
        "counts": manifest.get("counts"),
        "sources": manifest.get("sources"),
        "seed": manifest.get("seed"),
    }


def _train_frozen_fast(model, train_ds, eval_ds, args, loss_fn) -> list[dict[str, float]]:
    from models.resolve import inference_dtype

    device = torch.device("cuda" if torch.cuda.is_available() and not args.use_cpu else "cpu")
    model.to(device).eval()
    batch = max(args.per_device_eval_batch_size, 1)
    dtype = (
        inference_dtype(device)
        if args.feature_dtype == "auto"
        else getattr(torch, args.feature_dtype)
    )
    # Autocast runs the backbone in the fast dtype; the head trains in float32 on the features.
    with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
        train_features = pooled_features(model, train_ds["input_ids"], batch)
        eval_features = (
            pooled_features(model, eval_ds["input_ids"], batch) if eval_ds is not None else None
        )
    model.to("cpu")
    head = model.score
    return train_head_on_features(
        head,
        train_features,
        torch.tensor(train_ds["labels"], dtype=torch.long),
        torch.tensor(train_ds["soft_targets"], dtype=torch.float32),
        args,
        loss_fn,
        eval_features,
        np.asarray(eval_ds["labels"]) if eval_ds is not None else None,
    )


def _train_with_trainer(model, tokenizer, train_ds, eval_ds, args, loss_fn, info) -> dict[str, Any]:
    from transformers import EarlyStoppingCallback

    if eval_ds is None:
        args.eval_strategy = "no"
        args.load_best_model_at_end = False
    callbacks: list[TrainerCallback] = [GraderConfigCallback(info)]
    if args.early_stopping_patience:
        callbacks.append(
            EarlyStoppingCallback(early_stopping_patience=args.early_stopping_patience)
        )
    trainer = GraderTrainer(
        model=model,
        args=args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        data_collator=GraderCollator(tokenizer.pad_token_id),
        processing_class=tokenizer,
        compute_metrics=compute_metrics,
        callbacks=callbacks,
        loss_fn=loss_fn,
    )
    result = trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    metrics: dict[str, Any] = dict(result.metrics)
    if eval_ds is not None:
        metrics.update(trainer.evaluate())
    metrics["history"] = trainer.state.log_history
    return metrics


def main(args: Sequence[str] | None = None) -> None:
    model_config, data_config, loss_config, training_args = parse_config(
        [GraderModelConfig, DataConfig, LossConfig, GraderTrainingArguments], args
    )
    metrics = train(model_config, data_config, loss_config, training_args)
    shown = {
        k: round(v, 4)
        for k, v in metrics.items()
        if isinstance(v, float) and k.startswith(("eval_", "train_"))
    }
    print(json.dumps(shown, indent=2))
    print(f"saved the grader to {training_args.output_dir}")


if __name__ == "__main__":
    run_main(main)
