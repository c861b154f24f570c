"""The labeler leaderboard for the report: a ``relevance-grader zoo`` leaderboard.json (the main
job's ``zoo/``, or a zoo output folder of its own) as the page's section, in the words of the
Markdown leaderboard (eval.report.leaderboard_markdown) so both say the same."""

from __future__ import annotations

from core.provenance import environment
from eval.report.inputs import ZooInputs
from eval.report.leaderboard_markdown import NO_INTERVAL, UNDEFINED, labelers_legend
from eval.report.model import (
    DrawnTaus,
    LabelerRow,
    LeaderboardSection,
    Provenance,
    RankError,
    RankEstimate,
    Report,
    SelfPreferenceShown,
    ZooSystem,
)
from measure.zoo.record import (
    DrawnTausRecord,
    Estimate,
    Leaderboard,
    ReadingResult,
    SelfPreference,
)

# What the page prints beyond the Markdown's columns: the marks of its cells and the systems
# table, in words, under the tables that carry them.
MARKS = (
    f"“{UNDEFINED}”: the labeler gives every system the same mean, so the statistic has no "
    f"value. “{NO_INTERVAL}”: the statistic was undefined in a bootstrap resample (it tied every "
    "system there) or took the same value in every resample; an interval of zero width would "
    "claim a certainty the queries do not give. –: does not apply to this row (top 1 and the "
    "largest rank error of a labeler that ties every system; calls relevant of a scores reading, "
    "which gives no verdicts; lift of a labeler none of whose systems is in the zoo; a PPI++ "
    "column with as many judged queries as the leaderboard has). Under a labels reading: the "
    "threshold its verdicts come from, where it has one. A lift in red: its interval lies above "
    "zero, the labeler ranks its own systems higher than people do; under it, τ over the other "
    "systems alone. PPI++: where some draws tied every system, how many (left out of the mean)."
)
SYSTEMS_LEGEND = (
    "Human {metrics}: each system's mean over the judged queries under the human judgments, as "
    "trec_eval computes them (linear gains on the 0–3 grades for NDCG; relevant from grade 2 for "
    "precision and MAP; an unjudged hit is not relevant). Judged@{k}: the share of the system's "
    "top {k} hits the human judgments judge: a system with few judged hits is ranked by people "
    "on little. Then each labeler's {metric} under the reading its column names (scores where it "
    "has them, else its labels), from which its τ above is computed. Best human {metric} first."
)


def rank_estimate(estimate: Estimate) -> RankEstimate:
    """The record's estimate with the words its cell prints where it has no value or interval."""
    if estimate.value is None:
        return RankEstimate(None, note=UNDEFINED)
    if estimate.low is None or estimate.high is None:
        return RankEstimate(estimate.value, note=NO_INTERVAL)
    return RankEstimate(estimate.value, estimate.low, estimate.high)


def drawn(record: DrawnTausRecord) -> DrawnTaus:
    return DrawnTaus(
        record.judged,
        record.draws,
        record.mean,
        record.low,
        record.high,
        record.undefined,
        note=UNDEFINED if record.mean is None else None,
    )


def _self_preference(preference: SelfPreference | None) -> SelfPreferenceShown | None:
    if preference is None:
        return None
    return SelfPreferenceShown(
        preference.own_systems, rank_estimate(preference.lift), preference.tau_without_own
    )


def labeler_row(result: ReadingResult, metric: str, sizes: list[int]) -> LabelerRow:
    agreement = result.agreement[metric]
    error = result.largest_error
    by_size = {row.judged: row for row in result.ppi}
    return LabelerRow(
        labeler=result.labeler,
        spec=result.spec,
        reading=result.reading,
        tau=rank_estimate(agreement.kendall_tau),
        tau_ap=rank_estimate(agreement.tau_ap),
        rho=rank_estimate(agreement.spearman_rho),
        top1=result.top1,
        top3=None if result.top3 is None else round(result.top3 * 3),
        largest_error=None
        if error is None
        else RankError(error.places, error.system, error.human_rank, error.labeler_rank),
        ppi=[drawn(by_size[n]) if n in by_size else None for n in sizes],
        share_relevant=result.share_relevant,
        threshold=result.threshold,
        self_preference=_self_preference(result.self_preference),
    )


def primary_readings(board: Leaderboard) -> dict[str, str]:
    """Each labeler's reading the systems table shows: scores (no threshold) where it has them,
    else its labels (as the README's compact leaderboard reads it)."""
    labelers = dict.fromkeys(result.labeler for result in board.readings)
    return {
        labeler: "scores" if board.reading(labeler, "scores") else "labels" for labeler in labelers
    }


def leaderboard_section(board: Leaderboard, source: str) -> LeaderboardSection:
    metric = f"ndcg@{board.k}"
    sizes = sorted({row.judged for result in board.readings for row in result.ppi})
    # Best τ first, an undefined τ last: the Markdown leaderboard's order.
    ordered = sorted(board.readings, key=lambda r: -(r.agreement[metric].kendall_tau.value or -2))
    primary = primary_readings(board)
    shown = {name: board.reading(name, reading) for name, reading in primary.items()}
    metrics = list(board.systems[0].human) if board.systems else [metric]
    return LeaderboardSection(
        source=source,
        collection=board.collection,
        qrels=board.qrels,
        queries=board.queries,
        k=board.k,
        metric=metric,
        pooled_pairs=board.pooled_pairs,
        human_share_relevant=board.human_share_relevant,
        resamples=board.resamples,
        rows=[labeler_row(result, metric, sizes) for result in ordered],
        ppi_sizes=sizes,
        people_only=[drawn(row) for row in board.people_only],
        human_metrics=metrics,
        primary_readings=primary,
        systems=[
            ZooSystem(
                name=system.name,
                kind=system.kind,
                human=dict(system.human),
                judged_at_k=system.judged_at_k,
                labelers={
                    name: result.means[system.name][metric]
                    for name, result in shown.items()
                    if result is not None and system.name in result.means
                },
            )
            for system in sorted(board.systems, key=lambda s: -s.human.get(metric, 0.0))
        ],
        skipped=dict(board.skipped),
        # The Markdown's words; its emphasis (*labels*) is Markdown, not text.
        legend=labelers_legend(board).replace("*", ""),
        marks=MARKS,
        systems_legend=SYSTEMS_LEGEND.format(metrics=", ".join(metrics), metric=metric, k=board.k),
    )


def zoo_report(inputs: ZooInputs) -> Report:
    """The page of a ``relevance-grader zoo`` output folder: the leaderboard and where it came
    from (there is no evaluation of runs, so no headline and no queries)."""
    folder, board = inputs.root, inputs.leaderboard
    section = leaderboard_section(board, inputs.leaderboard_source)
    settings = {
        "collection": board.collection,
        "qrels": board.qrels,
        "judged queries": board.queries,
        "bootstrap resamples": board.resamples,
        "labelers": {result.labeler: result.spec for result in board.readings},
    }
    return Report(
        title=f"Labeler leaderboard {folder.resolve().name}",
        kind="zoo",
        headline=None,
        queries=[],
        documents={},
        provenance=Provenance(
            folder=str(folder),
            labeler=None,
            k=board.k,
            export=None,
            commands=[],
            evaluated=None,
            page=environment().to_json(),
            settings=settings,
        ),
        leaderboard=section,
    )
