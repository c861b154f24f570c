"""The query-likelihood family's cached-state head: the trained top of the causal LM and the
read-out sigmoid(scale * PMI + bias), run on cached states of each pair and of its query's prior
(:mod:`models.cached_states`), and P(relevant) read from it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.modeling_outputs import SequenceClassifierOutput

from models.backbone import decoder
from models.cached_states import (
    DecoderTop,
    StateScorer,
    TrainedStates,
    compute_states,
    pad_states,
)
from models.families.query_likelihood.scoring import (
    QueryLikelihoodInputs,
    split_inputs,
    target_log_likelihood,
)
from models.input_format import GraderInputFormat
from models.scoring import pad_right
from models.state_cache import StateCache


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
    from models.families.query_likelihood.family import scale_and_bias
    from models.families.query_likelihood.scoring import pmi_probabilities, pmi_scores

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
