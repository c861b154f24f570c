"""Training the top of a classifier grader on cached bottom-layer states, inside ``Trainer``.

Frozen mode (paper config B) trains the head alone; ``top_layers`` mode trains the last
``trainable_layers`` decoder layers, the final norm and the head. Either way the bottom of the
network never changes, so its output is computed once per pair (:func:`compute_states`) and the
same ``Trainer`` as every other mode trains :class:`GraderTop` on it: resume, logging, evaluation,
checkpoints and early stopping behave alike. :class:`GraderTop` holds the model's own parameter
objects, so training it trains the full model in place, which is then saved as usual.

The tops, the states and scoring from them live with the models (``models.cached_states``); this
module adds what training needs beside them (the dataset, its collation, the cache a run uses)
and keeps their old import paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from models.cached_states import (
    DecoderTop,
    GraderTop,
    StoredStates,
    TrainedStates,
    compute_states,
    pad_states,
    resolve_state_dtype,
    top_probabilities,
)
from models.state_cache import StateCache, default_state_cache, state_cache_key

if TYPE_CHECKING:
    from collections.abc import Sequence

    from train.recipes import TrainingSettings

__all__ = [
    "CachedStates",
    "DecoderTop",
    "GraderTop",
    "StoredStates",
    "TrainedStates",
    "collate_states",
    "compute_states",
    "pad_states",
    "resolve_state_dtype",
    "state_cache_for",
    "top_probabilities",
    "trained_states",
]


def state_cache_for(
    folder: str | None, model_name_or_path: str, processes: int = 1
) -> StateCache | None:
    """The on-disk state cache of ``--state_cache`` (None: states live in memory only).

    Several processes (DDP) share the machine-wide cache even when none is given: the main process
    computes each state once, the others read it, and none holds them all in memory.
    """
    if folder is None and processes > 1:
        folder = str(default_state_cache())
    return StateCache(folder, state_cache_key(model_name_or_path)) if folder else None


def trained_states(grader: str | Path, settings: TrainingSettings) -> TrainedStates:
    """The grader a training run (``settings``: its parsed configs) wrote, with the state cache
    that run filled."""
    model_config, args = settings.model, settings.args
    return TrainedStates(
        grader,
        trained_layers=model_config.trained_layers,
        backbone=model_config.model_name_or_path,
        state_cache=args.state_cache,
        state_dtype=args.state_dtype,
        device=args.device,
        batch_size=args.per_device_eval_batch_size,
    )


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
