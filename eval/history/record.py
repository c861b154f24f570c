"""An ``eval.search`` output folder as one evaluation of the history store: its primary run
(``--run``; the ``--compare`` runs are not recorded), the per-query values of every metric under
the labeler and, where people judged the query, under their judgments, each metric's estimate,
and fingerprints of what it was measured on (labeler, corpus, queries, human judgments, run).

The folder's ``provenance.json`` says where the corpus, queries, labeler and run were: they are
read from there (relative paths from the folder's recorded working folder), so they must still
be in place when an existing folder is recorded.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.errors import InputError
from core.io import sha256_file, sha256_path
from core.provenance import PROVENANCE_FILE, ProvenanceRecord
from eval.history.names import check_recordable
from eval.history.store import Estimate, EvaluationRecord, HistoryStore, open_store
from judgments.coverage import MIN_JUDGED_QUERIES
from judgments.ppi import classical_mean
from measure.metrics.ppi_record import EstimateRecord
from measure.metrics.results import HumanPerQuery, PerQueryResults, RunResults, SearchMetrics

METRIC_RANGE = (0.0, 1.0)  # every metric eval.search reports is a share or a mean of shares


def default_version() -> str:
    """A version tag for an evaluation given none: the current UTC time, to the second."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def t_estimate(metric: str, values: list[float], alpha: float) -> Estimate:
    """The labeler's mean over the queries with its (1 - alpha) interval, as judgments.ppi makes
    a classical one: a Student's t within the metric's range [0, 1] (Wilson's at the bounds,
    Hoeffding's when every value is alike), never of zero width. One query says nothing of the
    spread: its interval is the whole range (method "none")."""
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return Estimate(metric, "none", mean, mean, 0.0, 1.0, len(values))
    interval = classical_mean(values, alpha, "t", METRIC_RANGE)
    return Estimate(metric, "t", mean, interval.estimate, interval.low, interval.high, len(values))


def ppi_estimate(metric: str, entry: EstimateRecord, queries: int) -> Estimate:
    """metrics.json's PPI++ record of one metric as an :class:`Estimate`."""
    ppi = entry.ppi
    return Estimate(
        metric, "ppi++", entry.labeler_mean, ppi.estimate, ppi.low, ppi.high, queries, ppi.n
    )


def _path(config: Mapping[str, Any], key: str, cwd: Path) -> Path | None:
    value = config.get(key)
    return None if not value else (cwd / value)


def _existing(path: Path | None, what: str, folder: Path) -> Path:
    if path is None or not path.exists():
        raise InputError(
            f"{folder}: its {PROVENANCE_FILE} names {what} {path}, which is not there; record "
            "the folder where the files it was evaluated on are"
        )
    return path


def corpus_fingerprint(corpus: Path) -> str:
    """SHA-256 of the corpus file's bytes (a BEIR folder's corpus.jsonl), streamed."""
    return sha256_file(corpus / "corpus.jsonl" if corpus.is_dir() else corpus)


def queries_fingerprint(queries: Mapping[str, str], qids: list[str]) -> str:
    """SHA-256 of the evaluated queries' ids and texts, in id order."""
    digest = hashlib.sha256()
    for qid in sorted(qids):
        digest.update(f"{qid}\0{queries.get(qid, '')}\n".encode())
    return digest.hexdigest()


def labeler_fingerprint(spec: str, cwd: Path) -> str:
    """SHA-256 of what the labeler is: its file or the files of its folder (an export, a judge's
    config, a qrels file); of the spec itself where it names no file."""
    path = cwd / spec.partition(":")[2]
    if spec.partition(":")[2] and path.exists():
        return sha256_path(path)
    return hashlib.sha256(spec.encode("utf-8")).hexdigest()


def _queries_file(config: Mapping[str, Any], corpus: Path, cwd: Path) -> Path | None:
    given = _path(config, "queries", cwd)
    return given if given else (corpus / "queries.jsonl" if corpus.is_dir() else None)


def _human(folder: Path, run_name: str) -> dict[str, dict[str, float]] | None:
    """The run's human per-query values (human_per_query.json); None for a folder without
    them (no --human, or written by a release before the file)."""
    path = folder / HumanPerQuery.FILE
    return HumanPerQuery.read(path).values.get(run_name) if path.exists() else None


