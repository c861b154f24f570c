"""The history page: one self-contained HTML file (no CDN, nothing fetched) with a trend chart per
metric, each evaluation's estimate and interval, a table of evaluations linking to their reports,
and the comparison of any two evaluations the page was built with.

The page draws numbers; it computes none. Every interval on it was computed here, in Python, by
the same code as ``relevance-grader history show`` and ``history compare``."""

from __future__ import annotations

import datetime as dt
import html
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from pydantic import BaseModel

from core.cli import bounded, parse_config
from core.errors import InputError
from core.io import atomic_writer, check_writable_file
from eval.history.compare import (
    PAGE_ADVICE,
    MovedQuery,
    TopHits,
    common_metrics,
    compare_stored,
    refusal,
)
from eval.history.store import READER_STORE_HELP, EvaluationInfo, HistoryStore, open_store
from eval.report.figures import _pyplot, _svg
from eval.report.page import embedded_json, refuse_foreign_file

ASSETS = Path(__file__).parent
PALETTE = ("#1f5fbf", "#e07b00", "#137333", "#b3261e", "#6a3d9a", "#7f7f7f")


class PointEstimate(BaseModel):
    """One metric of one evaluation: the estimate, its interval and how it was made."""

    estimate: float
    low: float
    high: float
    method: str
    human_queries: int = 0


class PagePoint(BaseModel):
    """One evaluation as the page shows it."""

    id: int
    system: str
    version: str
    created_at: str
    note: str | None = None
    labeler: str
    queries: int
    report: str | None = None  # a link to the evaluation's report page, relative to the page
    estimates: dict[str, PointEstimate]


class PairMetric(BaseModel):
    estimate: float
    low: float
    high: float
    method: str
    queries: int
    human_queries: int
    # "A better", "A worse", "no difference shown" (the primary metric) or "marginal" (any
    # other): EvaluationComparison.verdict, as history compare prints it.
    verdict: str
    moved: list[MovedQuery] = []


class PairView(BaseModel):
    """The comparison A − B over the queries both evaluated, per metric, with the rule behind
    its verdicts (``legend``); or why it was refused."""

    a: int
    b: int
    refused: str | None = None
    metrics: dict[str, PairMetric] = {}
    legend: str = ""


class HistoryPage(BaseModel):
    title: str
    store: str
    generated_at: str
    alpha: float
    metrics: list[str]
    points: list[PagePoint]
    pairs: list[PairView]


def trend_figure(page: HistoryPage, metric: str) -> str:
    """Each system's estimates of ``metric`` over its evaluations in time order, with intervals;
    the x axis names each evaluation's version."""
    plt = _pyplot()
    systems = sorted({point.system for point in page.points})
    ordered = sorted(page.points, key=lambda point: (point.created_at, point.id))
    positions = {point.id: x for x, point in enumerate(ordered)}
    fig, ax = plt.subplots(figsize=(max(3.4, 0.45 * len(ordered) + 1.6), 2.2))
    for system, color in zip(systems, PALETTE * len(systems), strict=False):
        points = [p for p in ordered if p.system == system and metric in p.estimates]
        if not points:
            continue
        xs = [positions[p.id] for p in points]
        values = [p.estimates[metric] for p in points]
        ax.errorbar(
            xs,
            [v.estimate for v in values],
            yerr=[[v.estimate - v.low for v in values], [v.high - v.estimate for v in values]],
            fmt="o-",
            color=color,
            ms=4,
            capsize=3,
            lw=1.2,
            label=system,
        )
        # Each point links to its evaluation's report (an invisible marker per point carries it).
        if any(p.report for p in points):
            links = ax.scatter(xs, [v.estimate for v in values], s=80, alpha=0)
            links.set_urls([p.report for p in points])
        # Estimates with people's judgments (PPI++) as squares: not the labeler's mean alone.
        judged = [(x, v) for x, v in zip(xs, values, strict=True) if v.method == "ppi++"]
        if judged:
            ax.plot([x for x, _ in judged], [v.estimate for _, v in judged], "s", color=color, ms=7)
    ax.set_xticks(range(len(ordered)))
    ax.set_xticklabels([f"{p.version}\nid:{p.id}" for p in ordered], fontsize=7)
    ax.set_title(metric)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(axis="y", alpha=0.3)
    if len(systems) > 1:
        ax.legend(fontsize=7, frameon=False, loc="best")
    return _svg(fig)


def render(page: HistoryPage) -> str:
    template = Template((ASSETS / "page.html").read_text(encoding="utf-8"))
    report_style = (ASSETS.parent / "report" / "page.css").read_text(encoding="utf-8")
    figures = {metric: trend_figure(page, metric) for metric in page.metrics}
    return template.substitute(
        title=html.escape(page.title),
        style=report_style + (ASSETS / "page.css").read_text(encoding="utf-8"),
        script=(ASSETS / "page.js").read_text(encoding="utf-8"),
        data=embedded_json({"page": page.model_dump(), "figures": figures}),
    )


