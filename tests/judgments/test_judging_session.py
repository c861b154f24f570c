"""session.json as a typed file (judgments.store.JudgingSession): written and read back field for
field; a session of an earlier format, a newer one and a damaged one refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import InputError
from judgments.store import FORMAT, SESSION_FILE, JudgingSession, new_session, write_session

# A session.json as this release writes it (--queries without a draw, two assessors, labels):
# the "format" marker, a null draw, the settings.
SESSION = {
    "format_version": 1,
    "format": "relevance-grader annotate 1",
    "corpus": {"path": "data/c/corpus.jsonl", "sha256": "ab" * 32},
    "runs": {"bm25": "runs/bm25.trec", "dense": "runs/dense.trec"},
    "k": 5,
    "seed": 3,
    "pool": [["q1", ["d1", "d2"]], ["q2", ["d3"]]],
    "draw": None,
    "sample": "--queries",
    "assessors": ["alice", "bob"],
    "labels": "/abs/runs/search",
    "adjudicate": False,
    "reveal": "per-query",
    "highlight": False,
}


def write_raw(folder: Path, data: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SESSION_FILE).write_text(json.dumps(data))
    return folder / SESSION_FILE


def test_a_session_reads_and_is_rewritten_with_its_marker(tmp_path: Path):
    write_raw(tmp_path, SESSION)
    session = JudgingSession.of_folder(tmp_path)
    assert session is not None
    assert (session.k, session.seed, session.corpus.sha256) == (5, 3, "ab" * 32)
    assert dict(session.pool) == {"q1": ["d1", "d2"], "q2": ["d3"]}
    assert (session.assessors, session.reveal, session.highlight) == (
        ["alice", "bob"],
        "per-query",
        False,
    )
    write_session(tmp_path, session)
    written = json.loads((tmp_path / SESSION_FILE).read_text())
    assert written == {k: v for k, v in SESSION.items() if v is not None}  # null draw left out
    assert written["format"] == FORMAT
    assert JudgingSession.of_folder(tmp_path) == session


def test_a_session_of_an_earlier_format_is_refused_in_one_line(tmp_path: Path):
    """A session.json without a format_version (as sessions were first written) is not read
    as this release's: one line naming it and saying to re-run the stage."""
    path = write_raw(tmp_path, {k: v for k, v in SESSION.items() if k != "format_version"})
    with pytest.raises(InputError) as caught:
        JudgingSession.of_folder(tmp_path)
    assert str(caught.value) == (
        f"out: {path}: no format version, but this release reads version 1: "
        "re-run the stage that wrote it"
    )


def test_the_round_trip_keeps_every_field(tmp_path: Path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "t"}\n')
    session = new_session(corpus, {"a": "a.trec"}, 4, 7, {"q1": ["d1"]})
    session.draw, session.sample, session.assessors = {"design": "uniform"}, "draw.json", ["x"]
    write_session(tmp_path / "out", session)
    again = JudgingSession.of_folder(tmp_path / "out")
    assert again == session and again is not session
    assert again.corpus.path == str(corpus) and len(again.corpus.sha256) == 64


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"format_version": 2}, "format version 2 is newer than this release reads (1)"),
        ({"format": "relevance-grader draw 1"}, "is not a judging session (format 'relevance"),
        ({"k": "five"}, "session.json: k: Input should be a valid integer"),
        ({"corpus": {"path": "c.jsonl"}}, "session.json: corpus.sha256: Field required"),
        ({"pool": [["q1"]]}, "session.json: pool.0.1: Field required"),
        ({"reveal_mode": "end"}, "session.json: reveal_mode: Extra inputs are not permitted"),
    ],
)
def test_a_newer_or_damaged_session_is_one_line_naming_the_file_and_field(
    tmp_path: Path, change: dict, expected: str
):
    path = write_raw(tmp_path, SESSION | change)
    with pytest.raises(InputError) as caught:
        JudgingSession.of_folder(tmp_path)
    message = str(caught.value)
    assert str(path) in message and expected in message and len(message.splitlines()) == 1


@pytest.mark.parametrize("field", ["corpus", "runs", "k", "seed", "pool"])
def test_a_missing_field_is_named(tmp_path: Path, field: str):
    write_raw(tmp_path, {k: v for k, v in SESSION.items() if k != field})
    with pytest.raises(InputError, match=f"session.json is damaged: it has no '{field}' field"):
        JudgingSession.of_folder(tmp_path)
