"""The cross-encoder family, in one place: its scoring, sentence-pair input and export read-out
(:mod:`.family`: :data:`CROSS_ENCODER`); it has no cached-state head (an encoder reads the pair
as a whole). Its training is ``train/recipes/cross_encoder.py``."""

from models.families.cross_encoder.family import CROSS_ENCODER

__all__ = ["CROSS_ENCODER"]
