"""The registry of scoring families and training modes: the one place that maps a mode to what
it means. Everything else asks ``family_of(mode)`` or ``training_mode(mode)``.

| mode | family | what trains |
|---|---|---|
| ``full`` | classifier | everything (paper configuration C) |
| ``frozen`` | classifier | the head, on cached states of the frozen backbone (B) |
| ``top_layers`` | classifier | the last ``trainable_layers`` layers, final norm and head, on cached states |
| ``lora`` | classifier | LoRA adapters and the head |
| ``generative`` | answer_token | the causal LM, answering yes/no (A) |
| ``generative-lora`` | answer_token | LoRA adapters of the causal LM |
| ``query_likelihood`` | query_likelihood | scale and bias of the read-out, optionally the top layers, on cached states |
| ``cross_encoder`` | cross_encoder | everything: an encoder reading the (query, document) pair, and its head |

Adding a mode is one row here; adding a family is its package (``models/families/NAME/``: its
:class:`ScoringFamily`, and its cached-state head where it has one), one entry in ``FAMILIES``,
and its training recipe (``train/recipes/NAME.py``).
"""

from __future__ import annotations

from core.errors import InputError
from models.families.answer_token import ANSWER_TOKEN
from models.families.base import ScoringFamily, TrainingMode
from models.families.classifier import CLASSIFIER
from models.families.cross_encoder import CROSS_ENCODER
from models.families.query_likelihood import QUERY_LIKELIHOOD
from models.grader_config import GraderDescription

FAMILIES: dict[str, ScoringFamily] = {
    f.name: f for f in (CLASSIFIER, ANSWER_TOKEN, QUERY_LIKELIHOOD, CROSS_ENCODER)
}

_MODES = (
    TrainingMode("full", "classifier", description="everything trains"),
    TrainingMode(
        "frozen",
        "classifier",
        cached_states=True,
        fixed_trained_layers=0,
        description="only the head trains",
    ),
    TrainingMode(
        "top_layers",
        "classifier",
        cached_states=True,
        min_trainable_layers=1,
        description="the last trainable_layers layers, the final norm and the head train",
    ),
    TrainingMode("lora", "classifier", lora=True, description="LoRA adapters and the head train"),
    TrainingMode("generative", "answer_token", description="the causal LM trains on yes/no"),
    TrainingMode("generative-lora", "answer_token", lora=True, description="LoRA adapters train"),
    TrainingMode(
        "query_likelihood",
        "query_likelihood",
        cached_states=True,
        requires_cached_states=True,
        description="the read-out's scale and bias (and trainable_layers top layers) train",
    ),
    TrainingMode(
        "cross_encoder",
        "cross_encoder",
        description="the encoder reading the (query, document) pair and its head train",
    ),
)
MODES: dict[str, TrainingMode] = {mode.name: mode for mode in _MODES}
# What a zero-shot causal LM is read as.
ZERO_SHOT = "zero-shot"


def training_mode(name: str) -> TrainingMode:
    if name not in MODES:
        raise InputError(f"mode: unknown mode {name!r}; expected one of {', '.join(MODES)}")
    return MODES[name]


def family_of(mode: str) -> ScoringFamily:
    """The scoring family of a training mode (or of a zero-shot causal LM)."""
    if mode == ZERO_SHOT:
        return ANSWER_TOKEN
    return FAMILIES[training_mode(mode).family]


def family_of_description(description: GraderDescription) -> ScoringFamily:
    """The family of a stored grader (its ``grader_config.json``); a description without a mode
    predates the modes and holds a classifier."""
    return family_of(description.mode) if description.mode else CLASSIFIER


__all__ = [
    "ANSWER_TOKEN",
    "CLASSIFIER",
    "CROSS_ENCODER",
    "FAMILIES",
    "MODES",
    "QUERY_LIKELIHOOD",
    "ZERO_SHOT",
    "ScoringFamily",
    "TrainingMode",
    "family_of",
    "family_of_description",
    "training_mode",
]
