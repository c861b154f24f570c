from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from core.errors import InputError
from data.beir import (
    Collection,
    RecordError,
    graded_qrels,
    is_binary_scale,
    read_corpus,
    read_qrels,
    read_trec_run,
    write_beir_qrels,
    write_trec_qrels,
    write_trec_run,
)


def test_committed_trec_dl_2019_matches_its_published_counts(trec_dl_dir: Path):
    collection = Collection.load(trec_dl_dir)
    assert len(collection.corpus) == 10_818
    assert len(collection.queries) == 43
    grades = Counter(g for docs in collection.qrels.values() for g in docs.values())
    assert grades == {0: 5158, 1: 1601, 2: 1804, 3: 697}
    assert all(doc_id in collection.corpus for docs in collection.qrels.values() for doc_id in docs)


def test_committed_adi_loads(adi_dir: Path):
    collection = Collection.load(adi_dir)
    assert (len(collection.corpus), len(collection.queries)) == (82, 35)
    assert sum(len(d) for d in collection.qrels.values()) == 170


def test_trec_run_round_trip_breaks_ties_by_descending_doc_id_as_trec_eval(tmp_path: Path):
    run = {"q1": {"b": 1.0, "a": 1.0, "c": 2.5}, "q2": {"x": 0.1}}
    path = tmp_path / "run.trec"
    write_trec_run(path, run, tag="bm25")
    lines = path.read_text().splitlines()
    assert lines[:3] == [
        "q1 Q0 c 1 2.500000 bm25",
        "q1 Q0 b 2 1.000000 bm25",
        "q1 Q0 a 3 1.000000 bm25",
    ]
    assert read_trec_run(path) == run


def test_qrels_round_trip_in_both_layouts(tmp_path: Path):
    qrels = {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}
    write_trec_qrels(tmp_path / "qrels.txt", qrels)
    write_beir_qrels(tmp_path / "qrels.tsv", qrels)
    assert read_qrels(tmp_path / "qrels.txt") == qrels
    assert read_qrels(tmp_path / "qrels.tsv") == qrels


def test_bad_inputs_name_file_line_and_field(tmp_path: Path):
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\tyes\n")
    with pytest.raises(RecordError, match=r"qrels\.tsv:3: score: expected an integer"):
        read_qrels(qrels)
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d1 1 0.5 r\nq1 Q0 d2 2 r\n")
    with pytest.raises(RecordError, match=r"run\.trec:2: \(line\): expected 6 columns"):
        read_trec_run(run)
    for body, message in [
        ("q1 Q0 d1 1 0.5 r\nq1 Q0 d1 2 0.4 r\n", r"run\.trec:2: docid: 'd1' is ranked twice"),
        ("q1 Q0 d1 1 nan r\n", r"run\.trec:1: score: expected a finite number"),
    ]:
        run.write_text(body)
        with pytest.raises(RecordError, match=message):
            read_trec_run(run)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "1", "text": "a"}\n{"_id": "1", "text": "b"}\n')
    with pytest.raises(RecordError, match=r"corpus\.jsonl:2: _id: duplicate"):
        read_corpus(corpus)


def test_collection_pairs_follow_run_order(adi_dir: Path):
    collection = Collection.load(adi_dir)
    pairs = list(collection.pairs({"1": {"17": 0.2, "46": 0.9}}))
    assert [(p.doc_id, p.rank) for p in pairs] == [("46", 1), ("17", 2)]
    assert pairs[0].query == collection.queries["1"]
    assert pairs[0].title == collection.corpus["46"].title
    with pytest.raises(InputError, match="not in"):
        list(collection.pairs({"1": {"no-such-doc": 1.0}}))


