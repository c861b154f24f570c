"""The quality study's ``study.json`` and the main job's ``summary.json``: one typed model each,
used by the study and the main job to write them and by the README block, the main job's
report.md and the HTML report to read them.

Both hold the cross-validation (:class:`~measure.classification.crossval.CrossValidationRecord`)
and each fold's row per model. The PPI++ record inside ``summary.json`` is ``metrics.json``'s
(:class:`~measure.metrics.ppi_record.PpiRecord`), kept as it is."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.artifacts import Artifact
from measure.classification.crossval import CrossValidationRecord
from measure.metrics.ppi_record import PpiRecord
from measure.zoo.record import Leaderboard

# The per-fold metrics of each model (relevance-grader evaluate's, at the validation threshold).
METRICS = ("roc_auc", "query_roc_auc", "pr_auc", "f1", "kappa", "precision", "recall")


class MeanSd(BaseModel):
    """A metric's mean and standard deviation over the folds (None where undefined)."""

    model_config = ConfigDict(extra="forbid")
    mean: float | None
    sd: float | None


class ModelSummary(BaseModel):
    """One model of the study over its folds."""

    model_config = ConfigDict(extra="forbid")
    roc_auc: MeanSd
    query_roc_auc: MeanSd
    pr_auc: MeanSd
    f1: MeanSd
    kappa: MeanSd
    precision: MeanSd
    recall: MeanSd
    seconds: float
    beats_baselines_in_folds: str | None = None  # "3/5"; None for a baseline

    def metric(self, name: str) -> MeanSd:
        """The mean ± sd of one of :data:`METRICS`."""
        if name not in METRICS:
            raise KeyError(name)
        return getattr(self, name)


class FoldResult(BaseModel):
    """One model on one fold's test pairs."""

    model_config = ConfigDict(extra="forbid")
    fold: int
    model: str
    pairs: int | None
    roc_auc: float | None
    query_roc_auc: float | None
    pr_auc: float | None
    f1: float | None
    kappa: float | None
    precision: float | None
    recall: float | None
    seconds: float | None = None  # its training and scoring time

    def metric(self, name: str) -> float | None:
        if name not in METRICS:
            raise KeyError(name)
        return getattr(self, name)


class CurvePoint(BaseModel):
    """The learning curve's model trained on a share of one fold's training queries."""

    model_config = ConfigDict(extra="forbid")
    fold: int
    share: float
    train_queries: int
    train_pairs: int
    other_collection_pairs: int
    roc_auc: float | None


class StudySummary(Artifact):
    """study.json, relevance-grader study's result: each model's means over the folds, its row per
    fold, the pooled cross-validation and the learning curve."""

    FILE = "study.json"
    FORMAT_VERSION = 1
    collection: str
    folds: int
    queries_per_fold: list[int]  # test queries of each fold
    max_pairs_per_query: int | None  # the folds' cap (0 or None: all)
    models: dict[str, ModelSummary]
    per_fold: list[FoldResult]
    cross_validation: CrossValidationRecord
    learning_curve: list[CurvePoint]  # empty without one


class JobSummary(Artifact):
    """summary.json, the main job's result: the cross-validation of ``cv/study.json``, the runs'
    mean metrics under the exported grader's labels, the labeler leaderboard on the compact
    system zoo (None without human judgments), the PPI++ estimates and the stage times. Tables a
    later job adds beside them are kept (``model_extra``)."""

    model_config = ConfigDict(extra="allow")
    FILE = "summary.json"
    FORMAT_VERSION = 2
    run_dir: str
    seconds: float  # this run's
    # Each stage's time: what it took in this run, or, for a stage done earlier (skipped), when
    # it ran (None: its stamp recorded no time).
    stage_seconds: dict[str, float | None]
    done_earlier: list[str] = Field(default_factory=list)  # the stages this run skipped
    scoring_dtype: str | None = None  # the arithmetic the stages scored in
    folds: int
    queries_per_fold: list[int]
    names: dict[str, str]  # how the report names the study's rows
    cross_validation: CrossValidationRecord
    per_fold: list[FoldResult]
    export_fold: int  # the fold whose grader is exported and labels the runs
    search: dict[str, dict[str, float | None]]  # run -> metric -> mean (metrics.json's mean)
    leaderboard: Leaderboard | None = None
    ppi: PpiRecord | None = None  # metrics.json's PPI++ record
    human_all_queries: dict[str, dict[str, float | None]] | None = None  # run -> metric -> mean
    export: str  # the exported grader's folder

    @field_validator("leaderboard", mode="before")
    @classmethod
    def _leaderboard(cls, value: Any) -> Any:
        # leaderboard.json's own versions: read (or refused) as that file is.
        if value is None or isinstance(value, Leaderboard):
            return value
        return Leaderboard.from_data(value, "summary.json: leaderboard")

    def extra_tables(self) -> dict[str, Any]:
        """The fields this release does not know, as the file holds them."""
        return dict(self.model_extra or {})

    def dump(self) -> dict[str, Any]:
        data = super().dump()
        if self.ppi is not None:  # metrics.json's keys as written, nulls kept
            data["ppi"] = self.ppi.dump()
        return data
