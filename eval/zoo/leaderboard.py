"""The labeler leaderboard: every labeler's system ranking on the zoo against the human one.

Each labeler labels the zoo's pool once (the union of the systems' top k: a pair several systems
return is labelled once, through the shared label cache), and each system is scored on the pool's
labels as TREC pools judgments. The human ranking is the systems' metrics under the qrels as
trec_eval computes them (linear gains on the 0-3 grades for NDCG, relevant from grade 2 for
precision and MAP, unjudged hits not relevant). Metrics come from ranx, in trec_eval's tie order.
"""

from __future__ import annotations

import fnmatch
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from core.records import label_from_grade
from data.beir import Collection, Qrels, Run, ranked
from judgments.ranking import DrawnTaus, corrected_ranking_taus, people_only_taus
from measure.labelers import Hit, HitLabel, Labeler
from measure.metrics.retrieval import in_trec_eval_order
from measure.metrics.system_ranking import (
    bootstrap_interval,
    kendall_tau,
    largest_rank_error,
    lift,
    spearman_rho,
    tau_ap,
    top_overlap,
)
from measure.zoo.record import (
    Agreement,
    DrawnTausRecord,
    Estimate,
    RankErrorRecord,
    ReadingResult,
    SelfPreference,
)

Pool = dict[str, list[str]]  # qid -> the documents some system returned in its top k
Labels = dict[tuple[str, str], HitLabel]
Matrix = np.ndarray  # systems × queries


def metric_names(k: int) -> tuple[str, str, str]:
    return f"ndcg@{k}", f"p@{k}", f"map@{k}"


def pool_of(runs: Mapping[str, Run], qids: Sequence[str], k: int) -> Pool:
    pool: Pool = {}
    for qid in qids:
        docs = {doc_id for run in runs.values() for doc_id, _ in ranked(run.get(qid, {}))[:k]}
        pool[qid] = sorted(docs)
    return pool


def label_pool(labeler: Labeler, collection: Collection, pool: Pool) -> Labels:
    """Every pooled pair's label, asked of the labeler in one batched call (its cache groups and
    keeps them as they come, so a killed run resumes)."""
    requests = []
    for qid, docs in pool.items():
        hits = [Hit(d, collection.corpus[d].text, collection.corpus[d].title or None) for d in docs]
        requests.append((qid, collection.queries[qid], hits))
    labelled = labeler.label_many(requests)
    return {
        (qid, hit.doc_id): label
        for (qid, _, hits), labels in zip(requests, labelled, strict=True)
        for hit, label in zip(hits, labels, strict=True)
    }


@dataclass(frozen=True)
class ScoreMapping:
    """A score labeler's calibration from validation queries (a study's baseline row): Platt
    scaling, then temperature, then the threshold on the result."""

    slope: float
    intercept: float
    temperature: float
    threshold: float

    @classmethod
    def read(cls, path: str) -> ScoreMapping:
        from core.errors import InputError
        from measure.classification.checkpoint import CheckpointMetrics

        metrics = CheckpointMetrics.read(path)
        mapping = metrics.score_mapping or {}
        if "slope" not in mapping or metrics.threshold is None or metrics.calibration is None:
            raise InputError(
                f"{path}: not a calibrated baseline row (no score_mapping, calibration or "
                "threshold): give a relevance-grader study baseline's metrics.json"
            )
        return cls(
            float(mapping["slope"]),
            float(mapping["intercept"]),
            float(metrics.calibration.temperature),
            float(metrics.threshold),
        )

    def probability(self, score: float) -> float:
        from core.metrics import apply_temperature

        platt = 1.0 / (1.0 + np.exp(-(self.slope * score + self.intercept)))
        return float(apply_temperature(np.array([platt]), self.temperature)[0])


@dataclass
class Reading:
    """A labeler's labels read one way: each pooled pair's NDCG gain and verdict (None: the
    reading gives no verdict, so no precision or MAP), and whether gains are probabilities."""

    name: str
    gains: dict[tuple[str, str], float]
    relevant: dict[tuple[str, str], bool] | None
    probabilities: bool
    threshold: float | None = None


def readings(labels: Labels, verdicts: bool, mapping: ScoreMapping | None) -> list[Reading]:
    """The ways a labeler's labels can be read: ``labels`` (its verdicts, or a calibrated
    score at its threshold) and ``scores`` (P(relevant) as the gain; an uncalibrated score
    itself, which NDCG reads without a scale: only its order and ratios within a query count)."""
    out = []
    scored = all(label.score is not None for label in labels.values())
    if mapping is not None and scored:
        p = {pair: mapping.probability(label.score) for pair, label in labels.items()}
        relevant = {pair: value >= mapping.threshold for pair, value in p.items()}
        out.append(
            Reading(
                "labels",
                {k: float(v) for k, v in relevant.items()},
                relevant,
                False,
                mapping.threshold,
            )
        )
        out.append(Reading("scores", p, None, True))
        return out
    if verdicts:
        gains = {pair: float(label.gain_grade) for pair, label in labels.items()}
        relevant = {pair: bool(label.relevant) for pair, label in labels.items()}
        thresholds = {label.threshold for label in labels.values()} - {None}
        threshold = thresholds.pop() if len(thresholds) == 1 else None
        out.append(Reading("labels", gains, relevant, False, threshold))
    if scored:
        probabilities = verdicts  # a verdict-giving labeler's score is its P(relevant)
        gains = {pair: max(0.0, float(label.score)) for pair, label in labels.items()}
        out.append(Reading("scores", gains, None, probabilities))
    return out


