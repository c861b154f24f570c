"""Typed files between stages: each file one stage writes and another reads is one pydantic
model with a format version, used to write it and to read it (HF's ``TrainerState``, ranx's
``Report``), so that readers take attributes rather than walk string keys, and a file of another
version is refused in one line.

Until the first release there is no upgrade code: a changed format bumps its ``FORMAT_VERSION``,
and a file of another version (an older one, or one without a version) is refused in one line
naming the file and saying to re-run the stage that wrote it; a newer one, to upgrade."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from core.errors import InputError
from core.io import write_json


class Artifact(BaseModel):
    """A file between stages. Subclasses set ``FILE`` (its usual name) and ``FORMAT_VERSION``."""

    model_config = ConfigDict(extra="forbid")
    FILE: ClassVar[str]
    FORMAT_VERSION: ClassVar[int]
    format_version: int = 0

    def model_post_init(self, context: Any) -> None:
        self.format_version = self.FORMAT_VERSION  # what this release writes

    @classmethod
    def from_data(cls, data: Any, where: str) -> Any:
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(data).__name__}")
        version = data.get("format_version")
        if isinstance(version, int) and version > cls.FORMAT_VERSION:
            raise InputError(
                f"{where}: format version {version} is newer than this release reads "
                f"({cls.FORMAT_VERSION}); upgrade relevance-grader to read it"
            )
        if version != cls.FORMAT_VERSION:
            found = "no format version" if version is None else f"format version {version!r}"
            raise InputError(
                f"{where}: {found}, but this release reads version {cls.FORMAT_VERSION}: "
                "re-run the stage that wrote it"
            )
        return cls.validated(data, where)

    @classmethod
    def validated(cls, data: dict[str, Any], where: str) -> Any:
        """``data`` built by this release (not read from a file) as the model; one line naming
        ``where`` and the field that does not fit."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(map(str, error["loc"])) or "(file)"
            raise InputError(f"{where}: {field}: {error['msg']}") from None

    @classmethod
    def read(cls, path: str | Path) -> Any:
        """The file at ``path``; one line naming it and the field where it does not fit."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except ValueError as exc:
            raise InputError(f"{path}: not JSON ({exc})") from None
        return cls.from_data(data, str(path))

    def dump(self) -> dict[str, Any]:
        """The file's JSON object. Optional fields left at their default are left out; a value
        inside that is None (an undefined statistic) stays, as null."""
        return self.model_dump(mode="json", exclude_defaults=True)

    def write(self, path: str | Path) -> None:
        write_json(Path(path), self.dump())
