"""Training judgments from other question-answering collections (never the evaluation queries).

    python -m data.mix --shared ../shared/data --out data/collections/qa-training-mix

A student trained on a few dozen queries of one collection learns that collection's queries, not
relevance. Questions from other collections, with the passage that answers them and passages on
the same topic that do not, teach "does this passage answer this question" across many queries:

- SQuAD v1.1 dev (CC BY-SA 4.0): a question's gold paragraph (grade 3) and up to
  ``squad_negatives`` other paragraphs of the same article that contain none of its gold answer
  strings (grade 0: same topic, no answer; the answer check guards against the false negatives
  that SQuAD's README warns of);
- WikiQA (Microsoft Research data licence): every candidate sentence of the questions that have
  a correct one, with the Wikipedia page title (correct: grade 3, others: grade 0).

Query ids are prefixed with the collection's name, so they can never collide with evaluation
queries. The output is a judgments JSONL (``judge.model`` names the source) that ``data.build
--train_only`` adds to the training split alone.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from core.cli import parse_config, run_main
from core.errors import InputError
from core.io import READ_ENCODING, refuse_overlap, write_json, write_jsonl
from core.records import Judgment, label_from_grade
from data.beir import Collection


@dataclass
class MixConfig:
    shared: str = field(
        default="../shared/data", metadata={"help": "Folder of staged collections."}
    )
    out: str = field(default="data/collections/qa-training-mix")
    squad_questions: int = field(
        default=300, metadata={"help": "SQuAD questions sampled (0: none)."}
    )
    squad_negatives: int = field(
        default=2, metadata={"help": "Same-article negatives per question."}
    )
    wikiqa_pairs: int = field(
        default=400, metadata={"help": "WikiQA pairs, whole questions (0: none)."}
    )
    seed: int = field(default=13)

    def __post_init__(self) -> None:
        for name in ("squad_questions", "squad_negatives", "wikiqa_pairs"):
            if getattr(self, name) < 0:
                raise InputError(f"{name}: expected >= 0, got {getattr(self, name)}")


def _queries_with_extras(path: Path) -> dict[str, dict[str, Any]]:
    out = {}
    with open(path, encoding=READ_ENCODING) as handle:
        for number, line in enumerate(handle, 1):
            try:
                row = json.loads(line)
                out[row["_id"]] = row
            except (json.JSONDecodeError, KeyError) as exc:
                raise InputError(f"{path}:{number}: (line): {exc}") from None
    return out


def _judgment(
    source: str, qid: str, query: str, doc_id: str, text: str, title: str | None, grade: int
) -> Judgment:
    return Judgment(
        qid=f"{source}:{qid}",
        query=query,
        doc_id=f"{source}:{doc_id}",
        text=text,
        title=title or None,
        grade=grade,
        label=label_from_grade(grade),
        judge={"model": f"{source} gold labels", "prompt": "qrels", "backend": "qrels"},
    )


def squad_judgments(
    root: Path, questions: int, negatives: int, rng: random.Random
) -> list[Judgment]:
    collection = Collection.load(root)
    extras = _queries_with_extras(root / "queries.jsonl")
    by_article: dict[str, list[str]] = {}
    for doc_id, document in sorted(collection.corpus.items()):
        by_article.setdefault(document.title or "", []).append(doc_id)
    qids = sorted(q for q in extras if extras[q].get("metadata", {}).get("gold_doc"))
    rng.shuffle(qids)
    out: list[Judgment] = []
    for qid in qids[:questions]:
        row = extras[qid]
        gold = row["metadata"]["gold_doc"]
        answers = [a.lower() for a in row.get("answers", []) if a.strip()]
        document = collection.corpus[gold]
        candidates = [
            d
            for d in by_article[document.title or ""]
            if d != gold and not any(a in collection.corpus[d].text.lower() for a in answers)
        ]
        rng.shuffle(candidates)
        for doc_id, grade in [(gold, 3)] + [(d, 0) for d in candidates[:negatives]]:
            doc = collection.corpus[doc_id]
            out.append(_judgment("squad", qid, row["text"], doc_id, doc.text, doc.title, grade))
    return out


def wikiqa_judgments(root: Path, pairs: int, rng: random.Random) -> list[Judgment]:
    collection = Collection.load(root)
    qids = sorted(q for q, docs in collection.qrels.items() if any(g > 0 for g in docs.values()))
    rng.shuffle(qids)
    out: list[Judgment] = []
    for qid in qids:
        if len(out) >= pairs:
            break
        for doc_id, grade in sorted(collection.qrels[qid].items()):
            doc = collection.corpus[doc_id]
            out.append(
                _judgment(
                    "wikiqa",
                    qid,
                    collection.queries[qid],
                    doc_id,
                    doc.text,
                    doc.title,
                    3 if grade > 0 else 0,
                )
            )
    return out


class MixManifest(TypedDict):
    """OUT/manifest.json of a mix."""

    config: dict[str, Any]  # the MixConfig, less the shared folder
    counts: dict[str, dict[str, int]]  # source -> queries, pairs, relevant


def build_mix(config: MixConfig) -> MixManifest:
    shared = Path(config.shared)
    refuse_overlap(
        "out", config.out, [("shared", shared)], writes=("judgments.jsonl", "manifest.json")
    )
    rng = random.Random(config.seed)
    judgments: list[Judgment] = []
    if config.squad_questions:
        judgments += squad_judgments(
            shared / "squad-dev", config.squad_questions, config.squad_negatives, rng
        )
    if config.wikiqa_pairs:
        judgments += wikiqa_judgments(shared / "wikiqa", config.wikiqa_pairs, rng)
    out = Path(config.out)
    write_jsonl(out / "judgments.jsonl", judgments)
    counts: dict[str, dict[str, int]] = {}
    for j in judgments:
        source = j.qid.split(":", 1)[0]
        entry = counts.setdefault(source, {"queries": 0, "pairs": 0, "relevant": 0})
        entry["pairs"] += 1
        entry["relevant"] += int(j.label or 0)
    for source in counts:
        counts[source]["queries"] = len(
            {j.qid for j in judgments if j.qid.startswith(source + ":")}
        )
    manifest: MixManifest = {
        "config": {k: v for k, v in vars(config).items() if k != "shared"},
        "counts": counts,
    }
    write_json(out / "manifest.json", manifest)
    return manifest


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([MixConfig], args)
    manifest = build_mix(config)
    print(json.dumps(manifest["counts"], indent=2))
    print(f"wrote {config.out}/judgments.jsonl")


if __name__ == "__main__":
    run_main(main)
