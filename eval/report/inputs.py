"""Reading an evaluation folder for the report, once: an ``eval.search`` output folder, a main-job
run folder or a ``relevance-grader zoo`` output folder becomes one typed object (:class:`Inputs`,
:class:`ZooInputs`) that every rendering reads: the page (eval.report.build, eval.report.page),
the main job's report.md (eval.report.markdown) and the README's block (eval.report.readme). The
files the evaluation names outside the folder (corpus, human judgments, the exported grader) are
found here once too (:class:`RecordedFiles`). Only ``metrics.json`` is required (a zoo folder's
``leaderboard.json``); every other file adds its section when it exists, so a folder from an older
version, or one a job is still writing, gives the page it can."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from core.artifacts import Artifact
from core.errors import InputError
from core.job_stages import JobConfig, read_stage_record
from core.provenance import ProvenanceRecord
from core.records import label_from_grade
from data.beir import Qrels
from data.build import DatasetManifest, read_manifest
from measure.classification.summaries import JobSummary, StudySummary
from measure.metrics.ranking_agreement import RankingAgreement
from measure.metrics.results import PerQueryResults, RunResults, SearchMetrics
from measure.zoo.record import Leaderboard

SEARCH_STAGE = "metric-pipeline"  # the main job's eval.search stage (stages/NAME.json, .yaml)
A = TypeVar("A", bound=Artifact)
CV_DIR = "cv"  # the main job's cross-validation: study.json, fold-K/MODEL/predictions.jsonl
ZOO_DIR = "zoo"  # the main job's labeler leaderboard: leaderboard.json (relevance-grader zoo)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: (file): invalid JSON: {exc.msg}") from None


def read_optional(path: Path) -> Any:
    return read_json(path) if path.is_file() else None


def read_per_query(path: Path) -> dict[str, RunResults] | None:
    """per_query.json's runs; None for a folder without it."""
    return PerQueryResults.read(path).runs if path.is_file() else None


def read_artifact(path: Path, kind: type[A]) -> A | None:
    """A typed file of the folder, None when absent (a job that has not written it yet)."""
    return kind.read(path) if path.is_file() else None


@dataclass(frozen=True)
class Recorded:
    """A file the evaluation names (``given``: as recorded, or as the report's option gives it) and
    where it is here (``found``; None: not here)."""

    given: str | None = None
    found: Path | None = None


@dataclass(frozen=True)
class RecordedFiles:
    """The files outside the folder that the evaluation read, found here when the folder is read:
    the sections read these instead of each resolving its own path."""

    corpus: Recorded = Recorded()
    queries: Recorded = Recorded()
    human: Recorded = Recorded()  # eval.search's --human qrels
    human_pairs: Recorded = Recorded()  # its --human_pairs judgments
    export: Recorded = Recorded()  # the exported grader of a grader:PATH labeler
    qrels: Recorded = Recorded()  # the main job's --qrels: every human judgment


@dataclass
class ZooInputs:
    """A ``relevance-grader zoo`` output folder: its leaderboard, and no evaluation of runs."""

    root: Path
    leaderboard: Leaderboard
    leaderboard_source: str  # the file it was read from
    kind: str = "zoo"


@dataclass
class Inputs:
    """The files of one evaluation folder, read once."""

    kind: str  # "search" or "main job"
    root: Path
    search_dir: Path
    metrics: SearchMetrics
    per_query: dict[str, RunResults] | None  # per_query.json's runs
    search_config: RecordedSearch | None  # the settings eval.search ran with, where recorded
    search_command: str | None
    evaluated: ProvenanceRecord | None  # eval.search's provenance.json
    base: Path  # the folder that the recorded relative paths are relative to
    summary: JobSummary | None = None  # the main job's summary.json
    study: StudySummary | None = None  # its cross-validation (cv/study.json)
    manifest: DatasetManifest | None = None  # its folds (dataset/manifest.json)
    job_config: JobConfig | None = None  # the main job's config.json
    agreement: RankingAgreement | None = None
    leaderboard: Leaderboard | None = None  # the main job's labeler leaderboard
    leaderboard_source: str = ""  # the file it was read from
    stage_commands: dict[str, str] = field(default_factory=dict)
    files: RecordedFiles = field(default_factory=RecordedFiles)

    def recorded(self, path: str | None) -> Recorded:
        """``path`` and where it is here (:meth:`resolve`)."""
        return Recorded(path, self.resolve(path))

    def resolve(self, path: str | None) -> Path | None:
        """A recorded path as it exists here: as given, else relative to the folder the command
        ran in; None when neither exists."""
        if not path:
            return None
        for candidate in (Path(path), self.base / path):
            if candidate.exists():
                return candidate
        return None


