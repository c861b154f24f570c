"""Fine-tune the grader: full, frozen backbone or LoRA with a classification head, or generative.

    # CPU, the embedded student (small variants of the paper's runs)
    python -m train --config train/configs/smollm2-135m-lora.yaml --dataset runs/dataset
    python -m train --config train/configs/smollm2-135m-B-frozen.yaml --dataset runs/dataset --num_train_epochs 3
    # one GPU (bf16) or several (DDP/FSDP configs in train/configs/accelerate/)
    accelerate launch --config_file accelerate_config.yaml -m train \\
        --config train/configs/llama-3.2-1b-C-full.yaml --dataset runs/dataset

Every ``--key value`` overrides the YAML. The dataset is a folder written by ``python -m data.build``
(``train.jsonl``, ``validation.jsonl``). Evaluation runs on the validation split each epoch with F1
choosing the best checkpoint, which is loaded at the end and saved to ``output_dir`` with its
tokenizer and ``grader_config.json`` (input format name/version/template, mode, loss, data).
Every mode trains inside the same ``Trainer`` (TRL's ``SFTTrainer`` for the generative ones), so
resume, logging, checkpoints and early stopping work alike. ``frozen`` and ``top_layers`` compute
the untrained bottom of the network once per pair and train the top on those cached states
(``--cache_states false`` runs the whole network at every step instead).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from transformers import (
    EarlyStoppingCallback,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)

from data.cli import check_choices, choice, parse_config, run_main
from data.records import DEFAULT_RELEVANCE_THRESHOLD
from models.builder import (
    CACHED_STATE_MODES,
    QUERY_LIKELIHOOD,
    GraderModelConfig,
    build_grader,
    count_parameters,
    grader_info,
    save_grader_config,
)
from models.input_format import GraderInputFormat, use_chat_template
from models.losses import LOSSES, build_loss
from models.query_likelihood import MARKER as QUERY_MARKER
from models.query_likelihood import query_likelihood_format
from train.grader_data import (
    SOFT_TARGETS,
    GraderCollator,
    compute_metrics,
    load_split,
    missing_grades,
    prediction_probabilities,
    tokenize,
)

logger = logging.getLogger(__name__)
STATE_DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass
class DataConfig:
    dataset: str = field(
        default="runs/dataset", metadata={"help": "Folder from `python -m data.build`."}
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
            raise ValueError(f"class_weights: expected positive weights, got {self.class_weights}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing: expected 0 <= x < 1, got {self.label_smoothing}")
        if self.margin <= 0:
            raise ValueError(f"margin: expected > 0, got {self.margin}")

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
            "help": "frozen / top_layers: compute the untrained bottom layers once per pair."
        },
    )
    state_dtype: str = choice(
        "auto",
        STATE_DTYPES,
        "Dtype of the cached-state pass (auto: bf16 on GPU and on CPUs with bf16 instructions).",
    )
    state_cache: str | None = field(
        default=None,
        metadata={
            "help": "Folder that keeps cached states across runs (folds, resumes); none: memory only."
        },
    )

    def __post_init__(self) -> None:
        self.bf16, self.fp16 = supported_precision(self.bf16, self.fp16, self.use_cpu)
        super().__post_init__()
        check_choices(self, names=["state_dtype"])


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


def check_combination(
    model_config: GraderModelConfig, data_config: DataConfig, loss_config: LossConfig
) -> None:
    """Refuse settings that would be silently ignored, before any model loads."""
    if model_config.generative and (
        not loss_config.is_default or data_config.soft_targets != "none"
    ):
        raise ValueError(
            f"mode={model_config.mode} trains with TRL's answer-token loss: loss, class_weights, "
            "label_smoothing, margin and soft_targets do not apply (leave them at their defaults)"
        )
    classes = model_config.num_labels
    if loss_config.class_weights is not None and len(loss_config.class_weights) != classes:
        raise ValueError(
            f"class_weights: labels={model_config.labels} has {classes} classes, got "
            f"{len(loss_config.class_weights)} weights ({loss_config.class_weights})"
        )
    if model_config.labels == "graded" and (
        loss_config.loss != "cross_entropy" or data_config.soft_targets != "none"
    ):
        raise ValueError(
            "labels=graded trains on the teacher's grades with the cross_entropy loss and hard "
            f"targets (got loss={loss_config.loss}, soft_targets={data_config.soft_targets})"
        )
    if model_config.mode == QUERY_LIKELIHOOD and (
        loss_config.loss != "cross_entropy" or data_config.soft_targets != "none"
    ):
        raise ValueError(
            "mode=query_likelihood fits sigmoid(scale * PMI + bias) with the cross_entropy loss "
            f"on hard labels (got loss={loss_config.loss}, soft_targets={data_config.soft_targets})"
        )
    if data_config.soft_targets != "none" and loss_config.loss != "cross_entropy":
        raise ValueError(
            f"soft_targets={data_config.soft_targets}: only the cross_entropy loss uses soft "
            f"targets, not {loss_config.loss}"
        )


class GraderTrainer(Trainer):
    """Trainer with a swappable loss (models.losses) on the classification logits."""

    def __init__(self, *args: Any, loss_fn: torch.nn.Module, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loss_fn = loss_fn

    def create_optimizer(self, model: torch.nn.Module | None = None) -> torch.optim.Optimizer:
        """The Trainer's optimizer, with the freshly initialised head at its own learning rate."""
        head_lr = getattr(self.args, "head_learning_rate", None)
        if head_lr is None or self.optimizer is not None:
            return super().create_optimizer(model)
        model = model or self.model
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        is_head = ["score" in n.split(".") for n, _ in named]  # plain, cached-state and peft names
        decay = set(self.get_decay_parameter_names(model))
        groups = []
        for head in (False, True):
            for with_decay in (True, False):
                params = [
                    p
                    for (n, p), h in zip(named, is_head, strict=True)
                    if h == head and (n in decay) == with_decay
                ]
                if params:
                    groups.append(
                        {
                            "params": params,
                            "weight_decay": self.args.weight_decay if with_decay else 0.0,
                            **({"lr": head_lr} if head else {}),
                        }
                    )
        optimizer_cls, optimizer_kwargs = self.get_optimizer_cls_and_kwargs(self.args, model)
        self.optimizer = optimizer_cls(groups, **optimizer_kwargs)
        return self.optimizer

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        inputs = dict(inputs)
        labels = inputs.pop("labels")
        soft_targets = inputs.pop("soft_targets", None)
        outputs = model(**inputs)
        loss = self.loss_fn(outputs.logits, labels, soft_targets)
        return (loss, outputs) if return_outputs else loss


