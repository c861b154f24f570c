"""Run a ``relevance-grader`` command in the test's own process.

A test that only checks a command's exit code, stdout and stderr need not start
``python -m core.commands`` in a subprocess: each such process pays the torch/transformers import
(~5 s) and ranx's numba warm-up (~8 s) again, where in this process they are paid once per test
process, however many commands its tests run. The console script itself, as a process, is tested
once in tests/test_layout.py::test_the_console_script_runs_as_a_process.

In this process a command's logging goes to pytest's log capture (``caplog``), not to stderr;
what it prints to ``sys.stderr`` (its one-line errors, tqdm's bars) is captured here.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from core.commands import PROGRAM
from core.commands import main as console


def run_command(
    args: Sequence[str], *, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``relevance-grader ARGS`` run through :func:`core.commands.main`: its exit code (a
    ``SystemExit``'s, else 0), stdout and stderr, as :func:`subprocess.run` with
    ``capture_output=True, text=True`` would return them. Any other exception is a bug and
    propagates with its traceback. ``env``, when given, is the whole of ``os.environ`` for the
    call; ``os.environ`` and ``sys.argv`` (which the command overwrites) are restored after."""
    args = list(args)
    return _captured(lambda: console(args), [PROGRAM, *args], env)


def run_module(
    module: str, args: Sequence[str], *, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS`` (a benchmark, which is not a command) run in this process: the
    module's ``main`` (a package's is in its ``__main__``) with ``sys.argv`` as that command line
    would set it; captured and restored as :func:`run_command`."""
    imported = importlib.import_module(module)
    if not hasattr(imported, "main"):
        imported = importlib.import_module(f"{module}.__main__")
    return _captured(imported.main, [f"python -m {module}", *args], env)


def _captured(
    call: Callable[[], Any], argv: list[str], env: Mapping[str, str] | None
) -> subprocess.CompletedProcess[str]:
    out, err = io.StringIO(), io.StringIO()
    saved_argv = sys.argv
    saved_env = dict(os.environ) if env is not None else None
    try:
        sys.argv = list(argv)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                call()
                code = 0
            except SystemExit as exc:
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:  # sys.exit("message"), as the interpreter does: the message, exit 1
                    print(exc.code, file=sys.stderr)
                    code = 1
    finally:
        sys.argv = saved_argv
        if saved_env is not None:
            os.environ.clear()
            os.environ.update(saved_env)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())
