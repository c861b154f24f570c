"""core.cli.run_main: errors as one line and exit code 2."""

from __future__ import annotations

import os
import re
import sys

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


def every_command() -> list[list[str]]:
    """Each command of the ``relevance-grader`` table as it is typed (``history gate``)."""
    from core.commands import COMMANDS

    return [name.split() for name in COMMANDS]


@pytest.mark.parametrize("command", every_command(), ids=" ".join)
def test_a_misspelt_flag_is_one_line_and_exit_2_in_every_command(command, capsys, monkeypatch):
    """`--margn 0.02` in a CI gate ended in HfArgumentParser's ValueError traceback, exit 1; the
    docs promise one line naming the flag and exit 2. Each command runs as the console script
    runs it, in this process."""
    from core.commands import main

    monkeypatch.setattr(sys, "argv", ["relevance-grader"])  # the command sets it; put it back
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--margn", "0.02"])
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert re.fullmatch(
        r"error: --margn: not a flag of this command "
        r"\((did you mean --margin\?|--help lists the flags)\)",
        line,
    )


def test_a_misspelt_flag_is_named_with_the_flag_it_is_close_to(capsys, monkeypatch):
    from core.commands import main

    monkeypatch.setattr(sys, "argv", ["relevance-grader"])  # the command sets it; put it back
    with pytest.raises(SystemExit) as exit_info:
        main(["history", "gate", "--store", "s.sqlite", "--margn=0.02", "--candidat", "v2"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "error: --margn: not a flag of this command (did you mean --margin?)"
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--k", "ten"], "error: argument --k: invalid int value: 'ten'"),
        (["--labeler"], "error: argument --labeler: expected one argument"),
        (["dense.trec"], "error: 'dense.trec': a value without its flag (flags are --name value; --help lists them)"),
    ],
)  # fmt: skip
def test_what_argparse_cannot_read_is_one_line_without_the_usage(capsys, args, line):
    """argparse printed its whole usage before the error; the docs promise one line, exit 2."""
    from eval.search.command import main

    with pytest.raises(SystemExit) as exit_info:
        run_main(main, args)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == line


def test_an_unknown_key_in_a_config_file_is_one_line_naming_the_file(tmp_path, capsys):
    """TRL's parser raised "Unknown arguments from config file" as a traceback."""
    from eval.history.gate import main

    config = tmp_path / "gate.yaml"
    config.write_text("store: s.sqlite\nmargn: 0.02\n")
    with pytest.raises(SystemExit) as exit_info:
        run_main(main, ["--config", str(config)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {config}: margn: not an option of this command (did you mean margin?)"
    )
