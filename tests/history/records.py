"""Evaluations with known per-query values, recorded straight into a store (no eval.search run):
the history commands' and the history page's tests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import numpy as np

from eval.history.record import t_estimate
from eval.history.store import EvaluationRecord, HistoryStore

START = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)


def run_text(tops: Mapping[str, list[str]], tag: str) -> str:
    return "".join(
        f"{qid} Q0 {doc} {rank} {10 - rank}.0 {tag}\n"
        for qid, docs in tops.items()
        for rank, doc in enumerate(docs, start=1)
    )


def record(
    store: HistoryStore,
    version: str,
    ndcg: Mapping[str, float],
    day: int,
    system: str = "dense",
    labeler: str = "a",
    tops: Mapping[str, list[str]] | None = None,
    labels: Mapping[str, Mapping[str, float]] | None = None,
    report_path: str | None = None,
) -> int:
    tops = tops or {qid: ["d1", "d2"] for qid in ndcg}
    values = {"ndcg@10": dict(ndcg)}
    return store.record(
        EvaluationRecord(
            system=system,
            version=version,
            k=10,
            labeler=f"qrels:{labeler}.txt",
            labeler_fingerprint=labeler * 64,
            corpus_fingerprint="b" * 64,
            queries_fingerprint="c" * 64 if len(ndcg) == 40 else f"{len(ndcg):064d}",
            run_fingerprint=f"{day:064d}",
            run_name=system,
            search_metrics='{"labeler": "qrels:a.txt", "k": 10, "mean": {}}',
            run_text=run_text(tops, system),
            labeler_values=values,
            estimates=[t_estimate("ndcg@10", list(ndcg.values()), 0.05)],
            hit_labels=labels,
            report_path=report_path,
            created_at=START + dt.timedelta(days=day),
        )
    )


def values(seed: int, shift: float = 0.0, n: int = 40, prefix: str = "q") -> dict[str, float]:
    rng = np.random.default_rng(seed)
    return {f"{prefix}{i}": float(np.clip(v - shift, 0, 1)) for i, v in enumerate(rng.random(n))}
