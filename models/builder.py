"""One builder for every training mode, and the loader of what training saved.

The modes and the scoring family each belongs to are listed in ``models.families``: a mode says
which parameters train (everything, the head on cached states, the top layers, LoRA adapters), the
family how the model reads a pair. ``build_grader`` asks both instead of testing mode names.

The head has two classes (``labels: binary``, relevant or not) or the four grades 0-3
(``labels: graded``), so a graded teacher's grades give NDCG graded gains; either way P(relevant)
is the mass of the relevant classes (``relevant_from`` in the grader's description).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from core.cli import check_choices, choice
from core.errors import InputError
from core.records import DEFAULT_RELEVANCE_THRESHOLD
from models.families import (
    MODES,
    ScoringFamily,
    TrainingMode,
    family_of,
    family_of_description,
    training_mode,
)
from models.grader_config import GraderDescription, read_description
from models.resolve import LABEL_NAMES, label_names, load_model

DTYPES = ("float32", "bfloat16", "float16")
PROMPT_FORMATS = ("auto", "chat", "plain", "query-likelihood")
LABEL_SCHEMES = ("binary", "graded")
GRADER_CONFIG_FILE = GraderDescription.FILE
# Every linear layer of a Llama decoder block: LoRA's default targets.
LLAMA_LINEAR_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class GraderModelConfig:
    model_name_or_path: str = field(
        default="smollm2-135m", metadata={"help": "Base model: embedded name, hub id or path."}
    )
    mode: str = choice("full", tuple(MODES), "What trains (see models.families).")
    trainable_layers: int = field(
        default=2,
        metadata={
            "help": "top_layers / query_likelihood: how many of the last decoder layers train "
            "(query_likelihood: 0 fits only the score's scale and bias)."
        },
    )
    lora_r: int = field(default=16)
    lora_alpha: int = field(default=32)
    lora_dropout: float = field(default=0.05)
    lora_target_modules: list[str] = field(default_factory=lambda: list(LLAMA_LINEAR_MODULES))
    dtype: str = choice(
        "float32",
        DTYPES,
        "Dtype of the weights that stay frozen; trained weights are always float32 master "
        "weights (bf16 compute comes from autocast, --bf16 true).",
    )
    max_length: int = field(
        default=512, metadata={"help": "Tokens per input (documents are cut to fit)."}
    )
    attn_implementation: str | None = field(
        default=None, metadata={"help": "sdpa, eager, flash_attention_2."}
    )
    prompt_format: str = choice(
        "auto",
        PROMPT_FORMATS,
        "chat (the tokenizer's chat template), plain, or auto: chat, except for a hub base model "
        "(e.g. meta-llama/Llama-3.2-1B), whose chat header tokens are untrained; query-likelihood "
        "(classifier family only): the query-likelihood grader's prompt, so that a frozen head "
        "beside that grader reads the states of its pass (the state cache) instead of a pass of "
        "its own.",
    )
    labels: str = choice(
        "binary",
        LABEL_SCHEMES,
        "binary: relevant or not; graded: the teacher's 0-3 grade (4 classes, graded NDCG gains; "
        "classifier modes only).",
    )

    def __post_init__(self) -> None:
        check_choices(self)
        if self.labels == "graded" and not self.family.supports_graded:
            graded = [m for m in MODES if family_of(m).supports_graded]
            raise InputError(
                f"labels=graded: mode={self.mode} gives one relevance score; train a graded "
                f"grader with a classification head ({', '.join(graded)})"
            )
        minimum = self.training_mode.min_trainable_layers
        if self.trainable_layers < minimum:
            raise InputError(f"trainable_layers: {self.mode} mode trains at least {minimum} layer")
        if self.trainable_layers < 0:
            raise InputError(f"trainable_layers: expected >= 0, got {self.trainable_layers}")
        if self.max_length < 8:
            raise InputError(f"max_length: expected at least 8 tokens, got {self.max_length}")

    @property
    def family(self) -> ScoringFamily:
        return family_of(self.mode)

    @property
    def training_mode(self) -> TrainingMode:
        return training_mode(self.mode)

    @property
    def num_labels(self) -> int:
        return 4 if self.labels == "graded" else 2

    @property
    def trained_layers(self) -> int:
        """Decoder layers that train in the cached-state modes (0: frozen, head only)."""
        return self.training_mode.trained_layers(self.trainable_layers)


def build_grader(config: GraderModelConfig) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model to train for ``config.mode`` (with the right parameters trainable) and its tokenizer."""
    kwargs: dict[str, Any] = {"dtype": getattr(torch, config.dtype)}
    if config.attn_implementation:
        kwargs["attn_implementation"] = config.attn_implementation
    family, mode = config.family, config.training_mode
    model, tokenizer = load_model(
        config.model_name_or_path, task=family.task, num_labels=config.num_labels, **kwargs
    )
    if mode.cached_states:
        from models.backbone import decoder, split_index

        trained = config.trained_layers
        first = split_index(model, trained)
        stack = decoder(model)
        for parameter in model.parameters():
            parameter.requires_grad = False
        top = [*list(stack.layers)[first:], stack.norm] if trained else []
        for module in family.trainable_head(model) + top:
            for parameter in module.parameters():
                parameter.requires_grad = True
    elif mode.lora:
        from peft import LoraConfig, TaskType, get_peft_model

        lora = LoraConfig(
            task_type=TaskType.CAUSAL_LM if family.task == "causal-lm" else TaskType.SEQ_CLS,
            r=config.lora_r,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules=list(config.lora_target_modules),
            modules_to_save=family.lora_modules_to_save(),
        )
        model = get_peft_model(model, lora)
    upcast_trainable(model)
    return model, tokenizer


