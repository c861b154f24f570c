"""``relevance-grader history show``: each metric of one system over its recorded evaluations, the
estimate with its interval, how it was made and on how many queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from core.cli import parse_config
from core.errors import InputError
from core.io import markdown_table
from eval.history.listing import when
from eval.history.store import READER_STORE_HELP, Estimate, EvaluationInfo, HistoryStore, open_store


@dataclass
class ShowConfig:
    store: str = field(default="", metadata={"help": READER_STORE_HELP})
    system: str = field(default="", metadata={"help": "The system whose evaluations to show."})
    metric: str | None = field(
        default=None, metadata={"help": "One metric, e.g. ndcg@10 (default: every metric)."}
    )


def queries_cell(estimate: Estimate) -> str:
    if estimate.human_queries is None:
        return str(estimate.queries)
    return f"{estimate.queries} ({estimate.human_queries} human-judged)"


def trend_table(trend: list[tuple[EvaluationInfo, Estimate]]) -> str:
    header = ["id", "version", "time", "estimate [interval]", "method", "queries"]
    rows = [
        [
            info.id_ref,
            info.version,
            when(info),
            f"{e.estimate:.4f} [{e.low:.4f}, {e.high:.4f}]",
            e.method,
            queries_cell(e),
        ]
        for info, e in trend
    ]
    return markdown_table(header, rows)


def metrics_of(store: HistoryStore, system: str) -> list[str]:
    """The metrics of the system's latest evaluation, by name."""
    latest = store.list_evaluations(system)[-1]
    return [e.metric for e in store.evaluation_estimates(latest.id)]


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([ShowConfig], args)
    if not config.store or not config.system:
        raise InputError("give --store and --system")
    store = open_store(config.store, write=False)
    try:
        if config.system not in store.systems():
            systems = ", ".join(store.systems()) or "none yet"
            raise InputError(
                f"store {store.name}: no system {config.system!r} (systems: {systems})"
            )
        recorded = metrics_of(store, config.system)
        if config.metric and config.metric not in recorded:
            raise InputError(
                f"metric: {config.system}'s evaluations record no {config.metric} (they record "
                f"{', '.join(recorded)})"
            )
        metrics = [config.metric] if config.metric else recorded
        tables = [(metric, store.estimates(config.system, metric)) for metric in metrics]
    finally:
        store.close()
    for metric, trend in tables:
        print(f"{config.system}: {metric}\n\n{trend_table(trend)}")
