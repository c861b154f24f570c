"""Training the top of a classifier grader on cached bottom-layer states, inside ``Trainer``.

Frozen mode (paper config B) trains the head alone; ``top_layers`` mode trains the last
``trainable_layers`` decoder layers, the final norm and the head. Either way the bottom of the
network never changes, so its output is computed once per pair (:func:`compute_states`) and the
same ``Trainer`` as every other mode trains :class:`GraderTop` on it: resume, logging, evaluation,
checkpoints and early stopping behave alike. :class:`GraderTop` holds the model's own parameter
objects, so training it trains the full model in place, which is then saved as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

from models.backbone import decoder, run_layers
from models.scoring import last_token, length_sorted_batches, pad_right


class GraderTop(torch.nn.Module):
    """Decoder layers ``first_layer..`` + final norm + head of ``model``, fed with cached states.

    With ``first_layer`` equal to the layer count (frozen mode), each cached state is the last
    real token's vector only, and the module is norm + head.
    """

    def __init__(self, model: PreTrainedModel, first_layer: int) -> None:
        super().__init__()
        stack = decoder(model)
        self.config = stack.config
        self.layers = torch.nn.ModuleList(list(stack.layers)[first_layer:])
        self.rotary_emb = stack.rotary_emb
        self.norm = stack.norm
        self.score = model.score

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor | None = None,  # named so that Trainer finds the label column
    ) -> SequenceClassifierOutput:
        """Logits of the head; the loss is the Trainer's (``GraderTrainer.compute_loss``)."""
        dtype = self.score.weight.dtype
        hidden = run_layers(
            self.config, self.rotary_emb, hidden_states.to(dtype), attention_mask, self.layers
        )
        pooled = last_token(self.norm(hidden), attention_mask)
        return SequenceClassifierOutput(logits=self.score(pooled))


@torch.inference_mode()
def compute_states(
    model: PreTrainedModel,
    input_ids: Sequence[Sequence[int]],
    first_layer: int,
    *,
    batch_size: int = 16,
    max_batch_tokens: int = 16384,
    dtype: torch.dtype = torch.float32,
) -> list[torch.Tensor]:
    """Per pair, the hidden states entering layer ``first_layer`` (float32, on the CPU).

    Full sequences (length, hidden) when layers above train; the last real token only (1, hidden)
    in frozen mode, where nothing but the norm and head reads them.
    """
    stack = decoder(model)
    device = next(model.parameters()).device
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    last_only = first_layer == len(stack.layers)
    bottom = list(stack.layers)[:first_layer]
    out: list[torch.Tensor] = [torch.empty(0)] * len(input_ids)
    batches = list(length_sorted_batches([len(x) for x in input_ids], batch_size, max_batch_tokens))
    with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
        for batch in tqdm(batches, desc="backbone states", unit="batch"):
            ids, mask = pad_right([input_ids[i] for i in batch], pad_id, device)
            hidden = run_layers(
                stack.config, stack.rotary_emb, stack.embed_tokens(ids), mask, bottom
            )
            if last_only:
                hidden = last_token(hidden, mask).unsqueeze(1)
            hidden = hidden.float().cpu()
            for row, index in enumerate(batch):
                out[index] = hidden[row, : 1 if last_only else len(input_ids[index])].clone()
    return out


class CachedStates(torch.utils.data.Dataset):
    """Cached states with their labels and soft targets: the dataset ``Trainer`` sees."""

    def __init__(
        self, states: list[torch.Tensor], labels: Sequence[int], soft_targets: Sequence[float]
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
    width = max(f["hidden_states"].shape[0] for f in features)
    hidden = features[0]["hidden_states"].shape[1]
    states = torch.zeros((len(features), width, hidden), dtype=features[0]["hidden_states"].dtype)
    mask = torch.zeros((len(features), width), dtype=torch.long)
    for row, feature in enumerate(features):
        length = feature["hidden_states"].shape[0]
        states[row, :length] = feature["hidden_states"]
        mask[row, :length] = 1
    return {
        "hidden_states": states,
        "attention_mask": mask,
        "labels": torch.tensor([int(f["labels"]) for f in features], dtype=torch.long),
        "soft_targets": torch.tensor([float(f["soft_targets"]) for f in features]),
    }
