"""The README's results block, regenerated from a main-job run instead of edited by hand.

    relevance-grader readme --run_dir runs/main                  # print the block
    relevance-grader readme --run_dir runs/main --readme README.md   # replace it in place
    relevance-grader readme --run_dir runs/main --check README.md    # differ? exit 1

The block is the cross-validated held-out quality (the grader beside the BM25 and MiniLM-cosine
baselines and the embedded LLM judge, on the same pairs, with the paired intervals), then NDCG@k
of the retrieval runs under the grader's labels and under people's, and the labelers ranked by
how they rank the compact system zoo (Kendall's τ with intervals). It lands between the README's
``results`` markers.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.cli import bounded, parse_config, run_main
from core.errors import InputError
from core.io import atomic_writer
from eval.report.inputs import job_summary, read_inputs
from eval.report.leaderboard_markdown import compact_markdown
from measure.classification.crossval import pooled_table
from measure.classification.summaries import JobSummary

START, END = "<!-- results:start -->", "<!-- results:end -->"
# Float noise between CPUs: the README's run is float32; another CPU sums in another order, which
# can move a pair across a fitted threshold (one pair of 1,290 moves F1 by about 0.003) or an
# interval's end by a few thousandths. A changed split, model or metric moves figures by more.
TOLERANCE = 0.01
NUMBER = re.compile(r"[-+−]?\d+(?:\.\d+)?")


@dataclass
class ReadmeConfig:
    run_dir: str = field(default="runs/main", metadata={"help": "A main-job run directory."})
    readme: str | None = field(
        default=None, metadata={"help": "Replace the block between the results markers here."}
    )
    check: str | None = field(
        default=None,
        metadata={
            "help": "Compare this README's block with the run's instead (exit 1 when they "
            "differ beyond --tolerance)."
        },
    )
    tolerance: float = bounded(
        TOLERANCE,
        0,
        help="Largest difference allowed between a figure of the README and the run's.",
    )


def results_table(summary: JobSummary) -> str:
    """The headline of a main job's ``summary.json``: the cross-validated quality table, the
    retrieval runs' NDCG under the grader and under people, and the labeler leaderboard."""
    cross = summary.cross_validation
    source = "human judgments" if cross.source == "human" else "teacher labels"
    queries = sum(summary.queries_per_fold)
    ndcg = next(m for m in next(iter(summary.search.values())) if m.startswith("ndcg@"))
    runs = ", ".join(f"{run} {values[ndcg]:.3f}" for run, values in summary.search.items())
    human = summary.human_all_queries or {}
    truth = ", ".join(f"{run} {values[ndcg]:.3f}" for run, values in human.items())
    block = (
        f"{summary.folds}-fold cross-validation by query over {queries} judged queries, "
        f"against the {source}; thresholds fitted on validation queries inside each fold; Δ is "
        "the per-query ROC-AUC difference to each baseline with its 95% interval:\n\n"
        + pooled_table(cross, summary.names)
        + f"\n{ndcg} of the retrieval runs (the grader of fold {summary.export_fold} labels "
        f"them) under the grader's labels of the runs' pooled top k: {runs}"
        + (f"; under the human judgments (all judged passages): {truth}" if truth else "")
        + ".\n"
    )
    if summary.leaderboard is not None:
        block += "\n" + compact_markdown(summary.leaderboard)
    return block


def block_of(text: str) -> str:
    """The README's block between the results markers."""
    if START not in text or END not in text:
        raise InputError(f"the README has no {START} ... {END} markers")
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def differences(written: str, produced: str, tolerance: float = TOLERANCE) -> list[str]:
    """Where the README's block and the run's differ: other text, a whole number that is not
    equal, or a decimal further apart than ``tolerance``."""
    if NUMBER.sub("#", written) != NUMBER.sub("#", produced):
        return ["the text around the figures differs (regenerate the block)"]
    found = []
    for a, b in zip(NUMBER.findall(written), NUMBER.findall(produced), strict=True):
        x, y = (float(v.replace("−", "-")) for v in (a, b))
        whole = "." not in a and "." not in b
        if (whole and x != y) or abs(x - y) > tolerance:
            found.append(f"README {a}, run {b}")
    return found


def replace_between_markers(text: str, block: str) -> str:
    block_of(text)  # the markers are there
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{block}{END}{tail}"


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([ReadmeConfig], args)
    path = Path(config.run_dir) / JobSummary.FILE
    if not path.is_file():  # before reading the folder: a folder without a run says only this
        raise FileNotFoundError(f"{path}: no summary (run `relevance-grader pipeline` first)")
    block = results_table(job_summary(read_inputs(config.run_dir)))
    if config.check:
        written = block_of(Path(config.check).read_text(encoding="utf-8"))
        found = differences(written, block, config.tolerance)
        if found:
            print(f"{config.check}: the results block differs from {path}: " + "; ".join(found))
            sys.exit(1)
        print(f"{config.check}: the results block matches {path} (tolerance {config.tolerance})")
        return
    if config.readme is None:
        print(block, end="")
        return
    readme = Path(config.readme)
    updated = replace_between_markers(readme.read_text(encoding="utf-8"), block)
    with atomic_writer(readme) as handle:
        handle.write(updated)
    print(f"updated the results table of {readme} from {path}")


if __name__ == "__main__":
    run_main(main)
