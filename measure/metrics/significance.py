"""One significance rule for every comparison this repository shows (eval.search's console and
Markdown tables, the main job's report.md, the HTML report): the **primary metric**'s comparisons
are adjusted for their number by Holm's step-down method and called significant when the adjusted
p-value is below alpha; every other metric's test is **marginal** (unadjusted for the number of
metrics and comparisons) and is never marked or called significant. The same rule applies to the
PPI++ differences (eval.search.ppi_report) and to the paired tests on the labeler's labels
(ranx's, here); a mark is explained where it is printed."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from core.io import markdown_table

K = TypeVar("K", bound=Hashable)
# ranx's letters for the runs of a comparison, as superscripts.
SUPERSCRIPTS = "ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖ۹ʳˢᵗᵘᵛʷˣʸᶻ"
TESTS = {
    "student": "a paired Student's t test",
    "fisher": "Fisher's paired randomization test",
    "tukey": "Tukey's HSD test",
}


def holm_adjusted(p_values: Mapping[K, float]) -> dict[K, float]:
    """Holm's step-down adjusted p-values (each at most 1, never below a smaller p's)."""
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    adjusted: dict[K, float] = {}
    running = 0.0
    for rank, (key, p) in enumerate(ordered):
        running = max(running, min(1.0, (len(ordered) - rank) * p))
        adjusted[key] = running
    return adjusted


def multiplicity_rule(primary: str, count: int, alpha: float, what: str) -> str:
    """The rule in words, for every legend that uses it (``what``: the comparisons tested)."""
    return (
        f"{primary} is the primary metric: its {count} {what} are called significant when "
        f"Holm's adjusted p-value (over those {count}) is below {alpha:g}; every other metric's "
        "test or interval is marginal, not adjusted for the number of metrics and comparisons, "
        "and is not called significant"
    )


def letter(index: int) -> str:
    return "abcdefghijklmnopqrstuvwxyz"[index] if index < 26 else str(index + 1)


def superscript(index: int) -> str:
    return SUPERSCRIPTS[index] if index < 26 else f"^{index + 1}"


@dataclass(frozen=True)
class LabelerTests:
    """The paired tests on the labeler's labels (ranx's p-values in metrics.json) under the rule:
    on the primary metric, Holm over every pair of runs."""

    primary: str
    alpha: float
    test: str  # ranx's stat_test: student, fisher, tukey
    runs: tuple[str, ...]
    adjusted: dict[frozenset[str], float]  # the primary metric's pairs -> Holm-adjusted p
    means: dict[str, float]  # the primary metric's mean per run

    def beats(self, run: str, other: str) -> bool:
        """``run`` is significantly better than ``other`` on the primary metric."""
        p = self.adjusted.get(frozenset((run, other)))
        return p is not None and p < self.alpha and self.means[run] > self.means[other]

    def beaten(self, run: str) -> list[str]:
        return [other for other in self.runs if other != run and self.beats(run, other)]

    def legend(self) -> str:
        test = TESTS.get(self.test, self.test)
        pairs = len(self.adjusted)
        return (
            f"A superscript letter beside a mean of {self.primary} names each run it beats by "
            f"{test} on the labeler's labels, Holm-adjusted over the {pairs} pair(s) of runs, "
            f"p < {self.alpha:g}. Only {self.primary}, the primary metric, is marked: the other "
            "metrics' tests are marginal (unadjusted; their p-values are in metrics.json) and are "
            "not called significant. A test on the labeler's labels says nothing of the labeler's "
            "own errors."
        )


def labeler_tests(
    p_value, runs: list[str], means: Mapping[str, float], primary: str, alpha: float, test: str
) -> LabelerTests:
    """The rule applied to ``p_value(metric, run, other)`` (SearchMetrics.p_value) of ``runs``
    on ``primary`` (None where a pair was not tested)."""
    raw = {}
    for i, run in enumerate(runs):
        for other in runs[i + 1 :]:
            p = p_value(primary, run, other)
            if p is not None:
                raw[frozenset((run, other))] = float(p)
    return LabelerTests(
        primary=primary,
        alpha=alpha,
        test=test,
        runs=tuple(runs),
        adjusted=holm_adjusted(raw),
        means={run: float(means[run]) for run in runs},
    )


def marked_table(
    mean: Mapping[str, Mapping[str, float | None]], tests: LabelerTests | None, digits: int = 4
) -> str:
    """Each run's mean metrics (Markdown), the primary metric's means marked by ``tests``, with
    the legend below; without tests (one run), the plain table."""
    runs = list(mean)
    names = sorted(next(iter(mean.values())))
    index = {run: i for i, run in enumerate(runs)}

    def value(run: str, metric: str) -> str:
        number = mean[run][metric]
        text = "–" if number is None else f"{number:.{digits}f}"
        if tests is None or metric != tests.primary:
            return text
        return text + "".join(superscript(index[other]) for other in tests.beaten(run))

    if tests is None:
        return markdown_table(
            ["run", *names], [[run, *(value(run, m) for m in names)] for run in runs]
        )
    rows = [[letter(index[run]), run, *(value(run, m) for m in names)] for run in runs]
    return markdown_table(["", "run", *names], rows) + f"\n{tests.legend()}\n"
