"""Synthetic training queries from a corpus (InPars / Promptagator style), as judgments.

    # the embedded SmolLM2-135M-Instruct writes questions for 1,000 TREC DL passages; its own
    # judgments are at chance, so the pairs are labelled by construction
    relevance-grader synthesize --collection data/collections/trec-dl-2019-passage \\
        --passages 1000 --labels source --out runs/synthetic
    # a production teacher writes InPars-style queries after three examples and labels the pairs
    relevance-grader synthesize --collection my-corpus --examples_file my-examples.jsonl \\
        --query_prompt inpars --examples 3 --backend openai --model gpt-4o-mini \\
        --prompt binary-cot --concurrency 32 --out runs/synthetic

For a seeded sample of the corpus's passages (within a length range), the teacher (any judge
backend of ``data.label``) writes ``--queries_per_passage`` queries in the style of a few example
queries: the collection's own (with one relevant passage each, from its qrels) unless
``--examples_file`` gives them. A reply becomes a query only if it is one: an empty reply, a
refusal, an echo of the passage, a copied example or a query outside the word limits is kept as an
``error`` record and never as a query. Queries are then de-duplicated and kept only if their
source passage is in the ``--filter_retriever``'s top ``--filter_k`` (round-trip consistency).
Each kept query gets its source passage and hard negatives from the BM25 and dense retrievers'
top ``--negative_depth``, and every pair is labelled by the teacher through ``data.label``
(``--labels teacher``; a mined negative that is in fact relevant is labelled so) or by
construction (``--labels source``: the source passage relevant, the negatives not).

Writes to ``--out``: ``judgments.jsonl`` (what ``data.build``, ``relevance-grader train``'s
``train_only`` and the study take), ``queries.jsonl`` and a link to the corpus (a BEIR folder the
metric pipeline can run on), ``pairs.jsonl``, ``generated.jsonl`` (every reply and its fate) and
``synthesis.json`` (counts, time, tokens, cost). Every reply is appended to
``generation.cache.jsonl`` as it arrives: a killed run resumes without asking again, and a larger
``--passages`` with the same seed extends the same sample.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import re
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import yaml
from tqdm.auto import tqdm

from core.cli import bounded, check_choices, choice, parse_config, run_main
from core.errors import InputError
from core.io import (
    READ_ENCODING,
    KeyedCache,
    fingerprint,
    iter_json_lines,
    refuse_overlap,
    write_json,
    write_jsonl,
)
from core.records import JudgeInfo, Judgment, Pair, document_text
from data.beir import Collection, Document
from data.candidates import RETRIEVERS
from data.judges.backends import JudgeConfig
from models.llm_client import CHAT_BACKENDS, ChatClient, ChatRequest, Reply

logger = logging.getLogger(__name__)
QUERY_PROMPTS_DIR = Path(__file__).resolve().parent / "prompts" / "queries"
SYNTHETIC_PREFIX = "synthetic:"  # other sources' query ids carry a prefix (see data.mix)
FILTER_RETRIEVERS = (*RETRIEVERS, "none")
SOURCE_JUDGE = JudgeInfo(model="source-passage", prompt="synthetic-query", backend="source")


@dataclass
class SynthesisConfig:
    """Which passages get queries, how the queries are written and filtered, and where they go."""

    collection: str | None = field(
        default=None, metadata={"help": "BEIR-layout folder (corpus.jsonl; queries optional)."}
    )
    out: str = field(default="runs/synthetic", metadata={"help": "Output folder."})
    passages: int = bounded(1000, 1, help="Passages sampled from the corpus (seeded).")
    seed: int = field(default=0)
    min_passage_chars: int = bounded(100, 0, help="Shorter passages are not sampled.")
    max_passage_chars: int = bounded(2000, 1, help="Longer passages are not sampled.")
    queries_per_passage: int = bounded(1, 1, help="Queries written per passage (needs sampling).")
    generator_model: str | None = field(
        default=None, metadata={"help": "Model that writes the queries (default: --model)."}
    )
    query_prompt: str = field(
        default="question",
        metadata={
            "help": "Query-writing prompt: a name in data/prompts/queries/ (question; inpars, "
            "few-shot, for capable generators) or a YAML path."
        },
    )
    generator_temperature: float = bounded(
        0.0, 0, help="0: greedy (InPars); > 0 samples, needed for several queries per passage."
    )
    max_query_tokens: int = bounded(32, 1, help="Token limit of a written query.")
    examples: int = bounded(
        0, 0, help="Example queries shown in the prompt (InPars: 3; a 135M model copies them)."
    )
    examples_file: str | None = field(
        default=None,
        metadata={
            "help": "Example queries: JSONL with query (and text, its document) or one query a "
            "line (default: the collection's own queries and qrels)."
        },
    )
    example_chars: int = bounded(400, 1, help="Example documents are cut to this many characters.")
    min_query_words: int = bounded(2, 1)
    max_query_words: int = bounded(24, 1)
    filter_retriever: str = choice(
        "bm25", FILTER_RETRIEVERS, "Keep a query only if this retriever finds its passage."
    )
    filter_k: int = bounded(20, 1, help="... in its top k.")
    negative_retrievers: list[str] = field(
        default_factory=lambda: ["bm25", "dense"],
        metadata={"help": "Retrievers the hard negatives come from (bm25, dense)."},
    )
    negatives: int = bounded(2, 0, help="Hard negatives per query from each retriever.")
    negative_depth: int = bounded(30, 1, help="Negatives are drawn from this top k.")
    labels: str = choice(
        "teacher",
        ("teacher", "source"),
        "teacher: the teacher judges every pair (relevance-grader label); source: the source "
        "passage is relevant and the negatives are not (InPars' assumption, no labelling cost).",
    )
    embedder: str = field(
        default="minilm-l6", metadata={"help": "Embedder of the dense retriever."}
    )
    index_dir: str | None = field(
        default=None, metadata={"help": "Where indexes are kept (default: <cache>/indexes)."}
    )

    def __post_init__(self) -> None:
        check_choices(self)
        unknown = set(self.negative_retrievers) - set(RETRIEVERS)
        if unknown:
            raise InputError(f"negative_retrievers: unknown {sorted(unknown)}; use bm25, dense")
        if self.queries_per_passage > 1 and self.generator_temperature == 0:
            raise InputError(
                "generator_temperature: greedy decoding writes the same query every time; "
                "set it above 0 for --queries_per_passage > 1"
            )
        if self.min_passage_chars > self.max_passage_chars:
            raise InputError("min_passage_chars: above max_passage_chars")
        if self.min_query_words > self.max_query_words:
            raise InputError("min_query_words: above max_query_words")


@dataclass
class SyntheticTeacherConfig(JudgeConfig):
    """The teacher that writes the queries and labels the pairs: ``data.label``'s judge settings,
    the embedded SmolLM2-135M-Instruct by default."""

    backend: str = field(default="hf", metadata={"help": "hf, openai, azure or vllm."})
    model: str = field(
        default="smollm2-135m", metadata={"help": "Teacher model (endpoint name or local path)."}
    )


@dataclass(frozen=True)
class QueryPrompt:
    name: str
    version: int
    system: str
    user: str
    example: str
    example_without_document: str

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"

    def examples_block(self, examples: Sequence[dict[str, str]], chars: int) -> str:
        parts = []
        for example in examples:
            if example.get("text"):
                parts.append(
                    self.example.format(query=example["query"], document=example["text"][:chars])
                )
            else:
                parts.append(self.example_without_document.format(query=example["query"]))
        return "".join(parts)

    def messages(self, examples_block: str, document: str) -> list[dict[str, str]]:
        user = self.user.format(examples=examples_block, document=document)
        return [
            {"role": "system", "content": self.system.strip()},
            {"role": "user", "content": user.strip()},
        ]


def load_query_prompt(name_or_path: str) -> QueryPrompt:
    path = Path(name_or_path)
    if not path.suffix:
        path = QUERY_PROMPTS_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in QUERY_PROMPTS_DIR.glob("*.yaml"))
        raise FileNotFoundError(f"query_prompt: {name_or_path!r} not found; known: {known}")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for key in QueryPrompt.__dataclass_fields__:
        if key not in data:
            raise InputError(f"{path}: {key}: missing")
    for key, slots in (("user", ("{examples}", "{document}")), ("example", ("{query}",))):
        for slot in slots:
            if slot not in data[key]:
                raise InputError(f"{path}: {key}: the template needs a {slot} slot")
    return QueryPrompt(**{k: data[k] for k in QueryPrompt.__dataclass_fields__})


def normalize(text: str) -> str:
    """Case-, accent-form- and punctuation-blind form of a text, for duplicate and echo checks."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


