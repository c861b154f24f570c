"""Shared command-line plumbing: dataclass configs (YAML + overrides) and clean error exits."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import logging
import os
import shlex
import sys
import types
import typing
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any, NoReturn

from core.errors import InputError
from core.job_stages import refuse_job_stage


def choice(default: Any, choices: Sequence[Any], help: str = "") -> Any:
    """A dataclass field limited to ``choices``: argparse lists and enforces them on the command
    line (``--help`` shows them) and :func:`check_choices` enforces them on YAML values."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": list(choices)})


def split_flags(values: Sequence[str]) -> list[str]:
    """Flags passed through to another command, each value split like a shell would.

    argparse takes a value that starts with "--" only when it holds a space, so a list of flags
    for another command comes quoted on the command line (``--train_args "--labels graded"``);
    YAML lists of single tokens pass unchanged."""
    return [part for value in values for part in shlex.split(value)]


def bounded(
    default: Any,
    low: float | None = None,
    high: float | None = None,
    help: str = "",
    *,
    open_low: bool = False,
    open_high: bool = False,
) -> Any:
    """A numeric dataclass field limited to [low, high] (``open_*``: the bound excluded), enforced
    by :func:`check_choices` for YAML and command-line values alike (``None`` passes)."""
    bounds = {"low": low, "high": high, "open_low": open_low, "open_high": open_high}
    return dataclasses.field(default=default, metadata=_ArgparseMetadata(help=help, bounds=bounds))


class _ArgparseMetadata(dict):
    """Field metadata whose ``bounds`` entry argparse does not see (HfArgumentParser passes every
    listed key to ``add_argument``, which rejects unknown ones); ``.get`` still finds it."""

    def keys(self):  # type: ignore[override]
        return [key for key in dict.keys(self) if key != "bounds"]

    def __iter__(self):
        return iter(self.keys())


def _bounds_problem(value: Any, bounds: dict[str, Any]) -> str | None:
    low, high = bounds["low"], bounds["high"]
    too_low = low is not None and (value <= low if bounds["open_low"] else value < low)
    too_high = high is not None and (value >= high if bounds["open_high"] else value > high)
    if not (too_low or too_high):
        return None
    if high is None:
        return f"expected {'>' if bounds['open_low'] else '>='} {low}, got {value}"
    left = "(" if bounds["open_low"] else "["
    right = ")" if bounds["open_high"] else "]"
    return f"expected a value in {left}{low}, {high}{right}, got {value}"


def check_choices(config: Any, names: Sequence[str] | None = None) -> None:
    """Raise ``ValueError`` naming the field when a value is not one of its field's ``choices``
    or outside its ``bounds`` (see :func:`choice` and :func:`bounded`).

    Call from ``__post_init__``: YAML values reach the dataclass as defaults, which argparse does
    not check. ``names`` limits the check to those fields (a subclass of a library's dataclass).
    """
    for item in dataclasses.fields(config):
        if names is not None and item.name not in names:
            continue
        choices = item.metadata.get("choices")
        value = getattr(config, item.name)
        if choices is not None and value not in choices:
            raise InputError(
                f"{item.name}: expected one of {', '.join(map(str, choices))}, got {value!r}"
            )
    check_bounds(config, names)


def check_bounds(config: Any, names: Sequence[str] | None = None) -> None:
    """Raise ``ValueError`` naming the field when a value lies outside its :func:`bounded` range."""
    for item in dataclasses.fields(config):
        bounds = item.metadata.get("bounds")
        value = getattr(config, item.name)
        if bounds is None or value is None or (names is not None and item.name not in names):
            continue
        problem = _bounds_problem(value, bounds)
        if problem:
            raise InputError(f"{item.name}: {problem}")


def _type_problem(annotation: Any, value: Any) -> str | None:
    """Why a YAML value cannot be the field's type (None when it can, or the type is exotic)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        problems = [_type_problem(arm, value) for arm in typing.get_args(annotation)]
        return None if any(p is None for p in problems) else problems[0]
    if annotation is type(None):
        return None if value is None else "expected nothing (null)"
    if origin in (list, tuple, Sequence):
        if not isinstance(value, list):
            return f"expected a list, got {value!r}; write [{value!r}] for one item"
        args = typing.get_args(annotation)
        for item in value:
            problem = _type_problem(args[0], item) if args else None
            if problem:
                return f"list item {item!r}: {problem}"
        return None
    named = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if annotation not in named:
        return None  # dicts, enums, library types: their own parser judges them
    if annotation is bool:
        ok = isinstance(value, bool)
    elif annotation is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif annotation is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        ok = not isinstance(value, list | dict)
    return None if ok else f"expected {named[annotation]}, got {value!r}"


def check_yaml_config(
    path: str, dataclass_types: Sequence[type], others: Sequence[str] = ()
) -> None:
    """Read a ``--config`` file and check its values' types against the commands' dataclasses,
    so that a typo is one line naming the file and the option rather than a traceback later
    (``others``: keys the caller reads itself)."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else path
        raise InputError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        return
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected option: value lines, got {type(data).__name__}")
    # TRL's parser takes `env:` (environment variables) beside the dataclasses' fields.
    known = {
        item.name for kind in dataclass_types for item in dataclasses.fields(kind) if item.init
    }
    for key in data:
        if key not in known | {"env", *others}:
            close = _closest(str(key), known)
            hint = f"did you mean {close}?" if close else "--help lists the options"
            raise InputError(f"{path}: {key}: not an option of this command ({hint})")
    hints: dict[str, Any] = {}
    for kind in dataclass_types:
        try:
            hints.update(typing.get_type_hints(kind))
        except (NameError, TypeError):  # a library's dataclass with unresolvable hints
            continue
    for key, value in data.items():
        if key in hints and value is not None:
            problem = _type_problem(hints[key], value)
            if problem:
                raise InputError(f"{path}: {key}: {problem}")


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


