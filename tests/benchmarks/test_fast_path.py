"""``python -m benchmarks.gpu.fast_path`` end to end on the CPU with a tiny random model: every
part writes its record in order, each option is checked against its plain path, and the options
that need a GPU are skipped with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.gpu.fast_path import PARTS

GPU_ONLY = {part for part in PARTS if "liger" in part}


@pytest.mark.slow
def test_the_fast_path_benchmark_records_every_part_on_a_cpu(
    llama3_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
):
    from benchmarks.gpu.fast_path import main

    out = tmp_path / "fast-path.jsonl"
    main(
        [
            "--model",
            str(llama3_model_dir),
            "--out",
            str(out),
            "--pairs",
            "12",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--compile_backend",
            "eager",
        ]
    )
    records = {r["part"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert list(records) == list(PARTS)
    for part, line in records.items():
        assert line["device"] == "cpu" and line["torch"] and line["command"], line
        if part in GPU_ONLY:
            assert line["status"] == "skipped" and "CUDA GPU" in line["reason"], line
        else:
            assert line["status"] == "ok", line
    compiled = records["grading-compile"]
    assert compiled["max_abs_dp_vs_plain"] < 1e-4
    assert compiled["graphs_compiled"] == compiled["shapes"] >= 1
    assert compiled["x_paper"] > 0
    plain, flat = records["training-plain"], records["training-padding_free"]
    assert flat["padding_free"] and not plain["padding_free"]
    assert flat["pairs"] == plain["pairs"] and flat["real_tokens"] == plain["real_tokens"]
    assert flat["padded_tokens"] == flat["real_tokens"] < plain["padded_tokens"]
    assert records["training-paper"]["padded_tokens"] == plain["pairs"] * 512
    assert plain["fraction_of_gemm"] > 0 and flat["pairs_per_s"] > 0
    table = capsys.readouterr().out
    assert "| grading-compile | ok |" in table and "| training-liger | skipped |" in table


def test_unknown_parts_are_refused_by_name(tmp_path: Path):
    from benchmarks.gpu.fast_path import main
    from core.errors import InputError

    with pytest.raises(InputError, match=r"^parts: unknown \['grading-flash'\]"):
        main(["--model", "unused", "--out", str(tmp_path / "x.jsonl"), "--parts", "grading-flash"])