_REFUSAL = re.compile(
    r"\b(i'?m sorry|i am sorry|i apologi[sz]e|i can(?:not|'t)|i'?m unable|i am unable|as an ai"
    r"|i don'?t know|no query)\b",
    re.IGNORECASE,
)
# A search query never talks about the text it was written from ("What is this passage about?")
# or to the person asking ("What a great question!").
_META = re.compile(
    r"^(document|passage|answer)\s*:|\b(th(is|e) (passage|document|text|article)('s)?|this question"
    r"|the answer to|here'?s a|what a (great|good|wonderful|fascinating|lovely)|i'?d love)\b",
    re.IGNORECASE,
)
# Words that carry no topic: a query made only of them ("What is the answer?") finds nothing.
_TOPICLESS = frozenset(
    re.findall(
        r"\S+",
        "a an the is are was were be do does did what whats what's which who whom whose when where why "
        "how can could should would will of in on at to for from by with about and or it its this that "
        "these those there answer question questions main topic s",
    )
)
_LABEL = re.compile(r"^\s*(?:\d+[.)]\s*)?(?:search\s+)?(?:query|question)\s*\d*\s*[:=-]\s*", re.I)


def query_from_reply(
    reply: str,
    passage: str,
    examples: Sequence[str] = (),
    *,
    finished: bool = True,
    min_words: int = 2,
    max_words: int = 24,
) -> tuple[str | None, str | None]:
    """(query, None) when the reply is a usable query, else (None, why not).

    The query is the reply's first non-empty line without a "Query:" label or quotes."""
    lines = [line for line in reply.splitlines() if line.strip()]
    if not lines:
        return None, "empty reply"
    if not finished and len(lines) == 1:
        return None, "reply cut off at the token limit"
    query = _LABEL.sub("", lines[0]).strip().strip("\"'`*").strip()
    if not normalize(query):
        return None, "empty reply"
    if _REFUSAL.search(query):
        return None, f"refusal: {query[:80]!r}"
    if _META.search(query):
        return None, f"not a query: {query[:80]!r}"
    words = len(query.split())
    key = normalize(query)
    if not set(key.split()) - _TOPICLESS:
        return None, f"not a query: {query[:80]!r} names no topic"
    if words >= 6 and key in normalize(passage):
        return None, f"echo of the passage: {query[:80]!r}"
    if key in {normalize(e) for e in examples}:
        return None, f"copied an example query: {query[:80]!r}"
    if words < min_words:
        return None, f"too short: {words} words, {query[:80]!r}"
    if words > max_words:
        return None, f"too long: {words} words, {query[:80]!r}"
    return query, None