def unknown_arguments(extras: Sequence[str], flags: Collection[str]) -> str:
    """What is wrong with the arguments a parser left over: each flag it does not know, with the
    nearest of ``flags`` where one is close (a typo), else a value that no flag takes."""
    unknown = [token.split("=", 1)[0] for token in extras if _looks_like_flag(token)]
    if not unknown:
        return (
            f"{extras[0]!r}: a value without its flag (flags are --name value; --help lists them)"
        )
    names = [flag.removeprefix("--") for flag in flags if flag.startswith("--")]
    problems = []
    for flag in dict.fromkeys(unknown):
        close = _closest(flag.lstrip("-"), names)
        hint = f"did you mean --{close}?" if close else "--help lists the flags"
        problems.append(f"{flag}: not a flag of this command ({hint})")
    return "; ".join(problems)


def _closest(name: str, names: Collection[str]) -> str | None:
    """The one of ``names`` that ``name`` is most likely a typo of, if any is close."""
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.75)
    return close[0] if close else None


def _looks_like_flag(token: str) -> bool:
    """A token argparse would read as a flag: a dash, then not a number (``-1`` is a value)."""
    if not token.startswith("-") or token == "-":
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False


@functools.cache
def _command_parser() -> type:
    """TRL's parser (``--config`` YAML, dataclass flags) whose every complaint is an
    :class:`InputError`, one line: argparse's own (a bad value, an ambiguous flag) would print
    the whole usage, and HfArgumentParser's about an unknown flag is a ValueError traceback."""
    from trl import TrlParser

    class CommandParser(TrlParser):
        def error(self, message: str) -> NoReturn:
            raise InputError(message)

        def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
            # Unknown flags are refused here, before a dataclass checks its values: a misspelt
            # flag is the mistake to name, not the value it failed to set.
            namespace, extras = super().parse_known_args(args, namespace)
            if extras:
                raise InputError(unknown_arguments(extras, self._option_string_actions))
            return namespace, extras

    return CommandParser


def parse_config(
    dataclass_types: Sequence[type], args: Sequence[str] | None = None
) -> tuple[Any, ...]:
    """``--config FILE.yaml`` sets defaults; ``--key value`` overrides them (TRL's parser).

    The YAML's keys and types and every field's choices and bounds are checked before any work;
    an unknown flag or a value argparse cannot read is one line naming it (exit 2 under
    :func:`run_main`).
    """
    args = list(args) if args is not None else sys.argv[1:]
    if "--config" in args[:-1]:
        check_yaml_config(args[args.index("--config") + 1], dataclass_types)
    parser = _command_parser()(list(dataclass_types))
    parser.description = (
        "--config FILE.yaml gives values for any of the flags below; flags given on the command "
        "line override it."
    )
    configs = parser.parse_args_and_config(args=args)
    for config in configs:  # configs without a __post_init__ check are bounded here
        if dataclasses.is_dataclass(config):
            check_bounds(config)
    # Every command that writes an --out refuses a job's stage folder (core.job_stages).
    for out in {getattr(config, "out", None) for config in configs} - {None, ""}:
        if isinstance(out, str):
            refuse_job_stage("--out", out)
    return configs


# The operating system's word on a path the user gave (its message names the path).
FILE_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def run_main(
    main: Callable[[Sequence[str] | None], Any], args: Sequence[str] | None = None
) -> None:
    """Run a stage's ``main``: an :class:`InputError` (a RecordError among them), or a file the
    user named that cannot be opened, is one line and exit code 2; any other exception is a bug
    and shows its traceback.

    Anything already written stays on disk: stages write atomically or append per record.
    """
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("httpx", "httpx2", "httpcore", "openai", "bm25s"):  # a line per request otherwise
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from core.parallel import is_main_process

    if not is_main_process():  # under a distributed launch the main process reports, once
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process
        logging.getLogger().setLevel(logging.WARNING)
    try:
        main(args)
    except (InputError, *FILE_ERRORS) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted; finished work is kept and a re-run resumes", file=sys.stderr)
        sys.exit(130)
