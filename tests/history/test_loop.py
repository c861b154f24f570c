"""The README's loop end to end, on SQLite and on a real PostgreSQL server: runs straight from a
live search endpoint (an OpenSearch-shaped server on 127.0.0.1 over ADI), each version evaluated
with ``eval.search --track``, the gate failing a real regression and passing an unchanged
version, and the history page holding both versions' trend and comparison."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from data.beir import read_corpus
from data.engine.command import main as run_engine
from eval.history.gate import main as gate
from eval.history.page import main as page
from eval.history.store import open_store
from eval.search.command import main as search
from tests.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
ADI = REPO / "data" / "collections" / "adi"
WORDS = re.compile(r"[a-z]+")


class Engine(ThreadingHTTPServer):
    """Word-overlap retrieval over ADI in OpenSearch's ``_search`` shape. ``broken`` answers each
    query with its least matching documents first (a broken index): the regression a release
    must not ship."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        corpus = read_corpus(ADI / "corpus.jsonl")
        self.docs = {
            d: set(WORDS.findall(f"{c.title or ''} {c.text}".lower())) for d, c in corpus.items()
        }
        self.broken = False

    def search(self, text: str, size: int) -> list[dict[str, Any]]:
        words = set(WORDS.findall(text.lower()))
        scored = sorted(
            (
                (len(words & terms) / (1 + len(terms)) ** 0.3, doc)
                for doc, terms in self.docs.items()
            ),
            reverse=True,
        )
        kept = scored[::-1] if self.broken else scored
        return [{"_id": doc, "_score": score, "_source": {}} for score, doc in kept[:size]]


class Handler(BaseHTTPRequestHandler):
    server: Engine

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        hits = self.server.search(body["query"]["match"]["text"], int(body["size"]))
        data = json.dumps({"hits": {"hits": hits}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def engine() -> Iterator[Engine]:
    server = Engine()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    return request.getfixturevalue("postgres_url")


def release(
    engine: Engine, tmp_path: Path, target: str, version: str, qrels: Path = ADI / "qrels.tsv"
) -> None:
    """One version's CI job: the run from the endpoint, evaluated and recorded."""
    config = tmp_path / "engine.yaml"
    port = engine.server_address[1]
    config.write_text(
        yaml.safe_dump({"preset": "opensearch", "url": f"http://127.0.0.1:{port}/adi/_search"})
    )
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
    engine: Engine, target: str, tmp_path: Path, capsys
):
    release(engine, tmp_path, target, "v1")
    engine.broken = True
    release(engine, tmp_path, target, "v2")
    engine.broken = False
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
    engine: Engine, tmp_path: Path, capsys
):
    from core.errors import InputError
    from eval.history.compare import CompareConfig, compare_evaluations

    target = str(tmp_path / "history.sqlite")
    # Another assessor's qrels: the same judgments but one query's left out.
    other = tmp_path / "other-qrels.tsv"
    lines = (ADI / "qrels.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    other.write_text("".join(line for line in lines if not line.startswith("1\t")))
    release(engine, tmp_path, target, "v1")
    engine.broken = True
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
