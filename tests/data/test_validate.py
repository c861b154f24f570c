"""data.validate: every bad line of every file, as the docs say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.cli import run_main
from data.validate import main

JUDGMENT = {"qid": "q1", "query": "axon", "doc_id": "d1", "text": "An axon ...", "grade": 1}


def test_every_bad_line_of_every_file_is_listed_without_a_flag(tmp_path: Path, capsys):
    first = tmp_path / "a.jsonl"
    first.write_text(
        "".join(json.dumps(x) + "\n" for x in [JUDGMENT, {**JUDGMENT, "grade": 7}, {"qid": "q"}])
    )
    second = tmp_path / "b.jsonl"
    second.write_text(json.dumps(JUDGMENT) + "\n{not json\n")
    with pytest.raises(SystemExit) as exit_info:
        run_main(main, ["--files", str(first), str(second), "--record", "judgment"])
    assert exit_info.value.code == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert errors[:3] == [
        f"error: {first}:2: grade: Input should be less than or equal to 3",
        f"error: {first}:3: query: Field required (and 2 more problem(s) on this line)",
        f"error: {second}:2: (line): invalid JSON: Expecting property name enclosed in double "
        "quotes at column 2",
    ]
    assert errors[-1] == "error: 3 bad line(s) in 2 file(s)"


def test_an_empty_document_is_a_bad_line_as_data_build_says(tmp_path: Path, capsys):
    path = tmp_path / "j.jsonl"
    rows = [JUDGMENT, {**JUDGMENT, "doc_id": "d2", "text": " \u200b "}, {**JUDGMENT, "text": ""}]
    rows.append({**JUDGMENT, "doc_id": "d3", "text": "", "title": "Axons"})  # a title is text
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))
    with pytest.raises(SystemExit):
        run_main(main, ["--files", str(path), "--record", "pair"])
    errors = capsys.readouterr().err.strip().splitlines()
    assert errors == [
        f"error: {path}:2: text: an empty document",
        f"error: {path}:3: text: an empty document",
        "error: 2 bad line(s) in 1 file(s)",
    ]
