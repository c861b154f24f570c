"""Training recipes: how the ``Trainer`` is set up for each scoring family (``models.families``).

A recipe checks the settings its family cannot honour, builds the ``Trainer`` for a
:class:`TrainingJob` and adds what its family stores beside the weights. ``train.train`` runs
every recipe through the same fit and save steps. Adding a family is one module here and one
entry in ``RECIPES``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, Trainer

    from models.builder import GraderModelConfig
    from models.families import ScoringFamily
    from models.grader_config import GraderDescription
    from models.input_format import GraderInputFormat
    from train.config import DataConfig, GraderTrainingArguments, LossConfig


@dataclass
class TrainingSettings:
    """The four parsed configs of one training run."""

    model: GraderModelConfig
    data: DataConfig
    loss: LossConfig
    args: GraderTrainingArguments


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


# Records with ``query``, ``text`` and ``title`` -> P(relevant) of each.
StateScorer = Callable[[Sequence[Any]], np.ndarray]


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
        validation folds share every pair's states). None where the family has no such path."""
        return None


def recipe_for(family: ScoringFamily) -> TrainingRecipe:
    from train.recipes.answer_token import AnswerTokenRecipe
    from train.recipes.classifier import ClassifierRecipe
    from train.recipes.cross_encoder import CrossEncoderRecipe
    from train.recipes.query_likelihood import QueryLikelihoodRecipe

    recipes: dict[str, TrainingRecipe] = {
        r.family: r
        for r in (
            ClassifierRecipe(),
            AnswerTokenRecipe(),
            QueryLikelihoodRecipe(),
            CrossEncoderRecipe(),
        )
    }
    return recipes[family.name]
