"""The continuous-evaluation loop of the README, four releases of one search system, each through
the public commands as a CI job runs them: the run straight from the live endpoint (an
OpenSearch-shaped server on 127.0.0.1 over ADI, support/search_engine.py), its evaluation
recorded with ``--track``, and the release gate; then the history page and its screenshot
(docs/history.png).

    python -m benchmarks.history_demo --out runs/history-demo --screenshot docs/history.png

The releases: v1 the first index; v2 titles weighted twice; v3 a broken index (the least
matching documents first: the gate must stop it); v4 the fix, with people's judgments of 12
queries (PPI++ intervals). The labeler is ADI's own qrels, so that the demo needs no model.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import yaml

from data.beir import read_qrels, write_trec_qrels
from support.search_engine import SearchEngine

REPO = Path(__file__).resolve().parents[1]
ADI = Path("data/collections/adi")  # from the checkout, as the commands run there
RELEASES = (
    ("v1", "overlap", "first index: word overlap"),
    ("v2", "titles", "titles weighted twice"),
    ("v3", "broken", "index rebuilt with the wrong analyzer"),
    ("v4", "overlap", "v3 rolled back; 12 queries judged by people"),
)
JUDGED = 12


def command(*args: str) -> int:
    """Run ``relevance-grader ARGS`` (the console script of this checkout)."""
    print("$ relevance-grader", " ".join(args), flush=True)
    return subprocess.run([sys.executable, "-m", "core.commands", *args], cwd=REPO).returncode


def human_sample(path: Path) -> Path:
    """People's judgments of JUDGED queries (here ADI's own, on the 0-3 scale)."""
    qrels = read_qrels(REPO / ADI / "qrels.tsv")
    chosen = sorted(qrels, key=int)[:JUDGED]
    write_trec_qrels(REPO / path, {q: {d: 3 * g for d, g in qrels[q].items()} for q in chosen})
    return path


def release(engine: SearchEngine, out: Path, version: str, note: str) -> int:
    store = str(out / "history.sqlite")
    run = out / "runs" / f"{version}.trec"
    config = out / "engine.yaml"
    (REPO / config).write_text(
        yaml.safe_dump({"preset": "opensearch", "url": f"{engine.url}/adi/_search"})
    )
    queries = str(ADI / "queries.jsonl")
    command("run", "--engine", str(config), "--queries", queries, "--k", "10",
            "--out", str(run), "--run_name", "adi")  # fmt: skip
    human = ["--human", str(human_sample(out / "human.qrels"))] if "judged" in note else []
    command("search", "--run", str(run), "--corpus", str(ADI),
            "--labeler", f"qrels:{ADI / 'qrels.tsv'}", "--out", str(out / "search" / version),
            "--track", store, "--system", "adi", "--version", version, "--note", note, *human)  # fmt: skip
    return command("history", "gate", "--store", store, "--system", "adi",
                   "--candidate", version, "--baseline", "last", "--metric", "ndcg@10",
                   "--margin", "0.02", "--without_baseline", "pass")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/history-demo")
    parser.add_argument("--screenshot", default=None)
    args = parser.parse_args()
    out = Path(args.out).resolve()
    if out.is_relative_to(REPO):  # the page and its links name paths as a user types them
        out = out.relative_to(REPO)
    if (REPO / out / "history.sqlite").exists():
        sys.exit(f"{out}/history.sqlite exists: give a new --out")
    (REPO / out / "runs").mkdir(parents=True)
    engine = SearchEngine(REPO / ADI / "corpus.jsonl").start()
    try:
        codes = {}
        for version, mode, note in RELEASES:
            engine.mode = mode
            codes[version] = release(engine, out, version, note)
    finally:
        engine.stop()
    print("gate exit codes:", codes)
    shot = ["--screenshot", str(Path(args.screenshot).resolve())] if args.screenshot else []
    command("history", "page", "--store", str(out / "history.sqlite"),
            "--out", str(out / "history.html"), *shot)  # fmt: skip


if __name__ == "__main__":
    main()
