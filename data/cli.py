"""Shared command-line plumbing: dataclass configs (YAML + overrides) and clean error exits."""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from data.io import RecordError


def choice(default: Any, choices: Sequence[Any], help: str = "") -> Any:
    """A dataclass field limited to ``choices``: argparse lists and enforces them on the command
    line (``--help`` shows them) and :func:`check_choices` enforces them on YAML values."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": list(choices)})


def check_choices(config: Any, names: Sequence[str] | None = None) -> None:
    """Raise ``ValueError`` naming the field when a value is not one of its field's ``choices``.

    Call from ``__post_init__``: YAML values reach the dataclass as defaults, which argparse does
    not check. ``names`` limits the check to those fields (a subclass of a library's dataclass).
    """
    for item in dataclasses.fields(config):
        if names is not None and item.name not in names:
            continue
        choices = item.metadata.get("choices")
        value = getattr(config, item.name)
        if choices is not None and value not in choices:
            raise ValueError(
                f"{item.name}: expected one of {', '.join(map(str, choices))}, got {value!r}"
            )


def cli_args(**options: Any) -> list[str]:
    """Keyword options as command-line flags for the stages' parsers (``--name value``).

    ``None`` leaves the option out; booleans become ``true``/``false``; lists give one value
    per item; dicts are written as JSON.
    """
    import json

    args: list[str] = []
    for name, value in options.items():
        if value is None:
            continue
        args.append(f"--{name}")
        if isinstance(value, bool):
            args.append("true" if value else "false")
        elif isinstance(value, (list, tuple)):
            args.extend(str(v) for v in value)
        elif isinstance(value, dict):
            args.append(json.dumps(value))
        else:
            args.append(str(value))
    return args


def parse_config(
    dataclass_types: Sequence[type], args: Sequence[str] | None = None
) -> tuple[Any, ...]:
    """``--config FILE.yaml`` sets defaults; ``--key value`` overrides them (TRL's parser)."""
    from trl import TrlParser

    parser = TrlParser(list(dataclass_types))
    return parser.parse_args_and_config(args=list(args) if args is not None else None)


def run_main(
    main: Callable[[Sequence[str] | None], Any], args: Sequence[str] | None = None
) -> None:
    """Run a stage's ``main`` and turn input problems into one clear line and exit code 2.

    Anything already written stays on disk: stages write atomically or append per record.
    """
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("httpx", "httpx2", "httpcore", "openai", "bm25s"):  # a line per request otherwise
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        main(args)
    except RecordError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except (OSError, KeyError, ValueError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted; finished work is kept and a re-run resumes", file=sys.stderr)
        sys.exit(130)
