"""``python -m eval.history monitor``: a live system checked again and again against a fixed
baseline (re-evaluated daily as its traffic and documents change), gated with an anytime-valid
confidence sequence, so that asking after every check does not inflate false alarms the way a
fixed-level test repeated daily does (docs/results.md measures both).

    python -m eval.history monitor --store runs/history.sqlite --system dense --baseline v3 \\
        --metric ndcg@10 --margin 0.02

Every evaluation of ``--system`` recorded after the baseline's is one check: its per-query
differences from the baseline (the labeler's values, on the queries both have) join the
sequence. The sequence assumes each check brings queries of its own (a fresh sample of traffic):
a check that repeats earlier queries adds no information, and the command warns when it does.
The alarm, once raised at a check, stands: exit 1 with the line of the check that raised it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.cli import bounded, choice, parse_config
from core.errors import InputError
from eval.history.compare import refusal, split_values
from eval.history.gate import find
from eval.history.stats import MODES, SEQUENCES, ConfidenceSequence, GateDecision, monitor_gate
from eval.history.store import HistoryStore, open_store

logger = logging.getLogger(__name__)


@dataclass
class MonitorConfig:
    store: str = field(default="", metadata={"help": "The store: a SQLite file or a database URL."})
    system: str = field(default="", metadata={"help": "The monitored system."})
    baseline: str = field(
        default="", metadata={"help": "The fixed baseline: a version of --system or an id."}
    )
    metric: str = field(default="ndcg@10", metadata={"help": "The metric monitored."})
    margin: float = bounded(0.0, 0, 1, help="How much worse the system may become (metric units).")
    mode: str = choice("regression", MODES, "As history gate's --mode.")
    alpha: float = bounded(
        0.05,
        0,
        1,
        help="Chance of a false alarm over all checks together.",
        open_low=True,
        open_high=True,
    )
    method: str = choice(
        "asymptotic",
        SEQUENCES,
        "asymptotic: Waudby-Smith et al. 2024's asymptotic confidence sequence; bernstein: the "
        "empirical-Bernstein sequence, valid at every number of queries but wider.",
    )
    planned_queries: int = bounded(
        1000, 1, help="Queries over all checks the sequence is tightest at (asymptotic)."
    )


CONFIG = MonitorConfig


def run_checks(store: HistoryStore, config: MonitorConfig) -> list[tuple[str, GateDecision]]:
    """(evaluation, decision) after each check, oldest first."""
    baseline = find(store, config.system, config.baseline)
    checks = [
        info
        for info in store.list_evaluations(config.system)
        if (info.created_at, info.id) > (baseline.created_at, baseline.id)
    ]
    if not checks:
        raise InputError(
            f"no check yet: {config.system} has no evaluation recorded after the baseline "
            f"{baseline.ref} (evaluation {baseline.id})"
        )
    base, _ = split_values(store.query_values(baseline.id, config.metric))
    if not base:
        raise InputError(f"metric: the baseline {baseline.ref} records no {config.metric}")
    sequence = ConfidenceSequence(
        config.alpha,
        config.planned_queries,
        config.method,
        metric=config.metric,
        a_name=config.system,
        b_name=baseline.ref,
    )
    seen: set[str] = set()
    decisions = []
    for info in checks:
        if why := refusal(info, baseline, common_queries=True):
            raise InputError(why)
        values, _ = split_values(store.query_values(info.id, config.metric))
        common = sorted(set(values) & set(base))
        if repeated := len(seen.intersection(common)):
            logger.warning(
                "check %d (%s): %d of its %d queries were in earlier checks; a repeated query "
                "adds no new information, and the sequence assumes fresh ones",
                info.id,
                info.ref,
                repeated,
                len(common),
            )
        seen.update(common)
        state = sequence.update([values[q] - base[q] for q in common])
        decisions.append(
            (f"{info.id} ({info.ref})", monitor_gate(state, config.margin, config.mode))
        )
    return decisions


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([MonitorConfig], args)
    if not config.store or not config.system or not config.baseline:
        raise InputError("give --store, --system and --baseline")
    store = open_store(config.store, create=False)
    try:
        decisions = run_checks(store, config)
    finally:
        store.close()
    for name, decision in decisions:
        print(f"check {name}: {decision.reason}")
    failed = [(name, d) for name, d in decisions if not d.passed]
    if config.mode == "regression" and failed:
        # An alarm, once raised, stands: the sequence held at every check at once.
        print(f"ALARM since check {failed[0][0]}: {failed[0][1].reason}")
        sys.exit(1)
    if config.mode == "non-inferiority" and not decisions[-1][1].passed:
        sys.exit(1)