def test_binary_qrels_are_never_read_as_grade_1(adi_dir: Path, caplog: pytest.LogCaptureFixture):
    path = adi_dir / "qrels.tsv"  # a BEIR TSV of 0/1 scores: BEIR's binary relevance
    qrels = read_qrels(path)
    assert is_binary_scale(qrels) and not is_binary_scale({"q": {"a": 0, "b": 1, "c": 3}})
    with pytest.raises(ValueError, match="grade_map"):
        graded_qrels(qrels, path, infer=False)
    with caplog.at_level("WARNING"):
        inferred = graded_qrels(qrels, path)
    assert "a BEIR TSV of 0/1 scores: reading 1 as grade 3" in caplog.text
    assert {g for docs in inferred.values() for g in docs.values()} == {3}
    assert graded_qrels(qrels, "x", {1: 2})["1"] == dict.fromkeys(qrels["1"], 2)


def test_a_trec_qrels_files_scale_is_its_format_not_the_grades_it_happens_to_hold(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """A 0-3 session in which no judged hit reached grade 2 holds only 0s and 1s: its 1s stay
    'not relevant' (a TREC qrels file is on the 0-3 scale whatever values occur), with a warning
    that names the flag for a file that is binary; binary only when declared, and a declared
    binary file holding a 2 is refused."""
    from data.beir import qrels_scale

    path = tmp_path / "session.qrels"
    write_trec_qrels(path, {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 1}})
    qrels = read_qrels(path)
    assert qrels_scale(path, qrels) == "0-3"
    with caplog.at_level("WARNING"):
        assert graded_qrels(qrels, path) == qrels  # 1 stays grade 1: not relevant
    assert "give its scale as binary (relevance-grader search --human_scale binary)" in caplog.text
    assert graded_qrels(qrels, path, scale="binary") == {"q1": {"d1": 3, "d2": 0}, "q2": {"d3": 3}}
    assert graded_qrels(qrels, path, scale="0-3") == qrels
    graded = {"q1": {"d1": 2, "d2": 0}}
    with pytest.raises(InputError, match=r"scale binary, but q1/d1 has 2 \(0 or 1 expected\)"):
        graded_qrels(graded, path, scale="binary")
    # The same values as a BEIR TSV are a collection's binary judgments; with a 2, graded.
    beir = tmp_path / "qrels.tsv"
    write_beir_qrels(beir, qrels)
    assert qrels_scale(beir, qrels) == "binary" and qrels_scale(beir, graded) == "0-3"
    assert qrels_scale(beir, qrels, "0-3") == "0-3"


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_an_empty_run_is_named_not_a_max_of_nothing(tmp_path: Path, content: str):
    path = tmp_path / "empty.trec"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"empty\.trec: an empty run"):
        read_trec_run(path)


def test_two_run_files_with_one_name_are_refused(tmp_path: Path):
    from data.beir import read_named_runs, write_trec_run

    for folder in ("a", "b"):
        write_trec_run(tmp_path / folder / "run.trec", {"1": {"d": 1.0}})
    runs = [tmp_path / "a" / "run.trec", tmp_path / "b" / "run.trec"]
    with pytest.raises(ValueError, match="are both system 'run'; rename one"):
        read_named_runs(runs)
    assert set(read_named_runs(runs[:1])) == {"run"}


def test_runs_over_different_queries_are_not_compared(tmp_path: Path):
    from data.beir import read_named_runs, write_trec_run

    write_trec_run(tmp_path / "a.trec", {"1": {"d": 1.0}, "2": {"d": 1.0}})
    write_trec_run(tmp_path / "b.trec", {"1": {"d": 1.0}})
    paths = [tmp_path / "a.trec", tmp_path / "b.trec"]
    with pytest.raises(ValueError, match=r"b\.trec and .*a\.trec rank different queries.*'2'"):
        read_named_runs(paths)
    assert set(read_named_runs(paths, same_queries=False)) == {"a", "b"}


def test_queries_are_read_in_nfc_and_a_blank_one_is_refused(tmp_path: Path):
    import unicodedata

    from data.beir import read_queries

    path = tmp_path / "queries.jsonl"
    path.write_text(
        json.dumps({"_id": "1", "text": unicodedata.normalize("NFD", "café")})
        + "\n"
        + json.dumps({"_id": "2", "text": "\u200b \u200d"})
        + "\n"
    )
    with pytest.raises(ValueError, match=r"queries\.jsonl:2: text: a blank query"):
        read_queries(path)
    path.write_text(json.dumps({"_id": "1", "text": unicodedata.normalize("NFD", "café")}) + "\n")
    assert read_queries(path) == {"1": "café"}


