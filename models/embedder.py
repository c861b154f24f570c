"""Sentence embeddings for candidate retrieval: mean pooling over real tokens, L2-normalised."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from models.resolve import inference_dtype, resolve_model_path
from models.scoring import length_sorted_batches


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
        cosine baseline's ROC-AUC moves by 0.001; BENCHMARKS.md)."""
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
        for batch in tqdm(batches, desc=desc, disable=not show_progress, unit="batch"):
            encoded = self.tokenizer.pad(
                {"input_ids": [ids[i] for i in batch]}, return_tensors="pt"
            ).to(device)
            hidden = self.model(**encoded).last_hidden_state
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
            out[batch] = pooled.float().cpu().numpy()
        return out
