"""The judging session on disk: what is judged (``session.json``), every judgment
(``judgments.jsonl``, append-only) and the qrels written from them (``qrels.txt``).

- ``session.json`` (:class:`JudgingSession`, with a format version) records the corpus (path
  and SHA-256), the runs, k, the seed, the pooled hits and the draw they came from, and how the
  session is judged (the assessors, the labeler's labels, when they are revealed, whether query
  terms are highlighted); a folder started on another corpus, or on other runs, queries or k, is
  refused before the server starts. A session of an earlier release (no format version) reads
  as version 0.
- ``judgments.jsonl`` is only ever appended to, each line flushed and fsynced before the page is
  given the next hit, so a killed server or a closed browser loses nothing. Its lines:

  - a judgment: a :class:`core.records.Judgment` (query, document text, 0-3 grade and its
    label) plus ``assessor``, ``time`` (UTC, ISO 8601), ``seconds`` spent on the hit and ``ref``
    (the line's id);
  - a verdict without a grade: the same fields with ``"verdict": "cannot_tell"`` (the assessor
    cannot tell; the hit is done but has no grade) or ``"verdict": "later"`` (judge it later: it
    comes back after the query's other hits); never read as a grade;
  - ``{"undo": REF, ...}``: withdraws the line whose ``ref`` is REF (or ``line N``);
  - ``{"reveal": "session" | QID, ...}``: the labeler's verdicts were shown to the assessor.

  :func:`read_judgments` applies the undo lines and keeps only the graded judgments, so a withdrawn
  grade or a verdict without one never reaches ``eval.search`` or ``relevance-grader recalibrate``.
  A file edited by hand that gives one assessor's hit twice is read as every judgments reader reads
  it: the last record wins, and different verdicts are counted in a warning
  (:func:`core.records.keep_last`).
- ``qrels.txt`` (TREC) is rewritten atomically after every change. Where several assessors
  judged a hit it holds the adjudicator's grade if there is one, else the lower median of their
  grades (for two, the lower grade).
- ``server.lock`` names the address and PID of the server judging into the folder while it runs:
  a second server on the same folder is refused (:func:`hold_session`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import string
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, ValidationError

from core.artifacts import Artifact
from core.errors import InputError
from core.io import (
    JsonlAppender,
    RecordError,
    iter_json_lines,
    sha256_file,
    validation_error,
)
from core.records import JudgeInfo, Judgment, keep_last, label_from_grade
from data.beir import Qrels, write_trec_qrels

SESSION_FILE = "session.json"
JUDGMENTS_FILE = "judgments.jsonl"
QRELS_FILE = "qrels.txt"
LOCK_FILE = "server.lock"
SECRET_FILE = ".secret"
SECRET_HEX_DIGITS = 64  # 32 random bytes: the assessors' tokens are HMACs keyed by it
VERDICTS = ("cannot_tell", "later")  # answers that are not a grade
Hit = tuple[str, str]
logger = logging.getLogger(__name__)
FORMAT = "relevance-grader annotate 1"
HUMAN = JudgeInfo(
    model="human", prompt="relevance-grader annotate", backend="relevance-grader annotate"
)


class CorpusFile(BaseModel):
    """The corpus a session judges: a folder holding other judgments is refused by its hash."""

    model_config = ConfigDict(extra="forbid")
    path: str
    sha256: str


class JudgingSession(Artifact):
    """``session.json``: what a judging session judges (the corpus, the runs, k, the seed, the
    pooled hits and the draw they came from) and how (the assessors, the labeler's labels, the
    reveal mode, the highlighting). The settings are None until chosen: a restart with ``--out``
    alone keeps what was recorded, and a session with judgments keeps its reveal mode and
    highlighting."""

    FILE = SESSION_FILE
    FORMAT_VERSION = 1
    # What the file is: another JSON file given as --out is "not a judging session".
    format: str = FORMAT
    corpus: CorpusFile
    runs: dict[str, str]  # name -> TREC run
    k: int
    seed: int
    pool: list[tuple[str, list[str]]]  # (query, its pooled documents), in pooling order
    draw: dict[str, Any] | None = (
        None  # the relevance-grader ppi draw's design (judgments.design's shape)
    )
    sample: str | None = None  # the draw file, or "--queries"
    assessors: list[str] | None = None
    labels: str | None = None  # eval.search output holding the labeler's labels
    adjudicate: bool | None = None
    reveal: str | None = None
    highlight: bool | None = None

    @classmethod
    def from_data(cls, data: Any, where: str) -> JudgingSession:
        """As :meth:`Artifact.from_data`, with the messages sessions always had: another file is
        "not a judging session", a missing field is "damaged"."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise InputError(f"{where} is not a judging session (format {found!r})")
        required = (name for name, info in cls.model_fields.items() if info.is_required())
        missing = [name for name in required if name not in data]
        if missing:
            raise InputError(f"{where} is damaged: it has no {missing[0]!r} field")
        return super().from_data(data, where)

    @classmethod
    def of_folder(cls, folder: Path) -> JudgingSession | None:
        """The session of a folder (None when it has none); a damaged ``session.json`` is one
        line naming the file and what is wrong with it."""
        path = folder / SESSION_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            where = f" at line {exc.lineno} column {exc.colno}" if hasattr(exc, "lineno") else ""
            raise InputError(
                f"out: {path} is damaged (not JSON{where}); restore it from a copy, or give "
                "another --out"
            ) from None
        return cls.from_data(data, f"out: {path}")

    def dump(self) -> dict[str, Any]:
        return {"format": self.format} | super().dump()  # the marker even at its default


