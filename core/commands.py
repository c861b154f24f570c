"""The ``relevance-grader`` console script: one table of the product's commands, each the
``main`` of the module that does the work (litgpt's and TRL's way).

    relevance-grader --help
    relevance-grader label --collection data/collections/adi --pool_from_qrels true --out j.jsonl
    relevance-grader history gate --store runs/history.sqlite --system dense --candidate v4

A command is a name (``label``) or a group and a name (``history gate``, ``annotate
agreement``); both live in :data:`COMMANDS`, so a new command is one entry. Each reads its flags
with :func:`core.cli.parse_config` and runs under :func:`core.cli.run_main` (bad input: one line,
exit 2). From a checkout without the package installed, ``python -m core.commands`` is the same
script. The benchmarks are not installed, so they are not here (``python -m benchmarks.NAME``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from core.cli import run_main
from core.errors import InputError


@dataclass(frozen=True)
class Command:
    """A command: the module whose ``main(args)`` runs it, and what it does in a line."""

    module: str
    help: str

    def main(self) -> Callable[[Sequence[str] | None], Any]:
        """The module's ``main``, imported only when the command runs (each imports its own)."""
        return importlib.import_module(self.module).main


# Name -> command, in the order of the pipeline; "GROUP NAME" for a group's command.
COMMANDS: dict[str, Command] = {
    "prepare": Command("models.prepare", "convert an embedded model into the local cache once"),
    "validate": Command("data.validate", "check pair or judgment JSONL files line by line"),
    "candidates": Command(
        "data.candidates", "top-k candidate pairs per query (MiniLM + HNSW, BM25)"
    ),
    "run": Command(
        "data.engine.command",
        "a TREC run straight from a search endpoint (Pinecone, OpenSearch, Vespa, any JSON API)",
    ),
    "label": Command("data.label", "teacher judgments of pairs (cached, resumable)"),
    "judge-agreement": Command("data.judge_agreement", "a judge's labels against human labels"),
    "build": Command("data.build", "query-grouped, stratified dataset splits"),
    "mix": Command("data.mix", "training judgments from other QA collections"),
    "synthesize": Command("data.synthesize", "synthetic training queries from a corpus, labelled"),
    "squad": Command("data.squad", "the SQuAD dev subset the downstream experiment runs on"),
    "train": Command("train.train", "fine-tune a grader (on GPUs: accelerate launch -m train)"),
    "evaluate": Command(
        "measure.classification.checkpoint",
        "a grader, zero-shot LM, judge or baseline on held-out pairs",
    ),
    "compare": Command("measure.classification.compare", "one table from several evaluations"),
    "export": Command("models.export", "a self-describing export with its round-trip check"),
    "push": Command("models.push", "upload an export to the hub"),
    "random-model": Command("models.random_model", "a random-weight model of a production shape"),
    "search": Command(
        "eval.search.command", "retrieval metrics of runs under a labeler, paired tests"
    ),
    "rerank": Command("measure.labelers.rerank", "rerank a run's top-k by the grader"),
    "ranking-agreement": Command(
        "measure.metrics.ranking_agreement", "Kendall's tau between system rankings"
    ),
    "zoo": Command(
        "eval.zoo.command",
        "rank labelers by how they rank a zoo of retrieval systems (τ, τ_AP, ρ, PPI++)",
    ),
    "report": Command("eval.report.__main__", "one HTML page of a search, main-job or zoo folder"),
    "ppi": Command("judgments.draw", "draw the queries to have judged (PPI++ estimates in search)"),
    "annotate": Command(
        "judgments.annotate.__main__", "judge the drawn queries' hits in a browser"
    ),
    "annotate agreement": Command(
        "judgments.annotate.agreement", "assessors against each other: κ, hits to adjudicate"
    ),
    "recalibrate": Command(
        "judgments.recalibrate", "refit an export's threshold on your judged queries"
    ),
    "history record": Command("eval.history.record_command", "record a search output folder"),
    "history list": Command("eval.history.listing", "the recorded evaluations, oldest first"),
    "history show": Command("eval.history.show", "each metric of one system over its versions"),
    "history compare": Command(
        "eval.history.compare", "two evaluations paired, with intervals and moved queries"
    ),
    "history gate": Command(
        "eval.history.gate", "a release gate for CI: fail on a regression beyond a margin"
    ),
    "history monitor": Command(
        "eval.history.monitor", "a live system's repeated checks, anytime-valid"
    ),
    "history page": Command(
        "eval.history.page", "one offline page: trends, evaluations, comparisons"
    ),
    "serve": Command("eval.api.__main__", "the eval_search REST API"),
    "pipeline": Command("eval.jobs.pipeline", "the main job, every stage end to end"),
    "study": Command("eval.jobs.study", "baselines and graders over query-grouped folds"),
    "readme": Command("eval.report.readme", "the README's results block from a main-job run"),
}

PROGRAM = "relevance-grader"


def group_names(group: str) -> list[str]:
    """The commands of ``group`` (``history`` -> record, list, ...), in the table's order."""
    return [name.split(" ", 1)[1] for name in COMMANDS if name.startswith(f"{group} ")]


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = [
        f"usage: {PROGRAM} COMMAND [--help] [ARGS ...]",
        "",
        "Train relevance graders and use them to label retrieval runs; "
        f"`{PROGRAM} COMMAND --help` lists a command's flags.",
        "",
        "commands (the module that runs each in parentheses):",
    ]
    lines += [
        f"  {name:<{width}}  {command.help} ({command.module})"
        for name, command in COMMANDS.items()
    ]
    return "\n".join(lines)


def group_usage(group: str) -> str:
    names = group_names(group)
    width = max(len(name) for name in names)
    lines = [f"usage: {PROGRAM} {group} COMMAND [--help] [ARGS ...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {COMMANDS[f'{group} {name}'].help}" for name in names]
    return "\n".join(lines)


def find(args: Sequence[str]) -> tuple[str, list[str]]:
    """(command name, its arguments) of a command line: a group's command where the first two
    words name one, else the first word's; an unknown name is an :class:`InputError`."""
    first, rest = args[0], list(args[1:])
    if rest and f"{first} {rest[0]}" in COMMANDS:
        return f"{first} {rest[0]}", rest[1:]
    if first in COMMANDS:
        return first, rest
    if group_names(first):
        expected = ", ".join(group_names(first))
        if not rest or rest[0].startswith("-"):
            raise InputError(f"{first}: give a command: {expected}")
        raise InputError(f"{first}: unknown command {rest[0]!r}; expected one of {expected}")
    raise InputError(f"unknown command {first!r}; `{PROGRAM} --help` lists them")


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        sys.exit(0 if args else 2)
    if group_names(args[0]) and args[0] not in COMMANDS and args[1:2] in (["-h"], ["--help"]):
        print(group_usage(args[0]))
        sys.exit(0)
    try:
        name, rest = find(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    # The command's parser names it in its usage line (argparse's prog is argv[0]).
    sys.argv = [f"{PROGRAM} {name}", *rest]
    run_main(COMMANDS[name].main(), rest)


if __name__ == "__main__":
    main()
