"""The leaderboard as Markdown: the labelers' table, people alone, the systems, and a legend of
every column where it is printed (``relevance-grader zoo``'s leaderboard.md, the main job's
report.md, and in short the README's block)."""

from __future__ import annotations

from core.io import markdown_table
from measure.zoo.record import DrawnTausRecord, Estimate, Leaderboard, ReadingResult

# What an estimate without a value, or without an interval, says in its cell (the Markdown
# leaderboard and the report page, eval.report.leaderboard, say the same).
UNDEFINED = "undefined (ties every system)"
NO_INTERVAL = "no interval: none estimable over the resamples"


def estimate_text(estimate: Estimate, digits: int = 2) -> str:
    if estimate.value is None:
        return UNDEFINED
    value = (
        f"{estimate.value:+.{digits}f}" if estimate.value < 0 else f"{estimate.value:.{digits}f}"
    )
    if estimate.low is None or estimate.high is None:
        return f"{value} ({NO_INTERVAL})"
    return f"{value} [{estimate.low:.{digits}f}, {estimate.high:.{digits}f}]"


def drawn_text(drawn: DrawnTausRecord | None) -> str:
    if drawn is None:
        return "–"
    if drawn.mean is None:
        return UNDEFINED
    spread = f" ({drawn.low:.2f} to {drawn.high:.2f})" if drawn.low is not None else ""
    return f"{drawn.mean:.2f}{spread}"


def _ppi(result: ReadingResult, n: int) -> DrawnTausRecord | None:
    return next((row for row in result.ppi if row.judged == n), None)


def _lift_text(result: ReadingResult) -> str:
    preference = result.self_preference
    if preference is None:
        return "–"
    lift = preference.lift
    places = estimate_text(lift, 1) if lift.value is not None else "–"
    return f"{places} places ({len(preference.own_systems)} own)"


def _relevant_text(result: ReadingResult) -> str:
    return "–" if result.share_relevant is None else f"{result.share_relevant:.0%}"


def labelers_table(board: Leaderboard) -> str:
    primary = f"ndcg@{board.k}"
    sizes = sorted({row.judged for result in board.readings for row in result.ppi})
    header = [
        "labeler",
        "reading",
        f"τ, {primary} (95% CI)",
        "τ_AP (95% CI)",
        "ρ (95% CI)",
        "top 1",
        "top 3",
        "largest rank error",
        *(f"τ after PPI++, {n} judged" for n in sizes),
        "calls relevant",
        "lifts its own systems",
    ]
    ordered = sorted(
        board.readings,
        key=lambda r: -(r.agreement[primary].kendall_tau.value or -2.0),
    )
    rows = []
    for result in ordered:
        a = result.agreement[primary]
        error = result.largest_error
        rows.append(
            [
                result.labeler,
                result.reading,
                estimate_text(a.kendall_tau),
                estimate_text(a.tau_ap),
                estimate_text(a.spearman_rho),
                "–" if result.top1 is None else ("yes" if result.top1 else "no"),
                "–" if result.top3 is None else f"{round(result.top3 * 3)}/3",
                "–" if error is None else f"{error.places:g} ({error.system})",
                *(drawn_text(_ppi(result, n)) for n in sizes),
                _relevant_text(result),
                _lift_text(result),
            ]
        )
    return markdown_table(header, rows)


def systems_table(board: Leaderboard) -> str:
    k = board.k
    metrics = list(board.systems[0].human)
    primary = f"ndcg@{k}"
    labelers = dict.fromkeys(r.labeler for r in board.readings)
    shown = [primary_reading(board, labeler) for labeler in labelers]
    systems = sorted(board.systems, key=lambda s: -s.human[primary])
    header = [
        "system",
        *(f"human {m}" for m in metrics),
        f"judged@{k}",
        *(f"{r.labeler} {primary}" for r in shown),
    ]
    rows = [
        [
            system.name,
            *(f"{system.human[m]:.3f}" for m in metrics),
            f"{system.judged_at_k:.0%}",
            *(f"{r.means[system.name][primary]:.3f}" for r in shown),
        ]
        for system in systems
    ]
    return markdown_table(header, rows)


def primary_reading(board: Leaderboard, labeler: str) -> ReadingResult:
    """The reading a labeler is shown by where one is shown: its scores (no threshold) where it
    has them, else its verdicts."""
    found = board.reading(labeler, "scores") or board.reading(labeler, "labels")
    assert found is not None
    return found


def people_only_text(board: Leaderboard) -> str:
    return "; ".join(f"{row.judged} queries: τ {drawn_text(row)}" for row in board.people_only)