def new_session(
    corpus: Path, runs: Mapping[str, str], k: int, seed: int, pool: Mapping[str, list[str]]
) -> JudgingSession:
    return JudgingSession(
        corpus=CorpusFile(path=str(corpus), sha256=sha256_file(corpus)),
        runs={name: str(path) for name, path in runs.items()},
        k=k,
        seed=seed,
        pool=list(pool.items()),
    )


def check_out(folder: Path, session: JudgingSession) -> None:
    """Refuse an output folder that holds another corpus's, or another sample's, judgments."""
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"out: {folder} is a file; give a folder for the judgments")
    old = JudgingSession.of_folder(folder)
    if old is None:
        for name in (JUDGMENTS_FILE, QRELS_FILE):
            if (folder / name).exists():
                raise FileExistsError(
                    f"out: {folder / name} is not from a judging session (no {SESSION_FILE}); "
                    "give another --out"
                )
        return
    if old.corpus.sha256 != session.corpus.sha256:
        raise InputError(
            f"out: {folder} holds judgments of another corpus ({old.corpus.path}, "
            f"SHA-256 {old.corpus.sha256[:12]}, not {session.corpus.sha256[:12]}); "
            "give another --out"
        )
    if (old.pool, old.k, old.seed) != (session.pool, session.k, session.seed):
        raise InputError(
            f"out: {folder} was started on other runs, queries or k (its runs: "
            f"{', '.join(old.runs.values())}); give the same inputs or another --out"
        )