def test_a_corpus_without_documents_is_named(tmp_path: Path):
    from data.beir import read_corpus

    (tmp_path / "corpus.jsonl").write_text("\n")
    with pytest.raises(ValueError, match=r"corpus\.jsonl: no documents"):
        read_corpus(tmp_path / "corpus.jsonl")


def test_a_pair_with_a_blank_query_is_a_record_error(tmp_path: Path):
    from core.io import read_records
    from core.records import Pair

    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"qid": "1", "query": "\u2060", "doc_id": "d", "text": "t"}) + "\n")
    with pytest.raises(ValueError, match=r"pairs\.jsonl:1: query: .*blank query"):
        list(read_records(path, Pair))


BOM = "\ufeff"


def test_a_byte_order_mark_is_read_as_nothing(tmp_path: Path):
    """Windows editors start UTF-8 files with a BOM: it was part of the first query id of a run
    (silently another query) and turned a BEIR qrels header into a bad TREC line."""
    run = tmp_path / "run.trec"
    run.write_text(BOM + "1 Q0 d1 1 2.0 r\n1 Q0 d2 2 1.0 r\n", encoding="utf-8")
    assert read_trec_run(run) == {"1": {"d1": 2.0, "d2": 1.0}}
    beir = tmp_path / "qrels.tsv"
    beir.write_text(BOM + "query-id\tcorpus-id\tscore\n1\td1\t2\n", encoding="utf-8")
    trec = tmp_path / "qrels.txt"
    trec.write_text(BOM + "1 0 d1 2\n", encoding="utf-8")
    assert read_qrels(beir) == read_qrels(trec) == {"1": {"d1": 2}}
    (tmp_path / "corpus.jsonl").write_text(
        BOM + json.dumps({"_id": "d1", "text": "an axon"}) + "\n", encoding="utf-8"
    )
    (tmp_path / "queries.jsonl").write_text(
        BOM + json.dumps({"_id": "1", "text": "axon"}) + "\n", encoding="utf-8"
    )
    collection = Collection.load(tmp_path, qrels_file=str(beir))
    assert set(collection.corpus) == {"d1"} and collection.queries == {"1": "axon"}


def test_a_qrels_pair_given_two_grades_keeps_the_last_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 d1 3\nq1 0 d2 1\nq1 0 d1 0\nq1 0 d2 1\n")
    assert read_qrels(path) == {"q1": {"d1": 0, "d2": 1}}
    assert "1 pair(s) given twice with different verdicts" in caplog.text
    assert "first: q1/d1: 3 at line 1, then 0 at line 3" in caplog.text
    caplog.clear()
    path.write_text("q1 0 d1 3\nq1 0 d1 3\n")  # the same grade twice: no conflict
    assert read_qrels(path) == {"q1": {"d1": 3}} and not caplog.text


def test_the_texts_runs_are_labelled_against_come_from_a_folder_or_a_corpus_and_queries_file(
    adi_dir: Path, tmp_path: Path
):
    from data.beir import read_texts

    corpus, queries = read_texts(adi_dir)
    assert corpus == Collection.load(adi_dir).corpus and queries
    (tmp_path / "queries.jsonl").write_text('{"_id": "only", "text": "one query"}\n')
    _, own = read_texts(adi_dir, tmp_path / "queries.jsonl")  # a folder's queries replaced
    assert own == {"only": "one query"}
    alone, _ = read_texts(adi_dir / "corpus.jsonl", tmp_path / "queries.jsonl")
    assert alone == corpus
    with pytest.raises(InputError, match=r"queries: give --queries with a corpus\.jsonl file"):
        read_texts(adi_dir / "corpus.jsonl")
