"""metrics.json's ``ppi`` section, typed: eval.search's PPI++ estimates of every run's metrics
(and each compared run's paired difference) from human-judged queries, the relevant share of hits
from judged hits, and how each sample was drawn. eval.search writes it, summary.json copies it,
and eval.report, eval.history, eval.jobs and judgments.draw's pilot read it by attribute.

The section is written with the keys its writer sets and no others (:meth:`PpiRecord.dump`),
and a statistic that is undefined stays, as null; a key this release does not write is refused."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IntervalRecord(_Record):
    """One interval (judgments.ppi.Interval): a mean's estimate and its two-sided interval."""

    estimate: float
    low: float
    high: float
    n: int  # human-judged queries (or hits)
    unjudged: int  # units with the labeler's value only
    lam: float  # 0: classical (human only); 1: plain PPI
    method: str
    # The standard error and the t's degrees of freedom behind a t or normal interval; null for
    # Wilson's and Hoeffding's.
    se: float | None = None
    df: float | None = None
    width: float


class EstimateRecord(_Record):
    """One metric of one run (or of one paired difference): the labeler's mean over every query,
    the human-only interval and the PPI++ interval (judgments.ppi.MetricEstimates)."""

    labeler_mean: float
    queries: int
    human_only: IntervalRecord
    ppi: IntervalRecord
    effective_human_queries: float | None = None  # what the labeler is worth, in judged queries
    # A paired difference's p-value of "no difference", and Holm's adjustment of it over the
    # primary metric's differences (only there); absent from a run's own estimates.
    p_value: float | None = None
    p_holm: float | None = None


Estimates = dict[str, EstimateRecord]  # metric -> its estimates


class MeasuredCoverage(_Record):
    """A metric's measured coverage at a number of judged queries (judgments.coverage): the lowest
    over every population studied. ``at_n`` other than the record's judged_queries: that n was
    not studied, and this is the lowest at the studied sizes around it."""

    coverage: float
    at_n: int  # the studied size it was lowest at
    below_target: bool
    target: float
    source: str = ""
    population: str = ""  # the population it was lowest on (absent from earlier files)
    populations: int | None = None  # how many populations were studied at at_n


class Multiplicity(_Record):
    """How the differences are called significant."""

    primary: str
    method: str
    alpha: float
    rule: str  # in words, for the table's and the report's legend


class SampleCheck(_Record):
    """Whether judged queries of unknown design look like a random sample of the queries."""

    test: str
    p: float
    random_plausible: bool


class SampleDescription(_Record):
    """How a human sample was drawn: relevance-grader ppi's draw (its design, seed and sources) or
    unknown."""

    drawn_by: str | None  # "relevance-grader ppi", or None: unknown
    design: str
    seed: int | None = None
    sources: dict[str, Any] | None = None  # the draw's inputs (judgments.design.Design.sources)
    check: SampleCheck | None = None  # eval.search's check of a sample of unknown design


class PpiRecord(_Record):
    """metrics.json's ``ppi``: with --human, every run's metrics and each compared run's paired
    difference with the first; with --human_pairs, each run's relevant share of its top-k hits."""

    human: str | None = None  # --human (absent with --human_pairs alone)
    human_scale: str | None = None  # the scale its values were read on, in words
    judged_queries: int
    estimator: str  # in words
    confidence: float
    runs: dict[str, Estimates]  # run -> metric -> estimates
    differences: dict[str, Estimates]  # "other - first" -> metric -> estimates
    measured_coverage: dict[str, MeasuredCoverage | None] = {}  # metric -> at judged_queries
    multiplicity: Multiplicity | None = None
    sample: SampleDescription | None = None  # how --human's queries were drawn
    pairs: dict[str, Estimates] = {}  # run -> {"relevant share": estimates}
    judged_pairs: int = 0
    judged_pairs_used: dict[str, int] = {}  # run -> judged hits in its top k
    pairs_sample: SampleDescription | None = None  # how --human_pairs' hits were drawn

    def dump(self) -> dict[str, Any]:
        """The section's JSON object: the keys set when it was built or read, nulls kept."""
        return self.model_dump(mode="json", exclude_unset=True)
