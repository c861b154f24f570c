"""Shared command-line plumbing: dataclass configs (YAML + overrides) and clean error exits."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from data.io import RecordError


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
    except (FileNotFoundError, KeyError, ValueError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted; finished work is kept and a re-run resumes", file=sys.stderr)
        sys.exit(130)