def sample_passages(collection: Collection, config: SynthesisConfig) -> list[str]:
    """Seeded sample of passage ids within the length range; a larger count with the same seed
    extends a smaller one (its prefix), so caches and learning curves nest."""
    eligible = sorted(
        doc_id
        for doc_id, doc in collection.corpus.items()
        if config.min_passage_chars <= len(doc.text) <= config.max_passage_chars
    )
    if not eligible:
        raise InputError(
            f"min_passage_chars: no passage of {collection.root / 'corpus.jsonl'} has "
            f"{config.min_passage_chars}-{config.max_passage_chars} characters"
        )
    random.Random(config.seed).shuffle(eligible)
    return eligible[: config.passages]


def read_examples_file(path: str) -> list[dict[str, str]]:
    source = Path(path)
    if not source.exists():
        raise FileNotFoundError(f"examples_file: {path} does not exist")
    examples: list[dict[str, str]] = []
    if source.suffix == ".jsonl":
        for line, obj in iter_json_lines(source):
            if not isinstance(obj, dict) or not isinstance(obj.get("query"), str):
                raise InputError(f"{path}:{line}: query: expected a string")
            if not obj["query"].strip():
                raise InputError(f"{path}:{line}: query: empty")
            text = obj.get("text")
            if text is not None and not isinstance(text, str):
                raise InputError(f"{path}:{line}: text: expected a string")
            examples.append({"query": obj["query"].strip(), "text": (text or "").strip()})
    else:
        lines = source.read_text(encoding=READ_ENCODING).splitlines()
        examples = [{"query": q.strip(), "text": ""} for q in lines if q.strip()]
    if not examples:
        raise InputError(f"examples_file: {path} holds no example query")
    return examples


