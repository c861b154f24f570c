"""Judge prompts: YAML files with a name and version that every judgment records.

A prompt has a ``scale`` (``binary`` or ``graded`` 0-3), a ``system`` and a ``user`` template with
``{query}`` and ``{document}`` slots, and either ``direct_answer: true`` with an ``answers`` map (a
single-token reply such as yes/no or a digit, which local models score from token probabilities)
or a JSON reply. Every prompt carries its answer's shape as ``json_schema``, sent where the
endpoint constrains output (OpenAI, vLLM and llama.cpp take it as ``response_format``), so small
models answer in form: a JSON prompt's reply object, or for a direct prompt ``{"answer": WORD}``
with WORD one of its answers (:func:`answer_schema`, written out in data/prompts/ and derived
for a prompt file that has none). :func:`parse_reply` turns a reply, bare or in that shape, into a
verdict or raises :class:`ParseError`; nothing unparseable becomes a label.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.errors import InputError

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"


class ParseError(ValueError):
    pass


@dataclass(frozen=True)
class Verdict:
    grade: int | None
    label: int
    confidence: float | None = None
    rationale: str | None = None
    p_relevant: float | None = None


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    scale: str
    system: str
    user: str
    direct_answer: bool = False
    answers: dict[str, int] = field(default_factory=dict)
    json_schema: dict[str, Any] | None = None
    max_output_tokens: int = 256

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"

    def messages(self, query: str, document: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system.strip()},
            {"role": "user", "content": self.user.format(query=query, document=document).strip()},
        ]

    def relevant_share(self, mass: Mapping[int, float]) -> float | None:
        """P(relevant) from probability mass per answer value, renormalised over the answers
        (relevant: a verdict labelled 1); None when no mass fell on an answer."""
        total = sum(mass.values())
        if not total:
            return None
        relevant = sum(p for value, p in mass.items() if self.verdict_from_answer(value).label)
        return relevant / total

    def verdict_from_answer(self, answer_value: int, probability: float | None = None) -> Verdict:
        """A direct answer's value (0/1 for binary, 0-3 for graded) as a verdict."""
        if self.scale == "binary":
            return Verdict(grade=None, label=int(answer_value), confidence=probability)
        from core.records import label_from_grade

        return Verdict(
            grade=int(answer_value),
            label=label_from_grade(int(answer_value)),
            confidence=probability,
        )


def answer_schema(answers: Mapping[str, int]) -> dict[str, Any]:
    """A direct prompt's answer shape for constrained output: ``{"answer": one of its answers}``
    (an object, as OpenAI's strict schemas need at the top)."""
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": list(answers)}},
        "required": ["answer"],
        "additionalProperties": False,
    }


def load_prompt(name_or_path: str) -> Prompt:
    """A prompt by name (a file in data/prompts/) or by path to a YAML file."""
    path = Path(name_or_path)
    if not path.suffix:
        path = PROMPTS_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in PROMPTS_DIR.glob("*.yaml"))
        raise FileNotFoundError(
            f"prompt {name_or_path!r} not found; known prompts: {', '.join(known)}"
        )
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of the prompt's fields")
    for key in ("name", "version", "scale", "system", "user"):
        if key not in data:
            raise InputError(f"{path}: {key}: missing")
    if data["scale"] not in ("binary", "graded"):
        raise InputError(f"{path}: scale: expected binary or graded, got {data['scale']!r}")
    if data.get("direct_answer") and not data.get("answers"):
        raise InputError(f"{path}: answers: required when direct_answer is true")
    if data.get("direct_answer"):
        data["answers"] = {str(word): value for word, value in data["answers"].items()}
        data.setdefault("json_schema", answer_schema(data["answers"]))
        if data["json_schema"] != answer_schema(data["answers"]):
            raise InputError(
                f"{path}: json_schema: a direct prompt's answer shape is "
                f"{json.dumps(answer_schema(data['answers']))} (its answers), or leave it out"
            )
    elif not isinstance(data.get("json_schema"), dict):
        raise InputError(
            f"{path}: json_schema: required (the reply's JSON shape) without direct_answer"
        )
    return Prompt(**data)


def available_prompts() -> list[str]:
    return sorted(p.stem for p in PROMPTS_DIR.glob("*.yaml"))


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_TRUE = {"true", "yes", "relevant", "1"}
_FALSE = {"false", "no", "not relevant", "irrelevant", "0"}


