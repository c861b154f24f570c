"""The classifier recipe: a classification head trained with a swappable loss
(``models.losses``), on token ids or, in the cached-state modes, on states of the frozen bottom
layers computed once per pair (``models.cached_states``) under the family's top
(``models.families.classifier.states``). A graded head (``relevant_from`` > 1) trains on the
grades and is evaluated on P(relevant).

Frozen mode (paper config B) trains the head alone; ``top_layers`` mode trains the last
``trainable_layers`` decoder layers, the final norm and the head. Either way the bottom of the
network never changes, so its output is computed once per pair and the same ``Trainer`` as every
other mode trains the top on it: resume, logging, evaluation, checkpoints and early stopping
behave alike. The top holds the model's own parameter objects, so training it trains the full
model in place, which is then saved as usual."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from transformers import Trainer

from models.cached_states import StateScorer, pad_states
from models.losses import build_loss
from models.state_cache import state_cache_for
from train.config import TrainingSettings
from train.grader_data import GraderCollator, compute_metrics, tokenize
from train.recipes.base import TrainingJob, TrainingRecipe, trained_states
from train.trainer import grader_trainer


class ClassifierRecipe(TrainingRecipe):
    family = "classifier"

    def trainer(self, job: TrainingJob) -> Trainer:
        return classifier_trainer(job)

    def state_scorer(self, grader: Path, settings: TrainingSettings) -> StateScorer | None:
        """Frozen / top_layers graders: the bottom layers' states from the cache, the top's
        class probabilities on them."""
        from models.families.classifier.states import classifier_state_scorer

        if not (settings.model.training_mode.cached_states and settings.args.cache_states):
            return None
        trained = trained_states(grader, settings)
        return classifier_state_scorer(trained) if trained else None


def classifier_trainer(job: TrainingJob, collator: Any = None) -> Trainer:
    """The Trainer for a classifier grader: on token ids (batched by ``collator``, default
    right-padding), or on cached states of the bottom layers."""
    settings = job.settings
    loss, data, args = settings.loss, settings.data, settings.args
    loss_fn = build_loss(
        loss.loss,
        class_weights=loss.class_weights,
        label_smoothing=loss.label_smoothing,
        soft_targets=data.soft_targets != "none",
        margin=loss.margin,
    )
    target = "grade" if settings.model.labels == "graded" else "label"
    train_ds, eval_ds = (
        tokenize(raw, job.tokenizer, job.fmt, data.soft_targets, target=target)
        if raw is not None
        else None
        for raw in (job.train_raw, job.eval_raw)
    )
    trained: torch.nn.Module = job.model
    collator = collator or GraderCollator(job.tokenizer.pad_token_id)
    if args.padding_free:
        from train.padding_free import PaddingFreeCollator

        collator = PaddingFreeCollator(job.model.config._attn_implementation)
    if settings.model.training_mode.cached_states and args.cache_states:
        trained, train_ds, eval_ds = cached_state_datasets(job, train_ds, eval_ds)
        collator = collate_states
    return grader_trainer(
        trained,
        args,
        train_ds,
        eval_ds,
        collator,
        job.tokenizer,
        loss_fn,
        partial(compute_metrics, relevant_from=job.relevant_from),
    )


def cached_state_datasets(
    job: TrainingJob, train_ds: Dataset, eval_ds: Dataset | None
) -> tuple[torch.nn.Module, Any, Any]:
    """The trained top and the cached states of the frozen layers below it, per split."""
    from models.backbone import split_index
    from models.cached_states import compute_states, resolve_state_dtype
    from models.families.classifier.states import GraderTop

    model, model_config, args = job.model, job.settings.model, job.settings.args
    first = split_index(model, model_config.trained_layers)
    dtype = resolve_state_dtype(args.state_dtype, args.device)
    model.to(args.device).eval()
    cache = state_cache_for(model_config.model_name_or_path, args.world_size)

    def states(ds: Dataset) -> CachedStates:
        # Under DDP the main process computes and stores the states, then the others read them.
        with args.main_process_first(desc="cached states"):
            hidden = compute_states(
                model,
                ds["input_ids"],
                first,
                batch_size=args.per_device_eval_batch_size,
                dtype=dtype,
                cache=cache,
            )
        return CachedStates(hidden, ds["labels"], ds["soft_targets"])

    train_states = states(train_ds)
    eval_states = states(eval_ds) if eval_ds is not None else None
    # The cached states fix the sequence lengths; the Trainer's length grouping reads input_ids.
    args.train_sampling_strategy = "random"
    return GraderTop(model, first).train(), train_states, eval_states


class CachedStates(torch.utils.data.Dataset):
    """Cached states with their labels and soft targets: the dataset ``Trainer`` sees."""

    def __init__(
        self,
        states: Sequence[torch.Tensor],
        labels: Sequence[int],
        soft_targets: Sequence[float],
    ) -> None:
        if not len(states) == len(labels) == len(soft_targets):
            raise ValueError("states, labels and soft targets differ in length")
        self.states = states
        self.labels = list(labels)
        self.soft_targets = list(soft_targets)

    def __len__(self) -> int:
        return len(self.states)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {
            "hidden_states": self.states[index],
            "labels": self.labels[index],
            "soft_targets": self.soft_targets[index],
        }


def collate_states(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Right-pads cached states (zeros; masked out) into one batch."""
    states, mask = pad_states([f["hidden_states"] for f in features])
    return {
        "hidden_states": states,
        "attention_mask": mask,
        "labels": torch.tensor([int(f["labels"]) for f in features], dtype=torch.long),
        "soft_targets": torch.tensor([float(f["soft_targets"]) for f in features]),
    }
