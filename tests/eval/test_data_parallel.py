"""Grading across processes: shares of the pairs per process, results gathered in order, one writer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.parallel import balanced_assignment, map_shards
from data.beir import Collection, write_trec_run
from tests.conftest import TWO_PROCESS_LAUNCH

REPO = Path(__file__).resolve().parents[2]


def test_units_are_shared_out_by_weight_the_same_way_in_every_process():
    shares = balanced_assignment([5, 1, 4, 1, 3], 2)
    assert shares == balanced_assignment([5, 1, 4, 1, 3], 2)
    assert sorted(u for share in shares for u in share) == [0, 1, 2, 3, 4]
    loads = [sum([5, 1, 4, 1, 3][u] for u in share) for share in shares]
    assert max(loads) - min(loads) <= 1
    assert balanced_assignment([2, 2], 4) == [[0], [1], [], []]


def test_one_process_computes_every_unit_in_row_order():
    seen = []

    def compute(rows: list[int]) -> list[str]:
        seen.append(rows)
        return [f"row{i}" for i in rows]

    assert map_shards([[3, 1], [0, 2]], [2, 2], compute) == ["row0", "row1", "row2", "row3"]
    assert seen == [[0, 1, 2, 3]]


def _rerank(launcher: list[str], run: Path, corpus: Path, grader: Path, cache: Path, out: Path):
    command = [
        *launcher,
        "-m",
        "measure.labelers.rerank",
        "--run",
        str(run),
        "--corpus",
        str(corpus),
        "--grader",
        str(grader),
        "--k",
        "8",
        "--label_cache",
        str(cache),
        "--out",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _cached_labels(folder: Path) -> list[dict]:
    return [json.loads(line) for path in folder.glob("*.jsonl") for line in path.open()]


@pytest.mark.slow
def test_rerank_on_two_processes_writes_what_one_process_writes(
    tiny_grader_dir: Path, trec_dl_dir: Path, tmp_path: Path
):
    """The pairs are graded in two shares (gloo), gathered in order by every process, and written
    once: the reranked run and every cached probability are identical to one process's (the
    shares are whole batches of one process's plan), each pair is cached once, pairs already in
    the cache are not graded again, and the summary is printed once."""
    collection = Collection.load(trec_dl_dir)
    qids = sorted(collection.qrels)[:6]
    run = {q: {d: float(-i) for i, d in enumerate(sorted(collection.qrels[q])[:8])} for q in qids}
    write_trec_run(tmp_path / "run.trec", run)
    write_trec_run(tmp_path / "half.trec", {q: run[q] for q in qids[:3]})
    one = [sys.executable]
    for cache in ("c1", "c2"):  # each cache starts with half of the pairs graded
        _rerank(
            one,
            tmp_path / "half.trec",
            trec_dl_dir,
            tiny_grader_dir,
            tmp_path / cache,
            tmp_path / f"{cache}-half.trec",
        )
    _rerank(
        one,
        tmp_path / "run.trec",
        trec_dl_dir,
        tiny_grader_dir,
        tmp_path / "c1",
        tmp_path / "one.trec",
    )
    two = _rerank(
        TWO_PROCESS_LAUNCH,
        tmp_path / "run.trec",
        trec_dl_dir,
        tiny_grader_dir,
        tmp_path / "c2",
        tmp_path / "two.trec",
    )
    assert (tmp_path / "two.trec").read_text() == (tmp_path / "one.trec").read_text()
    labels = _cached_labels(tmp_path / "c2")
    assert len(labels) == len({row["key"] for row in labels}) == 48
    assert {row["key"]: row["label"] for row in labels} == {
        row["key"]: row["label"] for row in _cached_labels(tmp_path / "c1")
    }
    assert two.stdout.count("wrote ") == 1
