"""The query-likelihood recipe: the grader trains on cached states, inside the same ``Trainer``.

With ``trainable_layers`` 0 the whole model is the frozen bottom: each pair's and each query
prior's query log-likelihood is computed once (``pmi_scores`` with the state cache, so
cross-validation folds and the study share it) and :class:`PMIReadOut` trains scale and bias on
the PMI. With top layers training, the bottom of the causal LM runs once per pair and once per
query's empty-passage prior (``train.cached_states.compute_states``); :class:`QueryLikelihoodTop`
runs the trained top layers, reads PMI = log P(query | document) - log P(query) off the frozen LM
head and turns it into the logits (0, scale * PMI + bias). Either way the classifier's loss,
metrics, best-checkpoint choice and resume apply unchanged. ``scale`` and ``bias`` (a ``score``
layer, trained at ``head_learning_rate``) start from a logistic fit on the untrained PMI of the
training pairs and are saved in ``grader_config.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, Trainer
from transformers.modeling_outputs import SequenceClassifierOutput

from core.errors import InputError
from models.backbone import decoder
from models.grader_config import GraderDescription
from models.input_format import GraderInputFormat
from models.losses import build_loss
from models.query_likelihood import (
    MARKER,
    QueryLikelihoodInputs,
    fit_scale_and_bias,
    pmi_scores,
    split_inputs,
    target_log_likelihood,
)
from train.cached_states import DecoderTop, compute_states, pad_states
from train.recipes import StateScorer, TrainingJob, TrainingRecipe, TrainingSettings


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


class PMIReadOut(ScaleAndBias, torch.nn.Module):
    """What trains when no decoder layer does: the read-out on each pair's cached PMI (the whole
    model is the frozen bottom, so its output per pair is one number)."""

    def __init__(self) -> None:
        super().__init__()
        self.score = torch.nn.Linear(1, 1)
        self.set_scale_and_bias(1.0, 0.0)

    def forward(
        self, pmi: torch.Tensor, labels: torch.Tensor | None = None
    ) -> SequenceClassifierOutput:
        return self.logits(pmi.float())

    def activation_checkpointing_enable(self, **kwargs: Any) -> None:
        """Nothing to recompute: no decoder layer trains (Trainer still asks)."""

    gradient_checkpointing_enable = activation_checkpointing_enable  # Trainer before 5.2x


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
    from models.scoring import pad_right

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


def query_likelihood_datasets(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    fmt: GraderInputFormat,
    first_layer: int,
    splits: Sequence[Dataset | None],
    *,
    batch_size: int,
    dtype: torch.dtype,
    cache: Any = None,
) -> list[QueryLikelihoodStates | None]:
    """Cached states of every pair and prior of each tokenized split (``train.grader_data.tokenize``)."""
    out: list[QueryLikelihoodStates | None] = []
    for ds in splits:
        if ds is None:
            out.append(None)
            continue
        input_ids = list(ds["input_ids"])
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
        out.append(
            QueryLikelihoodStates(
                input_ids,
                states[: len(input_ids)],
                split.prior_ids,
                states[len(input_ids) :],
                split,
                list(ds["labels"]),
            )
        )
    return out


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


def initial_scale_and_bias(
    top: QueryLikelihoodTop,
    data: QueryLikelihoodStates,
    class_weights: Sequence[float] | None,
    batch_size: int = 32,
) -> tuple[float, float]:
    """A logistic fit of the labels on the untrained top's PMI of the training pairs."""
    pmi = pmi_of_states(top, data, batch_size)
    return fit_scale_and_bias(pmi, np.asarray(data.labels), class_weights)


class PMIDataset(torch.utils.data.Dataset):
    """Each pair's PMI and label: the read-out's training data when no decoder layer trains."""

    def __init__(self, pmi: np.ndarray, labels: Sequence[int]) -> None:
        self.pmi, self.labels = np.asarray(pmi, dtype=np.float32), list(labels)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"pmi": float(self.pmi[index]), "labels": int(self.labels[index])}


