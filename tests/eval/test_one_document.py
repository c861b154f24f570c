"""A titled document is one thing everywhere: the library call, the bulk commands (eval.search's
labelling, eval.rerank) and the REST API grade a corpus document as its title on its own line
before its text, so a pair gets one score from every path."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from data.beir import Collection, read_trec_run, write_trec_run
from eval import search as search_module
from measure.labelers import rerank as rerank_module
from models.grader import Grader

K = 4


@pytest.fixture(scope="module")
def titled(adi_dir: Path):
    """One ADI query and K of its corpus's titled documents, as corpus.jsonl holds them."""
    collection = Collection.load(adi_dir)
    qid = sorted(collection.queries)[0]
    docs = [d for _, d in sorted(collection.corpus.items()) if d.title][:K]
    lines = [{"_id": d.doc_id, "title": d.title, "text": d.text} for d in docs]
    return collection.queries[qid], qid, docs, lines


def test_every_path_gives_a_titled_document_one_score(
    titled, adi_dir: Path, tiny_grader_dir: Path, tmp_path: Path, capsys
):
    from fastapi.testclient import TestClient

    from eval.api import create_app
    from measure.labelers import GraderLabeler

    query, qid, docs, lines = titled
    grader = Grader.from_pretrained(tiny_grader_dir)
    library = grader.score(query, lines)
    np.testing.assert_array_equal(grader.score(query, docs), library)  # the corpus's records
    text_only = grader.score(query, [d.text for d in docs])
    assert np.abs(text_only - library).max() > 1e-4  # the title is read: the test can tell

    run_path = tmp_path / "run.trec"
    write_trec_run(run_path, {qid: {d.doc_id: float(K - i) for i, d in enumerate(docs)}})
    search_module.main(
        [
            "--run", str(run_path), "--corpus", str(adi_dir), "--labeler",
            f"grader:{tiny_grader_dir}", "--k", str(K), "--out", str(tmp_path / "search"),
        ]
    )  # fmt: skip
    per_query = json.loads((tmp_path / "search" / "per_query.json").read_text())
    hits = per_query["runs"]["run"][qid]["hits"]
    search = {hit["id"]: hit["score"] for hit in hits}

    rerank_module.main(
        [
            "--run", str(run_path), "--corpus", str(adi_dir), "--grader", str(tiny_grader_dir),
            "--k", str(K), "--out", str(tmp_path / "reranked.trec"),
        ]
    )  # fmt: skip
    rerank = read_trec_run(tmp_path / "reranked.trec")[qid]
    # The rerank says its dtype, as every other output does.
    assert "scoring in float32" in capsys.readouterr().out
    record = json.loads((tmp_path / "reranked.summary.json").read_text())
    assert record["scoring_dtype"] == "float32" and record["queries"] == 1

    app = create_app(labeler=GraderLabeler(str(tiny_grader_dir)), token="")
    body = {
        "query": {"inputs": {"text": query}},
        "hits": [
            {"id": line["_id"], "title": line["title"], "text": line["text"]} for line in lines
        ],
    }
    with TestClient(app) as client:
        response = client.post("/v1/eval/search", json=body)
    assert response.status_code == 200, response.text
    api = {hit["id"]: hit["score"] for hit in response.json()["hits"]}
    assert response.json()["hits"][0]["fields"] == {"title": docs[0].title, "text": docs[0].text}

    for doc, score in zip(docs, library, strict=True):
        assert search[doc.doc_id] == pytest.approx(score, abs=1e-6)
        assert rerank[doc.doc_id] == pytest.approx(score, abs=1e-6)  # 6 decimals in a run file
        assert api[doc.doc_id] == pytest.approx(score, abs=1e-6)


def test_the_api_reads_a_named_title_as_a_title_and_says_its_dtype(titled, tiny_grader_dir: Path):
    from fastapi.testclient import TestClient

    from eval.api import create_app
    from measure.labelers import GraderLabeler

    query, _, docs, lines = titled
    expected = Grader.from_pretrained(tiny_grader_dir).score(query, lines)
    app = create_app(labeler=GraderLabeler(str(tiny_grader_dir)), token="")
    hits = [{"id": d.doc_id, "fields": {"text": d.text, "title": d.title}} for d in docs]
    with TestClient(app) as client:
        for fields in (["title", "text"], ["text", "title"]):
            body = {"query": {"inputs": {"text": query}}, "eval": {"fields": fields}, "hits": hits}
            answer = client.post("/v1/eval/search", json=body).json()
            scores = [hit["score"] for hit in answer["hits"]]
            np.testing.assert_allclose(scores, expected, atol=1e-6)
            assert answer["scoring_dtype"] == "float32"
        untitled = {"query": {"inputs": {"text": query}}, "hits": [{"id": "d", "text": "x"}]}
        answer = client.post("/v1/eval/search", json=untitled).json()
        assert answer["hits"][0]["fields"] == {"text": "x"}  # no title: the text alone


def test_the_library_says_what_it_does_not_read_and_refuses_what_it_cannot(
    titled, tiny_grader_dir: Path, caplog
):
    from core.errors import InputError

    query, _, _, lines = titled
    grader = Grader.from_pretrained(tiny_grader_dir)
    with caplog.at_level(logging.WARNING, logger="models.grader"):
        grader.score(query, [{**lines[0], "url": "http://example.org/1"}])
    assert "'url' not read" in caplog.text and "_id" not in caplog.text
    with pytest.raises(
        InputError, match=r"documents\[1\]: a document mapping needs a string 'text'"
    ):
        grader.score(query, [lines[0], {"title": "only a title"}])
    with pytest.raises(InputError, match="a list of documents, not one document"):
        grader.score(query, "one string")
