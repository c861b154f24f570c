"""The one training loop: a ``Trainer`` with a swappable loss, the callback that makes every
checkpoint self-describing, and the fit and save steps that every recipe shares."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from transformers import (
    EarlyStoppingCallback,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from core.io import share_tree, strict
from models.builder import save_grader_config
from models.grader_config import GraderDescription
from train.config import GraderTrainingArguments
from train.grader_data import compute_metrics

# The new classification head's module name: Llama-style classifiers' and BERT-style ones'.
HEAD_NAMES = {"score", "classifier"}


class GraderTrainer(Trainer):
    """Trainer with a swappable loss (models.losses) on the classification logits."""

    def __init__(self, *args: Any, loss_fn: torch.nn.Module, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loss_fn = loss_fn

    def create_optimizer(self, model: torch.nn.Module | None = None) -> torch.optim.Optimizer:
        """The Trainer's optimizer, with the freshly initialised head at its own learning rate."""
        head_lr = getattr(self.args, "head_learning_rate", None)
        if head_lr is None or self.optimizer is not None:
            return super().create_optimizer(model)
        model = model or self.model
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        # The head of a decoder's classifier (score) or an encoder's (classifier), by its name in
        # plain, cached-state and peft models.
        is_head = [bool(HEAD_NAMES & set(n.split("."))) for n, _ in named]
        decay = set(self.get_decay_parameter_names(model))
        groups = []
        for head in (False, True):
            for with_decay in (True, False):
                params = [
                    p
                    for (n, p), h in zip(named, is_head, strict=True)
                    if h == head and (n in decay) == with_decay
                ]
                if params:
                    groups.append(
                        {
                            "params": params,
                            "weight_decay": self.args.weight_decay if with_decay else 0.0,
                            **({"lr": head_lr} if head else {}),
                        }
                    )
        optimizer_cls, optimizer_kwargs = self.get_optimizer_cls_and_kwargs(self.args, model)
        self.optimizer = optimizer_cls(groups, **optimizer_kwargs)
        return self.optimizer

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        inputs = dict(inputs)
        labels = inputs.pop("labels")
        soft_targets = inputs.pop("soft_targets", None)
        # Added by the Trainer when use_liger_kernel evaluates the loss alone; a classifier's
        # forward takes no such argument, and its logits are two per pair anyway.
        inputs.pop("skip_logits", None)
        if "seq_ends" in inputs:  # a padding-free batch (train.padding_free): one logit per pair
            from transformers.modeling_outputs import SequenceClassifierOutput

            from train.padding_free import padding_free_logits

            logits = padding_free_logits(model, inputs).float()
            loss = self.loss_fn(logits, labels, soft_targets)
            return (loss, SequenceClassifierOutput(logits=logits)) if return_outputs else loss
        outputs = model(**inputs)
        loss = self.loss_fn(outputs.logits, labels, soft_targets)
        return (loss, outputs) if return_outputs else loss


class GraderConfigCallback(TrainerCallback):
    """Writes grader_config.json into every checkpoint, so each one is self-describing."""

    def __init__(self, info: GraderDescription) -> None:
        self.info = info

    def on_save(self, args, state, control, **kwargs):
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if checkpoint.exists():
            save_grader_config(checkpoint, self.info)


class ShareableCheckpoints(TrainerCallback):
    """Every checkpoint readable as the umask allows (safetensors writes its weights 0600)."""

    def on_save(self, args, state, control, **kwargs):
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and checkpoint.exists():
            share_tree(checkpoint)


def describe_checkpoints(trainer: Trainer, model: PreTrainedModel, info: GraderDescription) -> None:
    """Checkpoints of the whole model get their grader_config.json; cached-state checkpoints hold
    only the trained top (they resume training but are not graders on their own). Every
    checkpoint gets the ordinary file modes."""
    if trainer.model is model:
        trainer.add_callback(GraderConfigCallback(info))
    trainer.add_callback(ShareableCheckpoints())


def grader_trainer(
    model: torch.nn.Module,
    args: GraderTrainingArguments,
    train_ds: Any,
    eval_ds: Any,
    collator: Any,
    tokenizer: PreTrainedTokenizerBase,
    loss_fn: torch.nn.Module,
    metrics: Any = compute_metrics,
) -> Trainer:
    """The one ``GraderTrainer`` of the classifier and query-likelihood recipes (early stopping
    when asked)."""
    callbacks: list[TrainerCallback] = []
    if args.early_stopping_patience:
        callbacks.append(
            EarlyStoppingCallback(early_stopping_patience=args.early_stopping_patience)
        )
    return GraderTrainer(
        model=model,
        args=args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        data_collator=collator,
        processing_class=tokenizer,
        compute_metrics=metrics,
        callbacks=callbacks,
        loss_fn=loss_fn,
    )


def fit(trainer: Trainer, args: TrainingArguments, evaluate: bool) -> tuple[dict[str, Any], Any]:
    """Train (resuming when asked), then evaluate the model kept at the end: its metrics and its
    predictions on the validation pairs (None without evaluation)."""
    result = trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    metrics: dict[str, Any] = dict(result.metrics)
    predictions = None
    if evaluate:
        output = trainer.predict(trainer.eval_dataset, metric_key_prefix="eval")
        trainer.log(output.metrics)
        metrics.update(output.metrics)
        predictions = output.predictions
    metrics["history"] = trainer.state.log_history
    return metrics, predictions


def save_trained(
    trainer: Trainer,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    output_dir: Path,
    info: GraderDescription,
    metrics: dict[str, Any],
) -> None:
    """The one save path of every mode: weights (or adapter), tokenizer, grader_config.json and
    train_results.json, written by the main process only."""
    if trainer.model is model or getattr(trainer.model, "base_model", None) is model:
        trainer.save_model(str(output_dir))  # gathers sharded (FSDP) weights where needed
    elif trainer.is_world_process_zero():
        model.save_pretrained(output_dir)  # cached-state modes trained `model` in place
    if not trainer.is_world_process_zero():
        return
    tokenizer.save_pretrained(output_dir)
    info.metrics = {k: v for k, v in metrics.items() if k != "history"}
    save_grader_config(output_dir, info)
    (output_dir / "train_results.json").write_text(
        json.dumps(strict(metrics), allow_nan=False, indent=2) + "\n"
    )
    share_tree(output_dir)  # the weights and checkpoints as readable as the other files