def collate_pmi(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    return {
        "pmi": torch.tensor([f["pmi"] for f in features], dtype=torch.float32),
        "labels": torch.tensor([f["labels"] for f in features], dtype=torch.long),
    }


class QueryLikelihoodRecipe(TrainingRecipe):
    family = "query_likelihood"

    def check(self, settings: TrainingSettings) -> None:
        loss, soft_targets = settings.loss.loss, settings.data.soft_targets
        if loss != "cross_entropy" or soft_targets != "none":
            raise InputError(
                f"mode={settings.model.mode} fits sigmoid(scale * PMI + bias) with the "
                f"cross_entropy loss on hard labels (got loss={loss}, soft_targets={soft_targets})"
            )

    def trainer(self, job: TrainingJob) -> Trainer:
        """The grader's top (or only its scale and bias) on cached states of every pair and
        query prior."""
        from models.backbone import split_index
        from train.cached_states import resolve_state_dtype, state_cache_for
        from train.grader_data import tokenize
        from train.trainer import grader_trainer

        model, model_config, args = job.model, job.settings.model, job.settings.args
        class_weights = job.settings.loss.class_weights
        first = split_index(model, model_config.trained_layers)
        model.to(args.device).eval()
        splits = [
            tokenize(raw, job.tokenizer, job.fmt) if raw is not None else None
            for raw in (job.train_raw, job.eval_raw)
        ]
        args.train_sampling_strategy = "random"  # the cached states fix the lengths
        loss = build_loss("cross_entropy", class_weights=class_weights)
        cache = state_cache_for(args.state_cache, model_config.model_name_or_path, args.world_size)
        dtype = resolve_state_dtype(args.state_dtype, args.device)
        if first == len(decoder(model).layers):  # nothing but the read-out trains
            with args.main_process_first(desc="cached log-likelihoods"):
                data = [
                    None
                    if ds is None
                    else PMIDataset(
                        pmi_scores(
                            model,
                            job.tokenizer,
                            job.fmt,
                            list(ds["input_ids"]),
                            batch_size=args.per_device_eval_batch_size,
                            show_progress=True,
                            cache=cache,
                            dtype=dtype,
                        ),
                        ds["labels"],
                    )
                    for ds in splits
                ]
            read_out = PMIReadOut()
            assert data[0] is not None
            read_out.set_scale_and_bias(
                *fit_scale_and_bias(data[0].pmi, np.asarray(data[0].labels), class_weights)
            )
            return grader_trainer(
                read_out, args, data[0], data[1], collate_pmi, job.tokenizer, loss
            )
        # Under DDP the main process computes and stores the states, then the others read them.
        with args.main_process_first(desc="cached states"):
            train_states, eval_states = query_likelihood_datasets(
                model,
                job.tokenizer,
                job.fmt,
                first,
                splits,
                batch_size=args.per_device_eval_batch_size,
                dtype=dtype,
                cache=cache,
            )
        assert train_states is not None
        top = QueryLikelihoodTop(model, first).eval()
        top.set_scale_and_bias(*initial_scale_and_bias(top, train_states, class_weights))
        return grader_trainer(
            top.train(),
            args,
            train_states,
            eval_states,
            collate_query_likelihood,
            job.tokenizer,
            loss,
        )

    def finish(
        self, trainer: Trainer, job: TrainingJob, info: GraderDescription, metrics: dict
    ) -> None:
        from models.grader_config import QueryLikelihoodReadOut
        from models.state_cache import state_cache_key

        scale, bias = trainer.model.scale_and_bias
        # No decoder layer trained (PMIReadOut): the base model's log-likelihoods are this
        # grader's, under the state cache's name for that model.
        read_out = QueryLikelihoodReadOut(scale=scale, bias=bias, marker=MARKER)
        if isinstance(trainer.model, PMIReadOut):
            read_out.backbone = state_cache_key(job.settings.model.model_name_or_path)
        info.query_likelihood = read_out

    def state_scorer(self, grader: Path, settings: TrainingSettings) -> StateScorer:
        """sigmoid(scale * PMI + bias) with each pair's and each query prior's states read from
        the cache (or computed into it) and the trained top above them."""
        from models.families.query_likelihood import scale_and_bias
        from models.query_likelihood import pmi_probabilities
        from train.cached_states import TrainedStates

        trained = TrainedStates(grader, settings)
        top = QueryLikelihoodTop(trained.model, trained.first).eval()
        top.set_scale_and_bias(*scale_and_bias(trained.info))
        whole_model = trained.first == len(decoder(trained.model).layers)

        def scorer(records: Sequence[Any]) -> np.ndarray:
            ids = trained.input_ids(records)
            if whole_model:
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
                return pmi_probabilities(pmi, *top.scale_and_bias)[:, 1].astype(np.float64)
            (data,) = query_likelihood_datasets(
                trained.model,
                trained.tokenizer,
                trained.fmt,
                trained.first,
                [{"input_ids": ids, "labels": [0] * len(ids)}],
                batch_size=trained.batch_size,
                dtype=trained.dtype,
                cache=trained.cache,
            )
            probabilities = pmi_probabilities(pmi_of_states(top, data), *top.scale_and_bias)
            return probabilities[:, 1].astype(np.float64)

        return scorer
