"""data.core.cli.run_main: errors as one line and exit code 2."""

from __future__ import annotations

import pytest

from data.core.cli import run_main


def test_a_bare_missing_key_is_named_with_where_it_was_looked_up(capsys):
    def main(args):
        return {"2": "x"}["1"]

    with pytest.raises(SystemExit) as exit_info:
        run_main(main, [])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: unknown key '1' (looked up in test_cli.py:") and "main" in error


def test_a_key_error_that_is_a_sentence_is_printed_as_it_is(capsys):
    def main(args):
        raise KeyError("query 'q9' of the run is not in queries.jsonl")

    with pytest.raises(SystemExit):
        run_main(main, [])
    assert capsys.readouterr().err.strip() == "error: query 'q9' of the run is not in queries.jsonl"
