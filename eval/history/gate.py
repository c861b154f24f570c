"""``relevance-grader history gate``: a release gate for CI. It compares a system's candidate
version with a baseline (its previous version, or a named one) on one metric and exits 1 with one
line saying why when the data show the candidate worse than the baseline by more than the margin
(``--mode regression``), or unless the data show it is not (``--mode non-inferiority``). Exit 0
passes with the line that says so; bad input is one line and exit 2, as everywhere.

    relevance-grader history gate --store runs/history.sqlite --system dense --candidate v4 \\
        --baseline last --metric ndcg@10 --margin 0.02

``--candidate`` and ``--baseline`` are versions of ``--system`` (an all-digit build number or
short SHA too); ``id:N`` names one evaluation by its id.

Each gate is one test at level alpha / 2 of the shown (1 − alpha) interval. A system checked
again and again against a fixed baseline (a daily re-evaluation) needs ``history monitor``
instead: a repeated fixed-level test raises false alarms far above its level.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.cli import bounded, choice, parse_config
from core.errors import InputError
from core.io import markdown_table
from eval.history.compare import (
    GATE_ADVICE,
    EvaluationComparison,
    common_metrics,
    compare_stored,
    hits_text,
    refusal,
    signed,
)
from eval.history.names import LAST, parse_id
from eval.history.stats import MODES, GateDecision, gate
from eval.history.store import READER_STORE_HELP, EvaluationInfo, HistoryStore, open_store


@dataclass
class GateConfig:
    store: str = field(default="", metadata={"help": READER_STORE_HELP})
    system: str = field(default="", metadata={"help": "The system whose versions to compare."})
    candidate: str = field(
        default="",
        metadata={
            "help": "The candidate version of --system (its latest evaluation; an all-digit "
            "version is a version), or id:N for one evaluation by its id."
        },
    )
    baseline: str = field(
        default="last",
        metadata={
            "help": "'last' (the latest evaluation of --system of another version, recorded "
            "before the candidate's), a version of --system, or id:N for one evaluation."
        },
    )
    metric: str = field(default="ndcg@10", metadata={"help": "The metric the gate decides on."})
    margin: float = bounded(0.0, 0, 1, help="How much worse the candidate may be (metric units).")
    mode: str = choice(
        "regression",
        MODES,
        "regression: fail when the data show the candidate worse by more than the margin; "
        "non-inferiority: pass only when the data show it is not.",
    )
    alpha: float = bounded(
        0.05,
        0,
        1,
        help="1 - confidence level of the interval shown; the gate is a one-sided test at "
        "alpha / 2 (0.05: 0.025).",
        open_low=True,
        open_high=True,
    )
    without_baseline: str = choice(
        "fail",
        ("fail", "pass"),
        "What a gate with no baseline yet does (the first version of a system): fail, or pass.",
    )
    common_queries: bool = field(
        default=False,
        metadata={
            "help": "Compare versions evaluated on different query sets on those they share."
        },
    )
    markdown: str | None = field(
        default=None,
        metadata={
            "help": "Also append the decision, every metric's comparison and the queries that "
            "moved most to this file as markdown (in GitHub Actions: $GITHUB_STEP_SUMMARY)."
        },
    )


def find(store: HistoryStore, system: str, ref: str, flag: str) -> EvaluationInfo:
    """An evaluation of ``system``: a version (its latest evaluation), whatever it looks like,
    or ``id:N``. A name that could mean two evaluations (a version recorded as ``id:N`` before
    such versions were refused) is refused in one line."""
    evaluation_id = parse_id(ref)
    if evaluation_id is None:
        return store.version(system, ref)
    if store.has_version(system, ref):
        raise InputError(
            f"{flag}: {ref!r} could mean evaluation id {evaluation_id} or {system}'s version "
            f"{ref!r}; record that version again under another name"
        )
    info = store.get(ref)
    if info.system != system:
        raise InputError(f"{flag}: evaluation {ref} is of system {info.system!r}, not {system!r}")
    return info


def baseline_of(store: HistoryStore, config: GateConfig, candidate: EvaluationInfo):
    """The baseline evaluation, or None when ``last`` finds no earlier version."""
    if config.baseline != LAST:
        return find(store, config.system, config.baseline, "--baseline")
    if store.has_version(config.system, LAST):
        raise InputError(
            f"--baseline: 'last' could mean {config.system}'s previous version or its version "
            "named 'last'; give the previous version by name"
        )
    earlier = [
        info
        for info in store.list_evaluations(config.system)
        if info.version != candidate.version
        and (info.created_at, info.id) < (candidate.created_at, candidate.id)
    ]
    return earlier[-1] if earlier else None


def decide(store: HistoryStore, config: GateConfig) -> GateDecision:
    return judge(store, config)[0]


def judge(
    store: HistoryStore, config: GateConfig
) -> tuple[GateDecision, EvaluationComparison | None]:
    """The decision, and the comparison of every metric both record (None without a baseline)."""
    if not config.store or not config.system or not config.candidate:
        raise InputError("give --store, --system and --candidate")
    candidate = find(store, config.system, config.candidate, "--candidate")
    baseline = baseline_of(store, config, candidate)
    if baseline is None:
        line = (
            f"no baseline yet: {config.system} has no evaluation of another version before "
            f"{candidate.ref} ({candidate.id_ref})"
        )
        if config.without_baseline == "pass":
            return GateDecision(True, f"PASS {line}; passed as --without_baseline pass asks"), None
        raise InputError(f"{line}; give --without_baseline pass to let a first version through")
    if baseline.id == candidate.id:
        raise InputError(f"the candidate and the baseline are one evaluation ({candidate.id_ref})")
    if why := refusal(candidate, baseline, config.common_queries, GATE_ADVICE):
        raise InputError(why)
    if config.metric not in common_metrics(store, candidate, baseline):
        raise InputError(
            f"metric: {config.metric} is not recorded for both {candidate.ref} and "
            f"{baseline.ref} (both record: {', '.join(common_metrics(store, candidate, baseline))})"
        )
    metrics = [
        config.metric,
        *(m for m in common_metrics(store, candidate, baseline) if m != config.metric),
    ]
    moved = 5 if config.markdown else 0
    result = compare_stored(store, candidate, baseline, metrics, config.alpha, moved=moved)
    return gate(result.metrics[config.metric], config.margin, config.mode), result


def markdown_summary(decision: GateDecision, result: EvaluationComparison | None) -> str:
    """The decision and the comparison as markdown, for a CI job's summary page."""
    verdict = "PASS" if decision.passed else "FAIL"
    lines = [f"### Search quality gate: {verdict}", "", decision.reason, ""]
    if result is None:
        return "\n".join(lines) + "\n"
    level = f"{1 - next(iter(result.metrics.values())).alpha:.0%}"
    rows = [
        [metric, signed(c.estimate), f"[{signed(c.low)}, {signed(c.high)}]", c.method]
        for metric, c in result.metrics.items()
    ]
    header = ["metric", f"{result.a.ref} − {result.b.ref}", f"{level} interval", "method"]
    first = next(iter(result.metrics))
    lines += [
        markdown_table(header, rows),
        "",
        f"The gate decides on {first} alone (the line above); the other rows are marginal "
        f"{level} intervals, not adjusted for the number of metrics, shown for context.",
        "",
    ]
    if result.moved:
        moved = [
            [
                q.qid,
                f"{q.a:.3f}",
                f"{q.b:.3f}",
                signed(q.diff),
                hits_text(q.entered),
                hits_text(q.left),
            ]
            for q in result.moved
        ]
        header = ["query", result.a.ref, result.b.ref, "Δ", "entered top k (label)", "left it"]
        lines += [f"Queries that moved most in {first}:", "", markdown_table(header, moved), ""]
    return "\n".join(lines)


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([GateConfig], args)
    if not config.store:
        raise InputError("give --store")
    store = open_store(config.store, write=False)
    try:
        decision, result = judge(store, config)
    finally:
        store.close()
    print(decision.reason)
    if config.markdown:
        with open(config.markdown, "a", encoding="utf-8") as summary:
            summary.write(markdown_summary(decision, result))
    if not decision.passed:
        sys.exit(1)
