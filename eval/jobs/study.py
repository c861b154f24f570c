"""Quality study: every configured grader and baseline over query-grouped cross-validation folds.

    relevance-grader study --config eval/configs/study.yaml
    relevance-grader study --config eval/configs/study.yaml --folds 3 --models bm25 cosine frozen=train/configs/smollm2-135m-B-frozen.yaml
    relevance-grader study --dataset runs/main/dataset --models bm25 cosine ql=train/configs/smollm2-135m-ql.yaml

The folds are ``data.build --folds``'s: the collection's judged pool (labelled by its qrels, as
``data.label --pool_from_qrels`` does for the main job), capped per query and dealt into
``folds`` groups of queries, or a dataset the main job built (``--dataset``). For each fold, the
fold's queries test and the others train (a share of them, also by query, is the validation split:
model selection, threshold and calibration are fitted there, never on the test fold). Every model
row is scored on exactly the same test pairs:

- ``bm25``, ``cosine``: the untrained baselines (eval.baselines);
- ``zero-shot``: the student's P(yes) with the grader's prompt;
- ``NAME=CONFIG.yaml``: a grader trained with ``relevance-grader train``'s config plus
  ``train_args``;
- ``NAME=judgments:FILE``: a judge's labels (e.g. the embedded LLM judge's), where it judged;
- ``NAME=grader:PATH``: a grader trained elsewhere (an export or checkpoint, e.g. on a QA mix that
  holds none of the collection's queries), scored on each fold's test pairs with its threshold and
  temperature fitted on the fold's validation pairs, as every row's are.

Pooled over the folds (``eval.crossval``): each model's out-of-fold metrics and each grader's
paired per-query ROC-AUC difference to every baseline with a 95% interval. A learning curve trains
``learning_curve_model`` on growing shares of each fold's training queries. Writes
``out/study.md``, ``out/study.json``, plots, and per fold and model the usual ``metrics.json`` and
``predictions.jsonl`` (each trained grader in ``fold-K/NAME/grader``). Finished folds and models
are skipped on a re-run (fingerprinted like the main job's stages); the frozen bottom's states
are computed once per pair for all folds and shared with the main job (the state cache,
``models.state_cache``), and graders trained on them are scored from them too.
"""

from __future__ import annotations

import json
import logging
import random
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.cli import check_choices, choice, parse_config, run_main, split_flags
from core.errors import InputError
from core.io import (
    atomic_writer,
    fingerprint,
    read_records,
    sha256_path,
    write_jsonl,
)
from core.job_stages import JobConfig
from core.records import DEFAULT_RELEVANCE_THRESHOLD, Judgment
from data.build import DatasetManifest
from data.splits import cap_per_query, held_out_queries, queries_for_share, relevant_share
from eval.report.study import study_markdown, write_plots
from measure.classification.baselines import BASELINES
from measure.classification.checkpoint import (
    LABEL_SOURCES,
    CheckpointEvalConfig,
    CheckpointMetrics,
    Scorer,
    evaluate,
)
from measure.classification.crossval import CrossValidationRecord, cross_validate
from measure.classification.summaries import (
    METRICS,
    CurvePoint,
    FoldResult,
    MeanSd,
    ModelSummary,
    StudySummary,
)
from models.builder import GraderModelConfig
from train.recipes import recipe_for

logger = logging.getLogger(__name__)


