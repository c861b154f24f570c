"""The engine YAML: how to ask a search endpoint and where its answer lies (:class:`EngineConfig`),
its presets, the dotted paths into a JSON answer and the request templates."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.errors import InputError
from core.io import fingerprint

PRESETS_DIR = Path(__file__).resolve().parents[1] / "configs" / "engines"
# Elasticsearch answers _search in OpenSearch's shape (OpenSearch began as its fork).
PRESET_FILES = {
    "pinecone": "pinecone.yaml",
    "opensearch": "opensearch.yaml",
    "elasticsearch": "opensearch.yaml",
    "vespa": "vespa.yaml",
}
ENV_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# A template's own fields: ${VAR} (the environment), {query} and {k}.
TEMPLATE_FIELD = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\{(query|k)\}")
MISSING = object()  # what a path that matches nothing resolves to


class EngineConfig(BaseModel):
    """How to ask a search endpoint for a query's top k and where its answer lies."""

    model_config = ConfigDict(extra="forbid")

    preset: Literal["pinecone", "opensearch", "elasticsearch", "vespa", "none"] = "none"
    url: str  # {query} (URL-encoded) and {k} are filled in; ${VAR} from the environment
    method: Literal["GET", "POST"] = "POST"
    body: dict[str, Any] | None = None  # JSON body template (POST); "{k}" alone becomes an int
    headers: dict[str, str] = Field(default_factory=dict)  # values may hold ${VAR}
    timeout: float = Field(10.0, gt=0)  # seconds per request
    retries: int = Field(3, ge=0)  # on 429, 5xx, connection errors and timeouts
    retry_wait: float = Field(0.5, ge=0)  # seconds before the first retry, doubled after each
    hits: str  # dotted path of the hit list in the response ("" for a response that is the list)
    id: str  # dotted path of a hit's document id
    score: str | None = None  # dotted path of a hit's score; none: the engine's order
    text: str | None = None  # dotted path of a hit's text (--texts)
    id_after: str | None = None  # keep the id's part after the last occurrence of this string

    def answer_key(self, qid: str, query: str, k: int) -> str:
        """What an answer depends on (never the headers: a rotated key changes no answer)."""
        shape = [self.url, self.method, self.body, self.hits, self.id, self.score, self.text]
        return fingerprint(qid, query, str(k), json.dumps([*shape, self.id_after]))


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise InputError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected key: value lines (url, hits, id, ...)")
    return data


def load_engine(path: str | os.PathLike[str]) -> EngineConfig:
    """An engine YAML, over the file of its ``preset`` when it names one; an unknown key or a
    bad value is one line naming the file and the key."""
    path = Path(path)
    data = _read_yaml(path)
    preset = data.get("preset", "none")
    if preset in PRESET_FILES and path.resolve() != PRESETS_DIR / PRESET_FILES[preset]:
        base = _read_yaml(PRESETS_DIR / PRESET_FILES[preset])
        data = {**base, **data}
    try:
        return EngineConfig.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            known = ", ".join(EngineConfig.model_fields)
            raise InputError(f"{path}: unknown key {key!r} (known: {known})") from None
        raise InputError(f"{path}: {key}: {error['msg']}") from None


def resolve(obj: Any, path: str) -> Any:
    """The value at a dotted ``path`` (a number indexes a list; "" is ``obj`` itself), or
    ``MISSING``."""
    for part in path.split(".") if path else ():
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif (
            isinstance(obj, list)
            and part.lstrip("-").isdigit()
            and -len(obj) <= int(part) < len(obj)
        ):
            obj = obj[int(part)]
        else:
            return MISSING
    return obj


def keys_of(obj: Any) -> str:
    """What an answer or a hit holds, for a message about a path it lacks."""
    if isinstance(obj, dict):
        return f"keys: {', '.join(map(str, list(obj)[:12])) or 'none'}"
    return f"a {type(obj).__name__}, not an object"


def _environment(name: str, where: str) -> str:
    if name not in os.environ:
        raise InputError(f"{where} names environment variable {name}, which is not set")
    return os.environ[name]


def expand_environment(value: str, where: str) -> str:
    """``${VAR}`` replaced by the variable's value; a variable that is not set is one line
    naming it (its value, a secret perhaps, is never printed)."""
    return ENV_VARIABLE.sub(lambda match: _environment(match.group(1), where), value)


def fill_text(template: str, fields: dict[str, str], where: str) -> str:
    """``template`` with its own ``{query}``, ``{k}`` (from ``fields``) and ``${VAR}`` filled in,
    in one pass: what is put in is never read again as a template, so a query holding ``{k}``
    or ``${HOME}`` reaches the engine as it was written."""

    def value_of(match: re.Match[str]) -> str:
        variable, name = match.groups()
        return _environment(variable, where) if variable is not None else fields[name]

    return TEMPLATE_FIELD.sub(value_of, template)


def fill_body(template: Any, query: str, k: int, where: str) -> Any:
    """The body template with ``{query}`` and ``{k}`` filled in (``"{k}"`` alone is the number,
    as engines want ``size: 10``, not ``"10"``) and ``${VAR}`` expanded, each once."""
    if isinstance(template, dict):
        return {key: fill_body(value, query, k, where) for key, value in template.items()}
    if isinstance(template, list):
        return [fill_body(value, query, k, where) for value in template]
    if not isinstance(template, str):
        return template
    if template == "{k}":
        return k
    return fill_text(template, {"query": query, "k": str(k)}, where)
