"""Labelling throughput on short RAG chunks: the grader and the local LLM judge, each with and
without computing a query's shared prefix once, on the same pairs in one run.

    python -m benchmarks.labelers                      # 12 SQuAD questions x 8 chunks of 300 chars
    python -m benchmarks.labelers --queries 24 --grader runs/main/export

A query's chunks share the grader's (or judge's) prompt and the query; with 300-character chunks
that shared part is about half of every input, which is what the shared-prefix pass saves.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import machine, print_table
from benchmarks.downstream.experiment import chunk_corpus
from core.cli import bounded, parse_config, run_main
from data.beir import Collection
from measure.labelers import GraderLabeler, Hit, JudgeLabeler


@dataclass
class LabelerBenchConfig:
    collection: str = "data/collections/squad-dev"
    queries: int = bounded(12, 1, help="Queries; each labels its chunks as one request.")
    hits_per_query: int = bounded(8, 1)
    chunk_chars: int = bounded(300, 1)
    grader: str = field(default="runs/main/export", metadata={"help": "Exported grader."})
    judge: str = field(default="eval/configs/judge-smollm2.yaml")


def requests(config: LabelerBenchConfig) -> list[tuple[str, str, list[Hit]]]:
    collection = Collection.load(config.collection)
    chunks, _ = chunk_corpus(collection.corpus, config.chunk_chars, 20)
    ids = sorted(chunks)
    qids = sorted(collection.queries)[: config.queries]
    out = []
    for n, qid in enumerate(qids):
        picked = ids[n * config.hits_per_query : (n + 1) * config.hits_per_query]
        hits = [Hit(c, chunks[c].text, chunks[c].title or None) for c in picked]
        out.append((qid, collection.queries[qid], hits))
    return out


def timed(label, batch) -> tuple[float, list]:
    label(batch[:1])  # warm-up: thread pools, first-call allocations
    start = time.perf_counter()
    labels = label(batch)
    return time.perf_counter() - start, labels


def plain_and_shared(name: str, labeler, use_shared_prefix, batch) -> list[list]:
    """Table rows for one labeler: pairs/s without and with the shared prefix, and the largest
    difference between the two paths' probabilities."""
    pairs = sum(len(hits) for _, _, hits in batch)
    rows, scores = [], []
    for shared in (False, True):
        use_shared_prefix(shared)
        seconds, labels = timed(labeler.label_many, batch)
        scores.append([lab.score for labs in labels for lab in labs])
        rows.append([name, "shared prefix" if shared else "plain", pairs / seconds, ""])
    gap = max(abs(a - b) for a, b in zip(*scores, strict=True))
    rows[-1][-1] = f"max ΔP {gap:.1e}"
    return rows


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([LabelerBenchConfig], args)
    batch = requests(config)
    pairs = sum(len(hits) for _, _, hits in batch)
    rows = []
    if Path(config.grader, "config.json").exists():
        grader = GraderLabeler(config.grader)
        rows += plain_and_shared(
            "grader", grader, lambda on: setattr(grader.grader, "prefix_cache", on), batch
        )
    judge = JudgeLabeler(config.judge)
    rows += plain_and_shared(
        f"judge ({judge.config.model}, {judge.prompt.id})",
        judge,
        lambda on: setattr(judge.config, "prefix_cache", on),
        batch,
    )
    print_table(
        f"Labelling throughput, {pairs} pairs ({config.queries} queries x {config.hits_per_query} "
        f"chunks of {config.chunk_chars} chars)",
        ["labeler", "path", "pairs/s", "scores"],
        rows,
        machine(),
    )


if __name__ == "__main__":
    run_main(main)
