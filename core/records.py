"""Typed records shared by every stage (see docs/design.md, "Records").

A *pair* is one query and one document. A *judgment* is a pair plus what a judge said about it.
Both are plain JSON objects, one per line, so that `datasets.load_dataset("json", ...)` reads them
as well as our own validating reader does.
"""

from __future__ import annotations

import functools
import logging
import sys
import unicodedata
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

logger = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Relevant when grade >= 2 on the 0-3 scale (TREC's convention for binary metrics).
DEFAULT_RELEVANCE_THRESHOLD = 2
MAX_GRADE = 3
# The 0-3 scale in words: what the graded prompt (data/prompts/trec-graded.yaml) asks a judge and
# the judging page (judgments.annotate) shows a person, so people and judges grade on one scale.
GRADE_SCALE: dict[int, tuple[str, str]] = {
    0: ("Not relevant", "the passage has nothing to do with the query"),
    1: ("Related", "the passage is on the query's topic but does not answer it"),
    2: (
        "Relevant",
        "the passage answers the query, but the answer is unclear or mixed with unrelated text",
    ),
    3: ("Perfect", "the passage is dedicated to the query and contains the exact answer"),
}


# Characters a reader does not see as themselves, by Unicode category: a space of any width (Zs:
# no-break, thin, ideographic ...) reads as a plain space; a line or paragraph separator (Zl, Zp)
# and the control characters that break lines or fields (vertical tab, form feed, NEL, the
# information separators) as a newline; format characters (Cf: soft hyphen, zero-width space and
# joiners, word joiner, byte-order mark, bidi marks, tags) and the other control characters are
# removed. Tab, newline and carriage return stay. Each of these changed the tokens a grader reads
# (a soft hyphen moved a score from 0.604 to 0.773, a no-break space to 0.438).
KEPT_CONTROLS = "\t\n\r"


@functools.cache
def invisible_table() -> dict[int, str | None]:
    """The characters :func:`normalise_text` replaces or removes, by category: built on first use
    from the running Python's Unicode database (a quarter of a second)."""
    table: dict[int, str | None] = {}
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        category = unicodedata.category(ch)
        if ch in KEPT_CONTROLS or ch == " ":
            continue
        if category == "Zs":
            table[code] = " "
        elif category in ("Zl", "Zp") or (category == "Cc" and ch.isspace()):
            table[code] = "\n"
        elif category in ("Cf", "Cc"):
            table[code] = None
    return table


def normalise_text(text: str) -> str:
    """Every text as it comes in: spaces, separators, format and control characters as
    :func:`invisible_table` maps them (by Unicode category), then Unicode NFC. A composed and a
    decomposed "é" are one text to a tokenizer only after it (unnormalised, they got P(relevant)
    0.80 and 0.999), and so are a word with and without a zero-width space or a soft hyphen
    inside, and a no-break space and a space."""
    return unicodedata.normalize("NFC", text.translate(invisible_table()))


def is_blank(text: str) -> bool:
    """Nothing left once normalised (only spaces, separators, format and control characters): a
    text no judge or grader can read as a query."""
    return not normalise_text(text).strip()


BLANK_QUERY = "a blank query (only spaces or invisible characters)"
EMPTY_DOCUMENT = "an empty document"


class _Record(BaseModel):
    # Ids are often numbers in the wild (TREC, MS MARCO); keep them as strings everywhere.
    # Unknown fields are kept so that a read/write round trip loses nothing.
    model_config = ConfigDict(coerce_numbers_to_str=True, extra="allow", validate_assignment=False)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class Pair(_Record):
    """One query and one document (optionally with where a retriever ranked it)."""

    qid: str = Field(min_length=1)
    query: str
    doc_id: str = Field(min_length=1)
    text: str
    title: str | None = None
    rank: int | None = Field(default=None, ge=1)
    retriever_score: float | None = None

    @field_validator("query")
    @classmethod
    def _readable_query(cls, value: str) -> str:
        if is_blank(value):
            raise ValueError(BLANK_QUERY)
        return normalise_text(value)

    @field_validator("text", "title")
    @classmethod
    def _normalised(cls, value: str | None) -> str | None:
        return None if value is None else normalise_text(value)

    @property
    def key(self) -> tuple[str, str]:
        return (self.qid, self.doc_id)

    def pair_fields(self) -> dict[str, Any]:
        """Only the pair's own fields: a judgment read as a pair must not pass its verdict on."""
        return self.model_dump(mode="json", include=set(Pair.model_fields), exclude_none=True)


class Usage(BaseModel):
    model_config = ConfigDict(extra="allow")

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)


