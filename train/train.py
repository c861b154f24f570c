"""Fine-tune the grader, in any mode, through one ``Trainer``.

    # CPU, the embedded student (small variants of the paper's runs)
    relevance-grader train --config train/configs/smollm2-135m-lora.yaml --dataset runs/dataset
    relevance-grader train --config train/configs/smollm2-135m-B-frozen.yaml --dataset runs/dataset --num_train_epochs 3
    # one GPU (bf16) or several (DDP/FSDP configs in train/configs/accelerate/)
    accelerate launch --config_file accelerate_config.yaml -m train \\
        --config train/configs/llama-3.2-1b-C-full.yaml --dataset runs/dataset

Every ``--key value`` overrides the YAML. The dataset is a folder written by ``relevance-grader
build`` (``train.jsonl``, ``validation.jsonl``). The mode's scoring family (``models.families``)
picks the recipe that sets up the Trainer (``train.recipes``: TRL's ``SFTTrainer`` for the
answer-token family), so resume, logging, checkpoints and early stopping work alike. Evaluation runs
on the validation split each epoch with F1 choosing the best checkpoint, which is loaded at the end
and saved to ``output_dir`` with its tokenizer and ``grader_config.json`` (input format, mode, loss,
data). Cached-state modes compute the untrained bottom of the network once per pair and train the
top on those states (``--cache_states false`` runs the whole network at every step instead)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from transformers import set_seed

from core.cli import parse_config, run_main
from core.errors import InputError
from models.builder import GraderModelConfig, build_grader, count_parameters, grader_info
from train.config import (
    DataConfig,
    GraderTrainingArguments,
    LossConfig,
    TrainingSettings,
    check_combination,
    supported_precision,
)
from train.grader_data import (
    label_threshold,
    load_split,
    manifest_summary,
    missing_grades,
    prediction_probabilities,
)
from train.recipes import recipe_for
from train.recipes.base import TrainingJob
from train.trainer import describe_checkpoints, fit, save_trained

__all__ = [
    "DataConfig",
    "GraderTrainingArguments",
    "LossConfig",
    "main",
    "supported_precision",
    "train",
]


# Above this many trainable parameters a CPU takes days (SmolLM2-135M in full: ~1 pair/s on two
# cores): no GPU and no --use_cpu is a mistake to say, not a run to start.
MAX_CPU_TRAINABLE = 200_000_000


def refuse_large_cpu_training(trainable: int, args: GraderTrainingArguments) -> None:
    if getattr(args, "cpu_by_default", False) and trainable > MAX_CPU_TRAINABLE:
        raise InputError(
            f"use_cpu: no GPU found, and training {trainable / 1e6:.0f}M parameters on the CPU "
            "would take days; run on a GPU, or give --use_cpu true to train on the CPU anyway"
        )


def train(
    model_config: GraderModelConfig,
    data_config: DataConfig,
    loss_config: LossConfig,
    args: GraderTrainingArguments,
) -> dict[str, Any]:
    settings = TrainingSettings(model_config, data_config, loss_config, args)
    recipe = recipe_for(model_config.family)
    check_combination(model_config, data_config, loss_config, args)
    recipe.check(settings)
    train_raw = load_split(data_config.dataset, "train")
    if train_raw is None:
        raise FileNotFoundError(
            f"{data_config.dataset}/train.jsonl not found (run `relevance-grader build` first)"
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
                raise InputError(
                    f"{data_config.dataset}/{split}.jsonl line {missing[0] + 1}: field `grade` is "
                    f"missing ({len(missing)} rows); labels=graded needs the teacher's 0-3 grade "
                    "on every pair (label with a grading prompt, or train with labels: binary)"
                )
    set_seed(args.seed)
    model, tokenizer = build_grader(model_config)
    fmt = model_config.family.input_format(
        tokenizer,
        model_config.max_length,
        model_config.prompt_format,
        model_config.model_name_or_path,
    )
    parameters = count_parameters(model)
    info = grader_info(
        model_config,
        fmt.to_dict(),
        relevant_from_grade=label_threshold(data_config.dataset),
        loss=asdict(loss_config),
        data={
            "dataset": data_config.dataset,
            "train_pairs": len(train_raw),
            "validation_pairs": len(eval_raw) if eval_raw is not None else 0,
            "train_positive_rate": float(np.mean(train_raw["label"])),
            "soft_targets": data_config.soft_targets,
            "manifest": manifest_summary(data_config.dataset),
        },
        parameters=parameters,
    )
    refuse_large_cpu_training(parameters["trainable"], args)
    if eval_raw is None:
        args.eval_strategy = "no"
        args.load_best_model_at_end = False
    start = time.perf_counter()
    job = TrainingJob(
        settings, model, tokenizer, fmt, train_raw, eval_raw, relevant_from=info.relevant_from
    )
    trainer = recipe.trainer(job)
    describe_checkpoints(trainer, model, info)
    evaluate = recipe.evaluates_in_trainer and eval_raw is not None
    metrics, predictions = fit(trainer, args, evaluate=evaluate)
    recipe.finish(trainer, job, info, metrics)
    metrics["train_seconds"] = round(time.perf_counter() - start, 2)
    save_trained(trainer, model, tokenizer, Path(args.output_dir), info, metrics)
    if (
        predictions is not None
        and model_config.training_mode.cached_states
        and trainer.is_world_process_zero()
    ):
        # Trained on cached states, evaluated exactly as the saved grader reads these pairs
        # (same forward pass, state dtype): stored, so its evaluation does not score them again.
        from models.cached_states import resolve_state_dtype
        from models.grader import save_validation_scores

        save_validation_scores(
            args.output_dir,
            list(zip(eval_raw["qid"], eval_raw["doc_id"], strict=True)),
            prediction_probabilities(predictions, info.relevant_from),
            resolve_state_dtype(args.state_dtype, args.device),
        )
    return metrics


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
