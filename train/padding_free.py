"""Padding-free batches for the classifier recipe (``padding_free: true``).

transformers' ``DataCollatorWithFlattening`` lays a batch's pairs end to end in one row of
``[1, total tokens]`` with position ids that restart at 0 for every pair; no padding and no
attention mask. The model keeps attention within each pair from those positions: flash attention
through its variable-length kernel (the collator hands it the boundaries, ``cu_seq_lens_*``),
SDPA, eager and flex_attention through the block-diagonal causal mask that transformers builds
from the restarting positions (``masking_utils.find_packed_sequence_indices``). Every pair sees the
same tokens at the same positions under the same attention as on the right-padded path, so its
logits agree to float tolerance (tests/train/test_padding_free.py).

The classifier reads each pair at its last token. The model's own forward pools one token per
row, so :func:`padding_free_logits` calls that forward (the one accelerate wraps with mixed
precision and DDP with its gradient synchronisation) and reads the head's per-token logits, which
the forward computes anyway, at every pair's last token: each pair keeps its own label there.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DataCollatorWithFlattening

# What the flattening collator adds for flash attention's variable-length kernel.
FLASH_KWARGS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")


def uses_flash_kernel(attn_implementation: str | None) -> bool:
    """Whether the attention implementation is a flash-attention kernel (which takes the pairs'
    boundaries as ``cu_seq_lens_*``); the others read them from the position ids."""
    return "flash" in (attn_implementation or "")


class PaddingFreeCollator:
    """A classifier batch without padding: ``input_ids`` and ``position_ids`` of shape
    ``[1, total tokens]`` (``DataCollatorWithFlattening``), the index of each pair's last token
    (``seq_ends``), and the pairs' ``labels`` and ``soft_targets`` in the batch's order."""

    def __init__(self, attn_implementation: str | None = "sdpa") -> None:
        self.flatten = DataCollatorWithFlattening(
            return_position_ids=True,
            return_flash_attn_kwargs=uses_flash_kernel(attn_implementation),
        )

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        batch = self.flatten([{"input_ids": list(f["input_ids"])} for f in features])
        batch.pop("labels", None)  # token labels of a language model; a pair's label is below
        lengths = torch.tensor([len(f["input_ids"]) for f in features])
        batch["seq_ends"] = lengths.cumsum(0) - 1
        batch["labels"] = torch.tensor([int(f["labels"]) for f in features], dtype=torch.long)
        if "soft_targets" in features[0]:
            batch["soft_targets"] = torch.tensor(
                [float(f["soft_targets"]) for f in features], dtype=torch.float32
            )
        return batch


def classifier_head(model: torch.nn.Module) -> torch.nn.Module:
    """The classification head (``score``) of a sequence classifier, inside a DDP, compiled or
    peft wrapper too (peft's trained copy sits behind its ``score`` wrapper)."""
    from accelerate.utils import extract_model_from_parallel

    inner = extract_model_from_parallel(model, keep_torch_compile=False)
    base = inner.get_base_model() if hasattr(inner, "get_base_model") else inner
    return base.score


def padding_free_logits(model: torch.nn.Module, inputs: dict[str, Any]) -> torch.Tensor:
    """The classifier's logits [pairs, labels] of a :class:`PaddingFreeCollator` batch, each read
    at its pair's last token, through ``model``'s own forward (the wrapped one under accelerate)."""
    per_token: list[torch.Tensor] = []
    hook = classifier_head(model).register_forward_hook(
        lambda module, args, output: per_token.append(output)
    )
    extra = {key: inputs[key] for key in FLASH_KWARGS if key in inputs}
    try:
        model(
            input_ids=inputs["input_ids"],
            position_ids=inputs["position_ids"],
            use_cache=False,  # with a cache, transformers looks for no packed sequences
            **extra,
        )
    finally:
        hook.remove()
    (logits,) = per_token  # [1, total tokens, labels]: the head at every token
    return logits[0, inputs["seq_ends"]]
