"""The metrics ``eval.search --metrics`` adds to its standard set, by name: ranx's names or this
tool's, with a cut-off where the metric takes one (``ndcg@5``, ``map@100``, ``recall@20``,
``r-precision``, ``judged@10``).

NDCG uses graded labels with the 2^rel − 1 gain (ranx's ``ndcg_burges``, as the standard
``ndcg@k``); the others binary relevance. ``judged@c`` is not a ranx metric: the share of a
query's top c hits that the labeler holds a judgment for (a qrels labeler's unjudged hits, or a
judge's unusable replies, are not judged), the pool coverage trec_eval users read beside a
metric that counts unjudged hits as not relevant."""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import InputError

# The metric of the one significance rule (Holm-adjusted over the pairs of runs) and of the
# labeler's random-sample check, at the cut-off k.
PRIMARY_METRIC = "ndcg@{k}"
STAT_TESTS = ("student", "fisher", "tukey")  # ranx's paired tests

# This tool's base name -> ranx's.
GRADED = {"ndcg": "ndcg_burges"}
BINARY = {
    "map": "map",
    "mrr": "mrr",
    "precision": "precision",
    "recall": "recall",
    "f1": "f1",
    "hit": "hit_rate",
    "r-precision": "r-precision",
}
JUDGED = "judged"
ALIASES = {
    "ndcg_burges": "ndcg",
    "hit_rate": "hit",
    "r_precision": "r-precision",
    "rprec": "r-precision",
    "p": "precision",
}
NO_CUTOFF = ("r-precision",)
NEEDS_CUTOFF = ("precision", "recall", "f1", "hit", JUDGED)


@dataclass(frozen=True)
class MetricName:
    base: str
    cutoff: int | None = None

    @property
    def name(self) -> str:
        """The name in metrics.json, per_query.json/.txt and the report."""
        return f"{self.base}@{self.cutoff}" if self.cutoff else self.base

    @property
    def ranx(self) -> str:
        base = GRADED.get(self.base) or BINARY[self.base]
        return f"{base}@{self.cutoff}" if self.cutoff else base

    @property
    def graded(self) -> bool:
        return self.base in GRADED


def standard_metric_names(k: int, recall: bool) -> list[str]:
    """The metrics every evaluation reports (``--metrics`` adds others)."""
    return [f"ndcg@{k}", "map", "mrr", f"precision@{k}", f"hit@{k}"] + (
        [f"recall@{k}"] if recall else []
    )


def parse_metric(text: str, k: int) -> MetricName:
    """``text`` as a metric name; a ValueError naming --metrics for a name this tool does not
    compute, or a cut-off past ``k`` (hits below k are never labelled)."""
    base, at, cutoff_text = text.strip().lower().partition("@")
    base = ALIASES.get(base, base)
    known = sorted([*GRADED, *BINARY, JUDGED])
    if base not in known:
        raise InputError(f"--metrics: unknown metric {text!r} (known: {', '.join(known)})")
    if base in NO_CUTOFF and at:
        raise InputError(f"--metrics: {base} takes no cut-off (got {text!r})")
    if base in NEEDS_CUTOFF and not at:
        raise InputError(f"--metrics: {base} needs a cut-off, as {base}@{k}")
    cutoff = None
    if at:
        if not cutoff_text.isdigit() or int(cutoff_text) < 1:
            raise InputError(f"--metrics: {text!r}: the cut-off must be a positive integer")
        cutoff = int(cutoff_text)
        if cutoff > k:
            raise InputError(
                f"--metrics: {text!r} goes past --k {k}: only each run's top {k} hits are "
                f"labelled (raise --k to measure deeper)"
            )
    return MetricName(base, cutoff)


def parse_metrics(texts: list[str], k: int, standard: set[str]) -> list[MetricName]:
    """The extra metrics, each once, leaving out those the standard set already has."""
    out: list[MetricName] = []
    for text in texts:
        metric = parse_metric(text, k)
        if metric.name not in standard and metric not in out:
            out.append(metric)
    return out


def ranx_name(name: str) -> str:
    """ranx's name of a metric this tool names ``name`` (its comparison tables use ranx's)."""
    base, at, cutoff = name.partition("@")
    base = GRADED.get(base) or BINARY.get(base) or base
    return f"{base}@{cutoff}" if at else base
