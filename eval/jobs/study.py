"""Quality study: every configured grader and baseline over query-grouped cross-validation folds.

    python -m eval.study --config eval/configs/study.yaml
    python -m eval.study --config eval/configs/study.yaml --folds 3 --models bm25 cosine frozen=train/configs/smollm2-135m-B-frozen.yaml

The judged pool of a collection (human qrels as the teacher) is split into ``folds`` groups of
queries. For each fold, the other folds' queries train (a share of them, also by query, is the
validation split: model selection, threshold and calibration are fitted there, never on the test
fold) and the fold's queries test. Every model row is scored on exactly the same test pairs:

- ``bm25``, ``cosine``: the untrained baselines (eval.baselines);
- ``zero-shot``: the student's P(yes) with the grader's prompt;
- ``NAME=CONFIG.yaml``: a grader trained with ``python -m train``'s config plus ``train_args``.

A learning curve trains ``learning_curve_model`` on growing shares of each fold's training
queries. Writes ``out/study.md`` (mean ± sd per metric, per-fold rows, whether a model beats both
baselines in every fold), ``out/study.json``, plots, and per fold and model the usual
``metrics.json``. Finished folds and models are skipped on a re-run (fingerprinted like the main
job's stages); cached states are shared by all folds and with the main job (``state_cache``).
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from data.beir import Collection
from data.cli import cli_args, parse_config, run_main, split_flags
from data.io import (
    atomic_writer,
    fingerprint,
    markdown_table,
    read_records,
    write_json,
    write_jsonl,
)
from data.records import DEFAULT_RELEVANCE_THRESHOLD, Judgment, label_from_grade
from eval.baselines import BASELINES
from eval.checkpoint import CheckpointEvalConfig, Scorer, evaluate
from models.builder import GraderModelConfig
from models.families import CLASSIFIER
from train.cached_states import default_state_cache

logger = logging.getLogger(__name__)
METRICS = ("roc_auc", "query_roc_auc", "pr_auc", "f1", "kappa", "precision", "recall")


@dataclass
class StudyConfig:
    collection: str = field(default="data/collections/trec-dl-2019-passage")
    qrels: str | None = field(
        default=None, metadata={"help": "Human judgments (default: the collection's qrels)."}
    )
    out: str = field(default="runs/study")
    folds: int = field(default=5, metadata={"help": "Query-grouped folds (>= 2)."})
    max_pairs_per_query: int = field(
        default=40, metadata={"help": "Judged pairs kept per query, sampled (0: all)."}
    )
    validation_size: float = field(
        default=0.2, metadata={"help": "Share of each fold's training queries for validation."}
    )
    models: list[str] = field(
        default_factory=lambda: ["bm25", "cosine", "zero-shot"],
        metadata={"help": "bm25, cosine, zero-shot and NAME=TRAIN_CONFIG.yaml entries."},
    )
    train_only: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Judgments from other sources (other collections, data.synthesize) added to "
            "every fold's train split."
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
            "help": 'Extra `python -m train` flags for every model, quoted: "--labels graded".'
        },
    )
    learning_curve: list[float] = field(
        default_factory=lambda: [0.25, 0.5],
        metadata={"help": "Shares of training queries (the full set is the main row)."},
    )
    learning_curve_model: str | None = field(
        default=None, metadata={"help": "Which trained model the curve uses (default: the last)."}
    )
    learning_curve_folds: int = field(
        default=0, metadata={"help": "Folds that get the learning curve (0: all; time budget)."}
    )
    state_cache: str | None = field(
        default=None,
        metadata={
            "help": "Cached bottom-layer states, shared with other runs on this machine "
            "(default: the model cache's states/ folder)."
        },
    )
    label_threshold: int = field(default=DEFAULT_RELEVANCE_THRESHOLD)
    batch_size: int = field(default=32)
    seed: int = field(default=42)

    def __post_init__(self) -> None:
        self.train_args = split_flags(self.train_args)
        if self.folds < 2:
            raise ValueError(f"folds: expected >= 2, got {self.folds}")
        if not 0 < self.validation_size < 1:
            raise ValueError(f"validation_size: expected (0, 1), got {self.validation_size}")
        if self.max_pairs_per_query < 0:
            raise ValueError(f"max_pairs_per_query: expected >= 0, got {self.max_pairs_per_query}")
        for spec in self.models:
            if spec not in (*BASELINES, "zero-shot") and "=" not in spec:
                raise ValueError(
                    f"models: {spec!r} is not bm25, cosine, zero-shot or NAME=TRAIN_CONFIG.yaml"
                )
        if any(not 0 < share < 1 for share in self.learning_curve):
            raise ValueError(
                f"learning_curve: shares must lie in (0, 1), got {self.learning_curve}"
            )
        if not self.real_training_queries and not self.train_only:
            raise ValueError("real_training_queries: false needs train_only judgments to train on")
        trained = self.trained_models()
        if self.learning_curve_model and self.learning_curve_model not in trained:
            raise ValueError(f"learning_curve_model: {self.learning_curve_model!r} is not trained")

    def trained_models(self) -> dict[str, str]:
        return dict(spec.split("=", 1) for spec in self.models if "=" in spec)


def judged_pool(config: StudyConfig) -> list[dict[str, Any]]:
    """The collection's judged pairs as judgments (human grade as the teacher), capped per query."""
    collection = Collection.load(config.collection, config.qrels)
    rng = random.Random(config.seed)
    rows = []
    for qid in sorted(collection.qrels):
        judged = sorted(collection.qrels[qid].items())
        rng.shuffle(judged)
        if config.max_pairs_per_query:
            judged = judged[: config.max_pairs_per_query]
        for doc_id, grade in judged:
            document = collection.corpus[doc_id]
            grade = max(0, min(3, int(grade)))
            rows.append(
                {
                    "qid": qid,
                    "query": collection.queries[qid],
                    "doc_id": doc_id,
                    "text": document.text,
                    "title": document.title or None,
                    "grade": grade,
                    "label": label_from_grade(grade, config.label_threshold),
                }
            )
    return rows


