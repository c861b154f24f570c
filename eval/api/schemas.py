"""The eval_search request and response bodies, and the checks of a request against the limits."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from core.errors import InputError
from core.records import BLANK_QUERY, is_blank
from eval.api.settings import ApiSettings


def _valid_unicode(value: str) -> str:
    # JSON may carry a lone surrogate (\\ud800) that no tokenizer or UTF-8 encoder accepts.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError("contains a lone surrogate: not valid Unicode text") from None
    return value


Text = Annotated[str, AfterValidator(_valid_unicode)]
FieldName = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_valid_unicode)]


def _readable_query(value: str) -> str:
    if is_blank(value):
        raise InputError(BLANK_QUERY)
    return value


class QueryInputs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: Annotated[Text, AfterValidator(_readable_query)] = Field(min_length=1)


class QueryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    inputs: QueryInputs


TITLE, TEXT = "title", "text"


class EvalOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # The hit's fields the labeler reads. Left out: its title (where it has one) and its text, a
    # corpus document as the bulk commands grade it. A "title" named here is read as a title
    # (on its own line first, core.records.document_text); the other fields, in the order named,
    # are joined by newlines into the text.
    fields: list[FieldName] | None = Field(default=None, min_length=1, max_length=16)
    debug: bool = False
    k: int | None = Field(default=None, ge=1)

    def required(self) -> list[str]:
        """The fields every hit must carry."""
        return self.fields if self.fields is not None else [TEXT]

    def read(self, hit: HitIn) -> list[str]:
        """The fields of ``hit`` the labeler reads, in the order named."""
        if self.fields is not None:
            return self.fields
        return [name for name in (TITLE, TEXT) if name in hit.fields]

    def document(self, hit: HitIn) -> tuple[str, str | None]:
        """(text, title) of ``hit`` as the labeler reads it."""
        names = self.read(hit)
        title = hit.fields[TITLE] if TITLE in names else None
        text = "\n".join(hit.fields[n] for n in names if n != TITLE and hit.fields[n])
        return text, title


def _json_type(value: Any) -> str:
    names = {list: "a list", dict: "an object", bool: "true/false", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else "a value")


class HitIn(BaseModel):
    """A hit in any of the documented shapes, normalised to ``id`` + ``fields``:
    ``{"id", "fields": {...}}``, ``{"id", "title": ..., "text": ...}`` (text fields at the top
    level) and Pinecone's ``{"_id", "_score", "fields": {...}}``."""

    model_config = ConfigDict(extra="forbid")
    id: Text = Field(min_length=1, max_length=512)
    fields: dict[FieldName, Text] = Field(default_factory=dict)
    retrieval_score: float | None = None  # the retriever's own score (Pinecone's _score)

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "_id" in data and "id" not in data:
            data["id"] = data.pop("_id")
        if "_score" in data:
            data["retrieval_score"] = data.pop("_score")
        fields = data.get("fields")
        fields = dict(fields) if isinstance(fields, dict) else fields
        for key in [k for k in data if k not in cls.model_fields]:
            if not isinstance(data[key], str):
                raise InputError(
                    f"{key!r}: a hit's entries besides id, fields and retrieval_score (_id, "
                    f"_score) are text fields and must be strings, got {_json_type(data[key])}"
                    "; join a list into one string"
                )
            if isinstance(fields, dict | None):
                fields = fields or {}
                if key in fields:
                    continue  # "fields" wins; the duplicate stays and extra="forbid" names it
                fields[key] = data.pop(key)
        if fields is not None:
            data["fields"] = fields
        return data


class SearchEvalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: QueryIn
    eval: EvalOptions = Field(default_factory=EvalOptions)
    hits: list[HitIn] = Field(min_length=1)


def limit_problems(body: SearchEvalRequest, settings: ApiSettings) -> list[dict[str, Any]]:
    """Violations of the configured limits, in FastAPI's 422 format (one entry per field)."""

    def problem(loc: list[Any], msg: str) -> dict[str, Any]:
        return {"type": "value_error", "loc": ["body", *loc], "msg": msg, "input": None}

    problems = []
    if len(body.hits) > settings.max_hits:
        problems.append(
            problem(["hits"], f"{len(body.hits)} hits; the limit is {settings.max_hits}")
        )
    if body.eval.k is not None and body.eval.k > settings.max_hits:
        problems.append(problem(["eval", "k"], f"k={body.eval.k} exceeds {settings.max_hits}"))
    if len(body.query.inputs.text) > settings.max_text_chars:
        problems.append(
            problem(
                ["query", "inputs", "text"],
                f"{len(body.query.inputs.text)} characters; the limit is {settings.max_text_chars}",
            )
        )
    for i, hit in enumerate(body.hits):
        for name, text in hit.fields.items():
            if len(text) > settings.max_text_chars:
                problems.append(
                    problem(
                        ["hits", i, "fields", name],
                        f"field {name!r} has {len(text)} characters; the limit is "
                        f"{settings.max_text_chars}",
                    )
                )
    first_seen: dict[str, int] = {}
    for i, hit in enumerate(body.hits):
        if hit.id in first_seen:
            problems.append(
                problem(["hits", i, "id"], f"id {hit.id!r} is also hit {first_seen[hit.id]}")
            )
        first_seen.setdefault(hit.id, i)
    for name in body.eval.required():
        missing = [i for i, hit in enumerate(body.hits) if name not in hit.fields]
        problems += [
            {
                "type": "missing",
                "loc": ["body", "hits", i, "fields", name],
                "msg": f"field {name!r} is missing",
                "input": None,
            }
            for i in missing
        ]
    return problems


class HitOut(BaseModel):
    index: int
    id: str
    fields: dict[str, str]
    relevant: bool
    relevance: int  # eval_search's 1-4 scale (4 highly ... 1 not relevant); >= 3 is relevant
    justification: str | None = None
    score: float | None = None
    grade: int | None = None


class Usage(BaseModel):
    evaluation_input_tokens: int


class SearchEvalResponse(BaseModel):
    metrics: dict[str, float]
    hits: list[HitOut]
    usage: Usage
    # The arithmetic the labeler's model scored in (float32 on a CPU, bfloat16 on a GPU), as
    # eval.search's metrics.json records it.
    scoring_dtype: str
    warnings: list[str] | None = None
    debug: dict[str, Any] | None = None
