"""The cross-encoder recipe: the classifier's Trainer, loss and metrics on sentence pairs, whose
batches carry the pair's token types (``models.scoring.pair_token_type_ids``), as the grader
scores them."""

from __future__ import annotations

from typing import Any

import torch
from transformers import Trainer

from core.errors import InputError
from models.scoring import pair_token_type_ids
from train.config import TrainingSettings
from train.grader_data import GraderCollator
from train.recipes.base import TrainingJob
from train.recipes.classifier import ClassifierRecipe, classifier_trainer


class PairCollator(GraderCollator):
    """Right-pads sentence pairs and adds their token types (0: ``[CLS] query [SEP]``, 1: the
    document and its ``[SEP]``)."""

    def __init__(self, pad_token_id: int, separator: int) -> None:
        super().__init__(pad_token_id)
        self.separator = separator

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = super().__call__(features)
        batch["token_type_ids"] = pair_token_type_ids(
            batch["input_ids"], batch["attention_mask"], self.separator
        )
        return batch


class CrossEncoderRecipe(ClassifierRecipe):
    family = "cross_encoder"

    def check(self, settings: TrainingSettings) -> None:
        if settings.args.use_liger_kernel:  # Liger patches decoders; on BERT it does nothing
            raise InputError(
                "use_liger_kernel: Liger has no kernels for the cross-encoder's BERT-style "
                "encoder; leave it false"
            )

    def trainer(self, job: TrainingJob) -> Trainer:
        tokenizer = job.tokenizer
        return classifier_trainer(
            job, collator=PairCollator(tokenizer.pad_token_id, tokenizer.sep_token_id)
        )