def _json_object(text: str) -> dict[str, Any] | None:
    cleaned = re.sub(r"^```(?:json)?|```$", "", text.strip(), flags=re.MULTILINE).strip()
    for candidate in (cleaned, *(_JSON_OBJECT.findall(cleaned) or [])):
        try:
            obj = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value)
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    return None


def parse_reply(prompt: Prompt, text: str) -> Verdict:
    """Parse a judge's reply for ``prompt``: JSON first, then tolerant patterns; else ParseError."""
    if prompt.direct_answer:
        return _parse_direct(prompt, text)
    obj = _json_object(text)
    if prompt.scale == "binary":
        relevant = _as_bool(obj.get("relevant")) if obj else None
        rationale = obj.get("analysis") if obj else None
        if relevant is None:
            match = re.search(r'"?relevant"?\s*[:=]\s*"?(true|false|yes|no)', text, re.IGNORECASE)
            relevant = _as_bool(match.group(1)) if match else None
        if relevant is None:
            raise ParseError(f"no relevant: true/false verdict in the reply: {text[:200]!r}")
        return Verdict(
            grade=None,
            label=int(relevant),
            rationale=rationale if isinstance(rationale, str) else None,
        )
    grade = obj.get("grade", obj.get("score")) if obj else None
    if grade is None:
        match = re.search(r'"?(?:grade|score)"?\s*[:=]\s*"?([0-3])\b', text, re.IGNORECASE)
        grade = match.group(1) if match else None
    try:
        grade = int(grade)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ParseError(f"no 0-3 grade in the reply: {text[:200]!r}") from None
    if not 0 <= grade <= 3:
        raise ParseError(f"grade {grade} is outside 0-3")
    confidence = obj.get("confidence") if obj else None
    if confidence is not None:
        try:
            confidence = float(confidence)
        except (TypeError, ValueError):
            confidence = None
    rationale = (obj.get("justification") or obj.get("rationale")) if obj else None
    verdict = prompt.verdict_from_answer(grade, None)
    return Verdict(
        grade=verdict.grade,
        label=verdict.label,
        confidence=confidence,
        rationale=rationale if isinstance(rationale, str) else None,
    )


# A direct answer: the reply is the answer word, optionally after a label ("Score: 3") and followed
# by punctuation or the end ("Yes.", "Yes, because ..."). "No idea" or "I can't say yes or no" are
# not answers: an answer word merely somewhere in the text is not a verdict.
_DIRECT_ANSWER = re.compile(
    r"^(?:(?:answer|verdict|score|grade|relevance|relevant)\s*[:=-]\s*)?([a-z]+|\d)"
    r"(?=$|\s*[.,;:!)\n])"
)


# List numbering, bullets, quotes and headings before a reply ("1. Yes", "- yes.", "> No").
_LIST_MARKER = re.compile(r"^(?:\d{1,2}[.)]\s+|[-+*•>#]+\s*)")


def _parse_direct(prompt: Prompt, text: str) -> Verdict:
    obj = _json_object(text) if text.lstrip().startswith(("{", "```")) else None
    if obj is not None:  # the constrained shape, {"answer": "yes"}
        answer = str(obj.get("answer", "")).strip().lower()
        if answer in prompt.answers:
            return prompt.verdict_from_answer(prompt.answers[answer])
        raise ParseError(f"expected an answer in {sorted(prompt.answers)}, got {text[:200]!r}")
    reply = re.sub(r"[*`_]", "", text).strip().lower()  # markdown emphasis ("**No**")
    # The answer after a list marker first ("1. 3" is grade 3), else the reply as it is ("2. The
    # passage ..." is grade 2).
    for candidate in dict.fromkeys((_LIST_MARKER.sub("", reply, count=1), reply)):
        cleaned = candidate.strip().strip(".!\"'")
        if cleaned in prompt.answers:
            return prompt.verdict_from_answer(prompt.answers[cleaned])
        match = _DIRECT_ANSWER.match(cleaned)
        if match and match.group(1) in prompt.answers:
            return prompt.verdict_from_answer(prompt.answers[match.group(1)])
    raise ParseError(f"expected one of {sorted(prompt.answers)}, got {text[:200]!r}")
