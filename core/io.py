"""JSONL reading with per-line validation, atomic writes and resumable appends.

Bad input is reported as ``file:line: field: problem`` (a :class:`RecordError`), so that a user can
open the file at the right place. Writers either replace a file atomically (temporary file in the
same directory + ``os.replace``) or append one flushed line per record where resuming matters.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from core.errors import InputError
from core.parallel import is_main_process

logger = logging.getLogger(__name__)
RecordT = TypeVar("RecordT", bound=BaseModel)
# Editors on Windows start UTF-8 files with a byte-order mark; every reader takes it as nothing
# (text files are opened with READ_ENCODING), so it never becomes part of a first id or field.
UTF8_BOM = b"\xef\xbb\xbf"
READ_ENCODING = "utf-8-sig"


class RecordError(InputError):
    """A problem with one line of an input file: ``path:line: field: problem``."""

    def __init__(self, path: str | os.PathLike[str], line: int, field: str, problem: str) -> None:
        self.path, self.line, self.field, self.problem = str(path), line, field, problem
        super().__init__(f"{self.path}:{line}: {field}: {problem}")


def cache_dir() -> Path:
    """The machine's cache of converted models, indexes and states: ``$RELEVANCE_GRADER_CACHE``,
    else ``$XDG_CACHE_HOME/relevance-grader``, else ``~/.cache/relevance-grader``."""
    if env := os.environ.get("RELEVANCE_GRADER_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "relevance-grader"


def _field_path(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(record)"


def validation_error(path: str | os.PathLike[str], line: int, err: ValidationError) -> RecordError:
    """The first problem of a pydantic error, as a RecordError (others are summarised)."""
    problems = err.errors()
    first = problems[0]
    message = first["msg"].removeprefix("Value error, ")
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more problem(s) on this line)"
    return RecordError(path, line, _field_path(first["loc"]), message)


def iter_json_lines(
    path: str | os.PathLike[str], *, tolerate_partial_last_line: bool = False
) -> Iterator[tuple[int, dict[str, Any] | RecordError]]:
    """Yield (line number, object) for each non-empty line; a line that is not a JSON object
    yields a :class:`RecordError` in place of the object, so the caller decides whether to stop.

    ``tolerate_partial_last_line`` is for append-only caches: a process killed mid-write leaves a
    last line without its newline, which is dropped instead of failing the whole resume.
    """
    with open(path, "rb") as handle:  # decoded per line, so a bad byte names its line
        for number, data in enumerate(handle, start=1):
            if number == 1:
                data = data.removeprefix(UTF8_BOM)  # a byte-order mark is no part of the data
            try:
                raw = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield (
                    number,
                    RecordError(
                        path, number, "(line)", f"not UTF-8 text (byte {exc.start} of the line)"
                    ),
                )
                continue
            if not raw.strip():
                continue
            parsed = _parse_object(path, number, raw)
            if (
                isinstance(parsed, RecordError)
                and tolerate_partial_last_line
                and not raw.endswith("\n")
            ):
                return
            yield number, parsed


def _parse_object(
    path: str | os.PathLike[str], number: int, raw: str
) -> dict[str, Any] | RecordError:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        return RecordError(path, number, "(line)", f"invalid JSON: {exc.msg} at column {exc.colno}")
    if not isinstance(obj, dict):
        return RecordError(
            path, number, "(line)", f"expected a JSON object, got {type(obj).__name__}"
        )
    return obj


def read_numbered_records(
    path: str | os.PathLike[str],
    record_type: type[RecordT],
    *,
    skipped: list[RecordError] | None = None,
    tolerate_partial_last_line: bool = False,
) -> Iterator[tuple[int, RecordT]]:
    """Validate and yield each record of a JSONL file with its line number.

    Strict by default: the first bad line raises :class:`RecordError`. With a ``skipped`` list, bad
    lines are appended to it and reading goes on (lenient mode).
    """
    for number, obj in iter_json_lines(path, tolerate_partial_last_line=tolerate_partial_last_line):
        if isinstance(obj, RecordError):
            error = obj
        else:
            try:
                yield number, record_type.model_validate(obj)
                continue
            except ValidationError as err:
                error = validation_error(path, number, err)
        if skipped is None:
            raise error
        skipped.append(error)


def read_records(
    path: str | os.PathLike[str],
    record_type: type[RecordT],
    *,
    skipped: list[RecordError] | None = None,
    tolerate_partial_last_line: bool = False,
) -> Iterator[RecordT]:
    """:func:`read_numbered_records` without the line numbers."""
    for _, record in read_numbered_records(
        path,
        record_type,
        skipped=skipped,
        tolerate_partial_last_line=tolerate_partial_last_line,
    ):
        yield record


def _to_dict(record: BaseModel | dict[str, Any]) -> dict[str, Any]:
    if isinstance(record, BaseModel):
        return record.model_dump(mode="json", exclude_none=True)
    return record


def strict(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, ±Infinity) as None: strict JSON parsers reject
    the bare ``NaN``/``Infinity`` that Python's json writes, and no figure is 'worth inf'."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {key: strict(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return [strict(value) for value in obj]
    return obj


def dumps(record: BaseModel | dict[str, Any]) -> str:
    return json.dumps(strict(_to_dict(record)), ensure_ascii=False, allow_nan=False)


def write_jsonl(path: str | os.PathLike[str], records: Iterable[BaseModel | dict[str, Any]]) -> int:
    """Write all records atomically: readers see the old file or the complete new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with atomic_writer(path) as handle:
        for record in records:
            handle.write(dumps(record) + "\n")
            count += 1
    return count


