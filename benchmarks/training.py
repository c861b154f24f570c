"""Training throughput: our path (length-grouped, dynamically padded batches) against the HF
Trainer with every sequence padded to 512, for full fine-tuning and LoRA; ours with the training
options ``--padding_free`` and ``--use_liger_kernel`` (the training config's switches).

    python -m benchmarks.training                                  # CPU: SmolLM2-135M, a few steps
    python -m benchmarks.training --model llama-1b-random --steps 30 --batch_size 16   # GPU: 1B shape
    python -m benchmarks.training --model llama-1b-random --variant ours-full --padding_free true

Each variant runs in its own process (clean peak-memory numbers); the table gives real tokens/s,
padded tokens/s, steps/s, peak memory and, on GPU, MFU from the exact training FLOPs (3x forward).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from benchmarks.common import (
    H100_BF16_FLOPS,
    forward_flops,
    llama_1b_config,
    machine,
    print_table,
    trec_dl_pairs,
)
from core.cli import parse_config, run_main
from core.errors import InputError

VARIANTS = ("ours-full", "padded-full", "ours-lora", "padded-lora")


@dataclass
class BenchTrainingConfig:
    model: str = field(
        default="smollm2-135m", metadata={"help": "smollm2-135m, a path, or llama-1b-random."}
    )
    steps: int = field(default=8)
    batch_size: int = field(default=8)
    max_length: int = field(default=512)
    variant: str = field(default="all", metadata={"help": f"all, or one of {', '.join(VARIANTS)}."})
    gradient_checkpointing: bool = field(default=False)
    torch_compile: bool = field(default=False)
    padding_free: bool = field(
        default=False, metadata={"help": "ours-*: the training option (train.padding_free)."}
    )
    use_liger_kernel: bool = field(
        default=False, metadata={"help": "Liger's kernels, as the training option (GPU only)."}
    )


def run_variant(config: BenchTrainingConfig) -> dict:
    from datasets import Dataset

    from models.builder import GraderModelConfig, build_grader
    from models.families import training_mode
    from models.input_format import GraderInputFormat, format_pairs
    from models.losses import build_loss
    from train.config import GraderTrainingArguments
    from train.grader_data import GraderCollator
    from train.padding_free import PaddingFreeCollator
    from train.trainer import GraderTrainer

    if config.variant not in VARIANTS:
        raise InputError(f"variant: expected one of {VARIANTS}, got {config.variant!r}")
    ours, mode = config.variant.split("-")[0] == "ours", config.variant.split("-")[1]
    if config.padding_free and not ours:
        raise InputError("padding_free: the paper's variants pad every input to max_length")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    bf16 = device == "cuda"
    if config.model == "llama-1b-random":
        from transformers import LlamaForSequenceClassification

        from models.assets import TINY_TOKENIZER
        from models.builder import LLAMA_LINEAR_MODULES
        from models.resolve import load_tokenizer

        tokenizer = load_tokenizer(str(TINY_TOKENIZER))
        torch.manual_seed(0)
        model = LlamaForSequenceClassification(llama_1b_config())
        model.config.pad_token_id = tokenizer.pad_token_id
        if training_mode(mode).lora:
            from peft import LoraConfig, TaskType, get_peft_model

            model = get_peft_model(
                model,
                LoraConfig(
                    task_type=TaskType.SEQ_CLS,
                    r=16,
                    lora_alpha=32,
                    target_modules=list(LLAMA_LINEAR_MODULES),
                    modules_to_save=["score"],
                ),
            )
    else:
        model, tokenizer = build_grader(
            GraderModelConfig(
                model_name_or_path=config.model, mode=mode, max_length=config.max_length
            )
        )
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=config.max_length)
    n = config.steps * config.batch_size
    pairs = trec_dl_pairs(n)
    ids = format_pairs(tokenizer, fmt, [q for q, _ in pairs], [d for _, d in pairs]).input_ids
    dataset = Dataset.from_dict(
        {
            "input_ids": ids,
            "labels": [i % 2 for i in range(n)],
            "soft_targets": [0.0] * n,
            "length": [len(x) for x in ids],
        }
    )
    collator: Any = GraderCollator(
        tokenizer.pad_token_id, pad_to_multiple_of=None if ours else config.max_length
    )
    if config.padding_free:
        collator = PaddingFreeCollator(model.config._attn_implementation)
    args = GraderTrainingArguments(
        output_dir=tempfile.mkdtemp(),
        max_steps=config.steps,
        per_device_train_batch_size=config.batch_size,
        eval_strategy="no",
        save_strategy="no",
        load_best_model_at_end=False,
        report_to="none",
        logging_steps=1000,
        bf16=bf16,
        use_cpu=device == "cpu",
        disable_tqdm=True,
        gradient_checkpointing=config.gradient_checkpointing,
        train_sampling_strategy="group_by_length" if ours else "random",
        torch_compile=config.torch_compile,
        optim="adamw_torch_fused" if device == "cuda" else "adamw_torch",
        padding_free=config.padding_free,
        use_liger_kernel=config.use_liger_kernel,
    )
    trainer = GraderTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        data_collator=collator,
        loss_fn=build_loss("cross_entropy"),
    )
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    trainer.train()
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    real = sum(len(x) for x in ids)
    if config.padding_free:
        padded = real
    elif not ours:
        padded = n * config.max_length
    else:
        padded = sum(
            max(len(ids[i]) for i in batch) * len(batch)
            for batch in _batches(ids, config.batch_size)
        )
    result = {
        "variant": config.variant,
        "padding_free": config.padding_free,
        "use_liger_kernel": config.use_liger_kernel,
        "seconds": seconds,
        "real_tokens_per_s": real / seconds,
        "padded_tokens_per_s": padded / seconds,
        "steps_per_s": config.steps / seconds,
        "peak_memory_gib": (
            torch.cuda.max_memory_allocated()
            if device == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        )
        / 2**30,
        "pairs": n,
        "real_tokens": real,
        "padded_tokens": padded,
        # Forward + backward ~ 3x forward, each sequence with its own attention length.
        "useful_flops": 3 * sum(forward_flops(model.config, len(x), len(x)) for x in ids),
    }
    if device == "cuda":
        # Training ~ 3x forward (forward + backward); padded positions cost compute too.
        flops = 3 * forward_flops(model.config, padded, int(padded / n))
        result["mfu_percent"] = 100 * flops / seconds / H100_BF16_FLOPS
        result["mfu_real_percent"] = 100 * result["useful_flops"] / seconds / H100_BF16_FLOPS
    return result


def _batches(ids: list[list[int]], batch_size: int):
    # An estimate of the length-grouped batches' padding (the sampler groups by length).
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([BenchTrainingConfig], args)
    if config.variant == "all" and config.padding_free:
        raise InputError("padding_free: give --variant ours-full or ours-lora (the paper's pad)")
    if config.variant != "all":
        print("RESULT " + json.dumps(run_variant(config)), flush=True)
        return
    results = []
    base = [a for a in (args if args is not None else sys.argv[1:])]
    for variant in VARIANTS:
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.training", *base, "--variant", variant],
            capture_output=True,
            text=True,
        )
        line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            raise RuntimeError(f"variant {variant} failed:\n{out.stderr[-3000:]}")
        results.append(json.loads(line[7:]))
    header = ["variant", "real tokens/s", "padded tokens/s", "steps/s", "peak GiB"]
    has_mfu = "mfu_percent" in results[0]
    if has_mfu:
        header.append("MFU %")
    rows = []
    for r in results:
        row = [
            r["variant"],
            r["real_tokens_per_s"],
            r["padded_tokens_per_s"],
            r["steps_per_s"],
            r["peak_memory_gib"],
        ]
        if has_mfu:
            row.append(r["mfu_percent"])
        rows.append(row)
    speedups = [
        [
            "full: ours / padded (real tokens/s)",
            results[0]["real_tokens_per_s"] / results[1]["real_tokens_per_s"],
        ],
        [
            "lora: ours / padded (real tokens/s)",
            results[2]["real_tokens_per_s"] / results[3]["real_tokens_per_s"],
        ],
    ]
    print_table(
        f"Training throughput ({config.model}, {config.steps} steps x {config.batch_size})",
        header,
        rows,
        machine(),
    )
    print_table("Speed-ups", ["comparison", "ratio"], speedups)


if __name__ == "__main__":
    run_main(main)
