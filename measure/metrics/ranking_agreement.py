"""Agreement of system rankings: do grader labels rank retrieval systems as humans do?
(`data.judge_agreement` is the other agreement: a judge's labels against human labels, pair by pair.)

    relevance-grader ranking-agreement --runs runs/candidates/bm25.trec runs/candidates/dense.trec runs/dense-grader.trec \\
        --corpus data/collections/trec-dl-2019-passage \\
        --labelers grader:runs/export/grader judgments:runs/labels/smollm2.jsonl \\
        --reference qrels:data/collections/trec-dl-2019-passage/qrels.tsv --metric ndcg@10 --out runs/agreement

Each labeler (and the reference) labels every run's top-k; runs are scored with the metric on
labels pooled over the runs; Kendall's τ (and Spearman's ρ) compare each labeler's ordering of
the systems with the reference's. Also reported: the per-run scores under every labeler.

A pair that the reference or a labeler has no label for (a ``judgments:`` file's unusable reply,
kept as an error record, or a pair it never judged) is left out of every run for every labeler
before any labelling: each run's ranking without it (a condensed list: the hits below move up),
so every labeler scores the same hits. A query that loses every hit of some run is left out
whole. What was left out is counted in ``agreement.json`` (``left_out``) and printed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from core.artifacts import Artifact
from core.cli import parse_config, run_main
from core.errors import InputError
from core.io import markdown_table
from data.beir import Document, Run, ranked, read_named_runs, read_texts
from measure.labelers import PARTIAL_KINDS, Labeler, make_labeler
from measure.metrics.labelling import label_runs
from measure.metrics.retrieval import mean_metrics, pooled_metrics


class LeftOut(BaseModel):
    """The pairs of the runs' top k some labeler has no label for, by reason, and the queries
    that lost every hit of a run."""

    pairs: int
    of_pairs: int
    reasons: dict[str, int]
    queries: list[str]
    of_queries: int


class LabelerAgreement(BaseModel):
    # None where the statistic is undefined: a labeler (or the reference) that gives every run
    # the same score ranks nothing, and scipy answers NaN, which JSON writes as null.
    kendall_tau: float | None
    kendall_p: float | None
    spearman_rho: float | None
    ranking: list[str]  # the runs, best first, under this labeler

    def tau_text(self, digits: int = 3) -> str:
        return _shown(self.kendall_tau, f".{digits}f")


class RankingAgreement(Artifact):
    """agreement.json: each run's metric under each labeler and the reference, and each
    labeler's agreement with the reference's system ranking."""

    FILE = "agreement.json"
    FORMAT_VERSION = 1
    metric: str
    reference: str
    scores: dict[str, dict[str, float]]  # labeler -> run -> metric
    left_out: LeftOut | None = None
    agreement: dict[str, LabelerAgreement]
    reference_ranking: list[str]


@dataclass
class SystemAgreementConfig:
    runs: list[str] = field(
        default_factory=list, metadata={"help": "TREC runs (two or more systems)."}
    )
    corpus: str = field(default="", metadata={"help": "BEIR folder with documents and queries."})
    labelers: list[str] = field(
        default_factory=list, metadata={"help": "Labelers to test (grader:, judgments:, judge:)."}
    )
    reference: str = field(
        default="", metadata={"help": "The reference labeler, usually qrels:HUMAN_QRELS."}
    )
    metric: str = field(default="ndcg@10", metadata={"help": "Metric that ranks the systems."})
    k: int = field(default=10)
    out: str = field(
        default="runs/agreement",
        metadata={
            "help": "Folder for agreement.json and the label cache (default: runs/agreement)."
        },
    )
    label_cache: str | None = field(
        default=None, metadata={"help": "Label cache folder (default: OUT/labels)."}
    )


def system_scores(
    config: SystemAgreementConfig,
    spec: str,
    runs: dict[str, Run],
    texts: tuple[dict[str, Document], dict[str, str]],
    labeler: Labeler | None = None,
) -> dict[str, float]:
    """Each run's metric under ``spec`` (built here unless given: one model in memory at once),
    its hits read from ``texts`` (the corpus and the queries)."""
    labeler = labeler or make_labeler(
        spec, cache_dir=config.label_cache or Path(config.out) / "labels"
    )
    results = label_runs(labeler, runs, *texts, config.k)
    per_run = pooled_metrics(runs, results, config.k)
    means = {name: mean_metrics(per_metric) for name, per_metric in per_run.items()}
    if config.metric not in next(iter(means.values())):
        raise InputError(
            f"metric: {config.metric!r} is not computed; try one of {sorted(next(iter(means.values())))}"
        )
    return {name: metrics[config.metric] for name, metrics in means.items()}


def _why_unlabelled(labelers: dict[str, Labeler], qid: str, doc_id: str) -> str | None:
    """The first labeler (the reference first) with no label for the pair, and why."""
    for spec, labeler in labelers.items():
        reason = labeler.cannot_label(qid, doc_id)
        if reason is not None:
            return f"{spec}: {reason}"
    return None


def _condense_query(
    scores: dict[str, float], qid: str, labelers: dict[str, Labeler], k: int
) -> tuple[dict[str, float], dict[tuple[str, str], str]]:
    """One query of a run without its unlabelled hits, and why each of its top k left."""
    top = {doc_id for doc_id, _ in ranked(scores)[:k]}
    kept, left = {}, {}
    for doc_id, score in scores.items():
        why = _why_unlabelled(labelers, qid, doc_id)
        if why is None:
            kept[doc_id] = score
        elif doc_id in top:
            left[(qid, doc_id)] = why
    return kept, left


def condense(
    runs: dict[str, Run], labelers: dict[str, Labeler], k: int
) -> tuple[dict[str, Run], LeftOut]:
    """The runs without the pairs some labeler has no label for, and what was left out: the
    distinct pairs of the runs' top k by reason, and the queries that lost every hit of a run."""
    reasons: dict[tuple[str, str], str] = {}
    condensed: dict[str, Run] = {name: {} for name in runs}
    for name, run in runs.items():
        for qid, scores in run.items():
            condensed[name][qid], left = _condense_query(scores, qid, labelers, k)
            reasons.update(left)
    emptied = sorted({qid for run in condensed.values() for qid, kept in run.items() if not kept})
    for run in condensed.values():
        for qid in emptied:
            del run[qid]
    counts = Counter(reasons.values())
    top_k = {(qid, d) for run in runs.values() for qid, s in run.items() for d, _ in ranked(s)[:k]}
    return condensed, LeftOut(
        pairs=len(reasons),
        of_pairs=len(top_k),
        reasons=dict(counts),
        queries=emptied,
        of_queries=len(next(iter(runs.values()))),
    )