def fold(records: Iterable[Judgment], value: str = "grade") -> dict[tuple[str, str], int]:
    """One value (``grade`` or ``label``) per (query, document) over the assessors: an
    adjudication wins; where every hit has the same number of assessors, the lower median of
    their values. Where only some hits are judged by several assessors, a median of two beside
    single grades would mix two estimands (the lower of two grades is systematically lower), so
    each hit keeps one assessor's value: the primary assessor's (the one who judged most), else
    its first; the other grades measure agreement only, and a warning says so."""
    values: dict[tuple[str, str], list[tuple[str, int]]] = {}
    final: dict[tuple[str, str], int] = {}
    for record in records:
        item = getattr(record, value)
        if item is None:
            raise InputError(f"judgments: {record.qid}/{record.doc_id} has no {value}")
        values.setdefault((record.qid, record.doc_id), []).append((assessor_of(record), int(item)))
        if (record.model_extra or {}).get("adjudication"):
            final[(record.qid, record.doc_id)] = int(item)
    counts = {len({who for who, _ in items}) for pair, items in values.items() if pair not in final}
    if len(counts) <= 1:
        for pair, items in values.items():
            ordered = sorted(item for _, item in items)
            final.setdefault(pair, ordered[(len(ordered) - 1) // 2])
        return final
    primary = _primary_assessor(values)
    logger.warning(
        "judgments: only some hits are judged by several assessors; each keeps one assessor's "
        "%s (%s's where given, else the first), the others count towards agreement only",
        value,
        primary,
    )
    for pair, items in values.items():
        mine = [item for who, item in items if who == primary]
        final.setdefault(pair, (mine or [items[0][1]])[-1])
    return final


def _primary_assessor(values: Mapping[tuple[str, str], list[tuple[str, int]]]) -> str:
    """The assessor who judged the most hits (ties: by name)."""
    judged: dict[str, int] = {}
    for items in values.values():
        for who in {who for who, _ in items}:
            judged[who] = judged.get(who, 0) + 1
    return min(judged, key=lambda who: (-judged[who], who))


def as_qrels(grades: Mapping[tuple[str, str], int]) -> Qrels:
    qrels: Qrels = {}
    for (qid, doc_id), grade in grades.items():
        qrels.setdefault(qid, {})[doc_id] = grade
    return qrels


def assessor_of(record: Judgment) -> str:
    return str((record.model_extra or {}).get("assessor", "unknown"))


@dataclass
class Entry:
    """One line of a judgments file: a judgment, a verdict without a grade, an undo, a reveal."""

    line: int
    ref: str  # what an undo names: the line's ``ref``, or ``line N`` for a line without one
    kind: str  # "grade", "cannot_tell", "later", "undo", "reveal"
    record: dict[str, Any]
    judgment: Judgment | None = None  # for a grade

    @property
    def assessor(self) -> str:
        return str(self.record.get("assessor", "unknown"))

    @property
    def hit(self) -> Hit:
        return (str(self.record.get("qid")), str(self.record.get("doc_id")))


def read_entries(path: Path) -> list[Entry]:
    """Every line of a judgments file as an :class:`Entry`; a bad line, a cut last one too, is a
    RecordError naming the file and line (the session's appender repairs a cut last line, with a
    warning, before the store reads it)."""
    if not path.exists():
        return []
    entries = []
    for number, obj in iter_json_lines(path):
        if isinstance(obj, RecordError):
            raise obj
        entries.append(_entry(path, number, obj))
    return entries


def _entry(path: Path, number: int, obj: dict[str, Any]) -> Entry:
    ref = str(obj.get("ref") or f"line {number}")
    for kind in ("undo", "reveal"):
        if kind in obj:
            return Entry(number, ref, kind, obj)
    verdict = obj.get("verdict")
    if verdict is not None:
        if verdict not in VERDICTS:
            problem = f"{verdict!r} is not one of {', '.join(VERDICTS)}"
            raise RecordError(path, number, "verdict", problem)
        if obj.get("grade") is not None or obj.get("label") is not None:
            problem = f"a {verdict} record carries no grade or label"
            raise RecordError(path, number, "verdict", problem)
        return Entry(number, ref, verdict, obj)
    try:
        return Entry(number, ref, "grade", obj, Judgment.model_validate(obj))
    except ValidationError as err:
        raise validation_error(path, number, err) from None


def standing(entries: Iterable[Entry]) -> list[Entry]:
    """The judgments and verdicts an undo line has not withdrawn, in file order."""
    entries = list(entries)
    withdrawn = {str(e.record["undo"]) for e in entries if e.kind == "undo"}
    return [e for e in entries if e.kind not in ("undo", "reveal") and e.ref not in withdrawn]


class JudgmentStore:
    """The judgments of one session folder, safe to call from the server's worker threads.
    Nothing is ever rewritten: a judgment, a verdict, an undo and a reveal are each one appended
    line, and the state is the lines read in order."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / JUDGMENTS_FILE
        self._lock = threading.RLock()  # add() and undo() read the entries under it too
        # A kill mid-append leaves a partial last line: the appender cuts it off on open (and a
        # complete last record without its newline gets the newline).
        self._appender = JsonlAppender(self.path, fsync=True)
        self.entries = read_entries(self.path)
        self._write_qrels()

    @property
    def records(self) -> list[Judgment]:
        """Every assessor's standing graded judgments, in file order."""
        with self._lock:
            return [e.judgment for e in standing(self.entries) if e.judgment is not None]

    def answered(self, assessor: str) -> dict[Hit, Entry]:
        """The assessor's hits with a standing grade or "cannot tell": they are done."""
        with self._lock:
            return {
                e.hit: e
                for e in standing(self.entries)
                if e.assessor == assessor and e.kind in ("grade", "cannot_tell")
            }

    def judged(self, assessor: str) -> dict[Hit, Judgment]:
        """The assessor's hits with a standing grade."""
        answered = self.answered(assessor).items()
        return {hit: e.judgment for hit, e in answered if e.judgment is not None}

    def deferred(self, assessor: str) -> set[Hit]:
        """Hits the assessor asked to judge later and has not answered since."""
        with self._lock:
            later = {
                e.hit
                for e in standing(self.entries)
                if e.assessor == assessor and e.kind == "later"
            }
            return later - set(self.answered(assessor))

    def revealed(self, assessor: str) -> set[str]:
        """What the labeler's verdicts were shown of: "session" or query ids."""
        with self._lock:
            return {
                str(e.record["reveal"])
                for e in self.entries
                if e.kind == "reveal" and e.assessor == assessor
            }

    def add(self, record: dict[str, Any]) -> Judgment | None:
        """Append one judgment, durably; None when the assessor already answered the hit."""
        judgment = Judgment.model_validate(
            record | {"judge": HUMAN.model_dump(), "time": _now(), "label": None}
        )
        entry = self._append(record | judgment.model_dump(mode="json", exclude_none=True))
        return None if entry is None else entry.judgment

    def add_verdict(self, record: dict[str, Any], verdict: str) -> Entry | None:
        """Append "cannot tell" or "judge later" for a hit, durably, never as a grade; None when
        the assessor already answered the hit."""
        if verdict not in VERDICTS:
            raise InputError(f"verdict: {verdict!r} is not one of {', '.join(VERDICTS)}")
        fields = {k: v for k, v in record.items() if k not in ("grade", "label")}
        return self._append(fields | {"verdict": verdict, "time": _now()})

    def _append(self, record: dict[str, Any]) -> Entry | None:
        line = {"ref": secrets.token_hex(6)} | record
        with self._lock:
            entry = _entry(self.path, len(self.entries) + 1, line)
            if entry.hit in self.answered(entry.assessor):
                return None
            self._appender.write(line)  # flushed and fsynced
            self.entries.append(entry)
            self._write_qrels()
        return entry

    def latest(self, assessor: str) -> Entry | None:
        """The assessor's latest standing judgment or "cannot tell": what an undo withdraws."""
        with self._lock:
            mine = [
                e
                for e in standing(self.entries)
                if e.assessor == assessor and e.kind in ("grade", "cannot_tell")
            ]
            return mine[-1] if mine else None

    def undo(self, assessor: str) -> Entry | None:
        """Withdraw the assessor's latest judgment or "cannot tell" by appending an undo line
        (None when there is none); the file keeps every line it had."""
        with self._lock:
            withdrawn = self.latest(assessor)
            if withdrawn is None:
                return None
            qid, doc_id = withdrawn.hit
            line = {"undo": withdrawn.ref, "assessor": assessor, "qid": qid, "doc_id": doc_id}
            self._write_line(line | {"time": _now()}, "undo")
            self._write_qrels()
        return withdrawn

    def reveal(self, assessor: str, scope: str) -> None:
        """Record that the labeler's verdicts of ``scope`` ("session" or a query) were shown."""
        with self._lock:
            if scope in self.revealed(assessor):
                return
            self._write_line({"reveal": scope, "assessor": assessor, "time": _now()}, "reveal")

    def _write_line(self, line: dict[str, Any], kind: str) -> None:
        self._appender.write(line)  # flushed and fsynced
        self.entries.append(Entry(len(self.entries) + 1, "", kind, line))

    def grades(self) -> dict[Hit, int]:
        with self._lock:
            return fold(self.records)

    def _write_qrels(self) -> None:
        write_trec_qrels(self.folder / QRELS_FILE, as_qrels(self.grades()))

    def close(self) -> None:
        self._appender.close()


def session_secret(folder: Path) -> bytes:
    """The session's secret (``.secret``, readable by its owner only), made on first use: the
    assessors' tokens are derived from it, so their links stay the same across restarts.

    It is written whole or not at all; one too short to keep the tokens secret (empty, cut
    short, edited) is refused in one line saying how to recover, never used."""
    path = folder / SECRET_FILE
    if not path.exists():
        _write_secret(path)
    secret = path.read_text(encoding="utf-8").strip()
    if len(secret) < SECRET_HEX_DIGITS or not all(c in string.hexdigits for c in secret):
        what = (
            "empty"
            if not secret
            else f"{len(secret)} characters, not {SECRET_HEX_DIGITS} hex digits"
        )
        raise InputError(
            f"{path}: a weak secret ({what}), from which anyone could compute every assessor's "
            "link; delete it and start the server again: it makes a new one and prints new "
            "links (the old ones stop working; no judgment is lost)"
        )
    return secret.encode()


def _write_secret(path: Path) -> None:
    """A new secret at ``path``: written and synced in a temporary file only its owner can read
    (created exclusively), then renamed into place, so a crash leaves no partial secret."""
    fd, temporary = tempfile.mkstemp(prefix=f"{path.name}.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(secrets.token_hex(SECRET_HEX_DIGITS // 2) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)  # one server per folder (hold_session): nothing to race
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a power cut
    finally:
        os.close(directory)


def hold_session(folder: Path, url: str) -> Callable[[], None]:
    """Mark ``folder`` as judged by this server (``server.lock``: its address and PID, under an
    exclusive ``flock``) and return the release; a second server is refused in one line naming
    the first. A lock left by a server that died holds no flock and is taken over."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = _lock_holder(path)
        raise InputError(
            f"out: {folder} is being judged by the server at {holder.get('url', '?')} (PID "
            f"{holder.get('pid', '?')}, {path}); use its links, or stop it first"
        ) from None
    stale = _lock_holder(path)
    if stale.get("pid"):
        logger.warning(
            "%s: taking over the lock of a server that stopped (PID %s)", path, stale["pid"]
        )
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps({"url": url, "pid": os.getpid(), "started": _now()}).encode())
    os.fsync(fd)

    def release() -> None:
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)

    return release


class LockHolder(TypedDict, total=False):
    """The judging server a session's lock file names (empty where it is unreadable)."""

    url: str
    pid: int
    started: str


def _lock_holder(path: Path) -> LockHolder:
    try:
        holder = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def write_session(folder: Path, session: JudgingSession) -> None:
    session.write(folder / SESSION_FILE)


def session_folder(path: str | Path) -> Path | None:
    """The judging session a human-judgment path belongs to: the folder itself, or the folder of
    its ``judgments.jsonl`` / ``qrels.txt``."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    if path.is_dir() or path.name in (JUDGMENTS_FILE, QRELS_FILE):
        return folder if (folder / SESSION_FILE).is_file() else None
    return None


def judgments_file(path: str | Path) -> Path:
    """The judgments JSONL of a session folder (or of its qrels.txt), else ``path`` itself."""
    path = Path(path)
    if path.is_dir() or (path.name == QRELS_FILE and session_folder(path)):
        return (path if path.is_dir() else path.parent) / JUDGMENTS_FILE
    return path


def one_per_hit(records: list[Judgment]) -> list[Judgment]:
    """One record per (query, document): a hit judged once keeps its record; a hit several
    assessors judged gets the first record with the grade (or, without grades, the label)
    folded as the qrels fold it."""
    groups: dict[tuple[str, str], list[Judgment]] = {}
    for record in records:
        groups.setdefault((record.qid, record.doc_id), []).append(record)
    out = []
    for group in groups.values():
        if len(group) == 1:
            out.append(group[0])
        elif all(r.grade is not None for r in group):
            grade = next(iter(fold(group).values()))
            out.append(
                group[0].model_copy(update={"grade": grade, "label": label_from_grade(grade)})
            )
        else:
            out.append(
                group[0].model_copy(update={"label": next(iter(fold(group, "label").values()))})
            )
    return out


def read_judgments(path: str | Path, refuse_errors: bool = True) -> list[Judgment]:
    """The graded judgments of a judging session (folder) or of any judgments JSONL: undo lines
    applied (a withdrawn grade is gone), verdicts without a grade ("cannot tell", "later") and
    reveal lines left out, records with an error refused (``refuse_errors`` False: left out),
    and one assessor's (or a plain file's) pair given twice keeps its last record, under the
    policy of every judgments reader (:func:`core.records.keep_last`: conflicting verdicts
    are counted in a warning). Several assessors' records of a pair are all kept: :func:`fold`
    folds them."""
    file = judgments_file(path)
    if not file.is_file():
        raise FileNotFoundError(f"judgments: {file} does not exist")
    entries = []
    for entry in standing(read_entries(file)):
        record = entry.judgment
        if record is None:
            continue
        if record.error is not None and refuse_errors:
            raise InputError(f"{file}: the pair {record.qid}/{record.doc_id} has no label")
        if record.error is None:
            entries.append((_judge_key(record), record, f"line {entry.line}"))
    kept = keep_last(entries, str(file), verdict=lambda r: (r.grade, r.label))
    return list(kept.items.values())


def _judge_key(record: Judgment) -> tuple[str, ...]:
    """(qid, doc_id), with the assessor and an adjudication where the record names them: two
    records of one key are one judge's verdict given twice."""
    extra = record.model_extra or {}
    key = (record.qid, record.doc_id)
    if "assessor" in extra:
        key += (str(extra["assessor"]),)
    return key + (("adjudication",) if extra.get("adjudication") else ())
