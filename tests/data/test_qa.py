"""SQuAD answer scoring, answer containment, reply clean-up and chunking, against hand counts."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from core.io import RecordError
from data.qa import (
    chunk_spans,
    contains_answer,
    exact_match,
    extract_short_answer,
    normalize_answer,
    read_answers,
    token_f1,
)


def test_normalisation_drops_case_punctuation_articles_and_extra_spaces():
    assert normalize_answer("  The  Denver Broncos!") == "denver broncos"
    assert normalize_answer("Levi's Stadium") == "levis stadium"
    assert normalize_answer("an apple, a pear") == "apple pear"
    # Articles only as words: "theatre" keeps its "the".
    assert normalize_answer("Theatre") == "theatre"


@pytest.mark.parametrize(
    ("prediction", "golds", "em", "f1"),
    [
        ("The Denver Broncos!", ["Denver Broncos"], 1.0, 1.0),
        # 2 shared tokens; precision 2/3, recall 1 -> F1 = 2 * (2/3) / (5/3) = 0.8
        ("Denver Broncos won", ["the Denver Broncos"], 0.0, 0.8),
        # the best gold counts: "broncos" vs "denver broncos": P 1, R 1/2 -> 2/3
        ("Broncos", ["Carolina Panthers", "Denver Broncos"], 0.0, 2 / 3),
        # repeated tokens count once per occurrence in both: common = 1, P 1/2, R 1 -> 2/3
        ("gold gold", ["gold"], 0.0, 2 / 3),
        ("", ["1995"], 0.0, 0.0),
        # nothing left after normalisation on both sides counts as a match
        ("a an the", ["The"], 1.0, 1.0),
    ],
)
def test_exact_match_and_token_f1_against_hand_values(prediction, golds, em, f1):
    assert exact_match(prediction, golds) == em
    assert token_f1(prediction, golds) == pytest.approx(f1)


def test_contains_answer_matches_whole_normalised_tokens():
    assert contains_answer("It was founded in 1995.", ["1995"])
    assert not contains_answer("Code 19950 was issued.", ["1995"])
    assert contains_answer("Denver broncos, champions", ["The Broncos"])
    assert not contains_answer("anything", ["the"])  # an answer that normalises to nothing


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("The answer is: Denver Broncos.", "Denver Broncos."),
        ('Answer: "gold"\nBecause the passage says so.', "gold"),
        ("\n  1995\n", "1995"),
        ("The answer to this question is: 2015", "2015"),
        ("**Answer:** Santa Clara", "Santa Clara"),
        ("Answering machines were new", "Answering machines were new"),
    ],
)
def test_extract_short_answer(reply, answer):
    assert extract_short_answer(reply) == answer


def test_chunk_spans_hand_example_keeps_words_whole():
    text = "aaaa bbbb cccc dddd eeee"
    spans = chunk_spans(text, 10, 5)
    assert spans == [(0, 9), (5, 14), (10, 19), (15, 24)]
    assert [text[s:e] for s, e in spans] == ["aaaa bbbb", "bbbb cccc", "cccc dddd", "dddd eeee"]


def test_chunk_spans_cover_the_text_within_size_and_overlap():
    text = " ".join(f"word{i}" for i in range(400))
    spans = chunk_spans(text, 300, 20)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (s1, e1), (s2, _) in itertools.pairwise(spans):
        assert e1 - s1 <= 300
        assert s1 < s2 <= e1  # no gap, always progress
        assert e1 - s2 <= 20  # never more overlap than asked
    long_word = "x" * 700  # no whitespace at all: hard cuts
    assert chunk_spans(long_word, 300, 20) == [(0, 300), (280, 580), (560, 700)]
    with pytest.raises(ValueError, match="overlap"):
        chunk_spans(text, 20, 20)


def test_read_answers_names_the_line_and_field(tmp_path: Path):
    path = tmp_path / "queries.jsonl"
    rows = [
        {"_id": "q1", "text": "?", "answers": ["a", " "]},
        {"_id": "q2", "text": "?"},
        {"_id": "q3", "text": "?", "answers": "not a list"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(RecordError, match=r"queries.jsonl:3: answers: expected a list of strings"):
        read_answers(path)
    path.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n")
    assert read_answers(path) == {"q1": ["a"]}
