"""Padding-free packing: several (query, document) inputs side by side in rows of a fixed width.

Inputs are binned first-fit-decreasing into rows of at most ``width`` tokens; each row holds its
sequences one after the other, right-padded to ``width`` (every batch has the static shape
[rows, width]), with position ids that restart at 0 for every sequence and a block-diagonal causal
mask, so that each token attends only within its own sequence. The grader reads each sequence's
last token, exactly as on the right-padded path (:mod:`models.scoring`): same tokens, same
positions, same attention, so the logits agree to float tolerance (tests/models/test_packing.py).

How the mask reaches a Llama-style model (transformers 5.x, ``masking_utils``):
- ``sdpa`` and ``eager``: a 4D mask passed as ``attention_mask`` is used as given
  (``_preprocess_mask_arguments`` returns a 4D mask as-is): boolean (True = attend) for sdpa, an
  additive float mask for eager;
- ``flex_attention``: ``attention_mask=None`` with the restarting ``position_ids``:
  ``find_packed_sequence_indices`` reads the sequence boundaries from the positions (every row of
  a batch, batch > 1 included) and builds the block mask from them; only with ``use_cache=False``
  (with a cache, which a model's forward makes by default, it looks for no packing). The padding at a row's end is
  a sequence of its own there (its positions restart at 0 too), never read.
The padding of a row attends causally within itself, so that no query row of the attention is
fully masked (a fully masked row gives NaN, and NaN times a zero gradient is still NaN).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch


def first_fit_decreasing(lengths: Sequence[int], width: int) -> list[list[int]]:
    """Indices of ``lengths`` binned into rows of at most ``width`` tokens, longest first, each
    into the first row with room (first-fit decreasing); every index appears exactly once."""
    too_long = [i for i, n in enumerate(lengths) if n > width]
    if too_long:
        raise ValueError(
            f"{len(too_long)} sequence(s) longer than the row width {width} (the first: index "
            f"{too_long[0]}, {lengths[too_long[0]]} tokens): cut inputs to max_length first"
        )
    if any(n < 1 for n in lengths):
        raise ValueError("an empty sequence cannot be packed (it has no last token to read)")
    rows: list[list[int]] = []
    room: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        n = lengths[index]
        row = next((r for r, free in enumerate(room) if free >= n), None)
        if row is None:
            rows.append([])
            room.append(width)
            row = len(rows) - 1
        rows[row].append(index)
        room[row] -= n
    return rows


@dataclass
class PackedBatch:
    """Rows of packed sequences. ``seq_rows[k], seq_ends[k]`` locate the last token of
    ``order[k]`` (an index into the sequences given), which is the k-th read-out."""

    input_ids: torch.Tensor  # [rows, width]
    position_ids: torch.Tensor  # [rows, width], 0 at every sequence's start (and the padding's)
    segments: torch.Tensor  # [rows, width], the sequence number within its row (padding: its own)
    seq_rows: torch.Tensor  # [n]
    seq_ends: torch.Tensor  # [n]
    order: list[int]
    real_tokens: int

    def attention_mask(self, attn_implementation: str = "sdpa", dtype: torch.dtype | None = None):
        """What to pass as ``attention_mask`` for ``attn_implementation``: the 4D block-diagonal
        causal mask (boolean for sdpa, additive for eager), or None for flex_attention (the
        model finds the sequences from ``position_ids``)."""
        if attn_implementation == "flex_attention":
            return None
        mask = block_causal_mask(self.segments)
        if attn_implementation == "eager":
            dtype = dtype or torch.float32
            return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
                ~mask, torch.finfo(dtype).min
            )
        return mask

    def to(self, device: torch.device | str) -> PackedBatch:
        return PackedBatch(
            self.input_ids.to(device),
            self.position_ids.to(device),
            self.segments.to(device),
            self.seq_rows.to(device),
            self.seq_ends.to(device),
            self.order,
            self.real_tokens,
        )


def block_causal_mask(segments: torch.Tensor) -> torch.Tensor:
    """[rows, 1, width, width] boolean: query i sees key j when j <= i in the same segment."""
    width = segments.shape[1]
    causal = torch.ones((width, width), dtype=torch.bool, device=segments.device).tril()
    same = segments[:, :, None] == segments[:, None, :]
    return (same & causal)[:, None]


def pack(
    sequences: Sequence[Sequence[int]],
    width: int,
    pad_id: int,
    rows: list[list[int]] | None = None,
    num_rows: int | None = None,
) -> PackedBatch:
    """``sequences`` packed into rows of ``width`` tokens (first-fit decreasing, or the given
    ``rows`` of indices), padded with whole pad rows up to ``num_rows`` for a static shape."""
    if rows is None:
        rows = first_fit_decreasing([len(s) for s in sequences], width)
    if num_rows is not None and len(rows) > num_rows:
        raise ValueError(f"{len(rows)} rows needed, {num_rows} allowed")
    total = max(len(rows), num_rows or 0)
    ids = np.full((total, width), pad_id, dtype=np.int64)
    positions = np.tile(np.arange(width, dtype=np.int64), (total, 1))
    segments = np.zeros((total, width), dtype=np.int64)
    order, seq_rows, seq_ends = [], [], []
    for r, members in enumerate(rows):
        start = 0
        for k, index in enumerate(members):
            seq = sequences[index]
            n = len(seq)
            if start + n > width:
                raise ValueError(f"row {r}: {start + n} tokens exceed the width {width}")
            ids[r, start : start + n] = seq
            positions[r, start : start + n] = np.arange(n)
            segments[r, start : start + n] = k
            order.append(index)
            seq_rows.append(r)
            seq_ends.append(start + n - 1)
            start += n
        positions[r, start:] = np.arange(width - start)  # the padding: a sequence of its own
        segments[r, start:] = len(members)
    return PackedBatch(
        torch.from_numpy(ids),
        torch.from_numpy(positions),
        torch.from_numpy(segments),
        torch.tensor(seq_rows, dtype=torch.long),
        torch.tensor(seq_ends, dtype=torch.long),
        order,
        sum(len(sequences[i]) for i in order),
    )


def classifier_parts(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The decoder stack and the classification head of a ``*ForSequenceClassification`` (a peft
    model too: its LoRA layers sit inside the decoder, its trained head copy behind ``score``)."""
    from models.backbone import decoder

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return decoder(model), base.score