class GraderConfigCallback(TrainerCallback):
    """Writes grader_config.json into every checkpoint, so each one is self-describing."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info

    def on_save(self, args, state, control, **kwargs):
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if checkpoint.exists():
            save_grader_config(checkpoint, self.info)


def train(
    model_config: GraderModelConfig,
    data_config: DataConfig,
    loss_config: LossConfig,
    args: GraderTrainingArguments,
) -> dict[str, Any]:
    check_combination(model_config, data_config, loss_config)
    if (
        model_config.dtype != "float32"
        and "lora" in model_config.mode
        and not (args.bf16 or args.fp16)
    ):
        # LoRA keeps the base in dtype and trains float32 adapters: the mix needs autocast.
        raise ValueError(
            f"dtype={model_config.dtype} with mode={model_config.mode} trains float32 adapters "
            "on a low-precision base, which needs autocast: set bf16: true (or dtype: float32)"
        )
    if model_config.mode == QUERY_LIKELIHOOD and not args.cache_states:
        raise ValueError(
            "mode=query_likelihood trains on cached states only (cache_states: true); for a "
            "fully fine-tuned grader use mode full, lora or generative"
        )
    if model_config.mode in (*CACHED_STATE_MODES, QUERY_LIKELIHOOD) and (
        args.fsdp or os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true"
    ):
        raise ValueError(
            f"mode={model_config.mode} trains a small top on cached states, which FSDP would "
            "shard for nothing: run it on one GPU or under DDP (train/configs/accelerate/ddp.yaml)"
        )
    train_raw = load_split(data_config.dataset, "train")
    if train_raw is None:
        raise FileNotFoundError(
            f"{data_config.dataset}/train.jsonl not found (run `python -m data.build` first)"
        )
    eval_raw = load_split(data_config.dataset, "validation")
    if data_config.max_train_samples:
        train_raw = train_raw.select(range(min(data_config.max_train_samples, len(train_raw))))
    if eval_raw is not None and data_config.max_eval_samples:
        eval_raw = eval_raw.select(range(min(data_config.max_eval_samples, len(eval_raw))))
    if model_config.labels == "graded":
        for split, rows in (("train", train_raw), ("validation", eval_raw)):
            missing = missing_grades(rows) if rows is not None else []
            if missing:
                raise ValueError(
                    f"{data_config.dataset}/{split}.jsonl line {missing[0] + 1}: field `grade` is "
                    f"missing ({len(missing)} rows); labels=graded needs the teacher's 0-3 grade "
                    "on every pair (label with a grading prompt, or train with labels: binary)"
                )
    set_seed(args.seed)
    model, tokenizer = build_grader(model_config)
    if model_config.mode == QUERY_LIKELIHOOD:
        fmt = query_likelihood_format(model_config.max_length)
    else:
        fmt = GraderInputFormat.from_tokenizer(
            tokenizer,
            max_length=model_config.max_length,
            use_chat_template=use_chat_template(
                model_config.prompt_format, model_config.model_name_or_path
            ),
        )
    relevant_from_grade = _label_threshold(data_config.dataset)
    info = grader_info(
        model_config,
        fmt.to_dict(),
        relevant_from_grade=relevant_from_grade,
        loss=asdict(loss_config),
        data={
            "dataset": data_config.dataset,
            "train_pairs": len(train_raw),
            "validation_pairs": len(eval_raw) if eval_raw is not None else 0,
            "train_positive_rate": float(np.mean(train_raw["label"])),
            "soft_targets": data_config.soft_targets,
            "manifest": _manifest_summary(data_config.dataset),
        },
        parameters=count_parameters(model),
    )
    if eval_raw is None:
        args.eval_strategy = "no"
        args.load_best_model_at_end = False
    start = time.perf_counter()
    if model_config.generative:
        from train.generative import generative_trainer, p_yes_metrics

        trainer = generative_trainer(model, tokenizer, fmt, train_raw, eval_raw, args)
        _describe_checkpoints(trainer, model, info)
        metrics, predictions = fit(trainer, args, evaluate=False)
        if eval_raw is not None:
            metrics.update(p_yes_metrics(trainer.model, tokenizer, fmt, eval_raw, args))
    elif model_config.mode == QUERY_LIKELIHOOD:
        trainer = query_likelihood_trainer(
            model, tokenizer, fmt, model_config, loss_config, args, train_raw, eval_raw
        )
        metrics, predictions = fit(trainer, args, evaluate=eval_raw is not None)
        scale, bias = trainer.model.scale_and_bias
        info["query_likelihood"] = {"scale": scale, "bias": bias, "marker": QUERY_MARKER}
    else:
        trainer = classifier_trainer(
            model,
            tokenizer,
            fmt,
            model_config,
            data_config,
            loss_config,
            args,
            train_raw,
            eval_raw,
            relevant_from=info["relevant_from"],
        )
        _describe_checkpoints(trainer, model, info)
        metrics, predictions = fit(trainer, args, evaluate=eval_raw is not None)
    metrics["train_seconds"] = round(time.perf_counter() - start, 2)
    save_trained(trainer, model, tokenizer, Path(args.output_dir), info, metrics)
    cached = model_config.mode in (*CACHED_STATE_MODES, QUERY_LIKELIHOOD)
    if predictions is not None and cached and trainer.is_world_process_zero():
        # Trained on cached states, evaluated exactly as the saved grader reads these pairs
        # (same forward pass, state dtype): stored, so its evaluation does not score them again.
        from models.grader import save_validation_scores
        from train.cached_states import resolve_state_dtype

        save_validation_scores(
            args.output_dir,
            list(zip(eval_raw["qid"], eval_raw["doc_id"], strict=True)),
            prediction_probabilities(predictions, info["relevant_from"]),
            resolve_state_dtype(args.state_dtype, args.device),
        )
    return metrics


def _describe_checkpoints(trainer: Trainer, model: PreTrainedModel, info: dict[str, Any]) -> None:
    # Checkpoints of the whole model get their grader_config.json; cached-state checkpoints hold
    # only the trained top (they resume training but are not graders on their own).
    if trainer.model is model:
        trainer.add_callback(GraderConfigCallback(info))


def classifier_trainer(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    fmt: GraderInputFormat,
    model_config: GraderModelConfig,
    data_config: DataConfig,
    loss_config: LossConfig,
    args: GraderTrainingArguments,
    train_raw: Dataset,
    eval_raw: Dataset | None,
    relevant_from: int = 1,
) -> Trainer:
    """The Trainer for a classifier grader: on token ids, or on cached states of the bottom layers.
    A graded head (``relevant_from`` > 1) trains on the grades and is evaluated on P(relevant)."""
    loss_fn = build_loss(
        loss_config.loss,
        class_weights=loss_config.class_weights,
        label_smoothing=loss_config.label_smoothing,
        soft_targets=data_config.soft_targets != "none",
        margin=loss_config.margin,
    )
    target = "grade" if model_config.labels == "graded" else "label"
    train_ds = tokenize(train_raw, tokenizer, fmt, data_config.soft_targets, target=target)
    eval_ds = (
        tokenize(eval_raw, tokenizer, fmt, data_config.soft_targets, target=target)
        if eval_raw is not None
        else None
    )
    trained: torch.nn.Module = model
    collator: Any = GraderCollator(tokenizer.pad_token_id)
    if model_config.mode in CACHED_STATE_MODES and args.cache_states:
        trained, train_ds, eval_ds = _cached_state_datasets(
            model, model_config, args, train_ds, eval_ds
        )
        from train.cached_states import collate_states

        collator = collate_states
    return grader_trainer(
        trained,
        args,
        train_ds,
        eval_ds,
        collator,
        tokenizer,
        loss_fn,
        partial(compute_metrics, relevant_from=relevant_from),
    )


def grader_trainer(
    model: torch.nn.Module,
    args: GraderTrainingArguments,
    train_ds: Any,
    eval_ds: Any,
    collator: Any,
    tokenizer: PreTrainedTokenizerBase,
    loss_fn: torch.nn.Module,
    metrics: Any = compute_metrics,
) -> Trainer:
    """The one ``GraderTrainer`` of the classifier and query-likelihood modes (early stopping
    when asked)."""
    callbacks: list[TrainerCallback] = []
    if args.early_stopping_patience:
        callbacks.append(
            EarlyStoppingCallback(early_stopping_patience=args.early_stopping_patience)
        )
    return GraderTrainer(
        model=model,
        args=args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        data_collator=collator,
        processing_class=tokenizer,
        compute_metrics=metrics,
        callbacks=callbacks,
        loss_fn=loss_fn,
    )


def query_likelihood_trainer(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    fmt: GraderInputFormat,
    model_config: GraderModelConfig,
    loss_config: LossConfig,
    args: GraderTrainingArguments,
    train_raw: Dataset,
    eval_raw: Dataset | None,
) -> Trainer:
    """The Trainer for a query-likelihood grader: its top (or only its scale and bias) on cached
    states of every pair and query prior (``train.query_likelihood``)."""
    from models.backbone import split_index
    from train.cached_states import resolve_state_dtype
    from train.query_likelihood import (
        QueryLikelihoodTop,
        collate_query_likelihood,
        initial_scale_and_bias,
        query_likelihood_datasets,
    )

    first = split_index(model, model_config.trained_layers)
    model.to(args.device).eval()
    splits = [
        tokenize(raw, tokenizer, fmt) if raw is not None else None for raw in (train_raw, eval_raw)
    ]
    train_states, eval_states = query_likelihood_datasets(
        model,
        tokenizer,
        fmt,
        first,
        splits,
        batch_size=args.per_device_eval_batch_size,
        dtype=resolve_state_dtype(args.state_dtype, args.device),
        cache=_state_cache(args, model_config),
    )
    assert train_states is not None
    top = QueryLikelihoodTop(model, first).eval()
    top.set_scale_and_bias(*initial_scale_and_bias(top, train_states, loss_config.class_weights))
    args.train_sampling_strategy = "random"  # the cached states fix the lengths
    return grader_trainer(
        top.train(),
        args,
        train_states,
        eval_states,
        collate_query_likelihood,
        tokenizer,
        build_loss("cross_entropy", class_weights=loss_config.class_weights),
    )


def _state_cache(args: GraderTrainingArguments, model_config: GraderModelConfig) -> Any:
    """The on-disk state cache of ``--state_cache`` (None: states live in memory only)."""
    from train.cached_states import StateCache, state_cache_key

    if not args.state_cache:
        return None
    return StateCache(args.state_cache, state_cache_key(model_config.model_name_or_path))


def _cached_state_datasets(
    model: PreTrainedModel,
    model_config: GraderModelConfig,
    args: GraderTrainingArguments,
    train_ds: Dataset,
    eval_ds: Dataset | None,
) -> tuple[torch.nn.Module, Any, Any]:
    from models.backbone import split_index
    from train.cached_states import (
        CachedStates,
        GraderTop,
        compute_states,
        resolve_state_dtype,
    )

    first = split_index(model, model_config.trained_layers)
    device = args.device
    dtype = resolve_state_dtype(args.state_dtype, device)
    model.to(device).eval()
    cache = _state_cache(args, model_config)

    def states(ds: Dataset) -> CachedStates:
        hidden = compute_states(
            model,
            ds["input_ids"],
            first,
            batch_size=args.per_device_eval_batch_size,
            dtype=dtype,
            cache=cache,
        )
        return CachedStates(hidden, ds["labels"], ds["soft_targets"])

    train_states = states(train_ds)
    eval_states = states(eval_ds) if eval_ds is not None else None
    # The cached states fix the sequence lengths; the Trainer's length grouping reads input_ids.
    args.train_sampling_strategy = "random"
    return GraderTop(model, first).train(), train_states, eval_states


def fit(trainer: Trainer, args: TrainingArguments, evaluate: bool) -> tuple[dict[str, Any], Any]:
    """Train (resuming when asked), then evaluate the model kept at the end: its metrics and its
    predictions on the validation pairs (None without evaluation)."""
    result = trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    metrics: dict[str, Any] = dict(result.metrics)
    predictions = None
    if evaluate:
        output = trainer.predict(trainer.eval_dataset, metric_key_prefix="eval")
        trainer.log(output.metrics)
        metrics.update(output.metrics)
        predictions = output.predictions
    metrics["history"] = trainer.state.log_history
    return metrics, predictions


def save_trained(
    trainer: Trainer,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    output_dir: Path,
    info: dict[str, Any],
    metrics: dict[str, Any],
) -> None:
    """The one save path of every mode: weights (or adapter), tokenizer, grader_config.json and
    train_results.json, written by the main process only."""
    if trainer.model is model or getattr(trainer.model, "base_model", None) is model:
        trainer.save_model(str(output_dir))  # gathers sharded (FSDP) weights where needed
    elif trainer.is_world_process_zero():
        model.save_pretrained(output_dir)  # cached-state modes trained `model` in place
    if not trainer.is_world_process_zero():
        return
    tokenizer.save_pretrained(output_dir)
    info["metrics"] = {k: v for k, v in metrics.items() if k != "history"}
    save_grader_config(output_dir, info)
    (output_dir / "train_results.json").write_text(json.dumps(metrics, indent=2) + "\n")


def _label_threshold(dataset_dir: str) -> int:
    """The grade from which the dataset's pairs are relevant (data.build's label_threshold)."""
    path = Path(dataset_dir) / "manifest.json"
    if not path.exists():
        return DEFAULT_RELEVANCE_THRESHOLD
    config = json.loads(path.read_text()).get("config") or {}
    return int(config.get("label_threshold", DEFAULT_RELEVANCE_THRESHOLD))


def _manifest_summary(dataset_dir: str) -> dict[str, Any]:
    path = Path(dataset_dir) / "manifest.json"
    if not path.exists():
        return {}
    manifest = json.loads(path.read_text())
    return {
        "counts": manifest.get("counts"),
        "sources": manifest.get("sources"),
        "seed": manifest.get("seed"),
    }


def main(args: Sequence[str] | None = None) -> None:
    model_config, data_config, loss_config, training_args = parse_config(
        [GraderModelConfig, DataConfig, LossConfig, GraderTrainingArguments], args
    )
    metrics = train(model_config, data_config, loss_config, training_args)
    shown = {
        k: round(v, 4)
        for k, v in metrics.items()
        if isinstance(v, float) and k.startswith(("eval_", "train_"))
    }
    print(json.dumps(shown, indent=2))
    print(f"saved the grader to {training_args.output_dir}")


if __name__ == "__main__":
    run_main(main)