def labelers_legend(board: Leaderboard) -> str:
    """The labelers' table's columns in words, as the Markdown leaderboard prints them under it
    (the report page, eval.report.leaderboard, prints the same words under its table)."""
    return (
        "Columns: τ is Kendall's τ-b between the systems' order by mean NDCG@k under the labeler "
        "and under the human judgments (as trec_eval computes them); τ_AP weighs swaps near the "
        "top more (Yilmaz et al. 2008; ties averaged, Urbano & Marrero 2017); ρ is Spearman's. "
        f"Intervals: 95% percentile bootstrap over the queries ({board.resamples} resamples), "
        "widened to hold the estimate. *labels*: the labeler's verdicts (a score labeler's at the "
        "threshold its calibration fitted on validation queries); *scores*: P(relevant) as the "
        "gain, no threshold. Top 1: the human best system is the labeler's best; top 3: how many "
        "of the human top 3 it puts in its top 3. Largest rank error: places between the two "
        "rankings, and the system. PPI++: mean τ over random draws of that many human-judged "
        "queries, each system's NDCG corrected by them (5th to 95th percentile of the draws). "
        "Calls relevant: the labeler's share of relevant pooled hits. Own systems: those ordered by "
        "the labeler's own score (or related to it); lift: places above their human rank, on "
        "average."
    )


def leaderboard_markdown(board: Leaderboard, level: int = 1) -> str:
    """The leaderboard as a page (``level`` 1) or a section of one (2: its headings one lower)."""
    k = board.k
    heading = "#" * level
    lines = [
        f"{heading} Labelers ranked by how they rank {len(board.systems)} systems",
        "",
        f"`{board.collection}`, {board.queries} judged queries (`{board.qrels}`), each system's top "
        f"{k}: {board.pooled_pairs} pooled pairs, {board.human_share_relevant:.0%} of them relevant "
        "by the human judgments.",
        "",
        labelers_table(board),
        labelers_legend(board),
        "",
    ]
    if board.people_only:
        lines += [
            f"The same judged queries without a labeler (each system's NDCG@{k} over them "
            f"alone): {people_only_text(board)}.",
            "",
        ]
    lines += [
        f"{heading}# The systems ({len(board.systems)})",
        "",
        systems_table(board),
        f"Human: each system's mean over the queries under the judgments, as trec_eval computes "
        f"them; judged@{k}: the share of its top {k} hits the judgments hold; then each "
        f"labeler's mean NDCG@{k} on its labels of the pool (by P(relevant) where it gives one, "
        "else by its verdicts).",
    ]
    if board.skipped:
        skipped = "; ".join(f"{name}: {why}" for name, why in board.skipped.items())
        lines += ["", f"Not built: {skipped}."]
    return "\n".join(lines) + "\n"


def _tau(board: Leaderboard, labeler: str, reading: str) -> str:
    result = board.reading(labeler, reading)
    if result is None:
        return "–"
    return estimate_text(result.agreement[f"ndcg@{board.k}"].kendall_tau)


def compact_markdown(board: Leaderboard) -> str:
    """The leaderboard in a few lines (the README's block): each labeler's τ by both readings,
    after PPI++ with the fewest judged queries, and its self-preference, then the legend."""
    labelers = list(dict.fromkeys(r.labeler for r in board.readings))
    n = min((row.judged for r in board.readings for row in r.ppi), default=None)
    rows = []
    for labeler in labelers:
        primary = primary_reading(board, labeler)
        rows.append(
            [
                labeler,
                _tau(board, labeler, "scores"),
                _tau(board, labeler, "labels"),
                drawn_text(_ppi(primary, n)) if n else "–",
                _lift_text(primary),
            ]
        )
    header = [
        "labeler",
        "τ, P(relevant) as gain (95% CI)",
        "τ, verdicts (95% CI)",
        f"τ after PPI++, {n} judged queries" if n else "τ after PPI++",
        "lifts its own systems",
    ]
    alone = next((row for row in board.people_only if row.judged == n), None)
    return (
        f"Labelers ranked by how they rank {len(board.systems)} retrieval systems on "
        f"{board.queries} queries: Kendall's τ between the systems' order by NDCG@{board.k} under "
        "the labeler (its P(relevant) as the gain, or its relevant/not verdicts at the threshold "
        "fitted on validation queries) and under the human judgments, with its 95% bootstrap "
        "interval over queries; PPI++: the mean τ over random draws of that many human-judged "
        "queries correcting each system's NDCG (5th to 95th percentile); lift: the mean places "
        "the labeler puts the systems built on its own score above their human rank "
        f"(how many such systems):\n\n{markdown_table(header, rows)}"
        + (f"\nThe {n} judged queries alone: τ {drawn_text(alone)}.\n" if alone else "")
    )