def _read_umask() -> int:
    mask = os.umask(0o022)  # the umask can only be read by setting it
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def make_shareable(fd: int) -> None:
    """Give a file made by ``tempfile`` (mode 0600) the mode an ordinary ``open`` would have
    given it, so other users can read the outputs."""
    os.fchmod(fd, 0o666 & ~_UMASK)


def share_tree(root: str | os.PathLike[str]) -> None:
    """Give ``root`` and every file and folder under it at least the permissions an ordinary
    ``open``/``mkdir`` would have given under the umask.

    Writers that go through a private temporary file leave their output mode 0600: safetensors
    does, so the weights of an export, a trained grader or a checkpoint would be the only files
    another user of a shared folder cannot read. Links are left alone (their targets are not ours).
    """
    root = Path(root)
    for path in (root, *root.rglob("*")):
        if path.is_symlink():
            continue
        mode = path.stat().st_mode & 0o7777
        ordinary = (0o777 if path.is_dir() else 0o666) & ~_UMASK
        if mode | ordinary != mode:
            os.chmod(path, mode | ordinary)


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """``with atomic_writer(path) as f:`` writes to a temporary file renamed over ``path`` on success.
    A ``path`` that is a symbolic link writes its target, and the link stays.

    In the other processes of a distributed launch the writes are discarded: the main process
    writes every output once (``core.parallel``).
    """
    if not is_main_process():
        with open(os.devnull, mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
        return
    path = Path(path)
    if path.is_symlink():  # replace what the link points at; the link stays a link (as folders)
        path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    make_shareable(fd)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def check_replaceable(
    target: str | os.PathLike[str], marker: str, overwrite: bool, what: str
) -> None:
    """Refuse, before any work, to replace a folder this command did not write.

    A folder is ours when it holds ``marker`` (a file written last, on success); any other
    non-empty folder may hold a user's files and is replaced only with ``overwrite``.
    """
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"{target}: exists and is not a folder")
    ours = (target / marker).exists()
    if target.is_dir() and not ours and not overwrite and any(target.iterdir()):
        raise InputError(
            f"{target}: not empty and not a previous {what} (no {marker}); choose another "
            "--out or pass --overwrite true to replace it"
        )


def refuse_overlap(
    out_flag: str,
    out: str | os.PathLike[str],
    inputs: Iterable[tuple[str, str | os.PathLike[str] | None]],
    *,
    writes: Collection[str] | None = None,
) -> None:
    """Refuse, before any work, an output that overlaps an input ((flag, path) pairs) either way.

    - The output is an input or holds one: writing it would replace or delete that input. An
      output folder is replaced as a whole unless ``writes`` names the only files written into
      it; then only inputs at those names count.
    - The output lies inside an input folder: writing it would change that input (an export's
      files, a collection), and replacing it as a copy of that folder would copy into itself.
    """
    target = Path(out).resolve()
    written = [target] if writes is None else [target / name for name in writes]
    for flag, path in inputs:
        if not path:
            continue
        source = Path(path).resolve()
        if any(source == place or place in source.parents for place in written):
            raise InputError(
                f"{out_flag}: {out} would replace --{flag} {path}; write somewhere else"
            )
        if source.is_dir() and (source == target or source in target.parents):
            raise InputError(
                f"{out_flag}: {out} is inside --{flag} {path}, and writing it would change "
                "that input; write somewhere else"
            )


def check_writable_file(flag: str, path: str | os.PathLike[str]) -> None:
    """Refuse, before any work, an output file that cannot be written: a folder, a missing
    parent that cannot be made, or a place without write permission (a link's target is checked)."""
    target = Path(path).resolve() if Path(path).is_symlink() else Path(path)
    if target.is_dir():
        raise IsADirectoryError(f"{flag}: {target} is a folder; give a file path")
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise NotADirectoryError(f"{flag}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK) or (
        target.exists() and not os.access(target, os.W_OK)
    ):
        raise PermissionError(f"{flag}: {target} cannot be written (permission denied)")


