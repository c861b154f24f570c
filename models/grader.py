"""``Grader``: the one inference path for a trained (or zero-shot) relevance grader.

    grader = Grader.from_pretrained("runs/grader")           # a checkpoint or exported grader
    grader.score("what is an axon terminal", ["Axon terminals are ...", "Paris is ..."])
    grader.score("axon", [{"title": "Axon", "text": "Axon terminals are ..."}])  # a corpus line
    grader.label("what is an axon terminal", [...])          # booleans at the stored threshold
    grader.grade("what is an axon terminal", [...])          # 0-3 grades (graded graders)
    Grader.from_pretrained("smollm2-135m", zero_shot=True)   # any causal LM, judged by P(yes)

The grader's scoring family (``models.families``: a classifier head, the answer token's
probability, query likelihood; zero-shot causal LMs read P(yes)) turns a batch into class
probabilities; P(relevant) is the mass of the relevant classes. Inputs are built by
models.input_format with the format stored beside the weights, batched and length-sorted.
A stored calibration (temperature) and decision threshold are applied when present.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from core.errors import InputError
from core.parallel import is_main_process, local_device_index, map_shards, process_count
from models.builder import load_trained, read_grader_config
from models.families import CLASSIFIER, ZERO_SHOT, ScoringFamily, family_of_description
from models.families.base import PairBatch
from models.grader_config import GraderDescription
from models.input_format import (
    FormattedPairs,
    GraderInputFormat,
    format_pairs,
    use_chat_template,
)
from models.resolve import inference_dtype, load_model
from models.scoring import (
    decided_grades,
    length_sorted_batches,
    prefix_groups,
    relevant_probability,
)


def resolve_device_and_dtype(
    device: str | None, dtype: torch.dtype | str | None
) -> tuple[str, torch.dtype]:
    """The device (CUDA when present) and dtype (``auto``/None: bf16 where fast) a grader runs in."""
    if device is None and torch.cuda.is_available():
        # One GPU per process under a distributed launch (data-parallel grading).
        device = f"cuda:{local_device_index()}" if process_count() > 1 else "cuda"
    device = device or "cpu"
    if isinstance(dtype, str) and dtype != "auto":
        return device, getattr(torch, dtype)
    if dtype is None or dtype == "auto":
        return device, inference_dtype(device)
    return device, dtype


logger = logging.getLogger(__name__)

# A document as :meth:`Grader.score` takes it: its text, a corpus line's mapping, or a record with
# ``text`` and ``title`` attributes.
Document = str | Mapping[str, Any] | object
# A corpus line's keys that are no part of what a grader reads (ids, a BEIR line's metadata).
NOT_READ = frozenset({"_id", "id", "doc_id", "metadata"})


def _mapping_parts(document: Mapping[str, Any], where: str) -> tuple[str, str | None, list[str]]:
    """(text, title, the keys left unread) of a corpus line given as a mapping."""
    text, title = document.get("text"), document.get("title")
    if not isinstance(text, str):
        raise InputError(
            f"{where}: a document mapping needs a string 'text' (keys given: "
            f"{', '.join(map(str, document)) or 'none'})"
        )
    if title is not None and not isinstance(title, str):
        raise InputError(f"{where}: 'title' must be a string, got {type(title).__name__}")
    unread = [str(key) for key in document if key not in ("text", "title", *NOT_READ)]
    return text, title, unread


def document_parts(documents: Sequence[Document]) -> tuple[list[str], list[str | None]]:
    """The texts and titles of ``documents`` as :meth:`Grader.score` takes them. A mapping's keys
    other than text, title, ids and metadata are not read by a grader: said once, by name."""
    if isinstance(documents, str | Mapping):
        raise InputError("documents: give a list of documents, not one document")
    texts: list[str] = []
    titles: list[str | None] = []
    unread: dict[str, None] = {}
    for index, document in enumerate(documents):
        where = f"documents[{index}]"
        if isinstance(document, str):
            text, title = document, None
        elif isinstance(document, Mapping):
            text, title, keys = _mapping_parts(document, where)
            unread.update(dict.fromkeys(keys))
        elif isinstance(getattr(document, "text", None), str):
            text, title = document.text, getattr(document, "title", None) or None
        else:
            raise InputError(
                f"{where}: expected a string, a mapping with 'text' (and 'title') or a record "
                f"with a text attribute, got {type(document).__name__}"
            )
        texts.append(text)
        titles.append(title)
    if unread:
        logger.warning(
            "documents: %s not read (a grader reads a document's title and text only)",
            ", ".join(repr(key) for key in unread),
        )
    return texts, titles


def stored_temperature(info: GraderDescription) -> float:
    """The calibration temperature stored with a grader (1: none fitted)."""
    return info.temperature


def stored_threshold(info: GraderDescription, name: str) -> float:
    """The decision threshold stored with a grader (a probability strictly inside (0, 1), which
    reading the description checks). A training checkpoint has none yet (evaluation fits it,
    export stores it): 0.5, said once."""
    if info.threshold is None:
        if info.mode != ZERO_SHOT:
            logger.info("%s: no stored threshold; labels use 0.5 until export stores one", name)
        return 0.5
    return info.threshold


@dataclass
class Grader:
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    input_format: GraderInputFormat
    # How a pair becomes P(relevant) (models.families): classifier head, answer token, query
    # likelihood.
    family: ScoringFamily = CLASSIFIER
    threshold: float = 0.5
    temperature: float = 1.0
    name: str = ""
    info: GraderDescription = field(default_factory=GraderDescription)
    batch_size: int = 32
    max_batch_tokens: int = 16384
    # Opt-in: each query's prompt + query tokens run once for all its documents (classifier
    # graders). Measured on the 2-core CPU with SmolLM2-135M and TREC passages it saves little
    # (a 52-token prefix of 143-token inputs, run at batch size 1):
    # docs/benchmarks/grading-speed.md.
    prefix_cache: bool = False
    # The first class counted as relevant: 1 for a binary head, the grade threshold (2) for a
    # graded one.
    relevant_from: int = 1
    # Opt-in: a query-likelihood grader whose backbone never trained reads and stores each
    # sequence's log-likelihood in the process's state cache (models.state_cache), shared with its
    # training and with other graders on the same base model. Batch labelling turns it on; a
    # server's graders keep it off (no disk written per request).
    shares_states: bool = False
    # Opt-in fast path (models.speed): classifier graders' decoder layers compiled at bucketed
    # static shapes, and Liger's fused kernels (a CUDA GPU with liger-kernel). Off by default:
    # on a CPU compiling costs more than it saves.
    compile: bool = False
    liger_kernel: bool = False

    def __post_init__(self) -> None:
        if self.compile and self.family.name != CLASSIFIER.name:
            raise InputError(
                f"compile: the compiled fast path serves classifier graders, not the "
                f"{self.family.name} family of {self.name or 'this grader'}"
            )
        if self.liger_kernel:
            from models.speed import apply_liger, liger_unavailable

            reason = liger_unavailable(self.model.device)
            if reason:
                raise InputError(f"liger_kernel: {reason}")
            apply_liger(self.model)

    @classmethod
    def from_pretrained(
        cls,
        path_or_name: str | Path,
        *,
        zero_shot: bool = False,
        device: str | None = None,
        dtype: torch.dtype | str | None = None,
        max_length: int = 512,
        batch_size: int = 32,
        compile: bool = False,
        liger_kernel: bool = False,
        threshold: float | None = None,
        temperature: float | None = None,
    ) -> Grader:
        """``threshold`` and ``temperature``, when given, are the caller's fitted read-out (a
        study fold's, fitted on its validation queries) in place of the stored ones."""
        device, dtype = resolve_device_and_dtype(device, dtype)
        name = str(path_or_name)
        if zero_shot:
            model, tokenizer = load_model(name, task="causal-lm", dtype=dtype)
            info = GraderDescription(mode=ZERO_SHOT, base_model=name)
        else:
            stored = read_grader_config(name)
            if stored is None:
                raise InputError(
                    f"{name}: no grader_config.json; give a trained grader, or zero_shot=True for a causal LM"
                )
            info = stored
            model, tokenizer = load_trained(name, dtype=dtype)
        if info.input_format is not None:
            fmt = GraderInputFormat.from_dict(info.input_format)
        else:
            fmt = GraderInputFormat.from_tokenizer(
                tokenizer, max_length=max_length, use_chat_template=use_chat_template("auto", name)
            )
        return cls(
            model=model.to(device).eval(),
            tokenizer=tokenizer,
            input_format=fmt,
            family=family_of_description(info),
            threshold=threshold if threshold is not None else stored_threshold(info, name),
            temperature=temperature if temperature is not None else stored_temperature(info),
            name=name,
            info=info,
            batch_size=batch_size,
            relevant_from=info.relevant_from,
            compile=compile,
            liger_kernel=liger_kernel,
        )

    @property
    def graded(self) -> bool:
        """Whether the head predicts the 0-3 grades (not only relevant or not)."""
        return self.family.supports_graded and self.model.config.num_labels > 2

    def encode(
        self,
        queries: Sequence[str],
        documents: Sequence[str],
        titles: Sequence[str | None] | None = None,
    ) -> list[list[int]]:
        return self.encode_pairs(queries, documents, titles).input_ids

    def encode_pairs(
        self,
        queries: Sequence[str],
        documents: Sequence[str],
        titles: Sequence[str | None] | None = None,
    ) -> FormattedPairs:
        return format_pairs(self.tokenizer, self.input_format, queries, documents, titles)

    def raw_probabilities(
        self,
        queries: Sequence[str],
        documents: Sequence[str],
        titles: Sequence[str | None] | None = None,
        show_progress: bool = False,
    ) -> np.ndarray:
        """Uncalibrated P(relevant) for each pair."""
        pairs = self.encode_pairs(queries, documents, titles)
        return self.raw_probabilities_of_ids(pairs.input_ids, show_progress, pairs.prefix_lengths)

    def raw_probabilities_of_ids(
        self,
        input_ids: Sequence[list[int]],
        show_progress: bool = False,
        prefix_lengths: Sequence[int] | None = None,
    ) -> np.ndarray:
        """Uncalibrated P(relevant) for inputs already built by :meth:`encode_pairs` (with its
        ``prefix_lengths``, each query's shared part is computed once)."""
        return relevant_probability(
            self.class_probabilities_of_ids(input_ids, show_progress, prefix_lengths),
            self.relevant_from,
        )

    def class_probabilities_of_ids(
        self,
        input_ids: Sequence[list[int]],
        show_progress: bool = False,
        prefix_lengths: Sequence[int] | None = None,
    ) -> np.ndarray:
        """Uncalibrated class probabilities (n, classes): (not relevant, relevant), or the grades
        0-3 of a graded head."""
        if not len(input_ids):
            return np.zeros((0, 2), dtype=np.float32)
        batch = PairBatch(input_ids, prefix_lengths, show_progress)
        if process_count() > 1:
            return self._class_probabilities_in_shares(batch)
        return self.family.class_probabilities(self, batch)

    def _class_probabilities_in_shares(self, batch: PairBatch) -> np.ndarray:
        """Under a distributed launch, each process grades a share of the pairs and all receive
        every row in input order. The shares are whole batches of the one-process plan (or whole
        query groups with ``prefix_cache``), and a share keeps their order, so each process forms
        exactly the batches one process would: the probabilities are the same, not merely close
        (but for the query-likelihood family's query priors, batched apart, in the last bits)."""
        lengths = [len(ids) for ids in batch.input_ids]
        # Only the classifier reads shared prefixes (models.families.classifier).
        shared_prefixes = self.prefix_cache and self.family.name == "classifier"
        if shared_prefixes and batch.prefix_lengths is not None:
            units = [members for _, members in prefix_groups(batch.input_ids, batch.prefix_lengths)]
        else:
            units = list(
                length_sorted_batches(
                    lengths, self.batch_size, self.max_batch_tokens, self.model.device
                )
            )

        def grade(rows: list[int]) -> list[np.ndarray]:
            share = PairBatch(
                [batch.input_ids[i] for i in rows],
                None if batch.prefix_lengths is None else [batch.prefix_lengths[i] for i in rows],
                batch.show_progress and is_main_process(),
            )
            return list(self.family.class_probabilities(self, share))

        rows = map_shards(units, [sum(lengths[i] for i in unit) for unit in units], grade)
        return np.stack(rows)

    def grades_and_scores_of_ids(
        self, input_ids: Sequence[list[int]], prefix_lengths: Sequence[int] | None = None
    ) -> tuple[np.ndarray | None, np.ndarray]:
        """(grades, calibrated P(relevant)) from one pass; grades (0-3, on the side of the
        threshold's decision) only for a graded head, else None."""
        classes = self.class_probabilities_of_ids(input_ids, False, prefix_lengths)
        scores = self.calibrate(relevant_probability(classes, self.relevant_from))
        if not self.graded:
            return None, scores
        return decided_grades(classes, scores >= self.threshold, self.relevant_from), scores

    def calibrate(self, probabilities: np.ndarray) -> np.ndarray:
        if self.temperature == 1.0:
            return probabilities
        from core.metrics import apply_temperature  # scikit-learn's import: ~1 s

        return apply_temperature(probabilities, self.temperature).astype(np.float32)

    def score_pairs(
        self,
        queries: Sequence[str],
        documents: Sequence[str],
        titles: Sequence[str | None] | None = None,
        show_progress: bool = False,
    ) -> np.ndarray:
        """Calibrated P(relevant) for each (query, document) pair."""
        return self.calibrate(self.raw_probabilities(queries, documents, titles, show_progress))

    def score(self, query: str, documents: Sequence[Document]) -> np.ndarray:
        """P(relevant) of each document for one query. A document is given as the corpus holds
        it: a string (its text), a mapping with ``text`` and an optional ``title`` (a
        ``corpus.jsonl`` line), or a record with those attributes (``data.beir.Document``,
        ``core.records.Pair``, ``measure.labelers.Hit``); a title is read on its own line
        before the text, as every bulk command grades a corpus document."""
        texts, titles = document_parts(documents)
        return self.score_pairs([query] * len(texts), texts, titles)

    def label(self, query: str, documents: Sequence[Document]) -> np.ndarray:
        """Relevant (True) or not for each document (as :meth:`score` takes them), at the
        stored decision threshold."""
        return self.score(query, documents) >= self.threshold

    def grade(self, query: str, documents: Sequence[Document]) -> np.ndarray:
        """The 0-3 grade of each document for one query (a grader trained with ``labels:
        graded``), consistent with :meth:`label`: a relevant grade exactly where it says relevant."""
        if not self.graded:
            raise InputError(
                f"{self.name or 'this grader'} has a binary head; train with labels: graded for grades"
            )
        texts, titles = document_parts(documents)
        pairs = self.encode_pairs([query] * len(texts), texts, titles)
        grades, _ = self.grades_and_scores_of_ids(pairs.input_ids, pairs.prefix_lengths)
        assert grades is not None
        return grades


