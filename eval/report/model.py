"""What the report page shows, as typed records: :func:`eval.report.build.build_report` fills them
from an evaluation folder, :meth:`Report.to_dict` is the JSON the page embeds and draws."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from core.io import strict
from measure.metrics.ppi_record import IntervalRecord


@dataclass
class Interval:
    estimate: float
    low: float
    high: float
    method: str = ""  # how it was computed; says so where PPI++ was not estimable

    @classmethod
    def from_record(cls, record: IntervalRecord) -> Interval:
        """From an interval of ``metrics.json``'s ``ppi`` section."""
        return cls(record.estimate, record.low, record.high, record.method)

    @property
    def not_estimable(self) -> bool:
        return "not estimable" in self.method

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


@dataclass
class Cell:
    """One run's value of one metric: the labeler's mean over all queries and, with human
    judgments, the human-only and PPI++ intervals."""

    labeler_mean: float
    ppi: Interval | None = None
    human_only: Interval | None = None
    lam: float | None = None  # PPI++'s weight on the labeler (0: human only)
    worth: float | None = None  # human queries the estimate is worth
    human_all: float | None = None  # the mean under every human judgment, where the job knows it
    # Runs it beats by the paired test on the labeler's labels: only on a cell that shows the
    # labeler's mean (a test on the labels says nothing of a PPI++ estimate beside it).
    beats: list[str] = field(default_factory=list)
    p_values: dict[str, float] = field(default_factory=dict)  # paired test against each run
    # The primary metric's p-values Holm-adjusted over the pairs of runs (what ``beats`` uses).
    p_holm: dict[str, float] = field(default_factory=dict)


@dataclass
class Difference:
    """``compared`` − ``baseline`` on one metric, paired by query."""

    compared: str
    baseline: str
    metric: str
    labeler: float  # the labeler's mean paired difference
    ppi: Interval | None = None
    human_only: Interval | None = None
    p_value: float | None = None  # the paired test on the labeler's labels
    ppi_p: float | None = None  # the PPI++ difference's p-value of "no difference"
    # The primary metric's p-value Holm-adjusted: the PPI++ difference's over the compared runs,
    # or without human judgments the labeler's paired test's over the pairs of runs.
    p_holm: float | None = None
    significant: bool = False  # by the multiplicity rule of the headline


@dataclass
class Headline:
    runs: list[str]
    metrics: list[str]
    primary: str
    cells: dict[str, dict[str, Cell]]  # run -> metric -> cell
    differences: list[Difference]
    intervals: bool  # human judgments exist: PPI++ estimates with intervals
    notice: str  # what the numbers are, in one plain paragraph
    judged_queries: int = 0
    judged_pairs: int = 0
    confidence: float | None = None
    estimator: str | None = None
    stat_test: str | None = None
    alpha: float = 0.05  # eval.search's level: every mark of the page
    multiplicity: str | None = None  # the rule that calls a difference significant, in words
    labeler_rule: str | None = None  # the marks of the paired tests on the labels, in words
    coverage_legend: str = ""  # the coverage marks (†, ‡) in words
    untrusted: bool = False  # the grader did not beat its baselines on held-out queries
    # metric -> the coverage the study measured for its intervals at this n (judgments.coverage),
    # with its marks and a note in words
    coverage: dict[str, dict[str, Any] | None] = field(default_factory=dict)


@dataclass
class HitRow:
    doc_id: str
    relevant: bool  # the labeler's verdict
    score: float | None  # the labeler's score (P(relevant) for graders)
    grade: int | None  # the labeler's 0-3 grade, where it grades
    justification: str | None
    human_grade: int | None = None
    human_relevant: bool | None = None  # None: no person judged this hit
    disagrees: bool | None = None  # labeler and people differ on relevant / not relevant


@dataclass
class QueryRow:
    qid: str
    query: str | None
    judged: bool  # people judged this query (its hits carry human grades)
    labeler: dict[str, dict[str, float]]  # run -> metric -> the labeler's value
    human: dict[str, dict[str, float]] | None = None  # run -> metric -> the value under people
    judged_hits: int = 0
    disagreements: int = 0  # judged documents where labeler and people differ
    hits: dict[str, list[HitRow]] | None = None  # run -> ranked hits; None: not embedded


