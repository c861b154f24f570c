"""One builder for every training mode, and the loader of what training saved.

Modes (paper configurations in brackets):
- ``full``: the causal LM with a 2-label head, everything trains [C];
- ``frozen``: the same, only the head (``score``) trains [B];
- ``lora``: peft LoRA adapters on the backbone, the head trained and saved in ``modules_to_save``
  (otherwise it is lost on reload: peft #310, #577, #876, #1070);
- ``generative`` / ``generative-lora``: the causal LM itself, trained to answer yes/no after the
  grader's prompt and scored by P(yes) [A, and the paper's LoRA-SFT runs].
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from models.resolve import load_model

MODES = ("full", "frozen", "lora", "generative", "generative-lora")
GRADER_CONFIG_FILE = "grader_config.json"


@dataclass
class GraderModelConfig:
    model_name_or_path: str = field(
        default="smollm2-135m", metadata={"help": "Base model: embedded name, hub id or path."}
    )
    mode: str = field(default="full", metadata={"help": f"One of {', '.join(MODES)}."})
    lora_r: int = field(default=16)
    lora_alpha: int = field(default=32)
    lora_dropout: float = field(default=0.05)
    lora_target_modules: list[str] = field(
        default_factory=lambda: [
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ]
    )
    dtype: str = field(
        default="float32", metadata={"help": "Weights dtype: float32, bfloat16 or float16."}
    )
    max_length: int = field(
        default=512, metadata={"help": "Tokens per input (documents are cut to fit)."}
    )
    attn_implementation: str | None = field(
        default=None, metadata={"help": "sdpa, eager, flash_attention_2."}
    )

    @property
    def generative(self) -> bool:
        return self.mode.startswith("generative")


def build_grader(config: GraderModelConfig) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model to train for ``config.mode`` (with the right parameters trainable) and its tokenizer."""
    if config.mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {config.mode!r}")
    kwargs: dict[str, Any] = {"dtype": getattr(torch, config.dtype)}
    if config.attn_implementation:
        kwargs["attn_implementation"] = config.attn_implementation
    task = "causal-lm" if config.generative else "classification"
    model, tokenizer = load_model(config.model_name_or_path, task=task, **kwargs)
    if config.mode == "frozen":
        for name, parameter in model.named_parameters():
            parameter.requires_grad = name.startswith("score.")
    elif config.mode in ("lora", "generative-lora"):
        from peft import LoraConfig, TaskType, get_peft_model

        lora = LoraConfig(
            task_type=TaskType.CAUSAL_LM if config.generative else TaskType.SEQ_CLS,
            r=config.lora_r,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules=list(config.lora_target_modules),
            modules_to_save=None if config.generative else ["score"],
        )
        model = get_peft_model(model, lora)
    return model, tokenizer


def count_parameters(model: torch.nn.Module) -> dict[str, int]:
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"total": total, "trainable": trainable}


def save_grader_config(path: str | Path, info: dict[str, Any]) -> None:
    Path(path).mkdir(parents=True, exist_ok=True)
    (Path(path) / GRADER_CONFIG_FILE).write_text(
        json.dumps(info, indent=2, ensure_ascii=False) + "\n"
    )


def read_grader_config(path: str | Path) -> dict[str, Any]:
    """The grader's description: ``grader_config.json``, else the ``grader`` entry of config.json."""
    file = Path(path) / GRADER_CONFIG_FILE
    if file.exists():
        return json.loads(file.read_text())
    config = Path(path) / "config.json"
    if config.exists():
        return json.loads(config.read_text()).get("grader", {})
    return {}


def load_trained(
    path: str | Path, dtype: torch.dtype | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A trained checkpoint (full, frozen, LoRA adapter or generative) with its tokenizer."""
    path = Path(path)
    info = read_grader_config(path)
    generative = str(info.get("mode", "")).startswith("generative")
    task = "causal-lm" if generative else "classification"
    adapter = path / "adapter_config.json"
    if adapter.exists():
        from peft import PeftModel

        base_name = json.loads(adapter.read_text())["base_model_name_or_path"]
        base, _ = load_model(base_name, task=task, dtype=dtype)
        model = PeftModel.from_pretrained(base, str(path))
        from models.resolve import load_tokenizer

        return model, load_tokenizer(str(path))
    return load_model(str(path), task=task, dtype=dtype)


def grader_info(
    config: GraderModelConfig, input_format: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    return {
        "mode": config.mode,
        "base_model": config.model_name_or_path,
        "model": asdict(config),
        "input_format": input_format,
        **extra,
    }
