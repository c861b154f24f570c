"""The main job: the whole pipeline on one config, each stage through its public command.

    python -m eval.pipeline --config eval/configs/main.yaml
    python -m eval.pipeline --config eval/configs/main.yaml --run_dir runs/main-2 --max_pairs_per_query 60

Each stage writes a fingerprint of its command and of the files it reads beside its output
(``run_dir/stages/NAME.json``); a stage is skipped only when its output exists and that
fingerprint matches, so an interrupted run resumes and a changed config, student, dataset or
upstream output re-runs what depends on it. Each stage's output goes to ``run_dir/logs/``.

Stages:
 1. teacher labels for the judged pool (``data.label``; default teacher: the human qrels);
 2. a query-split, stratified dataset (``data.build``);
 3. the student grader (``train``; default: the query-likelihood grader on SmolLM2-135M);
 4. evaluation on held-out queries against teacher and human labels, threshold and temperature
    fitted on validation (``eval.checkpoint``), beside the zero-shot student and the embedded LLM
    judge on a sample of the same test pairs (``data.label`` + ``eval.checkpoint``);
 5. export with its round-trip check (``models.export``);
 6. retrieval runs (``data.candidates``) and a grader rerank (``eval.rerank``);
 7. the metric pipeline over the runs with grader labels (``eval.search``) and the agreement of
    the system ranking with the human judgments (``eval.ranking_agreement``).
Everything lands in ``run_dir``: report.md, summary.json, metrics, plots and the exported grader.

A corpus without relevance judgments (``--qrels none``): the retrieval runs come first, the teacher
labels their pooled top-k (``candidates/pool.pairs.jsonl``), and the teacher is the reference of
every evaluation and of the ranking agreement.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from data.build import BALANCE_MODES
from data.candidates import POOL_FILE, RETRIEVERS
from data.cli import (
    bounded,
    check_choices,
    choice,
    cli_args,
    parse_config,
    run_main,
    split_flags,
)
from data.io import atomic_writer, fingerprint, sha256_path, write_json
from data.judges.backends import BACKENDS
from eval.baselines import BASELINES
from eval.compare import comparison_rows, to_markdown
from eval.ranking_agreement import scores_table
from eval.search import metrics_table, ppi_table

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
    teacher_args: list[str] = field(
        default_factory=list,
        metadata={"help": 'Extra data.label flags, quoted: --teacher_args "--concurrency 32".'},
    )
    # Data
    max_pairs_per_query: int | None = field(
        default=30, metadata={"help": "Pairs kept per query (time budget)."}
    )
    validation_size: float = field(default=0.2)
    test_size: float = field(default=0.2)
    balance: str = choice("none", BALANCE_MODES, "Balancing of the train split.")
    train_only: list[str] = field(
        default_factory=list,
        metadata={"help": "Judgments of other collections for the train split only (data.mix)."},
    )
    seed: int = field(default=42)
    # Student
    student: str = field(default="smollm2-135m", metadata={"help": "Student model name or path."})
    train_config: str = field(default="train/configs/smollm2-135m-B-frozen.yaml")
    train_args: list[str] = field(
        default_factory=list,
        metadata={"help": 'Extra `python -m train` flags, quoted: --train_args "--labels graded".'},
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
    state_cache: str | None = field(
        default=None,
        metadata={
            "help": "frozen / top_layers: cached states shared across runs on this machine "
            "(default: the model cache's states/ folder; 'none' to keep them in memory)."
        },
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
    batch_size: int = field(default=32)

    def __post_init__(self) -> None:
        check_choices(self)
        self.teacher_args = split_flags(self.teacher_args)
        self.train_args = split_flags(self.train_args)
        if self.qrels in ("", "none"):
            self.qrels = None
        if self.qrels is None and self.teacher_backend == "qrels":
            raise ValueError(
                "qrels: none leaves no one to label the pairs: set teacher_backend (openai, vllm, "
                "hf) to the teacher that labels the retrievers' pool"
            )
        unknown = set(self.retrievers) - set(RETRIEVERS)
        if unknown or not self.retrievers:
            raise ValueError(
                f"retrievers: expected some of {', '.join(RETRIEVERS)}, got {self.retrievers}"
            )
        if self.rerank and self.rerank not in self.retrievers:
            raise ValueError(f"rerank: {self.rerank!r} is not one of retrievers {self.retrievers}")
        for name in ("validation_size", "test_size"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(
                    f"{name}: expected a fraction in (0, 1), got {getattr(self, name)}"
                )
        if self.validation_size + self.test_size >= 1:
            raise ValueError("validation_size + test_size: leaves no training queries")
        for name in ("k", "batch_size", "judge_sample"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected >= 1, got {getattr(self, name)}")
        if self.max_pairs_per_query is not None and self.max_pairs_per_query < 0:
            raise ValueError(
                f"max_pairs_per_query: expected >= 0 (0: all), got {self.max_pairs_per_query}"
            )


class StageFailed(Exception):
    pass


@dataclass
class Stage:
    """One step of the main job: a public command, the file that marks it done and what it reads."""

    name: str
    output: Path
    module: str
    args: list[str]
    inputs: list[str] = field(default_factory=list)
    launcher: list[str] | None = None

    @property
    def command(self) -> list[str]:
        return [*(self.launcher or [sys.executable]), "-m", self.module, *self.args]

    def fingerprint(self) -> str:
        """Digest of the command and of every input file's content (folders: all their files)."""
        contents = [
            f"{path}={sha256_path(path) if Path(path).exists() else '-'}" for path in self.inputs
        ]
        return fingerprint(self.module, *self.args, *contents)


