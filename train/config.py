"""The training configuration: data, loss and ``TrainingArguments`` dataclasses (YAML plus
command-line overrides through ``core.cli.parse_config``), and the checks every mode shares."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import TrainingArguments

from core.cli import check_choices, choice
from core.errors import InputError
from models.builder import GraderModelConfig
from models.losses import LOSSES
from train.grader_data import SOFT_TARGETS

logger = logging.getLogger(__name__)
STATE_DTYPES = ("auto", "float32", "bfloat16", "float16")
# Decoder families whose batches can be flattened (train.padding_free, TRL's padding_free).
PADDING_FREE_FAMILIES = ("classifier", "answer_token")


@dataclass
class DataConfig:
    dataset: str = field(
        default="runs/dataset", metadata={"help": "Folder from `relevance-grader build`."}
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Cap on training pairs (debugging)."}
    )
    max_eval_samples: int | None = field(default=None)
    soft_targets: str = choice(
        "none", SOFT_TARGETS, "Train on the teacher's P(relevant) or grade (cross-entropy only)."
    )

    def __post_init__(self) -> None:
        check_choices(self)


@dataclass
class LossConfig:
    loss: str = choice("cross_entropy", sorted(LOSSES), "Loss on the classifier's logits.")
    class_weights: list[float] | None = field(
        default=None,
        metadata={"help": "A weight per class: labels 0 and 1, or grades 0-3 (labels: graded)."},
    )
    label_smoothing: float = field(default=0.0)
    margin: float = field(default=1.0, metadata={"help": "Contrastive margin m."})

    def __post_init__(self) -> None:
        check_choices(self)
        if self.class_weights is not None and min(self.class_weights) <= 0:
            raise InputError(f"class_weights: expected positive weights, got {self.class_weights}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise InputError(f"label_smoothing: expected 0 <= x < 1, got {self.label_smoothing}")
        if self.margin <= 0:
            raise InputError(f"margin: expected > 0, got {self.margin}")

    @property
    def is_default(self) -> bool:
        return self == LossConfig()


@dataclass
class GraderTrainingArguments(TrainingArguments):
    """TrainingArguments with the paper's defaults (AdamW, lr 2e-5, cosine to 10% of peak)."""

    output_dir: str = field(default="runs/grader")
    learning_rate: float = field(default=2e-5)
    lr_scheduler_type: str = field(default="cosine_with_min_lr")
    lr_scheduler_kwargs: dict | str | None = field(default_factory=lambda: {"min_lr_rate": 0.1})
    num_train_epochs: float = field(default=1.0)
    per_device_train_batch_size: int = field(default=8)
    per_device_eval_batch_size: int = field(default=16)
    eval_strategy: str = field(default="epoch")
    save_strategy: str = field(default="epoch")
    save_total_limit: int | None = field(default=2)
    logging_steps: float = field(default=10)
    metric_for_best_model: str | None = field(default="f1")
    greater_is_better: bool | None = field(default=True)
    load_best_model_at_end: bool = field(default=True)
    report_to: None | str | list[str] = field(default="tensorboard")  # noqa: RUF036 - as in the parent
    train_sampling_strategy: str = field(default="group_by_length")
    remove_unused_columns: bool = field(default=False)
    # Every mode's trainable parameters receive a gradient at every step (frozen ones do not
    # require one), so DDP need not search the graph for unused ones (the parent's default
    # searches, and warns each run that it found none).
    ddp_find_unused_parameters: bool | None = field(
        default=False,
        metadata={"help": "true only for a custom model whose trainable parameters can go unused."},
    )
    seed: int = field(default=42)
    early_stopping_patience: int | None = field(
        default=None, metadata={"help": "Stop after this many evaluations without improvement."}
    )
    head_learning_rate: float | None = field(
        default=None,
        metadata={"help": "Learning rate of the new classification head (default: learning_rate)."},
    )
    cache_states: bool = field(
        default=True,
        metadata={
            "help": "frozen / top_layers: compute the untrained bottom layers once per pair, "
            "kept in the state cache (RELEVANCE_GRADER_STATE_CACHE: a folder, or none for "
            "memory only; default: the model cache's states/ folder)."
        },
    )
    state_dtype: str = choice(
        "auto",
        STATE_DTYPES,
        "Dtype of the cached-state pass (auto: bf16 on a GPU; float32 on a CPU unless "
        "RELEVANCE_GRADER_CPU_DTYPE says otherwise).",
    )
    padding_free: bool = field(
        default=False,
        metadata={
            "help": "Each batch's pairs end to end in one row, without padding, position ids "
            "restarting per pair (transformers' DataCollatorWithFlattening; TRL's padding_free "
            "for the generative modes); the loss reads each pair at its last token."
        },
    )

    def __post_init__(self) -> None:
        if not self.use_cpu and not accelerator_available():
            # The GPU configs (bf16: true) run as they are on a machine without one; the parent
            # would refuse bf16 there unless told use_cpu, and accelerate launch --cpu does not tell it.
            logger.info("no GPU found: training on the CPU (use_cpu)")
            self.use_cpu = True
            self.cpu_by_default = True  # not asked for: a large model is refused (train.train)
        self.bf16, self.fp16 = supported_precision(self.bf16, self.fp16, self.use_cpu)
        refuse_unavailable_liger(self.use_liger_kernel, self.use_cpu)
        self.resume_from_checkpoint = resume_target(self.resume_from_checkpoint)
        super().__post_init__()
        check_choices(self, names=["state_dtype"])


