"""Trains a tiny grader in each mode given, under a distributed launch (run by test_ddp.py).

    accelerate launch --config_file train/configs/accelerate/ddp.yaml --num_processes 2 tests/train/ddp_modes.py MODEL DATASET OUT MODE[=MODEL]...

Each mode trains a few steps with DDP (gloo on the CPU); rank 0 prints one JSON line per mode with
its training loss, so the test can see every mode finish on both ranks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from models.builder import GraderModelConfig
from tests.train.conftest import args_for
from train.train import DataConfig, LossConfig, train


def main(model: str, dataset: str, out: str, modes: list[str]) -> None:
    for spec in modes:
        mode, _, own_model = spec.partition("=")  # a family with its own kind of base model
        # use_cpu left false, as the GPU configs have it: the machine's lack of a GPU decides.
        args = args_for(
            Path(out) / mode,
            use_cpu=False,
            learning_rate=1e-3,
            max_steps=3,
            per_device_train_batch_size=4,
            eval_strategy="no",
        )
        metrics = train(
            GraderModelConfig(
                model_name_or_path=own_model or model, mode=mode, max_length=256, lora_r=4
            ),
            DataConfig(dataset=dataset),
            LossConfig(),
            args,
        )
        if args.process_index == 0:
            print(
                "finished "
                + json.dumps({"mode": mode, "world_size": args.world_size, **metrics}, default=str),
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