class Pipeline:
    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self.root = Path(config.run_dir)
        self.timings: dict[str, float] = {}
        self.search_runs: list[str] = []  # the metric pipeline's runs, set by stages()
        from train.cached_states import default_state_cache

        cache = config.state_cache or str(default_state_cache())
        self.state_cache = None if cache == "none" else cache

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def stamp(self, stage: Stage) -> Path:
        return self.path("stages", stage.name.replace(" ", "-") + ".json")

    def is_done(self, stage: Stage, digest: str) -> bool:
        stamp = self.stamp(stage)
        return (
            stage.output.exists()
            and stamp.exists()
            and json.loads(stamp.read_text()).get("fingerprint") == digest
        )

    def run_stage(self, stage: Stage) -> None:
        digest = stage.fingerprint()
        if self.is_done(stage, digest):
            logger.info("stage %s: done already (%s)", stage.name, stage.output)
            self.timings.setdefault(stage.name, 0.0)
            return
        log = self.path("logs", stage.name.replace(" ", "-") + ".log")
        log.parent.mkdir(parents=True, exist_ok=True)
        print(f"\n==> {stage.name}: {shlex.join(stage.command)}", flush=True)
        start = time.perf_counter()
        returncode = _run_logged(stage.command, log)
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
        write_json(self.stamp(stage), {"fingerprint": digest, "command": stage.command})

    def stages(self) -> list[Stage]:
        c = self.config
        teacher_file = self.path("labels", "teacher.jsonl")
        dataset = self.path("dataset")
        grader = self.path("grader")
        export = self.path("export")
        candidates = self.path("candidates")
        test, validation = str(dataset / "test.jsonl"), str(dataset / "validation.jsonl")
        # A student given as a local folder is an input too (its weights may change).
        student = [c.student] if Path(c.student).exists() else []
        qrels = [c.qrels] if c.qrels else []
        if c.teacher_backend == "qrels":
            teacher = cli_args(backend="qrels", qrels=c.qrels, grade_map=c.grade_map)
        else:
            teacher = cli_args(
                backend=c.teacher_backend, model=c.teacher_model, prompt=c.teacher_prompt
            )
        # Binary collections (grade_map given): the teacher *is* the human qrels; without qrels
        # the teacher is all there is.
        human = (
            cli_args(labels="both", qrels=c.qrels)
            if c.qrels and not c.grade_map
            else cli_args(labels="teacher")
        )
        retrieval = Stage(
            "retrieval runs",
            candidates / "candidates.json",
            "data.candidates",
            cli_args(
                collection=c.collection,
                retrievers=c.retrievers,
                k=max(c.k, 10),
                out=candidates,
                judged_queries_only=bool(c.qrels),
            ),
            inputs=[c.collection],
        )
        if c.qrels:  # the judged pool
            pool, pool_inputs = cli_args(collection=c.collection, pool_from_qrels=True), qrels
        else:  # the pairs the candidate retrievers return, each once
            pool_file = candidates / POOL_FILE
            pool, pool_inputs = cli_args(pairs=pool_file), [str(pool_file)]
        stages = [] if c.qrels else [retrieval]
        stages += [
            Stage(
                "teacher labels",
                teacher_file,
                "data.label",
                pool + teacher + [*c.teacher_args, "--out", str(teacher_file)],
                inputs=[c.collection, *pool_inputs],
            ),
            Stage(
                "dataset",
                dataset / "manifest.json",
                "data.build",
                cli_args(
                    judgments=teacher_file,
                    out=dataset,
                    seed=c.seed,
                    validation_size=c.validation_size,
                    test_size=c.test_size,
                    balance=c.balance,
                    save_dataset=False,
                    max_pairs_per_query=c.max_pairs_per_query or None,
                    train_only=c.train_only or None,
                ),
                inputs=[str(teacher_file), *c.train_only],
            ),
            Stage(
                "train",
                grader / "grader_config.json",
                "train",
                cli_args(
                    config=c.train_config,
                    dataset=dataset,
                    output_dir=grader,
                    model_name_or_path=c.student,
                    max_length=c.max_length,
                    report_to="none",
                    seed=c.seed,
                    state_cache=self.state_cache,
                )
                + c.train_args,
                inputs=[c.train_config, str(dataset), *student],
                launcher=shlex.split(c.train_launcher) if c.train_launcher else None,
            ),
            Stage(
                "evaluate grader",
                self.path("eval", "grader", "metrics.json"),
                "eval.checkpoint",
                cli_args(
                    model=grader,
                    data=test,
                    calibration_data=validation,
                    out=self.path("eval", "grader"),
                    name=f"{Path(c.student).name} grader (ours)",
                    batch_size=c.batch_size,
                )
                + human,
                inputs=[str(grader), str(dataset), *qrels],
            ),
        ]
        for baseline in BASELINES:
            stages.append(
                Stage(
                    f"evaluate {baseline} baseline",
                    self.path("eval", baseline, "metrics.json"),
                    "eval.checkpoint",
                    cli_args(
                        baseline=baseline,
                        collection=c.collection,
                        data=test,
                        calibration_data=validation,
                        out=self.path("eval", baseline),
                        name="BM25 score" if baseline == "bm25" else "MiniLM cosine",
                    )
                    + human,
                    inputs=[str(dataset), c.collection, *qrels],
                )
            )
        if c.zero_shot:
            stages.append(
                Stage(
                    "evaluate zero-shot student",
                    self.path("eval", "zero-shot", "metrics.json"),
                    "eval.checkpoint",
                    cli_args(
                        model=c.student,
                        zero_shot=True,
                        data=test,
                        calibration_data=validation,
                        max_length=c.max_length,
                        out=self.path("eval", "zero-shot"),
                        name=f"{Path(c.student).name} zero-shot",
                        batch_size=c.batch_size,
                    )
                    + human,
                    inputs=[str(dataset), *qrels, *student],
                )
            )
        if c.judge_model:
            judge_file = self.path("labels", "judge.jsonl")
            stages += [
                Stage(
                    "LLM judge labels",
                    judge_file,
                    "data.label",
                    cli_args(
                        pairs=test,
                        sample=c.judge_sample,
                        seed=c.seed,
                        backend="hf",
                        model=c.judge_model,
                        prompt=c.judge_prompt,
                        out=judge_file,
                    ),
                    inputs=[test],
                ),
                Stage(
                    "evaluate LLM judge",
                    self.path("eval", "judge", "metrics.json"),
                    "eval.checkpoint",
                    cli_args(
                        judgments=judge_file,
                        data=test,
                        out=self.path("eval", "judge"),
                        name=f"{Path(c.judge_model).name} judge ({c.judge_prompt})",
                    )
                    + human,
                    inputs=[str(judge_file), test, *qrels],
                ),
            ]
        runs = [str(candidates / f"{name}.trec") for name in c.retrievers]
        stages += [
            Stage(
                "export",
                export / "export_check.json",
                "models.export",
                cli_args(
                    checkpoint=grader,
                    out=export,
                    metrics=self.path("eval", "grader", "metrics.json"),
                    pairs=test,
                ),
                inputs=[str(grader), str(self.path("eval", "grader", "metrics.json")), test],
            ),
        ]
        if c.qrels:
            stages.append(retrieval)
        label_cache = self.path("label-cache")
        human_sample = self.human_sample()
        if c.rerank:
            reranked = candidates / f"{c.rerank}-grader.trec"
            stages.append(
                Stage(
                    "grader rerank",
                    reranked,
                    "eval.rerank",
                    cli_args(
                        run=candidates / f"{c.rerank}.trec",
                        corpus=c.collection,
                        grader=export,
                        k=c.k,
                        out=reranked,
                        # The metric pipeline labels the same pairs: scored once, reused there.
                        label_cache=label_cache,
                    ),
                    inputs=[str(candidates / f"{c.rerank}.trec"), c.collection, str(export)],
                )
            )
            runs.append(str(reranked))
        self.search_runs = runs
        stages += [
            Stage(
                "metric pipeline",
                self.path("search", "metrics.json"),
                "eval.search",
                cli_args(
                    run=runs[0],
                    compare=runs[1:] or None,
                    corpus=c.collection,
                    labeler=f"grader:{export}",
                    k=c.k,
                    out=self.path("search"),
                    label_cache=label_cache,
                    human=human_sample,
                ),
                inputs=[
                    *runs,
                    c.collection,
                    str(export),
                    *([human_sample] if human_sample else []),
                ],
            ),
            Stage(
                "ranking agreement",
                self.path("agreement", "agreement.json"),
                "eval.ranking_agreement",
                cli_args(
                    runs=runs,
                    corpus=c.collection,
                    labelers=[f"grader:{export}"]
                    + (
                        [f"judgments:{teacher_file}"]
                        if c.qrels and c.teacher_backend != "qrels"
                        else []
                    ),
                    # Without qrels the teacher, which labelled every pooled hit, is the reference.
                    reference=f"qrels:{c.qrels}" if c.qrels else f"judgments:{teacher_file}",
                    metric=f"ndcg@{c.k}",
                    k=c.k,
                    out=self.path("agreement"),
                    label_cache=label_cache,
                ),
                inputs=[*runs, c.collection, str(export), *qrels, str(teacher_file)],
            ),
        ]
        return stages

    def human_sample(self) -> str | None:
        """The qrels of ``human_queries`` judged queries drawn at random: the human-judged subset
        of the report's PPI estimates (None without qrels or with human_queries 0)."""
        c = self.config
        if not c.qrels or not c.human_queries:
            return None
        from data.beir import read_qrels, write_trec_qrels
        from eval.ppi import draw_queries

        qrels = read_qrels(c.qrels)  # as judged: eval.search reads the sample like the original
        if len(qrels) < c.human_queries + 2:
            raise ValueError(
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
        from eval.search import human_metrics, mean_metrics

        assert self.config.qrels is not None
        runs = {Path(p).stem: read_trec_run(p) for p in self.search_runs}
        human = human_metrics(self.config.qrels, runs, self.config.k)
        return {name: mean_metrics(per_metric) for name, per_metric in human.items()}

    def run(self) -> dict[str, Any]:
        self.root.mkdir(parents=True, exist_ok=True)
        write_json(self.path("config.json"), asdict(self.config))
        start = time.perf_counter()
        for stage in self.stages():
            self.run_stage(stage)
        summary = self.summarise(time.perf_counter() - start)
        write_json(self.path("summary.json"), summary)
        with atomic_writer(self.path("report.md")) as handle:
            handle.write(report_markdown(summary))
        from eval.report.page import write_report

        write_report(self.root)  # report.html: the run as one page
        return summary

    def summarise(self, seconds: float) -> dict[str, Any]:
        results = [
            json.loads(path.read_text())
            for name in (*BASELINES, "zero-shot", "judge", "grader")
            if (path := self.path("eval", name, "metrics.json")).exists()
        ]
        sources = list(dict.fromkeys(s for result in results for s in result["metrics"]))
        search = json.loads(self.path("search", "metrics.json").read_text())
        agreement = json.loads(self.path("agreement", "agreement.json").read_text())
        manifest = json.loads(self.path("dataset", "manifest.json").read_text())
        return {
            "run_dir": str(self.root),
            "seconds": round(seconds, 1),
            "stage_seconds": self.timings,
            "dataset": manifest["counts"],
            "classification": {source: comparison_rows(results, source) for source in sources},
            "search": search["mean"],
            "agreement": agreement,
            "ppi": search.get("ppi"),
            "human_all_queries": self.human_all_queries() if search.get("ppi") else None,
            "export": str(self.path("export")),
        }


def _run_logged(command: list[str], log: Path) -> int:
    """Run ``command``, copying its output (progress bars included) to the console and ``log``."""
    with open(log, "wb") as handle:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert process.stdout is not None
        for chunk in iter(lambda: os.read(process.stdout.fileno(), 65536), b""):
            handle.write(chunk)
            handle.flush()
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
        return process.wait()


def report_markdown(summary: dict[str, Any]) -> str:
    lines = [
        "# Main job report",
        "",
        f"Run directory `{summary['run_dir']}`; total {summary['seconds']} s.",
        "",
        "## Held-out queries: classification",
        "",
    ]
    for source, rows in summary["classification"].items():
        lines += [to_markdown(rows, source)]
    lines += [
        "Thresholds, temperatures and the baselines' score-to-probability maps were fitted on the "
        "validation queries.",
        "",
        "## Retrieval runs labelled by the grader",
        "",
    ]
    agreement = summary["agreement"]
    lines += [
        metrics_table(summary["search"], digits=3),
        f"## System ranking agreement ({agreement['metric']})",
        "",
        scores_table(agreement, digits=3).rstrip("\n"),
    ]
    for spec, entry in agreement["agreement"].items():
        lines.append(
            f"\nKendall's τ ({spec} vs {agreement['reference']}): {entry['kendall_tau']:.3f}"
        )
    if summary.get("ppi"):
        ppi = summary["ppi"]
        metric = agreement["metric"]
        truth = ", ".join(
            f"{run} {values[metric]:.3f}" for run, values in summary["human_all_queries"].items()
        )
        lines += [
            "",
            f"## The grader's metrics corrected by {ppi['judged_queries']} human-judged queries",
            "",
            f"The grader labels every query; {ppi['judged_queries']} queries drawn at random also "
            f"keep their human judgments ({ppi['estimator']}). What the estimates estimate, "
            f"{metric} under all of the human judgments (every judged passage in the ideal "
            f"ranking): {truth}.",
            "",
            ppi_table(ppi).rstrip("\n"),
        ]
    lines += ["", "## Stage times (s)", ""]
    lines += [f"- {name}: {seconds}" for name, seconds in summary["stage_seconds"].items()]
    return "\n".join(lines) + "\n"


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
        f"everything is in {config.run_dir}/ (report.md, summary.json, eval/, export/, search/, agreement/)"
    )


if __name__ == "__main__":
    run_main(main)
