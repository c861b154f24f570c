"""What every training recipe builds on: the job a recipe sets its ``Trainer`` up for
(:class:`TrainingJob`), the recipe's interface (:class:`TrainingRecipe`) and the trained grader a
cached-state family scores from (:func:`trained_states`). The registry is ``train.recipes``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, Trainer

    from models.cached_states import StateScorer, TrainedStates
    from models.grader_config import GraderDescription
    from models.input_format import GraderInputFormat
    from train.config import TrainingSettings


@dataclass
class TrainingJob:
    """Everything a recipe needs to build its Trainer."""

    settings: TrainingSettings
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    fmt: GraderInputFormat
    train_raw: Dataset
    eval_raw: Dataset | None
    relevant_from: int = 1


class TrainingRecipe:
    """The base of the recipes."""

    family: str = ""
    # False where the Trainer's own evaluation is not P(relevant) (TRL's SFT loss); the recipe
    # then adds its metrics in :meth:`finish`.
    evaluates_in_trainer: bool = True

    def check(self, settings: TrainingSettings) -> None:
        """Refuse settings this family would silently ignore, before any model loads."""

    def trainer(self, job: TrainingJob) -> Trainer:
        raise NotImplementedError

    def finish(
        self, trainer: Trainer, job: TrainingJob, info: GraderDescription, metrics: dict
    ) -> None:
        """After training: add the family's read-out to ``info`` or its metrics to ``metrics``."""

    def state_scorer(self, grader: Path, settings: TrainingSettings) -> StateScorer | None:
        """P(relevant) of a grader trained on cached states, read through its trained top from the
        state cache: a full forward pass's scores without running the frozen bottom again (cross-
        validation folds share every pair's states). None where the family has no such path, or
        the state cache is off (then the grader is scored by a full forward pass)."""
        return None


def trained_states(grader: str | Path, settings: TrainingSettings) -> TrainedStates | None:
    """The grader a training run (``settings``: its parsed configs) wrote, with the state cache
    that run filled; None when the process's state cache is off (nothing stored to read)."""
    from models.cached_states import TrainedStates
    from models.state_cache import default_state_cache

    if default_state_cache() is None:
        return None
    model_config, args = settings.model, settings.args
    return TrainedStates(
        grader,
        trained_layers=model_config.trained_layers,
        backbone=model_config.model_name_or_path,
        state_dtype=args.state_dtype,
        device=args.device,
        batch_size=args.per_device_eval_batch_size,
    )