@contextlib.contextmanager
def replace_folder(target: str | os.PathLike[str]) -> Iterator[Path]:
    """``with replace_folder(out) as tmp:`` writes into a temporary folder beside ``out``.

    On success the temporary folder takes ``out``'s place by rename (the old one is removed after),
    so readers see the old folder or the new one, never a mix; on failure it is removed and
    ``out`` is left as it was.
    """
    if not is_main_process():  # the main process writes the folder (core.parallel)
        with tempfile.TemporaryDirectory(prefix="discarded-") as scratch:
            yield Path(scratch)
        return
    target = Path(target)
    if target.is_symlink():  # replace what the link points at; the link stays a link
        target = target.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=target.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    share_tree(tmp)  # the folder (mkdtemp: 0700) and files written privately (weights: 0600)
    old = None
    try:
        if target.exists():
            old = target.parent / f".{target.name}.old-{tmp.name.rsplit('-', 1)[-1]}"
            os.replace(target, old)
        os.replace(tmp, target)
    except OSError as exc:
        if old is not None and old.exists() and not target.exists():
            with contextlib.suppress(OSError):
                os.replace(old, target)  # the previous folder back in its place
        raise InputError(
            f"{target}: the finished result could not take this folder's place "
            f"({exc.strerror or exc}); it is complete in {tmp}: move it there yourself, or make "
            f"{target} replaceable and run again"
        ) from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Strict JSON (:func:`strict`), atomically: readers see the old file or the new one."""
    text = json.dumps(strict(obj), ensure_ascii=False, indent=2, allow_nan=False, default=_plain)
    with atomic_writer(path) as handle:
        handle.write(text + "\n")


def _plain(obj: Any) -> Any:
    """numpy scalars as Python numbers (a NaN among them made strict too)."""
    if hasattr(obj, "item"):
        return strict(obj.item())
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


class JsonlAppender:
    """Append-only JSONL, one flushed line per record, for work that must survive a kill.

    On open, a partial last line (a kill mid-write) is cut off, with a warning, so the file stays
    valid JSONL; a complete last record without its newline is kept and the newline added.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync and is_main_process()
        if not is_main_process():  # one writer per file: the main process (core.parallel)
            self._handle = open(os.devnull, "a", encoding="utf-8")  # noqa: SIM115
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _drop_partial_last_line(self.path)
        self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, record: BaseModel | dict[str, Any]) -> None:
        self._handle.write(dumps(record) + "\n")
        self._handle.flush()
        if self.fsync:
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


ValueT = TypeVar("ValueT")


class KeyedCache(Generic[ValueT]):
    """Key -> value, kept in an append-only JSONL: the one cache of paid or slow results (teacher
    labels, labelers, the query writer, the RAG reader).

    Each result is one flushed line written as it arrives (``put``), so a killed run keeps every
    finished result and the next run computes only what is ``missing``. On open, a later line for
    a key wins and a partial last line (a kill mid-write) is dropped; any other bad line stops
    with ``file:line``. Lines are ``{key_field: key, ...record}``; ``decode`` turns a line into the
    value callers get (the line itself by default). The key is the caller's: a digest of
    everything that changes the result.

    One process writes a cache at a time: the first ``put`` (or the open, with ``exclusive``,
    for a command that should be refused before it pays for anything) takes the lock of
    :func:`hold_exclusive`, and another process's is refused in one line naming the file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        decode: Callable[[dict[str, Any]], ValueT] | None = None,
        *,
        key_field: str = "key",
        fsync: bool = False,
        exclusive: bool = False,
    ) -> None:
        self.path = Path(path)
        self._release: Callable[[], None] | None = None
        if exclusive:
            self._lock()
        self.key_field = key_field
        self.decode = decode or (lambda line: line)  # type: ignore[assignment,return-value]
        self.fsync = fsync
        self.values: dict[str, ValueT] = {}
        self._appender: JsonlAppender | None = None
        try:
            self._read()
        except BaseException:
            self.close()  # a refused cache keeps no lock
            raise

    def _read(self) -> None:
        if not self.path.exists():
            return
        for _, line in iter_json_lines(self.path, tolerate_partial_last_line=True):
            if isinstance(line, RecordError):
                raise line
            if line.get(self.key_field):
                self.values[str(line[self.key_field])] = self.decode(line)

    def __contains__(self, key: object) -> bool:
        return key in self.values

    def __getitem__(self, key: str) -> ValueT:
        return self.values[key]

    def __len__(self) -> int:
        return len(self.values)

    def get(self, key: str) -> ValueT | None:
        return self.values.get(key)

    def missing(self, keys: Iterable[str]) -> list[str]:
        """The keys without a cached value, each once, in their first order."""
        return list(dict.fromkeys(key for key in keys if key not in self.values))

    def put(self, key: str, record: BaseModel | dict[str, Any]) -> ValueT:
        """Append ``record`` under ``key`` (flushed before this returns) and return its value."""
        if self._appender is None:
            self._lock()
            self._appender = JsonlAppender(self.path, fsync=self.fsync)
        fields = (
            record.model_dump(mode="json", exclude_none=True)
            if isinstance(record, BaseModel)
            else record
        )
        line = {**fields, self.key_field: key}
        self._appender.write(line)
        self.values[key] = self.decode(line)
        return self.values[key]

    def _lock(self) -> None:
        # Only the main process writes (core.parallel); the others append to nothing.
        if self._release is None and is_main_process():
            self._release = hold_exclusive(self.path)

    def close(self) -> None:
        if self._appender is not None:
            self._appender.close()
            self._appender = None
        if self._release is not None:
            self._release()
            self._release = None

    def __enter__(self) -> KeyedCache[ValueT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop_partial_last_line(path: Path) -> None:
    """Make an append-only file end in a newline before appending to it.

    A last line that is a complete JSON object without its newline (a hand edit, a merge, an
    editor that strips it) is a record: it is kept and the newline added. Only a line that is
    not a JSON object (a write cut short by a kill) is cut off, with a warning naming the file
    and the line, so a paid label or a judgment is never deleted silently."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return
        start = _last_line_start(handle, size)
        handle.seek(start)
        last = handle.read(size - start)
        if _is_json_object(last.removeprefix(UTF8_BOM) if start == 0 else last):
            handle.seek(size)
            handle.write(b"\n")  # a complete record: only its newline was missing
            return
        handle.seek(0)
        number = handle.read(start).count(b"\n") + 1
        handle.truncate(start)
    logger.warning(
        "%s:%d: the last line is not a complete JSON record (a write cut short); its %d "
        "byte(s) are dropped",
        path,
        number,
        size - start,
    )


