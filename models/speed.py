"""The grading fast path, opt-in on ``Grader`` (``compile=True``, ``liger_kernel=True``).

- **Compiled at bucketed static shapes.** Each input is right-padded to its length rounded up to
  a multiple of :data:`BUCKET` tokens, and every batch of one width has the same number of rows
  (the token budget over the width; the last batch is filled with one-token pad rows). The decoder
  layers run under ``torch.compile`` with static shapes, so each width compiles once and is
  replayed after; all layers share one graph per shape. A pair's width and its batch's shape
  depend on its own length alone, so the other pairs of a call do not change how it is computed
  (on a CPU in float32: the same score to the bit traced, within 3e-8 under inductor). It reads
  each input at its last real token, as the plain path does (tests/models/test_speed.py holds
  the two to float32 tolerance).
- **Liger's kernels** (RMSNorm, SwiGLU, RoPE as Triton kernels), through transformers' own
  ``apply_liger_kernel``: on a CUDA GPU with the ``liger-kernel`` package only. Liger patches the
  model's modules and transformers' Llama functions for the whole process, as its training switch
  (``use_liger_kernel``) does.

Measured on one H100 (docs/benchmarks/gpu.md, "GPU: the fast path"): bucketed and compiled,
2.59x the paper's padded method on real TREC DL pairs against 1.98x for the plain path; Liger's
kernels 2.72x.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm.auto import tqdm

from core.errors import InputError

if TYPE_CHECKING:
    from models.families.base import LoadedGrader, PairBatch

# Token widths are multiples of this: at most max_length / BUCKET shapes to compile.
BUCKET = 64
# torch.compile recompiles a function for at most this many shapes (dynamo's default is 8);
# 512 tokens in buckets of 64 make 8 widths, and a longer max_length more.
MAX_SHAPES = 64
_compiled: weakref.WeakSet[torch.nn.Module] = weakref.WeakSet()


def liger_unavailable(device: torch.device | str) -> str | None:
    """Why Liger's kernels cannot run on ``device`` (one line), or None when they can."""
    from transformers.utils import is_liger_kernel_available

    if torch.device(device).type != "cuda" or not torch.cuda.is_available():
        return f"Liger's kernels are Triton kernels for a CUDA GPU, and this runs on {device}"
    if not is_liger_kernel_available():
        return "the liger-kernel package (>= 0.3.0) is not installed: pip install liger-kernel"
    try:
        import liger_kernel.transformers  # noqa: F401  (Triton's own import errors show here)
    except Exception as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"liger_kernel does not import ({type(exc).__name__}: {first_line})"
    return None


def apply_liger(model: torch.nn.Module) -> None:
    """Liger's RMSNorm, SwiGLU and RoPE kernels on ``model`` (and, as Liger does, on the Llama
    classes of this process); no loss kernels, since grading computes no loss."""
    from transformers.integrations.liger import apply_liger_kernel

    apply_liger_kernel(model, {"cross_entropy": False, "fused_linear_cross_entropy": False})


def compile_layers(model: torch.nn.Module, backend: str = "inductor") -> None:
    """Compile each decoder layer of ``model`` in place for static shapes (once per model): a
    shape compiles in about one layer's time and every layer replays the same graph."""
    from models.backbone import decoder

    if model in _compiled:
        return
    limits = torch._dynamo.config
    name = "recompile_limit" if hasattr(limits, "recompile_limit") else "cache_size_limit"
    setattr(limits, name, max(getattr(limits, name), MAX_SHAPES))
    for layer in decoder(model).layers:
        layer.compile(dynamic=False, backend=backend)
    _compiled.add(model)


def bucket_batches(
    lengths: Sequence[int], token_budget: int, bucket: int = BUCKET
) -> list[tuple[int, int, list[int]]]:
    """Batches at few static shapes, as (width, rows, indices), widest first: each input's length
    rounded up to a multiple of ``bucket``, and every batch of a width ``token_budget // width``
    rows (at least one; its last batch holds fewer inputs, and pad rows fill it)."""
    by_width: dict[int, list[int]] = {}
    for index, n in enumerate(lengths):
        by_width.setdefault(-(-n // bucket) * bucket, []).append(index)
    batches = []
    for width in sorted(by_width, reverse=True):
        rows = max(1, token_budget // width)
        members = by_width[width]
        batches += [(width, rows, members[s : s + rows]) for s in range(0, len(members), rows)]
    return batches


def compiled_classifier_probabilities(grader: LoadedGrader, batch: PairBatch) -> np.ndarray:
    """A classifier grader's class probabilities on the compiled fast path (``compile=True``)."""
    if grader.prefix_cache:
        raise InputError(
            "compile and prefix_cache are two different fast paths of one grader: choose one"
        )
    compile_layers(grader.model)
    return bucketed_classifier_probabilities(
        grader.model, batch.input_ids, grader.max_batch_tokens, show_progress=batch.show_progress
    )


@torch.inference_mode()
def bucketed_classifier_probabilities(
    model: torch.nn.Module,
    input_ids: Sequence[list[int]],
    token_budget: int,
    *,
    show_progress: bool = False,
) -> np.ndarray:
    """:func:`models.scoring.classifier_probabilities` at the static shapes of
    :func:`bucket_batches`: each batch right-padded to its width and filled to its row count with
    one-token pad rows (a fully masked row would give NaN), read at each input's last token. On
    a CPU at most :data:`models.scoring.CPU_BATCH_TOKENS` tokens a batch, as the plain path."""
    from models.backbone import decoder
    from models.scoring import CPU_BATCH_TOKENS, last_token, pad_right

    config = model.config
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    pad_id = config.pad_token_id if config.pad_token_id is not None else 0
    device = next(model.parameters()).device
    if device.type == "cpu":
        token_budget = min(token_budget, CPU_BATCH_TOKENS)
    out = np.zeros((len(input_ids), config.num_labels), dtype=np.float32)
    batches = bucket_batches([len(ids) for ids in input_ids], token_budget)
    for width, rows, batch in tqdm(batches, desc="scoring", disable=not show_progress):
        sequences = [input_ids[i] for i in batch] + [[pad_id]] * (rows - len(batch))
        ids, mask = pad_right(sequences, pad_id, device, pad_to_multiple_of=width)
        hidden = decoder(model)(input_ids=ids, attention_mask=mask, use_cache=False)
        real = len(batch)
        states = last_token(hidden.last_hidden_state[:real], mask[:real])
        logits = base.score(states).float()
        out[batch] = torch.softmax(logits, dim=-1).cpu().numpy()
    return out
