"""The system zoo's definition: a YAML file of named retrieval systems built from the project's
own parts, so that a labeler can be judged by how it ranks many systems (eval/configs/zoo/).

    systems:
      - {name: bm25, kind: bm25}
      - {name: bm25-k0.9-b0.4, kind: bm25, k1: 0.9, b: 0.4}
      - {name: dense-exact, kind: dense, exact: true}
      - {name: hybrid-rrf, kind: rrf, of: [bm25, dense-exact]}
      - {name: hybrid-linear-0.5, kind: linear, of: [bm25, dense-exact], weight: 0.5}
      - {name: bm25-top100-grader, kind: rerank, of: bm25, by: grader, depth: 100}
      - {name: bm25-shuffled-top5, kind: shuffle, of: bm25, within: 5}
      - {name: bm25-half-index, kind: bm25, index_share: 0.5}
      - {name: bm25-first20words, kind: bm25, first_words: 20}
      - {name: random, kind: random}

Kinds: ``bm25`` (bm25s, ``k1``, ``b``), ``dense`` (the embedder's cosine, ``exact`` or HNSW with
``m``, ``ef_construction``, ``ef_search``), each over the whole corpus or a view of it
(``index_share``: a seeded share of the documents; ``first_words``: each document cut to its
first words); ``rrf`` (reciprocal-rank fusion, ``k``) and ``linear`` (``weight`` × the second
system's min-max-normalised score + (1 − weight) × the first's) of systems above, each cut to
its top ``depth`` hits when given (a fusion of top-10 lists returns only documents they hold);
``rerank`` (a system's top ``depth`` ordered by a scorer named on the command line, ``by``);
``shuffle`` (a system with its top ``within`` hits in a random order); ``random`` (documents
drawn at random); ``file`` (a TREC run of your own, ``path``). A system may only use systems
listed before it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from core.errors import InputError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")  # a file name in every shell


class _System(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str

    def uses(self) -> list[str]:
        """The systems this one is made from."""
        return []


class _Retriever(_System):
    index_share: float = Field(1.0, gt=0, le=1)
    first_words: int | None = Field(None, ge=1)
    seed: int = 0

    @property
    def whole_corpus(self) -> bool:
        return self.index_share == 1 and self.first_words is None


class BM25System(_Retriever):
    kind: Literal["bm25"]
    k1: float = Field(1.5, ge=0)
    b: float = Field(0.75, ge=0, le=1)


class DenseSystem(_Retriever):
    kind: Literal["dense"]
    exact: bool = False
    m: int = Field(32, ge=2)
    ef_construction: int = Field(200, ge=1)
    ef_search: int = Field(200, ge=1)


class _Derived(_System):
    of: str

    def uses(self) -> list[str]:
        return [self.of]


class RerankSystem(_Derived):
    kind: Literal["rerank"]
    by: str
    depth: int = Field(100, ge=1)


class ShuffleSystem(_Derived):
    kind: Literal["shuffle"]
    within: int = Field(5, ge=2)
    seed: int = 0


class _Fusion(_System):
    of: list[str] = Field(min_length=2)
    depth: int | None = Field(None, ge=1)  # each system's top hits fused (None: all it returned)

    def uses(self) -> list[str]:
        return list(self.of)


class RRFSystem(_Fusion):
    kind: Literal["rrf"]
    k: int = Field(60, ge=1)


class LinearSystem(_Fusion):
    kind: Literal["linear"]
    of: list[str] = Field(min_length=2, max_length=2)
    weight: float = Field(0.5, ge=0, le=1)


class RandomSystem(_System):
    kind: Literal["random"]
    seed: int = 0


class FileSystem(_System):
    """A system of the user's own: a TREC run file (read as it is, cut to the zoo's depth)."""

    kind: Literal["file"]
    path: str


System = Annotated[
    BM25System
    | DenseSystem
    | RerankSystem
    | ShuffleSystem
    | RRFSystem
    | LinearSystem
    | RandomSystem
    | FileSystem,
    Field(discriminator="kind"),
]


class ZooDefinition(BaseModel):
    model_config = ConfigDict(extra="forbid")
    systems: list[System] = Field(min_length=2)

    def system(self, name: str) -> System:
        return next(s for s in self.systems if s.name == name)


def _check_names(definition: ZooDefinition, where: str) -> None:
    seen: set[str] = set()
    for i, system in enumerate(definition.systems):
        field = f"{where}: systems.{i}"
        if not NAME.match(system.name):
            raise InputError(
                f"{field}.name: {system.name!r} must be letters, digits and . _ + - (a file name)"
            )
        if system.name in seen:
            raise InputError(f"{field}.name: {system.name!r} is defined twice")
        for used in system.uses():
            if used not in seen:
                raise InputError(
                    f"{field}: {system.name!r} uses {used!r}, which is not a system listed "
                    "before it"
                )
        seen.add(system.name)


def read_zoo(path: str | Path) -> ZooDefinition:
    """The zoo file at ``path``; one line naming the file and the field that does not fit."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: {exc}".splitlines()[0]) from None
    try:
        definition = TypeAdapter(ZooDefinition).validate_python(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "(file)"
        raise InputError(f"{path}: {field}: {error['msg']}") from None
    _check_names(definition, str(path))
    return definition
