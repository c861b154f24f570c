"""The answer-token recipe: the generative objective (paper config A and its LoRA-SFT runs) with
TRL's SFTTrainer.

The model reads the grader's prompt and learns to answer "yes" or "no" (loss on the answer
only); it is scored by P(yes) at the answer position, renormalised over yes/no
(models.scoring.answer_token_probabilities) - the same read-out as zero-shot baselines.
Training and saving go through train.train like every other recipe.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, Trainer, TrainingArguments

from core.errors import InputError
from core.metrics import classification_metrics
from models.grader_config import GraderDescription
from models.input_format import GraderInputFormat, format_pairs
from models.scoring import answer_token_probabilities
from train.config import TrainingSettings
from train.recipes.base import TrainingJob, TrainingRecipe


def prompt_completion(
    dataset: Dataset, tokenizer: PreTrainedTokenizerBase, fmt: GraderInputFormat
) -> Dataset:
    """Token ids of prompt + answer (+ EOS) with the answer as the only completion.

    Tokenized here, through :func:`format_pairs`, so that training sees exactly the tokens that
    P(yes) scoring sees: left to TRL, a chat prompt that already begins with the BOS token
    (Llama 3) would get a second one.
    """
    answer_ids = [
        tokenizer(fmt.answer_prefix + word, add_special_tokens=False)["input_ids"]
        for word in fmt.label_words
    ]
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []

    def convert(batch: dict[str, list]) -> dict[str, list]:
        titles = batch.get("title") or [None] * len(batch["query"])
        prompts = format_pairs(tokenizer, fmt, batch["query"], batch["text"], titles).input_ids
        answers = [answer_ids[int(label)] + eos for label in batch["label"]]
        return {
            "input_ids": [p + a for p, a in zip(prompts, answers, strict=True)],
            "completion_mask": [
                [0] * len(p) + [1] * len(a) for p, a in zip(prompts, answers, strict=True)
            ],
        }

    return dataset.map(
        convert, batched=True, remove_columns=dataset.column_names, desc="tokenizing"
    )


def p_yes(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    fmt: GraderInputFormat,
    dataset: Dataset,
    batch_size: int = 16,
) -> np.ndarray:
    titles = dataset["title"] if "title" in dataset.column_names else None
    formatted = format_pairs(tokenizer, fmt, dataset["query"], dataset["text"], titles)
    probabilities, _ = answer_token_probabilities(
        model,
        formatted.input_ids,
        fmt.label_token_ids(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        batch_size=batch_size,
    )
    return probabilities[:, 1]


def p_yes_metrics(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    fmt: GraderInputFormat,
    eval_raw: Dataset,
    args: TrainingArguments,
) -> dict[str, float]:
    """Classification metrics of P(yes) on the validation split (``eval_`` keys, as Trainer's)."""
    probabilities = p_yes(model.eval(), tokenizer, fmt, eval_raw, args.per_device_eval_batch_size)
    labels = np.asarray(eval_raw["label"], dtype=int)
    return {f"eval_{k}": v for k, v in classification_metrics(probabilities, labels).items()}


def generative_trainer(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    fmt: GraderInputFormat,
    train_raw: Dataset,
    eval_raw: Dataset | None,
    args: TrainingArguments,
) -> Trainer:
    from trl import SFTConfig, SFTTrainer

    shared: dict[str, Any] = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(TrainingArguments) if f.init
    }
    shared.update(
        metric_for_best_model="eval_loss" if eval_raw is not None else None,
        greater_is_better=False,
        load_best_model_at_end=eval_raw is not None and args.load_best_model_at_end,
        eval_strategy=args.eval_strategy if eval_raw is not None else "no",
        remove_unused_columns=True,
        train_sampling_strategy="random",
    )
    # padding_free (TRL's own switch): the batch's prompts end to end in one row. TRL leaves the
    # length to the data then; format_pairs has already cut every prompt to fit max_length.
    padding_free = getattr(args, "padding_free", False)
    max_length = None if padding_free else fmt.max_length + 8
    sft_args = SFTConfig(
        **shared,
        completion_only_loss=True,
        max_length=max_length,
        padding_free=padding_free,
    )
    return SFTTrainer(
        model=model,
        args=sft_args,
        train_dataset=prompt_completion(train_raw, tokenizer, fmt),
        eval_dataset=prompt_completion(eval_raw, tokenizer, fmt) if eval_raw is not None else None,
        processing_class=tokenizer,
    )


class AnswerTokenRecipe(TrainingRecipe):
    family = "answer_token"
    evaluates_in_trainer = False  # SFT's evaluation is a token loss; P(yes) metrics come after

    def check(self, settings: TrainingSettings) -> None:
        if not settings.loss.is_default or settings.data.soft_targets != "none":
            raise InputError(
                f"mode={settings.model.mode} trains with TRL's answer-token loss: loss, "
                "class_weights, label_smoothing, margin and soft_targets do not apply (leave "
                "them at their defaults)"
            )

    def trainer(self, job: TrainingJob) -> Trainer:
        return generative_trainer(
            job.model, job.tokenizer, job.fmt, job.train_raw, job.eval_raw, job.settings.args
        )

    def finish(
        self, trainer: Trainer, job: TrainingJob, info: GraderDescription, metrics: dict
    ) -> None:
        if job.eval_raw is not None:
            args = job.settings.args
            metrics.update(p_yes_metrics(trainer.model, job.tokenizer, job.fmt, job.eval_raw, args))
