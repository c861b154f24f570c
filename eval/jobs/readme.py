"""The README's results table, regenerated from a main-job run instead of edited by hand.

    python -m eval.jobs.readme --run_dir runs/main               # print the table
    python -m eval.jobs.readme --run_dir runs/main --readme README.md   # replace it in place

The table is the held-out classification against the human judgments (the grader beside the
BM25 and MiniLM-cosine baselines and the embedded LLM judge, scored on the same test pairs), then
NDCG@k of the retrieval runs under the grader's labels, and the Kendall's τ of the system ranking
against the human judgments. It lands between the README's ``results`` markers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data.cli import parse_config, run_main
from data.io import atomic_writer, markdown_table

START, END = "<!-- results:start -->", "<!-- results:end -->"
COLUMNS = (
    ("roc_auc", "ROC-AUC"),
    ("query_roc_auc", "per-query ROC-AUC"),
    ("pr_auc", "PR-AUC"),
    ("f1", "F1"),
    ("kappa", "κ"),
)


@dataclass
class ReadmeConfig:
    run_dir: str = field(default="runs/main", metadata={"help": "A main-job run directory."})
    readme: str | None = field(
        default=None, metadata={"help": "Replace the table between the results markers here."}
    )
    labels: str = field(default="human", metadata={"help": "Reference labels of the table."})


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def results_table(summary: dict[str, Any], labels: str = "human") -> str:
    """The headline table of a main job's ``summary.json``."""
    rows = summary["classification"].get(labels)
    if not rows:
        raise ValueError(f"labels: the run has no evaluation against {labels} labels")
    verdicts = {None: "", True: "yes", False: "**no**"}
    table = [
        [
            f"{row['model']} (baseline)" if row["baseline"] else row["model"],
            row["pairs"],
            *(_number(row.get(key)) for key, _ in COLUMNS),
            "(baseline)" if row["baseline"] else verdicts[row["beats_baselines"]],
        ]
        for row in rows
    ]
    header = ["labeler", "test pairs", *(name for _, name in COLUMNS), "beats both baselines"]
    ndcg = next(m for m in next(iter(summary["search"].values())) if m.startswith("ndcg@"))
    runs = ", ".join(f"{run} {values[ndcg]:.3f}" for run, values in summary["search"].items())
    agreement = summary["agreement"]
    reference = agreement["reference"]
    truth = ", ".join(f"{run} {v:.3f}" for run, v in agreement["scores"][reference].items())
    taus = "; ".join(
        f"{spec.split(':')[0]} {entry['kendall_tau']:.2f}"
        for spec, entry in agreement["agreement"].items()
    )
    counts = summary["dataset"]
    return (
        f"Held-out queries ({counts['train']['queries']} train / "
        f"{counts['validation']['queries']} validation / {counts['test']['queries']} test), "
        f"against {labels} labels; thresholds fitted on validation:\n\n"
        + markdown_table(header, table)
        + f"\n{ndcg} of the retrieval runs, against the labels of the runs' pooled top k "
        f"(not trec_eval on the full qrels), under the grader's labels: {runs}; under "
        f"`{reference.split(':')[0]}` (all queries): {truth}. Kendall's τ between the two "
        f"system rankings: {taus}.\n"
    )


def replace_between_markers(text: str, block: str) -> str:
    if START not in text or END not in text:
        raise ValueError(f"the README has no {START} ... {END} markers")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{block}{END}{tail}"


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([ReadmeConfig], args)
    path = Path(config.run_dir) / "summary.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no summary (run `python -m eval.pipeline` first)")
    block = results_table(json.loads(path.read_text()), config.labels)
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
