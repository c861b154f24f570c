"""The history store benchmark at a tiny scale: it fills, times and prints its table."""

from __future__ import annotations

from pathlib import Path

from benchmarks.history_store import main
from eval.history.store import open_store


def test_the_benchmark_fills_the_store_and_prints_its_timings(tmp_path: Path, capsys):
    store = str(tmp_path / "bench.sqlite")
    main(["--store", store, "--evaluations", "3", "--queries", "20", "--fill_metrics", "2"])
    out = capsys.readouterr().out
    assert "| fill: 120 rows" in out and "| trend over 4 evaluations (estimates) |" in out
    opened = open_store(store)
    assert len(opened.list_evaluations("dense")) == 5  # and the two that history compare pairs
    assert "| history compare: 6 metrics, 5 moved queries" in out
    assert len(opened.query_values(opened.get("dense@new").id, "hit@10")) == 20
    opened.close()