def write_page(page: HistoryPage, out: str | os.PathLike[str]) -> Path:
    with atomic_writer(out) as handle:
        handle.write(render(page))
    return Path(out)


def is_history_page(path: Path) -> bool:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return '<script id="history-data"' in handle.read(1 << 20)


def relative_link(target: str | None, page_out: Path) -> str | None:
    """A report's path as a link from the page's folder (absolute when on another drive)."""
    if not target:
        return None
    try:
        return Path(os.path.relpath(target, page_out.resolve().parent)).as_posix()
    except ValueError:
        return Path(target).resolve().as_uri()


@dataclass
class PageConfig:
    store: str = field(default="", metadata={"help": READER_STORE_HELP})
    out: str = field(default="history.html", metadata={"help": "The page to write."})
    systems: list[str] = field(
        default_factory=list, metadata={"help": "Systems to show (default: every system)."}
    )
    metrics: list[str] = field(
        default_factory=list,
        metadata={"help": "Metrics to chart (default: those of the latest evaluation)."},
    )
    pairs_of_last: int = bounded(
        12, 2, help="Every pair among the latest N evaluations is compared on the page."
    )
    moved: int = bounded(5, 0, help="Queries that moved most, listed per comparison and metric.")
    alpha: float = bounded(
        0.05, 0, 1, help="1 - confidence level of the comparisons.", open_low=True, open_high=True
    )
    title: str = field(default="Search quality over time", metadata={"help": "The page's title."})
    screenshot: str | None = field(
        default=None,
        metadata={"help": "Also a PNG of the page as headless Chromium draws it (for docs)."},
    )


def page_point(store: HistoryStore, info: EvaluationInfo, out: Path) -> PagePoint:
    return PagePoint(
        id=info.id,
        system=info.system,
        version=info.version,
        created_at=info.created_at.strftime("%Y-%m-%d %H:%M"),
        note=info.note,
        labeler=info.labeler,
        queries=info.queries or 0,
        report=relative_link(info.report_path, out),
        estimates={
            e.metric: PointEstimate(
                estimate=e.estimate,
                low=e.low,
                high=e.high,
                method=e.method,
                human_queries=e.human_queries or 0,
            )
            for e in store.evaluation_estimates(info.id)
        },
    )


def pair_view(
    store: HistoryStore,
    a: EvaluationInfo,
    b: EvaluationInfo,
    config: PageConfig,
    metrics: list[str],
) -> PairView:
    if why := refusal(a, b, common_queries=False, advice=PAGE_ADVICE):
        return PairView(a=a.id, b=b.id, refused=why)
    shared = [m for m in metrics if m in common_metrics(store, a, b)]
    result = compare_stored(store, a, b, shared, config.alpha, moved=0)
    hits = TopHits.read(store, a, b) if config.moved else None  # both runs read once
    views = {
        metric: PairMetric(
            estimate=c.estimate,
            low=c.low,
            high=c.high,
            method=c.method,
            queries=c.queries,
            human_queries=c.human_queries,
            verdict=result.verdict(metric),
            moved=list(hits.moved(c, config.moved)) if hits else [],
        )
        for metric, c in result.metrics.items()
    }
    return PairView(a=a.id, b=b.id, metrics=views, legend=result.legend())


def build_page(store: HistoryStore, config: PageConfig) -> HistoryPage:
    infos = [
        info
        for info in store.list_evaluations()
        if not config.systems or info.system in config.systems
    ]
    if not infos:
        shown = f" of {', '.join(config.systems)}" if config.systems else ""
        raise InputError(f"store {store.name}: no evaluations{shown} to show")
    out = Path(config.out)
    points = [page_point(store, info, out) for info in infos]
    # NDCG first: the metric most teams gate on.
    metrics = config.metrics or sorted(
        points[-1].estimates, key=lambda m: not m.startswith("ndcg@")
    )
    latest = sorted(infos, key=lambda info: (info.created_at, info.id))[-config.pairs_of_last :]
    pairs = [
        pair_view(store, a, b, config, metrics) for i, a in enumerate(latest) for b in latest[:i]
    ]
    return HistoryPage(
        title=config.title,
        store=store.name,
        generated_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        alpha=config.alpha,
        metrics=metrics,
        points=points,
        pairs=pairs,
    )


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([PageConfig], args)
    if not config.store:
        raise InputError("give --store")
    out = Path(config.out)
    check_writable_file("out", out)
    refuse_foreign_file("out", out, is_history_page)
    store = open_store(config.store, write=False)
    try:
        page = build_page(store, config)
    finally:
        store.close()
    print(f"wrote {write_page(page, out)} ({len(page.points)} evaluations)")
    if config.screenshot:
        from eval.report.page import screenshot

        print(f"wrote {screenshot(out, config.screenshot, height=1500)}")
