"""``relevance-grader history monitor``: a live system checked again and again against a fixed
baseline (re-evaluated daily as its traffic and documents change), gated with an anytime-valid
confidence sequence, so that asking after every check does not inflate false alarms the way a
fixed-level test repeated daily does (docs/results/history-monitoring.md measures both).

    relevance-grader history monitor --store runs/history.sqlite --system dense --baseline v3 \\
        --metric ndcg@10 --margin 0.02

Every evaluation of ``--system`` recorded after the baseline's, measured by the baseline's
labeler on its corpus, is one check (a check of another labeler or corpus is skipped with a
line, and the monitor carries on): its per-query differences from the baseline (the labeler's
values, on the queries both have) join the sequence, each distinct query once. A query checked
again adds no evidence: the sequence's observations are independent draws of queries, and a
query evaluated again is the same draw, so the first check that evaluated it holds its place.
Twenty checks of one fixed query set are one check's evidence; a live system's repeated checks
need fresh queries (a new sample of traffic) to narrow the sequence. The alarm, once raised at a
check, stands: exit 1 with the line of the check that raised it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.cli import bounded, choice, parse_config
from core.errors import InputError
from eval.history.compare import difference, split_values
from eval.history.gate import find
from eval.history.stats import MODES, SEQUENCES, ConfidenceSequence, GateDecision, monitor_gate
from eval.history.store import READER_STORE_HELP, EvaluationInfo, HistoryStore, open_store


@dataclass
class MonitorConfig:
    store: str = field(default="", metadata={"help": READER_STORE_HELP})
    system: str = field(default="", metadata={"help": "The monitored system."})
    baseline: str = field(
        default="",
        metadata={"help": "The fixed baseline: a version of --system, or id:N for one evaluation."},
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
        1000, 1, help="Distinct queries over all checks the sequence is tightest at (asymptotic)."
    )


@dataclass(frozen=True)
class Check:
    """One evaluation after the baseline: the decision after it joined the sequence, or None
    when it was skipped; ``note`` says what it added (or why it was skipped)."""

    info: EvaluationInfo
    decision: GateDecision | None
    note: str = ""

    @property
    def line(self) -> str:
        name = f"check {self.info.id_ref} ({self.info.ref})"
        if self.decision is None:
            return f"{name}: skipped: {self.note}"
        return f"{name}: {self.decision.reason}" + (f" ({self.note})" if self.note else "")


def run_checks(store: HistoryStore, config: MonitorConfig) -> list[Check]:
    """Every evaluation after the baseline, oldest first, with the decision after it."""
    baseline = find(store, config.system, config.baseline, "--baseline")
    after = [
        info
        for info in store.list_evaluations(config.system)
        if (info.created_at, info.id) > (baseline.created_at, baseline.id)
    ]
    if not after:
        raise InputError(
            f"no check yet: {config.system} has no evaluation recorded after the baseline "
            f"{baseline.ref} ({baseline.id_ref})"
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
    checks: list[Check] = []
    decision: GateDecision | None = None
    for info in after:
        if found := difference(info, baseline, common_queries=True):
            note = (
                f"{found[1]}; the monitor counts only checks of the baseline's labeler and corpus"
            )
            checks.append(Check(info, None, note))
            continue
        values, _ = split_values(store.query_values(info.id, config.metric))
        common = sorted(set(values) & set(base))
        new = [q for q in common if q not in seen]
        if not common:
            checks.append(
                Check(info, None, f"it shares no query with the baseline in {config.metric}")
            )
            continue
        repeated = len(common) - len(new)
        if new:
            seen.update(new)
            state = sequence.update([values[q] - base[q] for q in new])
            decision = monitor_gate(state, config.margin, config.mode)
        note = (
            f"{repeated} of its {len(common)} queries were in earlier checks: a query checked "
            "again adds no evidence"
            if repeated
            else ""
        )
        checks.append(Check(info, decision, note))
    if decision is None:
        raise InputError(
            f"no check to test: every evaluation of {config.system} after the baseline "
            f"{baseline.ref} was skipped ({checks[0].note})"
        )
    return checks


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([MonitorConfig], args)
    if not config.store or not config.system or not config.baseline:
        raise InputError("give --store, --system and --baseline")
    store = open_store(config.store, write=False)
    try:
        checks = run_checks(store, config)
    finally:
        store.close()
    for check in checks:
        print(check.line)
    tested = [check for check in checks if check.decision is not None]
    failed = [check for check in tested if check.decision and not check.decision.passed]
    if config.mode == "regression" and failed:
        # An alarm, once raised, stands: the sequence held at every check at once.
        first = failed[0]
        assert first.decision is not None
        print(f"ALARM since check {first.info.id_ref} ({first.info.ref}): {first.decision.reason}")
        sys.exit(1)
    last = tested[-1].decision
    if config.mode == "non-inferiority" and last is not None and not last.passed:
        sys.exit(1)
