"""Readers and writers for the BEIR layout and TREC files, kept as they are on disk.

BEIR: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``) and
``qrels/*.tsv`` or ``qrels.tsv`` with a ``query-id<TAB>corpus-id<TAB>score`` header.
TREC run: ``qid Q0 docid rank score tag``; TREC qrels: ``qid iteration docid relevance``.
Every reader reports bad input as ``file:line: field: problem``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import InputError
from core.io import READ_ENCODING, RecordError, atomic_writer, iter_json_lines
from core.records import BLANK_QUERY, Pair, is_blank, keep_last, normalise_text

logger = logging.getLogger(__name__)

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]


@dataclass(frozen=True)
class Document:
    doc_id: str
    text: str
    title: str = ""


def _require_str(path: Path, line: int, obj: dict, field: str, *, optional: bool = False) -> str:
    value = obj.get(field)
    if value is None:
        if optional:
            return ""
        raise RecordError(path, line, field, "missing")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise RecordError(path, line, field, f"expected a string, got {type(value).__name__}")
    return value


def _objects(path: Path):
    for number, obj in iter_json_lines(path):
        if isinstance(obj, RecordError):
            raise obj
        yield number, obj


def read_corpus(path: str | os.PathLike[str]) -> dict[str, Document]:
    """``corpus.jsonl`` → {doc_id: Document}, texts in NFC. Duplicate ids and a corpus without
    documents are errors."""
    path = Path(path)
    corpus: dict[str, Document] = {}
    for number, obj in _objects(path):
        doc_id = _require_str(path, number, obj, "_id")
        if doc_id in corpus:
            raise RecordError(path, number, "_id", f"duplicate document id {doc_id!r}")
        corpus[doc_id] = Document(
            doc_id=doc_id,
            text=normalise_text(_require_str(path, number, obj, "text")),
            title=normalise_text(_require_str(path, number, obj, "title", optional=True)),
        )
    if not corpus:
        raise InputError(f"{path}: no documents")
    return corpus


def read_queries(path: str | os.PathLike[str]) -> dict[str, str]:
    """``queries.jsonl`` → {qid: text in NFC}; a blank query is an error."""
    path = Path(path)
    queries: dict[str, str] = {}
    for number, obj in _objects(path):
        qid = _require_str(path, number, obj, "_id")
        if qid in queries:
            raise RecordError(path, number, "_id", f"duplicate query id {qid!r}")
        text = _require_str(path, number, obj, "text")
        if is_blank(text):
            raise RecordError(path, number, "text", BLANK_QUERY)
        queries[qid] = normalise_text(text)
    return queries


def _parse_int(path: Path, line: int, field: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise RecordError(path, line, field, f"expected an integer, got {value!r}") from None


def _is_beir_header(line: str) -> bool:
    return line.strip().split("\t")[0].strip().lower() in {"query-id", "query_id", "qid"}


def is_beir_tsv(path: str | os.PathLike[str]) -> bool:
    """Whether a qrels file is a BEIR TSV (its first line the ``query-id`` header), not TREC."""
    with open(path, encoding=READ_ENCODING) as handle:
        return _is_beir_header(handle.readline())


def read_qrels(path: str | os.PathLike[str]) -> Qrels:
    """Relevance judgments from a BEIR ``.tsv`` (with header) or a TREC qrels file.

    The format is recognised from the first line: a ``query-id`` header means BEIR TSV, four
    whitespace-separated columns mean TREC. A pair given twice keeps its last line, and different
    grades for one pair are counted in a warning (:func:`core.records.keep_last`, the policy of
    every judgments reader).
    """
    path = Path(path)
    with open(path, encoding=READ_ENCODING) as handle:
        lines = list(enumerate(handle, start=1))
    if not lines:
        return {}
    beir = _is_beir_header(lines[0][1])
    rows = lines[1:] if beir else lines
    entries: list[tuple[tuple[str, str], int, str]] = []
    for number, raw in rows:
        if not raw.strip():
            continue
        if beir:
            parts = raw.rstrip("\n").split("\t")
            if len(parts) != 3:
                raise RecordError(
                    path, number, "(line)", f"expected 3 tab-separated columns, got {len(parts)}"
                )
            qid, doc_id, score = parts
            field = "score"
        else:
            parts = raw.split()
            if len(parts) != 4:
                raise RecordError(
                    path,
                    number,
                    "(line)",
                    f"expected 4 columns (qid iter docid rel), got {len(parts)}",
                )
            qid, _, doc_id, score = parts
            field = "relevance"
        entries.append(((qid, doc_id), _parse_int(path, number, field, score), f"line {number}"))
    qrels: Qrels = {}
    for (qid, doc_id), grade in keep_last(entries, str(path)).items.items():
        qrels.setdefault(qid, {})[doc_id] = grade
    return qrels


QRELS_SCALES = ("0-3", "binary")


def is_binary_scale(qrels: Qrels) -> bool:
    """0/1 values only (SciFact, MED, CACM, ADI): 1 there means relevant, unlike grade 1 of 0-3."""
    values = {grade for docs in qrels.values() for grade in docs.values()}
    return 1 in values and values <= {0, 1}


def qrels_scale(path: str | os.PathLike[str], qrels: Qrels, declared: str | None = None) -> str:
    """The scale a qrels file's values are on: ``declared`` (a flag), else the file's format, never
    which grades one session's judgments happened to reach. TREC qrels (``qid iter docid rel``:
    NIST's files, relevance-grader annotate's qrels.txt, the main job's sample) are on the 0-3
    scale, whatever values occur: a file of 0s and 1s is one in which nothing was judged relevant. A
    BEIR TSV (``query-id corpus-id score``) is a collection's judgments as BEIR distributes them:
    binary (1 relevant) when every score is 0 or 1 (SciFact, SQuAD, ADI, CACM, MED), else 0-3 (TREC
    DL)."""
    if declared is not None:
        if declared not in QRELS_SCALES:
            raise InputError(f"scale: expected one of {', '.join(QRELS_SCALES)}, got {declared!r}")
        return declared
    return "binary" if is_binary_scale(qrels) and is_beir_tsv(path) else "0-3"


def graded_qrels(
    qrels: Qrels,
    path: str | os.PathLike[str],
    grade_map: Mapping[int, int] | None = None,
    *,
    infer: bool = True,
    scale: str | None = None,
) -> Qrels:
    """Qrels on the project's 0-3 scale (relevant from grade 2).

    ``grade_map`` maps values explicitly. Without it, the file is on :func:`qrels_scale`'s scale
    (``scale`` declares it): a binary file is read as 0/3, with a warning; a 0-3 file passes as it
    is (its 1s are "not relevant"). With ``infer`` False nothing is read by a rule: 0/1 values
    without a ``grade_map`` or a declared scale are refused (a teacher must be told what a 1 is).
    """
    if grade_map:
        return {q: {d: grade_map.get(g, g) for d, g in docs.items()} for q, docs in qrels.items()}
    if not infer and scale is None and is_binary_scale(qrels):
        raise InputError(
            f"{path}: the qrels are binary (0/1), and 1 is 'not relevant' on the 0-3 scale; give "
            """--grade_map '{"1": 3}' (or '{"1": 2}') to say what a 1 means"""
        )
    if qrels_scale(path, qrels, scale) == "0-3":
        if scale is None and is_binary_scale(qrels):  # said, not acted on: the format decides
            logger.warning(
                "%s: TREC qrels are read on the 0-3 scale, and no pair here reaches grade 2: "
                "nothing is relevant; if 1 means relevant in this file, give its scale as binary "
                "(relevance-grader search --human_scale binary)",
                path,
            )
        return qrels
    off = sorted((q, d, g) for q, docs in qrels.items() for d, g in docs.items() if g not in (0, 1))
    if off:
        qid, doc_id, grade = off[0]
        raise InputError(
            f"{path}: scale binary, but {qid}/{doc_id} has {grade} (0 or 1 expected); give the "
            "0-3 scale for graded judgments"
        )
    how = "declared binary" if scale else "a BEIR TSV of 0/1 scores"
    logger.warning("%s: %s: reading 1 as grade 3 (relevant)", path, how)
    return {q: {d: 3 if g == 1 else g for d, g in docs.items()} for q, docs in qrels.items()}


def read_trec_run(path: str | os.PathLike[str]) -> Run:
    """A TREC run (``qid Q0 docid rank score tag``) → {qid: {docid: score}}."""
    path = Path(path)
    run: Run = {}
    with open(path, encoding=READ_ENCODING) as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            parts = raw.split()
            if len(parts) != 6:
                raise RecordError(
                    path,
                    number,
                    "(line)",
                    f"expected 6 columns (qid Q0 docid rank score tag), got {len(parts)}",
                )
            qid, _, doc_id, rank, score, _ = parts
            _parse_int(path, number, "rank", rank)
            try:
                value = float(score)
            except ValueError:
                raise RecordError(
                    path, number, "score", f"expected a number, got {score!r}"
                ) from None
            if not math.isfinite(value):
                raise RecordError(path, number, "score", f"expected a finite number, got {score}")
            if doc_id in run.get(qid, {}):
                raise RecordError(
                    path, number, "docid", f"{doc_id!r} is ranked twice for query {qid!r}"
                )
            run.setdefault(qid, {})[doc_id] = value
    if not run:
        raise InputError(f"{path}: an empty run (no `qid Q0 docid rank score tag` line)")
    return run


def read_named_runs(
    paths: Sequence[str | os.PathLike[str]], flag: str = "run", same_queries: bool = True
) -> dict[str, Run]:
    """Runs by system name (the file name without its extension); two files with one name would
    silently be one system, so they are refused, and so are runs over different queries (their
    means are not comparable) unless ``same_queries`` is False."""
    runs: dict[str, Run] = {}
    sources: dict[str, str] = {}
    for path in paths:
        name = Path(path).stem
        if name in sources:
            raise InputError(
                f"{flag}: {sources[name]} and {path} are both system {name!r}; rename one file"
            )
        sources[name] = str(path)
        runs[name] = read_trec_run(path)
    first = next(iter(runs), None)
    for name in runs if same_queries else ():
        only_first = sorted(set(runs[first]) - set(runs[name]))
        only_this = sorted(set(runs[name]) - set(runs[first]))
        if only_first or only_this:
            example = (only_first or only_this)[0]
            raise InputError(
                f"{flag}: {sources[name]} and {sources[first]} rank different queries "
                f"({len(only_first)} only in the second, {len(only_this)} only in the first; "
                f"e.g. {example!r}); compare runs over the same queries"
            )
    return runs


def ranked(run_for_query: Mapping[str, float]) -> list[tuple[str, float]]:
    """Documents in trec_eval's order: descending score, and equal scores by descending document
    id (trec_eval compares docnos with ``strcmp``; UTF-8 byte order is code-point order). The
    file's rank column is ignored, as trec_eval ignores it. Every top-k cut and every metric here
    uses this one order."""
    return sorted(run_for_query.items(), key=lambda item: (item[1], item[0]), reverse=True)


def write_trec_run(
    path: str | os.PathLike[str], run: Mapping[str, Mapping[str, float]], tag: str = "run"
) -> None:
    with atomic_writer(path) as handle:
        for qid in sorted(run):
            for rank, (doc_id, score) in enumerate(ranked(run[qid]), start=1):
                handle.write(f"{qid} Q0 {doc_id} {rank} {score:.6f} {tag}\n")


def write_trec_qrels(path: str | os.PathLike[str], qrels: Mapping[str, Mapping[str, int]]) -> None:
    with atomic_writer(path) as handle:
        for qid in sorted(qrels):
            for doc_id in sorted(qrels[qid]):
                handle.write(f"{qid} 0 {doc_id} {int(qrels[qid][doc_id])}\n")


def write_beir_qrels(path: str | os.PathLike[str], qrels: Mapping[str, Mapping[str, int]]) -> None:
    with atomic_writer(path) as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for qid in sorted(qrels):
            for doc_id in sorted(qrels[qid]):
                handle.write(f"{qid}\t{doc_id}\t{int(qrels[qid][doc_id])}\n")


@dataclass(frozen=True)
class Collection:
    """A BEIR-layout folder: corpus, queries and (optionally) one qrels file."""

    root: Path
    corpus: dict[str, Document]
    queries: dict[str, str]
    qrels: Qrels

    @classmethod
    def load(cls, root: str | os.PathLike[str], qrels_file: str | None = None) -> Collection:
        root = Path(root)
        if not (root / "corpus.jsonl").exists():
            raise FileNotFoundError(f"{root}: no corpus.jsonl (expected a BEIR-layout folder)")
        qrels_path = find_qrels(root, qrels_file)
        return cls(
            root=root,
            corpus=read_corpus(root / "corpus.jsonl"),
            # A corpus alone is a collection too: data.synthesize writes queries for it.
            queries=read_queries(root / "queries.jsonl")
            if (root / "queries.jsonl").exists()
            else {},
            qrels=read_qrels(qrels_path) if qrels_path else {},
        )

    def pairs(self, run: Mapping[str, Mapping[str, float]]) -> Iterable[Pair]:
        """Pairs for every (query, document) of a run, ranked by score within a query."""
        for qid in sorted(run):
            for rank, (doc_id, score) in enumerate(ranked(run[qid]), start=1):
                yield self.pair(qid, doc_id, rank=rank, retriever_score=float(score))

    def judged_pool(self) -> Iterable[Pair]:
        """Every judged (query, document) pair, ordered by query id, then document id: an order
        of the content alone (no retriever ranked them, so they carry no rank or score)."""
        for qid in sorted(self.qrels):
            for doc_id in sorted(self.qrels[qid]):
                yield self.pair(qid, doc_id)

    def pair(self, qid: str, doc_id: str, **where: Any) -> Pair:
        """The pair of a query and a document of this collection (both must exist)."""
        if qid not in self.queries:
            raise InputError(f"query {qid!r} is not in {self.root / 'queries.jsonl'}")
        doc = self.corpus.get(doc_id)
        if doc is None:
            raise InputError(
                f"document {doc_id!r} of query {qid!r} is not in {self.root / 'corpus.jsonl'}"
            )
        return Pair(
            qid=qid,
            query=self.queries[qid],
            doc_id=doc_id,
            text=doc.text,
            title=doc.title or None,
            **where,
        )


def read_texts(
    corpus: str | os.PathLike[str], queries: str | os.PathLike[str] | None = None
) -> tuple[dict[str, Document], dict[str, str]]:
    """The documents and queries runs are labelled against: a BEIR folder's (its queries.jsonl
    unless ``queries`` is given), or a corpus.jsonl file's with its ``queries`` file."""
    path = Path(corpus)
    if path.is_dir():
        collection = Collection.load(path)
        return collection.corpus, read_queries(queries) if queries else collection.queries
    if not queries:
        raise InputError("queries: give --queries with a corpus.jsonl file")
    return read_corpus(path), read_queries(queries)


def find_qrels(root: Path, qrels_file: str | None = None) -> Path | None:
    """The qrels file of a BEIR folder: ``qrels_file`` (absolute, or relative to the folder), else
    ``qrels.tsv`` or ``qrels/test.tsv``; None when there is none."""
    if qrels_file:
        path = Path(qrels_file)
        return path if path.is_absolute() or path.exists() else root / qrels_file
    for candidate in (root / "qrels.tsv", root / "qrels" / "test.tsv"):
        if candidate.exists():
            return candidate
    return None
