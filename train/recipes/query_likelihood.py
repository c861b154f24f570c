"""The query-likelihood recipe: the grader trains on cached states, inside the same ``Trainer``.

With ``trainable_layers`` 0 the whole model is the frozen bottom: each pair's and each query
prior's query log-likelihood is computed once (``pmi_scores`` with the state cache, so
cross-validation folds and the study share it) and :class:`PMIReadOut` trains scale and bias on
the PMI. With top layers training, the bottom of the causal LM runs once per pair and once per
query's empty-passage prior (``models.cached_states.compute_states``); :class:`QueryLikelihoodTop`
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
from models.cached_states import StateScorer
from models.families.query_likelihood.scoring import MARKER, fit_scale_and_bias, pmi_scores
from models.families.query_likelihood.states import (
    QueryLikelihoodStates,
    QueryLikelihoodTop,
    ScaleAndBias,
    collate_query_likelihood,
    pmi_of_states,
    query_likelihood_state_scorer,
    query_likelihood_states,
)
from models.grader_config import GraderDescription
from models.input_format import GraderInputFormat
from models.losses import build_loss
from train.config import TrainingSettings
from train.recipes.base import TrainingJob, TrainingRecipe, trained_states


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
    return [
        None
        if ds is None
        else query_likelihood_states(
            model,
            tokenizer,
            fmt,
            first_layer,
            list(ds["input_ids"]),
            list(ds["labels"]),
            batch_size=batch_size,
            dtype=dtype,
            cache=cache,
        )
        for ds in splits
    ]


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
        from models.cached_states import resolve_state_dtype
        from models.state_cache import state_cache_for
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
        cache = state_cache_for(model_config.model_name_or_path, args.world_size)
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

    def state_scorer(self, grader: Path, settings: TrainingSettings) -> StateScorer | None:
        """sigmoid(scale * PMI + bias) with each pair's and each query prior's states read from
        the cache (or computed into it) and the trained top above them."""
        trained = trained_states(grader, settings)
        return query_likelihood_state_scorer(trained) if trained else None