def refuse_unavailable_liger(use_liger_kernel: bool, use_cpu: bool) -> None:
    """``use_liger_kernel`` (transformers' switch, which TRL reads too) refused in one line where
    Liger's kernels cannot run, before any model loads: they are Triton kernels for a GPU."""
    if not use_liger_kernel:
        return
    from models.speed import liger_unavailable

    device = "cpu" if use_cpu else ("cuda" if torch.cuda.is_available() else "mps")
    reason = liger_unavailable(device)
    if reason:
        raise InputError(f"use_liger_kernel: {reason}; leave it false here")


def resume_target(value: str | bool | None) -> str | bool | None:
    """``--resume_from_checkpoint``: true (the last checkpoint in output_dir, as ``Trainer.train``
    reads True), false, or a checkpoint folder that must exist; the parent's ``str`` type would
    read "true" as a folder name."""
    if isinstance(value, bool) or value is None:
        return value or None
    if value.strip().lower() in {"true", "yes", "1"}:
        return True
    if value.strip().lower() in {"false", "no", "0", ""}:
        return None
    if not Path(value).is_dir():
        raise InputError(
            f"resume_from_checkpoint: {value} is not a checkpoint folder (true resumes from the "
            "last checkpoint in output_dir)"
        )
    return value


def accelerator_available() -> bool:
    """A CUDA (or ROCm) GPU, or Apple's MPS, for training."""
    return torch.cuda.is_available() or torch.backends.mps.is_available()


def supported_precision(bf16: bool, fp16: bool, use_cpu: bool = False) -> tuple[bool, bool]:
    """(bf16, fp16) that the GPU can run: a config written for an H100 (``bf16: true``) falls
    back to float16 autocast on a GPU without bf16 (T4, V100), with a warning, instead of failing."""
    if bf16 and not use_cpu and torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
        logger.warning(
            "bf16: %s has no bfloat16; training with float16 autocast instead",
            torch.cuda.get_device_name(),
        )
        return False, True
    return bf16, fp16


@dataclass
class TrainingSettings:
    """The four parsed configs of one training run."""

    model: GraderModelConfig
    data: DataConfig
    loss: LossConfig
    args: GraderTrainingArguments


def check_combination(
    model_config: GraderModelConfig,
    data_config: DataConfig,
    loss_config: LossConfig,
    args: GraderTrainingArguments,
) -> None:
    """Refuse settings that would be silently ignored, before any model loads: the checks that
    hold for every family (each recipe adds its own, ``train.recipes``)."""
    mode = model_config.training_mode
    if model_config.dtype != "float32" and mode.lora and not (args.bf16 or args.fp16):
        # LoRA keeps the base in dtype and trains float32 adapters: the mix needs autocast.
        raise InputError(
            f"dtype={model_config.dtype} with mode={model_config.mode} trains float32 adapters "
            "on a low-precision base, which needs autocast: set bf16: true (or dtype: float32)"
        )
    if mode.requires_cached_states and not args.cache_states:
        raise InputError(
            f"mode={model_config.mode} trains on cached states only (cache_states: true); for a "
            "fully fine-tuned grader use mode full, lora or generative"
        )
    if mode.cached_states and (
        args.fsdp or os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true"
    ):
        raise InputError(
            f"mode={model_config.mode} trains a small top on cached states, which FSDP would "
            "shard for nothing: run it on one GPU or under DDP (train/configs/accelerate/ddp.yaml)"
        )
    for option in ("padding_free", "use_liger_kernel"):
        if getattr(args, option) and mode.cached_states and args.cache_states:
            raise InputError(
                f"{option}: mode={model_config.mode} trains a small top on cached states, "
                "where this option does not apply; use it with mode full, lora or generative "
                "(or cache_states: false)"
            )
    if args.padding_free and model_config.family.name not in PADDING_FREE_FAMILIES:
        raise InputError(
            f"padding_free: the {model_config.family.name} family has no padding-free batches "
            f"(only {', '.join(PADDING_FREE_FAMILIES)})"
        )
    classes = model_config.num_labels
    if loss_config.class_weights is not None and len(loss_config.class_weights) != classes:
        raise InputError(
            f"class_weights: labels={model_config.labels} has {classes} classes, got "
            f"{len(loss_config.class_weights)} weights ({loss_config.class_weights})"
        )
    if model_config.labels == "graded" and (
        loss_config.loss != "cross_entropy" or data_config.soft_targets != "none"
    ):
        raise InputError(
            "labels=graded trains on the teacher's grades with the cross_entropy loss and hard "
            f"targets (got loss={loss_config.loss}, soft_targets={data_config.soft_targets})"
        )
    if data_config.soft_targets != "none" and loss_config.loss != "cross_entropy":
        raise InputError(
            f"soft_targets={data_config.soft_targets}: only the cross_entropy loss uses soft "
            f"targets, not {loss_config.loss}"
        )
