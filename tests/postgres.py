"""A session-wide throwaway PostgreSQL server for the tests (support.postgres starts it): a
test module imports :func:`postgres_server` and asks for :func:`postgres_url`, a database of its
own on that server. Skipped, with the reason, only where no PostgreSQL binaries exist at all."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from support.postgres import new_database, postgres_bin, throwaway_postgres

_numbers = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    if postgres_bin() is None:
        pytest.skip("no PostgreSQL binaries (initdb) in /usr/lib/postgresql/*/bin or on the PATH")
    with throwaway_postgres() as url:
        yield url


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A new, empty database on the session's server."""
    return new_database(postgres_server, f"test_{next(_numbers)}")
