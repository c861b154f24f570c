"""What a scoring family is: the interface the rest of the code asks instead of testing modes.

A scoring family is how a grader turns a (query, document) pair into P(relevant). The four
families (``classifier``, ``answer_token``, ``query_likelihood``, ``cross_encoder``) differ in the model they load,
the prompt they read, how a batch is scored, how a user of the export scores a pair with plain
transformers, and how the export is served; everything else (batching, calibration, thresholds,
the metric pipeline) is shared. Training modes (``models.families.MODES``) say which parameters
train; each belongs to one family.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from core.errors import InputError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from models.grader_config import GraderDescription
    from models.input_format import GraderInputFormat


# (query, document) texts.
Pairs = Sequence[tuple[str, str]]


class LoadedGrader(Protocol):
    """What a family's scoring reads of a loaded grader (``models.grader.Grader`` is one): the
    families are below the grader, so they name this, not the class that imports them."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    input_format: GraderInputFormat
    info: GraderDescription
    batch_size: int
    max_batch_tokens: int
    prefix_cache: bool
    shares_states: bool
    compile: bool


@dataclass(frozen=True)
class PairBatch:
    """Token ids that the grader built for a batch of pairs (``Grader.encode_pairs``)."""

    input_ids: Sequence[list[int]]
    # Leading tokens each input shares with the others of its query (shared-prefix scoring).
    prefix_lengths: Sequence[int] | None = None
    show_progress: bool = False


@dataclass(frozen=True)
class PlainExport:
    """An export as its user loads it with plain transformers: model, tokenizer, description."""

    model: Any
    tokenizer: Any
    description: dict[str, Any]


@dataclass(frozen=True)
class TrainingMode:
    """One way of training a family's model: which parameters change, and how."""

    name: str
    family: str
    # peft LoRA adapters on the backbone (merged into the weights at export).
    lora: bool = False
    # The untrained bottom of the network runs once per pair and the top trains on its states.
    cached_states: bool = False
    # The mode cannot run the whole network at every step (cache_states false is refused).
    requires_cached_states: bool = False
    # Decoder layers that train on cached states: a fixed number, else ``trainable_layers``.
    fixed_trained_layers: int | None = None
    min_trainable_layers: int = 0
    description: str = ""

    def trained_layers(self, trainable_layers: int) -> int:
        if self.fixed_trained_layers is not None:
            return self.fixed_trained_layers
        return trainable_layers


class ScoringFamily:
    """Base class of the families; each subclass lives in its own module."""

    name: str = ""
    # Which transformers auto class holds the model: "classification" or "causal-lm".
    task: str = "classification"
    # Whether a head can predict the four grades 0-3 (graded NDCG gains).
    supports_graded: bool = False
    # The hub's pipeline tag in the model card.
    pipeline_tag: str = "text-generation"
    # A short phrase for docs and the model card.
    summary: str = ""

    def trainable_head(self, model: PreTrainedModel) -> list[torch.nn.Module]:
        """The new modules that always train (a classification head); none for causal LMs."""
        return []

    def lora_modules_to_save(self) -> list[str] | None:
        """Modules trained in full beside LoRA adapters and saved with them."""
        return None

    def input_format(
        self, tokenizer: PreTrainedTokenizerBase, max_length: int, prompt_format: str, model: str
    ) -> GraderInputFormat:
        """The prompt the family's grader reads (stored beside the weights)."""
        from models.input_format import GraderInputFormat, use_chat_template

        if prompt_format == "query-likelihood":
            raise InputError(
                f"prompt_format: query-likelihood is the classifier family's only (the "
                f"{self.name} family reads its own prompt)"
            )
        return GraderInputFormat.from_tokenizer(
            tokenizer,
            max_length=max_length,
            use_chat_template=use_chat_template(prompt_format, model),
        )

    def class_probabilities(self, grader: LoadedGrader, batch: PairBatch) -> np.ndarray:
        """Uncalibrated class probabilities (n, classes) of token ids built by the grader."""
        raise NotImplementedError

    def reference_probabilities(self, export: PlainExport, pairs: Pairs) -> np.ndarray:
        """Uncalibrated P(relevant) of each pair written as a user of the export would, with
        plain transformers and the stored description only (the export's round-trip check)."""
        raise NotImplementedError

    def input_section(self, fmt: GraderInputFormat) -> str:
        """The model card's words on the stored input format."""
        return (
            f"The input format `{fmt.id}` is stored in `config.json` (key `grader`): a template "
            f"with `{{query}}` and `{{document}}` slots, at most {fmt.max_length} tokens; long "
            "documents are cut at the end, never the query."
        )

    def usage_snippet(self, path: str) -> str:
        """The model card's plain-transformers example (run by the tests)."""
        raise NotImplementedError

    def untrained_origin(self, description: GraderDescription, base: str) -> str | None:
        """How an export whose weights never trained came to be, for the model card (None: its
        weights trained, or the family cannot run untrained)."""
        return None

    def serving_section(self, name: str, description: GraderDescription) -> str:
        """The model card's section on serving the export with vLLM ("" where it cannot)."""
        return ""
