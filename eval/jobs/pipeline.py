"""The main job: the whole pipeline on one config, each stage through its public command.

    relevance-grader pipeline --config eval/configs/main.yaml
    relevance-grader pipeline --config eval/configs/main.yaml --run_dir runs/main-2 --max_pairs_per_query 60

Each stage is its public command run in a subprocess (its memory and its log its own) with
``--config run_dir/stages/NAME.yaml``: the config objects the command parses, built here. A
fingerprint of those settings and of the files the stage reads is written beside its output
(``run_dir/stages/NAME.json``); a stage is skipped only when its output exists and that
fingerprint matches, so an interrupted run resumes and a changed config, student, dataset or
upstream output re-runs what depends on it. Each stage's output goes to ``run_dir/logs/``.

Stages:
 1. retrieval runs (``relevance-grader candidates``): BM25 and dense top-k of every judged query;
 2. teacher labels for the judged pool (``relevance-grader label``; default teacher: the qrels);
 3. cross-validation folds by query, stratified (``relevance-grader build --folds``);
 4. the embedded LLM judge on a sample of the pairs the folds test (``relevance-grader label``);
 5. cross-validation (``relevance-grader study``): per fold, the student grader fitted on the
    other folds' queries (default: SmolLM2-135M's zero-shot query likelihood, only its scale and bias fitted),
    threshold and temperature fitted on validation queries inside them, and evaluated on the fold beside the BM25 and
    cosine baselines (its document embeddings read from the dense index's) and the judge;
    pooled over the folds with the paired per-query difference to each baseline and its 95%
    interval (the report's verdict). The frozen bottom's states are computed once per pair for
    every fold;
 6. export of fold 0's grader with its round-trip check (``relevance-grader export``), and a
    grader rerank of the dense run (``relevance-grader rerank``);
 7. the metric pipeline over the runs with grader labels (``relevance-grader search``);
 8. the labeler leaderboard (``relevance-grader zoo``): a compact zoo of 14 retrieval systems
    (eval/configs/zoo/compact.yaml: retriever variants, and fusions and reranks of the top 10s
    the metric pipeline's labels already cover, so the grader scores few new pairs), and
    the grader (cross-fitted: each query labelled by the fold's grader that held it out), the
    calibrated cosine and BM25 score, a constant and a random labeler, each by how well its
    ranking of the systems matches the human one (τ with bootstrap intervals, PPI++ rows,
    self-preference).
Everything lands in ``run_dir``: report.md, summary.json, metrics, plots and the exported grader.

A corpus without relevance judgments (``--qrels none``): the teacher labels the runs' pooled
top-k (``candidates/pool.pairs.jsonl``) and is the reference of every evaluation; with no human
judgments there is no leaderboard (a labeler is judged against people).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from core.cli import bounded, check_choices, choice, parse_config, run_main, split_flags
from core.errors import InputError
from core.io import atomic_writer, fingerprint, sha256_path
from core.job_stages import (
    HistoryMark,
    HistoryRecorded,
    JobConfig,
    StageRecord,
    read_stage_record,
)
from data.build import BALANCE_MODES, TESTED_FILE, BuildConfig
from data.candidates import POOL_FILE, RETRIEVERS, CandidatesConfig
from data.judges.backends import BACKENDS
from eval.report.markdown import report_markdown
from eval.search.settings import SearchEvalConfig
from measure.classification.baselines import BASELINES
from measure.classification.summaries import JobSummary, StudySummary
from measure.metrics.results import SearchMetrics
from measure.zoo.record import Leaderboard

logger = logging.getLogger(__name__)


@dataclass
class PipelineConfig:
    run_dir: str = field(default="runs/main", metadata={"help": "Where everything is written."})
    collection: str = field(
        default="data/collections/trec-dl-2019-passage", metadata={"help": "BEIR folder."}
    )
    qrels: str | None = field(
        default="data/collections/trec-dl-2019-passage/qrels.tsv",
        metadata={
            "help": "Human judgments; none for a corpus without them: the teacher then labels the "
            "retrievers' pooled top-k and is the reference the grader is measured against."
        },
    )
    grade_map: str | None = field(
        default=None, metadata={"help": 'Qrels value -> 0-3 grade, e.g. {"1": 3}.'}
    )
    # Teacher: the human judgments by default; any data.label backend otherwise (the production path).
    teacher_backend: str = choice("qrels", BACKENDS, "Who labels the training pairs.")
    teacher_model: str = field(default="smollm2-135m")
    teacher_prompt: str = field(default="binary")
    teacher_base_url: str | None = field(
        default=None,
        metadata={
            "help": "The OpenAI-compatible endpoint the teacher is asked at, e.g. a local "
            "llama.cpp, vLLM or Ollama server: http://127.0.0.1:8080/v1 (default: "
            "OPENAI_BASE_URL, else OpenAI's own API)."
        },
    )
    teacher_args: list[str] = field(
        default_factory=list,
        metadata={
            "help": 'Extra relevance-grader label flags, quoted: --teacher_args "--concurrency 32".'
        },
    )
    # Data
    max_pairs_per_query: int | None = field(
        default=30, metadata={"help": "Pairs kept per query (time budget)."}
    )
    folds: int = bounded(
        5,
        2,
        help="Cross-validation folds by query: each judged query tests in one fold; the grader "
        "of fold 0 is exported and labels the runs.",
    )
    validation_size: float = bounded(
        0.2,
        0,
        help="Validation queries carved from each fold's training queries (thresholds, "
        "calibration): a share, or a number when >= 1.",
        open_low=True,
    )
    balance: str = choice("none", BALANCE_MODES, "Balancing of the train split.")
    train_only: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Judgments of other collections for the train split only (relevance-grader "
            "mix)."
        },
    )
    seed: int = field(default=42)
    # Student
    student: str = field(default="smollm2-135m", metadata={"help": "Student model name or path."})
    train_config: str = field(default="train/configs/smollm2-135m-B-frozen.yaml")
    classifier_config: str | None = field(
        default=None,
        metadata={
            "help": "A second student trained per fold beside --train_config and shown in the "
            "held-out table whether it wins or loses (not exported): the paper's classification "
            "head, e.g. train/configs/smollm2-135m-B-frozen.yaml."
        },
    )
    train_args: list[str] = field(
        default_factory=list,
        metadata={
            "help": 'Extra `relevance-grader train` flags, quoted: --train_args "--labels graded".'
        },
    )
    train_launcher: str | None = field(
        default=None,
        metadata={
            "help": 'Launcher for training, e.g. "accelerate launch --config_file accelerate_config.yaml".'
        },
    )
    max_length: int = field(
        default=256, metadata={"help": "Grader input tokens (TREC passages are short)."}
    )
    # Baselines
    zero_shot: bool = field(
        default=True, metadata={"help": "Evaluate the zero-shot student (P(yes))."}
    )
    judge_model: str | None = field(
        default="smollm2-135m", metadata={"help": "Embedded LLM judge (hf); empty: skip."}
    )
    judge_prompt: str = field(default="binary")
    judge_sample: int = field(default=150, metadata={"help": "Test pairs the LLM judge labels."})
    # Runs and the metric pipeline
    retrievers: list[str] = field(default_factory=lambda: ["bm25", "dense"])
    k: int = field(default=10, metadata={"help": "Hits per query labelled and scored."})
    human_queries: int = bounded(
        10,
        0,
        help="Queries whose human judgments the metric pipeline corrects the grader's metrics "
        "with (PPI++ estimates and intervals in the report), drawn at random from the judged "
        "ones; the other queries count as unjudged. 0: none.",
    )
    human_seed: int = field(default=0, metadata={"help": "Seed of that draw."})
    rerank: str = field(
        default="dense", metadata={"help": "Which run the grader reranks (empty: none)."}
    )
    zoo: str | None = field(
        default="eval/configs/zoo/compact.yaml",
        metadata={
            "help": "The system zoo the labelers are ranked on (relevance-grader zoo): the "
            "exported grader, the calibrated MiniLM cosine and BM25 score, a constant and a "
            "random labeler, each by how its system ranking matches the human one (needs "
            "--qrels; empty: none)."
        },
    )
    batch_size: int = field(default=32)
    # The evaluation history
    track: str | None = field(
        default=None,
        metadata={
            "help": "Evaluation history store (SQLite file or database URL) to record the metric "
            "stage's evaluation in, after that stage: its primary run (the first retriever's), "
            "as relevance-grader search --track does. Recorded once per metric-stage result."
        },
    )
    system: str | None = field(
        default=None, metadata={"help": "With --track: the system's name (default: the run's)."}
    )
    version: str | None = field(
        default=None,
        metadata={"help": "With --track: its version (default: the current UTC time stamp)."},
    )
    note: str | None = field(
        default=None, metadata={"help": "With --track: a note kept with the evaluation."}
    )

    def __post_init__(self) -> None:
        check_choices(self)
        for name in ("system", "version", "note"):  # they would be dropped without a store
            if getattr(self, name) is not None and not self.track:
                raise InputError(f"{name}: give --track STORE to record the evaluation in")
        if self.track:  # a name the store cannot keep, a store it cannot use: before any stage
            from eval.history.names import check_recordable
            from eval.history.store import store_url

            check_recordable(self.system, self.version)
            store_url(self.track)
        self.teacher_args = split_flags(self.teacher_args)
        self.train_args = split_flags(self.train_args)
        if self.qrels in ("", "none"):
            self.qrels = None
        if self.teacher_base_url and self.teacher_backend == "qrels":
            raise InputError(
                "teacher_base_url: the qrels teacher asks no endpoint; set teacher_backend "
                "openai for an OpenAI-compatible server"
            )
        if self.qrels is None and self.teacher_backend == "qrels":
            raise InputError(
                "qrels: none leaves no one to label the pairs: set teacher_backend (openai, vllm, "
                "hf) to the teacher that labels the retrievers' pool"
            )
        unknown = set(self.retrievers) - set(RETRIEVERS)
        if unknown or not self.retrievers:
            raise InputError(
                f"retrievers: expected some of {', '.join(RETRIEVERS)}, got {self.retrievers}"
            )
        if self.rerank and self.rerank not in self.retrievers:
            raise InputError(f"rerank: {self.rerank!r} is not one of retrievers {self.retrievers}")
        if self.validation_size >= 1 and self.validation_size != int(self.validation_size):
            raise InputError(
                f"validation_size: a number of queries is whole, got {self.validation_size}"
            )
        from judgments.coverage import MIN_JUDGED_QUERIES

        if 0 < self.human_queries < MIN_JUDGED_QUERIES:
            raise InputError(
                f"human_queries: {self.human_queries} judged queries give no interval; give 0 "
                f"(none) or at least {MIN_JUDGED_QUERIES}"
            )
        for name in ("k", "batch_size", "judge_sample"):
            if getattr(self, name) < 1:
                raise InputError(f"{name}: expected >= 1, got {getattr(self, name)}")
        if self.max_pairs_per_query is not None and self.max_pairs_per_query < 0:
            raise InputError(
                f"max_pairs_per_query: expected >= 0 (0: all), got {self.max_pairs_per_query}"
            )


class StageFailed(Exception):
    pass


def stage_configs(types: Sequence[type], **options: Any) -> list[Any]:
    """A stage's config objects, the dataclasses its command parses: each option goes to the
    one that has the field, as the command's parser hands out its flags; None leaves a field at
    its default and paths are written as strings."""
    values: list[dict[str, Any]] = [{} for _ in types]
    for name, value in options.items():
        if value is None:
            continue
        owners = [i for i, kind in enumerate(types) if name in {f.name for f in fields(kind)}]
        if not owners:  # a bug of this module, not the user's input
            raise TypeError(f"{name}: a field of none of {[kind.__name__ for kind in types]}")
        values[owners[0]][name] = _plain(value)
    return [kind(**kwargs) for kind, kwargs in zip(types, values, strict=True)]


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def with_flags(configs: list[Any], flags: Sequence[str], where: str) -> list[Any]:
    """``configs`` with the user's pass-through flags (``--teacher_args``) applied by the
    command's own parser, checked before any stage runs."""
    import tempfile

    import yaml

    if not flags:
        return configs
    types = [type(config) for config in configs]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "settings.yaml"
        path.write_text(yaml.safe_dump(settings_mapping(configs)), encoding="utf-8")
        try:
            with _as_stage():
                return list(parse_config(types, ["--config", str(path), *flags]))
        except SystemExit:  # argparse has printed what it could not read
            raise InputError(f"{where}: {shlex.join(flags)}: not flags of this stage") from None
        except ValueError as exc:  # an unknown flag, or a value out of its field's bounds
            reason = str(exc).splitlines()[0]
            raise InputError(f"{where}: {shlex.join(flags)}: {reason}") from None


