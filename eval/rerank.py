"""Rerank a run's top-k with a grader (a "dense + grader" system for comparisons).

    python -m eval.rerank --run runs/candidates/dense.trec --corpus data/collections/trec-dl-2019-passage \\
        --grader runs/export/grader --k 20 --out runs/candidates/dense-grader.trec
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tqdm.auto import tqdm

from data.beir import Collection, Run, ranked, read_trec_run, write_trec_run
from data.cli import bounded, parse_config, run_main


@dataclass
class RerankConfig:
    run: str = field(default="", metadata={"help": "TREC run to rerank."})
    corpus: str = field(
        default="", metadata={"help": "BEIR folder with the documents and queries."}
    )
    grader: str = field(default="", metadata={"help": "Exported grader or checkpoint."})
    k: int = bounded(20, 1, help="Top documents per query to rerank.")
    out: str = field(default="", metadata={"help": "Output TREC run."})
    tag: str = field(default="grader-rerank")


def rerank(run: Run, collection: Collection, grader, k: int) -> Run:
    out: Run = {}
    for qid in tqdm(sorted(run), desc="reranking", unit="query"):
        top = [doc_id for doc_id, _ in ranked(run[qid])[:k]]
        docs = [collection.corpus[d] for d in top]
        scores = grader.score(
            collection.queries[qid], [d.text for d in docs], [d.title or None for d in docs]
        )
        out[qid] = {doc_id: float(s) for doc_id, s in zip(top, scores, strict=True)}
    return out


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([RerankConfig], args)
    if not (config.run and config.corpus and config.grader and config.out):
        raise ValueError("give --run, --corpus, --grader and --out")
    from models.grader import Grader

    reranked = rerank(
        read_trec_run(config.run),
        Collection.load(config.corpus),
        Grader.from_pretrained(config.grader),
        config.k,
    )
    write_trec_run(config.out, reranked, tag=config.tag)
    print(f"wrote {config.out} ({len(reranked)} queries, top {config.k} reranked)")


if __name__ == "__main__":
    run_main(main)
