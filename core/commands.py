"""The ``relevance-grader`` console script: one command whose subcommands are the modules.

    relevance-grader --help
    relevance-grader label --collection data/collections/adi --pool_from_qrels true --out j.jsonl
    relevance-grader train --config train/configs/smollm2-135m-ql.yaml --dataset runs/dataset

Each subcommand runs its module exactly as ``python -m MODULE`` does (same flags, same YAML
configs, same exit codes); the module names stay the public interface, and this is a shorter
way to reach them.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Sequence

# Subcommand -> (module, what it does), in the order of the pipeline.
COMMANDS: dict[str, tuple[str, str]] = {
    "prepare": ("models.prepare", "convert an embedded model into the local cache once"),
    "validate": ("data.validate", "check pair or judgment JSONL files line by line"),
    "candidates": ("data.candidates", "top-k candidate pairs per query (MiniLM + HNSW, BM25)"),
    "run": (
        "data.engine",
        "a TREC run straight from a search endpoint (Pinecone, OpenSearch, Vespa, any JSON API)",
    ),
    "label": ("data.label", "teacher judgments of pairs (cached, resumable)"),
    "judge-agreement": ("data.judge_agreement", "a judge's labels against human labels"),
    "build": ("data.build", "query-grouped, stratified dataset splits"),
    "train": ("train", "fine-tune a grader (also under accelerate launch -m train)"),
    "evaluate": ("eval.checkpoint", "a grader, zero-shot LM, judge or baseline on held-out pairs"),
    "compare": ("eval.compare", "one table from several evaluations"),
    "export": ("models.export", "a self-describing export with its round-trip check and card"),
    "push": ("models.push", "upload an export to the hub"),
    "search": ("eval.search", "retrieval metrics of runs under a labeler, paired tests"),
    "history": ("eval.history", "the evaluation history store: record, list, show evaluations"),
    "rerank": ("eval.rerank", "rerank a run's top-k by the grader"),
    "ranking-agreement": ("eval.ranking_agreement", "Kendall's tau between system rankings"),
    "zoo": (
        "eval.zoo.command",
        "rank labelers by how they rank a zoo of retrieval systems (τ, τ_AP, ρ, PPI++)",
    ),
    "report": ("eval.report", "one HTML page of an eval.search, main-job or zoo folder"),
    "ppi": ("eval.ppi", "draw the queries to have judged (PPI++ estimates in search)"),
    "annotate": ("eval.annotate", "judge the drawn queries' hits in the browser (agreement: κ)"),
    "recalibrate": ("eval.recalibrate", "refit an export's threshold on your judged queries"),
    "serve": ("eval.api", "the eval_search REST API"),
    "pipeline": ("eval.pipeline", "the main job, every stage end to end"),
    "study": ("eval.study", "baselines and graders over query-grouped folds"),
    "downstream": ("eval.downstream", "which labeler tracks a RAG reader's end-to-end quality"),
    "mix": ("data.mix", "training judgments from other QA collections"),
    "synthesize": ("data.synthesize", "synthetic training queries from a corpus, labelled"),
    "random-model": ("models.random_model", "a random-weight model of a production shape"),
}


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = [
        "usage: relevance-grader COMMAND [--help] [ARGS ...]",
        "",
        "Train relevance graders and use them to label retrieval runs. Each command runs",
        "`python -m MODULE ARGS`; `relevance-grader COMMAND --help` lists its flags.",
        "",
        "commands:",
    ]
    lines += [
        f"  {name:<{width}}  {help_} ({module})" for name, (module, help_) in COMMANDS.items()
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        sys.exit(0 if args else 2)
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(
            f"error: unknown command {name!r}; `relevance-grader --help` lists them",
            file=sys.stderr,
        )
        sys.exit(2)
    module = COMMANDS[name][0]
    # The module parses sys.argv as `python -m MODULE` would; its usage line names the subcommand.
    sys.argv = [f"relevance-grader {name}", *rest]
    runpy.run_module(module, run_name="__main__")


if __name__ == "__main__":
    main()
