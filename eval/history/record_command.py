"""``relevance-grader history record``: an existing eval.search output folder into the store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from core.cli import parse_config
from core.errors import InputError
from eval.history.record import record_folder


@dataclass
class RecordConfig:
    store: str = field(
        default="",
        metadata={"help": "The store: a SQLite file (created if absent) or a database URL."},
    )
    folder: str = field(
        default="",
        metadata={
            "aliases": ["--from"],
            "help": "The relevance-grader search output folder. Its --run is recorded (the "
            "--compare runs are not); the corpus, queries and run it names must still be in place.",
        },
    )
    system: str | None = field(
        default=None,
        metadata={"help": "The system's name (default: the run's name); it holds no '@'."},
    )
    version: str | None = field(
        default=None,
        metadata={
            "help": "Its version (default: the current UTC time stamp); not 'last', nor "
            "beginning with 'id:' (the syntax of an evaluation's id)."
        },
    )
    note: str | None = field(default=None, metadata={"help": "A note kept with the evaluation."})


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([RecordConfig], args)
    if not config.store or not config.folder:
        raise InputError("give --store and --from")
    print(record_folder(config.store, config.folder, config.system, config.version, config.note))