def _last_line_start(handle: IO[bytes], size: int) -> int:
    """The offset just after the last newline of a file that does not end in one."""
    position = size
    while position > 0:
        start = max(0, position - 4096)
        handle.seek(start)
        index = handle.read(position - start).rfind(b"\n")
        if index >= 0:
            return start + index + 1
        position = start
    return 0


def _is_json_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data.decode("utf-8")), dict)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False


class CacheLocked(InputError):
    """Another process writes the same append-only file."""


# Locks this process holds: resolved path -> [lock file descriptor, holders]. flock conflicts
# between two descriptors of one process too, and one process may open a cache twice.
_HELD: dict[Path, list[int]] = {}
_HELD_GUARD = threading.Lock()


def lock_file(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def hold_exclusive(path: str | os.PathLike[str]) -> Callable[[], None]:
    """Take the exclusive lock of ``path`` (``fcntl.flock`` on ``PATH.lock`` beside it) for this
    process, or raise :class:`CacheLocked` in one line naming the file; returns the release.

    Two processes appending to one cache would both pay for the same results and interleave
    their lines; the second is refused before it does any work."""
    target = Path(path).resolve()
    with _HELD_GUARD:
        if target in _HELD:
            _HELD[target][1] += 1
            return functools.partial(_release, target)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_file(target), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise CacheLocked(
                f"{path}: another process is writing this file (it holds {lock_file(target)}); "
                "wait for it to finish or give another cache"
            ) from None
        _HELD[target] = [fd, 1]
    return functools.partial(_release, target)


def _release(target: Path) -> None:
    with _HELD_GUARD:
        held = _HELD.get(target)
        if held is None:
            return
        held[1] -= 1
        if held[1] == 0:
            del _HELD[target]
            os.close(held[0])  # closing the descriptor releases the flock


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks (once per process while the file's
    size, modification time and inode stay the same: the main job fingerprints a 540 MB export
    for each stage that reads it)."""
    path = os.path.abspath(path)
    status = os.stat(path)
    return _sha256_file(path, status.st_size, status.st_mtime_ns, status.st_ino)


@functools.lru_cache(maxsize=1024)
def _sha256_file(path: str, size: int, mtime_ns: int, inode: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_path(path: str | os.PathLike[str], exclude: Collection[str] = ()) -> str:
    """Hex SHA-256 of a file, or of the files directly inside a folder (names and bytes, sorted),
    leaving out the files named in ``exclude``.

    Sub-folders are left out: a model folder's weights and configs count, its training
    checkpoints do not.
    """
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.iterdir() if p.is_file() and p.name not in exclude):
        digest.update(file.name.encode() + b"\0" + sha256_file(file).encode())
    return digest.hexdigest()


def fingerprint(*parts: str) -> str:
    """A short, stable digest of strings (cache keys, stage fingerprints)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table (cells as given, ``|`` escaped), ending in a newline."""

    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"

    lines = [line(header), "|" + "---|" * len(header)]
    lines.extend(line(row) for row in rows)
    return "\n".join(lines) + "\n"
