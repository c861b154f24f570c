"""Sentence embeddings for candidate retrieval: mean pooling over real tokens, L2-normalised."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from models.resolve import inference_dtype, resolve_model_path
from models.scoring import length_sorted_batches

# A CPU is crowded when its 1-minute load average is at least this many times its cores (other
# jobs' threads waiting for them). There, one torch thread embeds about twice as fast as one per
# core: each of the forward pass's parallel regions waits for its slowest thread, and a thread
# the scheduler has set aside holds up the other (MiniLM, 200 TREC DL passages on 2 cores: at
# load 12-17, 4.5-5.3 passages/s with 1 thread, 2.0-2.3 with 2; at load 8, 8.2 with 1 and 10.9
# with 2; docs/benchmarks/cpu-batches.md). Below it, the torch default (a thread per core)
# stays.
CROWDED_LOAD_PER_CORE = 6.0


def embedding_threads(load: float | None = None, cores: int | None = None) -> int:
    """torch threads for embedding on a CPU: one when it is crowded (see
    :data:`CROWDED_LOAD_PER_CORE`), else torch's own count."""
    load = os.getloadavg()[0] if load is None else load
    cores = cores or os.cpu_count() or 1
    return 1 if load >= CROWDED_LOAD_PER_CORE * cores else torch.get_num_threads()


@contextmanager
def cpu_threads(count: int) -> Iterator[None]:
    """torch's intra-op threads set to ``count`` while inside, restored after."""
    saved = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


class Embedder:
    """Encode texts into unit vectors (cosine similarity = dot product)."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        name: str = "",
        max_length: int = 256,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name or model.config.name_or_path
        self.max_length = max_length

    @classmethod
    def load(
        cls,
        name_or_path: str = "minilm-l6",
        max_length: int = 256,
        device: str | None = None,
        dtype: torch.dtype | None = None,
    ) -> Embedder:
        """``dtype`` None: ``models.resolve.inference_dtype`` (bf16 on GPUs and on CPUs with bf16
        instructions; on the build machine it embeds a corpus in 70 s against 172 s, and the
        cosine baseline's ROC-AUC moves by 0.001; docs/benchmarks/grading-speed.md)."""
        path = resolve_model_path(name_or_path)
        device = device or "cpu"
        model = AutoModel.from_pretrained(path, dtype=dtype or inference_dtype(device))
        model.to(device)
        return cls(
            model, AutoTokenizer.from_pretrained(path), name=name_or_path, max_length=max_length
        )

    @property
    def dimension(self) -> int:
        return int(self.model.config.hidden_size)

    @torch.inference_mode()
    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        show_progress: bool = False,
        desc: str = "embedding",
    ) -> np.ndarray:
        """Embeddings of ``texts`` in their order, shape (len(texts), dimension), float32."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        device = self.model.device
        ids = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]
        # Batches of similar length waste little compute on padding (and stay small on a CPU).
        batches = list(length_sorted_batches([len(x) for x in ids], batch_size, device=device))
        threads = embedding_threads() if device.type == "cpu" else torch.get_num_threads()
        with cpu_threads(threads):
            self._encode_batches(ids, batches, out, show_progress, desc)
        return out

    def _encode_batches(
        self,
        ids: list[list[int]],
        batches: list[list[int]],
        out: np.ndarray,
        show_progress: bool,
        desc: str,
    ) -> None:
        device = self.model.device
        for batch in tqdm(batches, desc=desc, disable=not show_progress, unit="batch"):
            encoded = self.tokenizer.pad(
                {"input_ids": [ids[i] for i in batch]}, return_tensors="pt"
            ).to(device)
            hidden = self.model(**encoded).last_hidden_state
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
            out[batch] = pooled.float().cpu().numpy()