def collection_examples(collection: Collection, count: int, seed: int) -> list[dict[str, str]]:
    """The collection's own queries, each with its most relevant passage where qrels say one."""
    examples = []
    for qid in sorted(collection.queries):
        judged = {d: g for d, g in collection.qrels.get(qid, {}).items() if g > 0}
        best = max(sorted(judged), key=lambda d: judged[d]) if judged else None
        doc = collection.corpus.get(best) if best else None
        examples.append(
            {
                "query": collection.queries[qid],
                "text": document_text(doc.text, doc.title) if doc else "",
            }
        )
    with_documents = [e for e in examples if e["text"]] or examples
    return random.Random(seed).sample(with_documents, min(count, len(with_documents)))


class GeneratorSummary(TypedDict):
    backend: str
    model: str
    prompt: str
    examples: list[str]  # the example queries the prompt showed
    input_tokens: int
    output_tokens: int
    tokens_this_run: dict[str, int]
    estimated_cost: float


class _Labels(TypedDict):
    labels: str  # "source" or "teacher"
    pairs: int
    relevant: int


class SynthesisLabels(_Labels, total=False):
    """How the pairs were labelled; the teacher's adds data.label's counts and what it said of
    the source passages and the negatives."""

    judged_now: int
    cached: int
    failed: int
    estimated_cost: float
    seconds: float
    source_judged_relevant: int
    negatives_judged_relevant: int


class Synthesis(TypedDict):
    """OUT/synthesis.json: what one synthesis did."""

    passages: int
    replies: int
    failed_requests: int
    fates: dict[str, int]  # "kept" or the check a reply failed -> replies
    queries: int
    pairs: int
    generator: GeneratorSummary
    labels: SynthesisLabels
    seconds: dict[str, float]  # writing, total
    config: dict[str, Any]  # the SynthesisConfig, as given


