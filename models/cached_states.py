"""Scoring a grader from cached states of its frozen bottom: the path of graders trained on
cached states (frozen and ``top_layers`` classifiers, query likelihood with or without top layers).

The bottom of such a network never changes, so its output per pair is computed once
(:func:`compute_states`, read from and stored in a :class:`models.state_cache.StateCache`) and the
trained top runs on it (:class:`GraderTop`, :class:`QueryLikelihoodTop`): the scores of a full
forward pass without running the bottom again. Training (``train.cached_states``,
``train.recipes``) trains these same tops inside ``Trainer``; cross-validation scores each fold's
held-out pairs through :func:`classifier_state_scorer` or :func:`query_likelihood_state_scorer`,
every fold sharing every pair's states.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.modeling_outputs import SequenceClassifierOutput

from models.backbone import decoder, run_layers
from models.input_format import GraderInputFormat
from models.query_likelihood import QueryLikelihoodInputs, split_inputs, target_log_likelihood
from models.scoring import last_token, length_sorted_batches, pad_right
from models.state_cache import StateCache, default_state_cache, state_cache_key

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


class TrainedStates:
    """A grader trained on cached states, loaded with what reads its frozen bottom from the state
    cache its training filled: ``trained_layers`` as it trained (``top_layers``' count, or
    ``frozen``), ``backbone`` the base model the cache is keyed by, ``state_cache`` its folder
    (None: the machine-wide one) and ``state_dtype`` the states' dtype (``auto`` or a name)."""

    def __init__(
        self,
        grader: str | Path,
        *,
        trained_layers: Any,
        backbone: str,
        state_cache: str | None,
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
        self.cache = StateCache(state_cache or default_state_cache(), state_cache_key(backbone))
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


def classifier_state_scorer(trained: TrainedStates) -> StateScorer:
    """P(relevant) of a frozen / top_layers classifier: the bottom layers' states from the cache,
    the top's class probabilities on them."""
    from models.scoring import relevant_probability

    def scorer(records: Sequence[Any]) -> np.ndarray:
        states = trained.compute(trained.input_ids(records))
        probabilities = top_probabilities(trained.model, trained.first, states)
        return relevant_probability(probabilities, trained.info.relevant_from)

    return scorer


class ScaleAndBias:
    """The read-out sigmoid(scale * PMI + bias): a ``score`` layer of one weight and one bias."""

    score: torch.nn.Linear

    @property
    def scale_and_bias(self) -> tuple[float, float]:
        return float(self.score.weight.item()), float(self.score.bias.item())

    @torch.no_grad()
    def set_scale_and_bias(self, scale: float, bias: float) -> None:
        self.score.weight.fill_(scale)
        self.score.bias.fill_(bias)

    def logits(self, pmi: torch.Tensor) -> SequenceClassifierOutput:
        z = self.score(pmi.unsqueeze(1))
        return SequenceClassifierOutput(logits=torch.cat([torch.zeros_like(z), z], dim=1))


class QueryLikelihoodTop(ScaleAndBias, DecoderTop):
    """Decoder layers ``first_layer..`` + final norm + the frozen LM head, fed with cached states
    of each pair and of its query's prior; logits (0, scale * PMI + bias)."""

    def __init__(self, model: PreTrainedModel, first_layer: int) -> None:
        super().__init__(model, first_layer)
        self._lm_head = [model.get_output_embeddings()]  # frozen and tied: not a submodule
        self.score = torch.nn.Linear(1, 1)
        self.set_scale_and_bias(1.0, 0.0)

    def log_likelihood(
        self,
        states: torch.Tensor,
        mask: torch.Tensor,
        input_ids: torch.Tensor,
        target_starts: torch.Tensor,
    ) -> torch.Tensor:
        """log P(query tokens | what precedes them) through the top, per row."""
        hidden = self.normed_states(states, mask, torch.float32)
        return target_log_likelihood(
            hidden, self._lm_head[0], input_ids, target_starts.tolist(), mask.sum(dim=1).tolist()
        )

    def pmi(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        conditioned, prior = (
            self.log_likelihood(
                inputs[f"{side}hidden_states"],
                inputs[f"{side}attention_mask"],
                inputs[f"{side}input_ids"],
                inputs[f"{side}target_starts"],
            )
            for side in ("", "prior_")
        )
        return conditioned - prior

    def forward(
        self, labels: torch.Tensor | None = None, **inputs: torch.Tensor
    ) -> SequenceClassifierOutput:
        return self.logits(self.pmi(inputs))


class QueryLikelihoodStates(torch.utils.data.Dataset):
    """Per pair: its cached states and token ids, its query's prior states and ids, its label."""

    def __init__(
        self,
        input_ids: Sequence[Sequence[int]],
        states: Sequence[torch.Tensor],
        prior_ids: Sequence[Sequence[int]],
        prior_states: Sequence[torch.Tensor],
        split: QueryLikelihoodInputs,
        labels: Sequence[int],
    ) -> None:
        self.input_ids, self.states = input_ids, states
        self.prior_ids, self.prior_states = prior_ids, prior_states
        self.split, self.labels = split, list(labels)

    def __len__(self) -> int:
        return len(self.states)

    def __getitem__(self, index: int) -> dict[str, Any]:
        prior = self.split.prior_of[index]
        return {
            "input_ids": list(self.input_ids[index]),
            "hidden_states": self.states[index],
            "target_starts": self.split.target_starts[index],
            "prior_input_ids": list(self.prior_ids[prior]),
            "prior_hidden_states": self.prior_states[prior],
            "prior_target_starts": self.split.prior_target_starts[prior],
            "labels": self.labels[index],
        }


def collate_query_likelihood(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Right-pads each pair's and its prior's states and token ids into one batch."""
    batch: dict[str, torch.Tensor] = {}
    for prefix in ("", "prior_"):
        states, mask = pad_states([f[f"{prefix}hidden_states"] for f in features])
        ids, _ = pad_right([f[f"{prefix}input_ids"] for f in features], 0)
        batch[f"{prefix}hidden_states"] = states
        batch[f"{prefix}attention_mask"] = mask
        batch[f"{prefix}input_ids"] = ids
        batch[f"{prefix}target_starts"] = torch.tensor(
            [f[f"{prefix}target_starts"] for f in features]
        )
    batch["labels"] = torch.tensor([int(f["labels"]) for f in features], dtype=torch.long)
    return batch


def query_likelihood_states(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    fmt: GraderInputFormat,
    first_layer: int,
    input_ids: Sequence[Sequence[int]],
    labels: Sequence[int],
    *,
    batch_size: int,
    dtype: torch.dtype,
    cache: StateCache | None = None,
) -> QueryLikelihoodStates:
    """Cached states of every pair of ``input_ids`` and of each of its queries' priors."""
    input_ids = list(input_ids)
    split = split_inputs(tokenizer, fmt, input_ids)
    states = compute_states(
        model,
        input_ids + split.prior_ids,
        first_layer,
        batch_size=batch_size,
        dtype=dtype,
        cache=cache,
        full_sequences=True,
    )
    return QueryLikelihoodStates(
        input_ids,
        states[: len(input_ids)],
        split.prior_ids,
        states[len(input_ids) :],
        split,
        labels,
    )


@torch.no_grad()
def pmi_of_states(
    top: QueryLikelihoodTop, data: QueryLikelihoodStates, batch_size: int = 32
) -> np.ndarray:
    """PMI of every pair of ``data`` through ``top``."""
    pmi = []
    for start in range(0, len(data), batch_size):
        batch = collate_query_likelihood(
            [data[i] for i in range(start, min(start + batch_size, len(data)))]
        )
        batch.pop("labels")
        # The cached states sit on the CPU; the top is wherever training put it (a GPU).
        device = next(top.parameters()).device
        pmi.append(top.pmi({key: value.to(device) for key, value in batch.items()}).cpu())
    return torch.cat(pmi).numpy()


def query_likelihood_state_scorer(trained: TrainedStates) -> StateScorer:
    """sigmoid(scale * PMI + bias) of a query-likelihood grader, with each pair's and each query
    prior's states read from the cache (or computed into it) and the trained top above them."""
    from models.families.query_likelihood import scale_and_bias
    from models.query_likelihood import pmi_probabilities, pmi_scores

    top = QueryLikelihoodTop(trained.model, trained.first).eval()
    top.set_scale_and_bias(*scale_and_bias(trained.info))
    whole_model = trained.first == len(decoder(trained.model).layers)

    def scorer(records: Sequence[Any]) -> np.ndarray:
        ids = trained.input_ids(records)
        if whole_model:  # the whole model is the frozen bottom: its PMI per pair, cached
            pmi = pmi_scores(
                trained.model,
                trained.tokenizer,
                trained.fmt,
                ids,
                batch_size=trained.batch_size,
                show_progress=True,
                cache=trained.cache,
                dtype=trained.dtype,
            )
        else:
            data = query_likelihood_states(
                trained.model,
                trained.tokenizer,
                trained.fmt,
                trained.first,
                ids,
                [0] * len(ids),
                batch_size=trained.batch_size,
                dtype=trained.dtype,
                cache=trained.cache,
            )
            pmi = pmi_of_states(top, data)
        return pmi_probabilities(pmi, *top.scale_and_bias)[:, 1].astype(np.float64)

    return scorer
