"""``relevance-grader history compare A B``: two recorded evaluations, paired over the queries both
have, with intervals (PPI++ on the paired differences where people judged queries in both, the
labeler-only paired t otherwise, said in words), and the queries that moved most, each with the
hits that entered or left its top k and their labels (Quepid's snapshot diff, with statistics).

Only the primary metric (NDCG@k) is called "A better" or "A worse", by its p-value
Holm-adjusted over the comparisons made (here one), as ``eval.search`` calls its runs'
differences; every other metric's interval is marginal (not adjusted for the number of metrics)
and called nothing. The output says so under the table.

Two evaluations measured by different labelers, on different corpora or on different query sets
are not comparable: the command refuses them in one line naming what differs. ``--relabel
LABELER --corpus PATH`` asks for the comparison all the same: both stored runs are labelled again
by that one labeler first (cached under ``--label_cache``).

    relevance-grader history compare dense@v4 dense@v3 --store runs/history.sqlite
    relevance-grader history compare id:12 id:9 --store runs/history.sqlite
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from core.cli import bounded, parse_config
from core.errors import InputError
from data.beir import Run, ranked, read_trec_run
from eval.history.stats import PairedComparison, called, compare
from eval.history.store import READER_STORE_HELP, EvaluationInfo, HistoryStore, open_store
from measure.metrics.names import PRIMARY_METRIC

# What two evaluations must share to be compared, and how a difference is named.
SAME = (
    ("labeler_fingerprint", "labeler", "labeler"),
    ("corpus_fingerprint", "corpus", "corpus"),
    ("queries_fingerprint", "query set", "queries"),
)
# What each command can do about a difference ({a} and {b}: the two evaluations' ids): only
# compare relabels, and a monitor uses the queries a check shares with its baseline.
RELABEL = "history compare {a} {b} --relabel LABELER --corpus PATH"
COMPARE_ADVICE = {
    "labeler": "give --relabel LABELER --corpus PATH to label both runs by one labeler first",
    "corpus": "give --relabel LABELER --corpus PATH to label both runs by one labeler first",
    "queries": "give --common_queries true to compare the queries they share",
}
GATE_ADVICE = {
    "labeler": "the gate compares evaluations of one labeler: give --baseline a version "
    f"measured by the candidate's, or compare the two with `{RELABEL}`",
    "corpus": "the gate compares evaluations of one corpus: give --baseline a version "
    f"evaluated on the candidate's, or compare the two with `{RELABEL}`",
    "queries": "give --common_queries true to gate on the queries they share",
}
PAGE_ADVICE = {
    "labeler": f"compare them with `{RELABEL}`",
    "corpus": f"compare them with `{RELABEL}`",
    "queries": "compare them on the queries they share with `history compare {a} {b} "
    "--common_queries true`",
}


@dataclass
class CompareConfig:
    a: str = field(
        default="", metadata={"help": "Evaluation A (the candidate): SYSTEM@VERSION or id:N."}
    )
    b: str = field(
        default="", metadata={"help": "Evaluation B (the baseline): SYSTEM@VERSION or id:N."}
    )
    store: str = field(default="", metadata={"help": READER_STORE_HELP})
    metrics: list[str] = field(
        default_factory=list,
        metadata={"help": "Metrics to compare (default: every metric both evaluations record)."},
    )
    moved: int = bounded(5, 0, help="Queries that moved most to list (for the first metric).")
    alpha: float = bounded(
        0.05, 0, 1, help="1 - confidence level of the intervals.", open_low=True, open_high=True
    )
    relabel: str | None = field(
        default=None,
        metadata={
            "help": "Compare evaluations made by different labelers or on different corpora all the "
            "same: label both stored runs by this labeler first (as relevance-grader search's "
            "--labeler: grader:PATH, judge:CONFIG.yaml, qrels:PATH...). Needs --corpus."
        },
    )
    corpus: str | None = field(
        default=None, metadata={"help": "With --relabel: the corpus holding both runs' documents."}
    )
    label_cache: str | None = field(
        default=None, metadata={"help": "With --relabel: the label cache folder (default: none)."}
    )
    common_queries: bool = field(
        default=False,
        metadata={
            "help": "Compare evaluations of different query sets on the queries they share "
            "(refused otherwise)."
        },
    )


class HitChange(BaseModel):
    model_config = ConfigDict(frozen=True)
    doc_id: str
    label: float | None = None  # the labeler's grade in the evaluation whose top k holds the hit


class MovedQuery(BaseModel):
    """A query whose value moved between B and A, with the hits that made it move (the command
    prints these; the history page shows them)."""

    model_config = ConfigDict(frozen=True)
    qid: str
    a: float
    b: float
    diff: float
    entered: tuple[HitChange, ...] = ()  # in A's top k, not in B's
    left: tuple[HitChange, ...] = ()  # in B's top k, not in A's


Labels = Mapping[str, Mapping[str, float]]  # qid -> doc -> the labeler's label


@dataclass(frozen=True)
class TopHits:
    """Both evaluations' stored runs and hit labels, read once for any number of metrics."""

    runs: tuple[Run, Run]
    labels: tuple[Labels, Labels]
    k: int

    @classmethod
    def read(cls, store: HistoryStore, a: EvaluationInfo, b: EvaluationInfo) -> TopHits:
        runs = (stored_run(store, a), stored_run(store, b))
        return cls(runs, (store.hit_labels(a.id), store.hit_labels(b.id)), min(a.k, b.k))

    def moved(self, comparison: PairedComparison, n: int) -> tuple[MovedQuery, ...]:
        """The ``n`` queries that moved most in ``comparison``, with their entering and leaving
        hits."""
        return tuple(
            MovedQuery(
                qid=qid, a=va, b=vb, diff=diff, **hit_changes(self.runs, self.labels, qid, self.k)
            )
            for qid, va, vb, diff in comparison.moved(n)
        )


