"""``python -m eval.history SUBCOMMAND ...`` (``relevance-grader history SUBCOMMAND ...``): the
evaluation history store's commands. Each subcommand is a module with a ``main(args)`` and a
dataclass ``CONFIG`` of its flags; :data:`SUBCOMMANDS` names them, so that a new one is one entry.

    python -m eval.history record --store runs/history.sqlite --from runs/search/dense --version v3
    python -m eval.history list --store runs/history.sqlite
    python -m eval.history show --store runs/history.sqlite --system dense --metric ndcg@10
    python -m eval.history compare dense@v4 dense@v3 --store runs/history.sqlite
    python -m eval.history gate --store runs/history.sqlite --system dense --candidate v4 \\
        --baseline last --metric ndcg@10 --margin 0.02
    python -m eval.history page --store runs/history.sqlite --out history.html
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from core.cli import run_main
from core.errors import InputError

# Subcommand -> (module, what it does).
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "record": ("eval.history.record_command", "record an eval.search output folder"),
    "list": ("eval.history.listing", "the recorded evaluations, oldest first"),
    "show": ("eval.history.show", "each metric of one system over its versions"),
    "compare": ("eval.history.compare", "two evaluations paired, with intervals and moved queries"),
    "gate": ("eval.history.gate", "a release gate for CI: fail on a regression beyond a margin"),
    "monitor": ("eval.history.monitor", "a live system's repeated checks, anytime-valid"),
    "page": ("eval.history.page", "one offline page: trends, evaluations, comparisons"),
}


def usage(program: str) -> str:
    width = max(len(name) for name in SUBCOMMANDS)
    lines = [f"usage: {program} SUBCOMMAND [--help] [ARGS ...]", "", "subcommands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def full_help(program: str) -> str:
    """The subcommands, then each one's flags (``SUBCOMMAND --help`` shows one)."""
    from trl import TrlParser

    parts = [usage(program)]
    for name, (module, _) in SUBCOMMANDS.items():
        config = getattr(importlib.import_module(module), "CONFIG", None)
        if config is None:  # a subcommand that parses its own flags: its own --help
            parts.append(f"{name}: `{program} {name} --help`")
            continue
        parser = TrlParser([config])
        parser.prog = f"{program} {name}"
        parts.append(f"{name}:\n{parser.format_help()}")
    return "\n\n".join(parts)


def main(args: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if args is None else args)
    program = "python -m eval.history" if sys.argv[0].endswith(".py") else sys.argv[0]
    if not args or args[0] in ("-h", "--help"):
        print(full_help(program) if args else usage(program))
        if not args:
            raise InputError("give a subcommand: " + ", ".join(SUBCOMMANDS))
        return
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        raise InputError(f"unknown subcommand {name!r}; expected one of {', '.join(SUBCOMMANDS)}")
    module = importlib.import_module(SUBCOMMANDS[name][0])
    sys.argv = [f"{program} {name}", *rest]  # the subcommand's usage line names it
    module.main(rest)


if __name__ == "__main__":
    run_main(main)
