"""eval.search's settings and the files it reads and writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.artifacts import Artifact
from core.cli import bounded, check_choices, choice
from core.errors import InputError
from core.io import atomic_writer
from data.beir import QRELS_SCALES
from measure.labelers import HitLabel
from measure.metrics.names import MetricName, parse_metrics, ranx_name, standard_metric_names
from measure.metrics.ppi_record import PpiRecord

PRIMARY_METRIC = "ndcg@{k}"


STAT_TESTS = ("student", "fisher", "tukey")  # ranx's paired tests


@dataclass
class SearchEvalConfig:
    run: str = field(default="", metadata={"help": "TREC run to evaluate."})
    compare: list[str] = field(
        default_factory=list, metadata={"help": "More runs to compare with --run."}
    )
    corpus: str = field(
        default="", metadata={"help": "BEIR folder (or corpus.jsonl) holding the documents."}
    )
    queries: str | None = field(
        default=None, metadata={"help": "queries.jsonl (default: beside the corpus)."}
    )
    labeler: str = field(
        default="",
        metadata={
            "help": "grader:PATH, judge:CONFIG.yaml, qrels:PATH, judgments:PATH, erag:READER.yaml, "
            "erag-em:READER.yaml, answers:QUERIES.jsonl or gold-doc:QRELS."
        },
    )
    k: int = bounded(10, 1, help="Cut-off: hits labelled per query and metric depth.")
    metrics: list[str] = field(
        default_factory=list,
        metadata={
            "help": "More metrics beside the standard set (ndcg@k, map, mrr, precision@k, hit@k, "
            "recall@k): ranx's names or this tool's, with cut-offs up to --k, e.g. --metrics "
            "ndcg@5 map@5 recall@10 f1@10 r-precision judged@10. judged@c is the share of the "
            "top c hits the labeler holds a judgment for (pool coverage, for a qrels labeler); "
            "recall and R-precision count the relevant documents pooled from the runs, or "
            "--num_relevant_from's. In metrics.json, per_query.json/.txt, the significance "
            "tests and the report; the PPI++ intervals cover the standard set."
        },
    )
    num_relevant_from: str | None = field(
        default=None,
        metadata={
            "help": "qrels file giving each query's number of relevant documents (recall@k)."
        },
    )
    stat_test: str = choice(
        "student",
        STAT_TESTS,
        "ranx's paired test: Student's t, Fisher's randomization or Tukey's HSD.",
    )
    out: str = field(default="runs/search", metadata={"help": "Output folder."})
    batch_queries: int = bounded(16, 1, help="Queries labelled per batched grader pass.")
    label_cache: str | None = field(
        default=None, metadata={"help": "Label cache folder (default: OUT/labels)."}
    )
    human: str | None = field(
        default=None,
        metadata={
            "help": "Human judgments of a random sample of the queries (qrels on --human_scale, a "
            "judgments JSONL or a relevance-grader annotate folder; a grade off the scale is "
            "refused): prediction-powered (PPI++) estimates and confidence intervals of every "
            "metric and paired difference, from at least 10 fully judged queries "
            "(judgments.coverage). A sample not drawn by relevance-grader ppi is checked: a warning "
            "when the judged queries' labeler NDCG@k differs from the other queries' (two-sided "
            "Mann-Whitney p < 0.01); metrics.json records how it was drawn."
        },
    )
    human_scale: str = choice(
        "format",
        ("format", *QRELS_SCALES),
        "The scale of a --human qrels file's values: 0-3 (1 is 'not relevant') or binary (1 is "
        "relevant, read as 3); format (the default): the file's format says, never which grades "
        "occur in it: TREC qrels are 0-3, a BEIR TSV (query-id header) of 0/1 scores is binary.",
    )
    human_pairs: str | None = field(
        default=None,
        metadata={
            "help": "Human labels of a random sample of the runs' top-k hits (judgments JSONL or a "
            "relevance-grader annotate folder): PPI++ estimates of each run's share of relevant "
            "hits in its top k. Each run's interval uses the judged hits in its top k, at least 10 "
            "(judgments.coverage); the others are ignored, with a warning and their count in "
            "metrics.json (judged_pairs_used)."
        },
    )
    draw: str | None = field(
        default=None,
        metadata={
            "help": "The relevance-grader ppi draw file the human sample came from: the estimate "
            "valid under its design (found by itself in a relevance-grader annotate folder)."
        },
    )
    alpha: float = bounded(
        0.05, 0, 1, help="1 - confidence level of the intervals.", open_low=True, open_high=True
    )
    interval: str = choice("t", ("t", "normal"), "Interval: Student's t (n - 1 df) or normal.")
    report: bool = field(
        default=True,
        metadata={
            "help": "Also write OUT/report.html, the evaluation as one page (relevance-grader "
            "report)."
        },
    )
    track: str | None = field(
        default=None,
        metadata={
            "help": "Evaluation history store to record this evaluation in: a SQLite file "
            "(created if absent) or a database URL (postgresql://USER@HOST/DB). The --run is "
            "recorded (its per-query values, estimates and the run itself), not the --compare "
            "runs; `relevance-grader history` reads the store."
        },
    )
    system: str | None = field(
        default=None,
        metadata={"help": "With --track: the system's name in the store (default: --run's name)."},
    )
    version: str | None = field(
        default=None,
        metadata={
            "help": "With --track: the system's version (default: the current UTC time stamp)."
        },
    )
    note: str | None = field(
        default=None, metadata={"help": "With --track: a note stored with the evaluation."}
    )

    def __post_init__(self) -> None:
        check_choices(self)  # YAML values too, before any labelling is paid for
        self.extra_metrics()  # an unknown name is refused before any labelling too
        if self.declared_human_scale is not None and not self.human:
            raise InputError("human_scale: give --human, the qrels file it is the scale of")
        for name in ("system", "version", "note"):  # they would be dropped without a store
            if getattr(self, name) is not None and not self.track:
                raise InputError(f"{name}: give --track STORE to record the evaluation in")

    @property
    def declared_human_scale(self) -> str | None:
        """--human_scale where it declares one (None: the file's format says)."""
        return None if self.human_scale == "format" else self.human_scale

    def extra_metrics(self) -> list[MetricName]:
        standard = standard_metric_names(self.k, recall=self.num_relevant_from is not None)
        return parse_metrics(self.metrics, self.k, set(standard))


# What eval.search writes into --out (the folder may hold other files, the runs among them).
SEARCH_OUTPUTS = (
    "metrics.json",
    "per_query.json",
    "per_query.txt",
    "inferred_qrels.txt",
    "human_per_query.json",
    "labels",
)


def search_inputs(config: SearchEvalConfig) -> list[tuple[str, str | None]]:
    """(flag, path) of every file or folder the command reads, the labeler's among them."""
    labeler_path = config.labeler.partition(":")[2]
    return [
        ("run", config.run),
        *(("compare", path) for path in config.compare),
        ("corpus", config.corpus),
        ("human", config.human),
        ("human_pairs", config.human_pairs),
        ("labeler", labeler_path if Path(labeler_path).exists() else None),
    ]


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
