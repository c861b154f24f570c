"""Populations and cheap labels for the coverage study (benchmarks.ppi_coverage,
docs/results/ppi-coverage.md 2026-11-26), where the grader's labels cost too much on a 2-core CPU.

    # a seeded sample of a BEIR collection's queries with their qrels (the corpus linked)
    python -m benchmarks.coverage_populations --task sample --collection ../shared/data/squad-dev \\
        --n 1000 --seed 0 --out runs/collections/squad-dev-1000
    # the MiniLM cosine of every hit of RUNS_DIR's bm25 and dense top 10 as a judgments JSONL
    # (eval.search --labeler judgments:OUT): relevant at or above the --quantile of the pooled
    # hits' cosines (no human label is read), P(relevant) the cosine cut to [0, 1]
    python -m benchmarks.coverage_populations --task cosine --collection ../shared/data/scifact \\
        --runs_dir runs/coverage/scifact/candidates --quantile 0.8 \\
        --out runs/coverage/scifact/cosine-judgments.jsonl
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.cli import bounded, choice, parse_config, run_main


@dataclass
class PopulationConfig:
    task: str = choice("sample", ("sample", "cosine"), "Sample queries, or cosine labels.")
    collection: str = field(default="", metadata={"help": "BEIR-layout folder."})
    out: str = field(default="", metadata={"help": "Output folder (sample) or JSONL (cosine)."})
    n: int = bounded(1000, 2, help="Queries to sample.")
    seed: int = field(default=0)
    runs_dir: str = field(default="", metadata={"help": "Folder of bm25.trec and dense.trec."})
    quantile: float = bounded(0.8, 0, 1, help="Cosine quantile at which a hit is relevant.")
    k: int = bounded(10, 1)


def sample(config: PopulationConfig) -> None:
    """``n`` of the collection's queries (random.Random(seed).sample of their positions in
    queries.jsonl, kept in file order), their qrels lines, and a link to the corpus."""
    source, out = Path(config.collection), Path(config.out)
    lines = (source / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    chosen = [
        lines[i] for i in sorted(random.Random(config.seed).sample(range(len(lines)), config.n))
    ]
    ids = {json.loads(line)["_id"] for line in chosen}
    qrels = (source / "qrels.tsv").read_text(encoding="utf-8").splitlines()
    kept = [qrels[0]] + [line for line in qrels[1:] if line.split("\t")[0] in ids]
    out.mkdir(parents=True, exist_ok=True)
    (out / "queries.jsonl").write_text("".join(line + "\n" for line in chosen), encoding="utf-8")
    (out / "qrels.tsv").write_text("\n".join(kept) + "\n", encoding="utf-8")
    link = out / "corpus.jsonl"
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink((source / "corpus.jsonl").resolve(), link)
    print(f"{out}: {len(chosen)} queries, {len(kept) - 1} qrels lines")


def cosine(config: PopulationConfig) -> None:
    """The dense retriever's embedder (its cached corpus embeddings) scores every pooled hit."""
    from core.io import write_jsonl
    from core.records import Judgment
    from data.beir import Collection, ranked, read_trec_run
    from data.candidates import corpus_embeddings, corpus_texts, default_index_dir
    from models.embedder import Embedder

    collection = Collection.load(config.collection)
    embedder = Embedder.load("minilm-l6", max_length=256)
    docs = corpus_embeddings(embedder, corpus_texts(collection), default_index_dir())
    row = {doc_id: i for i, doc_id in enumerate(sorted(collection.corpus))}
    runs = [read_trec_run(Path(config.runs_dir) / f"{name}.trec") for name in ("bm25", "dense")]
    qids = sorted(runs[0])
    vectors = embedder.encode([collection.queries[q] for q in qids], batch_size=64)
    pairs = []
    for qid, vector in zip(qids, vectors, strict=True):
        hits = dict.fromkeys(d for run in runs for d, _ in ranked(run.get(qid, {}))[: config.k])
        pairs += [(qid, d, float(np.dot(vector, docs[row[d]]))) for d in hits]
    threshold = float(np.quantile([c for _, _, c in pairs], config.quantile))
    records = [
        Judgment(
            qid=qid,
            query=collection.queries[qid],
            doc_id=doc_id,
            text=collection.corpus[doc_id].text,
            title=collection.corpus[doc_id].title,
            label=int(value >= threshold),
            p_relevant=min(max(value, 0.0), 1.0),
        )
        for qid, doc_id, value in pairs
    ]
    write_jsonl(config.out, records)
    share = float(np.mean([r.label for r in records]))
    print(
        f"{config.out}: {len(records)} pairs, relevant at cosine >= {threshold:.4f} ({share:.2f})"
    )


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([PopulationConfig], args)
    if not (config.collection and config.out):
        raise ValueError("give --collection and --out")
    (sample if config.task == "sample" else cosine)(config)


if __name__ == "__main__":
    run_main(main)
