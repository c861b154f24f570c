"""The report's plots as inline SVG (matplotlib; text stays text, nothing is fetched)."""

from __future__ import annotations

import io
from typing import Any

from eval.report.model import Headline, HeldOut, LabelAgreement, LeaderboardSection, Report

LABELER, HUMAN, PPI, TRUTH = "#7f7f7f", "#e07b00", "#1f5fbf", "#111111"
WINS, LOSES = "#137333", "#b3261e"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "svg.fonttype": "none",  # text as <text>: small, selectable, the page's own font
            "svg.hashsalt": "relevance-grader-report",  # the same ids on every build
            "font.family": "sans-serif",
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    return plt


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    _pyplot().close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # inline: no XML prologue or doctype


def estimates_figure(headline: Headline) -> str:
    """Per metric, each run's labeler mean and, with human judgments, the human-only and PPI++
    intervals side by side (and the value under every human judgment where the job knows it)."""
    plt = _pyplot()
    metrics, runs = headline.metrics, headline.runs
    fig, axes = plt.subplots(
        1,
        len(metrics),
        figsize=(2.3 * len(metrics) + 1.2, 0.55 * len(runs) + 1.3),
        sharey=True,
        squeeze=False,
    )
    # Three markers a run with human judgments; the labeler's mean alone sits on the run's line.
    offsets = {"labeler": 0.22 if headline.intervals else 0.0, "human": 0.0, "ppi": -0.22}
    for ax, metric in zip(axes[0], metrics, strict=True):
        for y, run in enumerate(reversed(runs)):
            cell = headline.cells[run][metric]
            ax.plot(cell.labeler_mean, y + offsets["labeler"], "D", color=LABELER, ms=4)
            for key, interval, color in (
                ("human", cell.human_only, HUMAN),
                ("ppi", cell.ppi, PPI),
            ):
                if interval is not None:
                    ax.errorbar(
                        interval.estimate,
                        y + offsets[key],
                        xerr=[
                            [interval.estimate - interval.low],
                            [interval.high - interval.estimate],
                        ],
                        fmt="o",
                        color=color,
                        ms=4,
                        capsize=3,
                        lw=1.4,
                    )
            if cell.human_all is not None:
                ax.plot(cell.human_all, y, "|", color=TRUTH, ms=14, mew=1.6)
        ax.set_title(metric)
        ax.set_xlim(-0.02, 1.02)
        ax.grid(axis="x", color="#dddddd", lw=0.6)
        ax.set_yticks(range(len(runs)), list(reversed(runs)))
        ax.tick_params(axis="y", length=0)
    fig.legend(
        handles=_legend(plt, headline),
        loc="lower center",
        ncol=4,
        frameon=False,
        bbox_to_anchor=(0.5, -0.02 - 0.04 * (len(runs) < 3)),
    )
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return _svg(fig)


def _legend(plt: Any, headline: Headline) -> list[Any]:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="D", ls="", color=LABELER, label="labeler mean (no interval)")]
    if headline.intervals:
        confidence = f"{headline.confidence:.0%}" if headline.confidence else ""
        handles += [
            Line2D(
                [], [], marker="o", color=HUMAN, label=f"human only, judged queries ({confidence})"
            ),
            Line2D([], [], marker="o", color=PPI, label=f"PPI++ ({confidence})"),
        ]
    if any(c.human_all is not None for cells in headline.cells.values() for c in cells.values()):
        handles.append(
            Line2D([], [], marker="|", ls="", ms=12, color=TRUTH, label="people, every query")
        )
    return handles


def reliability_figure(agreement: LabelAgreement) -> str:
    """The labeler's score against the share of those hits people judged relevant."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(3.8, 3.4))
    bins = agreement.reliability or []
    ax.plot([0, 1], [0, 1], ls=":", color="#999999", label="calibrated")
    ax.plot(
        [b.mean_score for b in bins],
        [b.fraction_relevant for b in bins],
        "-o",
        color=PPI,
        ms=3,
        label="labeler",
    )
    for b in bins:
        ax.annotate(
            str(b.pairs),
            (b.mean_score, b.fraction_relevant),
            fontsize=7,
            textcoords="offset points",
            xytext=(3, -9),
            color="#555555",
        )
    ax.set_xlabel("labeler score (bin mean)")
    ax.set_ylabel("judged relevant by people")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(frameon=False, loc="upper left")
    fig.tight_layout()
    return _svg(fig)


def scores_by_grade_figure(agreement: LabelAgreement) -> str:
    """The labeler's scores of the hits of each human grade (box and points)."""
    import numpy as np

    plt = _pyplot()
    groups = agreement.scores_by_grade or {}
    fig, ax = plt.subplots(figsize=(3.8, 3.4))
    names = list(groups)
    ax.boxplot([groups[n] for n in names], widths=0.5, showfliers=False, medianprops={"color": PPI})
    rng = np.random.default_rng(0)  # the same jitter on every build
    for i, name in enumerate(names, start=1):
        values = groups[name]
        ax.plot(
            i + rng.uniform(-0.15, 0.15, len(values)), values, ".", color=LABELER, ms=3, alpha=0.6
        )
    ax.set_xticks(range(1, len(names) + 1), [f"{n}\n({len(groups[n])})" for n in names])
    ax.set_xlabel("human grade (pairs)")
    ax.set_ylabel("labeler score")
    ax.set_ylim(-0.02, 1.02)
    fig.tight_layout()
    return _svg(fig)