class JudgeInfo(BaseModel):
    """Which judge produced a judgment: model id, prompt name and version, backend."""

    model_config = ConfigDict(extra="allow", protected_namespaces=())

    model: str
    prompt: str
    prompt_version: int | str | None = None
    backend: str | None = None


class Judgment(Pair):
    """A pair plus a judge's verdict.

    `error` is set when the judge's output could not be used; such a record carries no label and
    is never silently turned into one. Otherwise `label` is required and, when a grade is given,
    must agree with it under `relevance_threshold`.
    """

    grade: int | None = Field(default=None, ge=0, le=MAX_GRADE)
    label: int | None = Field(default=None, ge=0, le=1)
    confidence: float | None = None
    # P(relevant) where the judge gives a probability (token probabilities, vote share).
    p_relevant: float | None = Field(default=None, ge=0, le=1)
    rationale: str | None = None
    judge: JudgeInfo | None = None
    usage: Usage | None = None
    error: str | None = None
    relevance_threshold: int | None = Field(default=None, ge=0, le=MAX_GRADE)

    @model_validator(mode="after")
    def _label_or_error(self) -> Judgment:
        if self.error is not None:
            if self.label is not None:
                raise ValueError("a judgment with `error` must not carry a label")
            return self
        if self.label is None:
            if self.grade is None:
                raise ValueError("`label` or `grade` is required unless `error` is set")
            self.label = label_from_grade(self.grade, self.relevance_threshold)
        elif self.grade is not None:
            expected = label_from_grade(self.grade, self.relevance_threshold)
            if expected != self.label:
                threshold = self.relevance_threshold or DEFAULT_RELEVANCE_THRESHOLD
                raise ValueError(
                    f"`label` {self.label} disagrees with `grade` {self.grade} "
                    f"(relevant when grade >= {threshold})"
                )
        return self

    @property
    def ok(self) -> bool:
        return self.error is None


def label_from_grade(grade: int, threshold: int | None = None) -> int:
    """Binary label of a 0-3 grade: relevant (1) when grade >= threshold (default 2)."""
    return int(grade >= (DEFAULT_RELEVANCE_THRESHOLD if threshold is None else threshold))


RECORD_TYPES: dict[str, type[_Record]] = {"pair": Pair, "judgment": Judgment}


def document_text(text: str, title: str | None = None) -> str:
    """A document as graders, judges and embedders read it: the title (if any) on its own line."""
    return f"{title.strip()}\n{text}" if title and title.strip() else text


def is_empty_document(record: Pair) -> bool:
    """A pair whose document has nothing to read (no title, a blank text): data.build refuses it
    and data.validate reports it."""
    return is_blank(document_text(record.text, record.title))


@dataclass
class KeptLast(Generic[K, V]):
    """One value per key, and how many keys were given twice (``conflicts``: with another value)."""

    items: dict[K, V] = field(default_factory=dict)
    duplicates: int = 0
    conflicts: int = 0


def keep_last(
    entries: Iterable[tuple[K, V, str]],
    source: str,
    verdict: Callable[[V], Hashable] = lambda value: value,
) -> KeptLast[K, V]:
    """The one policy of every judgments reader (qrels, judgments files, judging sessions): a
    pair given twice keeps its **last** value (judgment files are append-only logs, a later line
    re-judges), and pairs given different verdicts are counted in one warning naming ``source``
    and the first of them. ``entries``: (key, value, where: e.g. ``line 4``)."""
    kept: KeptLast[K, V] = KeptLast()
    places: dict[K, str] = {}
    first = ""
    for key, value, where in entries:
        if key in kept.items:
            kept.duplicates += 1
            before, after = verdict(kept.items[key]), verdict(value)
            if before != after:
                kept.conflicts += 1
                name = "/".join(map(str, key)) if isinstance(key, tuple) else str(key)
                first = first or f"{name}: {before} at {places[key]}, then {after} at {where}"
        kept.items[key] = value
        places[key] = where
    if kept.conflicts:
        logger.warning(
            "%s: %d pair(s) given twice with different verdicts; the last of each is kept "
            "(first: %s)",
            source,
            kept.conflicts,
            first,
        )
    return kept
