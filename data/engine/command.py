"""``relevance-grader run`` (``relevance-grader run``): a TREC run straight from a search
endpoint, resumable (see :mod:`data.engine`)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from tqdm.auto import tqdm

from core.cli import bounded, parse_config
from core.errors import InputError
from core.io import (
    KeyedCache,
    atomic_writer,
    check_writable_file,
    dumps,
    lock_file,
    refuse_overlap,
)
from data.beir import read_queries, write_trec_run
from data.engine.client import Answer, Hit, SearchClient, parse_hits
from data.engine.config import EngineConfig, load_engine

logger = logging.getLogger(__name__)


@dataclass
class EngineRunConfig:
    engine: str = field(
        default="",
        metadata={
            "help": "Engine YAML: url, method, body, headers (${VAR} from the environment), "
            "timeout, retries and the paths of the hits, id, score and text; a preset "
            "(data/configs/engines/: pinecone, opensearch, vespa) fills the rest."
        },
    )
    queries: str = field(default="", metadata={"help": "queries.jsonl (_id, text)."})
    k: int = bounded(10, 1, help="Hits asked for per query ({k} in the url and body).")
    out: str = field(
        default="",
        metadata={
            "help": "TREC run to write. Scores are the engine's; without a score path, the "
            "descending rank score n+1-rank (n: the query's hits), so the engine's order stays."
        },
    )
    run_name: str | None = field(
        default=None, metadata={"help": "The run's tag column (default: --out's file stem)."}
    )
    texts: bool = field(
        default=False,
        metadata={
            "help": "Also write the hits' texts (the engine's text path) as OUT-STEM.corpus.jsonl "
            "beside the run, for relevance-grader search --corpus FILE --queries QUERIES."
        },
    )


def partial_path(out: Path) -> Path:
    return out.with_name(out.name + ".partial.jsonl")


def corpus_path(out: Path) -> Path:
    return out.with_name(out.stem + ".corpus.jsonl")


def _check(config: EngineRunConfig, engine: EngineConfig) -> None:
    if config.run_name is not None and (
        not config.run_name or config.run_name.split() != [config.run_name]
    ):
        raise InputError(f"--run_name: {config.run_name!r} is a TREC run's tag: one word")
    if config.texts and engine.text is None:
        raise InputError(f"--texts: {config.engine} has no `text:` path of the hits' texts")
    out = Path(config.out)
    inputs = [("queries", config.queries), ("engine", config.engine)]
    for flag, written in [("--out", out), ("--out", partial_path(out))] + (
        [("--texts", corpus_path(out))] if config.texts else []
    ):
        refuse_overlap(flag, written, inputs)
    if config.texts:
        refuse_foreign_corpus(corpus_path(out))
    check_writable_file("--out", config.out)


def refuse_foreign_corpus(path: Path) -> None:
    """The corpus file is named after --out, not by the user: a file already there is replaced
    only when it is one this command wrote (every line ``_id``, an empty ``title``, ``text``)."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        ours = all(_is_written_hit(line) for line in path.read_text(encoding="utf-8").splitlines())
    except UnicodeDecodeError:
        ours = False
    if not ours:
        raise InputError(
            f"--texts: {path} exists and is not a corpus this command wrote (it is named after "
            "--out); move it away or give another --out"
        )


def _is_written_hit(line: str) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return (
        isinstance(record, dict)
        and record.keys() == {"_id", "title", "text"}
        and record["title"] == ""
    )


def ask_all(
    config: EngineRunConfig, engine: EngineConfig, queries: dict[str, str], cache: KeyedCache
) -> dict[str, Answer]:
    """Every query's answer: those in the partial file as they are, the rest asked once each
    and appended as they arrive."""
    keys = {qid: engine.answer_key(qid, text, config.k) for qid, text in queries.items()}
    missing = [qid for qid in queries if keys[qid] not in cache]
    if len(missing) < len(queries):
        logger.info(
            "%d of %d queries answered before; asking the other %d",
            len(queries) - len(missing),
            len(queries),
            len(missing),
        )
    client = SearchClient(engine, config.engine)

    def ask(qid: str) -> None:
        answer = client.ask(qid, queries[qid], config.k)
        hits = parse_hits(engine, config.engine, qid, answer, config.k)
        cache.put(keys[qid], Answer(qid=qid, hits=hits))

    try:
        if missing:  # a path the answer lacks stops here, in one line before any progress bar
            ask(missing[0])
        bar = tqdm(
            missing[1:], desc="asking the engine", unit="query", initial=1, total=len(missing)
        )
        for qid in bar:
            ask(qid)
    finally:
        client.close()
    return {qid: Answer.model_validate(cache[keys[qid]]) for qid in queries}


