"""Batched forward passes shared by every scorer: length-sorted dynamic batches, inference mode.

Two read-outs of the last real position of each sequence:
- :func:`classifier_probabilities`: softmax of a sequence classifier's logits (two classes, or
  the grades 0-3 of a graded head; :func:`relevant_probability` reads P(relevant) off either);
- :func:`answer_token_probabilities`: next-token probabilities of given answer tokens from a
  causal LM, renormalised over those tokens (P(yes) for the generative objective, zero-shot
  baselines and the local LLM judge).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel


def relevant_probability(probabilities: np.ndarray, relevant_from: int = 1) -> np.ndarray:
    """P(relevant) from class probabilities (n, classes): the mass of classes ``relevant_from``
    and up. A binary head (relevant_from 1) gives its last column; a graded 0-3 head, P(grade >= 2)."""
    return np.asarray(probabilities)[:, relevant_from:].sum(axis=1)


def decided_grades(
    probabilities: np.ndarray, relevant: np.ndarray, relevant_from: int
) -> np.ndarray:
    """A graded head's grade for each pair, on the side of the relevance decision: the likeliest
    relevant grade where the pair is labelled relevant, else the likeliest grade below, so that a
    grade never contradicts the binary label read at the threshold."""
    probabilities = np.asarray(probabilities)
    below = probabilities[:, :relevant_from].argmax(axis=1)
    above = relevant_from + probabilities[:, relevant_from:].argmax(axis=1)
    return np.where(np.asarray(relevant, dtype=bool), above, below)


# Padded tokens per batch on a CPU. Small batches keep a layer's activations in the cores' caches:
# on 2 cores (python -m benchmarks.cpu_batches, docs/benchmarks/main-job.md), at 1,024 tokens a
# batch SmolLM2-135M's query likelihood runs 1.4x as fast in float32 as at 64 pairs a batch, MiniLM
# embeds 1.25x (float32) and 1.1x (bf16) as fast; in bf16 the query likelihood is within the noise
# of the other caps.
CPU_BATCH_TOKENS = 1024


def length_sorted_batches(
    lengths: Sequence[int],
    max_batch_size: int,
    max_batch_tokens: int | None = None,
    device: torch.device | str | None = None,
) -> Iterator[list[int]]:
    """Index batches of similar length (longest first), capped by size and padded-token count;
    on a CPU ``device``, by at most :data:`CPU_BATCH_TOKENS` padded tokens too."""
    if device is not None and torch.device(device).type == "cpu":
        max_batch_tokens = min(max_batch_tokens or CPU_BATCH_TOKENS, CPU_BATCH_TOKENS)
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batch: list[int] = []
    for index in order:
        longest = lengths[batch[0]] if batch else lengths[index]
        too_many_tokens = (
            max_batch_tokens is not None and longest * (len(batch) + 1) > max_batch_tokens
        )
        if batch and (len(batch) >= max_batch_size or too_many_tokens):
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch


def pad_right(
    sequences: Sequence[Sequence[int]],
    pad_id: int,
    device: torch.device | str = "cpu",
    pad_to_multiple_of: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids right-padded to the longest sequence, and the attention mask (1 = real token).

    The one padding routine of the project: scoring, feature caching and the training collator
    all call it, so the last real token sits at ``mask.sum(1) - 1`` everywhere.
    """
    width = max(len(ids) for ids in sequences)
    if pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return ids.to(device), mask.to(device)


def pair_token_type_ids(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, separator: int
) -> torch.Tensor:
    """A sentence pair's token types, read off its ids: 0 up to the first ``separator`` (``[CLS]
    query [SEP]``), 1 after it (``document [SEP]``), 0 on padding, as the tokenizer gives them.
    The sentence-pair format reads separators in the texts as text, so the first is the pair's."""
    is_separator = (input_ids == separator).long()
    after_first = (is_separator.cumsum(dim=1) - is_separator) > 0
    return (after_first & attention_mask.bool()).long()


