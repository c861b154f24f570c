"""The search command's flags (``SearchEvalConfig``) and the files it reads and writes: the
command's own, not the metric library's, which takes data (:mod:`measure.metrics.labelling`,
:mod:`measure.metrics.retrieval`) and fills the records of :mod:`measure.metrics.results`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.cli import bounded, check_choices, choice
from core.errors import InputError
from data.beir import QRELS_SCALES
from measure.metrics.names import STAT_TESTS, MetricName, parse_metrics, standard_metric_names


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
