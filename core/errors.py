"""The one exception type for a user's input: a flag, a file, a line or a field the command
cannot use. The command line (:func:`core.cli.run_main`) turns it into one line and exit 2;
any other exception is a bug and shows its traceback.

It is a ValueError, so that library callers who catch ValueError (and pydantic validators, which
need one) go on working."""

from __future__ import annotations


class InputError(ValueError):
    """A problem with what the user gave: the message names the flag, or the file, line and
    field, and says what would be accepted."""
