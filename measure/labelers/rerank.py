"""Rerank a run's top-k with a grader (a "dense + grader" system for comparisons); the hits below
the top k keep their order after it, so the output is as deep as the run.

    relevance-grader rerank --run runs/candidates/dense.trec --corpus data/collections/trec-dl-2019-passage \\
        --grader runs/export/grader --k 20 --out runs/candidates/dense-grader.trec
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from core.cli import bounded, parse_config, run_main
from core.errors import InputError
from core.io import check_writable_file, refuse_overlap, write_json
from data.beir import Collection, Run, ranked, read_trec_run, write_trec_run
from measure.labelers import Hit, Labeler, make_labeler


@dataclass
class RerankConfig:
    run: str = field(default="", metadata={"help": "TREC run to rerank."})
    corpus: str = field(
        default="", metadata={"help": "BEIR folder with the documents and queries."}
    )
    grader: str = field(default="", metadata={"help": "Exported grader or checkpoint."})
    k: int = bounded(
        10,
        1,
        help="Top documents per query to rerank (10, as the main job and relevance-grader search's "
        "--k); the hits below keep their order after them (scored -1, -2, ..., under every "
        "P(relevant)).",
    )
    out: str = field(default="", metadata={"help": "Output TREC run."})
    tag: str = field(default="grader-rerank")
    label_cache: str | None = field(
        default=None,
        metadata={
            "help": "Label cache folder shared with relevance-grader search: scores computed here "
            "are reused there (default: none)."
        },
    )


def rerank(
    run: Run, collection: Collection, labeler: Labeler, k: int, batch_queries: int = 16
) -> Run:
    """Each query's top k ordered by the grader labeler's P(relevant) (through its label cache,
    when it has one, so the metric pipeline later reuses these scores instead of recomputing),
    and the hits below it kept in the run's order, as rerankers do: scored -1, -2, ..., under
    every P(relevant)."""
    qids = sorted(run)
    out: Run = {}
    for start in tqdm(range(0, len(qids), batch_queries), desc="reranking", unit="group"):
        requests = []
        for qid in qids[start : start + batch_queries]:
            top = [doc_id for doc_id, _ in ranked(run[qid])[:k]]
            docs = [collection.corpus[d] for d in top]
            hits = [Hit(d.doc_id, d.text, d.title or None) for d in docs]
            requests.append((qid, collection.queries[qid], hits))
        for (qid, _, hits), labels in zip(requests, labeler.label_many(requests), strict=True):
            out[qid] = {
                hit.doc_id: float(label.score or 0.0)
                for hit, label in zip(hits, labels, strict=True)
            } | _tail(run[qid], k)
    return out


def _tail(run_for_query: dict[str, float], k: int) -> dict[str, float]:
    """The hits below the top k in the run's order, scored -1, -2, ... (below any probability)."""
    return {doc_id: -float(i + 1) for i, (doc_id, _) in enumerate(ranked(run_for_query)[k:])}


def check_run_against(run: Run, run_path: str, collection: Collection) -> None:
    """Every query and document of a run must be in the collection: found before any grading."""
    for qid in sorted(run):
        if qid not in collection.queries:
            raise InputError(
                f"{run_path}: query {qid!r} is not in {collection.root / 'queries.jsonl'}"
            )
        missing = next((d for d in sorted(run[qid]) if d not in collection.corpus), None)
        if missing is not None:
            raise InputError(
                f"{run_path}: document {missing!r} (query {qid!r}) is not in "
                f"{collection.root / 'corpus.jsonl'}"
            )


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([RerankConfig], args)
    if not (config.run and config.corpus and config.grader and config.out):
        raise InputError("give --run, --corpus, --grader and --out")
    # Found before the grading is paid for, not when the run is written.
    inputs = [("run", config.run), ("grader", config.grader), ("corpus", config.corpus)]
    refuse_overlap("out", config.out, inputs)
    refuse_overlap("out", str(summary_path(config.out)), inputs)
    check_writable_file("out", config.out)
    run, collection = read_trec_run(config.run), Collection.load(config.corpus)
    check_run_against(run, config.run, collection)
    labeler = make_labeler(f"grader:{config.grader}", cache_dir=config.label_cache)
    reranked = rerank(run, collection, labeler, config.k)
    write_trec_run(config.out, reranked, tag=config.tag)
    dtype = scoring_dtype()
    record = summary_path(config.out)
    write_json(
        record,
        {
            "run": config.run,
            "grader": config.grader,
            "k": config.k,
            "queries": len(reranked),
            "scoring_dtype": dtype,
            "out": config.out,
        },
    )
    print(
        f"wrote {config.out} ({len(reranked)} queries, top {config.k} reranked by the grader "
        f"scoring in {dtype}, the hits below kept in the run's order) and {record}"
    )


def summary_path(out: str) -> Path:
    """Where the rerank records what it did (``OUT.summary.json``, as data.label does)."""
    return Path(out).with_suffix(".summary.json")


def scoring_dtype() -> str:
    """The dtype the grader scores in here, as metrics.json records it (float32 on a CPU)."""
    import torch

    from models.resolve import dtype_name

    return dtype_name("cuda" if torch.cuda.is_available() else "cpu")


if __name__ == "__main__":
    run_main(main)
