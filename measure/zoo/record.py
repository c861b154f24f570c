"""leaderboard.json: the system zoo's human ranking and every labeler's agreement with it (the
record ``relevance-grader zoo`` writes and the main job's report and README read)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from core.artifacts import Artifact

READINGS = ("labels", "scores")


class Estimate(BaseModel):
    """A statistic on all the queries and its 95% percentile-bootstrap interval over queries
    (low/high None: not estimable, the statistic undefined in a resample or without spread)."""

    value: float | None
    low: float | None = None
    high: float | None = None


class Agreement(BaseModel):
    """One metric's system ranking under a labeler's reading against the human one."""

    kendall_tau: Estimate
    tau_ap: Estimate
    spearman_rho: Estimate


class RankErrorRecord(BaseModel):
    places: float
    system: str
    human_rank: float
    labeler_rank: float


class DrawnTausRecord(BaseModel):
    """τ over random draws of ``judged`` human-judged queries (judgments.ranking.DrawnTaus)."""

    judged: int
    draws: int
    mean: float | None
    sd: float | None
    low: float | None  # 5th percentile of the draws
    high: float | None  # 95th
    undefined: int = 0


class SelfPreference(BaseModel):
    """How far a labeler lifts the systems built on its own scores above their human rank
    (places, averaged over them; negative: below), and τ over the other systems alone."""

    own_systems: list[str]
    lift: Estimate
    tau_without_own: float | None


class ReadingResult(BaseModel):
    """A labeler read one way: ``labels`` (its verdicts, or a calibrated score at its
    threshold: NDCG's gains are its grades) or ``scores`` (P(relevant) itself as NDCG's gain,
    no threshold; for an uncalibrated score, the score)."""

    labeler: str
    spec: str
    reading: str
    means: dict[str, dict[str, float]]  # system -> metric -> mean over queries
    agreement: dict[str, Agreement]  # metric -> agreement with the human ranking
    top1: bool | None
    top3: float | None
    largest_error: RankErrorRecord | None
    share_relevant: float | None = None  # of the pooled hits, labels reading only
    threshold: float | None = None
    self_preference: SelfPreference | None = None
    ppi: list[DrawnTausRecord] = Field(default_factory=list)


class SystemRecord(BaseModel):
    name: str
    kind: str
    human: dict[str, float]  # metric -> mean over the queries, as trec_eval computes it
    judged_at_k: float  # share of its top k hits the qrels judge
    seconds: float  # building time (0: built earlier)


class Leaderboard(Artifact):
    FILE = "leaderboard.json"
    FORMAT_VERSION = 1
    collection: str
    qrels: str
    queries: int
    k: int
    pooled_pairs: int
    human_share_relevant: float  # of the pooled hits, by the qrels (unjudged: not relevant)
    resamples: int
    systems: list[SystemRecord]
    skipped: dict[str, str] = Field(default_factory=dict)
    people_only: list[DrawnTausRecord] = Field(default_factory=list)
    readings: list[ReadingResult]

    def reading(self, labeler: str, reading: str) -> ReadingResult | None:
        return next(
            (r for r in self.readings if r.labeler == labeler and r.reading == reading), None
        )
