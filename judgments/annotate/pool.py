"""What the page shows: the sample of queries (or hits) to judge, and each query's pooled hits.

A query's pool is the union of every run's top k, each document once, in an order that depends on
nothing but a seeded hash of (query, document): it does not tell which system returned a hit, or
where. Queries come in the same kind of hashed order, so a stratified draw does not show its
strata (the labeler's uncertainty) by the order either. This is the order recorded in
``session.json``; the page serves each assessor an order of their own, seeded from it and the
assessor's name (:meth:`judgments.annotate.app.Judging.order`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from core.errors import InputError
from core.io import fingerprint
from data.beir import Document, Run, ranked
from judgments.design import Design, check_draw_file, design_from_dict

Hit = tuple[str, str]  # (query id, document id)
Pool = dict[str, list[str]]  # query id -> document ids in the order shown


def shown_order(seed: int, *parts: str) -> str:
    return fingerprint(str(seed), *parts)


def read_sample(draw: str | None, queries: Sequence[str]) -> tuple[list[str | Hit], Design | None]:
    """The units to judge: from a draw file of relevance-grader ppi (JSON, with its design), a text
    file of query ids (or ``qid doc_id`` hits), one per line, or the ``--queries`` ids."""
    if draw and queries:
        raise InputError("queries: give --draw FILE or --queries IDS, not both")
    if not draw:
        units: list[str | Hit] = list(dict.fromkeys(queries))
        design = None
    else:
        check_draw_file(draw, "--draw")
        text = Path(draw).read_text(encoding="utf-8")
        if text.lstrip().startswith("{"):
            design = design_from_dict(json.loads(text), draw)
            units = list(design.drawn)
        else:
            design = None
            lines = [line.split() for line in text.splitlines()]
            units = list(dict.fromkeys(_unit(p) for p in lines if p and not p[0].startswith("#")))
    if not units:
        where = draw or "--queries"
        raise InputError(f"queries: the sample is empty ({where} names no query to judge)")
    return units, design


def _unit(parts: list[str]) -> str | Hit:
    return parts[0] if len(parts) == 1 else (parts[0], parts[1])


def pool_hits(
    units: Sequence[str | Hit],
    runs: Mapping[str, Run],
    k: int,
    seed: int,
    corpus: Mapping[str, Document],
    files: Mapping[str, str],
) -> Pool:
    """Each sampled query's top ``k`` across ``runs`` (or the sampled hits themselves), once each,
    queries and hits in hashed order. A document the corpus lacks is one error naming the file
    that names it (``files``: run name or "sample" -> path, and "corpus")."""
    pool: Pool = {}
    for unit in units:
        if isinstance(unit, tuple):
            _check_document(unit[0], unit[1], corpus, files["sample"], files)
            pool.setdefault(unit[0], []).append(unit[1])
            continue
        for name, run in runs.items():
            if unit not in run:
                raise InputError(f"queries: query {unit!r} of the sample is not in {files[name]}")
            for doc_id, _ in ranked(run[unit])[:k]:
                _check_document(unit, doc_id, corpus, files[name], files)
                pool.setdefault(unit, []).append(doc_id)
    return {
        qid: sorted(set(docs), key=lambda d, q=qid: shown_order(seed, q, d))
        for qid, docs in sorted(pool.items(), key=lambda item: shown_order(seed, item[0]))
    }


def _check_document(
    qid: str, doc_id: str, corpus: Mapping[str, Document], source: str, files: Mapping[str, str]
) -> None:
    if doc_id not in corpus:
        raise InputError(
            f"runs: {source} names document {doc_id!r} (query {qid!r}), which {files['corpus']} "
            "does not hold; give the corpus the runs retrieved from"
        )