def query_folds(rows: Sequence[dict[str, Any]], folds: int, seed: int) -> list[list[str]]:
    """Queries in ``folds`` groups, stratified by each query's share of relevant pairs."""
    by_query: dict[str, list[int]] = {}
    for row in rows:
        by_query.setdefault(row["qid"], []).append(row["label"])
    if len(by_query) < folds:
        raise ValueError(f"folds: {folds} folds need at least {folds} judged queries")
    rng = random.Random(seed)
    order = sorted(by_query, key=lambda q: (np.mean(by_query[q]), rng.random()))
    groups: list[list[str]] = [[] for _ in range(folds)]
    for i, qid in enumerate(order):  # deal in rank order: every fold spans easy and hard queries
        groups[i % folds].append(qid)
    return groups


def split_queries(qids: Sequence[str], share: float, seed: int) -> tuple[list[str], list[str]]:
    shuffled = sorted(qids)
    random.Random(seed).shuffle(shuffled)
    cut = max(1, round(len(shuffled) * share))
    return shuffled[cut:], shuffled[:cut]


class Study:
    def __init__(self, config: StudyConfig) -> None:
        self.config = config
        self.root = Path(config.out)
        self.state_cache = Path(config.state_cache or default_state_cache())
        self.extra_train: list[dict[str, Any]] = []
        for path in config.train_only:
            self.extra_train += [
                j.model_dump(exclude_none=True) for j in read_records(path, Judgment) if j.ok
            ]

    def write_fold(
        self, rows, fold: int, test_q: list[str], train_q: list[str], tag: str, share: float = 1.0
    ) -> Path:
        folder = self.root / f"fold-{fold}" / f"data-{tag}"
        if not train_q:
            return self.write_other_source_fold(folder, rows, fold, test_q)
        train_only, validation_q = split_queries(
            train_q, self.config.validation_size, self.config.seed + fold
        )
        splits = {
            "train": set(train_only),
            "validation": set(validation_q),
            "test": set(test_q),
        }
        for name, qids in splits.items():
            selected = [r for r in rows if r["qid"] in qids]
            if name == "train":
                extra = self.extra_train
                if share < 1.0:  # the learning curve thins the other collections' pairs alike
                    extra = random.Random(self.config.seed + fold).sample(
                        extra, round(len(extra) * share)
                    )
                selected += extra
            write_jsonl(folder / f"{name}.jsonl", selected)
        write_json(folder / "manifest.json", {name: sorted(q) for name, q in splits.items()})
        return folder

    def write_other_source_fold(self, folder: Path, rows, fold: int, test_q: list[str]) -> Path:
        """Train and validation from the other sources' judgments alone, split by query; every
        judged query of the collection tests."""
        other_q = sorted({r["qid"] for r in self.extra_train})
        train_q, validation_q = split_queries(
            other_q, self.config.validation_size, self.config.seed + fold
        )
        splits = {"train": set(train_q), "validation": set(validation_q)}
        for name, qids in splits.items():
            write_jsonl(folder / f"{name}.jsonl", [r for r in self.extra_train if r["qid"] in qids])
        test = set(test_q)
        write_jsonl(folder / "test.jsonl", [r for r in rows if r["qid"] in test])
        manifest = {name: sorted(q) for name, q in splits.items()} | {"test": sorted(test)}
        write_json(folder / "manifest.json", manifest)
        return folder

    def run_model(self, spec: str, data: Path, out: Path) -> dict[str, Any]:
        """Train (if needed) and evaluate one model on one fold's data; skipped when done."""
        c = self.config
        name, _, train_config = spec.partition("=")
        stamp = fingerprint(
            spec, *c.train_args, str(c.max_length), c.student, (data / "manifest.json").read_text()
        )
        done = out / "metrics.json"
        if done.exists() and json.loads(done.read_text()).get("study_fingerprint") == stamp:
            return json.loads(done.read_text())
        common = {
            "data": str(data / "test.jsonl"),
            "calibration_data": str(data / "validation.jsonl"),
            "out": str(out),
            "name": name,
            "batch_size": c.batch_size,
            "plots": False,
        }
        start = time.perf_counter()
        scorer = None
        if name in BASELINES:
            evaluation = CheckpointEvalConfig(baseline=name, collection=c.collection, **common)
        elif name == "zero-shot":
            evaluation = CheckpointEvalConfig(
                model=c.student, zero_shot=True, max_length=c.max_length, **common
            )
        else:
            from train.train import (
                DataConfig,
                GraderTrainingArguments,
                LossConfig,
                train,
            )

            grader = out / "grader"
            overrides = cli_args(
                dataset=data,
                output_dir=grader,
                model_name_or_path=c.student,
                max_length=c.max_length,
                report_to="none",
                seed=c.seed,
                save_strategy="no",
                load_best_model_at_end=False,
                state_cache=self.state_cache,
                disable_tqdm=True,
            )
            parsed = parse_config(
                [GraderModelConfig, DataConfig, LossConfig, GraderTrainingArguments],
                ["--config", train_config, *overrides, *c.train_args],
            )
            train(*parsed)
            evaluation = CheckpointEvalConfig(model=str(grader), **common)
            model_config, training_args = parsed[0], parsed[3]
            cached = model_config.training_mode.cached_states and training_args.cache_states
            if cached and model_config.family is CLASSIFIER:
                scorer = self.cached_state_scorer(grader, model_config, training_args)
        result = evaluate(evaluation, scorer)
        result["study_fingerprint"] = stamp
        result["seconds"] = round(time.perf_counter() - start, 1)
        write_json(done, result)
        return result

    def cached_state_scorer(self, grader: Path, model_config, training_args) -> Scorer:
        """Scores a frozen / top_layers grader from the shared state cache: the pool's bottom
        layers run once for the whole study, and the top gives the full forward's scores."""
        from models.backbone import split_index
        from models.builder import load_trained, read_grader_config
        from models.input_format import GraderInputFormat, format_pairs
        from models.scoring import relevant_probability
        from train.cached_states import (
            StateCache,
            compute_states,
            resolve_state_dtype,
            state_cache_key,
            top_probabilities,
        )

        model, tokenizer = load_trained(grader)
        model.eval()
        info = read_grader_config(grader)
        fmt = GraderInputFormat.from_dict(info["input_format"])
        first = split_index(model, model_config.trained_layers)
        cache = StateCache(self.state_cache, state_cache_key(model_config.model_name_or_path))
        dtype = resolve_state_dtype(training_args.state_dtype, training_args.device)

        def scorer(records: list[Judgment]) -> np.ndarray:
            ids = format_pairs(
                tokenizer,
                fmt,
                [r.query for r in records],
                [r.text for r in records],
                [r.title for r in records],
            ).input_ids
            states = compute_states(model, ids, first, dtype=dtype, cache=cache)
            return relevant_probability(
                top_probabilities(model, first, states), info.get("relevant_from", 1)
            )

        return scorer

    def run(self) -> dict[str, Any]:
        c = self.config
        self.root.mkdir(parents=True, exist_ok=True)
        write_json(self.root / "config.json", asdict(c))
        rows = judged_pool(c)
        if c.real_training_queries:
            groups = query_folds(rows, c.folds, c.seed)
        else:  # one fold: every judged query tests a grader trained on other sources alone
            groups = [sorted({r["qid"] for r in rows})]
        trained = c.trained_models()
        curve_model = c.learning_curve_model or (list(trained)[-1] if trained else None)
        per_fold: list[dict[str, Any]] = []
        curve: list[dict[str, Any]] = []
        for fold, test_q in enumerate(groups):
            train_q = [q for group in groups if group is not test_q for q in group]
            curve_wanted = c.real_training_queries and c.learning_curve
            data = self.write_fold(rows, fold, test_q, train_q, "all")
            for spec in c.models:
                name = spec.partition("=")[0]
                logger.info("fold %d/%d: %s", fold + 1, len(groups), name)
                result = self.run_model(spec, data, self.root / f"fold-{fold}" / name)
                per_fold.append({"fold": fold, "model": name, **row_metrics(result)})
            if (
                curve_wanted
                and curve_model
                and (not c.learning_curve_folds or fold < c.learning_curve_folds)
            ):
                spec = f"{curve_model}={trained[curve_model]}"
                for share in c.learning_curve:
                    subset, _ = split_queries(train_q, 1 - share, c.seed + 100 + fold)
                    tag = f"share-{share:g}"
                    data_share = self.write_fold(rows, fold, test_q, subset, tag, share)
                    result = self.run_model(
                        spec, data_share, self.root / f"fold-{fold}" / f"{curve_model}-{tag}"
                    )
                    curve.append(curve_point(fold, share, data_share, result))
                full = next(r for r in per_fold if r["fold"] == fold and r["model"] == curve_model)
                curve.append(curve_point(fold, 1.0, data, {"_row": full}))
        summary = summarise(per_fold, curve, c, groups)
        write_json(self.root / "study.json", summary)
        with atomic_writer(self.root / "study.md") as handle:
            handle.write(study_markdown(summary))
        write_plots(summary, self.root)
        return summary


