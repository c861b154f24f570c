"""The PPI++ estimates of a ``metrics.json`` as Markdown: the table with its marks explained, and
the line above it. ``relevance-grader search`` prints them and the main job's report.md holds the
table; they live with the report's other renderings so that both read the same words."""

from __future__ import annotations

from core.io import markdown_table
from judgments.coverage import NOT_STUDIED, coverage_legend, coverage_marks, coverage_note
from measure.metrics.ppi_record import EstimateRecord, IntervalRecord, PpiRecord


def ppi_table(report: PpiRecord) -> str:
    """The PPI report as one Markdown table, every mark explained below it."""

    def cell(interval: IntervalRecord) -> str:
        return f"{interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]"

    def metric_name(metric: str, group: str) -> str:
        if group == "pairs":  # the study measured intervals over judged queries, not hits
            return f"{metric} {NOT_STUDIED}"
        if not report.measured_coverage:  # a file written before coverage was recorded
            return metric
        marks = coverage_marks(report.measured_coverage.get(metric), report.judged_queries)
        return f"{metric} {marks}" if marks else metric

    rows = [
        [
            system,
            metric_name(metric, group),
            f"{entry.labeler_mean:.3f}",
            cell(entry.human_only),
            cell(entry.ppi),
            f"{entry.ppi.lam:.2f}",
            worth_text(entry, "judged hits" if group == "pairs" else "queries"),
        ]
        for group, systems in (
            ("runs", report.runs),
            ("differences", report.differences),
            ("pairs", report.pairs),
        )
        for system, metrics in systems.items()
        for metric, entry in metrics.items()
    ]
    confidence = f"{report.confidence:.0%}"
    header = [
        "system",
        "metric",
        "labeler mean",
        f"human only ({confidence})",
        f"PPI++ ({confidence})",
        "λ",
        "worth (human-judged)",
    ]
    return markdown_table(header, rows) + ppi_footnotes(report)


def worth_text(entry: EstimateRecord, unit: str) -> str:
    """What the labeler is worth in judged units, never more than there are (a file written
    before the cap is capped here)."""
    value = entry.effective_human_queries
    if value is None:
        return "–"
    if value >= entry.queries:
        return f"{entry.queries} {unit} (all: capped)"
    return f"{value:.1f} {unit}"


def ppi_footnotes(report: PpiRecord) -> str:
    """Below the table: each metric's measured coverage at this n and what its marks mean, what
    "worth" is, and the multiplicity rule."""
    n = report.judged_queries
    lines = []
    if n and not report.measured_coverage:
        lines.append("Coverage of the PPI++ intervals: not recorded in this metrics.json.")
    elif n:
        notes = [
            f"{metric}: {coverage_note(metric, found, n)}"
            for metric, found in report.measured_coverage.items()
        ]
        lines.append(f"Coverage of the PPI++ intervals at n = {n}: " + "; ".join(notes) + ".")
    if report.pairs:
        lines.append(
            f"relevant share {NOT_STUDIED}: the coverage study measured intervals over judged "
            "queries; none was measured over judged hits."
        )
    lines.append(coverage_legend() + ".")
    lines.append(
        "λ: the weight PPI++ gives the labeler (0: the human-only interval). Worth: the number "
        "of human-judged queries (hits) the human-only interval would need to be as narrow as "
        "PPI++'s, capped at the number there are (capped: PPI++ is as narrow as judging them all "
        "would make it by that rule)."
    )
    if report.multiplicity and report.differences:
        lines.append(report.multiplicity.rule + ".")
    return "".join(f"\n{line}\n" for line in lines)


def ppi_heading(ppi: PpiRecord, k: int) -> str:
    """The line above the PPI table: what was judged, and how many sampled hits each run used."""
    used = ppi.judged_pairs_used
    hits = f"{ppi.judged_pairs} sampled hits"
    if any(count < ppi.judged_pairs for count in used.values()):
        counts = ", ".join(f"{name} {count}" for name, count in used.items())
        hits += f" (in each run's top {k}, the ones used: {counts}; the others ignored)"
    queries = f"{ppi.judged_queries} queries"
    heading = f"With human judgments for {queries} and {hits} ({ppi.estimator}):"
    if ppi.judged_queries and ppi.sample is not None:
        heading += f"\nThe judged queries: {ppi.sample.design}"
    if ppi.human_scale:
        heading += f"\nTheir grades read on the scale {ppi.human_scale}"
    return heading
