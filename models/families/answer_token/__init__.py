"""The answer-token family, in one place: its scoring and export read-out (:mod:`.family`:
:data:`ANSWER_TOKEN`); it has no cached-state head (its modes train the whole causal LM or LoRA
adapters). Its training is ``train/recipes/answer_token.py``."""

from models.families.answer_token.family import ANSWER_TOKEN

__all__ = ["ANSWER_TOKEN"]
