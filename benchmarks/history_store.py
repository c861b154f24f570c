"""The evaluation history store at scale: fill a store with many evaluations of many queries, then
time what its readers and writers do.

    python -m benchmarks.history_store --store /tmp/history.sqlite --evaluations 1000 --queries 10000
    python -m benchmarks.history_store --store throwaway-postgres --evaluations 1000 --queries 10000

The bulk evaluations carry ``--fill_metrics`` metrics each (1 by default: 1,000 x 10,000 is then
10 M per-query rows), recorded one at a time through the store's own ``record``; then timed:
recording one more evaluation with the full standard set (6 metrics, 100 of its queries
human-judged), the trend of one metric over all of the system's evaluations (``estimates``), and
reading two evaluations' per-query values for a comparison. ``throwaway-postgres`` starts a
PostgreSQL server of its own (support.postgres), fsync on, and removes it at the end.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from core.cli import bounded, parse_config
from eval.history.compare import compare_stored
from eval.history.record import t_estimate
from eval.history.store import EvaluationRecord, HistoryStore, open_store

METRICS = ("ndcg@10", "map", "mrr", "precision@10", "recall@10", "hit@10")
SYSTEM = "dense"


@dataclass
class BenchConfig:
    store: str = field(
        default="/tmp/history-bench.sqlite",
        metadata={
            "help": "A SQLite file or a database URL; throwaway-postgres: a server of its own."
        },
    )
    evaluations: int = bounded(1000, 1, help="Evaluations filled in before the timings.")
    queries: int = bounded(10000, 2, help="Queries per evaluation.")
    fill_metrics: int = bounded(1, 1, len(METRICS), help="Metrics per filled evaluation.")
    seed: int = field(default=0)


def make_record(
    version: str,
    qids: list[str],
    metrics: Sequence[str],
    rng: np.random.Generator,
    judged: int = 0,
    hits: int = 1,
) -> EvaluationRecord:
    values = {m: dict(zip(qids, rng.random(len(qids)).tolist(), strict=True)) for m in metrics}
    judged_qids = qids[:judged]
    human = {
        m: dict(zip(judged_qids, rng.random(len(judged_qids)).tolist(), strict=True))
        for m in metrics
    }
    return EvaluationRecord(
        system=SYSTEM,
        version=version,
        k=10,
        labeler="grader:runs/export",
        labeler_fingerprint="0" * 64,
        corpus_fingerprint="1" * 64,
        queries_fingerprint="2" * 64,
        run_fingerprint=f"{version:0>64}"[-64:],
        run_name=SYSTEM,
        search_metrics="{}",
        run_text="".join(
            f"{q} Q0 d{rng.integers(10**6)}-{rank} {rank} {1 / rank} {SYSTEM}\n"
            for q in qids
            for rank in range(1, hits + 1)
        ),
        labeler_values=values,
        human_values=human if judged else None,
        estimates=[t_estimate(m, list(v.values()), 0.05) for m, v in values.items()],
        hit_labels=None if hits == 1 else {q: {f"d{rng.integers(10**6)}": 1.0} for q in qids},
    )


def timed(action) -> tuple[float, object]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def fill(store: HistoryStore, config: BenchConfig, qids: list[str]) -> float:
    rng = np.random.default_rng(config.seed)
    metrics = METRICS[: config.fill_metrics]
    seconds = 0.0
    for i in range(config.evaluations):
        record = make_record(f"v{i:05d}", qids, metrics, rng)
        seconds += timed(lambda r=record: store.record(r))[0]
        if (i + 1) % 100 == 0:
            print(f"  {i + 1} evaluations recorded ({seconds:.0f} s in record)", flush=True)
    return seconds


def size_mib(store: HistoryStore) -> float:
    if store.engine.dialect.name == "sqlite":
        path = store.engine.url.database or ""
        return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p)) / 2**20
    with store.engine.connect() as conn:
        return conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar() / 2**20


def bench(target: str, config: BenchConfig) -> None:
    store = open_store(target)
    qids = [f"q{i}" for i in range(config.queries)]
    rows = config.evaluations * config.queries * config.fill_metrics
    print(f"filling {config.evaluations} evaluations x {config.queries} queries x "
          f"{config.fill_metrics} metric(s) = {rows:,} per-query rows", flush=True)  # fmt: skip
    fill_seconds = fill(store, config, qids)
    record = make_record("new", qids, METRICS, np.random.default_rng(1), judged=100, hits=10)
    record_s, new_id = timed(lambda: store.record(record))
    trend_s, trend = timed(lambda: store.estimates(SYSTEM, "ndcg@10"))
    first = store.list_evaluations(SYSTEM)[0].id
    compare_s, pair = timed(
        lambda: (store.query_values(first, "ndcg@10"), store.query_values(new_id, "ndcg@10"))
    )
    assert len(trend) == config.evaluations + 1 and all(len(v) == config.queries for v in pair)
    # The whole of `history compare` but its printing: every metric paired, the moved queries
    # with the hits that entered or left (two stored runs of 10 hits a query read back).
    newer = store.record(
        make_record("newer", qids, METRICS, np.random.default_rng(2), judged=100, hits=10)
    )
    a, b = store.get(f"id:{newer}"), store.get(f"id:{new_id}")
    full_s, full = timed(lambda: compare_stored(store, a, b, list(METRICS), 0.05, moved=5))
    print(f"\nbackend {store.engine.dialect.name}; store {size_mib(store):,.0f} MiB")
    print("| step | seconds | target |\n|---|---|---|")
    print(f"| fill: {rows:,} rows ({rows / fill_seconds:,.0f} rows/s) | {fill_seconds:.1f} | – |")
    print(
        f"| record one evaluation ({len(METRICS) * config.queries:,} rows) | {record_s:.3f} | ≤ 2 |"
    )
    print(f"| trend over {len(trend)} evaluations (estimates) | {trend_s:.3f} | ≤ 1 |")
    print(f"| two evaluations' per-query values | {compare_s:.3f} | ≤ 2 |")
    print(
        f"| history compare: {len(full.metrics)} metrics, {len(full.moved)} moved queries "
        f"(runs of {config.queries:,} x 10 hits) | {full_s:.3f} | ≤ 2 |"
    )
    store.close()


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([BenchConfig], args)
    if config.store == "throwaway-postgres":
        from support.postgres import throwaway_postgres

        server = throwaway_postgres(fsync=True)
    else:
        server = nullcontext(config.store)
    with server as target:
        bench(target, config)


if __name__ == "__main__":
    from core.cli import run_main

    run_main(main)