@dataclass
class StudyConfig:
    collection: str = field(default="data/collections/trec-dl-2019-passage")
    qrels: str | None = field(
        default=None, metadata={"help": "Human judgments (default: the collection's qrels)."}
    )
    out: str = field(default="runs/study")
    dataset: str | None = field(
        default=None,
        metadata={
            "help": "Folds written by `data.build --folds` (the main job's); default: the "
            "collection's judged pool, labelled by its qrels and split here (folds, "
            "max_pairs_per_query, validation_size and train_only then apply)."
        },
    )
    folds: int = field(default=5, metadata={"help": "Query-grouped folds (>= 2)."})
    max_pairs_per_query: int = field(
        default=40, metadata={"help": "Judged pairs kept per query, sampled (0: all)."}
    )
    validation_size: float = field(
        default=0.2,
        metadata={
            "help": "Each fold's validation queries: a share of its training queries, or a "
            "number when >= 1."
        },
    )
    models: list[str] = field(
        default_factory=lambda: ["bm25", "cosine", "zero-shot"],
        metadata={
            "help": "bm25, cosine, zero-shot, NAME=TRAIN_CONFIG.yaml (a grader trained per fold), "
            "NAME=judgments:FILE (a judge's labels, read where they exist) and NAME=grader:PATH "
            "(a grader trained elsewhere, calibrated per fold) entries."
        },
    )
    train_only: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Judgments from other sources (other collections, relevance-grader synthesize) "
            "added to every fold's train split."
        },
    )
    real_training_queries: bool = field(
        default=True,
        metadata={
            "help": "false: train on the train_only judgments alone (a share of their queries "
            "validates) and test on every judged query of the collection, in one fold."
        },
    )
    student: str = field(default="smollm2-135m")
    max_length: int = field(default=192)
    train_args: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Extra `relevance-grader train` flags for every model, quoted: "
            '"--labels graded".'
        },
    )
    learning_curve: list[float] = field(
        default_factory=list,
        metadata={"help": "Shares of training queries (the full set is the main row)."},
    )
    learning_curve_model: str | None = field(
        default=None, metadata={"help": "Which trained model the curve uses (default: the last)."}
    )
    learning_curve_folds: int = field(
        default=0, metadata={"help": "Folds that get the learning curve (0: all; time budget)."}
    )
    train_launcher: str | None = field(
        default=None,
        metadata={
            "help": "Launcher of each fold's training, e.g. \"accelerate launch --config_file "
            'accelerate_config.yaml" (default: in this process).'
        },
    )
    label_threshold: int = field(default=DEFAULT_RELEVANCE_THRESHOLD)
    labels: str = choice(
        "teacher",
        LABEL_SOURCES,
        "Reference of the rows: the judgments' own labels (teacher), or human qrels (--qrels).",
    )
    batch_size: int = field(default=32)
    seed: int = field(default=42)

    def __post_init__(self) -> None:
        check_choices(self)
        self.train_args = split_flags(self.train_args)
        if self.folds < 2:
            raise InputError(f"folds: expected >= 2, got {self.folds}")
        if self.validation_size <= 0:
            raise InputError(f"validation_size: expected > 0, got {self.validation_size}")
        if self.max_pairs_per_query < 0:
            raise InputError(f"max_pairs_per_query: expected >= 0, got {self.max_pairs_per_query}")
        for spec in self.models:
            if spec not in (*BASELINES, "zero-shot") and "=" not in spec:
                raise InputError(
                    f"models: {spec!r} is not bm25, cosine, zero-shot, NAME=TRAIN_CONFIG.yaml, "
                    "NAME=judgments:FILE or NAME=grader:PATH"
                )
        if self.labels != "teacher" and not self.qrels:
            raise InputError(f"labels: {self.labels} needs --qrels (the human judgments)")
        if any(not 0 < share < 1 for share in self.learning_curve):
            raise InputError(
                f"learning_curve: shares must lie in (0, 1), got {self.learning_curve}"
            )
        if not self.real_training_queries and not self.train_only:
            raise InputError("real_training_queries: false needs train_only judgments to train on")
        trained = self.trained_models()
        if self.learning_curve_model and self.learning_curve_model not in trained:
            raise InputError(f"learning_curve_model: {self.learning_curve_model!r} is not trained")

    def graders(self) -> list[str]:
        """The rows paired with the baselines: the graders trained per fold and those trained
        elsewhere (not the judges' labels)."""
        return [
            spec.partition("=")[0]
            for spec in self.models
            if "=" in spec and not spec.partition("=")[2].startswith("judgments:")
        ]

    def trained_models(self) -> dict[str, str]:
        pairs = (spec.split("=", 1) for spec in self.models if "=" in spec)
        return {
            name: source
            for name, source in pairs
            if not source.startswith(("judgments:", "grader:"))
        }