def settings_mapping(configs: Sequence[Any]) -> dict[str, Any]:
    """The config file of a stage: every config's fields in one mapping, as ``--config`` reads
    it (a command's dataclasses share no field name)."""
    values: dict[str, Any] = {}
    for config in configs:
        values.update(asdict(config))
    return values


@contextlib.contextmanager
def _as_stage() -> Iterator[None]:
    """Parse as the job's stage: its --out is the job's to write (core.job_stages)."""
    from core.job_stages import STAGE_ENV

    before = os.environ.get(STAGE_ENV)
    os.environ[STAGE_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(STAGE_ENV, None)
        else:
            os.environ[STAGE_ENV] = before


@dataclass
class Stage:
    """One step of the main job: a ``relevance-grader`` command (its name in
    :data:`core.commands.COMMANDS`), the settings it runs with (the config objects its command
    parses, written to ``stages/NAME.yaml`` and read with ``--config``), the file that marks it
    done and what it reads."""

    name: str
    output: Path
    command: str
    configs: list[Any]
    inputs: list[str] = field(default_factory=list)

    @property
    def slug(self) -> str:
        return self.name.replace(" ", "-")

    def argv(self, config_file: Path) -> list[str]:
        """The command as this job runs it: the console script of this interpreter's checkout
        (``python -m core.commands`` is ``relevance-grader``)."""
        return [sys.executable, "-m", "core.commands", self.command, "--config", str(config_file)]

    def typed(self, config_file: Path) -> str:
        """The command as a user types it again: ``relevance-grader NAME --config FILE``."""
        return shlex.join(["relevance-grader", *self.command.split(), "--config", str(config_file)])

    def outs(self) -> list[str]:
        return [config.out for config in self.configs if getattr(config, "out", None)]

    def _contents(self) -> list[str]:
        return [
            f"{path}={sha256_path(path) if Path(path).exists() else '-'}" for path in self.inputs
        ]

    def fingerprint(self) -> str:
        """Digest of the settings and of every input file's content (folders: all their files)."""
        settings = json.dumps(settings_mapping(self.configs), sort_keys=True)
        return fingerprint(self.command, settings, *self._contents())


class Pipeline:
    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self.root = Path(config.run_dir)
        self.timings: dict[str, float | None] = {}  # a skipped stage's: when it ran
        self.done_earlier: list[str] = []  # the stages this run skipped
        self.search_runs: list[str] = []  # the metric pipeline's runs, set by stages()

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def stamp(self, stage: Stage) -> Path:
        return self.path("stages", stage.slug + ".json")

    def config_file(self, stage: Stage) -> Path:
        return self.path("stages", stage.slug + ".yaml")

    def is_done(self, stage: Stage, digest: str) -> bool:
        stamp = self.stamp(stage)
        record = read_stage_record(stamp) if stamp.exists() else None
        if record is None or not stage.output.exists():
            return False
        return record.fingerprint == digest

    def run_stage(self, stage: Stage) -> None:
        import yaml

        digest = stage.fingerprint()
        if self.is_done(stage, digest):
            logger.info("stage %s: done already (%s)", stage.name, stage.output)
            record = read_stage_record(self.stamp(stage))
            self.timings[stage.name] = record.seconds if record else None
            self.done_earlier.append(stage.name)
            return
        log = self.path("logs", stage.slug + ".log")
        log.parent.mkdir(parents=True, exist_ok=True)
        config_file = self.config_file(stage)
        with atomic_writer(config_file) as handle:
            yaml.safe_dump(settings_mapping(stage.configs), handle, sort_keys=False)
        command = stage.argv(config_file)
        print(f"\n==> {stage.name}: {stage.typed(config_file)}", flush=True)
        start = time.perf_counter()
        returncode = _run_logged(command, log)
        if returncode != 0:
            raise StageFailed(
                f"stage {stage.name!r} failed (exit {returncode}); its output is in {log}; "
                "fix the cause and re-run the same command to resume"
            )
        if not stage.output.exists():
            raise StageFailed(
                f"stage {stage.name!r} finished without writing {stage.output}; see {log}"
            )
        self.timings[stage.name] = round(time.perf_counter() - start, 1)
        record = StageRecord(
            fingerprint=digest,
            command=command,
            config=str(config_file),
            outs=stage.outs(),
            seconds=self.timings[stage.name],
        )
        record.write(self.stamp(stage))

    # Where each stage writes.
    @property
    def teacher_file(self) -> Path:
        return self.path("labels", "teacher.jsonl")

    @property
    def judge_file(self) -> Path:
        return self.path("labels", "judge.jsonl")

    @property
    def dataset(self) -> Path:
        return self.path("dataset")

    @property
    def export_fold(self) -> Path:
        """The fold whose grader is exported and labels the runs (fold 0)."""
        return self.path("cv", "fold-0")

    @property
    def candidates(self) -> Path:
        return self.path("candidates")

    def stages(self) -> list[Stage]:
        c = self.config
        # The runs first: without qrels their pool is what the teacher labels, and the cosine
        # baseline of the cross-validation reads the corpus embeddings they stored.
        stages = [self.retrieval_stage(), self.teacher_stage(), self.dataset_stage()]
        if c.judge_model:
            stages.append(self.judge_stage())
        stages += [self.cross_validation_stage(), self.export_stage()]
        if c.rerank:
            stages.append(self.rerank_stage())
        self.search_runs = self.runs()
        stages.append(self.metric_stage())
        if c.qrels and c.zoo:
            stages.append(self.leaderboard_stage())
        return stages

    def runs(self) -> list[str]:
        c = self.config
        runs = [str(self.candidates / f"{name}.trec") for name in c.retrievers]
        return runs + ([str(self.candidates / f"{c.rerank}-grader.trec")] if c.rerank else [])

    def retrieval_stage(self) -> Stage:
        c = self.config
        return Stage(
            "retrieval runs",
            self.candidates / "candidates.json",
            "candidates",
            stage_configs(
                [CandidatesConfig],
                collection=c.collection,
                retrievers=c.retrievers,
                k=c.k,
                out=self.candidates,
                judged_queries_only=bool(c.qrels),
            ),
            inputs=[c.collection],
        )

    def teacher_stage(self) -> Stage:
        from data.judges.backends import JudgeConfig
        from data.label import LabelConfig

        c = self.config
        if c.teacher_backend == "qrels":
            teacher = {"backend": "qrels", "qrels": c.qrels, "grade_map": c.grade_map}
        else:
            teacher = {"backend": c.teacher_backend, "model": c.teacher_model}
            teacher["prompt"] = c.teacher_prompt
            teacher["base_url"] = c.teacher_base_url
        if c.qrels:  # the judged pool
            pool, pool_inputs = {"collection": c.collection, "pool_from_qrels": True}, [c.qrels]
        else:  # the pairs the candidate retrievers return, each once
            pool_file = self.candidates / POOL_FILE
            pool, pool_inputs = {"pairs": pool_file}, [str(pool_file)]
        configs = stage_configs(
            [LabelConfig, JudgeConfig], **pool, **teacher, out=self.teacher_file
        )
        return Stage(
            "teacher labels",
            self.teacher_file,
            "label",
            with_flags(configs, c.teacher_args, "teacher_args"),
            inputs=[c.collection, *pool_inputs],
        )

    def dataset_stage(self) -> Stage:
        c = self.config
        return Stage(
            "dataset",
            self.dataset / "manifest.json",
            "build",
            stage_configs(
                [BuildConfig],
                judgments=[self.teacher_file],
                out=self.dataset,
                seed=c.seed,
                folds=c.folds,
                validation_size=c.validation_size,
                balance=c.balance,
                save_dataset=False,
                max_pairs_per_query=c.max_pairs_per_query or None,
                train_only=c.train_only or None,
            ),
            inputs=[str(self.teacher_file), *c.train_only],
        )

    def judge_stage(self) -> Stage:
        """The embedded LLM judge on a sample of the pairs the folds test (each fold reads its
        own share)."""
        from data.judges.backends import JudgeConfig
        from data.label import LabelConfig

        c = self.config
        tested = self.dataset / TESTED_FILE
        return Stage(
            "LLM judge labels",
            self.judge_file,
            "label",
            stage_configs(
                [LabelConfig, JudgeConfig],
                pairs=tested,
                sample=c.judge_sample,
                seed=c.seed,
                backend="hf",
                model=c.judge_model,
                prompt=c.judge_prompt,
                out=self.judge_file,
            ),
            inputs=[str(tested)],
        )

    def cross_validation_stage(self) -> Stage:
        """Every fold's grader trained and evaluated beside the baselines (``relevance-grader
        study``)."""
        from eval.jobs.study import StudyConfig

        c = self.config
        student = [c.student] if Path(c.student).exists() else []  # its weights may change
        models = [*BASELINES, *(["zero-shot"] if c.zero_shot else [])]
        if c.judge_model:
            models.append(f"judge=judgments:{self.judge_file}")
        models.append(f"grader={c.train_config}")
        if c.classifier_config:
            models.append(f"classifier={c.classifier_config}")
        # Against the human judgments wherever there are graded ones (binary collections map
        # their qrels into the teacher's labels: grade_map).
        human = bool(c.qrels) and not c.grade_map
        return Stage(
            "cross-validation",
            self.path("cv", StudySummary.FILE),
            "study",
            stage_configs(
                [StudyConfig],
                dataset=self.dataset,
                out=self.path("cv"),
                collection=c.collection,
                models=models,
                student=c.student,
                max_length=c.max_length,
                train_args=c.train_args,
                train_launcher=c.train_launcher,
                labels="both" if human else "teacher",
                qrels=c.qrels if human else None,
                batch_size=c.batch_size,
                seed=c.seed,
            ),
            inputs=[
                str(self.dataset),
                c.train_config,
                *([c.classifier_config] if c.classifier_config else []),
                c.collection,
                *student,
                *([str(self.judge_file)] if c.judge_model else []),
                *([c.qrels] if human else []),
            ],
        )

    def export_stage(self) -> Stage:
        from models.export import ExportConfig

        evaluation = self.export_fold / "grader"  # the grader row of fold 0: metrics.json, grader/
        metrics, grader = evaluation / "metrics.json", evaluation / "grader"
        test = str(self.dataset / "fold-0" / "test.jsonl")
        return Stage(
            "export",
            self.path("export", "export_check.json"),
            "export",
            stage_configs(
                [ExportConfig],
                checkpoint=grader,
                out=self.path("export"),
                metrics=metrics,
                pairs=test,
            ),
            inputs=[str(grader), str(metrics), test],
        )

    def rerank_stage(self) -> Stage:
        from measure.labelers.rerank import RerankConfig

        c = self.config
        run, reranked = self.candidates / f"{c.rerank}.trec", self.runs()[-1]
        return Stage(
            "grader rerank",
            Path(reranked),
            "rerank",
            stage_configs(
                [RerankConfig],
                run=run,
                corpus=c.collection,
                grader=self.path("export"),
                k=c.k,
                out=reranked,
                # The metric pipeline labels the same pairs: scored once, reused there.
                label_cache=self.path("label-cache"),
            ),
            inputs=[str(run), c.collection, str(self.path("export"))],
        )

    def metric_stage(self) -> Stage:
        c = self.config
        runs, human_sample = self.runs(), self.human_sample()
        return Stage(
            "metric pipeline",
            self.path("search", "metrics.json"),
            "search",
            stage_configs(
                [SearchEvalConfig],
                run=runs[0],
                compare=runs[1:] or None,
                corpus=c.collection,
                labeler=f"grader:{self.path('export')}",
                k=c.k,
                out=self.path("search"),
                label_cache=self.path("label-cache"),
                human=human_sample,
            ),
            inputs=[
                *runs,
                c.collection,
                str(self.path("export")),
                *([human_sample] if human_sample else []),
            ],
        )

    def zoo_labelers(self) -> dict[str, str]:
        """The leaderboard's labelers (name -> spec) and the calibrations of the two score
        labelers: the Platt scaling, temperature and threshold that fold 0's baseline rows fitted
        on its validation queries, as the grader's were."""
        c = self.config
        # The classifier head would need a backbone pass of its own over every pooled pair
        # (minutes on a CPU): it is ranked in the full leaderboard
        # (docs/results/labeler-leaderboard.md), not here.
        # The grader row is cross-fitted: each query labelled by the fold's grader that held it
        # out (measure.labelers.crossfit). The export (fold 0's) trained on most of these
        # queries and would be ranked on its own training data.
        return {
            "grader": f"crossfit:{self.path('cv')}",
            "MiniLM cosine": "cosine:minilm-l6",
            "BM25 score": f"bm25:{c.collection}",
            "constant": "constant:",
            "random": "random:0",
        }

    def leaderboard_stage(self) -> Stage:
        from eval.zoo.command import ZooConfig

        c = self.config
        assert c.qrels and c.zoo
        labelers = self.zoo_labelers()
        calibrations = {
            "MiniLM cosine": self.export_fold / "cosine" / "metrics.json",
            "BM25 score": self.export_fold / "bm25" / "metrics.json",
        }
        return Stage(
            "labeler leaderboard",
            self.path("zoo", "leaderboard.json"),
            "zoo",
            stage_configs(
                [ZooConfig],
                zoo=c.zoo,
                collection=c.collection,
                qrels=c.qrels,
                labelers=[f"{name}={spec}" for name, spec in labelers.items()],
                # The zoo's reranks by the cosine and by BM25 name their scorers so: the same
                # specs as two labelers, scored once.
                scorers=[f"cosine={labelers['MiniLM cosine']}", f"bm25={labelers['BM25 score']}"],
                calibrations=[f"{name}={path}" for name, path in calibrations.items()],
                k=c.k,
                ppi_queries=sorted({c.human_queries or 10, 20}),
                out=self.path("zoo"),
                # The rerank and the metric pipeline labelled some of these pairs: reused here.
                label_cache=self.path("label-cache"),
            ),
            inputs=[
                c.zoo,
                c.collection,
                c.qrels,
                # The cross-fitted grader is each fold's grader row: a judge row evaluated
                # again leaves the leaderboard as it was.
                *(str(self.path("cv", f"fold-{k}", "grader")) for k in range(c.folds)),
                *(str(path) for path in calibrations.values()),
            ],
        )

    def human_sample(self) -> str | None:
        """The qrels of ``human_queries`` judged queries drawn at random: the human-judged subset
        of the report's PPI estimates (None without qrels or with human_queries 0)."""
        c = self.config
        if not c.qrels or not c.human_queries:
            return None
        from data.beir import graded_qrels, read_qrels, write_trec_qrels
        from judgments.draw import draw_queries

        # Written in TREC format on the 0-3 scale (as eval.search reads that format), whatever
        # the scale of the collection's file: a binary collection's 1 stays relevant.
        grade_map = (
            {int(k): int(v) for k, v in json.loads(c.grade_map).items()} if c.grade_map else None
        )
        qrels = graded_qrels(read_qrels(c.qrels), c.qrels, grade_map)
        if len(qrels) < c.human_queries + 2:
            raise InputError(
                f"human_queries: {c.qrels} judges {len(qrels)} queries; leave at least 2 unjudged "
                f"(got {c.human_queries})"
            )
        chosen = draw_queries(sorted(qrels), c.human_queries, c.human_seed)
        path = self.path("ppi", "human-sample.qrels")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_trec_qrels(path, {qid: qrels[qid] for qid in chosen})
        return str(path)

    def human_all_queries(self) -> dict[str, dict[str, float]]:
        """Each run's mean metrics under all of the human judgments: what the PPI estimates of
        the report, made from a sample of them, estimate."""
        from data.beir import read_trec_run
        from judgments.samples import human_metrics
        from measure.metrics.retrieval import mean_metrics

        assert self.config.qrels is not None
        runs = {Path(p).stem: read_trec_run(p) for p in self.search_runs}
        human = human_metrics(self.config.qrels, runs, self.config.k)
        return {name: mean_metrics(per_metric) for name, per_metric in human.items()}

    def run(self) -> JobSummary:
        self.root.mkdir(parents=True, exist_ok=True)
        JobConfig.of(asdict(self.config)).write(self.path(JobConfig.FILE))
        start = time.perf_counter()
        for stage in self.stages():
            self.run_stage(stage)
            if stage.command == "search" and self.config.track:
                self.record_history(stage)
        summary = self.summarise(time.perf_counter() - start)
        summary.write(self.path(JobSummary.FILE))
        self.write_reports()
        return summary

    def write_reports(self) -> None:
        """report.md and report.html (the run as one page), both rendered from the run folder
        read once, the summary just written among it: the two cannot say different things."""
        from eval.report.build import report_data
        from eval.report.inputs import job_summary, read_inputs
        from eval.report.page import output_path, write_page

        inputs = read_inputs(self.root)
        with atomic_writer(self.path("report.md")) as handle:
            handle.write(report_markdown(job_summary(inputs)))
        write_page(report_data(inputs), output_path(self.root, None))

    def record_history(self, stage: Stage) -> None:
        """Record the metric stage's evaluation in --track's store, once per stage result: a
        resumed job does not record the same evaluation twice."""
        from eval.history.record import record_folder
        from eval.history.store import open_store

        c = self.config
        store = open_store(c.track or "")
        mark = HistoryRecorded(store=store.name, fingerprint=stage.fingerprint())
        stamp = self.path("stages", HistoryMark.FILE)
        try:
            if stamp.exists() and HistoryMark.read(stamp).recorded == mark:
                logger.info("history: this evaluation is in %s already", store.name)
                return
            print(record_folder(store, stage.output.parent, c.system, c.version, c.note))
        finally:
            store.close()
        HistoryMark(recorded=mark).write(stamp)

    def summarise(self, seconds: float) -> JobSummary:
        study = StudySummary.read(self.path("cv", StudySummary.FILE))
        search = SearchMetrics.read(self.path("search", SearchMetrics.FILE))
        board = self.path("zoo", Leaderboard.FILE)
        leaderboard = Leaderboard.read(board) if self.config.qrels and self.config.zoo else None
        return JobSummary(
            run_dir=str(self.root),
            seconds=round(seconds, 1),
            stage_seconds=self.timings,
            done_earlier=self.done_earlier,
            scoring_dtype=search.scoring_dtype,  # as its stages scored
            folds=study.folds,
            queries_per_fold=study.queries_per_fold,
            names=self.row_names(),
            cross_validation=study.cross_validation,
            per_fold=study.per_fold,
            export_fold=0,
            search=search.mean,
            leaderboard=leaderboard,
            ppi=search.ppi,
            human_all_queries=self.human_all_queries() if search.ppi else None,
            export=str(self.path("export")),
        )

    def row_names(self) -> dict[str, str]:
        """How the report and the README name the study's rows."""
        c = self.config
        student = Path(c.student).name
        return {
            "bm25": "BM25 score",
            "cosine": "MiniLM cosine",
            "zero-shot": f"{student} zero-shot",
            "judge": f"{Path(c.judge_model or '').name} judge ({c.judge_prompt})",
            "grader": f"{student} grader (ours)",
            "classifier": f"{student} classifier head ({Path(c.classifier_config or '').stem})",
        }


def _run_logged(command: list[str], log: Path) -> int:
    """Run ``command``, copying its output (progress bars included) to the console and ``log``."""
    with open(log, "wb") as handle:
        from core.job_stages import STAGE_ENV

        env = {**os.environ, STAGE_ENV: "1"}  # the job may write its own stage folders
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
        )
        assert process.stdout is not None
        for chunk in iter(lambda: os.read(process.stdout.fileno(), 65536), b""):
            handle.write(chunk)
            handle.flush()
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
        return process.wait()


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([PipelineConfig], args)
    try:
        summary = Pipeline(config).run()
    except StageFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    print()
    print(report_markdown(summary))
    print(
        f"everything is in {config.run_dir}/ (report.html, report.md, summary.json, cv/, export/, "
        "search/, agreement/)"
    )


if __name__ == "__main__":
    run_main(main)