def row_metrics(result: dict[str, Any]) -> dict[str, Any]:
    entry = result["metrics"]["teacher"]
    metrics = entry.get("at_validation_threshold", entry["at_0.5"])
    # .get: results written before a metric was added lack it (shown as –).
    return {k: metrics.get(k) for k in ("pairs", *METRICS)} | {"seconds": result.get("seconds")}


def curve_point(fold: int, share: float, data: Path, result: dict[str, Any]) -> dict[str, Any]:
    train_rows = [json.loads(line) for line in (data / "train.jsonl").open()]
    # Other collections' query ids carry their source as a prefix (data.mix).
    own = [r for r in train_rows if ":" not in r["qid"]]
    metrics = result["_row"] if "_row" in result else row_metrics(result)
    return {
        "fold": fold,
        "share": share,
        "train_queries": len({r["qid"] for r in own}),
        "train_pairs": len(train_rows),
        "other_collection_pairs": len(train_rows) - len(own),
        "roc_auc": metrics["roc_auc"],
    }


def summarise(
    per_fold: list[dict[str, Any]], curve: list[dict[str, Any]], config: StudyConfig, groups
) -> dict[str, Any]:
    models = list(dict.fromkeys(r["model"] for r in per_fold))
    baselines = [m for m in models if m in BASELINES]
    mean: dict[str, dict[str, Any]] = {}
    for model in models:
        rows = [r for r in per_fold if r["model"] == model]
        entry: dict[str, Any] = {}
        for metric in METRICS:
            values = [r[metric] for r in rows if r[metric] is not None]
            entry[metric] = {
                "mean": float(np.mean(values)) if values else None,
                "sd": float(np.std(values, ddof=1)) if len(values) > 1 else None,
            }
        entry["seconds"] = float(np.sum([r["seconds"] or 0 for r in rows]))
        if model not in BASELINES and baselines:
            wins = []
            for row in rows:
                best = max(
                    r["roc_auc"]
                    for r in per_fold
                    if r["fold"] == row["fold"] and r["model"] in baselines
                )
                wins.append(row["roc_auc"] > best)
            entry["beats_baselines_in_folds"] = f"{sum(wins)}/{len(wins)}"
        mean[model] = entry
    return {
        "collection": config.collection,
        "folds": len(groups),
        "queries_per_fold": [len(g) for g in groups],
        "max_pairs_per_query": config.max_pairs_per_query,
        "models": mean,
        "per_fold": per_fold,
        "learning_curve": curve,
    }