def fold_folders(dataset: Path) -> list[Path]:
    """The ``fold-K`` folders of a ``data.build --folds`` output, in order."""
    folders = sorted(dataset.glob("fold-*"), key=lambda p: int(p.name.split("-")[1]))
    if len(folders) < 2 or not all((f / "manifest.json").exists() for f in folders):
        raise FileNotFoundError(
            f"dataset: {dataset} holds no finished cross-validation folds (relevance-grader build "
            "--folds N writes fold-0 ... fold-N-1)"
        )
    return folders


class Study:
    def __init__(self, config: StudyConfig) -> None:
        self.config = config
        self.root = Path(config.out)
        self.folders: list[Path] = []
        self.baseline_tables: dict[str, dict[tuple[str, str], float]] = {}
        self.extra_train: list[dict[str, Any]] = []
        for path in config.train_only:
            self.extra_train += [
                j.model_dump(exclude_none=True) for j in read_records(path, Judgment) if j.ok
            ]

    def judged_pool(self) -> Path:
        """The collection's judged pool labelled by its qrels, as ``data.label`` writes it for the
        main job (the same judgments, so the same folds for the same settings)."""
        from data.judges.backends import JudgeConfig
        from data.label import LabelConfig, label

        c = self.config
        out = self.root / "pool" / "judgments.jsonl"
        label(
            LabelConfig(collection=c.collection, pool_from_qrels=True, out=str(out)),
            JudgeConfig(backend="qrels", qrels=c.qrels or _collection_qrels(c.collection)),
        )
        return out

    def build_folds(self) -> list[Path]:
        """``data.build --folds``: the judged pool capped per query and dealt into query folds."""
        from data.build import BuildConfig, build_dataset

        c = self.config
        build_dataset(
            BuildConfig(
                judgments=[str(self.judged_pool())],
                train_only=c.train_only,
                out=str(self.root / "dataset"),
                label_threshold=c.label_threshold,
                validation_size=c.validation_size,
                folds=c.folds,
                max_pairs_per_query=c.max_pairs_per_query or None,
                seed=c.seed,
                save_dataset=False,
                overwrite=True,
            )
        )
        return fold_folders(self.root / "dataset")

    def other_source_fold(self) -> list[Path]:
        """One fold: train and validation from the other sources' judgments alone, split by
        query; every judged query of the collection tests."""
        c = self.config
        folder = self.root / "fold-0" / "data-all"
        shares = relevant_share(self.extra_train)
        validation = set(
            held_out_queries(shares, queries_for_share(len(shares), c.validation_size), c.seed)
        )
        splits = {
            "train": [r for r in self.extra_train if r["qid"] not in validation],
            "validation": [r for r in self.extra_train if r["qid"] in validation],
            "test": read_jsonl_rows(self.judged_pool()),
        }
        if c.max_pairs_per_query:
            splits["test"] = cap_per_query(splits["test"], c.max_pairs_per_query, c.seed)
        for name, rows in splits.items():
            write_jsonl(folder / f"{name}.jsonl", rows)
        queries = {name: sorted({r["qid"] for r in rows}) for name, rows in splits.items()}
        DatasetManifest.of({"queries": queries}).write(folder / DatasetManifest.FILE)
        return [folder]

    def curve_fold(self, data: Path, fold: int, share: float) -> Path:
        """Fold ``data`` with a ``share`` of its own training queries (and of the other
        sources' pairs), validation and test unchanged."""
        c = self.config
        folder = self.root / f"fold-{fold}" / f"data-share-{share:g}"
        extra_queries = {r["qid"] for r in self.extra_train}
        train = read_jsonl_rows(data / "train.jsonl")
        own = [r for r in train if r["qid"] not in extra_queries]
        shares = relevant_share(own)
        kept = set(held_out_queries(shares, queries_for_share(len(shares), share), c.seed + fold))
        extra = [r for r in train if r["qid"] in extra_queries]
        extra = random.Random(c.seed + fold).sample(extra, round(len(extra) * share))
        write_jsonl(folder / "train.jsonl", [r for r in own if r["qid"] in kept] + extra)
        for name in ("validation", "test", "manifest"):
            suffix = ".json" if name == "manifest" else ".jsonl"
            shutil.copyfile(data / f"{name}{suffix}", folder / f"{name}{suffix}")
        return folder

    def run_model(self, spec: str, data: Path, out: Path) -> CheckpointMetrics:
        """Train (if needed) and evaluate one model on one fold's data; skipped when done."""
        c = self.config
        name, _, source = spec.partition("=")
        stamp = fingerprint(
            spec,
            *c.train_args,
            str(c.max_length),
            c.student,
            c.labels,
            c.qrels or "",
            sha256_path(data),
            sha256_path(source.partition(":")[2])
            if source.startswith(("judgments:", "grader:"))
            else "",
        )
        done = out / CheckpointMetrics.FILE
        if done.exists():
            cached = CheckpointMetrics.read(done)
            if cached.study_fingerprint == stamp:
                return cached
        start = time.perf_counter()
        evaluation, scorer = self.evaluation(name, source, data, out)
        result = evaluate(evaluation, scorer)
        result.study_fingerprint = stamp
        result.seconds = round(time.perf_counter() - start, 1)
        result.write(done)
        return result

    def evaluation(
        self, name: str, source: str, data: Path, out: Path
    ) -> tuple[CheckpointEvalConfig, Scorer | None]:
        """How one model is evaluated on a fold (training a grader first)."""
        c = self.config
        common = {
            "data": str(data / "test.jsonl"),
            "calibration_data": str(data / "validation.jsonl"),
            "out": str(out),
            "name": name,
            "batch_size": c.batch_size,
            "plots": False,
            "labels": c.labels,
            "qrels": c.qrels if c.labels != "teacher" else None,
        }
        if name in BASELINES:
            evaluation = CheckpointEvalConfig(baseline=name, collection=c.collection, **common)
            return evaluation, self.baseline_scorer(name)
        if name == "zero-shot":
            return CheckpointEvalConfig(
                model=c.student, zero_shot=True, max_length=c.max_length, **common
            ), None
        if source.startswith("judgments:"):  # a judge's labels, read at its own 0.5
            common.pop("calibration_data")
            return CheckpointEvalConfig(judgments=source[len("judgments:") :], **common), None
        if source.startswith("grader:"):  # trained elsewhere: calibrated on the fold, not trained
            return CheckpointEvalConfig(model=source[len("grader:") :], **common), None
        grader, settings = self.train_grader(source, data, out / "grader")
        # The states training stored in the state cache: no forward pass again (None: it is off).
        scorer = recipe_for(settings.model.family).state_scorer(grader, settings)
        return CheckpointEvalConfig(model=str(grader), **common), scorer

    def baseline_scorer(self, name: str) -> Scorer:
        """A baseline's raw score of each pair, computed once for every fold's validation and
        test pairs (a pair validates in one fold and tests in another; the corpus statistics
        and the embedder load once)."""
        if name not in self.baseline_tables:
            from measure.classification.baselines import baseline_scores
            from measure.classification.checkpoint import corpus_texts

            pairs = {
                (r["qid"], r["doc_id"]): r
                for folder in self.folders
                for split in ("validation", "test")
                for r in read_jsonl_rows(folder / f"{split}.jsonl")
            }
            rows = list(pairs.values())
            scores = baseline_scores(
                name,
                [r["query"] for r in rows],
                [r["text"] for r in rows],
                [r.get("title") for r in rows],
                corpus_texts(self.config.collection),
            )
            self.baseline_tables[name] = dict(zip(pairs, scores.tolist(), strict=True))
        table = self.baseline_tables[name]
        return lambda records: np.array([table[(r.qid, r.doc_id)] for r in records])

    def train_grader(self, train_config: str, data: Path, grader: Path) -> tuple[Path, Any]:
        """Train one fold's grader from one config file: the recipe's YAML with this fold's
        values (typed, never flags), written beside the checkpoint, which the training reads in
        this process or, under a launcher, in its own; --train_args, the user's flags, last."""
        import yaml

        from train.config import TrainingSettings
        from train.train import DataConfig, GraderTrainingArguments, LossConfig, train

        c = self.config
        values = yaml.safe_load(Path(train_config).read_text(encoding="utf-8")) or {}
        values.update(
            dataset=str(data),
            output_dir=str(grader),
            model_name_or_path=c.student,
            max_length=c.max_length,
            report_to="none",
            seed=c.seed,
            save_strategy="no",
            load_best_model_at_end=False,
            disable_tqdm=True,
        )
        fold_config = grader.parent / f"{grader.name}-training.yaml"
        fold_config.parent.mkdir(parents=True, exist_ok=True)
        fold_config.write_text(yaml.safe_dump(values, sort_keys=False), encoding="utf-8")
        args = ["--config", str(fold_config), *c.train_args]
        parsed = parse_config(
            [GraderModelConfig, DataConfig, LossConfig, GraderTrainingArguments], args
        )
        if c.train_launcher:  # several processes (accelerate launch, torchrun)
            command = [*shlex.split(c.train_launcher), "-m", "train", *args]
            subprocess.run(command, check=True)
        else:
            train(*parsed)
        return grader, TrainingSettings(*parsed)

    def folds(self) -> list[Path]:
        c = self.config
        if c.dataset:
            return fold_folders(Path(c.dataset))
        return self.build_folds() if c.real_training_queries else self.other_source_fold()

    def run(self) -> StudySummary:
        c = self.config
        self.root.mkdir(parents=True, exist_ok=True)
        JobConfig.of(asdict(c)).write(self.root / JobConfig.FILE)
        folders = self.folders = self.folds()
        trained = c.trained_models()
        curve_model = c.learning_curve_model or (list(trained)[-1] if trained else None)
        per_fold: list[FoldResult] = []
        curve: list[CurvePoint] = []
        outputs: list[dict[str, Path]] = []
        for fold, data in enumerate(folders):
            outputs.append({})
            for spec in c.models:
                name = spec.partition("=")[0]
                logger.info("fold %d/%d: %s", fold + 1, len(folders), name)
                outputs[-1][name] = self.root / f"fold-{fold}" / name
                result = self.run_model(spec, data, outputs[-1][name])
                per_fold.append(FoldResult(fold=fold, model=name, **row_metrics(result, c.labels)))
            if self.curve_wanted(curve_model, fold):
                curve += self.learning_curve(curve_model, data, fold, per_fold)
        cross = cross_validate(outputs, c.graders(), _baselines(c.models), row_source(c.labels))
        summary = summarise(per_fold, curve, c, folders, cross)
        summary.write(self.root / StudySummary.FILE)
        with atomic_writer(self.root / "study.md") as handle:
            handle.write(study_markdown(summary))
        write_plots(summary, self.root)
        return summary

    def curve_wanted(self, curve_model: str | None, fold: int) -> bool:
        c = self.config
        return bool(
            c.real_training_queries
            and c.learning_curve
            and curve_model
            and (not c.learning_curve_folds or fold < c.learning_curve_folds)
        )

    def learning_curve(
        self, model: str, data: Path, fold: int, per_fold: list[FoldResult]
    ) -> list[CurvePoint]:
        spec = f"{model}={self.config.trained_models()[model]}"
        points = []
        for share in self.config.learning_curve:
            subset = self.curve_fold(data, fold, share)
            out = self.root / f"fold-{fold}" / f"{model}-share-{share:g}"
            result = self.run_model(spec, subset, out)
            roc_auc = row_metrics(result)["roc_auc"]
            points.append(self.curve_point(fold, share, subset, roc_auc))
        full = next(r for r in per_fold if r.fold == fold and r.model == model)
        return [*points, self.curve_point(fold, 1.0, data, full.roc_auc)]

    def curve_point(self, fold: int, share: float, data: Path, roc_auc: float | None) -> CurvePoint:
        train_rows = read_jsonl_rows(data / "train.jsonl")
        extra_queries = {r["qid"] for r in self.extra_train}
        own = [r for r in train_rows if r["qid"] not in extra_queries]
        return CurvePoint(
            fold=fold,
            share=share,
            train_queries=len({r["qid"] for r in own}),
            train_pairs=len(train_rows),
            other_collection_pairs=len(train_rows) - len(own),
            roc_auc=roc_auc,
        )