@dataclass(frozen=True)
class EvaluationComparison:
    """A − B per metric, and the queries that moved most in the first metric."""

    a: EvaluationInfo
    b: EvaluationInfo
    metrics: dict[str, PairedComparison]
    moved: tuple[MovedQuery, ...]
    relabelled_by: str | None = None

    @property
    def primary(self) -> str:
        """The metric that is called better or worse (as eval.search's: NDCG at the k both
        evaluations share)."""
        return PRIMARY_METRIC.format(k=min(self.a.k, self.b.k))

    @cached_property
    def primary_call(self) -> tuple[str, float | None] | None:
        """The primary metric's verdict and Holm-adjusted p-value over the one comparison made
        (None when it was not compared)."""
        if self.primary not in self.metrics:
            return None
        return called([self.metrics[self.primary]])[0]

    def verdict(self, metric: str) -> str:
        """What the comparison may say of ``metric``: the primary metric's call, or
        "marginal" (an interval not adjusted for the number of metrics, called nothing)."""
        if metric != self.primary or self.primary_call is None:
            return "marginal"
        return self.primary_call[0]

    def legend(self) -> str:
        """The rule behind :meth:`verdict`, in words, for wherever the verdicts are printed."""
        level = f"{1 - next(iter(self.metrics.values())).alpha:.0%}" if self.metrics else ""
        alpha = next(iter(self.metrics.values())).alpha if self.metrics else 0.05
        marginal = (
            f"every other metric's interval is marginal: a {level} interval not adjusted for "
            "the number of metrics compared, on which no better or worse is called"
        )
        if self.primary_call is None:
            return f"{self.primary}, the primary metric, was not compared: {marginal}."
        p = self.primary_call[1]
        when = (
            f"when its p-value, Holm-adjusted over the 1 comparison made here ({p:.2g}), is "
            f"below {alpha:g}, as relevance-grader search calls its runs' differences"
            if p is not None
            else f"when its interval excludes 0 (a {self.metrics[self.primary].basis} has no "
            "p-value; Holm over the 1 comparison made here is that interval's test)"
        )
        return (
            f"Only {self.primary}, the primary metric, is called better or worse: {when}; "
            f"{marginal}."
        )