def to_run(answers: dict[str, Answer]) -> dict[str, dict[str, float]]:
    """{qid: {doc: score}}: the first of a document's repeated hits kept (a chunked index
    answers one document several times), ranks turned into scores where the engine gave none."""
    run: dict[str, dict[str, float]] = {}
    for qid, answer in answers.items():
        docs: dict[str, float] = {}
        for rank, hit in enumerate(answer.hits, start=1):
            score = hit.score if hit.score is not None else float(len(answer.hits) + 1 - rank)
            docs.setdefault(hit.id, score)
        run[qid] = docs
    return run


def warn_about(answers: dict[str, Answer], engine: EngineConfig, config: EngineRunConfig) -> None:
    """Name what the run leaves out or changes, each once with a count and an example."""
    empty = [qid for qid, answer in answers.items() if not answer.hits]
    if empty:
        logger.warning(
            "%d of %d queries got no hits (first: %s): they have no line in the run (TREC runs "
            "allow it); relevance-grader search measures only the queries a run ranks, so they are "
            "left out of its means rather than counted as 0",
            len(empty),
            len(answers),
            empty[0],
        )
    repeated = [(qid, hit.id) for qid, answer in answers.items() for hit in _repeats(answer)]
    if repeated:
        logger.warning(
            "%d hits repeat a document already ranked for their query (first: %s in %s); the "
            "first of each is kept",
            len(repeated),
            repeated[0][1],
            repeated[0][0],
        )
    rising = [qid for qid, answer in answers.items() if _scores_rise(answer)]
    if rising:
        logger.warning(
            "%d queries' scores rise down the engine's hit list (first: %s), so the run, ordered "
            "by score, differs from the engine's order; write `score: null` in %s to keep the "
            "engine's order",
            len(rising),
            rising[0],
            config.engine,
        )
    if config.texts:
        untexted = [
            (qid, hit.id)
            for qid, answer in answers.items()
            for hit in answer.hits
            if hit.text is None
        ]
        if untexted:
            logger.warning(
                "%d hits have no text at path %r (first: %s of query %s): they are left out of "
                "the corpus file, and relevance-grader search will name them as not in the corpus",
                len(untexted),
                engine.text,
                untexted[0][1],
                untexted[0][0],
            )


def _repeats(answer: Answer) -> list[Hit]:
    """The hits whose document an earlier hit of the same answer already ranks."""
    seen: set[str] = set()
    repeats = []
    for hit in answer.hits:
        if hit.id in seen:
            repeats.append(hit)
        seen.add(hit.id)
    return repeats


def _scores_rise(answer: Answer) -> bool:
    scores = [hit.score for hit in answer.hits if hit.score is not None]
    return any(later > earlier for earlier, later in pairwise(scores))


def write_corpus(path: Path, answers: dict[str, Answer]) -> int:
    """The hits' texts as a corpus.jsonl (``_id``, ``title``, ``text``), each document once."""
    texts: dict[str, str] = {}
    for answer in answers.values():
        for hit in answer.hits:
            if hit.text is not None:
                texts.setdefault(hit.id, hit.text)
    with atomic_writer(path) as handle:
        for doc_id, text in texts.items():
            handle.write(dumps({"_id": doc_id, "title": "", "text": text}) + "\n")
    return len(texts)


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([EngineRunConfig], args)
    if not config.engine or not config.queries or not config.out:
        raise InputError("give --engine, --queries and --out")
    engine = load_engine(config.engine)
    _check(config, engine)
    queries = read_queries(config.queries)
    if not queries:
        raise InputError(f"--queries: {config.queries} holds no query")
    out = Path(config.out)
    started = time.perf_counter()
    with KeyedCache(partial_path(out), exclusive=True) as cache:
        answers = ask_all(config, engine, queries, cache)
        if not any(answer.hits for answer in answers.values()):
            partial_path(out).unlink(
                missing_ok=True
            )  # empty answers are worth nothing; a re-run asks again
            raise InputError(
                f"{config.engine}: none of the {len(answers)} queries got a hit; check the "
                "body's query field and the index (nothing was written)"
            )
        warn_about(answers, engine, config)
        tag = config.run_name or "_".join(out.stem.split()) or "run"
        write_trec_run(out, to_run(answers), tag=tag)
        written = f"wrote {out} ({len(answers)} queries, {time.perf_counter() - started:.1f} s)"
        if config.texts:
            count = write_corpus(corpus_path(out), answers)
            written += f" and {corpus_path(out)} ({count} documents)"
        partial_path(out).unlink(missing_ok=True)  # the run holds every answer now
    lock_file(partial_path(out)).unlink(missing_ok=True)
    print(written)
