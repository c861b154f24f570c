"""One builder for every training mode, and the loader of what training saved.

Modes (paper configurations in brackets):
- ``full``: the causal LM with a classification head, everything trains [C];
- ``frozen``: the same, only the head (``score``) trains [B];
- ``top_layers``: only the last ``trainable_layers`` decoder layers, the final norm and the head
  train; like ``frozen`` it trains on cached states of the layers below (far cheaper than ``full``
  on a CPU, and it can move the features the head reads, which ``frozen`` cannot);
- ``lora``: peft LoRA adapters on the backbone, the head trained and saved in ``modules_to_save``
  (otherwise it is lost on reload: peft #310, #577, #876, #1070);
- ``generative`` / ``generative-lora``: the causal LM itself, trained to answer yes/no after the
  grader's prompt and scored by P(yes) [A, and the paper's LoRA-SFT runs];
- ``query_likelihood``: the causal LM scores a pair by how much the document raises the query's
  likelihood (``models.query_likelihood``); the last ``trainable_layers`` layers (0: none, only
  the scale and bias of the score) train on cached states like ``top_layers``.

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

from data.cli import check_choices, choice
from data.records import DEFAULT_RELEVANCE_THRESHOLD
from models.resolve import LABEL_NAMES, label_names, load_model

MODES = (
    "full",
    "frozen",
    "top_layers",
    "lora",
    "generative",
    "generative-lora",
    "query_likelihood",
)
GENERATIVE_MODES = ("generative", "generative-lora")
QUERY_LIKELIHOOD = "query_likelihood"
# Modes whose model is the causal LM itself (no classification head).
CAUSAL_LM_MODES = (*GENERATIVE_MODES, QUERY_LIKELIHOOD)
# Classifier modes whose lower layers never change: they train on cached states
# (train.cached_states); query_likelihood does too, on its own objective.
CACHED_STATE_MODES = ("frozen", "top_layers")
DTYPES = ("float32", "bfloat16", "float16")
PROMPT_FORMATS = ("auto", "chat", "plain")
LABEL_SCHEMES = ("binary", "graded")
GRADER_CONFIG_FILE = "grader_config.json"
# Every linear layer of a Llama decoder block: LoRA's default targets.
LLAMA_LINEAR_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def is_generative(mode: str) -> bool:
    """Whether a mode (or a stored grader's mode) scores by P(yes) rather than a classifier head."""
    return mode in GENERATIVE_MODES


def is_causal_lm(mode: str) -> bool:
    """Whether a mode's model is a causal LM (P(yes) or query likelihood), not a classifier."""
    return mode in CAUSAL_LM_MODES


@dataclass
class GraderModelConfig:
    model_name_or_path: str = field(
        default="smollm2-135m", metadata={"help": "Base model: embedded name, hub id or path."}
    )
    mode: str = choice("full", MODES, "What trains (see models.builder).")
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
        "(e.g. meta-llama/Llama-3.2-1B), whose chat header tokens are untrained.",
    )
    labels: str = choice(
        "binary",
        LABEL_SCHEMES,
        "binary: relevant or not; graded: the teacher's 0-3 grade (4 classes, graded NDCG gains; "
        "classifier modes only).",
    )

    def __post_init__(self) -> None:
        check_choices(self)
        if self.labels == "graded" and is_causal_lm(self.mode):
            raise ValueError(
                f"labels=graded: mode={self.mode} gives one relevance score; train a graded "
                "grader with a classification head (full, frozen, top_layers or lora)"
            )
        if self.mode == "top_layers" and self.trainable_layers < 1:
            raise ValueError("trainable_layers: top_layers mode trains at least 1 layer")
        if self.trainable_layers < 0:
            raise ValueError(f"trainable_layers: expected >= 0, got {self.trainable_layers}")
        if self.max_length < 8:
            raise ValueError(f"max_length: expected at least 8 tokens, got {self.max_length}")

    @property
    def generative(self) -> bool:
        return is_generative(self.mode)

    @property
    def num_labels(self) -> int:
        return 4 if self.labels == "graded" else 2

    @property
    def trained_layers(self) -> int:
        """Decoder layers that train in the cached-state modes (0: frozen, head only)."""
        return 0 if self.mode == "frozen" else self.trainable_layers


def build_grader(config: GraderModelConfig) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model to train for ``config.mode`` (with the right parameters trainable) and its tokenizer."""
    kwargs: dict[str, Any] = {"dtype": getattr(torch, config.dtype)}
    if config.attn_implementation:
        kwargs["attn_implementation"] = config.attn_implementation
    if is_causal_lm(config.mode):
        model, tokenizer = load_model(config.model_name_or_path, task="causal-lm", **kwargs)
    else:
        model, tokenizer = load_model(
            config.model_name_or_path, num_labels=config.num_labels, **kwargs
        )
    if config.mode in (*CACHED_STATE_MODES, QUERY_LIKELIHOOD):
        from models.backbone import decoder, split_index

        trained = config.trained_layers
        first = split_index(model, trained)
        stack = decoder(model)
        for parameter in model.parameters():
            parameter.requires_grad = False
        # A classifier's head trains; query likelihood reads the LM head, which is tied to the
        # (cached) input embeddings and stays frozen.
        head = [] if config.mode == QUERY_LIKELIHOOD else [model.score]
        for module in head + ([*list(stack.layers)[first:], stack.norm] if trained else []):
            for parameter in module.parameters():
                parameter.requires_grad = True
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
    task = "causal-lm" if is_causal_lm(str(info.get("mode", ""))) else "classification"
    num_labels = len(info.get("label_names") or LABEL_NAMES)
    adapter = path / "adapter_config.json"
    if adapter.exists():
        from peft import PeftModel

        base_name = json.loads(adapter.read_text())["base_model_name_or_path"]
        base, _ = load_model(base_name, task=task, dtype=dtype, num_labels=num_labels)
        model = PeftModel.from_pretrained(base, str(path))
        from models.resolve import load_tokenizer

        return model, load_tokenizer(str(path))
    return load_model(str(path), task=task, dtype=dtype, num_labels=num_labels)


def grader_info(
    config: GraderModelConfig,
    input_format: dict[str, Any],
    relevant_from_grade: int = DEFAULT_RELEVANCE_THRESHOLD,
    **extra: Any,
) -> dict[str, Any]:
    """The description stored beside the weights; ``relevant_from`` is the first class that
    counts as relevant (1 for a binary head, the dataset's grade threshold for a graded one)."""
    return {
        "mode": config.mode,
        "base_model": config.model_name_or_path,
        "model": asdict(config),
        "input_format": input_format,
        "label_names": list(label_names(config.num_labels)),
        "relevant_from": relevant_from_grade if config.labels == "graded" else 1,
        **extra,
    }
