"""Splits, folds and per-query caps that depend on content, query ids and a seed, never on order.

Every random choice here is a seeded hash of the ids it is about (:func:`seeded_key`), so the same
judgments in any line order give the same dataset, adding a query does not reshuffle the others,
and a seed changes every choice. ``data.build``, the quality study (``eval.jobs.study``) and
``relevance-grader recalibrate`` split with these functions and nothing else.

- :func:`cap_per_query`: the ``cap`` pairs of each query with the lowest seeded key;
- :func:`query_folds`: queries dealt into folds in order of their share of relevant pairs, a seeded
  permutation of the folds per block, so that every fold spans easy and hard queries;
- :func:`held_out_queries`: an exact number of queries, a seeded systematic sample over the same
  order (stratified by the share of relevant pairs).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from core.errors import InputError

# Thresholds and calibrations fitted on fewer validation queries than this are noted as unstable.
MIN_VALIDATION_QUERIES = 5


def seeded_key(seed: int, *parts: str) -> str:
    """A sort key that looks random and depends only on ``seed`` and ``parts``."""
    payload = "\x1f".join([str(seed), *parts])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def canonical_order(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows sorted by query id, then document id: the order every split starts from."""
    return sorted(rows, key=lambda row: (row["qid"], row["doc_id"]))


def cap_per_query(rows: Sequence[dict[str, Any]], cap: int, seed: int) -> list[dict[str, Any]]:
    """At most ``cap`` pairs per query: those with the lowest seeded key of (query, document)."""
    by_query: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_query.setdefault(row["qid"], []).append(row)
    kept = []
    for qid, pairs in by_query.items():
        pairs = sorted(pairs, key=lambda row: seeded_key(seed, qid, row["doc_id"]))
        kept += pairs[:cap]
    return canonical_order(kept)


def relevant_share(rows: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Each query's share of relevant pairs (the stratum of the query splits)."""
    labels: dict[str, list[int]] = {}
    for row in rows:
        labels.setdefault(row["qid"], []).append(int(row["label"]))
    return {qid: sum(values) / len(values) for qid, values in labels.items()}


def _stratified_order(shares: Mapping[str, float], seed: int) -> list[str]:
    return sorted(shares, key=lambda qid: (shares[qid], seeded_key(seed, qid)))


def query_folds(shares: Mapping[str, float], folds: int, seed: int) -> list[list[str]]:
    """Queries in ``folds`` groups, each spanning the range of relevant shares.

    Queries are ordered by their share of relevant pairs (ties by seeded key) and dealt in blocks
    of ``folds``, each block to a seeded permutation of the folds; every group is sorted.
    """
    if folds < 2:
        raise InputError(f"folds: expected >= 2, got {folds}")
    if len(shares) < folds:
        raise InputError(f"folds: {folds} folds need at least {folds} queries, got {len(shares)}")
    order = _stratified_order(shares, seed)
    groups: list[list[str]] = [[] for _ in range(folds)]
    for block in range(math.ceil(len(order) / folds)):
        targets = list(range(folds))
        random.Random(seeded_key(seed, "block", str(block))).shuffle(targets)
        for qid, target in zip(order[block * folds : (block + 1) * folds], targets, strict=False):
            groups[target].append(qid)
    return [sorted(group) for group in groups]


def held_out_queries(shares: Mapping[str, float], count: int, seed: int) -> list[str]:
    """``count`` queries drawn systematically over the relevant-share order from a seeded start."""
    if not 0 < count < len(shares):
        raise InputError(
            f"cannot hold out {count} of {len(shares)} queries: keep at least one on each side"
        )
    order = _stratified_order(shares, seed)
    step = len(order) / count
    start = random.Random(seeded_key(seed, "start")).random()
    return sorted(order[math.floor((i + start) * step)] for i in range(count))


def queries_for_share(total: int, size: float) -> int:
    """How many of ``total`` queries ``size`` means (a fraction, or a number when >= 1): at least
    one, and at least one left over."""
    count = int(size) if size >= 1 else round(total * size)
    return min(max(1, count), total - 1)
