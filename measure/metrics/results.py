"""What eval.search writes and its readers read back: the labelled hits and metrics of every run
by query (``per_query.json``), the runs' mean metrics, paired tests and PPI++ estimates
(``metrics.json``) and the judged queries' values under people's judgments
(``human_per_query.json``). The metric library fills them (:mod:`measure.metrics.labelling`,
:mod:`measure.metrics.retrieval`); the search command's flags are its own
(:mod:`eval.search.settings`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.artifacts import Artifact
from core.io import atomic_writer
from measure.labelers import HitLabel
from measure.metrics.names import ranx_name
from measure.metrics.ppi_record import PpiRecord


class Unusable(BaseModel):
    """metrics.json's ``unusable``: the hits whose judge reply gave no verdict, by run."""

    model_config = ConfigDict(extra="forbid")
    counts: dict[str, int]  # run -> hits with an unusable reply (every run, 0 included)
    rule: str  # how they were counted, in words


class SearchMetrics(Artifact):
    """metrics.json, eval.search's result: each run's mean metrics, the paired tests and the
    PPI++ estimates (:class:`~measure.metrics.ppi_record.PpiRecord`). The tests (ranx's report)
    keep their own open shape."""

    model_config = ConfigDict(extra="forbid")
    FILE = "metrics.json"
    FORMAT_VERSION = 1
    labeler: str
    k: int
    scoring_dtype: str | None = None  # the arithmetic the labeler's scores were made in
    mean: dict[str, dict[str, float | None]]  # run -> metric -> mean over its queries
    unusable: Unusable | None = None  # judge replies with no verdict, by run
    comparison: dict[str, Any] | None = None  # ranx's paired tests, by metric
    ppi: PpiRecord | None = None  # PPI++ estimates with human judgments

    # ``comparison`` keeps ranx's own shape (``Report.to_dict()`` per metric, ``table_METRIC``: its
    # printed table), which this release does not own; it is read here only.
    def p_value(self, metric: str, run: str, other: str) -> float | None:
        """ranx's paired-test p-value of ``run`` against ``other`` on ``metric`` (a name as
        --metrics takes it); None where that pair was not tested."""
        table = (self.comparison or {}).get(ranx_name(metric))
        if not isinstance(table, dict):
            return None
        runs = table.get(run, {}).get("comparisons", {})
        value = runs.get(other, {}).get(ranx_name(metric))
        return None if value is None else float(value)

    @property
    def stat_test(self) -> str | None:
        """The paired test ranx ran (``student``, ``fisher``...); None without a comparison."""
        table = next(iter((self.comparison or {}).values()), None)
        return table.get("stat_test") if isinstance(table, dict) else None

    @property
    def comparison_tables(self) -> list[str]:
        """ranx's printed comparison tables, one per label kind (graded, binary)."""
        return [
            table
            for key, table in (self.comparison or {}).items()
            if key.startswith("table_") and isinstance(table, str)
        ]

    @field_validator("mean")
    @classmethod
    def _some_run(cls, mean: dict[str, dict[str, float | None]]) -> dict:
        if not mean:
            raise ValueError("expected {run: {metric: value}} for at least one run")
        return mean

    def dump(self) -> dict[str, Any]:
        data = super().dump()
        if self.ppi is not None:  # its own keys as written, nulls kept
            data["ppi"] = self.ppi.dump()
        return data


class HumanPerQuery(Artifact):
    """human_per_query.json, written by eval.search with --human: each run's metrics per query
    under the human judgments, for the judged queries (the values its PPI++ estimates use).
    Written only with --human."""

    FILE = "human_per_query.json"
    FORMAT_VERSION = 1
    human: str  # the --human judgments the values come from
    values: dict[str, dict[str, dict[str, float]]]  # run -> metric -> qid -> value


