"""Which labeler tracks the RAG system's end-to-end quality? eRAG, provenance and answer labels,
our grader and an LLM judge, measured against the reader's own answers (SQuAD by default).

    python -m benchmarks.downstream --config benchmarks/downstream/squad.yaml
    python -m benchmarks.downstream --config benchmarks/downstream/squad.yaml --queries 500 --k 10
    # a real reader: any OpenAI-compatible endpoint, or a local/vLLM model by name
    python -m benchmarks.downstream --config benchmarks/downstream/squad.yaml --reader my-reader.yaml

Steps (each cached under ``--out``; a killed run resumes):

1. Chunk the collection's documents (``chunk_chars``/``chunk_overlap``; 0: whole documents) and
   retrieve the top-k chunks of each sampled query with every retriever (BM25, dense; with
   ``rerank_depth`` > 0 also dense's top-N reranked by the grader).
2. Label every retrieved chunk with every labeler: ``erag`` (token F1 of the reader's answer from
   that chunk alone) and ``erag-em`` (its exact match), ``answers`` (contains a gold answer),
   ``gold-doc`` (cut from the gold document), ``grader`` and any ``judge:CONFIG.yaml``.
3. End to end: the same reader answers each query from its top-k chunks together (in-prompt
   augmentation); that answer's EM and F1 are the ground truth.
4. Per labeler and metric (P@k, hit@k, MRR, NDCG@k; precision = mean label and hit = max label
   for eRAG's F1 labels, MRR's relevant = label >= 0.5, NDCG's ideal from the list's own labels as
   in eRAG), Kendall's τ-b and Spearman's ρ with end-to-end F1 and EM: across queries within each
   system, across all (system, query) lists, and across systems (system means; few points).
5. Document/word-level labels (Park & Lim): P(Doc), P(Word), P(Doc ∩ Word), P(Doc | Word),
   P(Word | Doc) per retriever at top-1 and top-k; and the reader's cost both ways.

Writes ``results.json``, ``table.md``, ``per_query.jsonl`` and ``correlation.png``.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from core.cli import bounded, parse_config, run_main
from core.io import markdown_table, write_json, write_jsonl
from data.beir import Collection, Document, ranked, write_trec_run
from data.qa import chunk_spans, exact_match, read_answers, token_f1
from measure.labelers import (
    AnswersLabeler,
    ERAGLabeler,
    GoldDocLabeler,
    GraderLabeler,
    Hit,
    HitLabel,
    Labeler,
    make_labeler,
)
from measure.labelers.reader import CachedReader, ReaderConfig, ReaderOutput
from measure.metrics.retrieval import label_list_metrics

logger = logging.getLogger(__name__)
RETRIEVERS = ("bm25", "dense")
METRICS = ("precision", "hit", "mrr", "ndcg")
RERANKED = "dense+grader"
WAYS = {"erag": "eRAG: each chunk alone", "end_to_end": "end to end: top-k together"}


@dataclass
class DownstreamConfig:
    collection: str = field(
        default="data/collections/squad-dev",
        metadata={
            "help": "BEIR folder whose queries carry gold `answers` (qrels: gold documents)."
        },
    )
    queries: int = bounded(200, 1, help="Questions sampled (seeded) from the collection.")
    seed: int = 13
    chunk_chars: int = bounded(300, 0, help="Chunk size in characters (0: whole documents).")
    chunk_overlap: int = bounded(20, 0, help="Characters a chunk shares with the previous one.")
    retrievers: list[str] = field(
        default_factory=lambda: ["bm25", "dense"], metadata={"help": "bm25 and/or dense."}
    )
    rerank_depth: int = bounded(
        0, 0, help=f"> 0: add the system {RERANKED!r} (dense's top-N reranked by the grader)."
    )
    k: int = bounded(5, 1, help="Chunks per ranked list (given to the reader end to end).")
    reader: str = field(
        default="eval/configs/reader-smollm2.yaml",
        metadata={"help": "ReaderConfig YAML: the RAG system's LLM (eRAG and end to end)."},
    )
    grader: str = field(
        default="runs/main/export", metadata={"help": "Grader for `grader` and the reranker."}
    )
    labelers: list[str] = field(
        default_factory=lambda: ["erag", "erag-em", "answers", "gold-doc", "grader"],
        metadata={"help": "erag, erag-em, answers, gold-doc, grader, or any KIND:VALUE labeler."},
    )
    embedder: str = field(default="minilm-l6", metadata={"help": "Embedder for dense."})
    out: str = field(default="runs/downstream")

    def __post_init__(self) -> None:
        unknown = set(self.retrievers) - set(RETRIEVERS)
        if unknown or not self.retrievers:
            raise ValueError(
                f"retrievers: expected some of {list(RETRIEVERS)}, got {self.retrievers}"
            )
        if self.rerank_depth and "dense" not in self.retrievers:
            raise ValueError("rerank_depth: the reranked system reranks dense; add dense")
        if self.rerank_depth and self.rerank_depth < self.k:
            raise ValueError(f"rerank_depth: must be >= k ({self.k}), got {self.rerank_depth}")
        if self.chunk_chars and self.chunk_overlap >= self.chunk_chars:
            raise ValueError("chunk_overlap: must be smaller than chunk_chars")


# ----------------------------------------------------------------------------- data


def sample_queries(
    queries: dict[str, str], answers: dict[str, list[str]], n: int, seed: int
) -> list[str]:
    """A seeded sample of the query ids that have gold answers (all of them when fewer)."""
    eligible = sorted(q for q in queries if answers.get(q))
    if not eligible:
        raise ValueError("queries: no query of the collection has gold `answers`")
    chosen = random.Random(seed).sample(eligible, min(n, len(eligible)))
    return sorted(chosen)


def chunk_corpus(
    corpus: dict[str, Document], size: int, overlap: int
) -> tuple[dict[str, Document], dict[str, str]]:
    """({chunk id: chunk}, {chunk id: source document id}); ``size`` 0 keeps whole documents."""
    chunks: dict[str, Document] = {}
    source: dict[str, str] = {}
    for doc_id in sorted(corpus):
        doc = corpus[doc_id]
        spans = chunk_spans(doc.text, size, overlap) if size else [(0, len(doc.text))]
        for number, (start, end) in enumerate(spans):
            chunk_id = f"{doc_id}#{number}" if size else doc_id
            chunks[chunk_id] = Document(chunk_id, doc.text[start:end].strip(), doc.title)
            source[chunk_id] = doc_id
    return chunks, source


# ----------------------------------------------------------------------------- metrics


def correlations(metric: Sequence[float], reference: Sequence[float]) -> dict[str, float | None]:
    """Kendall's τ-b and Spearman's ρ (with p-values); None where either side is constant."""
    from scipy.stats import kendalltau, spearmanr

    x, y = np.asarray(metric, dtype=float), np.asarray(reference, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"tau": None, "tau_p": None, "rho": None, "rho_p": None, "n": len(x)}
    tau = kendalltau(x, y)
    rho = spearmanr(x, y)
    return {
        "tau": float(tau.statistic),
        "tau_p": float(tau.pvalue),
        "rho": float(rho.statistic),
        "rho_p": float(rho.pvalue),
        "n": len(x),
    }


def dual_label_probabilities(doc: Sequence[bool], word: Sequence[bool]) -> dict[str, float | None]:
    """Park & Lim's shares over retrieved chunks: P(Doc), P(Word), P(Doc ∩ Word) and the two
    conditionals (None when the condition never holds)."""
    n = len(doc)
    both = sum(d and w for d, w in zip(doc, word, strict=True))
    docs, words = sum(doc), sum(word)
    return {
        "P(Doc)": docs / n if n else None,
        "P(Word)": words / n if n else None,
        "P(Doc ∩ Word)": both / n if n else None,
        "P(Doc | Word)": both / words if words else None,
        "P(Word | Doc)": both / docs if docs else None,
        "chunks": n,
    }


# ----------------------------------------------------------------------------- the run


def _label_value(labeler: Labeler, label: HitLabel) -> float:
    return (
        float(label.score)
        if labeler.continuous and label.score is not None
        else float(label.relevant)
    )


class DownstreamRun:
    def __init__(self, config: DownstreamConfig) -> None:
        self.config = config
        self.out = Path(config.out)
        root = Path(config.collection)
        collection = Collection.load(root)
        self.answers = read_answers(root / "queries.jsonl")
        self.qids = sample_queries(collection.queries, self.answers, config.queries, config.seed)
        self.queries = {q: collection.queries[q] for q in self.qids}
        self.qrels_path = root / "qrels.tsv"
        self.chunks, self.source = chunk_corpus(
            collection.corpus, config.chunk_chars, config.chunk_overlap
        )
        self.reader_config = ReaderConfig.from_yaml(config.reader)
        self.reader = CachedReader.in_folder(self.reader_config, self.out / "cache")
        self._grader: Labeler | None = None
        self.seconds: dict[str, float] = {}

    # -- labelers
    @property
    def grader(self) -> Labeler:
        if self._grader is None:
            path = Path(self.config.grader)
            if not (path / "config.json").exists():
                raise FileNotFoundError(
                    f"grader: no grader at {path}; train one with `relevance-grader pipeline "
                    "--config eval/configs/main.yaml`, or drop `grader` from --labelers and use "
                    "--rerank_depth 0"
                )
            from measure.labelers import CachedLabeler

            inner = GraderLabeler(str(path))
            # A query's chunks share the grader's prompt and the query: computed once per query
            # (1.5x the pairs/s on these short chunks, docs/benchmarks/grading-speed.md).
            inner.grader.prefix_cache = True
            self._grader = CachedLabeler(inner, self.out / "cache" / "labels-grader.jsonl")
            self._grader.name = "grader"
        return self._grader

    def make_labeler(self, spec: str) -> tuple[str, Labeler]:
        kind, _, value = spec.partition(":")
        if kind in ("erag", "erag-em"):
            metric = "em" if kind == "erag-em" else "f1"
            reader = self.reader
            if value:
                reader = CachedReader.in_folder(ReaderConfig.from_yaml(value), self.out / "cache")
            return kind, ERAGLabeler(reader, self.answers, metric)
        if spec == "answers":
            return spec, AnswersLabeler(self.answers)
        if spec == "gold-doc":
            return spec, GoldDocLabeler(str(self.qrels_path))
        if spec == "grader":
            return spec, self.grader
        # judge:eval/configs/judge-smollm2.yaml is shown as judge:judge-smollm2
        return f"{kind}:{Path(value).stem}", make_labeler(spec, cache_dir=self.out / "cache")

    # -- retrieval
    def retrieve(self) -> dict[str, dict[str, list[tuple[str, float]]]]:
        from data.candidates import CandidatesConfig, make_retriever

        config = self.config
        chunks = Collection(root=self.out, corpus=self.chunks, queries=self.queries, qrels={})
        index_dir = None  # the machine's cache, content-keyed: the chunks' indexes built once
        texts = [self.queries[q] for q in self.qids]
        depth = max(config.k, config.rerank_depth)
        systems: dict[str, dict[str, list[tuple[str, float]]]] = {}
        for name in config.retrievers:
            start = time.perf_counter()
            retriever = make_retriever(
                name, chunks, index_dir, CandidatesConfig(embedder=config.embedder)
            )
            found = retriever.search(texts, depth)
            self.seconds[f"retrieve {name}"] = time.perf_counter() - start
            systems[name] = {qid: hits for qid, hits in zip(self.qids, found, strict=True)}
        if config.rerank_depth:
            from measure.labelers.rerank import rerank

            start = time.perf_counter()
            dense = {qid: dict(hits) for qid, hits in systems["dense"].items()}
            # Through the grader's label cache: its labels of these chunks are not recomputed.
            reranked = rerank(dense, chunks, self.grader, config.rerank_depth)
            systems[RERANKED] = {qid: ranked(scores) for qid, scores in reranked.items()}
            self.seconds[f"rerank {RERANKED}"] = time.perf_counter() - start
        top = {
            name: {qid: hits[: config.k] for qid, hits in run.items()}
            for name, run in systems.items()
        }
        for name, run in top.items():
            write_trec_run(
                self.out / "runs" / f"{name.replace('+', '-')}.trec",
                {q: dict(h) for q, h in run.items() if h},
                tag=name,
            )
        return top

    def hit(self, chunk_id: str) -> Hit:
        chunk = self.chunks[chunk_id]
        return Hit(
            doc_id=chunk_id,
            text=chunk.text,
            title=chunk.title or None,
            source_id=self.source[chunk_id],
        )

    def label(
        self, labeler: Labeler, name: str, systems: dict[str, dict[str, list[tuple[str, float]]]]
    ) -> dict[str, dict[str, list[float]]]:
        """{system: {qid: label value per rank}}; each (query, chunk) is labelled once."""
        unique: dict[str, dict[str, None]] = {qid: {} for qid in self.qids}
        for run in systems.values():
            for qid, hits in run.items():
                unique[qid].update(dict.fromkeys(c for c, _ in hits))
        requests = [
            (qid, self.queries[qid], [self.hit(c) for c in unique[qid]]) for qid in self.qids
        ]
        start = time.perf_counter()
        # eRAG's reader batches and caches per answer itself: one call, one progress bar.
        group = len(requests) if isinstance(labeler, ERAGLabeler) else 16
        labels: list[list[HitLabel]] = []
        for first in tqdm(range(0, len(requests), group), desc=f"labelling ({name})"):
            labels.extend(labeler.label_many(requests[first : first + group]))
        self.seconds[f"label {name}"] = time.perf_counter() - start
        values = {
            (qid, hit.doc_id): _label_value(labeler, lab)
            for (qid, _, hits), labs in zip(requests, labels, strict=True)
            for hit, lab in zip(hits, labs, strict=True)
        }
        return {
            system: {qid: [values[(qid, c)] for c, _ in hits] for qid, hits in run.items()}
            for system, run in systems.items()
        }

    def end_to_end(
        self, systems: dict[str, dict[str, list[tuple[str, float]]]]
    ) -> tuple[dict[str, dict[str, dict[str, Any]]], list[ReaderOutput]]:
        """({system: {qid: {answer, em, f1}}}, the reader's outputs): the reader given each
        list's top-k together."""
        items, where = [], []
        for system, run in systems.items():
            for qid in self.qids:
                passages = [self.chunks[c].text for c, _ in run[qid]]
                items.append((self.queries[qid], passages))
                where.append((system, qid))
        start = time.perf_counter()
        outputs = self.reader.answer(items, desc="end-to-end answers")
        self.seconds["end to end"] = time.perf_counter() - start
        result: dict[str, dict[str, dict[str, Any]]] = {s: {} for s in systems}
        for (system, qid), output in zip(where, outputs, strict=True):
            gold = self.answers[qid]
            result[system][qid] = {
                "answer": output.answer,
                "em": exact_match(output.answer, gold),
                "f1": token_f1(output.answer, gold),
            }
        return result, outputs

    def cost(
        self, erag_items: list[tuple[str, list[str]]], end_to_end: Sequence[ReaderOutput]
    ) -> dict[str, dict[str, float]]:
        """The reader's cost both ways, from the cached records of the run that paid it."""

        def summary(outputs: Sequence[ReaderOutput], prompts_per_list: int) -> dict[str, float]:
            per_prompt = sum(o.seconds for o in outputs) / max(1, len(outputs))
            tokens = sum(o.input_tokens for o in outputs) / max(1, len(outputs))
            return {
                "prompts": len(outputs),
                "seconds": sum(o.seconds for o in outputs),
                "input_tokens": sum(o.input_tokens for o in outputs),
                "output_tokens": sum(o.output_tokens for o in outputs),
                "peak_memory_mib": max((o.peak_memory_mib for o in outputs), default=0.0),
                # One ranked list costs k single-chunk prompts (eRAG) or one k-chunk prompt.
                "seconds_per_list": per_prompt * prompts_per_list,
                "input_tokens_per_list": tokens * prompts_per_list,
            }

        erag = self.reader.answer(erag_items, desc="eRAG answers") if erag_items else []
        return {
            "erag": summary(erag, self.config.k),
            "end_to_end": summary(end_to_end, 1),
        }

    def run(self) -> dict[str, Any]:
        config = self.config
        systems = self.retrieve()
        labelers = [self.make_labeler(spec) for spec in config.labelers]
        values = {name: self.label(labeler, name, systems) for name, labeler in labelers}
        e2e, e2e_outputs = self.end_to_end(systems)
        # Provenance and answer labels for the dual-label table, whatever the labeler list.
        doc = self.label(GoldDocLabeler(str(self.qrels_path)), "gold-doc", systems)
        word = self.label(AnswersLabeler(self.answers), "answers", systems)

        per_query = []
        metrics: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
        for name, by_system in values.items():
            metrics[name] = {
                system: label_list_metrics(run, config.k) for system, run in by_system.items()
            }
        table: dict[str, dict[str, Any]] = {}
        for name in values:
            for metric in METRICS:
                row: dict[str, Any] = {}
                for target in ("f1", "em"):
                    pooled_x, pooled_y, means_x, means_y = [], [], [], []
                    for system in systems:
                        x = [metrics[name][system][qid][metric] for qid in self.qids]
                        y = [e2e[system][qid][target] for qid in self.qids]
                        row[f"{target}:{system}"] = correlations(x, y)
                        pooled_x += x
                        pooled_y += y
                        means_x.append(float(np.mean(x)))
                        means_y.append(float(np.mean(y)))
                    row[f"{target}:all"] = correlations(pooled_x, pooled_y)
                    row[f"{target}:systems"] = correlations(means_x, means_y)
                table[f"{name} | {metric}"] = row
        for system in systems:
            for qid in self.qids:
                per_query.append(
                    {
                        "system": system,
                        "qid": qid,
                        "query": self.queries[qid],
                        "gold": self.answers[qid],
                        "end_to_end": e2e[system][qid],
                        "metrics": {name: metrics[name][system][qid] for name in values},
                        "chunks": [c for c, _ in systems[system][qid]],
                    }
                )
        dual = {}
        for system in systems:
            for depth, label in ((1, "top-1"), (config.k, f"top-{config.k}")):
                d = [bool(v) for qid in self.qids for v in doc[system][qid][:depth]]
                w = [bool(v) for qid in self.qids for v in word[system][qid][:depth]]
                dual[f"{system} {label}"] = dual_label_probabilities(d, w)
        erag_items = sorted(
            {
                (self.queries[qid], (self.chunks[c].text,))
                for run in systems.values()
                for qid, hits in run.items()
                for c, _ in hits
            }
        )
        cost = (
            self.cost([(q, list(p)) for q, p in erag_items], e2e_outputs)
            if any(isinstance(lab, ERAGLabeler) for _, lab in labelers)
            else {}
        )
        means = {
            system: {
                "end_to_end": {
                    t: float(np.mean([e2e[system][q][t] for q in self.qids])) for t in ("em", "f1")
                },
                **{
                    name: {
                        m: float(np.mean([metrics[name][system][q][m] for q in self.qids]))
                        for m in METRICS
                    }
                    for name in values
                },
            }
            for system in systems
        }
        results = {
            "config": asdict(config),
            "reader": asdict(self.reader_config),
            "queries": len(self.qids),
            "chunks": len(self.chunks),
            "systems": list(systems),
            "correlation": table,
            "means": means,
            "dual_labels": dual,
            "cost": cost,
            "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
        }
        write_json(self.out / "results.json", results)
        write_jsonl(self.out / "per_query.jsonl", per_query)
        (self.out / "table.md").write_text(render_tables(results), encoding="utf-8")
        plot_correlations(results, self.out / "correlation.png")
        return results


# ----------------------------------------------------------------------------- report


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def render_tables(results: dict[str, Any]) -> str:
    systems = results["systems"]
    k = results["config"]["k"]
    correlation_rows = []
    for key, row in results["correlation"].items():
        name, metric = key.split(" | ")
        correlation_rows.append(
            [
                name,
                f"{metric}@{k}",
                _fmt(row["f1:all"]["tau"]),
                _fmt(row["f1:all"]["rho"]),
                *(_fmt(row[f"f1:{s}"]["tau"]) for s in systems),
                _fmt(row["em:all"]["tau"]),
                _fmt(row["em:all"]["rho"]),
                _fmt(row["f1:systems"]["tau"]),
            ]
        )
    names = [n for n in next(iter(results["means"].values())) if n != "end_to_end"]
    mean_rows = [
        [
            system,
            f"{means['end_to_end']['em']:.3f}",
            f"{means['end_to_end']['f1']:.3f}",
            *(f"{means[n]['precision']:.3f}" for n in names),
        ]
        for system, means in results["means"].items()
    ]
    columns = ["P(Doc)", "P(Word)", "P(Doc ∩ Word)", "P(Doc | Word)", "P(Word | Doc)"]
    dual_rows = [
        [*key.rsplit(" ", 1), *(_fmt(probs[c]) for c in columns), probs["chunks"]]
        for key, probs in results["dual_labels"].items()
    ]
    lines = [
        f"Correlation with end-to-end quality ({results['queries']} queries × {len(systems)} "
        f"systems, top-{k}; τ = Kendall's τ-b, ρ = Spearman's ρ; 'all' pools every "
        "(system, query) list)",
        "",
        markdown_table(
            [
                "labeler",
                "metric",
                "τ F1 all",
                "ρ F1 all",
                *(f"τ F1 {s}" for s in systems),
                "τ EM all",
                "ρ EM all",
                "τ F1 across systems",
            ],
            correlation_rows,
        ),
        "Means per system (end-to-end EM/F1 and each labeler's P@k)",
        "",
        markdown_table(["system", "EM", "F1", *(f"P@{k} {n}" for n in names)], mean_rows),
        "Document- and word-level labels of the retrieved chunks",
        "",
        markdown_table(["retriever", "depth", *columns, "chunks"], dual_rows),
    ]
    if results["cost"]:
        cost_rows = [
            [
                WAYS[way],
                cost["prompts"],
                f"{cost['seconds']:.1f}",
                f"{cost['seconds_per_list']:.2f}",
                f"{cost['input_tokens_per_list']:.0f}",
                cost["output_tokens"],
                f"{cost['peak_memory_mib']:.0f}",
            ]
            for way, cost in results["cost"].items()
        ]
        header = ["way", "prompts", "seconds", "s / list", "input tokens / list"]
        lines += [
            "Reader cost, eRAG (each chunk alone) against end to end (top-k together)",
            "",
            markdown_table([*header, "output tokens", "peak MiB / batch"], cost_rows),
        ]
    return "\n".join(lines)


def plot_correlations(results: dict[str, Any], path: Path) -> None:
    """Kendall's τ with end-to-end F1 (all lists pooled): one bar per labeler, grouped by metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(key.split(" | ")[0] for key in results["correlation"]))
    k = results["config"]["k"]
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        taus = [results["correlation"][f"{name} | {m}"]["f1:all"]["tau"] for m in METRICS]
        ax.bar(
            np.arange(len(METRICS)) + i * width,
            [t if t is not None else 0.0 for t in taus],
            width,
            label=name,
        )
    ax.set_xticks(
        np.arange(len(METRICS)) + width * (len(names) - 1) / 2, [f"{m}@{k}" for m in METRICS]
    )
    ax.set_ylabel("Kendall's τ with end-to-end F1")
    ax.axhline(0, color="black", linewidth=0.5)
    ax.legend(fontsize=8)
    ax.set_title(
        f"Which labels track the reader ({results['queries']} queries, {len(results['systems'])} systems)"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([DownstreamConfig], args)
    start = time.perf_counter()
    results = DownstreamRun(config).run()
    print((Path(config.out) / "table.md").read_text(encoding="utf-8"))
    print(
        f"{results['queries']} queries × {len(results['systems'])} systems in "
        f"{time.perf_counter() - start:.0f} s; wrote {config.out}/results.json, table.md, "
        "per_query.jsonl, correlation.png"
    )
    logger.debug(json.dumps(results["seconds"]))


if __name__ == "__main__":
    run_main(main)
