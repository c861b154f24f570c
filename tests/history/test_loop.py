"""The README's loop end to end, on SQLite and on a real PostgreSQL server: runs straight from a
live search endpoint (an OpenSearch-shaped server on 127.0.0.1 over ADI), each version evaluated
with ``eval.search --track``, the gate failing a real regression and passing an unchanged
version, and the history page holding both versions' trend and comparison."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from data.engine.command import main as run_engine
from eval.history.gate import main as gate
from eval.history.page import main as page
from eval.history.store import open_store
from eval.search.command import main as search
from support.search_engine import SearchEngine
from tests.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
ADI = REPO / "data" / "collections" / "adi"
WORDS = re.compile(r"[a-z]+")


@pytest.fixture
def engine() -> Iterator[SearchEngine]:
    server = SearchEngine(ADI / "corpus.jsonl").start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    return request.getfixturevalue("postgres_url")


def release(
    engine: SearchEngine, tmp_path: Path, target: str, version: str, qrels: Path = ADI / "qrels.tsv"
) -> None:
    """One version's CI job: the run from the endpoint, evaluated and recorded."""
    config = tmp_path / "engine.yaml"
    config.write_text(yaml.safe_dump({"preset": "opensearch", "url": f"{engine.url}/adi/_search"}))
    run = tmp_path / f"{version}.trec"
    run_engine(
        [
            "--engine",
            str(config),
            "--queries",
            str(ADI / "queries.jsonl"),
            "--k",
            "10",
            "--out",
            str(run),
            "--run_name",
            "adi",
        ]
    )
    search(
        [
            "--run", str(run), "--corpus", str(ADI), "--labeler", f"qrels:{qrels}",
            "--out", str(tmp_path / "search" / version), "--track", target,
            "--system", "adi", "--version", version,
        ]
    )  # fmt: skip


def gate_exit(target: str, candidate: str, baseline: str, capsys) -> tuple[int, str]:
    capsys.readouterr()
    flags = ["--store", target, "--system", "adi", "--candidate", candidate]
    try:
        gate([*flags, "--baseline", baseline, "--metric", "ndcg@10", "--margin", "0.02"])
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, capsys.readouterr().out.strip()


def test_the_gate_fails_a_real_regression_and_passes_an_unchanged_release(
    engine: SearchEngine, target: str, tmp_path: Path, capsys
):
    release(engine, tmp_path, target, "v1")
    engine.mode = "broken"
    release(engine, tmp_path, target, "v2")
    engine.mode = "overlap"
    release(engine, tmp_path, target, "v3")

    code, line = gate_exit(target, "v2", "last", capsys)
    assert code == 1 and line.startswith("FAIL ndcg@10: adi@v2 − adi@v1") and "\n" not in line
    code, line = gate_exit(target, "v3", "v1", capsys)
    assert code == 0 and line.startswith("PASS ndcg@10: adi@v3 − adi@v1 = 0 ")

    out = tmp_path / "history.html"
    page(["--store", target, "--out", str(out)])
    html = out.read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="history-data"[^>]*>(.*?)</script>', html, re.S).group(1))
    assert [p["version"] for p in data["page"]["points"]] == ["v1", "v2", "v3"]
    pair = next(p for p in data["page"]["pairs"] if {p["a"], p["b"]} == {1, 2})
    assert (
        pair["metrics"]["ndcg@10"]["high"] < 0
        if pair["a"] == 2
        else pair["metrics"]["ndcg@10"]["low"] > 0
    )
    store = open_store(target)
    assert store.hit_labels(2)  # the labels the moved queries show
    store.close()


def test_evaluations_by_two_labelers_are_refused_unless_relabelled_by_one(
    engine: SearchEngine, tmp_path: Path, capsys
):
    from core.errors import InputError
    from eval.history.compare import CompareConfig, compare_evaluations

    target = str(tmp_path / "history.sqlite")
    # Another assessor's qrels: the same judgments but one query's left out.
    other = tmp_path / "other-qrels.tsv"
    lines = (ADI / "qrels.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    other.write_text("".join(line for line in lines if not line.startswith("1\t")))
    release(engine, tmp_path, target, "v1")
    engine.mode = "broken"
    release(engine, tmp_path, target, "v2", qrels=other)
    store = open_store(target)
    with pytest.raises(InputError, match="differ in labeler"):
        compare_evaluations(store, CompareConfig(a="adi@v2", b="adi@v1"))
    config = CompareConfig(
        a="adi@v2", b="adi@v1", relabel=f"qrels:{ADI / 'qrels.tsv'}", corpus=str(ADI)
    )
    result = compare_evaluations(store, config)
    store.close()
    assert result.relabelled_by == config.relabel
    ndcg = result.metrics["ndcg@10"]
    assert ndcg.high < 0 and ndcg.queries == 35  # the broken index, under one labeler
    assert result.moved and all(
        hit.label is not None for q in result.moved for hit in (*q.entered, *q.left)
    )
