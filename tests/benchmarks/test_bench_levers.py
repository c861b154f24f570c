"""The ``levers`` step of benchmarks.gpu.gpu_steps end to end on the CPU with tiny shapes: every part
writes its record (grading paths checked against ours, training variants, the skipped ones)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

# In the order the step runs them (by value: the budget cuts the end).
PARTS = [
    "gemm",
    "grading-ours-16k",
    "grading-paper-padded512-batch40",
    "grading-ours-16k-buckets",
    "grading-ours-16k-compiled-buckets",
    "grading-ours-16k-compiled-buckets-cudagraphs",
    "grading-ours-16k-liger",
    "training-ours-full-b16",
    "training-packed-full-r16",
    "training-ours-full-b16-liger",
    "profile-training",
    "grading-ours-64k-batch256",
    "grading-packed-512x64-sdpa",
    "grading-packed-512x128-sdpa",
    "grading-packed-512x64-flex_attention",
    "training-packed-full-r32",
    "training-packed-full-r16-compiled",
    "training-packed-full-r16-liger",
    "grading-summary",
]
# Skipped on the CPU: torch.compile under --skip_compile, CUDA graphs, Liger (needs Triton).
SKIPPED = {
    "grading-ours-16k-compiled-buckets": "--skip_compile",
    "grading-ours-16k-compiled-buckets-cudagraphs": "GPU",
    "grading-ours-16k-liger": "liger_kernel",
    "training-ours-full-b16-liger": "liger_kernel",
    "training-packed-full-r16-compiled": "--skip_compile",
    "training-packed-full-r16-liger": "liger_kernel",
}
# Checked against ours: every grading path that reads P(relevant) but ours and the paper's.
AGAINST_OURS = [
    "grading-ours-16k-buckets",
    "grading-ours-64k-batch256",
    "grading-packed-512x64-sdpa",
    "grading-packed-512x128-sdpa",
    "grading-packed-512x64-flex_attention",
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
    for part in PARTS:
        line = records[part]
        assert line["device"] == "cpu" and line["torch"], line
        if part in SKIPPED:
            assert line["status"] == "skipped" and SKIPPED[part] in line["reason"], line
        else:
            assert line["status"] == "ok", line
    for part in AGAINST_OURS:
        assert records[part]["max_abs_dp_vs_ours"] < 1e-4, records[part]
    assert records["grading-ours-16k-buckets"]["x_paper"] > 0
    buckets = records["grading-ours-16k-buckets"]
    assert buckets["shapes"] >= 1 and buckets["padded_tokens"] >= buckets["pairs"]
    assert records["training-packed-full-r16"]["padded_tokens"] == 2 * 16 * 512
    profile = records["profile-training"]
    for variant in ("ours-full-b16", "packed-full-r16"):
        top = profile[variant]["top_ops"]
        assert len(top) == 10 and profile[variant]["profiled_steps"] == 3
        assert all(op["self_ms_per_step"] >= 0 and 0 <= op["share_percent"] <= 100 for op in top)
        assert top[0]["self_ms_per_step"] >= top[-1]["self_ms_per_step"]
    summary = records["grading-summary"]["paths"]
    assert summary["ours-16k-buckets"]["x_paper"] > 0


def test_bucket_batches_static_shapes():
    """Every batch of a width has that width's row count; every input lands in one batch whose
    width holds it, rounded up to the bucket (at most max_length)."""
    from benchmarks.gpu.gpu_steps import bucket_batches

    lengths = [5, 64, 65, 130, 500, 512, 70, 71, 72, 73, 74, 1]
    batches = bucket_batches(lengths, 512, 256, 64)
    seen = sorted(i for _, _, batch in batches for i in batch)
    assert seen == list(range(len(lengths)))
    for width, rows, batch in batches:
        assert rows == max(1, 256 // width) and 0 < len(batch) <= rows
        assert all(width - 64 < lengths[i] <= width for i in batch)
    assert [b[:2] for b in batches][:2] == [(512, 1), (512, 1)]
    assert {b[:2] for b in batches} == {(512, 1), (192, 1), (128, 2), (64, 4)}


@pytest.mark.slow
def test_bucketed_probabilities_match_ours_compiled_or_not(tmp_path: Path):
    """The bucketed path (pad rows, read-out at each real last token) gives ours' probabilities,
    eager and through the levers' compiled decoder, traced by dynamo with its eager backend (no
    inductor build on a CPU), whole or layer by layer: one graph per shape, each compiled once
    (in the first pass, one batch of each shape), none in the second; undone after."""
    import numpy as np
    import torch
    import torch._dynamo

    from benchmarks.gpu.gpu_steps import (
        bucket_batches,
        bucketed_classifier_probabilities,
        compiled_body,
        warm_shapes,
    )
    from models.random_model import RandomModelConfig, write_random_model
    from models.resolve import load_model
    from models.scoring import classifier_probabilities

    path = write_random_model(
        RandomModelConfig(out=str(tmp_path / "model"), shape="tiny", dtype="float32")
    )
    model, _ = load_model(str(path), task="classification", dtype=torch.float32)
    rng = np.random.default_rng(0)
    ids = [rng.integers(5, 100, size=n).tolist() for n in [3, 40, 64, 65, 90, 127, 128, 129, 7]]
    ours = classifier_probabilities(model.eval(), ids)
    batches = bucket_batches([len(x) for x in ids], 192, 256, 64)
    shapes = len({b[:2] for b in batches})
    assert shapes == 3 and len(batches) > shapes
    eager = bucketed_classifier_probabilities(model, ids, batches)
    assert np.abs(eager - ours).max() < 1e-4
    counters = torch._dynamo.utils.counters["stats"]
    for scope in ("decoder", "layers"):
        torch._dynamo.reset()
        body, undo = compiled_body(model, scope, None, backend="eager")
        graphs = counters["unique_graphs"]
        warm = warm_shapes(
            batches,
            lambda some, body=body: bucketed_classifier_probabilities(model, ids, some, body),
            60,
            sync=False,
        )
        assert warm["shapes"] == shapes == len(warm["warmup_s_per_shape"])
        assert counters["unique_graphs"] - graphs == shapes
        compiled = bucketed_classifier_probabilities(model, ids, batches, body)
        assert np.abs(compiled - ours).max() < 1e-4
        assert counters["unique_graphs"] - graphs == shapes, scope
        undo()
    assert all(layer._compiled_call_impl is None for layer in model.model.layers)
    torch._dynamo.reset()
    with pytest.raises(TimeoutError, match="compiled 1 of 3 shapes"):
        warm_shapes(batches, lambda some: time.sleep(0.01), 0.001, sync=False)


def test_top_ops_count_each_kernel_once():
    """On a GPU an operator's self device time is the kernels it launched, and each kernel is an
    event of its own too: shares are of the kernels' time, not of both."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from benchmarks.gpu.gpu_steps import top_kernels, top_ops

    def event(key, device_type, device_us, cpu_us=0.0):
        return SimpleNamespace(
            key=key,
            device_type=device_type,
            count=3,
            self_device_time_total=device_us,
            self_cpu_time_total=cpu_us,
        )

    events = [
        event("aten::mm", DeviceType.CPU, 600.0, 30.0),
        event("aten::mul", DeviceType.CPU, 300.0, 60.0),
        event("aten::empty", DeviceType.CPU, 0.0, 10.0),
        event("sm90_gemm", DeviceType.CUDA, 600.0),
        event("elementwise_kernel", DeviceType.CUDA, 300.0),
    ]
    ops = top_ops(events, by_device=True, steps=3)
    assert [op["op"] for op in ops] == ["aten::mm", "aten::mul", "aten::empty"]
    assert [op["share_percent"] for op in ops] == [66.7, 33.3, 0.0]
    assert ops[0]["self_ms_per_step"] == 0.2 and ops[0]["calls_per_step"] == 1
    cpu = top_ops(events, by_device=False, steps=3, n=2)
    assert [op["op"] for op in cpu] == ["aten::mul", "aten::mm"] and cpu[0]["share_percent"] == 60
    kernels = top_kernels(events, steps=3)
    assert [k["kernel"] for k in kernels] == ["sm90_gemm", "elementwise_kernel"]
    assert kernels[0]["share_percent"] == 66.7