def difference(
    a: EvaluationInfo, b: EvaluationInfo, common_queries: bool
) -> tuple[str, str] | None:
    """What A and B differ in that keeps them from being compared as recorded: ("labeler",
    "corpus" or "queries", the line that says so); None when they can be."""
    for attribute, what, flag in SAME:
        if getattr(a, attribute) == getattr(b, attribute):
            continue
        if flag == "queries" and common_queries:
            continue
        shown = f" ({a.labeler} vs {b.labeler})" if flag == "labeler" else ""
        return flag, (
            f"evaluations {a.id_ref} ({a.ref}) and {b.id_ref} ({b.ref}) differ in {what}{shown}"
        )
    return None


def refusal(
    a: EvaluationInfo,
    b: EvaluationInfo,
    common_queries: bool,
    advice: Mapping[str, str] = COMPARE_ADVICE,
) -> str | None:
    """Why A and B cannot be compared as recorded, with what the command (``advice``) can do
    about it; None when they can be."""
    found = difference(a, b, common_queries)
    if found is None:
        return None
    flag, line = found
    return f"{line}; {advice[flag].format(a=a.id_ref, b=b.id_ref)}"


def stored_run(store: HistoryStore, info: EvaluationInfo) -> Run:
    with tempfile.TemporaryDirectory(prefix="history-run-") as folder:
        path = Path(folder) / f"{info.run_name}.trec"
        path.write_text(store.run_text(info.id), encoding="utf-8")
        return read_trec_run(path)


def top_k(run: Run, qid: str, k: int) -> list[str]:
    return [doc for doc, _ in ranked(run.get(qid, {}))[:k]]


def hit_changes(
    runs: tuple[Run, Run], labels: tuple[Labels, Labels], qid: str, k: int
) -> dict[str, tuple[HitChange, ...]]:
    """{entered: hits in A's top k and not B's, left: hits in B's top k and not A's}, each with
    its label."""
    top_a, top_b = top_k(runs[0], qid, k), top_k(runs[1], qid, k)
    return {
        "entered": tuple(
            HitChange(doc_id=doc, label=labels[0].get(qid, {}).get(doc))
            for doc in top_a
            if doc not in top_b
        ),
        "left": tuple(
            HitChange(doc_id=doc, label=labels[1].get(qid, {}).get(doc))
            for doc in top_b
            if doc not in top_a
        ),
    }


def common_metrics(store: HistoryStore, a: EvaluationInfo, b: EvaluationInfo) -> list[str]:
    """The metrics both record, NDCG at the shared k first (the moved queries are its)."""
    names_a = [e.metric for e in store.evaluation_estimates(a.id)]
    names_b = {e.metric for e in store.evaluation_estimates(b.id)}
    common = [name for name in names_a if name in names_b]
    primary = f"ndcg@{min(a.k, b.k)}"
    return sorted(common, key=lambda name: name != primary)


def split_values(
    values: Mapping[str, tuple[float, float | None]],
) -> tuple[dict[str, float], dict[str, float]]:
    labeler = {qid: pair[0] for qid, pair in values.items()}
    human = {qid: pair[1] for qid, pair in values.items() if pair[1] is not None}
    return labeler, human


def compare_stored(
    store: HistoryStore,
    a: EvaluationInfo,
    b: EvaluationInfo,
    metrics: Sequence[str],
    alpha: float,
    moved: int = 5,
) -> EvaluationComparison:
    """A − B from the values the store holds (the caller checked they are comparable)."""
    results = {}
    for metric in metrics:
        a_labeler, a_human = split_values(store.query_values(a.id, metric))
        b_labeler, b_human = split_values(store.query_values(b.id, metric))
        results[metric] = compare(
            metric, a_labeler, b_labeler, a_human, b_human, alpha, a_name=a.ref, b_name=b.ref
        )
    first = next(iter(results.values()), None)
    shown = TopHits.read(store, a, b).moved(first, moved) if first and moved else ()
    return EvaluationComparison(a, b, results, shown)


def resolve(store: HistoryStore, config: CompareConfig) -> tuple[EvaluationInfo, EvaluationInfo]:
    if not config.a or not config.b:
        raise InputError("give two evaluations: compare A B (each SYSTEM@VERSION or id:N)")
    a, b = store.get(config.a), store.get(config.b)
    if a.id == b.id:
        raise InputError(f"A and B are the same evaluation ({a.id_ref}, {a.ref}); give two")
    return a, b


