"""The classifier family, in one place: its scoring, input format and export read-out
(:mod:`.family`: :data:`CLASSIFIER`) and its cached-state head, the top of a frozen or
``top_layers`` classifier run on states of its frozen bottom (:mod:`.states`). Its training is
``train/recipes/classifier.py``."""

from models.families.classifier.family import CLASSIFIER

__all__ = ["CLASSIFIER"]