class HitResult(BaseModel):
    """One labelled hit of a run's top k: the labeler's verdict on it, as per_query.json holds it
    and the API's library call returns it."""

    model_config = ConfigDict(extra="forbid")
    index: int | None = None  # its rank in the run's top k, from 0 (the list's order is the rank)
    id: str
    relevant: bool
    score: float | None = None  # P(relevant), for a labeler that gives one
    grade: int | None = None  # 0-3, for a labeler that grades
    justification: str | None = None
    # False: no judgment of the pair (read as not relevant).
    judged: bool = True
    # The judge's reply that held no verdict (the hit counts as not relevant); left out when none.
    unusable: str | None = Field(default=None, exclude_if=lambda why: why is None)

    @classmethod
    def of(cls, index: int, doc_id: str, label: HitLabel) -> HitResult:
        """The labeler's verdict on the hit at ``index`` of a top k."""
        return cls(
            index=index,
            id=doc_id,
            relevant=label.relevant,
            score=label.score,
            grade=label.grade,
            justification=label.justification,
            judged=label.has_judgment,
            unusable=label.unusable or None,
        )

    @property
    def probability(self) -> float:
        """P(relevant): the score, or the 0/1 verdict of a labeler that gives no probability."""
        return self.score if self.score is not None else float(self.relevant)

    @property
    def gain_grade(self) -> int:
        """The grade NDCG's gain uses: the labeler's grade, or its verdict as 0/1."""
        return self.grade if self.grade is not None else int(self.relevant)


class QueryUsage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    evaluation_input_tokens: int = 0  # the labeler's input tokens for the query's hits


class QueryResult(BaseModel):
    """One query of one run: its labelled top k, its metrics (metric name -> value; None where a
    metric is undefined) and the labeler's usage."""

    model_config = ConfigDict(extra="forbid")
    hits: list[HitResult]
    metrics: dict[str, float | None] = Field(default_factory=dict)  # set once the pool is scored
    usage: QueryUsage = Field(default_factory=QueryUsage)

    def metric(self, name: str) -> float | None:
        """The query's ``name`` value; None where the labels lack it or it is undefined."""
        return self.metrics.get(name)


RunResults = dict[str, QueryResult]  # qid -> the query's result, in the run's order


class PerQueryResults(Artifact):
    """per_query.json, written by eval.search: every run's labelled top k and metrics, by query."""

    FILE = "per_query.json"
    FORMAT_VERSION = 1
    runs: dict[str, RunResults]  # run -> qid -> result

    @classmethod
    def of(cls, path: str | Path) -> PerQueryResults:
        """The file, or the file in the eval.search output folder ``path``."""
        file = Path(path) / cls.FILE if Path(path).is_dir() else Path(path)
        if not file.is_file():
            raise FileNotFoundError(
                f"{file} not found: give a relevance-grader search output folder"
            )
        return cls.read(file)

    @field_validator("format_version")
    @classmethod
    def _this_release(cls, version: int) -> int:
        # Only :meth:`read`'s fast path sees a format_version here (the general path checks it
        # first and refuses another version in one line): anything else takes the general path.
        if version != cls.FORMAT_VERSION:
            raise ValueError(f"format version {version} is not this release's")
        return version

    @classmethod
    def read(cls, path: str | Path) -> PerQueryResults:
        """The file; one line naming it and the field where it does not fit. The file can be
        large (a hit per query and rank): this release's files are parsed and checked in one
        pass, others (older, newer or damaged) take :class:`Artifact`'s way, which says what is
        wrong."""
        with open(path, "rb") as handle:
            raw = handle.read()
        if b'"format_version"' in raw[:64]:  # written by a release that versions it, first
            try:
                return cls.model_validate_json(raw)
            except ValidationError:
                pass
        return super().read(path)

    def dump(self) -> dict[str, Any]:
        # Every hit field is written, None included.
        return self.model_dump(mode="json")

    def write(self, path: str | Path) -> None:
        with atomic_writer(path) as handle:  # a reader sees the old file or the whole new one
            handle.write(self.model_dump_json(indent=2) + "\n")
