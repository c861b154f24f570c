from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.io import JsonlAppender, RecordError, read_records, write_jsonl
from core.records import Judgment, Pair, label_from_grade
from tests.commands import run_command

PAIR = {"qid": "q1", "query": "what is a cat", "doc_id": "d1", "text": "A cat is a small mammal."}


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_pair_keeps_numeric_ids_as_strings_and_extra_fields():
    pair = Pair.model_validate({**PAIR, "qid": 19335, "doc_id": 7, "rank": 1, "source": "bm25"})
    assert pair.qid == "19335" and pair.doc_id == "7"
    assert pair.to_json_dict()["source"] == "bm25"


@pytest.mark.parametrize(("grade", "label"), [(0, 0), (1, 0), (2, 1), (3, 1)])
def test_label_follows_grade_at_default_threshold(grade: int, label: int):
    assert Judgment.model_validate({**PAIR, "grade": grade}).label == label
    assert label_from_grade(grade) == label


def test_label_threshold_is_configurable():
    assert Judgment.model_validate({**PAIR, "grade": 1, "relevance_threshold": 1}).label == 1


def test_label_disagreeing_with_grade_is_rejected():
    with pytest.raises(ValidationError, match="disagrees with `grade`"):
        Judgment.model_validate({**PAIR, "grade": 3, "label": 0})


def test_error_record_never_carries_a_label():
    failed = Judgment.model_validate({**PAIR, "error": "unparseable output: 'maybe'"})
    assert failed.label is None and not failed.ok
    with pytest.raises(ValidationError, match="must not carry a label"):
        Judgment.model_validate({**PAIR, "error": "x", "label": 1})
    with pytest.raises(ValidationError, match="`label` or `grade` is required"):
        Judgment.model_validate(PAIR)


def test_reader_names_file_line_and_field(tmp_path: Path):
    path = write_lines(
        tmp_path / "judgments.jsonl",
        [
            json.dumps({**PAIR, "grade": 2}),
            "",
            json.dumps({**PAIR, "grade": "high"}),
        ],
    )
    with pytest.raises(RecordError) as info:
        list(read_records(path, Judgment))
    assert str(info.value).startswith(f"{path}:3: grade: ")
    assert (info.value.line, info.value.field) == (3, "grade")


def test_reader_reports_invalid_json_and_missing_fields(tmp_path: Path):
    bad_json = write_lines(tmp_path / "a.jsonl", [json.dumps(PAIR), '{"qid": "q2", '])
    with pytest.raises(RecordError, match=r"a\.jsonl:2: \(line\): invalid JSON"):
        list(read_records(bad_json, Pair))
    missing = write_lines(
        tmp_path / "b.jsonl", [json.dumps({k: v for k, v in PAIR.items() if k != "query"})]
    )
    with pytest.raises(RecordError, match=r"b\.jsonl:1: query: Field required"):
        list(read_records(missing, Pair))


def test_lenient_reading_skips_and_lists_every_bad_line(tmp_path: Path):
    path = write_lines(
        tmp_path / "mixed.jsonl",
        [json.dumps(PAIR), "not json", json.dumps({**PAIR, "rank": 0}), "[1, 2]", json.dumps(PAIR)],
    )
    skipped: list[RecordError] = []
    records = list(read_records(path, Pair, skipped=skipped))
    assert len(records) == 2
    assert [(e.line, e.field) for e in skipped] == [(2, "(line)"), (3, "rank"), (4, "(line)")]


def test_write_jsonl_is_atomic(tmp_path: Path):
    path = tmp_path / "out.jsonl"
    write_jsonl(path, [Pair.model_validate(PAIR)])
    before = path.read_text()

    def failing():
        yield Pair.model_validate(PAIR)
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        write_jsonl(path, failing())
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temporary left behind


def test_appender_flushes_each_record_and_repairs_a_partial_last_line(tmp_path: Path):
    path = tmp_path / "cache.jsonl"
    appender = JsonlAppender(path)
    appender.write(Pair.model_validate(PAIR))
    # Readable before close: a kill right now loses nothing.
    assert len(list(read_records(path, Pair))) == 1
    appender.close()
    with open(path, "a", encoding="utf-8") as handle:  # a kill mid-write
        handle.write('{"qid": "q2", "query": "dog')
    assert len(list(read_records(path, Pair, tolerate_partial_last_line=True))) == 1
    with JsonlAppender(path) as appender:
        appender.write({**PAIR, "qid": "q3"})
    assert [p.qid for p in read_records(path, Pair)] == ["q1", "q3"]