def locate(folder: Path) -> tuple[str, Path]:
    """("search" | "main job", the eval.search folder inside ``folder``), or ("zoo", ``folder``)
    for a ``relevance-grader zoo`` output folder (leaderboard.json, no evaluation of runs)."""
    if (folder / "metrics.json").is_file():
        return "search", folder
    if (folder / "search" / "metrics.json").is_file():
        return "main job", folder / "search"
    if (folder / Leaderboard.FILE).is_file():
        return "zoo", folder
    raise FileNotFoundError(
        f"input: {folder} holds neither a relevance-grader search output (metrics.json) nor a "
        f"main-job run folder (search/metrics.json) nor a relevance-grader zoo output "
        f"({Leaderboard.FILE})"
    )


def job_leaderboard(root: Path, summary: JobSummary | None) -> tuple[Leaderboard, str] | None:
    """The main job's labeler leaderboard and the file it comes from: zoo/leaderboard.json (the
    stage's own file, there as soon as the stage ends), else the copy in summary.json."""
    path = root / ZOO_DIR / Leaderboard.FILE
    if path.is_file():
        return Leaderboard.read(path), str(path)
    if summary is not None and summary.leaderboard is not None:
        return summary.leaderboard, f"{root / JobSummary.FILE} (its leaderboard)"
    return None


class RecordedSearch(BaseModel):
    """The settings eval.search ran with, as its provenance.json (or the main job's stage file)
    records them: the ones the page reads, typed, and every recorded key (``recorded``) for the
    provenance section. They are the search command's flags (``eval.search.settings``), read here
    as data because the command builds on the report (it writes its page); the defaults are the
    flags' (a test holds them together)."""

    corpus: str = ""
    queries: str | None = None
    human: str | None = None
    human_pairs: str | None = None
    human_scale: str = "format"
    alpha: float = 0.05
    recorded: dict[str, Any] = Field(default_factory=dict)

    @property
    def declared_human_scale(self) -> str | None:
        """--human_scale where it declares one (None: the file's format says)."""
        return None if self.human_scale == "format" else self.human_scale


def _search_config(recorded: Any) -> RecordedSearch | None:
    """eval.search's settings from a recorded config (its provenance.json's, or the config file
    the main job ran its stage with); None when there is none or it does not fit (the page then
    leaves out what needs them)."""
    if not isinstance(recorded, dict):
        return None
    try:
        return RecordedSearch.model_validate({**recorded, "recorded": recorded})
    except ValidationError:
        return None


def _stage_config(root: Path, stage: str) -> Any:
    """The settings the main job ran a stage with (``stages/NAME.yaml``), as recorded."""
    import yaml

    path = root / "stages" / f"{stage}.yaml"
    if not path.is_file():
        return None
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None


def _stage_commands(root: Path) -> dict[str, str]:
    """The main job's stage commands (``stages/NAME.json``), as ``relevance-grader NAME ARGS``
    (the job runs them as ``python -m core.commands NAME ARGS``)."""
    commands = {}
    # In the order they ran: each stage record is written when its stage finishes.
    for path in sorted((root / "stages").glob("*.json"), key=lambda p: p.stat().st_mtime):
        record = read_stage_record(path)
        command = record.command if record else []
        if "core.commands" in command:
            start = command.index("core.commands") + 1
            commands[path.stem] = shlex.join(["relevance-grader", *command[start:]])
    return commands


def _job_base(root: Path, job_config: JobConfig | None) -> Path:
    """The folder the main job ran in: ``run_dir`` is recorded relative to it."""
    run_dir = Path((job_config.run_dir if job_config else None) or root.name)
    resolved = root.resolve()
    if not run_dir.is_absolute() and resolved.parts[-len(run_dir.parts) :] == run_dir.parts:
        return Path(*resolved.parts[: -len(run_dir.parts)])
    return Path.cwd()


def checked_metrics(path: Path) -> SearchMetrics:
    """eval.search's metrics.json, its shape checked: a file of another shape is one error naming
    the file and the field, not a traceback from deep in the report."""
    return SearchMetrics.read(path)


