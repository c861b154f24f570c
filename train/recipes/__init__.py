"""Training recipes: how the ``Trainer`` is set up for each scoring family (``models.families``).

A recipe checks the settings its family cannot honour, builds the ``Trainer`` for a
:class:`~train.recipes.base.TrainingJob` and adds what its family stores beside the weights.
``train.train`` runs every recipe through the same fit and save steps. Adding a family is one
module here (``train/recipes/NAME.py``, a :class:`~train.recipes.base.TrainingRecipe`) and one
entry in :func:`recipe_for`; the recipes import :mod:`train.recipes.base`, never this registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from models.families import ScoringFamily
    from train.recipes.base import TrainingRecipe


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