def test_validate_cli_exits_non_zero_with_file_line_field(tmp_path: Path):
    path = write_lines(
        tmp_path / "bad.jsonl", [json.dumps({**PAIR, "grade": 1}), json.dumps({**PAIR, "grade": 7})]
    )
    result = run_command(["validate", "--files", str(path), "--record", "judgment"])
    assert result.returncode == 2
    assert f"{path}:2: grade: Input should be less than or equal to 3" in result.stderr
    good = write_lines(tmp_path / "good.jsonl", [json.dumps({**PAIR, "grade": 1})])
    result = run_command(["validate", "--files", str(good)])
    assert result.returncode == 0, result.stderr
    assert "1 valid judgment record(s)" in result.stdout


def test_the_grade_scale_in_words_is_the_graded_prompts():
    """People (the judging page) and judges (the graded prompt) grade on one scale."""
    from pathlib import Path

    import yaml

    from core.records import GRADE_SCALE, MAX_GRADE

    prompt = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "data/prompts/trec-graded.yaml").read_text()
    )["user"]
    assert sorted(GRADE_SCALE) == list(range(MAX_GRADE + 1))
    for grade, (_, meaning) in GRADE_SCALE.items():
        assert f"{grade} = {meaning}" in prompt


def test_keep_last_is_the_one_duplicate_policy_and_counts_conflicts(caplog):
    from core.records import keep_last

    entries = [(("q", "a"), 1, "line 1"), (("q", "b"), 2, "line 2"), (("q", "a"), 1, "line 3")]
    kept = keep_last([*entries, (("q", "b"), 0, "line 4")], "f.tsv")
    assert kept.items == {("q", "a"): 1, ("q", "b"): 0}
    assert (kept.duplicates, kept.conflicts) == (2, 1)
    assert "f.tsv: 1 pair(s) given twice" in caplog.text and "q/b: 2 at line 2" in caplog.text


def _of_category(*categories: str) -> list[str]:
    import sys
    import unicodedata

    chars = (chr(c) for c in range(sys.maxunicode + 1))
    return [ch for ch in chars if unicodedata.category(ch) in categories]


def test_invisible_and_space_like_characters_are_normalised_by_their_unicode_category():
    """A soft hyphen (Cf) or a no-break space (Zs) inside a query moved the grader's score
    (0.604 -> 0.773 / 0.438): every character of those categories is handled, not a list."""
    from core.records import is_blank, normalise_text

    spaces = _of_category("Zs")
    assert "\u00a0" in spaces and "\u3000" in spaces and len(spaces) >= 17
    for ch in spaces:
        assert normalise_text(f"axon{ch}terminal") == "axon terminal", hex(ord(ch))
    formats = _of_category("Cf")
    assert "\u00ad" in formats and "\u200b" in formats and len(formats) >= 150
    for ch in formats:
        assert normalise_text(f"ax{ch}on") == "axon", hex(ord(ch))
    for ch in _of_category("Zl", "Zp"):
        assert normalise_text(f"axon{ch}terminal") == "axon\nterminal", hex(ord(ch))
    for ch in _of_category("Cc"):
        expected = {"\t": "\t", "\n": "\n", "\r": "\r"}.get(ch, "\n" if ch.isspace() else "")
        assert normalise_text(f"axon{ch}terminal") == f"axon{expected}terminal", hex(ord(ch))
    assert normalise_text("caf\u00ade\u0301 au\u00a0lait") == "café au lait"
    assert is_blank("\u00a0\u00ad\u2028\x00") and not is_blank("\u00a0a")
    pair = Pair(qid="q", query="ax\u00adon\u00a0terminal", doc_id="d", text="t")
    assert pair.query == "axon terminal"


def test_zero_width_characters_are_removed_where_texts_are_normalised():
    from core.records import normalise_text

    assert normalise_text("ax\u200bon \u2060ter\u200cmi\u200dnal\ufeff") == "axon terminal"
    assert normalise_text("cafe\u200b\u0301") == "café"  # removed first, then composed
    pair = Pair(qid="q", query="ax\u200bon", doc_id="d", text="An\u200b axon", title="T\u200bitle")
    assert (pair.query, pair.text, pair.title) == ("axon", "An axon", "Title")
    with pytest.raises(ValidationError, match="blank query"):
        Pair(qid="q", query="\u200b\u200d", doc_id="d", text="t")
