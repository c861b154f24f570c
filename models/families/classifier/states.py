"""The classifier's cached-state head: the top of a frozen or ``top_layers`` classifier run on
cached states of its frozen bottom (:mod:`models.cached_states`), and P(relevant) read from it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

from models.cached_states import DecoderTop, StateScorer, TrainedStates, pad_states
from models.scoring import last_token, length_sorted_batches


class GraderTop(DecoderTop):
    """Decoder layers ``first_layer..`` + final norm + head of ``model``, fed with cached states.

    With ``first_layer`` equal to the layer count (frozen mode), each cached state is the last
    real token's vector only, and the module is norm + head.
    """

    def __init__(self, model: PreTrainedModel, first_layer: int) -> None:
        super().__init__(model, first_layer)
        self.score = model.score

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor | None = None,  # named so that Trainer finds the label column
    ) -> SequenceClassifierOutput:
        """Logits of the head; the loss is the Trainer's (``GraderTrainer.compute_loss``)."""
        hidden = self.normed_states(hidden_states, attention_mask, self.score.weight.dtype)
        pooled = last_token(hidden, attention_mask)
        return SequenceClassifierOutput(logits=self.score(pooled))


@torch.inference_mode()
def top_probabilities(
    model: PreTrainedModel, first_layer: int, states: Sequence[torch.Tensor], batch_size: int = 32
) -> np.ndarray:
    """Class probabilities (n, classes) from cached states through the model's top (equal to a
    full forward pass); ``models.scoring.relevant_probability`` reads P(relevant) off them."""
    top = GraderTop(model, first_layer).eval()
    out = np.zeros((len(states), model.config.num_labels), dtype=np.float32)
    # The cached states sit on the CPU; the model is wherever it was loaded (a GPU).
    device = next(top.parameters()).device
    for batch in length_sorted_batches([s.shape[0] for s in states], batch_size):
        hidden, mask = pad_states([states[i] for i in batch])
        logits = top(hidden.to(device), mask.to(device)).logits
        out[batch] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
    return out


def classifier_state_scorer(trained: TrainedStates) -> StateScorer:
    """P(relevant) of a frozen / top_layers classifier: the bottom layers' states from the cache,
    the top's class probabilities on them."""
    from models.scoring import relevant_probability

    def scorer(records: Sequence[Any]) -> np.ndarray:
        states = trained.compute(trained.input_ids(records))
        probabilities = top_probabilities(trained.model, trained.first, states)
        return relevant_probability(probabilities, trained.info.relevant_from)

    return scorer
