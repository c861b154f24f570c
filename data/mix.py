"""Training judgments from other question-answering collections (never the evaluation queries).

    relevance-grader mix --shared ../shared/data --out data/collections/qa-training-mix
    # the paper-scale mix (~48k pairs, tens of MB: built, never committed)
    relevance-grader mix --config data/configs/qa-mix-48k.yaml --shared ../shared/data

A student trained on a few dozen queries of one collection learns that collection's queries, not
relevance. Questions from other collections, with the passage that answers them and passages on
the same topic that do not, teach "does this passage answer this question" across many queries:

- SQuAD v1.1 dev (CC BY-SA 4.0): a question's gold paragraph (grade 3) and up to
  ``squad_negatives`` other paragraphs of the same article that contain none of its gold answer
  strings (grade 0: same topic, no answer; the answer check guards against the false negatives
  that SQuAD's README warns of);
- WikiQA (Microsoft Research data licence): every candidate sentence of the questions that have
  a correct one, with the Wikipedia page title (correct: grade 3, others: grade 0);
- SciFact *train* claims (CC BY-NC 2.0; ``qrels_train.tsv``, never the test claims of
  ``qrels.tsv``): each claim's cited abstracts (grade 3) and its ``scifact_negatives`` best BM25
  hits among the other abstracts (grade 0: on topic, not cited; ``data.candidates.BM25Index``,
  the project's one BM25, over title and text).

Counts are numbers of questions (SQuAD, SciFact) or pairs (WikiQA, whole questions): 0 takes
none of that source, -1 all of it.

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
from data.beir import Collection, read_qrels

# A count option's "every question (or pair) of the source".
ALL = -1


@dataclass
class MixConfig:
    shared: str = field(
        default="../shared/data", metadata={"help": "Folder of staged collections."}
    )
    out: str = field(default="data/collections/qa-training-mix")
    squad_questions: int = field(
        default=300, metadata={"help": "SQuAD questions sampled (0: none, -1: all)."}
    )
    squad_negatives: int = field(
        default=2, metadata={"help": "Same-article negatives per question (at most)."}
    )
    wikiqa_pairs: int = field(
        default=400, metadata={"help": "WikiQA pairs, whole questions (0: none, -1: all)."}
    )
    scifact_claims: int = field(
        default=0, metadata={"help": "SciFact train claims sampled (0: none, -1: all)."}
    )
    scifact_negatives: int = field(
        default=3, metadata={"help": "BM25 negatives per SciFact claim."}
    )
    seed: int = field(default=13)

    def __post_init__(self) -> None:
        for name in ("squad_questions", "wikiqa_pairs", "scifact_claims"):
            if getattr(self, name) < ALL:
                raise InputError(f"{name}: expected >= 0, or -1 for all, got {getattr(self, name)}")
        for name in ("squad_negatives", "scifact_negatives"):
            if getattr(self, name) < 0:
                raise InputError(f"{name}: expected >= 0, got {getattr(self, name)}")


def _first(items: list[str], count: int) -> list[str]:
    """The first ``count`` items, or all of them for :data:`ALL`."""
    return items if count == ALL else items[:count]


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
    source: str,
    qid: str,
    query: str,
    doc_id: str,
    text: str,
    title: str | None,
    grade: int,
    judge: str | None = None,
) -> Judgment:
    """A judgment of ``source`` with ids prefixed by it; ``judge`` names where the grade came from
    (default: the source's gold labels)."""
    return Judgment(
        qid=f"{source}:{qid}",
        query=query,
        doc_id=f"{source}:{doc_id}",
        text=text,
        title=title or None,
        grade=grade,
        label=label_from_grade(grade),
        judge={"model": judge or f"{source} gold labels", "prompt": "qrels", "backend": "qrels"},
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
    for qid in _first(qids, questions):
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
        if pairs != ALL and len(out) >= pairs:
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


def scifact_judgments(
    root: Path, claims: int, negatives: int, rng: random.Random
) -> list[Judgment]:
    """SciFact train claims: each cited abstract (grade 3) and the claim's best ``negatives``
    BM25 hits that it does not cite (grade 0)."""
    from data.candidates import BM25Index, corpus_texts

    collection = Collection.load(root)
    qrels = read_qrels(root / "qrels_train.tsv")
    qids = sorted(q for q, docs in qrels.items() if any(g > 0 for g in docs.values()))
    rng.shuffle(qids)
    qids = _first(qids, claims)
    doc_ids = sorted(collection.corpus)  # the order corpus_texts indexes
    index = BM25Index(corpus_texts(collection))
    claims_text = [_claim(collection, root, qid) for qid in qids]
    # Enough hits that the negatives remain after the cited abstracts are left out.
    depth = min(len(doc_ids), negatives + max(len(qrels[q]) for q in qids)) if qids else 0
    hits = index.search(claims_text, depth) if negatives and qids else [[] for _ in qids]
    out: list[Judgment] = []
    for qid, claim, found in zip(qids, claims_text, hits, strict=True):
        cited = sorted(d for d, grade in qrels[qid].items() if grade > 0)
        uncited = [doc_ids[i] for i, _ in found if doc_ids[i] not in qrels[qid]][:negatives]
        for doc_id, grade in [(d, 3) for d in cited] + [(d, 0) for d in uncited]:
            doc = collection.corpus[doc_id]
            judge = "scifact gold labels" if grade else "scifact BM25 negatives"
            out.append(_judgment("scifact", qid, claim, doc_id, doc.text, doc.title, grade, judge))
    return out


def _claim(collection: Collection, root: Path, qid: str) -> str:
    if qid not in collection.queries:
        raise InputError(f"{root / 'qrels_train.tsv'}: claim {qid!r} is not in queries.jsonl")
    return collection.queries[qid]


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
    if config.scifact_claims:
        judgments += scifact_judgments(
            shared / "scifact", config.scifact_claims, config.scifact_negatives, rng
        )
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
