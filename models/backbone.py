"""Running a slice of a decoder-only backbone: the bottom layers once, the top layers in training.

Frozen and top-layers training (``models.builder``) cache what the bottom of the network
computes and train only what sits above it. Both halves go through :func:`run_layers`, which
builds the causal mask and rotary embeddings the way the backbone's own ``forward`` does, so the
bottom pass followed by the top pass equals one full forward pass (tested).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import PretrainedConfig, PreTrainedModel
from transformers.masking_utils import create_causal_mask

from core.errors import InputError


def decoder(model: PreTrainedModel) -> torch.nn.Module:
    """The decoder stack (embeddings, ``layers``, ``norm``) of a Llama-style model, under peft too."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner = getattr(base, base.base_model_prefix, None)
    if inner is None or not hasattr(inner, "layers") or not hasattr(inner, "norm"):
        raise InputError(
            f"{type(base).__name__}: layer-wise training needs a decoder with `layers` and `norm` "
            "(Llama-style architectures)"
        )
    return inner


def run_layers(
    config: PretrainedConfig,
    rotary_emb: torch.nn.Module,
    hidden_states: torch.Tensor,
    attention_mask: torch.Tensor,
    layers: Sequence[torch.nn.Module],
) -> torch.Tensor:
    """Apply decoder ``layers`` to right-padded hidden states (positions 0..n-1, causal mask),
    as the backbone's own forward does."""
    if not layers:
        return hidden_states
    positions = torch.arange(hidden_states.shape[1], device=hidden_states.device).unsqueeze(0)
    mask = create_causal_mask(
        config=config,
        inputs_embeds=hidden_states,
        attention_mask=attention_mask,
        past_key_values=None,
        position_ids=positions,
    )
    rotary = rotary_emb(hidden_states, position_ids=positions)
    for layer in layers:
        hidden_states = layer(
            hidden_states, attention_mask=mask, position_embeddings=rotary, position_ids=positions
        )
    return hidden_states


def split_index(model: PreTrainedModel, trainable_layers: int) -> int:
    """Index of the first trained decoder layer when the top ``trainable_layers`` train."""
    total = len(decoder(model).layers)
    if not 0 <= trainable_layers <= total:
        raise InputError(
            f"trainable_layers: expected 0..{total} for this model, got {trainable_layers}"
        )
    return total - trainable_layers
