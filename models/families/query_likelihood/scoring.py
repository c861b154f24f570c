"""Query likelihood: a causal LM grades a pair by how much the document raises P(query).

The grader reads ``Passage: {document}\\nA question that this passage answers: {query}`` and
scores the pair by the pointwise mutual information of query and document,

    PMI = log P(query | document) - log P(query | empty passage),

summed over the query's tokens (the query-likelihood rankers of Sachan et al. 2022, "UPR", and
Zhuang et al. 2023, with the query's own prior subtracted so that scores of different queries are
comparable). P(relevant) = sigmoid(scale * PMI + bias); ``scale`` and ``bias`` are fitted on the
training pairs, and in ``query_likelihood`` mode the top decoder layers also train on that
objective (``models.families.query_likelihood.states``). Measured on TREC DL 2019
(docs/results/main-job.md), the untrained SmolLM2-135M separates relevant from non-relevant
pairs this way about as well as the MiniLM cosine, where its yes/no answer and a classifier head on its last
token stay near chance.

Only the token ids are needed: the query's tokens are those after the template's marker
(``A question that this passage answers:``), and each query's prior input is the empty-passage
template followed by the same tokens, computed once per query.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from core.errors import InputError
from models.input_format import DEFAULT_MAX_LENGTH, GraderInputFormat
from models.scoring import last_token, length_sorted_batches, pad_right

if TYPE_CHECKING:
    from models.state_cache import StateCache

FORMAT_NAME = "query-likelihood"
FORMAT_VERSION = 1
MARKER = "A question that this passage answers:"
TEMPLATE = "Passage: {document}\n" + MARKER + " {query}"


def query_likelihood_format(max_length: int = DEFAULT_MAX_LENGTH) -> GraderInputFormat:
    """The plain-text query-likelihood prompt (no chat template: the LM continues a passage)."""
    return GraderInputFormat(
        FORMAT_NAME, FORMAT_VERSION, TEMPLATE, max_length, add_special_tokens=True
    )


@dataclass
class QueryLikelihoodInputs:
    """Where each input's query starts, and each query's prior input (once per query)."""

    target_starts: list[int]
    prior_ids: list[list[int]]
    prior_target_starts: list[int]
    prior_of: list[int]  # index into prior_ids for each input


def _marker_end(ids: Sequence[int], marker: Sequence[int]) -> int:
    """Index just after the last occurrence of ``marker`` in ``ids`` (-1 when absent)."""
    width = len(marker)
    for start in range(len(ids) - width, -1, -1):
        if list(ids[start : start + width]) == list(marker):
            return start + width
    return -1


def split_inputs(
    tokenizer: PreTrainedTokenizerBase, fmt: GraderInputFormat, input_ids: Sequence[Sequence[int]]
) -> QueryLikelihoodInputs:
    """The query span of each input built by ``format_pairs`` with the query-likelihood format."""
    marker = tokenizer(MARKER, add_special_tokens=False)["input_ids"]
    empty = tokenizer(fmt.render("", ""), add_special_tokens=fmt.add_special_tokens)["input_ids"]
    context_end = _marker_end(empty, marker)
    if context_end < 0:
        raise InputError(
            f"{fmt.id}: the tokenizer splits the marker {MARKER!r} differently in context"
        )
    prior_context = list(empty[:context_end])
    starts: list[int] = []
    priors: dict[tuple[int, ...], int] = {}
    prior_of: list[int] = []
    for index, ids in enumerate(input_ids):
        start = _marker_end(ids, marker)
        if start < 0 or start >= len(ids):
            raise InputError(
                f"input {index}: no query after {MARKER!r}; query-likelihood inputs must be built "
                f"with the {FORMAT_NAME} format"
            )
        starts.append(start)
        prior_of.append(priors.setdefault(tuple(ids[start:]), len(priors)))
    prior_ids = [prior_context + list(query) for query in priors]
    return QueryLikelihoodInputs(starts, prior_ids, [context_end] * len(prior_ids), prior_of)


def target_log_likelihood(
    hidden: torch.Tensor,
    lm_head: torch.nn.Module,
    input_ids: torch.Tensor,
    target_starts: Sequence[int],
    lengths: Sequence[int],
) -> torch.Tensor:
    """Sum over each row's tokens ``target_starts[i]..lengths[i]-1`` of log P(token | before), from
    the final (normed) hidden states; the LM head runs on those positions only."""
    rows: list[int] = []
    positions: list[int] = []
    for row, (start, length) in enumerate(zip(target_starts, lengths, strict=True)):
        rows += [row] * (length - start)
        positions += range(start - 1, length - 1)
    row_index = torch.tensor(rows, device=hidden.device)
    position_index = torch.tensor(positions, device=hidden.device)
    weight = next(lm_head.parameters(), None)  # None: a quantized head, which takes float input
    picked = hidden[row_index, position_index]
    logits = lm_head(picked if weight is None else picked.to(weight.dtype)).float()
    token_log_p = torch.log_softmax(logits, dim=-1).gather(
        1, input_ids[row_index, position_index + 1].unsqueeze(1)
    )
    totals = torch.zeros(hidden.shape[0], device=hidden.device, dtype=token_log_p.dtype)
    return totals.index_add(0, row_index, token_log_p.squeeze(1))


@torch.inference_mode()
def sequence_log_likelihoods(
    model: PreTrainedModel,
    input_ids: Sequence[Sequence[int]],
    target_starts: Sequence[int],
    *,
    pad_token_id: int,
    batch_size: int = 16,
    max_batch_tokens: int | None = 16384,
    show_progress: bool = False,
    last_states: list[torch.Tensor | None] | None = None,
) -> np.ndarray:
    """log P(target tokens | what precedes them) for each input, length-sorted batches.

    With ``last_states`` (one slot per input), each input's last real token's output of the last
    decoder layer (before the final norm; float32, (1, hidden), on the CPU) is put in its slot:
    what a frozen classifier head reads, from the same pass."""
    out = np.zeros(len(input_ids), dtype=np.float64)
    decoder = model.get_decoder()
    lm_head = model.get_output_embeddings()
    lengths = [len(x) for x in input_ids]
    batches = list(length_sorted_batches(lengths, batch_size, max_batch_tokens, model.device))
    with _last_layer_output(model, last_states is not None) as last_layer:
        for batch in tqdm(
            batches, desc="query likelihood", unit="batch", disable=not show_progress
        ):
            ids, mask = pad_right([input_ids[i] for i in batch], pad_token_id, model.device)
            hidden = decoder(input_ids=ids, attention_mask=mask).last_hidden_state
            log_p = target_log_likelihood(
                hidden,
                lm_head,
                ids,
                [target_starts[i] for i in batch],
                [len(input_ids[i]) for i in batch],
            )
            out[batch] = log_p.cpu().numpy()
            if last_states is not None:
                states = last_token(last_layer[0], mask).float().cpu()
                for row, index in enumerate(batch):
                    last_states[index] = states[row : row + 1].clone()
    return out


@contextlib.contextmanager
def _last_layer_output(model: PreTrainedModel, wanted: bool) -> Iterator[list[torch.Tensor]]:
    """While open, slot 0 of the yielded list holds the last decoder layer's output of the latest
    forward pass (nothing is hooked unless ``wanted``)."""
    from models.backbone import decoder

    seen: list[torch.Tensor] = [torch.empty(0)]

    def keep(module: torch.nn.Module, inputs: object, output: object) -> None:
        seen[0] = output[0] if isinstance(output, tuple) else output  # type: ignore[assignment]

    handle = decoder(model).layers[-1].register_forward_hook(keep) if wanted else None
    try:
        yield seen
    finally:
        if handle is not None:
            handle.remove()


LOG_LIKELIHOOD = "log-likelihood"  # the state cache's name for a sequence's query log-likelihood


def last_layer_key(model: PreTrainedModel) -> int | None:
    """The state cache's name for a sequence's last-token output of the last decoder layer: the
    layer count, as ``models.cached_states.compute_states`` stores the frozen mode's states
    (None for a model without a Llama-style decoder, where no frozen classifier reads states)."""
    from models.backbone import decoder

    try:
        return len(decoder(model).layers)
    except InputError:
        return None


def pmi_scores(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    fmt: GraderInputFormat,
    input_ids: Sequence[Sequence[int]],
    *,
    batch_size: int = 16,
    max_batch_tokens: int | None = 16384,
    show_progress: bool = False,
    cache: StateCache | None = None,
    dtype: torch.dtype | None = None,
) -> np.ndarray:
    """log P(query | document) - log P(query | empty passage) for each input, computed in
    ``dtype`` (default: the model's).

    With ``cache``, each pair's and each query prior's log-likelihood is read from it where
    stored, else computed and stored there: cross-validation folds, and a grader labelling pairs
    its training scored, run the model once per sequence."""
    if not len(input_ids):
        return np.zeros(0)
    dtype = dtype or model.dtype
    split = split_inputs(tokenizer, fmt, input_ids)
    sequences = [*input_ids, *split.prior_ids]
    starts = [*split.target_starts, *split.prior_target_starts]
    values = np.full(len(sequences), np.nan)
    if cache is not None:
        for i, ids in enumerate(sequences):
            stored = cache.get(ids, LOG_LIKELIHOOD, dtype)
            if stored is not None:
                values[i] = float(stored)
    todo = np.flatnonzero(np.isnan(values)).tolist()
    # In float32 (the CPU's dtype) the pass also stores each pair's last-layer state where a
    # frozen classifier head on the same token ids reads it (models.cached_states), so the
    # classifier beside this grader runs no backbone pass of its own. Not in bf16: there the
    # classifier's states come from autocast over float32 weights, and this pass runs bf16 weights.
    wants_states = bool(todo) and cache is not None and dtype == torch.float32
    state_key = last_layer_key(model) if wants_states else None
    last_states: list[torch.Tensor | None] | None = (
        [None] * len(todo) if state_key is not None else None
    )
    if todo:
        # In ``dtype`` itself, as a grader loaded in it computes (autocast over float32 weights
        # rounds otherwise): the cache holds one value per sequence and dtype, whoever stored it.
        scorer = model if model.dtype == dtype else copy.deepcopy(model).to(dtype)
        values[todo] = sequence_log_likelihoods(
            scorer,
            [sequences[i] for i in todo],
            [starts[i] for i in todo],
            pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
            batch_size=batch_size,
            max_batch_tokens=max_batch_tokens,
            show_progress=show_progress,
            last_states=last_states,
        )
    if cache is not None:
        for slot, i in enumerate(todo):
            cache.put(sequences[i], LOG_LIKELIHOOD, dtype, torch.tensor(values[i]))
            state = last_states[slot] if last_states is not None else None
            if state is not None and state_key is not None and i < len(input_ids):  # not a prior
                cache.put(sequences[i], state_key, dtype, state)
    return values[: len(input_ids)] - values[len(input_ids) :][split.prior_of]


def pmi_probabilities(pmi: np.ndarray, scale: float, bias: float) -> np.ndarray:
    """Class probabilities (n, 2) = (not relevant, relevant) from PMI: sigmoid(scale*PMI + bias)."""
    relevant = 1.0 / (1.0 + np.exp(-(scale * np.asarray(pmi, dtype=np.float64) + bias)))
    return np.stack([1.0 - relevant, relevant], axis=1).astype(np.float32)


def fit_scale_and_bias(
    pmi: np.ndarray, labels: np.ndarray, class_weights: Sequence[float] | None = None
) -> tuple[float, float]:
    """Logistic regression of the labels on PMI (Platt scaling): the head's starting point."""
    from sklearn.linear_model import LogisticRegression

    from core.metrics import require_both_classes

    require_both_classes(labels, "training pairs (query-likelihood scale and bias)")
    weights = None if class_weights is None else dict(enumerate(class_weights))
    regression = LogisticRegression(C=1e4, class_weight=weights)
    regression.fit(np.asarray(pmi, dtype=np.float64)[:, None], np.asarray(labels, dtype=int))
    return float(regression.coef_[0, 0]), float(regression.intercept_[0])
