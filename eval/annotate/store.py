"""The judging session on disk: what is judged (``session.json``), every judgment
(``judgments.jsonl``) and the qrels written from them (``qrels.txt``).

- ``session.json`` records the corpus (path and SHA-256), the runs, k, the seed, the pooled hits
  in the order shown and the draw they came from; a folder started on another corpus, or on other
  runs, queries or k, is refused before the server starts.
- ``judgments.jsonl`` holds one judgment record per (assessor, query, document), each a
  :class:`data.core.records.Judgment` (query, document text, 0-3 grade and its label) plus
  ``assessor``, ``time`` (UTC, ISO 8601) and ``seconds`` spent on the hit. A judgment is appended,
  flushed and fsynced before the page is given the next hit, so a killed server or a closed
  browser loses nothing. **Undo** removes the assessor's latest judgment by rewriting the file
  atomically (a temporary file renamed over it), so the file never holds a withdrawn grade or a
  hit twice, and every reader (``eval.search``, ``eval.recalibrate``, ``data.validate``) reads it
  as it is. A file edited by hand that gives one assessor's hit twice is read as every judgments
  reader reads it: the last record wins, and different verdicts are counted in a warning
  (:func:`data.core.records.keep_last`).
- ``qrels.txt`` (TREC) is rewritten atomically after every change. Where several assessors
  judged a hit it holds the adjudicator's grade if there is one, else the lower median of their
  grades (for two, the lower grade).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from data.beir import Qrels, write_trec_qrels
from data.core.io import (
    JsonlAppender,
    read_numbered_records,
    read_records,
    sha256_file,
    write_json,
    write_jsonl,
)
from data.core.records import JudgeInfo, Judgment, keep_last, label_from_grade

SESSION_FILE = "session.json"
JUDGMENTS_FILE = "judgments.jsonl"
QRELS_FILE = "qrels.txt"
FORMAT = "relevance-grader annotate 1"
HUMAN = JudgeInfo(model="human", prompt="eval.annotate", backend="eval.annotate")


def new_session(
    corpus: Path, runs: Mapping[str, str], k: int, seed: int, pool: Mapping[str, list[str]]
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "corpus": {"path": str(corpus), "sha256": sha256_file(corpus)},
        "runs": {name: str(path) for name, path in runs.items()},
        "k": k,
        "seed": seed,
        "pool": [[qid, docs] for qid, docs in pool.items()],
    }


def read_session(folder: Path) -> dict[str, Any] | None:
    path = folder / SESSION_FILE
    if not path.is_file():
        return None
    session = json.loads(path.read_text(encoding="utf-8"))
    if session.get("format") != FORMAT:
        raise ValueError(f"out: {path} is not a judging session (format {session.get('format')!r})")
    return session


def check_out(folder: Path, session: dict[str, Any]) -> None:
    """Refuse an output folder that holds another corpus's, or another sample's, judgments."""
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"out: {folder} is a file; give a folder for the judgments")
    old = read_session(folder)
    if old is None:
        for name in (JUDGMENTS_FILE, QRELS_FILE):
            if (folder / name).exists():
                raise FileExistsError(
                    f"out: {folder / name} is not from a judging session (no {SESSION_FILE}); "
                    "give another --out"
                )
        return
    if old["corpus"]["sha256"] != session["corpus"]["sha256"]:
        raise ValueError(
            f"out: {folder} holds judgments of another corpus ({old['corpus']['path']}, "
            f"SHA-256 {old['corpus']['sha256'][:12]}, not {session['corpus']['sha256'][:12]}); "
            "give another --out"
        )
    if [old["pool"], old["k"], old["seed"]] != [session["pool"], session["k"], session["seed"]]:
        raise ValueError(
            f"out: {folder} was started on other runs, queries or k (its runs: "
            f"{', '.join(old['runs'].values())}); give the same inputs or another --out"
        )


def fold(records: Iterable[Judgment], value: str = "grade") -> dict[tuple[str, str], int]:
    """One value (``grade`` or ``label``) per (query, document) over the assessors: an
    adjudication wins, otherwise the lower median of the assessors' values."""
    values: dict[tuple[str, str], list[int]] = {}
    final: dict[tuple[str, str], int] = {}
    for record in records:
        item = getattr(record, value)
        if item is None:
            raise ValueError(f"judgments: {record.qid}/{record.doc_id} has no {value}")
        values.setdefault((record.qid, record.doc_id), []).append(int(item))
        if (record.model_extra or {}).get("adjudication"):
            final[(record.qid, record.doc_id)] = int(item)
    for pair, items in values.items():
        final.setdefault(pair, sorted(items)[(len(items) - 1) // 2])
    return final


def as_qrels(grades: Mapping[tuple[str, str], int]) -> Qrels:
    qrels: Qrels = {}
    for (qid, doc_id), grade in grades.items():
        qrels.setdefault(qid, {})[doc_id] = grade
    return qrels


def assessor_of(record: Judgment) -> str:
    return str((record.model_extra or {}).get("assessor", "unknown"))


class JudgmentStore:
    """The judgments of one session folder, safe to call from the server's worker threads."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / JUDGMENTS_FILE
        self._lock = threading.RLock()  # add() and undo() read the records under it too
        # A kill mid-append leaves a partial last line: the appender cuts it off on open.
        self._appender = JsonlAppender(self.path, fsync=True)
        self.records = list(read_records(self.path, Judgment))
        self._write_qrels()

    def judged(self, assessor: str) -> dict[tuple[str, str], Judgment]:
        with self._lock:
            return {(r.qid, r.doc_id): r for r in self.records if assessor_of(r) == assessor}

    def add(self, record: dict[str, Any]) -> Judgment | None:
        """Append one judgment, durably; None when the assessor already judged the hit."""
        judgment = Judgment.model_validate(
            record | {"judge": HUMAN.model_dump(), "time": _now(), "label": None}
        )
        with self._lock:
            if (judgment.qid, judgment.doc_id) in self.judged(assessor_of(judgment)):
                return None
            self._appender.write(judgment)  # flushed and fsynced
            self.records.append(judgment)
            self._write_qrels()
        return judgment

    def undo(self, assessor: str) -> Judgment | None:
        """Withdraw the assessor's latest judgment (None when there is none)."""
        with self._lock:
            mine = [i for i, r in enumerate(self.records) if assessor_of(r) == assessor]
            if not mine:
                return None
            withdrawn = self.records.pop(mine[-1])
            self._appender.close()
            write_jsonl(self.path, self.records)  # atomic: the old file or the new one
            self._appender = JsonlAppender(self.path, fsync=True)
            self._write_qrels()
        return withdrawn

    def grades(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return fold(self.records)

    def _write_qrels(self) -> None:
        write_trec_qrels(self.folder / QRELS_FILE, as_qrels(self.grades()))

    def close(self) -> None:
        self._appender.close()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def write_session(folder: Path, session: dict[str, Any]) -> None:
    write_json(folder / SESSION_FILE, session)


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
    """The judgments of a judging session (folder) or of any judgments JSONL: records with an
    error are refused (``refuse_errors`` False: left out), and one assessor's (or a plain file's)
    pair given twice keeps its last record, under the policy of every judgments reader
    (:func:`data.core.records.keep_last`: conflicting verdicts are counted in a warning). Several
    assessors' records of a pair are all kept: :func:`fold` folds them."""
    file = judgments_file(path)
    entries = []
    for number, record in read_numbered_records(file, Judgment):
        if record.error is not None and refuse_errors:
            raise ValueError(f"{file}: the pair {record.qid}/{record.doc_id} has no label")
        if record.error is None:
            entries.append((_judge_key(record), record, f"line {number}"))
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