def _cell(entry: dict[str, Any]) -> str:
    if entry["mean"] is None:
        return "–"
    return f"{entry['mean']:.3f}" + (f" ± {entry['sd']:.3f}" if entry["sd"] is not None else "")


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def study_markdown(summary: dict[str, Any]) -> str:
    lines = [
        f"# Quality study: {summary['collection']}",
        "",
        f"{summary['folds']} query-grouped folds (test queries per fold: "
        f"{summary['queries_per_fold']}), at most {summary['max_pairs_per_query'] or 'all'} "
        "judged pairs per query; human judgments, relevant = grade ≥ 2. Thresholds, temperatures "
        "and model selection were fitted on validation queries inside each fold's training "
        "queries. Mean ± sd over folds.",
        "",
        markdown_table(
            ["model", *METRICS, "beats BM25 and cosine (folds)", "seconds"],
            [
                [
                    model,
                    *(_cell(entry[m]) for m in METRICS),
                    entry.get("beats_baselines_in_folds", "(baseline)"),
                    f"{entry['seconds']:.0f}",
                ]
                for model, entry in summary["models"].items()
            ],
        ),
        "## Per fold (ROC-AUC)",
        "",
    ]
    models = list(summary["models"])
    by_fold = {(r["fold"], r["model"]): r["roc_auc"] for r in summary["per_fold"]}
    lines.append(
        markdown_table(
            ["fold", *models],
            [
                [fold, *(_number(by_fold.get((fold, model))) for model in models)]
                for fold in range(summary["folds"])
            ],
        )
    )
    if summary["learning_curve"]:
        rows = []
        for share in sorted({p["share"] for p in summary["learning_curve"]}):
            points = [p for p in summary["learning_curve"] if p["share"] == share]
            aucs = [p["roc_auc"] for p in points]
            rows.append(
                [
                    f"{share:g}",
                    f"{np.mean([p['train_queries'] for p in points]):.1f}",
                    f"{np.mean([p['train_pairs'] for p in points]):.0f}",
                    f"{np.mean(aucs):.3f} ± {np.std(aucs, ddof=1) if len(aucs) > 1 else 0:.3f}",
                ]
            )
        lines += [
            "## Learning curve (held-out ROC-AUC by training share)",
            "",
            markdown_table(
                ["share", "training queries (mean)", "training pairs (mean)", "ROC-AUC"], rows
            ),
        ]
    return "\n".join(lines)