@dataclass
class Document:
    title: str
    text: str
    truncated: bool = False


@dataclass
class ReliabilityBin:
    mean_score: float
    fraction_relevant: float
    pairs: int


@dataclass
class LabelAgreement:
    """The labeler against people on the hits both labelled (each query–document pair once)."""

    source: str
    scope: str  # which pairs, in a sentence
    pairs: int
    human_scale: list[str]  # confusion matrix rows
    labeler_scale: list[str]  # confusion matrix columns
    confusion: list[list[int]]
    kappa: float
    accuracy: float
    precision: float
    recall: float
    f1: float
    weighted_kappa: float | None = None  # quadratic, on 0-3 grades where both sides grade
    reliability: list[ReliabilityBin] | None = None
    scores_by_grade: dict[str, list[float]] | None = None


@dataclass
class Tau:
    kendall_tau: float | None
    kendall_p: float | None
    spearman_rho: float | None


@dataclass
class Ranking:
    """Each run's score on ``metric`` under each labeler, and Kendall's τ with the reference."""

    metric: str
    reference: str
    scores: dict[str, dict[str, float]]  # labeler -> run -> score
    orders: dict[str, list[str]]  # labeler -> runs, best first
    taus: dict[str, Tau]  # labeler -> agreement with the reference
    source: str