class Synthesizer:
    def __init__(self, config: SynthesisConfig, teacher: SyntheticTeacherConfig) -> None:
        self.config = config
        self.teacher = teacher
        if teacher.backend not in CHAT_BACKENDS:
            raise InputError(
                f"backend: {teacher.backend!r} cannot write queries; use {', '.join(CHAT_BACKENDS)}"
            )
        if not config.collection:
            raise InputError("collection: give --collection DIR (a BEIR-layout folder)")
        self.out = Path(config.out)
        refuse_overlap(
            "out",
            self.out,
            [("collection", config.collection), ("examples_file", config.examples_file)],
        )
        if self.out.exists() and not self.out.is_dir():
            raise NotADirectoryError(f"out: {self.out} is a file, not a folder")
        self.prompt = load_query_prompt(config.query_prompt)
        self.generator_model = config.generator_model or teacher.model
        self.collection = Collection.load(config.collection)

    def examples(self) -> list[dict[str, str]]:
        c = self.config
        if not c.examples:
            return []
        if c.examples_file:
            examples = read_examples_file(c.examples_file)
            return random.Random(c.seed).sample(examples, min(c.examples, len(examples)))
        if not self.collection.queries:
            raise InputError(
                f"examples_file: {self.collection.root} has no queries to take examples from; "
                "write a few example queries, one a line, and give --examples_file FILE"
            )
        return collection_examples(self.collection, c.examples, c.seed)

    def generation_settings(self, examples_block: str) -> dict[str, Any]:
        return {
            "backend": self.teacher.backend,
            "model": self.generator_model,
            "prompt": self.prompt.id,
            "examples": examples_block,
            "temperature": self.config.generator_temperature,
            "max_tokens": self.config.max_query_tokens,
            "document_chars": self.teacher.max_document_chars,
        }

    def document(self, doc: Document) -> str:
        return document_text(doc.text, doc.title)[: self.teacher.max_document_chars]

    def chat_client(self) -> ChatClient:
        """The generator: the teacher's backend and serving settings, ``generator_model``'s name."""
        return ChatClient(dataclasses.replace(self.teacher, model=self.generator_model))

    def generate(
        self, doc_ids: Sequence[str], examples_block: str
    ) -> tuple[dict[tuple[str, int], dict[str, Any]], dict[str, int], int]:
        """Every (passage, sample) reply, from the cache or the generator, appended as it comes;
        returns the replies, this run's token counts and the failed requests (not cached)."""
        c = self.config
        settings = json.dumps(self.generation_settings(examples_block), sort_keys=True)
        cached: KeyedCache[dict[str, Any]] = KeyedCache(self.out / "generation.cache.jsonl")
        wanted = [(d, s) for d in doc_ids for s in range(c.queries_per_passage)]
        keys = {
            item: fingerprint(
                settings, self.document(self.collection.corpus[item[0]]), str(item[1])
            )
            for item in wanted
        }
        todo = [item for item in wanted if keys[item] not in cached]
        logger.info(
            "%d replies wanted: %d cached, %d to write",
            len(wanted),
            len(wanted) - len(todo),
            len(todo),
        )
        with cached:
            tokens, failed = self.ask(todo, keys, examples_block, cached)
        replies = {item: cached[keys[item]] for item in wanted if keys[item] in cached}
        return replies, tokens, failed

    def ask(
        self,
        todo: list[tuple[str, int]],
        keys: dict[tuple[str, int], str],
        examples_block: str,
        cached: KeyedCache[dict[str, Any]],
    ) -> tuple[dict[str, int], int]:
        """Ask the generator for ``todo``'s replies, appending each to the cache as it arrives;
        returns this run's token counts and the failed requests (not cached: asked again)."""
        c = self.config
        tokens = {"input_tokens": 0, "output_tokens": 0}
        failed = 0
        if not todo:
            return tokens, failed
        chat = self.chat_client()
        self.out.mkdir(parents=True, exist_ok=True)
        if c.generator_temperature > 0:
            import torch

            torch.manual_seed(c.seed)  # local sampling, reproducible for the same todo list
        requests = [
            ChatRequest(
                self.prompt.messages(examples_block, self.document(self.collection.corpus[d])),
                max_tokens=c.max_query_tokens,
                temperature=c.generator_temperature,
            )
            for d, _ in todo
        ]
        with tqdm(total=len(todo), desc="writing queries", unit="query", file=sys.stderr) as bar:

            def on_result(index: int, completion: Reply) -> None:
                # Each reply is cached as it arrives: a kill loses only those in flight.
                nonlocal failed
                bar.update(1)
                doc_id, sample = todo[index]
                if completion.error:  # not cached: the next run asks again
                    failed += 1
                    logger.warning("%s: %s", doc_id, completion.error)
                    return
                record = {
                    "doc_id": doc_id,
                    "sample": sample,
                    "reply": completion.text,
                    "finished": completion.finished[0],
                    "usage": {
                        "input_tokens": completion.input_tokens,
                        "output_tokens": completion.output_tokens,
                    },
                }
                cached.put(keys[(doc_id, sample)], record)
                tokens["input_tokens"] += completion.input_tokens
                tokens["output_tokens"] += completion.output_tokens

            chat.complete(requests, on_result)
        return tokens, failed

    def retriever(self, name: str) -> Any:
        from data.candidates import CandidatesConfig, make_retriever

        index_dir = Path(self.config.index_dir) if self.config.index_dir else None
        settings = CandidatesConfig(
            collection=self.config.collection, embedder=self.config.embedder
        )
        return make_retriever(name, self.collection, index_dir, settings)

    def run(self) -> Synthesis:
        c = self.config
        start = time.perf_counter()
        examples = self.examples()
        examples_block = self.prompt.examples_block(examples, c.example_chars)
        example_queries = [e["query"] for e in examples]
        doc_ids = sample_passages(self.collection, c)
        replies, tokens, failed_requests = self.generate(doc_ids, examples_block)
        generated_seconds = time.perf_counter() - start
        generated, candidates = self.queries_from_replies(replies, example_queries)
        hits = self.retrieved(candidates)
        kept = self.round_trip(candidates, hits)
        pairs = self.pairs_with_negatives(kept, hits)
        self.write_outputs(generated, kept, pairs)
        label_summary = self.label(pairs, {r["qid"]: r["doc_id"] for r in kept})
        fates = Counter((r["error"].split(":")[0] if r.get("error") else "kept") for r in generated)
        summary: Synthesis = {
            "passages": len(doc_ids),
            "replies": len(replies),
            "failed_requests": failed_requests,
            "fates": dict(fates.most_common()),
            "queries": len(kept),
            "pairs": len(pairs),
            "generator": self.generator_summary(replies, example_queries, tokens),
            "labels": label_summary,
            "seconds": {
                "writing": round(generated_seconds, 1),
                "total": round(time.perf_counter() - start, 1),
            },
            "config": asdict(c),
        }
        write_json(self.out / "synthesis.json", summary)
        return summary

    def queries_from_replies(
        self, replies: dict[tuple[str, int], dict[str, Any]], example_queries: list[str]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(every reply as a query or an error record, the queries that passed the reply checks
        and are no duplicate of a collection query or an earlier one)."""
        c = self.config
        generated: list[dict[str, Any]] = []
        candidates: list[dict[str, Any]] = []
        seen: set[str] = {normalize(q) for q in self.collection.queries.values()}
        for (doc_id, sample), reply in replies.items():
            passage = self.collection.corpus[doc_id]
            query, error = query_from_reply(
                reply["reply"],
                document_text(passage.text, passage.title),
                example_queries,
                finished=reply.get("finished", True),
                min_words=c.min_query_words,
                max_words=c.max_query_words,
            )
            record = {
                "qid": f"{SYNTHETIC_PREFIX}{doc_id}:{sample}",
                "doc_id": doc_id,
                "reply": reply["reply"],
            }
            if query is not None and normalize(query) in seen:
                query, error = None, "duplicate: of a collection query or an earlier one"
            if query is None:
                generated.append(record | {"error": error})
                continue
            seen.add(normalize(query))
            record["query"] = query
            generated.append(record)
            candidates.append(record)
        return generated, candidates

    def retrieved(self, candidates: list[dict[str, Any]]) -> dict[str, list]:
        """Each retriever's top list for every candidate query (the filter's and the negatives')."""
        c = self.config
        queries = [r["query"] for r in candidates]
        depth = max(c.filter_k, c.negative_depth)
        names = [
            *([c.filter_retriever] if c.filter_retriever != "none" else []),
            *(c.negative_retrievers if c.negatives else []),
        ]
        return {
            name: self.retriever(name).search(queries, depth + 1) if queries else []
            for name in dict.fromkeys(names)
        }

    def round_trip(
        self, candidates: list[dict[str, Any]], hits: dict[str, list]
    ) -> list[dict[str, Any]]:
        """The queries whose source passage the filter retriever ranks in its top filter_k."""
        c = self.config
        kept: list[dict[str, Any]] = []
        for index, record in enumerate(candidates):
            record["_index"] = index
            if c.filter_retriever != "none":
                found = [d for d, _ in hits[c.filter_retriever][index][: c.filter_k]]
                if record["doc_id"] not in found:
                    record["error"] = (
                        f"not retrieved: the source passage is not in the {c.filter_retriever} "
                        f"top {c.filter_k}"
                    )
                    continue
                record["source_rank"] = found.index(record["doc_id"]) + 1
            kept.append(record)
        return kept

    def pairs_with_negatives(self, kept: list[dict[str, Any]], hits: dict[str, list]) -> list[Pair]:
        """Each kept query with its source passage and hard negatives drawn (seeded) from every
        negative retriever's top negative_depth."""
        c = self.config
        rng = random.Random(c.seed)
        pairs: list[Pair] = []
        for record in kept:
            doc_ids_for_query = [record["doc_id"]]
            for name in c.negative_retrievers if c.negatives else []:
                pool = [
                    d
                    for d, _ in hits[name][record["_index"]][: c.negative_depth + 1]
                    if d not in doc_ids_for_query
                ][: c.negative_depth]
                doc_ids_for_query += rng.sample(pool, min(c.negatives, len(pool)))
            for doc_id in doc_ids_for_query:
                doc = self.collection.corpus[doc_id]
                pairs.append(
                    Pair(
                        qid=record["qid"],
                        query=record["query"],
                        doc_id=doc_id,
                        text=doc.text,
                        title=doc.title or None,
                    )
                )
        return pairs

    def write_outputs(
        self, generated: list[dict[str, Any]], kept: list[dict[str, Any]], pairs: list[Pair]
    ) -> None:
        """generated.jsonl, the BEIR folder (queries.jsonl beside the corpus) and pairs.jsonl."""
        self.out.mkdir(parents=True, exist_ok=True)
        for record in generated:
            record.pop("_index", None)
        write_jsonl(self.out / "generated.jsonl", generated)
        write_jsonl(
            self.out / "queries.jsonl",
            [
                {"_id": r["qid"], "text": r["query"], "metadata": {"source": r["doc_id"]}}
                for r in kept
            ],
        )
        self.link_corpus()
        write_jsonl(self.out / "pairs.jsonl", pairs)

    def generator_summary(
        self,
        replies: dict[tuple[str, int], dict[str, Any]],
        example_queries: list[str],
        tokens: dict[str, int],
    ) -> GeneratorSummary:
        input_tokens = sum(r["usage"]["input_tokens"] for r in replies.values())
        output_tokens = sum(r["usage"]["output_tokens"] for r in replies.values())
        return {
            "backend": self.teacher.backend,
            "model": self.generator_model,
            "prompt": self.prompt.id,
            "examples": example_queries,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "tokens_this_run": tokens,
            "estimated_cost": round(
                input_tokens / 1e6 * self.teacher.price_input_per_mtok
                + output_tokens / 1e6 * self.teacher.price_output_per_mtok,
                6,
            ),
        }

    def link_corpus(self) -> None:
        """``out`` as a BEIR folder: its queries beside a link to the collection's corpus."""
        link = self.out / "corpus.jsonl"
        target = (Path(self.config.collection) / "corpus.jsonl").resolve()
        if link.is_symlink() or link.exists():
            if link.resolve() == target:
                return
            link.unlink()
        link.symlink_to(target)

    def label(self, pairs: list[Pair], sources: dict[str, str]) -> SynthesisLabels:
        out = self.out / "judgments.jsonl"
        if self.config.labels == "source":
            judgments = [
                Judgment(
                    **p.pair_fields(),
                    grade=3 if sources[p.qid] == p.doc_id else 0,
                    judge=SOURCE_JUDGE,
                )
                for p in pairs
            ]
            write_jsonl(out, judgments)
            return {"labels": "source", "pairs": len(judgments), "relevant": len(sources)}
        from data.label import LabelConfig, label

        summary = label(
            LabelConfig(out=str(out), pairs=str(self.out / "pairs.jsonl")), self.teacher
        )
        judged = [Judgment.model_validate_json(line) for line in out.open(encoding="utf-8")]
        confirmed = sum(1 for j in judged if j.ok and j.label == 1 and sources[j.qid] == j.doc_id)
        negatives_relevant = sum(
            1 for j in judged if j.ok and j.label == 1 and sources[j.qid] != j.doc_id
        )
        return {
            "labels": "teacher",
            "pairs": summary["pairs"],
            "judged_now": summary["judged_now"],
            "cached": summary["cached"],
            "failed": summary["failed"],
            "relevant": summary["relevant"],
            "estimated_cost": summary["estimated_cost"],
            "seconds": summary["seconds"],
            "source_judged_relevant": confirmed,
            "negatives_judged_relevant": negatives_relevant,
        }


def main(args: Sequence[str] | None = None) -> None:
    config, teacher = parse_config([SynthesisConfig, SyntheticTeacherConfig], args)
    summary = Synthesizer(config, teacher).run()
    print(
        f"{summary['passages']} passages, {summary['replies']} replies: {summary['queries']} "
        f"queries kept ({', '.join(f'{k} {v}' for k, v in summary['fates'].items())}), "
        f"{summary['pairs']} pairs labelled by {summary['labels']['labels']}; "
        f"{summary['seconds']['total']} s -> {config.out}/judgments.jsonl"
    )


if __name__ == "__main__":
    run_main(main)
