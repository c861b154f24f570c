"""``crossfit:STUDY[#ROW]``: a cross-validated grader row as one labeler, each query labelled by
the fold's grader that held it out.

A grader trained on a collection's judged pairs has seen most of its queries: ranked on them, it
would be marked on its own training data. A cross-validated study (``relevance-grader study``,
the main job's ``cv/``) trained one grader per fold, each tested on queries it never saw; this
labeler routes every query to that fold's grader, with the threshold and temperature the study
fitted on that fold's validation queries. So every label comes from a grader that did not train
on the query, and all the collection's judged queries can rank systems (cross-fitting).

The study's folder holds ``fold-K/ROW/`` for each fold: the trained grader (``grader/``), its
held-out evaluation (``metrics.json``: threshold and calibration) and its test predictions
(``predictions.jsonl``: which queries the fold held out). ROW is the study's row name, ``grader``
unless given after ``#``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.errors import InputError
from core.io import sha256_path
from measure.labelers import GraderLabeler, Hit, HitLabel, Labeler


class CrossFittedLabeler(Labeler):
    verdicts = True

    def __init__(self, spec: str, shares_states: bool = False) -> None:
        study, _, row = spec.partition("#")
        self.study, self.row = Path(study), row or "grader"
        self.name = f"crossfit:{spec}"
        self.shares_states = shares_states
        self.folds = sorted(self.study.glob(f"fold-*/{self.row}"))
        if not self.folds:
            raise InputError(
                f"labeler: crossfit: {self.study} has no fold-K/{self.row}/ folder (a "
                "relevance-grader study output with that row)"
            )
        self.fold_of = self._held_out_queries()
        self._labelers: dict[Path, GraderLabeler] = {}
        self._id: str | None = None

    def _held_out_queries(self) -> dict[str, Path]:
        """query id -> the fold folder whose grader was tested on it (never trained on it)."""
        fold_of: dict[str, Path] = {}
        for fold in self.folds:
            for name in ("grader", "metrics.json", "predictions.jsonl"):
                if not (fold / name).exists():
                    raise InputError(f"labeler: crossfit: {fold / name} is missing")
            with open(fold / "predictions.jsonl", encoding="utf-8") as handle:
                for qid in {json.loads(line)["qid"] for line in handle if line.strip()}:
                    if fold_of.setdefault(qid, fold) != fold:
                        raise InputError(
                            f"labeler: crossfit: query {qid} is held out by both "
                            f"{fold_of[qid]} and {fold}: not one cross-validation"
                        )
        return fold_of

    def labeler_of(self, fold: Path) -> GraderLabeler:
        """The fold's grader with the threshold and temperature fitted on its validation queries;
        loaded on first use and kept (the zoo labels in several batches)."""
        if fold not in self._labelers:
            from models.grader import Grader
            from models.grader_config import ExportedEvaluation

            evaluation = ExportedEvaluation.read(fold / "metrics.json")
            calibration = evaluation.calibration
            grader = Grader.from_pretrained(
                str(fold / "grader"),
                threshold=evaluation.threshold,
                temperature=calibration.temperature if calibration is not None else None,
            )
            grader.shares_states = self.shares_states
            self._labelers[fold] = GraderLabeler(str(fold / "grader"), grader=grader)
        return self._labelers[fold]

    @property
    def id(self) -> str:
        # Each fold's weights and its fitted read-out: a re-run study is a new labeler. Hashing
        # five graders' weights takes seconds: once per labeler.
        if self._id is None:
            parts = []
            for fold in self.folds:
                evaluation = json.loads((fold / "metrics.json").read_text(encoding="utf-8"))
                read_out = (evaluation.get("threshold"), evaluation.get("calibration"))
                parts.append(f"{sha256_path(fold / 'grader')}:{read_out}")
            self._id = "crossfit:" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
        return self._id

    def fold_for(self, qid: str) -> Path:
        if qid not in self.fold_of:
            raise InputError(
                f"labeler: crossfit: query {qid} is in no fold's held-out queries of "
                f"{self.study}: the study ran on other queries"
            )
        return self.fold_of[qid]

    def label_many(
        self, requests: Sequence[tuple[str, str, Sequence[Hit]]]
    ) -> list[list[HitLabel]]:
        """Each fold's queries in one batched pass of its grader, answered in request order."""
        by_fold: dict[Path, list[int]] = {}
        for i, (qid, _, _) in enumerate(requests):
            by_fold.setdefault(self.fold_for(qid), []).append(i)
        out: list[Any] = [None] * len(requests)
        for fold, positions in by_fold.items():
            labels = self.labeler_of(fold).label_many([requests[i] for i in positions])
            for i, labelled in zip(positions, labels, strict=True):
                out[i] = labelled
        return out
