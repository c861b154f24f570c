"""How far judging has got, in interval widths: as queries are finished, the human-only interval
of the first run's NDCG@k over the assessor's fully judged queries, and about how many judged
queries an interval of the target width needs. Only people's grades enter: nothing of the
labeler reaches the page before the session ends (a PPI++ interval, narrower where the labeler
tracks people, is eval.search's, afterwards)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypedDict

from judgments.ppi import classical_mean, queries_for_width

TARGET_WIDTH = 0.1  # the width the page sizes the rest of the work for


def ndcg_at_k(
    rankings: Mapping[str, Sequence[str]], grades: Mapping[str, Mapping[str, int]], k: int
) -> dict[str, float]:
    """NDCG@k (2^g - 1 gain, as eval.search under human judgments) of each graded query's
    ranking, with ranx; every graded document counts towards the ideal ranking."""
    import warnings

    import numpy as np
    from ranx import Qrels, Run, evaluate

    ranked = {q: {d: float(k - i) for i, d in enumerate(rankings[q][:k])} for q in grades}
    run = Run(ranked)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = evaluate(
            Qrels({q: dict(g) for q, g in grades.items()}),
            run,
            f"ndcg_burges@{k}",
            return_mean=False,
            make_comparable=True,
        )
    return {q: float(v) for q, v in zip(run.keys(), np.atleast_1d(scores), strict=True)}


class _Progress(TypedDict):
    metric: str
    judged: int
    width: float | None  # None below two fully judged queries
    target_width: float
    needed: int | None
    reachable: bool | None


class IntervalProgress(_Progress, total=False):
    """The judging page's progress towards the target interval width."""

    width_at_all: float | None  # from two judged queries: the width with all drawn judged


def interval_progress(
    rankings: Mapping[str, Sequence[str]],
    grades: Mapping[str, Mapping[str, int]],
    k: int,
    queries: int,
    target_width: float = TARGET_WIDTH,
) -> IntervalProgress:
    """{metric, judged, width, target_width, needed, reachable}: the human-only interval's width
    over the ``grades`` of fully judged queries (None below two), the judged queries about needed
    for ``target_width`` (widths scale as 1/sqrt(n)) and whether the draw's ``queries`` reach it."""
    done = {q: g for q, g in grades.items() if q in rankings}
    progress: IntervalProgress = {
        "metric": f"ndcg@{k}",
        "judged": len(done),
        "width": None,
        "target_width": target_width,
        "needed": None,
        "reachable": None,
    }
    if len(done) < 2:
        return progress
    values = ndcg_at_k(rankings, done, k)
    interval = classical_mean([values[q] for q in sorted(values)], bounds=(0.0, 1.0))
    needed = queries_for_width(interval, target_width)
    reach = interval.width * math.sqrt(interval.n / queries) if queries else None
    progress.update(width=interval.width, needed=needed, reachable=needed <= queries)
    progress["width_at_all"] = reach
    return progress
