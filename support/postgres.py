"""A throwaway PostgreSQL server for the history store's tests and benchmark: ``initdb`` in a
temporary folder, started on a free port of 127.0.0.1 with trust authentication, one database
created, removed again at the end.

    with throwaway_postgres() as url:   # postgresql://postgres@127.0.0.1:PORT/history
        ...

PostgreSQL refuses to run as root: as root, its commands run as the ``postgres`` OS user
(``runuser``), in a folder that user owns. The binaries are found in /usr/lib/postgresql/*/bin
(Debian's layout, newest first) or on the PATH.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

OS_USER = "postgres"
DATABASE = "history"


def postgres_bin() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``; None where PostgreSQL is not installed."""

    def major(path: str) -> int:
        version = Path(path).parents[1].name
        return int(version) if version.isdigit() else 0

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=major, reverse=True)
    if found:
        return Path(found[0]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _as_server_user(command: list[str]) -> list[str]:
    """``command`` as the user the server may run as (root may not run PostgreSQL)."""
    return ["runuser", "-u", OS_USER, "--", *command] if os.geteuid() == 0 else command


def _run(command: list[str], folder: Path) -> None:
    result = subprocess.run(
        _as_server_user(command), cwd=folder, capture_output=True, text=True, timeout=120
    )
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {result.stderr.strip()[-2000:]}")


def new_database(url: str, name: str) -> str:
    """A new empty database on the server of ``url``; its URL (a test's own store)."""
    import psycopg

    server = url.rsplit("/", 1)[0]
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server}/{name}"


@contextmanager
def throwaway_postgres(fsync: bool = False) -> Iterator[str]:
    """A running server with an empty database; its URL. ``fsync`` off (the default) is for
    tests: nothing has to survive a crash of the machine."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise RuntimeError("no PostgreSQL binaries (initdb) in /usr/lib/postgresql/*/bin or PATH")
    folder = Path(tempfile.mkdtemp(prefix="pg-"))  # short: a socket path has ~100 bytes
    if os.geteuid() == 0:
        user = pwd.getpwnam(OS_USER)
        os.chown(folder, user.pw_uid, user.pw_gid)
    data, port = folder / "data", free_port()
    options = (
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync={'on' if fsync else 'off'}"
    )
    try:
        _run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                OS_USER,
                "-E",
                "UTF8",
                "--no-sync",
            ],
            folder,
        )
        _run(
            [
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(folder / "log"),
                "-w",
                "start",
            ],
            folder,
        )
        try:
            _run(
                [
                    str(bin_dir / "createdb"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-U",
                    OS_USER,
                    DATABASE,
                ],
                folder,
            )
            yield f"postgresql://{OS_USER}@127.0.0.1:{port}/{DATABASE}"
        finally:
            _run([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
