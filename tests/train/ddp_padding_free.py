"""Trains a tiny classifier under a distributed launch, padded and then padding-free (run by
test_padding_free.py).

    accelerate launch --config_file train/configs/accelerate/ddp.yaml --num_processes 2 tests/train/ddp_padding_free.py MODEL DATASET OUT

Each process prints a checksum of the weights it ends with, so the test can see whether the
processes' gradients were averaged (the same weights on both) and whether the two runs agree.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import train.train as training
from models.builder import GraderModelConfig
from tests.train.conftest import args_for
from train.train import DataConfig, LossConfig, train


def report_weights(padding_free: bool):
    save = training.save_trained

    def saving(trainer, model, *args, **kwargs):
        checksum = sum(float(p.detach().double().abs().sum()) for p in model.parameters())
        row = {"padding_free": padding_free, "rank": trainer.args.process_index}
        print("weights " + json.dumps({**row, "checksum": checksum}), flush=True)
        return save(trainer, model, *args, **kwargs)

    return saving


def main(model: str, dataset: str, out: str) -> None:
    for padding_free in (False, True):
        training.save_trained = report_weights(padding_free)
        args = args_for(
            Path(out) / f"padding_free-{padding_free}",
            use_cpu=False,
            learning_rate=1e-3,
            max_steps=3,
            per_device_train_batch_size=4,
            eval_strategy="no",
            padding_free=padding_free,
        )
        train(
            GraderModelConfig(model_name_or_path=model, mode="full", max_length=256),
            DataConfig(dataset=dataset),
            LossConfig(),
            args,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
