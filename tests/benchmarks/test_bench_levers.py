"""The ``levers`` step of benchmarks.gpu.gpu_steps end to end on the CPU with tiny shapes: every part
writes its record (grading paths checked against ours, training variants, the skipped ones)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PARTS = [
    "gemm",
    "grading-ours-16k",
    "grading-ours-64k-batch256",
    "grading-packed-512x64-sdpa",
    "grading-packed-512x128-sdpa",
    "grading-packed-512x64-flex_attention",
    "grading-paper-padded512-batch40",
    "grading-summary",
    "training-ours-full-b16",
    "training-packed-full-r16",
    "training-packed-full-r32",
    "training-packed-full-r16-compiled",
    "training-packed-full-r16-liger",
]


@pytest.mark.slow
def test_levers_dry_run_writes_every_part(tmp_path: Path):
    from benchmarks.gpu.gpu_steps import main
    from models.random_model import RandomModelConfig, write_random_model

    model = write_random_model(
        RandomModelConfig(out=str(tmp_path / "model"), shape="tiny", dtype="float32")
    )
    out = tmp_path / "levers.jsonl"
    main(
        [
            "levers",
            "--json_out",
            str(tmp_path / "levers.json"),
            "--out",
            str(out),
            "--model",
            str(model),
            "--pairs",
            "12",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--skip_compile",
        ]
    )
    records = {r["part"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert list(records) == PARTS
    for part in PARTS[:-2]:
        assert records[part]["status"] == "ok", records[part]
        assert records[part]["device"] == "cpu" and records[part]["torch"]
    for part in PARTS[2:6]:
        assert records[part]["max_abs_dp_vs_ours"] < 1e-4
    assert records["training-packed-full-r16"]["padded_tokens"] == 2 * 16 * 512
    assert records["training-packed-full-r16-compiled"]["status"] == "skipped"
