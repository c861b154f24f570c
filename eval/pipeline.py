"""The main job: the whole pipeline on one config, each stage through its public command.

    python -m eval.pipeline --config eval/configs/main.yaml
    python -m eval.pipeline --config eval/configs/main.yaml --run_dir runs/main-2 --max_pairs_per_query 60

Stages (a stage whose output exists is skipped, so an interrupted run resumes):
 1. teacher labels for the judged pool (``data.label``; default teacher: the human qrels);
 2. a query-split, stratified dataset (``data.build``);
 3. the student grader (``train``; default: frozen-backbone SmolLM2-135M, the CPU-friendly mode);
 4. evaluation on held-out queries against teacher and human labels, threshold and temperature
    fitted on validation (``eval.checkpoint``), beside the zero-shot student and the embedded LLM
    judge on a sample of the same test pairs (``data.label`` + ``eval.checkpoint``);
 5. export with its round-trip check (``models.export``);
 6. retrieval runs (``data.candidates``) and a grader rerank (``eval.rerank``);
 7. the metric pipeline over the runs with grader labels (``eval.search``) and the agreement of
    the system ranking with the human judgments (``eval.agreement``).
Everything lands in ``run_dir``: report.md, summary.json, metrics, plots and the exported grader.
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from data.cli import parse_config, run_main
from data.io import atomic_writer, write_json

logger = logging.getLogger(__name__)


@dataclass
class PipelineConfig:
    run_dir: str = field(default="runs/main", metadata={"help": "Where everything is written."})
    collection: str = field(
        default="data/collections/trec-dl-2019-passage", metadata={"help": "BEIR folder."}
    )
    qrels: str = field(
        default="data/collections/trec-dl-2019-passage/qrels.tsv",
        metadata={"help": "Human judgments."},
    )
    grade_map: str | None = field(
        default=None, metadata={"help": 'Qrels value -> 0-3 grade, e.g. {"1": 3}.'}
    )
    # Teacher: the human judgments by default; any data.label backend otherwise (the production path).
    teacher_backend: str = field(
        default="qrels", metadata={"help": "qrels, hf, openai, azure or vllm."}
    )
    teacher_model: str = field(default="smollm2-135m")
    teacher_prompt: str = field(default="binary")
    teacher_args: list[str] = field(
        default_factory=list, metadata={"help": "Extra data.label flags for the teacher."}
    )
    # Data
    max_pairs_per_query: int | None = field(
        default=30, metadata={"help": "Pairs kept per query (time budget)."}
    )
    validation_size: float = field(default=0.2)
    test_size: float = field(default=0.2)
    balance: str = field(default="none")
    seed: int = field(default=42)
    # Student
    student: str = field(default="smollm2-135m", metadata={"help": "Student model name or path."})
    train_config: str = field(default="train/configs/smollm2-135m-B-frozen.yaml")
    train_args: list[str] = field(
        default_factory=list, metadata={"help": "Extra `python -m train` flags."}
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
    rerank: str = field(
        default="dense", metadata={"help": "Which run the grader reranks (empty: none)."}
    )
    batch_size: int = field(default=32)


class StageFailed(Exception):
    pass


@dataclass
class Stage:
    name: str
    output: Path
    command: list[str]
    launcher: list[str] | None = None


class Pipeline:
    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self.root = Path(config.run_dir)
        self.timings: dict[str, float] = {}

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def run_stage(self, stage: Stage) -> None:
        if stage.output.exists():
            logger.info("stage %s: done already (%s)", stage.name, stage.output)
            self.timings.setdefault(stage.name, 0.0)
            return
        command = (
            [*stage.launcher, "-m", *stage.command]
            if stage.launcher
            else [sys.executable, "-m", *stage.command]
        )
        print(f"\n==> {stage.name}: {shlex.join(command)}", flush=True)
        start = time.perf_counter()
        result = subprocess.run(command, check=False)
        if result.returncode != 0:
            raise RuntimeError(
                f"stage {stage.name} failed (exit {result.returncode}); fix it and re-run to resume"
            )
        if not stage.output.exists():
            raise StageFailed(f"stage {stage.name} finished without writing {stage.output}")
        self.timings[stage.name] = round(time.perf_counter() - start, 1)

    def stages(self) -> list[Stage]:
        c = self.config
        label_common = ["--collection", c.collection, "--pool_from_qrels", "true"]
        if c.teacher_backend == "qrels":
            teacher = ["--backend", "qrels", "--qrels", c.qrels]
            if c.grade_map:
                teacher += ["--grade_map", c.grade_map]
        else:
            teacher = [
                "--backend",
                c.teacher_backend,
                "--model",
                c.teacher_model,
                "--prompt",
                c.teacher_prompt,
            ]
        teacher_file = self.path("labels", "teacher.jsonl")
        dataset = self.path("dataset")
        grader = self.path("grader")
        test, validation = str(dataset / "test.jsonl"), str(dataset / "validation.jsonl")
        human = ["--labels", "both", "--qrels", c.qrels]
        if c.grade_map:
            human = ["--labels", "teacher"]  # binary collections: the teacher *is* the human qrels
        stages = [
            Stage("teacher labels", teacher_file, ["data.label", *label_common, *teacher, *c.teacher_args, "--out", str(teacher_file)]),
            Stage(
                "dataset",
                dataset / "manifest.json",
                ["data.build", "--judgments", str(teacher_file), "--out", str(dataset), "--seed", str(c.seed),
                 "--validation_size", str(c.validation_size), "--test_size", str(c.test_size), "--balance", c.balance,
                 "--save_dataset", "false"]
                + (["--max_pairs_per_query", str(c.max_pairs_per_query)] if c.max_pairs_per_query else []),
            ),
            Stage(
                "train",
                grader / "grader_config.json",
                ["train", "--config", c.train_config, "--dataset", str(dataset), "--output_dir", str(grader),
                 "--model_name_or_path", c.student, "--max_length", str(c.max_length), "--report_to", "none",
                 "--seed", str(c.seed), *c.train_args],
                launcher=shlex.split(c.train_launcher) if c.train_launcher else None,
            ),
            Stage(
                "evaluate grader",
                self.path("eval", "grader", "metrics.json"),
                ["eval.checkpoint", "--model", str(grader), "--data", test, "--calibration_data", validation, *human,
                 "--out", str(self.path("eval", "grader")), "--name", f"{Path(c.student).name} grader (ours)",
                 "--batch_size", str(c.batch_size)],
            ),
        ]  # fmt: skip
        if c.zero_shot:
            stages.append(
                Stage(
                    "evaluate zero-shot student",
                    self.path("eval", "zero-shot", "metrics.json"),
                    [
                        "eval.checkpoint",
                        "--model",
                        c.student,
                        "--zero_shot",
                        "true",
                        "--data",
                        test,
                        "--calibration_data",
                        validation,
                        *human,
                        "--max_length",
                        str(c.max_length),
                        "--out",
                        str(self.path("eval", "zero-shot")),
                        "--name",
                        f"{Path(c.student).name} zero-shot",
                        "--batch_size",
                        str(c.batch_size),
                    ],
                )
            )
        if c.judge_model:
            judge_file = self.path("labels", "judge.jsonl")
            stages += [
                Stage(
                    "LLM judge labels",
                    judge_file,
                    ["data.label", "--pairs", test, "--sample", str(c.judge_sample), "--seed", str(c.seed),
                     "--backend", "hf", "--model", c.judge_model, "--prompt", c.judge_prompt, "--out", str(judge_file)],
                ),
                Stage(
                    "evaluate LLM judge",
                    self.path("eval", "judge", "metrics.json"),
                    ["eval.checkpoint", "--judgments", str(judge_file), "--data", test, *human,
                     "--out", str(self.path("eval", "judge")), "--name", f"{Path(c.judge_model).name} judge ({c.judge_prompt})"],
                ),
            ]  # fmt: skip
        export = self.path("export")
        candidates = self.path("candidates")
        runs = [str(candidates / f"{name}.trec") for name in c.retrievers]
        stages += [
            Stage(
                "export",
                export / "export_check.json",
                ["models.export", "--checkpoint", str(grader), "--out", str(export),
                 "--metrics", str(self.path("eval", "grader", "metrics.json")), "--pairs", test],
            ),
            Stage(
                "retrieval runs",
                candidates / "candidates.json",
                ["data.candidates", "--collection", c.collection, "--retrievers", *c.retrievers, "--k", str(max(c.k, 10)),
                 "--out", str(candidates), "--judged_queries_only", "true"],
            ),
        ]  # fmt: skip
        if c.rerank:
            reranked = candidates / f"{c.rerank}-grader.trec"
            stages.append(
                Stage(
                    "grader rerank",
                    reranked,
                    [
                        "eval.rerank",
                        "--run",
                        str(candidates / f"{c.rerank}.trec"),
                        "--corpus",
                        c.collection,
                        "--grader",
                        str(export),
                        "--k",
                        str(c.k),
                        "--out",
                        str(reranked),
                    ],
                )
            )
            runs.append(str(reranked))
        stages += [
            Stage(
                "metric pipeline",
                self.path("search", "metrics.json"),
                ["eval.search", "--run", runs[0], "--compare", *runs[1:], "--corpus", c.collection,
                 "--labeler", f"grader:{export}", "--k", str(c.k), "--out", str(self.path("search")), "--label_cache", str(self.path("label-cache"))],
            ),
            Stage(
                "ranking agreement",
                self.path("agreement", "agreement.json"),
                ["eval.agreement", "--runs", *runs, "--corpus", c.collection, "--labelers", f"grader:{export}",
                 *([f"judgments:{self.path('labels', 'teacher.jsonl')}"] if c.teacher_backend != "qrels" else []),
                 "--reference", f"qrels:{c.qrels}", "--metric", f"ndcg@{c.k}", "--k", str(c.k),
                 "--out", str(self.path("agreement")), "--label_cache", str(self.path("label-cache"))],
            ),
        ]  # fmt: skip
        return stages

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
        return summary

    def summarise(self, seconds: float) -> dict[str, Any]:
        rows = []
        for name in ("zero-shot", "judge", "grader"):
            path = self.path("eval", name, "metrics.json")
            if not path.exists():
                continue
            result = json.loads(path.read_text())
            for source, entry in result["metrics"].items():
                metrics = entry.get("at_validation_threshold", entry["at_0.5"])
                rows.append({"model": result["name"], "labels": source, **{k: metrics[k] for k in
                             ("pairs", "accuracy", "precision", "recall", "f1", "kappa", "roc_auc", "threshold")}})  # fmt: skip
        search = json.loads(self.path("search", "metrics.json").read_text())
        agreement = json.loads(self.path("agreement", "agreement.json").read_text())
        manifest = json.loads(self.path("dataset", "manifest.json").read_text())
        return {
            "run_dir": str(self.root),
            "seconds": round(seconds, 1),
            "stage_seconds": self.timings,
            "dataset": manifest["counts"],
            "classification": rows,
            "search": search["mean"],
            "agreement": agreement,
            "export": str(self.path("export")),
        }


def report_markdown(summary: dict[str, Any]) -> str:
    lines = [
        "# Main job report",
        "",
        f"Run directory `{summary['run_dir']}`; total {summary['seconds']} s.",
        "",
    ]
    lines += ["## Held-out queries: classification", "",
              "| model | labels | pairs | accuracy | precision | recall | F1 | κ | ROC-AUC | threshold |",
              "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in summary["classification"]:
        auc = "–" if row["roc_auc"] is None else f"{row['roc_auc']:.3f}"
        lines.append(
            f"| {row['model']} | {row['labels']} | {row['pairs']} | {row['accuracy']:.3f} | {row['precision']:.3f} | "
            f"{row['recall']:.3f} | {row['f1']:.3f} | {row['kappa']:.3f} | {auc} | {row['threshold']:.3f} |"
        )
    lines += ["", "Thresholds and temperatures were fitted on the validation split.", "",
              "## Retrieval runs labelled by the grader", ""]  # fmt: skip
    metrics = sorted(next(iter(summary["search"].values())))
    lines += ["| run | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
    for run, values in summary["search"].items():
        lines.append(f"| {run} | " + " | ".join(f"{values[m]:.3f}" for m in metrics) + " |")
    agreement = summary["agreement"]
    lines += ["", f"## System ranking agreement ({agreement['metric']})", "",
              "| run | " + " | ".join(agreement["scores"]) + " |", "|---|" + "---|" * len(agreement["scores"])]  # fmt: skip
    for run in agreement["reference_ranking"]:
        lines.append(
            f"| {run} | "
            + " | ".join(f"{scores[run]:.3f}" for scores in agreement["scores"].values())
            + " |"
        )
    for spec, entry in agreement["agreement"].items():
        lines.append(
            f"\nKendall's τ ({spec} vs {agreement['reference']}): {entry['kendall_tau']:.3f}"
        )
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
