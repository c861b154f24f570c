"""The state cache: what a model computes for a token sequence, kept on disk once per content.

One file per (base model, what was computed, dtype, token ids): the bottom layers' states of the
cached-state training modes, or a whole sequence's query log-likelihood (``LOG_LIKELIHOOD`` of
``models.families.query_likelihood.scoring``). Cross-validation folds, studies, resumed runs and a
query-likelihood grader's later labelling share it, so each pair runs through a model once per
machine.

The cache belongs to the process, not to a command: the code that computes states asks
:func:`state_cache_for` and no job, command or config passes a folder. One switch,
``RELEVANCE_GRADER_STATE_CACHE``, sets it for a process and the processes it starts (a job's
stages, a study's training runs): unset, the machine's folder beside the converted models; a
folder, that folder; ``none``, off (states live in memory and each run computes its own).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from core.io import fingerprint

if TYPE_CHECKING:
    import torch


STATE_CACHE_ENV = "RELEVANCE_GRADER_STATE_CACHE"


def machine_state_cache() -> Path:
    """The machine-wide state cache (beside the converted models), shared by runs and studies."""
    from core.io import cache_dir

    return cache_dir() / "states"


def default_state_cache() -> Path | None:
    """This process's state cache folder: ``$RELEVANCE_GRADER_STATE_CACHE`` (``none``: off, None),
    else the machine's (:func:`machine_state_cache`)."""
    value = os.environ.get(STATE_CACHE_ENV, "").strip()
    if not value:
        return machine_state_cache()
    return None if value.lower() == "none" else Path(value)


def state_cache_for(model_name_or_path: str, processes: int = 1) -> StateCache | None:
    """The state cache of a base model in this process (None: off, states live in memory).

    Several processes (DDP) share states through the machine's folder even when it is off: the
    main process computes each state once, the others read it, and none holds them all in memory.
    """
    folder = default_state_cache()
    if folder is None and processes > 1:
        folder = machine_state_cache()
    return StateCache(folder, state_cache_key(model_name_or_path)) if folder else None


def state_cache_key(model_name_or_path: str) -> str:
    """How a state cache names a base model: a local folder by its weights, a name by itself."""
    from core.io import sha256_path

    path = Path(model_name_or_path)
    return sha256_path(path) if path.is_dir() else model_name_or_path


class StateCache:
    """Cached states on disk, one file per pair, keyed by the base model, split and token ids.

    Lets runs that share pairs (cross-validation folds, several top-layer settings, a resumed
    run, a query-likelihood grader labelling pairs its training scored) compute each pair once.
    """

    def __init__(self, folder: str | Path, model_key: str) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.model_key = model_key

    def path(self, ids: Sequence[int], first_layer: int | str, dtype: torch.dtype) -> Path:
        key = fingerprint(self.model_key, str(first_layer), str(dtype), ",".join(map(str, ids)))
        return self.folder / f"{key}.pt"

    def get(
        self, ids: Sequence[int], first_layer: int | str, dtype: torch.dtype
    ) -> torch.Tensor | None:
        import torch

        path = self.path(ids, first_layer, dtype)
        return torch.load(path, weights_only=True) if path.exists() else None

    def put(
        self, ids: Sequence[int], first_layer: int | str, dtype: torch.dtype, state: torch.Tensor
    ) -> None:
        import torch

        path = self.path(ids, first_layer, dtype)
        # A temporary name of its own per write: ranks of one DDP run store the same pairs at once.
        fd, partial = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=self.folder)
        os.close(fd)
        try:
            torch.save(state, partial)
            os.replace(partial, path)  # atomic: a killed run never leaves a torn state behind
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