def _collection_qrels(collection: str) -> str:
    from data.beir import find_qrels

    path = find_qrels(Path(collection), None)
    if path is None:
        raise FileNotFoundError(f"collection: {collection} has no qrels (give --qrels)")
    return str(path)


def _baselines(models: Sequence[str]) -> list[str]:
    return [m for m in models if m in BASELINES]


def read_jsonl_rows(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def row_source(labels: str) -> str:
    """Which reference the study's rows read: the human judgments when they are given."""
    return "teacher" if labels == "teacher" else "human"


def row_metrics(result: CheckpointMetrics, labels: str = "teacher") -> dict[str, float | None]:
    """A fold's row (FoldResult's figures) from one model's metrics.json."""
    metrics = result.metrics[row_source(labels)].decided
    # .get: results written before a metric was added lack it (shown as –).
    return {k: metrics.get(k) for k in ("pairs", *METRICS)} | {"seconds": result.seconds}


def summarise(
    per_fold: list[FoldResult],
    curve: list[CurvePoint],
    config: StudyConfig,
    folders: Sequence[Path],
    cross: CrossValidationRecord,
) -> StudySummary:
    models = list(dict.fromkeys(r.model for r in per_fold))
    baselines = [m for m in models if m in BASELINES]
    mean: dict[str, ModelSummary] = {}
    for model in models:
        rows = [r for r in per_fold if r.model == model]
        entry: dict[str, Any] = {}
        for metric in METRICS:
            values = [r.metric(metric) for r in rows if r.metric(metric) is not None]
            entry[metric] = MeanSd(
                mean=float(np.mean(values)) if values else None,
                sd=float(np.std(values, ddof=1)) if len(values) > 1 else None,
            )
        entry["seconds"] = float(np.sum([r.seconds or 0 for r in rows]))
        if model not in BASELINES and baselines:
            entry["beats_baselines_in_folds"] = _wins(rows, per_fold, baselines)
        mean[model] = ModelSummary(**entry)
    manifests = [DatasetManifest.read(folder / DatasetManifest.FILE) for folder in folders]
    test_queries = [len(manifest.queries.get("test", [])) for manifest in manifests]
    manifest = manifests[0]  # the folds' build settings (data.build's, where it built them)
    return StudySummary(
        collection=config.collection,
        folds=len(folders),
        queries_per_fold=test_queries,
        max_pairs_per_query=manifest.config.get("max_pairs_per_query", config.max_pairs_per_query),
        models=mean,
        per_fold=per_fold,
        cross_validation=cross,
        learning_curve=curve,
    )


def _wins(rows: list[FoldResult], per_fold: list[FoldResult], baselines: list[str]) -> str:
    """In how many folds a model's ROC-AUC beats every baseline's: "3/5"."""
    wins = []
    for row in rows:
        others = [r.roc_auc for r in per_fold if r.fold == row.fold and r.model in baselines]
        if row.roc_auc is not None and None not in others:  # a one-class sample
            wins.append(row.roc_auc > max(others))  # type: ignore[type-var]
    return f"{sum(wins)}/{len(wins)}"


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([StudyConfig], args)
    summary = Study(config).run()
    print(study_markdown(summary))
    print(f"wrote {config.out}/study.md, study.json and plots")


if __name__ == "__main__":
    run_main(main)
