"""core.cli.run_main: errors as one line and exit code 2."""

from __future__ import annotations

import os

import pytest

from core.cli import run_main
from core.errors import InputError
from core.io import RecordError


@pytest.mark.parametrize(
    "bug",
    [
        lambda: {"2": "x"}["1"],
        lambda: int("x"),
        lambda: [][0],
        lambda: os.strerror(-1) and os.lseek(-1, 0, 0),
    ],
)
def test_a_bug_is_not_an_input_error_and_shows_its_traceback(bug):
    """A KeyError, a ValueError or an OSError that no check raised is a bug: run_main lets it
    through (the traceback, exit 1), where it used to print one line like a user's mistake."""

    def main(args):
        bug()

    with pytest.raises((KeyError, ValueError, IndexError, OSError)):
        run_main(main, [])


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (InputError("--k: expected >= 1, got 0"), "error: --k: expected >= 1, got 0"),
        (RecordError("j.jsonl", 3, "label", "expected 0 or 1"), "error: j.jsonl:3: label: expected 0 or 1"),
        (FileNotFoundError(2, "No such file or directory", "runs/x.trec"), "error: [Errno 2] No such file or directory: 'runs/x.trec'"),
    ],
)  # fmt: skip
def test_an_input_error_is_one_line_and_exit_2(capsys, error, line):
    def main(args):
        raise error

    with pytest.raises(SystemExit) as exit_info:
        run_main(main, [])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == line
