"""The grading benchmark runs every path on the same pairs (tiny model, CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.grading import main as grading_benchmark


@pytest.mark.slow
def test_every_grading_path_including_query_likelihood_is_timed_on_the_same_pairs(
    tiny_model_dir: Path, capsys
):
    grading_benchmark(
        [
            "--model",
            str(tiny_model_dir),
            "--pairs",
            "8",
            "--hits_per_query",
            "4",
            "--latency_repeats",
            "1",
            "--skip_pipeline",
            "true",
            "--dtype",
            "float32,bfloat16",
            # bf16 is emulated on CPUs without bf16 instructions: a 2048 GEMM takes minutes there.
            "--peak_size",
            "512",
        ]
    )
    out = capsys.readouterr().out
    assert "8 TREC DL pairs" in out
    rows = [
        line.removeprefix("| ").split(" | ")
        for line in out.splitlines()
        if line.startswith("| ours") or line.startswith("| paper")
    ]
    by_dtype = {
        dtype: [cells[0] for cells in rows if cells[1] == dtype]
        for dtype in ("float32", "bfloat16")
    }
    # Ours and the query-likelihood path in each dtype; the paper's method once, in the baseline.
    assert [name.split(" (")[0] for name in by_dtype["float32"]] == [
        "ours: length-sorted dynamic batches",
        "ours + shared prefix",
        "paper: padded to 512, batch 40, argmax",
        "ours: query likelihood",
    ]
    assert by_dtype["bfloat16"][0].startswith(  # a | inside a cell is escaped in Markdown
        "ours: length-sorted dynamic batches (max \\|ΔP\\| vs float32"
    )
    assert len(by_dtype["bfloat16"]) == 3
    assert any("(+ 2 query priors)" in name for name in by_dtype["bfloat16"])
    for cells in rows:
        assert float(cells[2].replace(",", "")) > 0  # pairs/s
        assert 0 < float(cells[5].replace(",", "")) < 100  # % of the measured GEMM peak
    paper = next(cells for cells in rows if cells[0].startswith("paper"))
    assert paper[-1].removesuffix(" |") == "1.00"  # the ratio column is relative to the paper row
    assert "GEMM peak" in out