def read_inputs(folder: str | Path) -> Inputs | ZooInputs:
    """Every file of an evaluation folder that the report renders, read once (a zoo folder: its
    leaderboard), and the files the evaluation names found here."""
    root = Path(folder)
    kind, search_dir = locate(root)
    if kind == "zoo":
        path = root / Leaderboard.FILE
        return ZooInputs(root, Leaderboard.read(path), str(path))
    evaluated = read_artifact(search_dir / ProvenanceRecord.FILE, ProvenanceRecord)
    inputs = Inputs(
        kind=kind,
        root=root,
        search_dir=search_dir,
        metrics=checked_metrics(search_dir / "metrics.json"),
        per_query=read_per_query(search_dir / PerQueryResults.FILE),
        search_config=None,
        search_command=evaluated.command if evaluated else None,
        evaluated=evaluated,
        base=Path(evaluated.cwd) if evaluated else Path.cwd(),
    )
    if kind == "main job":
        inputs.summary = read_artifact(root / JobSummary.FILE, JobSummary)
        inputs.study = read_artifact(root / CV_DIR / StudySummary.FILE, StudySummary)
        inputs.manifest = read_manifest(root / "dataset")
        inputs.job_config = read_artifact(root / JobConfig.FILE, JobConfig)
        path = root / "agreement" / RankingAgreement.FILE
        inputs.agreement = RankingAgreement.read(path) if path.is_file() else None
        inputs.stage_commands = _stage_commands(root)
        found = job_leaderboard(root, inputs.summary)
        if found:
            inputs.leaderboard, inputs.leaderboard_source = found
        if evaluated is None:
            inputs.base = _job_base(root, inputs.job_config)
            inputs.search_command = inputs.stage_commands.get(SEARCH_STAGE)
    recorded: Any = evaluated.config if evaluated else None
    if recorded is None and kind == "main job":
        recorded = _stage_config(root, SEARCH_STAGE)
    inputs.search_config = _search_config(recorded)
    inputs.files = _recorded_files(inputs)
    return inputs


def _recorded_files(inputs: Inputs) -> RecordedFiles:
    """The files the evaluation names, each found here once."""
    config = inputs.search_config or RecordedSearch()
    labeler = inputs.metrics.labeler or ""
    export = labeler.removeprefix("grader:") if labeler.startswith("grader:") else None
    return RecordedFiles(
        corpus=inputs.recorded(config.corpus),
        queries=inputs.recorded(config.queries),
        human=inputs.recorded(config.human),
        human_pairs=inputs.recorded(config.human_pairs),
        export=inputs.recorded(export),
        qrels=inputs.recorded(inputs.job_config.qrels if inputs.job_config else None),
    )


def job_summary(inputs: Inputs | ZooInputs) -> JobSummary:
    """A main job's summary.json as read with the rest of its folder: what report.md and the
    README's block render."""
    summary = inputs.summary if isinstance(inputs, Inputs) else None
    if summary is None:
        raise FileNotFoundError(
            f"{inputs.root / JobSummary.FILE}: no summary (run `relevance-grader pipeline` first)"
        )
    return summary


@dataclass
class HumanLabels:
    """People's grades of hits: a qrels file of whole queries and/or judgments of sampled hits."""

    source: str
    qrels_path: Path | None
    qrels: Qrels  # judged queries: every document people judged in them
    pairs: dict[tuple[str, str], tuple[int | None, bool]]  # sampled hits

    def judged_queries(self) -> set[str]:
        return set(self.qrels)

    def of(self, qid: str, doc_id: str) -> tuple[int | None, bool | None]:
        """(grade, relevant) of a hit; (None, None) when no person judged it (the human metrics
        count such a hit of a judged query as not relevant, as trec_eval does)."""
        if (qid, doc_id) in self.pairs:
            return self.pairs[(qid, doc_id)]
        if qid in self.qrels:
            grade = self.qrels[qid].get(doc_id)
            if grade is None:
                return None, None
            return grade, bool(label_from_grade(grade))
        return None, None


def read_human_pairs(path: Path) -> dict[tuple[str, str], tuple[int | None, bool]]:
    """{(qid, doc_id): (grade or None, relevant)} as eval.search reads ``--human_pairs``: a
    judgments JSONL or a relevance-grader annotate session folder, several assessors folded into
    one."""
    from judgments.store import fold, read_judgments

    records = read_judgments(path)
    labels = fold(records, "label")
    grades = fold([record for record in records if record.grade is not None])
    return {pair: (grades.get(pair), bool(label)) for pair, label in labels.items()}
