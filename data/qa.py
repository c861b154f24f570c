"""Short-answer QA primitives: SQuAD answer normalisation, exact match, token F1, answer
containment, gold answers from a queries file, and character chunking of documents.

Exact match and F1 follow the official SQuAD v1.1 evaluation: lower-case, drop punctuation and
the articles a/an/the, collapse whitespace; a prediction's score is its best over the gold answers.
"""

from __future__ import annotations

import os
import re
import string
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from core.errors import InputError
from core.io import RecordError, iter_json_lines

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer."""
    normalized = normalize_answer(prediction)
    return float(any(normalized == normalize_answer(gold) for gold in golds))


def _f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    if not prediction_tokens or not gold_tokens:
        # Nothing left after normalisation: right only when both are empty.
        return float(prediction_tokens == gold_tokens)
    common = sum((Counter(prediction_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(prediction_tokens)
    recall = common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    """The best bag-of-tokens F1 of the normalised prediction against the gold answers."""
    tokens = normalize_answer(prediction).split()
    return max((_f1(tokens, normalize_answer(gold).split()) for gold in golds), default=0.0)


ANSWER_METRICS = {"em": exact_match, "f1": token_f1}


def contains_answer(text: str, golds: Sequence[str]) -> bool:
    """Whether a gold answer occurs in ``text`` as a whole-token sequence, both normalised
    (so "1995" is not found in "19950" and "The Broncos" is found in "broncos,")."""
    haystack = f" {normalize_answer(text)} "
    return any(
        f" {needle} " in haystack for needle in (normalize_answer(g) for g in golds) if needle
    )


_ANSWER_PREFIX = re.compile(
    r"^\**\s*(?:the\s+)?(?:short\s+|final\s+)?answer\b"
    r"(?:\s+to\s+(?:this|the)\s+question)?(?:\s+is)?\s*[:\-]?\s*\**\s*",
    re.IGNORECASE,
)


def extract_short_answer(reply: str) -> str:
    """The answer inside a reader's reply: its first non-empty line, without a leading
    "Answer:"/"The answer is" and without quotes (small models add both)."""
    line = next((ln.strip() for ln in reply.splitlines() if ln.strip()), "")
    line = _ANSWER_PREFIX.sub("", line, count=1).strip()
    return line.strip("\"'“”‘’ ").strip()


def read_answers(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    """{query id: gold answer strings} from a ``queries.jsonl`` whose records carry ``answers``."""
    path = Path(path)
    answers: dict[str, list[str]] = {}
    for number, obj in iter_json_lines(path):
        if isinstance(obj, RecordError):
            raise obj
        qid = obj.get("_id")
        if not isinstance(qid, str | int) or isinstance(qid, bool) or qid == "":
            raise RecordError(path, number, "_id", "missing")
        values = obj.get("answers")
        if values is None:
            continue
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise RecordError(path, number, "answers", "expected a list of strings")
        answers[str(qid)] = [v for v in values if v.strip()]
    if not answers:
        raise RecordError(path, 1, "answers", "no record has gold answers")
    return answers


def chunk_spans(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    """Character windows of at most ``size`` over ``text``, each starting ``overlap`` characters
    before the previous one ended (as a 300/20 character splitter does), moved to whitespace
    where one is near so that words are not cut in two."""
    if size < 1:
        raise InputError(f"chunk size: expected >= 1, got {size}")
    if not 0 <= overlap < size:
        raise InputError(f"chunk overlap: expected 0 <= overlap < size ({size}), got {overlap}")
    spans: list[tuple[int, int]] = []
    start, length = 0, len(text)
    while start < length:
        end = min(start + size, length)
        if end < length and not text[end].isspace():
            cut = text.rfind(" ", start + size // 2, end)
            if cut > start:
                end = cut
        spans.append((start, end))
        if end >= length:
            break
        next_start = max(end - overlap, start + 1)
        # Start on a word: skip forward to the next space, but never past the chunk's end.
        if next_start > 0 and not text[next_start - 1].isspace():
            space = text.find(" ", next_start, end)
            if space != -1:
                next_start = space + 1
        start = next_start
    return spans