def _labeler_values(results: RunResults) -> dict[str, dict[str, float]]:
    values: dict[str, dict[str, float]] = {}
    for qid, result in results.items():
        for metric, value in result.metrics.items():
            if value is not None:  # an undefined value is no value
                values.setdefault(metric, {})[qid] = float(value)
    return values


def _hit_labels(results: RunResults) -> dict[str, dict[str, float]]:
    """{qid: {doc: label}} of the run's labelled hits: the labeler's grade where it grades, else
    its verdict (1 relevant, 0 not)."""
    return {
        qid: {hit.id: float(hit.gain_grade) for hit in result.hits}
        for qid, result in results.items()
    }


def build_record(
    folder: str | Path, system: str | None, version: str | None, note: str | None
) -> EvaluationRecord:
    """The evaluation in ``folder`` (an eval.search output) as a record of its primary run."""
    from data.beir import read_queries

    folder = Path(folder)
    for name in (SearchMetrics.FILE, PerQueryResults.FILE, PROVENANCE_FILE):
        if not (folder / name).exists():
            raise InputError(f"{folder}: no {name}; give a relevance-grader search output folder")
    metrics = SearchMetrics.read(folder / SearchMetrics.FILE)
    provenance = ProvenanceRecord.read(folder / PROVENANCE_FILE)
    config, cwd = provenance.config, Path(provenance.cwd)
    run_name = next(iter(metrics.mean))  # the --run: eval.search writes it first
    per_query = PerQueryResults.read(folder / PerQueryResults.FILE).runs
    if run_name not in per_query:
        raise InputError(f"{folder / PerQueryResults.FILE}: no run {run_name!r} (metrics.json's)")
    check_recordable(system, version, run_name, per_query[run_name])
    labeler_values = _labeler_values(per_query[run_name])
    run = _existing(_path(config, "run", cwd), "run", folder)
    corpus = _existing(_path(config, "corpus", cwd), "corpus", folder)
    queries = read_queries(_existing(_queries_file(config, corpus, cwd), "queries", folder))
    human = _path(config, "human", cwd)
    report = folder / "report.html"
    return EvaluationRecord(
        system=system or run_name,
        version=version or default_version(),
        note=note,
        k=metrics.k,
        labeler=metrics.labeler,
        labeler_fingerprint=labeler_fingerprint(metrics.labeler, cwd),
        corpus_fingerprint=corpus_fingerprint(corpus),
        queries_fingerprint=queries_fingerprint(queries, list(per_query[run_name])),
        human_fingerprint=sha256_path(human) if human and human.exists() else None,
        run_fingerprint=sha256_file(run),
        run_name=run_name,
        report_path=str(report.resolve()) if report.exists() else None,
        search_metrics=(folder / SearchMetrics.FILE).read_text(encoding="utf-8"),
        run_text=run.read_text(encoding="utf-8"),
        labeler_values=labeler_values,
        human_values=_human(folder, run_name),
        hit_labels=_hit_labels(per_query[run_name]),
        estimates=_estimates(metrics, run_name, labeler_values, config.get("alpha", 0.05)),
    )


def _estimates(
    metrics: SearchMetrics,
    run_name: str,
    labeler_values: dict[str, dict[str, float]],
    alpha: float,
) -> list[Estimate]:
    """Each metric's PPI++ estimate where metrics.json has one from enough judged queries
    (judgments.coverage.MIN_JUDGED_QUERIES: a file written before the minimum may hold fewer),
    else the labeler's t interval."""
    ppi = metrics.ppi.runs.get(run_name, {}) if metrics.ppi else {}
    ppi = {m: entry for m, entry in ppi.items() if entry.ppi.n >= MIN_JUDGED_QUERIES}
    return [
        ppi_estimate(metric, ppi[metric], len(values))
        if metric in ppi
        else t_estimate(metric, list(values.values()), alpha)
        for metric, values in labeler_values.items()
    ]


def record_folder(
    store: str | HistoryStore,
    folder: str | Path,
    system: str | None = None,
    version: str | None = None,
    note: str | None = None,
) -> str:
    """Record ``folder``'s evaluation in ``store``; the line that says so."""
    record = build_record(folder, system, version, note)
    opened = open_store(store) if isinstance(store, str) else store
    try:
        evaluation_id = opened.record(record)
    finally:
        if isinstance(store, str):
            opened.close()
    where = opened.name  # a file as given, a URL without its password
    return f"recorded evaluation id:{evaluation_id} ({record.system}@{record.version}) in {where}"
