"""Batched text generation with a local causal LM (the hf judge backend and the QA reader).

Chat messages become token ids through the model's chat template; batches are left-padded,
because generation continues from each row's right edge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from core.errors import InputError


def chat_input_ids(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of a conversation, ending where the assistant's reply starts."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


@dataclass
class Generation:
    """One prompt's sampled replies."""

    texts: list[str]
    finished: list[bool]  # False: the reply ran into max_new_tokens
    input_tokens: int  # prompt tokens, counted once per sample
    output_tokens: int


def generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    input_ids: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    samples: int = 1,
    temperature: float = 0.0,
) -> list[Generation]:
    """Generate for one batch of prompts (the caller chooses the batch size)."""
    import torch

    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        encoded = tokenizer.pad(
            {"input_ids": [list(ids) for ids in input_ids]}, return_tensors="pt"
        )
    finally:
        tokenizer.padding_side = side
    encoded = encoded.to(model.device)
    sampling = temperature > 0
    with torch.inference_mode():
        output = model.generate(
            **encoded,
            max_new_tokens=max_new_tokens,
            do_sample=sampling,
            temperature=temperature if sampling else None,
            top_p=None,
            top_k=None,
            num_return_sequences=samples,
            pad_token_id=tokenizer.pad_token_id,
        )
    new_tokens = output[:, encoded["input_ids"].shape[1] :]
    texts = tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    finished = [bool(eos_ids & set(row.tolist())) or not eos_ids for row in new_tokens]
    out = []
    for row in range(len(input_ids)):
        rows = slice(row * samples, (row + 1) * samples)
        prompt_tokens = int(encoded["attention_mask"][row].sum())
        out.append(
            Generation(
                texts=texts[rows],
                finished=finished[rows],
                input_tokens=prompt_tokens * samples,
                output_tokens=int((new_tokens[rows] != tokenizer.pad_token_id).sum()),
            )
        )
    return out


def vllm_engine(
    model: str,
    *,
    dtype: str,
    tensor_parallel_size: int,
    max_model_len: int | None,
    gpu_memory_utilization: float,
) -> tuple[Any, Any]:
    """(the vllm module, an offline ``vllm.LLM``) for a model name or path; vLLM is imported here
    only, and its absence is an error that says how to get it or what to use instead."""
    try:
        import vllm
    except ImportError:
        raise InputError(
            "vLLM is not installed; `pip install -e '.[vllm]'` on a GPU machine, or serve the "
            "model with `vllm serve` and use the openai backend with base_url http://HOST:8000/v1"
        ) from None
    from models.resolve import resolve_model_path

    engine = vllm.LLM(
        model=resolve_model_path(model),
        dtype=dtype,
        tensor_parallel_size=tensor_parallel_size,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
    )
    return vllm, engine