def upcast_trainable(model: torch.nn.Module) -> int:
    """Trained parameters in float32, frozen ones as loaded: returns how many were upcast.

    With bf16 weights an AdamW update of lr 2e-5 on a weight of 0.02 rounds to nothing (bf16's
    spacing there is ~1.2e-4); float32 master weights under bf16 autocast keep it, as TRL and
    the transformers docs recommend.
    """
    upcast = 0
    for parameter in model.parameters():
        if parameter.requires_grad and parameter.dtype in (torch.bfloat16, torch.float16):
            parameter.data = parameter.data.float()
            upcast += 1
    return upcast


def count_parameters(model: torch.nn.Module) -> dict[str, int]:
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"total": total, "trainable": trainable}


def save_grader_config(path: str | Path, info: GraderDescription) -> None:
    Path(path).mkdir(parents=True, exist_ok=True)
    info.write(Path(path) / GRADER_CONFIG_FILE)


def read_grader_config(path: str | Path) -> GraderDescription | None:
    """The grader's description: ``grader_config.json``, else the ``grader`` entry of
    config.json; None for a folder (or a hub name) with neither."""
    return read_description(path)


def load_trained(
    path: str | Path, dtype: torch.dtype | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A trained checkpoint (full, frozen, LoRA adapter or generative) with its tokenizer."""
    path = Path(path)
    info = read_grader_config(path) or GraderDescription()
    task = family_of_description(info).task
    num_labels = len(info.label_names or LABEL_NAMES)
    adapter = path / "adapter_config.json"
    if adapter.exists():
        from peft import PeftModel

        base_name = json.loads(adapter.read_text())["base_model_name_or_path"]
        base, _ = load_model(base_name, task=task, dtype=dtype, num_labels=num_labels)
        model = PeftModel.from_pretrained(base, str(path))
        from models.resolve import load_tokenizer

        return model, load_tokenizer(str(path))
    return load_model(str(path), task=task, dtype=dtype, num_labels=num_labels, strict=True)


def grader_info(
    config: GraderModelConfig,
    input_format: dict[str, Any],
    relevant_from_grade: int = DEFAULT_RELEVANCE_THRESHOLD,
    **extra: Any,
) -> GraderDescription:
    """The description stored beside the weights; ``relevant_from`` is the first class that
    counts as relevant (1 for a binary head, the dataset's grade threshold for a graded one)."""
    return GraderDescription(
        mode=config.mode,
        base_model=config.model_name_or_path,
        model=asdict(config),
        input_format=input_format,
        label_names=list(label_names(config.num_labels)),
        relevant_from=relevant_from_grade if config.labels == "graded" else 1,
        **extra,
    )