def _ranx(
    qrels: Qrels, runs: Sequence[Run], qids: Sequence[str], k: int, metrics: list[str]
) -> dict[str, Matrix]:
    """Per-query values of ranx ``metrics`` over each run's top k: systems × ``qids`` matrices.

    All systems go to ranx in one call, each query asked once per system under a key of its
    own: a call per system cost ranx's setup hundreds of times a leaderboard."""
    from ranx import Qrels as RanxQrels
    from ranx import Run as RanxRun
    from ranx import evaluate

    keys = [[f"{system}\t{qid}" for qid in qids] for system in range(len(runs))]
    asked: dict[str, dict[str, float]] = {}
    judged: dict[str, dict[str, int]] = {}
    for run, run_keys in zip(runs, keys, strict=True):
        top = in_trec_eval_order({q: run.get(q) or {"__no_hit__": 0.0} for q in qids}, k)
        for qid, key in zip(qids, run_keys, strict=True):
            asked[key] = top[qid]
            judged[key] = qrels.get(qid) or {"__none__": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranx_run = RanxRun(asked)
        values = evaluate(
            RanxQrels(judged), ranx_run, metrics, return_mean=False, make_comparable=True
        )
    if not isinstance(values, dict):
        values = {metrics[0]: values}
    position = {key: i for i, key in enumerate(ranx_run.keys())}
    order = np.array([[position[key] for key in run_keys] for run_keys in keys])
    return {name: np.asarray(v, dtype=np.float64)[order] for name, v in values.items()}


def human_matrices(
    qrels: Qrels, runs: Mapping[str, Run], qids: Sequence[str], k: int
) -> dict[str, Matrix]:
    """Each system's per-query NDCG@k (linear gains on the grades), P@k and MAP@k (relevant from
    grade 2) under the qrels, as trec_eval's ndcg_cut, P and map_cut compute them."""
    ndcg, p, ap = metric_names(k)
    graded = {q: {d: int(g) for d, g in docs.items() if g > 0} for q, docs in qrels.items()}
    binary = {
        q: {d: 1 for d, g in docs.items() if label_from_grade(int(g))} for q, docs in qrels.items()
    }
    systems = list(runs.values())
    binary_values = _ranx(binary, systems, qids, k, [f"precision@{k}", f"map@{k}"])
    return {
        ndcg: _ranx(graded, systems, qids, k, [f"ndcg@{k}"])[f"ndcg@{k}"],
        p: binary_values[f"precision@{k}"],
        ap: binary_values[f"map@{k}"],
    }


def reading_matrices(
    reading: Reading, runs: Mapping[str, Run], pool: Pool, k: int
) -> dict[str, Matrix]:
    """Each system's per-query metrics on the pool's labels read this way: NDCG@k with the
    reading's gains; P@k and MAP@k from its verdicts, or P@k as the mean P(relevant) of the top k
    where the gains are probabilities (no MAP without verdicts)."""
    ndcg, p, ap = metric_names(k)
    qids = list(pool)
    systems = list(runs.values())
    # ranx takes whole-number relevance: gains in millionths are the same linear gains.
    gains = {
        q: {d: round(reading.gains[(q, d)] * 1e6) for d in docs if reading.gains[(q, d)] > 0}
        for q, docs in pool.items()
    }
    out = {ndcg: _ranx(gains, systems, qids, k, [f"ndcg@{k}"])[f"ndcg@{k}"]}
    if reading.relevant is not None:
        relevant = {q: {d: 1 for d in docs if reading.relevant[(q, d)]} for q, docs in pool.items()}
        values = _ranx(relevant, systems, qids, k, [f"precision@{k}", f"map@{k}"])
        out[p], out[ap] = values[f"precision@{k}"], values[f"map@{k}"]
    elif reading.probabilities:
        out[p] = np.asarray(
            [
                [
                    sum(reading.gains[(q, d)] for d, _ in ranked(run.get(q, {}))[:k]) / k
                    for q in qids
                ]
                for run in systems
            ],
            dtype=np.float64,
        )
    return out


def share_relevant(reading: Reading) -> float | None:
    if reading.relevant is None or not reading.relevant:
        return None
    return sum(reading.relevant.values()) / len(reading.relevant)


def _estimate(human: Matrix, labeler: Matrix, statistic, resamples: int, seed: int) -> Estimate:
    value = statistic(human.mean(axis=1), labeler.mean(axis=1))
    interval = (
        bootstrap_interval(human, labeler, statistic, resamples, seed)
        if value is not None
        else None
    )
    return Estimate(
        value=value,
        low=interval[0] if interval else None,
        high=interval[1] if interval else None,
    )


def agreement(human: Matrix, labeler: Matrix, resamples: int, seed: int) -> Agreement:
    return Agreement(
        kendall_tau=_estimate(human, labeler, kendall_tau, resamples, seed),
        tau_ap=_estimate(human, labeler, tau_ap, resamples, seed),
        spearman_rho=_estimate(human, labeler, spearman_rho, resamples, seed),
    )


def self_preference(
    human: Matrix,
    labeler: Matrix,
    names: Sequence[str],
    own: Sequence[str],
    resamples: int,
    seed: int,
) -> SelfPreference | None:
    """How far the labeler lifts its own systems, with an interval over queries, and τ over the
    other systems."""
    mask = np.array([name in own for name in names])
    if not mask.any():
        return None

    def lifted(reference: np.ndarray, estimate: np.ndarray) -> float | None:
        return lift(reference, estimate, mask)

    others = ~mask
    return SelfPreference(
        own_systems=[n for n in names if n in own],
        lift=_estimate(human, labeler, lifted, resamples, seed),
        tau_without_own=kendall_tau(human[others].mean(axis=1), labeler[others].mean(axis=1))
        if others.sum() >= 2
        else None,
    )


def drawn_record(taus: DrawnTaus) -> DrawnTausRecord:
    return DrawnTausRecord(**taus.__dict__)


def reading_result(
    name: str,
    spec: str,
    reading: Reading,
    human: dict[str, Matrix],
    matrices: dict[str, Matrix],
    systems: Sequence[str],
    own: Sequence[str],
    settings: LeaderboardSettings,
) -> ReadingResult:
    primary = metric_names(settings.k)[0]
    h, f = human[primary].mean(axis=1), matrices[primary].mean(axis=1)
    tied = np.ptp(f) == 0
    error = largest_rank_error(h, f, systems)
    return ReadingResult(
        labeler=name,
        spec=spec,
        reading=reading.name,
        means={
            system: {m: float(values[i].mean()) for m, values in matrices.items()}
            for i, system in enumerate(systems)
        },
        agreement={
            m: agreement(human[m], values, settings.resamples, settings.seed)
            for m, values in matrices.items()
        },
        top1=None if tied else bool(top_overlap(h, f, 1) == 1.0),
        top3=top_overlap(h, f, 3),
        largest_error=None
        if tied
        else RankErrorRecord(
            places=error.places,
            system=error.system,
            human_rank=error.reference_rank,
            labeler_rank=error.estimate_rank,
        ),
        share_relevant=share_relevant(reading),
        threshold=reading.threshold,
        self_preference=self_preference(
            human[primary], matrices[primary], systems, own, settings.resamples, settings.seed
        ),
        ppi=[
            drawn_record(
                corrected_ranking_taus(
                    human[primary], matrices[primary], n, settings.ppi_draws, settings.seed
                )
            )
            for n in settings.ppi_queries
            if n < human[primary].shape[1]
        ],
    )


@dataclass(frozen=True)
class LeaderboardSettings:
    k: int = 10
    resamples: int = 1000
    ppi_queries: tuple[int, ...] = (10, 20)
    ppi_draws: int = 200
    seed: int = 0


def people_only(human: dict[str, Matrix], settings: LeaderboardSettings) -> list[DrawnTausRecord]:
    primary = human[metric_names(settings.k)[0]]
    return [
        drawn_record(people_only_taus(primary, n, settings.ppi_draws, settings.seed))
        for n in settings.ppi_queries
        if n < primary.shape[1]
    ]


def own_systems(
    identity: str, scorers_of: Mapping[str, set[str]], patterns: Sequence[str] = ()
) -> list[str]:
    """The systems built on this labeler's scores (their scorers include its identity), and
    those matching ``patterns`` (systems it is related to another way: shared weights)."""
    return [
        name
        for name, scorers in scorers_of.items()
        if identity in scorers or any(fnmatch.fnmatchcase(name, p) for p in patterns)
    ]


def judged_share(qrels: Qrels, run: Run, qids: Sequence[str], k: int) -> float:
    """The share of the run's top-k hits the qrels judge (of those it returned)."""
    hits = [(q, d) for q in qids for d, _ in ranked(run.get(q, {}))[:k]]
    return sum(d in qrels.get(q, {}) for q, d in hits) / max(1, len(hits))
