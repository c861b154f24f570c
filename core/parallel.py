"""Several processes of one command (``accelerate launch`` / ``torchrun``): who writes, and the
collectives that data-parallel grading needs.

Every process runs the whole command; the grader splits its pairs between them
(``Grader.class_probabilities_of_ids``), and every process receives all results in the original
order. Only the main process writes files and prints: ``core.io``'s writers discard the other
processes' output, so caches and outputs have one writer and no races. A plain run
(``relevance-grader NAME``) is one process, and none of this changes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def process_count() -> int:
    """Processes of this launch (``WORLD_SIZE``; 1 for a plain run)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def process_index() -> int:
    """This process's rank (``RANK``; 0 for a plain run)."""
    return int(os.environ.get("RANK", "0") or 0)


def is_main_process() -> bool:
    return process_index() == 0


def local_device_index() -> int:
    """The GPU this process grades on (``LOCAL_RANK``: one GPU per process on each machine)."""
    return int(os.environ.get("LOCAL_RANK", "0") or 0)


def _state() -> Any:
    # accelerate's PartialState starts the process group the launcher described (gloo on CPUs,
    # nccl on GPUs) once per process and is shared with Trainer when both are used.
    import torch
    from accelerate import PartialState

    # Without a GPU, accelerate treats the processes as one unless told they share CPUs.
    return PartialState(cpu=not torch.cuda.is_available())


def broadcast_from_main(value: T) -> T:
    """The main process's ``value`` in every process (``value`` itself in a plain run)."""
    if process_count() == 1:
        return value
    from accelerate.utils import broadcast_object_list

    _state()
    box = [value]
    broadcast_object_list(box, from_process=0)
    return box[0]


def balanced_assignment(weights: Sequence[int], processes: int) -> list[list[int]]:
    """Units (by index) per process, each unit to the least loaded process so far, heaviest first:
    deterministic, so every process computes the same assignment."""
    loads = [0] * processes
    shares: list[list[int]] = [[] for _ in range(processes)]
    for unit in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        target = min(range(processes), key=lambda p: (loads[p], p))
        shares[target].append(unit)
        loads[target] += weights[unit]
    return shares


def map_shards(
    units: Sequence[Sequence[int]],
    weights: Sequence[int],
    compute: Callable[[list[int]], Sequence[T]],
) -> list[T | None]:
    """Rows computed in shares across processes, gathered in their original order everywhere.

    ``units`` are groups of row indices that must be computed together (a batch, a query's
    pairs); each process computes the rows of its units (ascending, so the rows keep their
    relative order) with ``compute`` and every process receives every row. Rows in no unit are
    None.
    """
    count = process_count()
    rows: list[T | None] = [None] * (1 + max((i for unit in units for i in unit), default=-1))
    if count == 1:
        mine = sorted(i for unit in units for i in unit)
        for index, row in zip(mine, compute(mine), strict=True):
            rows[index] = row
        return rows
    from accelerate.utils import gather_object

    _state()
    share = balanced_assignment(weights, count)[process_index()]
    mine = sorted(i for unit in share for i in units[unit])
    computed = list(compute(mine)) if mine else []
    for indices, values in gather_object([(mine, computed)]):
        for index, row in zip(indices, values, strict=True):
            rows[index] = row
    return rows
