"""``relevance-grader history list``: the recorded evaluations as a table, oldest first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from core.cli import parse_config
from core.errors import InputError
from core.io import markdown_table
from eval.history.store import READER_STORE_HELP, EvaluationInfo, open_store


@dataclass
class ListConfig:
    store: str = field(default="", metadata={"help": READER_STORE_HELP})
    system: str | None = field(default=None, metadata={"help": "Only this system's evaluations."})


def when(info: EvaluationInfo) -> str:
    return info.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")


def evaluations_table(evaluations: list[EvaluationInfo]) -> str:
    header = ["id", "system@version", "time", "labeler", "queries", "note"]
    rows = [
        [
            e.id_ref,
            e.ref,
            when(e),
            e.labeler,
            e.queries if e.queries is not None else "–",
            e.note or "",
        ]
        for e in evaluations
    ]
    return markdown_table(header, rows)


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([ListConfig], args)
    if not config.store:
        raise InputError("give --store")
    store = open_store(config.store, write=False)
    try:
        found = store.list_evaluations(config.system)
        if not found and config.system:
            systems = ", ".join(store.systems()) or "none yet"
            raise InputError(
                f"store {store.name}: no system {config.system!r} (systems: {systems})"
            )
    finally:
        store.close()
    print(evaluations_table(found), end="")