# Written by training beside the weights: the trained grader's P(relevant) of every validation
# pair, so that an evaluation fitting its threshold there need not score them again.
VALIDATION_SCORES = "validation_scores.json"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def grader_digest(folder: str | Path) -> str:
    """SHA-256 of a grader folder's files (weights, configs, tokenizer), its stored validation
    scores left out: the scores are valid for exactly this digest."""
    from core.io import sha256_path

    return sha256_path(folder, exclude=(VALIDATION_SCORES,))


def save_validation_scores(
    folder: str | Path,
    pairs: Sequence[tuple[str, str]],
    probabilities: np.ndarray,
    dtype: torch.dtype,
) -> None:
    """Store P(relevant) per (qid, doc_id) for the grader saved in ``folder``, as computed in
    ``dtype`` (call after the grader's files are written)."""
    from core.io import write_json

    write_json(
        Path(folder) / VALIDATION_SCORES,
        {
            "grader_digest": grader_digest(folder),
            "dtype": _dtype_name(dtype),
            "scores": [
                {"qid": qid, "doc_id": doc_id, "probability": float(p)}
                for (qid, doc_id), p in zip(pairs, probabilities, strict=True)
            ],
        },
    )


def stored_validation_scores(
    folder: str | Path, pairs: Sequence[tuple[str, str]], dtype: torch.dtype
) -> np.ndarray | None:
    """The stored P(relevant) of ``pairs``, or None unless every pair was stored by training for
    the grader now in ``folder`` (same files) in the same ``dtype``."""
    path = Path(folder) / VALIDATION_SCORES
    if not path.is_file():
        return None
    stored = json.loads(path.read_text())
    if stored.get("dtype") != _dtype_name(dtype):
        return None
    scores = {(s["qid"], s["doc_id"]): s["probability"] for s in stored.get("scores", [])}
    if any(pair not in scores for pair in pairs):
        return None
    if stored.get("grader_digest") != grader_digest(folder):
        return None
    return np.array([scores[pair] for pair in pairs], dtype=np.float64)