def last_token(states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Each row's vector at its last real position (right padding): what the grader reads."""
    last = attention_mask.sum(dim=1) - 1
    return states[torch.arange(states.shape[0], device=states.device), last.to(states.device)]


@torch.inference_mode()
def classifier_probabilities(
    model: PreTrainedModel,
    input_ids: Sequence[list[int]],
    *,
    batch_size: int = 32,
    max_batch_tokens: int | None = 16384,
    temperature: float = 1.0,
    show_progress: bool = False,
    pair_separator: int | None = None,
) -> np.ndarray:
    """Class probabilities (n, num_labels) for right-padded inputs, in input order; with
    ``pair_separator``, sentence pairs with their token types (:func:`pair_token_type_ids`)."""
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    out = np.zeros((len(input_ids), model.config.num_labels), dtype=np.float32)
    lengths = [len(x) for x in input_ids]
    batches = list(length_sorted_batches(lengths, batch_size, max_batch_tokens, model.device))
    for batch in tqdm(batches, desc="scoring", unit="batch", disable=not show_progress):
        ids, mask = pad_right([input_ids[i] for i in batch], pad_id, model.device)
        inputs = {"input_ids": ids, "attention_mask": mask}
        if pair_separator is not None:
            inputs["token_type_ids"] = pair_token_type_ids(ids, mask, pair_separator)
        logits = model(**inputs).logits.float()
        out[batch] = torch.softmax(logits / temperature, dim=-1).cpu().numpy()
    return out


@torch.inference_mode()
def next_token_logits(
    model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> torch.Tensor:
    """A causal LM's next-token logits after each row's last real token (right padding).

    The LM head runs on those positions only: over a 49k vocabulary at every position it costs a
    quarter of SmolLM2-135M's forward pass and a [batch, length, vocabulary] tensor.
    """
    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask)
    logits = model.get_output_embeddings()(last_token(hidden.last_hidden_state, attention_mask))
    softcap = getattr(model.config, "final_logit_softcapping", None)
    return torch.tanh(logits / softcap) * softcap if softcap else logits


def answer_token_probabilities(
    model: PreTrainedModel,
    input_ids: Sequence[list[int]],
    answer_token_ids: Sequence[int],
    *,
    pad_token_id: int,
    batch_size: int = 16,
    max_batch_tokens: int | None = 16384,
    show_progress: bool = False,
    prefix_lengths: Sequence[int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """For each prompt, P(answer_i | prompt) renormalised over the answers, and the raw mass.

    Returns (probabilities (n, len(answers)), mass (n,)): ``mass`` is how much of the model's
    next-token distribution fell on the answer tokens at all (low mass = the model wanted to say
    something else, a sign of a poor prompt fit). With ``prefix_lengths``, inputs sharing their
    leading tokens have them computed once (:func:`shared_prefix_last_states`).
    """
    answers = torch.tensor(list(answer_token_ids))
    probs = np.zeros((len(input_ids), len(answers)), dtype=np.float32)
    mass = np.zeros(len(input_ids), dtype=np.float32)

    def read_out(rows: list[int], logits: torch.Tensor) -> None:
        next_token = torch.log_softmax(logits.float(), dim=-1)
        chosen = next_token[:, answers.to(next_token.device)]
        probs[rows] = torch.softmax(chosen, dim=-1).cpu().numpy()
        mass[rows] = chosen.exp().sum(-1).cpu().numpy()

    if prefix_lengths is not None:
        states = shared_prefix_last_states(model, input_ids, prefix_lengths, batch_size=batch_size)
        head = model.get_output_embeddings()
        weight = next(head.parameters())
        with torch.inference_mode():  # the states are inference tensors
            read_out(list(range(len(input_ids))), head(states.to(weight.device, weight.dtype)))
        return probs, mass
    lengths = [len(x) for x in input_ids]
    batches = list(length_sorted_batches(lengths, batch_size, max_batch_tokens, model.device))
    for batch in tqdm(batches, desc="scoring", unit="batch", disable=not show_progress):
        ids, mask = pad_right([input_ids[i] for i in batch], pad_token_id, model.device)
        read_out(batch, next_token_logits(model, ids, mask))
    return probs, mass


def common_prefix_lengths(input_ids: Sequence[Sequence[int]], groups: Sequence[str]) -> list[int]:
    """For each input, the number of leading tokens it shares with every input of its group (0
    for an input alone in its group): the part a shared-prefix pass computes once."""
    members: dict[str, list[int]] = {}
    for index, group in enumerate(groups):
        members.setdefault(group, []).append(index)
    lengths = [0] * len(input_ids)
    for indices in members.values():
        if len(indices) < 2:
            continue
        first = input_ids[indices[0]]
        shared = min(len(input_ids[i]) for i in indices)
        for i in indices[1:]:
            other = input_ids[i]
            shared = next((n for n in range(shared) if other[n] != first[n]), shared)
        for i in indices:
            lengths[i] = shared
    return lengths


def prefix_groups(
    input_ids: Sequence[Sequence[int]], prefix_lengths: Sequence[int]
) -> list[tuple[int, list[int]]]:
    """Inputs grouped by identical leading tokens: [(prefix length, member indices)].

    ``prefix_lengths`` says how many leading tokens of each input are its query's part (the
    prompt, the query, up to the document: :attr:`FormattedPairs.prefix_lengths`); inputs whose
    parts are identical form one group. Each member keeps at least one token of its own, from
    which the answer position is read.
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for index, (ids, length) in enumerate(zip(input_ids, prefix_lengths, strict=True)):
        groups.setdefault(tuple(ids[: min(length, len(ids) - 1)]), []).append(index)
    return [(len(prefix), members) for prefix, members in groups.items()]


@torch.inference_mode()
def shared_prefix_last_states(
    model: PreTrainedModel,
    input_ids: Sequence[Sequence[int]],
    prefix_lengths: Sequence[int],
    *,
    batch_size: int = 32,
) -> torch.Tensor:
    """The backbone's final (normed) hidden state at each input's last token, computing each
    group's shared prefix once (its KV cache expanded over the group's batches).

    Equal, within float tolerance, to the last-token state of a plain forward pass of each input:
    the same tokens at the same positions under the same causal attention.
    """
    import copy

    from models.backbone import decoder

    backbone = decoder(model)
    device = next(model.parameters()).device
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    out: torch.Tensor | None = None
    for prefix_length, members in prefix_groups(input_ids, prefix_lengths):
        if prefix_length == 0:  # nothing shared: a plain pass over these inputs
            cache = None
        else:
            prefix = torch.tensor([list(input_ids[members[0]][:prefix_length])], device=device)
            cache = backbone(input_ids=prefix, use_cache=True).past_key_values
        suffixes = [list(input_ids[i][prefix_length:]) for i in members]
        suffix_lengths = [len(s) + prefix_length for s in suffixes]  # what each row attends over
        for batch in length_sorted_batches(suffix_lengths, batch_size, device=device):
            ids, mask = pad_right([suffixes[i] for i in batch], pad_id, device)
            expanded = copy.deepcopy(cache)
            if expanded is not None:
                expanded.batch_repeat_interleave(len(batch))
            full_mask = torch.cat(
                [torch.ones((len(batch), prefix_length), dtype=mask.dtype, device=device), mask],
                dim=1,
            )
            positions = prefix_length + torch.arange(ids.shape[1], device=device).expand_as(ids)
            hidden = backbone(
                input_ids=ids,
                attention_mask=full_mask,
                position_ids=positions,
                past_key_values=expanded,
                use_cache=True,
            ).last_hidden_state
            states = last_token(hidden, mask)
            if out is None:
                out = torch.zeros((len(input_ids), states.shape[-1]), dtype=states.dtype)
            out[[members[i] for i in batch]] = states.cpu()
    assert out is not None
    return out


@torch.inference_mode()
def shared_prefix_classifier_probabilities(
    model: PreTrainedModel,
    input_ids: Sequence[Sequence[int]],
    prefix_lengths: Sequence[int],
    *,
    batch_size: int = 32,
) -> np.ndarray:
    """:func:`classifier_probabilities` with each query's shared prefix computed once."""
    states = shared_prefix_last_states(model, input_ids, prefix_lengths, batch_size=batch_size)
    head = model.get_base_model().score if hasattr(model, "get_base_model") else model.score
    weight = next(head.parameters())
    logits = head(states.to(device=weight.device, dtype=weight.dtype)).float()
    return torch.softmax(logits, dim=-1).cpu().numpy()
