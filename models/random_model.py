"""Random-weight stand-ins for hub students, written offline, for speed and memory runs.

    relevance-grader random-model --out runs/llama-3.2-1b-random          # the Llama-3.2-1B shape
    accelerate launch --config_file accelerate_config.yaml -m train \\
        --config train/configs/llama-3.2-1b-lora.yaml --model_name_or_path runs/llama-3.2-1b-random \\
        --dataset runs/main/dataset --max_steps 40 --eval_strategy no --save_strategy no \\
        --load_best_model_at_end false

The machines with GPUs cannot reach a model hub, and a tokenizer of 128k tokens does not travel
in a small checkout. So the model gets Llama-3.2-1B's exact shape (16 layers, hidden 2048, GQA
8/32 heads, 128,256-token embedding; tied) and the repository's tiny tokenizer dressed as Llama 3
(BOS added on encode, ``<|eot_id|>``, the reserved ``<|finetune_right_pad_id|>`` pad, the
Llama-3 chat template). Speed, memory and whether the loss falls are what such a model measures;
its tokens per passage are about twice Llama 3's, so compare per token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import LlamaConfig, PreTrainedTokenizerBase

from core.cli import check_choices, choice, parse_config, run_main
from core.errors import InputError
from core.io import share_tree
from models.assets import TINY_TOKENIZER

LLAMA3_SPECIAL_TOKENS = (
    "<|begin_of_text|>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|finetune_right_pad_id|>",
)
LLAMA3_CHAT_TEMPLATE = (
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}"
)


def llama3_style_tokenizer() -> PreTrainedTokenizerBase:
    """The tiny tokenizer dressed as Llama 3: BOS added on encode, <|eot_id|> as EOS, no pad
    token but the reserved <|finetune_right_pad_id|>, and a Llama-3-style chat template."""
    from tokenizers.processors import TemplateProcessing
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TINY_TOKENIZER)
    tokenizer.add_special_tokens({"additional_special_tokens": list(LLAMA3_SPECIAL_TOKENS)})
    bos, eos = LLAMA3_SPECIAL_TOKENS[0], LLAMA3_SPECIAL_TOKENS[1]
    tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token = bos, eos, None
    tokenizer._tokenizer.post_processor = TemplateProcessing(
        single=f"{bos} $A",
        pair=f"{bos} $A $B",
        special_tokens=[(bos, tokenizer.convert_tokens_to_ids(bos))],
    )
    tokenizer.chat_template = LLAMA3_CHAT_TEMPLATE
    return tokenizer


# Llama-3.2-1B's architecture, and a 2-layer one for tests (its vocabulary is the tokenizer's).
SHAPES: dict[str, dict[str, Any]] = {
    "llama-3.2-1b": {
        "vocab_size": 128256,
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
    },
    "tiny": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 1024,
    },
}
# Llama-3.2's own ids, for a config built without a tokenizer (the benchmarks).
LLAMA3_SPECIAL_IDS = {"bos_token_id": 128000, "eos_token_id": 128009, "pad_token_id": 128004}


def llama_config(shape: str, tokenizer: PreTrainedTokenizerBase | None = None) -> LlamaConfig:
    """A tied-embedding Llama of ``shape`` (``SHAPES``) whose special ids are the tokenizer's."""
    if shape not in SHAPES:
        raise InputError(f"shape: expected one of {sorted(SHAPES)}, got {shape!r}")
    settings = {"tie_word_embeddings": True, **LLAMA3_SPECIAL_IDS, **SHAPES[shape]}
    if tokenizer is not None:
        pad = tokenizer.pad_token_id
        if pad is None:  # Llama 3 has no pad token; it reserves one for padding
            pad = tokenizer.convert_tokens_to_ids(LLAMA3_SPECIAL_TOKENS[-1])
        settings.update(
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=pad,
        )
        settings.setdefault("vocab_size", len(tokenizer))
    elif "vocab_size" not in settings:
        raise InputError(f"shape {shape}: its vocabulary is the tokenizer's; pass one")
    return LlamaConfig(**settings)


@dataclass
class RandomModelConfig:
    out: str = field(
        default="runs/llama-3.2-1b-random", metadata={"help": "Folder for weights + tokenizer."}
    )
    shape: str = choice("llama-3.2-1b", sorted(SHAPES), "Architecture to build.")
    dtype: str = choice("bfloat16", ("bfloat16", "float32"), "Dtype of the saved weights.")
    seed: int = field(default=0)

    def __post_init__(self) -> None:
        check_choices(self)


def write_random_model(config: RandomModelConfig) -> Path:
    """A causal LM with random weights and the Llama-3-style tokenizer, loadable as a student."""
    from transformers import LlamaForCausalLM

    tokenizer = llama3_style_tokenizer()
    torch.manual_seed(config.seed)
    model = LlamaForCausalLM(llama_config(config.shape, tokenizer)).to(getattr(torch, config.dtype))
    out = Path(config.out)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    share_tree(out)  # safetensors writes its weights 0600
    return out


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([RandomModelConfig], args)
    out = write_random_model(config)
    print(f"wrote a random-weight {config.shape} causal LM with a Llama-3-style tokenizer to {out}")


if __name__ == "__main__":
    run_main(main)
