"""How a recorded evaluation is named. A version is always a version: ``SYSTEM@VERSION`` (or a
version of the system a command is given) is that version's latest evaluation, whatever the
version looks like (a build number, an all-digit short SHA). One evaluation by its id is
``id:N``: the store refuses any system or version that begins with ``id:``, a system holding
``@`` (``my@sys`` + ``v2`` would print as ``my`` + ``sys@v2`` does) and a version named ``last``
(the gate's keyword), so that no name can mean two evaluations. ``#N`` is not the syntax: a
shell reads ``#`` at the start of a word as a comment."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from core.errors import InputError

ID_PREFIX = "id:"
LAST = "last"  # history gate's --baseline keyword: the previous version
# The store's columns of names (system, version, run name, query id): PostgreSQL refuses a
# longer value, so a longer name is refused before any work.
NAME_LENGTH = 200


def id_ref(evaluation_id: int) -> str:
    """How an evaluation's id is written (and read back by :func:`parse_id`)."""
    return f"{ID_PREFIX}{evaluation_id}"


def parse_id(ref: str) -> int | None:
    """N of ``id:N``; None for a name that is not an id; one line for a malformed id."""
    if not ref.startswith(ID_PREFIX):
        return None
    number = ref[len(ID_PREFIX) :]
    if not (number.isascii() and number.isdigit()):
        raise InputError(f"evaluation {ref!r}: an id is written id: and a number, e.g. id:12")
    return int(number)


def shown(value: str, width: int = 40) -> str:
    """A name as a message quotes it: a long one cut short."""
    return repr(value if len(value) <= width else value[:width] + "…")


def name_problem(value: str, what: str) -> str | None:
    """Why ``value`` cannot be a ``what`` ("system", "version", "run name", "query id") that is
    named back as itself; None when it can."""
    if not value:
        return "is empty"
    if value != value.strip():
        return "begins or ends with white space"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in value):
        return "holds a control character"
    if len(value) > NAME_LENGTH:
        return f"is {len(value)} characters long; the store keeps at most {NAME_LENGTH}"
    if what in ("system", "version") and value.startswith(ID_PREFIX):
        return f"begins with {ID_PREFIX!r}, which names an evaluation by its id"
    if what == "system" and "@" in value:
        return "holds '@', which separates a system from its version (SYSTEM@VERSION)"
    if what == "version" and value == LAST:
        return f"is {LAST!r}, which history gate's --baseline reads as the previous version"
    return None


def check_name(value: str, what: str, source: str) -> None:
    """One line naming ``source`` (the flag or file it came from) when ``value`` cannot be
    recorded as a ``what``."""
    if problem := name_problem(value, what):
        raise InputError(f"{source}: {what} {shown(value)} {problem}; give another")


def check_recordable(
    system: str | None,
    version: str | None,
    run_name: str | None = None,
    qids: Iterable[str] = (),
    *,
    system_source: str = "--system",
    version_source: str = "--version",
    run_source: str = "the run's name",
) -> None:
    """Every name an evaluation would be recorded under, before any work: ``system`` and
    ``version`` as given (None: the default, a time stamp for a version), the run's name (the
    default system) and its query ids."""
    if system is not None:
        check_name(system, "system", system_source)
    elif run_name is not None:
        check_name(run_name, "system", f"{system_source} (default: {run_source})")
    if version is not None:
        check_name(version, "version", version_source)
    if run_name is not None:
        check_name(run_name, "run name", run_source)
    for qid in qids:
        if len(qid) > NAME_LENGTH:
            raise InputError(
                f"query {shown(qid)}: its id is {len(qid)} characters long; the store keeps at "
                f"most {NAME_LENGTH}"
            )