@dataclass
class RankEstimate:
    """A statistic of the system ranking on all the queries and its 95% bootstrap interval over
    queries; ``note`` says why there is no value or no interval, in the words of the Markdown
    leaderboard (eval.report.leaderboard_markdown)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    note: str | None = None


@dataclass
class DrawnTaus:
    """τ over ``draws`` random draws of ``judged`` human-judged queries: the mean and the 5th to
    95th percentile of the draws (mean None: every draw tied every system)."""

    judged: int
    draws: int
    mean: float | None
    low: float | None
    high: float | None
    undefined: int = 0  # draws that tied every system, left out of the mean
    note: str | None = None  # why there is no mean


@dataclass
class RankError:
    places: float
    system: str
    human_rank: float
    labeler_rank: float


@dataclass
class SelfPreferenceShown:
    own_systems: list[str]
    lift: RankEstimate  # places above their human rank, on average (negative: below)
    tau_without_own: float | None  # τ over the other systems alone


@dataclass
class LabelerRow:
    """One labeler read one way (``labels``: its verdicts; ``scores``: P(relevant) as the gain)
    against the human ranking of the systems on the primary metric."""

    labeler: str
    spec: str
    reading: str
    tau: RankEstimate
    tau_ap: RankEstimate
    rho: RankEstimate
    top1: bool | None  # None: the labeler ties every system
    top3: int | None  # of the human top 3, how many are in the labeler's top 3
    largest_error: RankError | None
    ppi: list[DrawnTaus | None]  # after PPI++, one per the section's ppi_sizes (None: not run)
    share_relevant: float | None  # of the pooled hits, the labels reading only
    threshold: float | None
    self_preference: SelfPreferenceShown | None


@dataclass
class ZooSystem:
    name: str
    kind: str
    human: dict[str, float]  # metric -> mean over the queries, as trec_eval computes it
    judged_at_k: float  # the share of its top k hits the qrels judge
    labelers: dict[str, float]  # labeler -> the primary metric under its primary reading


@dataclass
class LeaderboardSection:
    """The labeler leaderboard (``relevance-grader zoo``'s leaderboard.json): each labeler by how
    well its ranking of the zoo's systems matches the human one."""

    source: str  # the file it was read from
    collection: str
    qrels: str
    queries: int
    k: int
    metric: str  # the primary metric the τ columns rank by (ndcg@k)
    pooled_pairs: int
    human_share_relevant: float
    resamples: int
    rows: list[LabelerRow]  # best τ first, as the Markdown leaderboard orders them
    ppi_sizes: list[int]  # the numbers of judged queries of the PPI++ columns
    people_only: list[DrawnTaus]  # the judged queries alone, without a labeler
    human_metrics: list[str]
    primary_readings: dict[str, str]  # labeler -> the reading the systems table shows
    systems: list[ZooSystem]  # best human primary metric first
    skipped: dict[str, str]  # systems not built, and why
    legend: str  # the labelers' columns, in the Markdown leaderboard's words
    marks: str  # what the marks of the cells say (undefined, no interval, –)
    systems_legend: str


@dataclass
class AucDifference:
    """A grader's per-query ROC-AUC minus a baseline's, over the queries both label, with its
    Student-t 95% interval over those queries (``eval.crossval``)."""

    baseline: str
    queries: int
    mean: float | None
    low: float | None
    high: float | None
    beats: bool  # the interval lies above zero


@dataclass
class PooledRow:
    """One model's out-of-fold predictions of every fold, pooled."""

    model: str
    name: str  # as the job's report.md names it
    baseline: bool
    pairs: int
    queries: int
    metrics: dict[str, float | None]  # HeldOut.columns' keys
    differences: list[AucDifference] = field(default_factory=list)  # a grader's, per baseline
    beats_every_baseline: bool | None = None


@dataclass
class FoldRow:
    fold: int
    roc_auc: dict[str, float | None]  # model -> ROC-AUC on this fold's test pairs
    queries: dict[str, int] = field(default_factory=dict)  # split -> queries
    test_pairs: int | None = None


@dataclass
class HeldOut:
    """The grader's held-out quality beside the baselines (the main job): k-fold
    cross-validation by query, pooled over the folds, and ROC-AUC fold by fold."""

    folds: int = 0
    source: str | None = None  # the reference labels: "human judgments" or "teacher labels"
    columns: list[list[str]] = field(default_factory=list)  # [key, title] of PooledRow.metrics
    rows: list[PooledRow] = field(default_factory=list)
    per_fold: list[FoldRow] = field(default_factory=list)
    export_fold: int | None = None  # the fold whose grader is exported and labels the runs
    extra: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # other row tables


@dataclass
class Command:
    name: str
    command: str


class _Export(TypedDict):
    path: str


class ExportShown(_Export, total=False):
    """The exported grader behind a ``grader:PATH`` labeler, as the page lists it (only its path
    where its description is not here)."""

    base_model: str | None
    mode: str | None
    input_format: str  # NAME@VERSION
    max_length: int | None
    threshold: float | None
    calibration: dict[str, Any] | None
    format_version: int
    round_trip_max_abs_difference: float | None  # export_check.json's, where it is here


@dataclass
class Provenance:
    folder: str
    labeler: str | None
    k: int | None
    export: ExportShown | None
    commands: list[Command]
    evaluated: dict[str, Any] | None  # date, versions and machine of the evaluation, if recorded
    page: dict[str, Any]  # date, versions and machine of this page
    settings: dict[str, Any] | None = None
    seconds: float | None = None
    stage_seconds: dict[str, float | None] | None = None
    # Each stage's time as the page states it: "12.3", or "skipped (done earlier, 12.3 s)".
    stage_times: dict[str, str] | None = None
    total_note: str = ""  # after the total: the stages a re-run skipped and what they took


@dataclass
class Report:
    title: str
    kind: str  # "search" (an eval.search folder), "main job" or "zoo" (relevance-grader zoo)
    headline: Headline | None  # None: a zoo folder (no evaluation of runs)
    queries: list[QueryRow]
    documents: dict[str, Document]
    provenance: Provenance
    agreement: LabelAgreement | None = None
    ranking: Ranking | None = None
    held_out: HeldOut | None = None
    leaderboard: LeaderboardSection | None = None
    notes: list[str] = field(default_factory=list)  # what could not be shown, and why

    def telling_query(self) -> str | None:
        """The query most worth opening: the judged one where labeler and people disagree most,
        else the first whose hits are embedded (the docs' screenshot opens it)."""
        embedded = [row for row in self.queries if row.hits is not None]
        if not embedded:
            return None
        return max(embedded, key=lambda row: (row.disagreements, row.judged)).qid

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values; a non-finite number (an infinite 'worth', a NaN τ) becomes None."""
        return strict(asdict(self))