def write_plots(summary: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(summary["models"])
    means = [summary["models"][m]["roc_auc"]["mean"] or 0 for m in models]
    sds = [summary["models"][m]["roc_auc"]["sd"] or 0 for m in models]
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(models)), 3.5))
    ax.bar(
        models,
        means,
        yerr=sds,
        capsize=4,
        color=["#999" if m in BASELINES else "#3b6" for m in models],
    )
    ax.set_ylabel("held-out ROC-AUC (mean ± sd over folds)")
    ax.set_ylim(0.4, 1.0)
    ax.axhline(0.5, color="k", lw=0.5, ls=":")
    fig.tight_layout()
    fig.savefig(out / "study_auc.png", dpi=120)
    plt.close(fig)
    if summary["learning_curve"]:
        fig, ax = plt.subplots(figsize=(4.5, 3.5))
        points = summary["learning_curve"]
        ax.scatter([p["train_pairs"] for p in points], [p["roc_auc"] for p in points])
        ax.set_xlabel("training pairs")
        ax.set_ylabel("held-out ROC-AUC")
        fig.tight_layout()
        fig.savefig(out / "learning_curve.png", dpi=120)
        plt.close(fig)


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([StudyConfig], args)
    summary = Study(config).run()
    print(study_markdown(summary))
    print(f"wrote {config.out}/study.md, study.json and plots")


if __name__ == "__main__":
    run_main(main)