def packed_logits(
    model: torch.nn.Module,
    batch: PackedBatch,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """The classifier's logits [n, labels] at each packed sequence's last token, in
    ``batch.order``. ``attention_mask``: the prepared mask (default: built for the model's
    attention implementation)."""
    body, head = classifier_parts(model)
    if attention_mask is None:
        config = getattr(body, "config", None) or model.config
        weight = next(head.parameters())
        attention_mask = batch.attention_mask(config._attn_implementation, weight.dtype)
    hidden = body(
        input_ids=batch.input_ids,
        position_ids=batch.position_ids,
        attention_mask=attention_mask,
        use_cache=False,
    ).last_hidden_state
    return head(hidden[batch.seq_rows, batch.seq_ends])


@torch.inference_mode()
def packed_classifier_probabilities(
    model: torch.nn.Module,
    input_ids: Sequence[list[int]],
    row_width: int = 512,
    rows_per_batch: int = 64,
    temperature: float = 1.0,
) -> np.ndarray:
    """:func:`models.scoring.classifier_probabilities` through packed rows: class probabilities
    (n, num_labels) in input order. All inputs are packed once (first-fit decreasing), then run
    ``rows_per_batch`` rows at a time (the last batch padded with pad rows: one static shape)."""
    config = model.config
    pad_id = config.pad_token_id if config.pad_token_id is not None else 0
    device = next(model.parameters()).device
    rows = first_fit_decreasing([len(x) for x in input_ids], row_width)
    out = np.zeros((len(input_ids), config.num_labels), dtype=np.float32)
    for start in range(0, len(rows), rows_per_batch):
        batch = pack(
            input_ids,
            row_width,
            pad_id,
            rows[start : start + rows_per_batch],
            min(rows_per_batch, len(rows)),
        ).to(device)
        logits = packed_logits(model, batch).float()
        out[batch.order] = torch.softmax(logits / temperature, dim=-1).cpu().numpy()
    return out


def packed_steps(
    lengths: Sequence[int], width: int, rows_per_step: int, steps: int, seed: int = 0
) -> list[list[list[int]]] | None:
    """``steps`` training steps of ``rows_per_step`` rows each, from the first pairs of
    ``lengths`` (first-fit decreasing, the rows shuffled, seeded): for each step its rows of pair
    indices. None when the pairs fill fewer rows than that; the rows beyond are left out."""
    import random

    rows = first_fit_decreasing(lengths, width)
    if len(rows) < steps * rows_per_step:
        return None
    rows = rows[: steps * rows_per_step]  # the last rows, of the shortest pairs, left out
    random.Random(seed).shuffle(rows)
    return [rows[s * rows_per_step : (s + 1) * rows_per_step] for s in range(steps)]


class PackedCollator:
    """Training batches of packed rows. Each feature is one step's pairs with their rows
    (``input_ids``: sequences, ``rows``: lists of indices into them, ``labels``,
    ``soft_targets``); the batch has ``rows_per_step`` rows of ``width`` per feature, the
    read-out positions (``seq_rows``, ``seq_ends``) and the labels in read-out order.
    ``GraderTrainer.compute_loss`` reads such a batch with :func:`packed_logits`."""

    def __init__(
        self, pad_token_id: int, width: int, rows_per_step: int, attn_implementation: str = "sdpa"
    ) -> None:
        self.pad_token_id = pad_token_id
        self.width = width
        self.rows_per_step = rows_per_step
        self.attn_implementation = attn_implementation

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        sequences, rows, labels, soft = [], [], [], []
        for feature in features:
            offset = len(sequences)
            sequences += feature["input_ids"]
            rows += [[offset + i for i in row] for row in feature["rows"]]
            labels += feature["labels"]
            soft += feature.get("soft_targets") or [0.0] * len(feature["labels"])
        batch = pack(
            sequences, self.width, self.pad_token_id, rows, self.rows_per_step * len(features)
        )
        out = {
            "input_ids": batch.input_ids,
            "position_ids": batch.position_ids,
            "seq_rows": batch.seq_rows,
            "seq_ends": batch.seq_ends,
            "labels": torch.tensor([int(labels[i]) for i in batch.order], dtype=torch.long),
            "soft_targets": torch.tensor([float(soft[i]) for i in batch.order]),
        }
        mask = batch.attention_mask(self.attn_implementation)
        if mask is not None:
            out["attention_mask"] = mask
        return out


def packed_inputs_logits(model: torch.nn.Module, inputs: dict) -> torch.Tensor:
    """:func:`packed_logits` of a :class:`PackedCollator` batch (on the model's device)."""
    body, head = classifier_parts(model)
    hidden = body(
        input_ids=inputs["input_ids"],
        position_ids=inputs["position_ids"],
        attention_mask=inputs.get("attention_mask"),
        use_cache=False,
    ).last_hidden_state
    return head(hidden[inputs["seq_rows"], inputs["seq_ends"]])
