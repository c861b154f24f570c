from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def test_default_accelerate_config_is_one_gpu_bf16():
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(REPO / "accelerate_config.yaml"))
    assert config.mixed_precision == "bf16"
    assert config.num_processes == 1
    assert str(config.distributed_type) in {"NO", "DistributedType.NO"}
    assert yaml.safe_load((REPO / "accelerate_config.yaml").read_text())["use_cpu"] is False
