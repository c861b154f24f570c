"""The SQuAD v1.1 dev subset that the downstream (eRAG) evaluation runs on.

    relevance-grader squad --source ../shared/data/squad-dev --out data/collections/squad-dev

Keeps the whole corpus (2,067 paragraphs of 48 articles: retrieval searches all of them) and a
seeded sample of questions with their gold answers and gold paragraph, leaving out every question
that a training mix holds (``--exclude``: judgments JSONL files whose ``squad:`` query ids name
SQuAD questions), so that no grader is evaluated on a question it was trained on.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from core.cli import bounded, parse_config, run_main
from core.errors import InputError
from core.io import (
    RecordError,
    iter_json_lines,
    refuse_overlap,
    replace_folder,
    write_json,
    write_jsonl,
)


@dataclass
class SquadSubsetConfig:
    source: str = field(
        default="../shared/data/squad-dev", metadata={"help": "The staged SQuAD dev folder."}
    )
    out: str = field(default="data/collections/squad-dev")
    questions: int = bounded(1000, 1, help="Questions sampled.")
    exclude: list[str] = field(
        default_factory=lambda: [
            "data/collections/qa-training-mix/judgments.jsonl",
            "data/collections/qa-training-mix-large/judgments.jsonl",
        ],
        metadata={"help": "Training judgments whose squad: questions are left out."},
    )
    seed: int = 13


def training_questions(paths: Sequence[str]) -> set[str]:
    """SQuAD question ids (without the ``squad:`` prefix) used by these training judgments."""
    ids: set[str] = set()
    for path in paths:
        for _, obj in iter_json_lines(path):
            if isinstance(obj, RecordError):
                raise obj
            qid = str(obj.get("qid", ""))
            if qid.startswith("squad:"):
                ids.add(qid.removeprefix("squad:"))
    return ids


class SquadSubset(TypedDict):
    """OUT/manifest.json of a SQuAD subset."""

    config: dict[str, Any]  # the SquadSubsetConfig, less --out
    questions: int
    excluded_training_questions: int
    articles: int


def build_subset(config: SquadSubsetConfig) -> SquadSubset:
    source = Path(config.source)
    inputs = [("source", config.source), *(("exclude", path) for path in config.exclude)]
    refuse_overlap("out", config.out, inputs)  # --out is replaced as a whole
    rows: list[dict[str, Any]] = []
    for _, obj in iter_json_lines(source / "queries.jsonl"):
        if isinstance(obj, RecordError):
            raise obj
        rows.append(obj)
    excluded = training_questions(config.exclude)
    eligible = sorted(
        (r for r in rows if r["_id"] not in excluded and r.get("answers")), key=lambda r: r["_id"]
    )
    if len(eligible) < config.questions:
        raise InputError(f"questions: only {len(eligible)} eligible questions in {source}")
    sample = random.Random(config.seed).sample(eligible, config.questions)
    sample.sort(key=lambda r: r["_id"])
    with replace_folder(config.out) as tmp:
        shutil.copyfile(source / "corpus.jsonl", tmp / "corpus.jsonl")
        write_jsonl(tmp / "queries.jsonl", sample)
        with open(tmp / "qrels.tsv", "w", encoding="utf-8") as handle:
            handle.write("query-id\tcorpus-id\tscore\n")
            for row in sample:
                handle.write(f"{row['_id']}\t{row['metadata']['gold_doc']}\t1\n")
        manifest: SquadSubset = {
            "config": {k: v for k, v in vars(config).items() if k != "out"},
            "questions": len(sample),
            "excluded_training_questions": len(excluded),
            "articles": len({r["metadata"]["article"] for r in sample}),
        }
        write_json(tmp / "manifest.json", manifest)
        readme = source / "README.txt"
        notes = readme.read_text(encoding="utf-8") if readme.exists() else ""
        (tmp / "SOURCE.txt").write_text(
            notes + f"\nThis subset: relevance-grader squad --source {config.source} --out "
            f"{config.out} --questions {config.questions} --seed {config.seed} (the whole corpus; "
            f"questions outside {', '.join(config.exclude)}).\n",
            encoding="utf-8",
        )
    return manifest


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([SquadSubsetConfig], args)
    manifest = build_subset(config)
    print(json.dumps(manifest, indent=2))


if __name__ == "__main__":
    run_main(main)