def left_out_note(left_out: LeftOut | None) -> str | None:
    """One line on what the agreement left out (None: nothing)."""
    if not left_out or not (left_out.pairs or left_out.queries):
        return None
    reasons = ", ".join(f"{count} {why}" for why, count in sorted(left_out.reasons.items()))
    note = (
        f"{left_out.pairs} of the {left_out.of_pairs} pairs in the runs' top k lack a label "
        f"({reasons}) and are left out of every run for every labeler"
    )
    if left_out.queries:
        note += (
            f"; {len(left_out.queries)} of {left_out.of_queries} queries lost every hit of "
            f"a run and are left out (first: {left_out.queries[0]!r})"
        )
    return note


def agreement(config: SystemAgreementConfig) -> RankingAgreement:
    from scipy.stats import kendalltau, spearmanr

    if len(config.runs) < 2:
        raise InputError("runs: give at least two runs to rank")
    if not config.reference or not config.labelers:
        raise InputError("give --reference and at least one --labelers entry")
    # Labelers that may lack pairs (the reference first): asked before any labelling.
    partial = {
        spec: make_labeler(spec)
        for spec in [config.reference, *config.labelers]
        if spec.partition(":")[0] in PARTIAL_KINDS
    }
    runs, left_out = condense(read_named_runs(config.runs, "runs"), partial, config.k)
    if not next(iter(runs.values())):
        raise InputError(f"no query keeps a labelled hit in every run: {left_out_note(left_out)}")
    texts = read_texts(config.corpus)
    reference = system_scores(config, config.reference, runs, texts, partial.get(config.reference))
    names = sorted(runs)
    scores, agreements = {config.reference: reference}, {}
    for spec in config.labelers:
        scores[spec] = system_scores(config, spec, runs, texts, partial.get(spec))
        ours = [scores[spec][n] for n in names]
        tau = kendalltau([reference[n] for n in names], ours)
        rho = spearmanr([reference[n] for n in names], ours)
        agreements[spec] = LabelerAgreement(
            kendall_tau=_defined(tau.statistic),
            kendall_p=_defined(tau.pvalue),
            spearman_rho=_defined(rho.statistic),
            ranking=sorted(names, key=lambda n, s=scores[spec]: -s[n]),
        )
    result = RankingAgreement(
        metric=config.metric,
        reference=config.reference,
        scores=scores,
        left_out=left_out,
        agreement=agreements,
        reference_ranking=sorted(names, key=lambda n: -reference[n]),
    )
    result.write(Path(config.out) / RankingAgreement.FILE)
    return result


def _defined(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def _shown(value: float | None, spec: str) -> str:
    return "undefined (tied scores)" if value is None else format(value, spec)


def scores_table(result: RankingAgreement, digits: int = 4) -> str:
    """Each run's metric under each labeler, in the reference's order (Markdown)."""
    labelers = list(result.scores)
    rows = [
        [run, *(f"{result.scores[spec][run]:.{digits}f}" for spec in labelers)]
        for run in result.reference_ranking
    ]
    return markdown_table(["run", *labelers], rows)


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([SystemAgreementConfig], args)
    result = agreement(config)
    note = left_out_note(result.left_out)
    if note:
        print(f"note: {note}")
    print(scores_table(result), end="")
    print(f"wrote {Path(config.out) / 'agreement.json'}")
    for spec, entry in result.agreement.items():
        print(
            f"{spec}: Kendall's τ = {entry.tau_text()} (p = {_shown(entry.kendall_p, '.2g')}) "
            f"vs {config.reference} (Spearman's ρ = {_shown(entry.spearman_rho, '.3f')})"
        )


if __name__ == "__main__":
    run_main(main)
