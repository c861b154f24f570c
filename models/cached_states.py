"""Scoring and training on cached states of a grader's frozen bottom: what the families trained
on cached states share (frozen and ``top_layers`` classifiers, query likelihood with or without
top layers).

The bottom of such a network never changes, so its output per pair is computed once
(:func:`compute_states`, read from and stored in the process's state cache,
:mod:`models.state_cache`) and the trained top runs on it: a :class:`DecoderTop` of the model's own
layers, under each family's head (``models.families.classifier.states``,
``models.families.query_likelihood.states``), gives the scores of a full forward pass without
running the bottom again. Training (``train.recipes``) trains these same tops inside ``Trainer``;
cross-validation scores each fold's held-out pairs through a :class:`TrainedStates` and its
family's state scorer, every fold sharing every pair's states.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from models.backbone import decoder, run_layers
from models.input_format import GraderInputFormat
from models.scoring import last_token, length_sorted_batches, pad_right
from models.state_cache import StateCache, state_cache_for

# Records with ``query``, ``text`` and ``title`` -> P(relevant) of each.
StateScorer = Callable[[Sequence[Any]], np.ndarray]


class DecoderTop(torch.nn.Module):
    """Decoder layers ``first_layer..`` and the final norm of ``model`` (its own parameter
    objects), run on cached states of the layers below."""

    def __init__(self, model: PreTrainedModel, first_layer: int) -> None:
        super().__init__()
        stack = decoder(model)
        self.config = stack.config
        self.layers = torch.nn.ModuleList(list(stack.layers)[first_layer:])
        self.rotary_emb = stack.rotary_emb
        self.norm = stack.norm
        # The full model's own switch (a bound method, so the model is not a submodule here):
        # it reaches the same layer objects that this top holds. transformers before 5.2x names
        # it gradient_checkpointing_enable.
        self._enable_checkpointing = (
            getattr(model, "activation_checkpointing_enable", None)
            or model.gradient_checkpointing_enable
        )

    def activation_checkpointing_enable(self, **kwargs: Any) -> None:
        """What Trainer calls for ``activation_checkpointing: true``: the top's layers recompute
        their activations in the backward pass (``every_n_layers``, ``offload`` as the model's)."""
        self._enable_checkpointing(**kwargs)

    gradient_checkpointing_enable = activation_checkpointing_enable  # Trainer before 5.2x

    def normed_states(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor, dtype: torch.dtype
    ) -> torch.Tensor:
        """The top layers and the final norm over right-padded cached states."""
        hidden = run_layers(
            self.config, self.rotary_emb, hidden_states.to(dtype), attention_mask, self.layers
        )
        return self.norm(hidden)


def resolve_state_dtype(name: str, device: torch.device | str) -> torch.dtype:
    """``auto``: the inference dtype (bf16 on a GPU, float32 on a CPU unless
    ``RELEVANCE_GRADER_CPU_DTYPE`` says otherwise); or a dtype by name."""
    from models.resolve import inference_dtype

    return inference_dtype(device) if name == "auto" else getattr(torch, name)


class StoredStates(Sequence[torch.Tensor]):
    """States in a :class:`StateCache`, read from disk when indexed: host memory holds the batch
    being trained on, not every position of every pair (at Llama-3.2-1B width, 8 KB per token
    in float32, in every process of a DDP run)."""

    def __init__(
        self,
        cache: StateCache,
        input_ids: Sequence[Sequence[int]],
        first_layer: int | str,
        dtype: torch.dtype,
    ) -> None:
        self.cache, self.first_layer, self.dtype = cache, first_layer, dtype
        self.input_ids = [list(ids) for ids in input_ids]

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return StoredStates(self.cache, self.input_ids[index], self.first_layer, self.dtype)
        state = self.cache.get(self.input_ids[index], self.first_layer, self.dtype)
        if state is None:
            raise FileNotFoundError(
                f"state cache {self.cache.folder}: the state of pair {index} is gone "
                "(the folder was cleaned while training); run again to recompute it"
            )
        return state


@torch.inference_mode()
def compute_states(
    model: PreTrainedModel,
    input_ids: Sequence[Sequence[int]],
    first_layer: int,
    *,
    batch_size: int = 16,
    max_batch_tokens: int = 16384,
    dtype: torch.dtype = torch.float32,
    cache: StateCache | None = None,
    full_sequences: bool = False,
) -> Sequence[torch.Tensor]:
    """Per pair, the hidden states entering layer ``first_layer`` (float32, on the CPU).

    Full sequences (length, hidden) when layers above train or ``full_sequences`` is set (query
    likelihood reads every query position); otherwise, above the last layer (frozen mode, where
    nothing but the norm and head reads them), the last real token only (1, hidden). With
    ``cache``, pairs computed before are read from it, new ones are stored in it, and the states
    come back as :class:`StoredStates` (read from disk when indexed).
    """
    stack = decoder(model)
    device = next(model.parameters()).device
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    last_only = first_layer == len(stack.layers) and not full_sequences
    bottom = list(stack.layers)[:first_layer]
    # The cache names the last-token states of the frozen mode and full sequences apart.
    key: int | str = (
        f"{first_layer}:full"
        if first_layer == len(stack.layers) and full_sequences
        else first_layer
    )
    out: list[torch.Tensor] = [torch.empty(0)] * len(input_ids)
    todo = list(range(len(input_ids)))
    if cache is not None:
        todo = [i for i, ids in enumerate(input_ids) if not cache.path(ids, key, dtype).exists()]
    lengths = [len(input_ids[i]) for i in todo]
    batches = [
        [todo[j] for j in batch]
        for batch in length_sorted_batches(lengths, batch_size, max_batch_tokens, device)
    ]
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
                state = hidden[row, : 1 if last_only else len(input_ids[index])].clone()
                if cache is None:
                    out[index] = state
                else:
                    cache.put(input_ids[index], key, dtype, state)
    return out if cache is None else StoredStates(cache, input_ids, key, dtype)


def pad_states(sequences: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pads cached states (length, hidden) with zeros into (batch, width, hidden), and the
    attention mask (1 = real position)."""
    width = max(state.shape[0] for state in sequences)
    states = torch.zeros((len(sequences), width, sequences[0].shape[1]), dtype=sequences[0].dtype)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, state in enumerate(sequences):
        states[row, : state.shape[0]] = state
        mask[row, : state.shape[0]] = 1
    return states, mask


class TrainedStates:
    """A grader trained on cached states, loaded with what reads its frozen bottom from the state
    cache its training filled (the process's, :func:`models.state_cache.state_cache_for`; None
    when it is off, and the bottom runs again): ``trained_layers`` as it trained
    (``top_layers``' count, or ``frozen``), ``backbone`` the base model the cache is keyed by
    and ``state_dtype`` the states' dtype (``auto`` or a name)."""

    def __init__(
        self,
        grader: str | Path,
        *,
        trained_layers: Any,
        backbone: str,
        state_dtype: str,
        device: torch.device | str,
        batch_size: int,
    ) -> None:
        from models.backbone import split_index
        from models.builder import load_trained, read_grader_config
        from models.grader_config import GraderDescription

        self.model, self.tokenizer = load_trained(grader)
        self.model.eval()
        self.info = read_grader_config(grader) or GraderDescription()
        self.fmt = GraderInputFormat.from_dict(self.info.input_format or {})
        self.first = split_index(self.model, trained_layers)
        self.cache = state_cache_for(backbone)
        self.dtype = resolve_state_dtype(state_dtype, device)
        self.batch_size = batch_size

    def input_ids(self, records: Sequence[Any]) -> list[list[int]]:
        """The grader's token ids of records with ``query``, ``text`` and ``title``."""
        from models.input_format import format_pairs

        return format_pairs(
            self.tokenizer,
            self.fmt,
            [r.query for r in records],
            [r.text for r in records],
            [r.title for r in records],
        ).input_ids

    def compute(self, input_ids: Sequence[Sequence[int]], **options: Any) -> Sequence[torch.Tensor]:
        """The bottom's states of ``input_ids``: from the cache where stored, else computed."""
        return compute_states(
            self.model,
            input_ids,
            self.first,
            batch_size=self.batch_size,
            dtype=self.dtype,
            cache=self.cache,
            **options,
        )