def compare_relabelled(
    store: HistoryStore, a: EvaluationInfo, b: EvaluationInfo, config: CompareConfig
) -> EvaluationComparison:
    """A and B after one labeler (``--relabel``) labelled both stored runs again."""
    from eval.history.relabel import relabel_and_compare

    relabelled = relabel_and_compare(
        (stored_run(store, a), stored_run(store, b)),
        a,
        b,
        labeler=config.relabel or "",
        corpus=config.corpus,
        metrics=config.metrics or (),
        alpha=config.alpha,
        label_cache=config.label_cache,
    )
    labels = relabelled.labels
    hits = TopHits(relabelled.runs, (labels, labels), min(a.k, b.k))
    first = next(iter(relabelled.metrics.values()))
    moved = hits.moved(first, config.moved) if config.moved else ()
    return EvaluationComparison(a, b, relabelled.metrics, moved, relabelled_by=config.relabel)


def compare_evaluations(store: HistoryStore, config: CompareConfig) -> EvaluationComparison:
    a, b = resolve(store, config)
    if config.relabel:
        return compare_relabelled(store, a, b, config)
    if why := refusal(a, b, config.common_queries):
        raise InputError(why)
    metrics = config.metrics or common_metrics(store, a, b)
    missing = sorted(set(metrics) - set(common_metrics(store, a, b)))
    if missing:
        raise InputError(
            f"metrics: {missing[0]} is not recorded for both {a.ref} and {b.ref} (both record: "
            f"{', '.join(common_metrics(store, a, b))})"
        )
    return compare_stored(store, a, b, metrics, config.alpha, config.moved)


def signed(value: float) -> str:
    return f"{value:+.4f}".replace("-", "−")


def comparison_text(result: EvaluationComparison) -> str:
    a, b = result.a, result.b
    level = f"{1 - next(iter(result.metrics.values())).alpha:.0%}" if result.metrics else ""
    lines = [
        f"A = {a.ref} ({a.id_ref}) − B = {b.ref} ({b.id_ref}), {level} intervals"
        + (f"; both runs relabelled by {result.relabelled_by}" if result.relabelled_by else "")
    ]
    width = max((len(metric) for metric in result.metrics), default=6)
    for metric, c in result.metrics.items():
        lines.append(
            f"  {metric:<{width}}  {signed(c.estimate)} [{signed(c.low)}, {signed(c.high)}]  "
            f"{result.verdict(metric):<19}  {c.method}"
        )
    lines.append(result.legend())
    if result.moved:
        first = next(iter(result.metrics))
        lines += ["", f"queries that moved most in {first} (A, B, A − B; hits with labels):"]
        for q in result.moved:
            lines.append(f"  {q.qid}: {q.a:.3f}, {q.b:.3f}, {signed(q.diff)}")
            lines.append(f"    entered A's top {min(a.k, b.k)}: {hits_text(q.entered)}")
            lines.append(f"    left it: {hits_text(q.left)}")
    return "\n".join(lines)


def hits_text(hits: Sequence[HitChange]) -> str:
    if not hits:
        return "none"
    return ", ".join(f"{h.doc_id} ({'?' if h.label is None else f'{h.label:g}'})" for h in hits)


def positional(args: Sequence[str]) -> list[str]:
    """``compare A B --flags`` as ``--a A --b B --flags``: the issue's and the docs' spelling."""
    args = list(args)
    names = []
    while args and not args[0].startswith("-") and len(names) < 2:
        names.append(args.pop(0))
    return [
        *(f for flag, name in zip(("--a", "--b"), names, strict=False) for f in (flag, name)),
        *args,
    ]


def main(args: Sequence[str] | None = None) -> None:
    import sys

    (config,) = parse_config([CompareConfig], positional(sys.argv[1:] if args is None else args))
    if not config.store:
        raise InputError("give --store")
    store = open_store(config.store, write=False)
    try:
        result = compare_evaluations(store, config)
    finally:
        store.close()
    print(comparison_text(result))
