"""The grading benchmark runs every path on the same pairs (tiny model, CPU)."""

from __future__ import annotations

from pathlib import Path

from eval.bench.grading import main as grading_benchmark


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
        ]
    )
    out = capsys.readouterr().out
    assert "8 TREC DL pairs" in out
    rows = {
        line.split(" | ")[0].removeprefix("| "): line.split(" | ")
        for line in out.splitlines()
        if line.startswith("| ours") or line.startswith("| paper")
    }
    assert any(name.startswith("ours: query likelihood (+ 2 query priors)") for name in rows)
    assert any(name.startswith("paper:") for name in rows)
    for cells in rows.values():
        assert float(cells[1].replace(",", "")) > 0  # pairs/s
    paper = next(cells for name, cells in rows.items() if name.startswith("paper"))
    assert paper[-1].removesuffix(" |") == "1.00"  # the ratio column is relative to the paper row