def differences_figure(held: HeldOut) -> str:
    """Each grader's paired per-query ROC-AUC difference to each baseline, with its 95% interval:
    green where the interval lies above zero (it beats the baseline), red below, grey across."""
    plt = _pyplot()
    names = {row.model: row.name for row in held.rows}
    bars = [
        (f"{row.name} − {names.get(d.baseline, d.baseline)}\n({d.queries} queries)", d)
        for row in held.rows
        for d in row.differences
        if d.mean is not None
    ]
    fig, ax = plt.subplots(figsize=(6.4, 0.55 * len(bars) + 1.1))
    for y, (_, d) in enumerate(reversed(bars)):
        color = WINS if d.beats else LOSES if d.high is not None and d.high < 0 else LABELER
        error = None if d.low is None else [[d.mean - d.low], [d.high - d.mean]]
        ax.errorbar(d.mean, y, xerr=error, fmt="o", color=color, ms=5, capsize=4, lw=1.6)
        ax.annotate(
            f"{d.mean:+.3f}",
            (d.mean, y),
            textcoords="offset points",
            xytext=(0, 7),
            ha="center",
            fontsize=8,
            color=color,
        )
    ax.axvline(0, color="#555555", lw=0.8, ls=":")
    ax.set_yticks(range(len(bars)), [label for label, _ in reversed(bars)])
    ax.set_ylim(-0.6, len(bars) - 0.4)
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel("Δ per-query ROC-AUC, grader − baseline (95% interval over queries)")
    ax.grid(axis="x", color="#dddddd", lw=0.6)
    fig.tight_layout()
    return _svg(fig)


def leaderboard_figure(board: LeaderboardSection) -> str:
    """Each labeler's Kendall τ with the human ranking of the systems, with its 95% bootstrap
    interval over queries (a hollow dot: no interval; none: undefined), best first, beside the
    mean τ of the judged queries alone (dashed)."""
    plt = _pyplot()
    rows = board.rows
    fig, ax = plt.subplots(figsize=(6.4, 0.42 * len(rows) + 1.3))
    for y, row in enumerate(reversed(rows)):
        tau = row.tau
        if tau.value is None:
            ax.annotate(tau.note or "", (0, y), ha="center", va="center", fontsize=8, color=LOSES)
            continue
        if tau.low is None or tau.high is None:
            ax.plot(tau.value, y, "o", mfc="white", color=PPI, ms=5)
        else:
            error = [[tau.value - tau.low], [tau.high - tau.value]]
            ax.errorbar(tau.value, y, xerr=error, fmt="o", color=PPI, ms=5, capsize=4, lw=1.6)
        ax.annotate(
            f"{tau.value:.2f}",
            (tau.value, y),
            textcoords="offset points",
            xytext=(0, 7),
            ha="center",
            fontsize=8,
            color=PPI,
        )
    # The judged queries alone, without a labeler: what judging that many queries gives.
    alone = [row for row in board.people_only if row.mean is not None]
    for row, dashes in zip(alone, ("--", "-.", ":", (0, (5, 1, 1, 1))), strict=False):
        ax.axvline(
            row.mean,
            color=LABELER,
            lw=1.0,
            ls=dashes,
            label=f"{row.judged} judged queries alone, no labeler (mean τ {row.mean:.2f})",
        )
    ax.axvline(0, color="#555555", lw=0.8, ls=":")
    labels = [f"{row.labeler} ({row.reading})" for row in reversed(rows)]
    ax.set_yticks(range(len(rows)), labels)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlim(-1.05, 1.05)
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel(
        f"Kendall τ with the human ranking of {len(board.systems)} systems by {board.metric} "
        "(95% interval over queries)"
    )
    ax.grid(axis="x", color="#dddddd", lw=0.6)
    if alone:
        ax.legend(loc="upper left", bbox_to_anchor=(0, -0.16 - 0.6 / len(rows)), frameon=False)
    fig.tight_layout()
    return _svg(fig)


def report_figures(report: Report) -> dict[str, str]:
    """Every plot the page shows, by the name its container carries."""
    figures = {}
    if report.headline is not None:
        figures["estimates"] = estimates_figure(report.headline)
    if report.leaderboard is not None and report.leaderboard.rows:
        figures["leaderboard"] = leaderboard_figure(report.leaderboard)
    agreement = report.agreement
    if agreement is not None and agreement.reliability:
        figures["reliability"] = reliability_figure(agreement)
    if agreement is not None and agreement.scores_by_grade:
        figures["scores_by_grade"] = scores_by_grade_figure(agreement)
    held = report.held_out
    if held is not None and any(d.mean is not None for row in held.rows for d in row.differences):
        figures["differences"] = differences_figure(held)
    return figures
