"""Evaluate a grader checkpoint, a zero-shot causal LM or a judge's judgments on a split.

    relevance-grader evaluate --model runs/grader --data runs/dataset/test.jsonl \\
        --calibration_data runs/dataset/validation.jsonl --labels both \\
        --qrels data/collections/trec-dl-2019-passage/qrels.tsv --out runs/eval/grader
    relevance-grader evaluate --model smollm2-135m --zero_shot true --data runs/dataset/test.jsonl --out runs/eval/zero-shot
    relevance-grader evaluate --judgments runs/labels/smollm2.jsonl --data runs/dataset/test.jsonl --out runs/eval/judge

Writes ``OUT/predictions.jsonl`` (per pair: probability, predicted label, reference labels),
``OUT/metrics.json`` and plots (PR, ROC, confusion matrix, reliability diagram, score histogram).
Metrics: accuracy, precision, recall, F1, Cohen's κ, ROC-AUC (pooled, and the mean over queries
of each query's own), PR-AUC, ECE and the confusion matrix, at 0.5 and at the threshold chosen on
``--calibration_data`` (never on the evaluated split); the evaluated split's own best-F1 threshold
is reported as an oracle only. With ``--calibration_data``, a temperature is fitted there too and
both are stored for export; a grader whose training stored its validation scores is not scored
there again (``models.grader.VALIDATION_SCORES``). A graded grader's 0-3 grades (decided at that
threshold) are also compared with the reference grades: accuracy, mean absolute error and
quadratic-weighted κ (``metrics.SOURCE.grades``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from core.artifacts import Artifact
from core.cli import bounded, check_choices, choice, parse_config, run_main
from core.errors import InputError
from core.io import read_records, write_jsonl
from core.metrics import Calibration, best_f1_threshold, binary_metrics, fit_temperature
from core.records import DEFAULT_RELEVANCE_THRESHOLD, Judgment, label_from_grade
from data.beir import graded_qrels, read_qrels
from measure.classification.baselines import BASELINES
from models.grader_config import Calibration as StoredCalibration

logger = logging.getLogger(__name__)
LABEL_SOURCES = ("teacher", "human", "both")


@dataclass
class CheckpointEvalConfig:
    data: str = field(
        default="runs/dataset/test.jsonl", metadata={"help": "Judgments JSONL to evaluate on."}
    )
    out: str | None = field(
        default=None,
        metadata={
            "help": "Output folder (default: runs/eval/grader, runs/eval/BASELINE or "
            "runs/eval/judgments, so a baseline's evaluation never replaces the grader's)."
        },
    )
    model: str | None = field(
        default=None, metadata={"help": "Grader checkpoint, or a causal LM with --zero_shot."}
    )
    zero_shot: bool = field(
        default=False, metadata={"help": "Judge by P(yes) with the grader's prompt."}
    )
    judgments: str | None = field(
        default=None, metadata={"help": "Evaluate a judge's judgments file instead."}
    )
    baseline: str | None = choice(
        None,
        [None, *BASELINES],
        "Evaluate an untrained baseline instead (needs --calibration_data to map scores to P).",
    )
    collection: str | None = field(
        default=None,
        metadata={"help": "BEIR folder whose corpus gives BM25 its document frequencies."},
    )
    calibration_data: str | None = field(
        default=None,
        metadata={
            "help": "Validation judgments: fit temperature and threshold here (both classes "
            "needed)."
        },
    )
    labels: str = choice("teacher", LABEL_SOURCES, "Reference labels.")
    qrels: str | None = field(
        default=None, metadata={"help": "Human qrels (for --labels human/both)."}
    )
    label_threshold: int = field(
        default=DEFAULT_RELEVANCE_THRESHOLD, metadata={"help": "Relevant when grade >= this."}
    )
    batch_size: int = bounded(32, 1)
    max_length: int = bounded(512, 8, help="Zero-shot only: tokens per input.")
    device: str | None = field(default=None)
    dtype: str = field(
        default="auto",
        metadata={
            "help": "auto (bf16 on GPU and on CPUs with bf16 instructions), float32 or bfloat16."
        },
    )
    plots: bool = field(default=True)
    name: str | None = field(default=None, metadata={"help": "Row name in comparison tables."})

    def __post_init__(self) -> None:
        check_choices(self)
        sources = [bool(self.model), bool(self.judgments), bool(self.baseline)]
        if sum(sources) != 1:
            raise InputError(
                "give exactly one of --model (a grader, or a causal LM with --zero_shot), "
                "--judgments or --baseline"
            )
        if self.baseline and not self.calibration_data:
            raise InputError(
                "baseline: --calibration_data is needed to map its scores to probabilities"
            )
        if self.batch_size < 1:
            raise InputError(f"batch_size: expected >= 1, got {self.batch_size}")
        if not self.out:
            source = self.baseline or ("judgments" if self.judgments else "grader")
            self.out = f"runs/eval/{source}"


@dataclass
class Scored:
    probabilities: np.ndarray  # P(relevant) per record (raw scores for baselines)
    rate: float  # pairs/s
    # A graded grader's class probabilities over the grades 0-3, and its first relevant grade.
    grade_probabilities: np.ndarray | None = None
    relevant_from: int = DEFAULT_RELEVANCE_THRESHOLD


def corpus_texts(collection: str) -> list[str]:
    """Every document of a BEIR folder as the baselines read it (BM25's document frequencies,
    the dense index's stored embeddings), in the order the retrievers index them."""
    from data.beir import Collection
    from data.candidates import corpus_texts as indexed_texts

    return indexed_texts(Collection.load(collection))


def _score(config: CheckpointEvalConfig, records: list[Judgment]) -> Scored:
    """P(relevant) per record (raw scores for baselines), pairs/s, and a graded grader's grades."""
    if config.baseline:
        from measure.classification.baselines import baseline_scores

        corpus = corpus_texts(config.collection) if config.collection else None
        start = time.perf_counter()
        scores = baseline_scores(
            config.baseline,
            [r.query for r in records],
            [r.text for r in records],
            [r.title for r in records],
            corpus,
        )
        return Scored(scores, len(records) / max(time.perf_counter() - start, 1e-9))
    if config.judgments:
        judged = {
            (j.qid, j.doc_id): j
            for j in read_records(config.judgments, Judgment)
            if j.error is None
        }
        scores = []
        for record in records:
            judgment = judged.get((record.qid, record.doc_id))
            if judgment is None:
                scores.append(np.nan)
            else:
                scores.append(
                    judgment.p_relevant
                    if judgment.p_relevant is not None
                    else float(judgment.label)
                )
        return Scored(np.asarray(scores, dtype=np.float64), float("nan"))
    from models.grader import Grader

    grader = Grader.from_pretrained(
        config.model,
        zero_shot=config.zero_shot,
        device=config.device,
        max_length=config.max_length,
        batch_size=config.batch_size,
        dtype=config.dtype,
    )
    from models.scoring import relevant_probability

    start = time.perf_counter()
    pairs = grader.encode_pairs(
        [r.query for r in records], [r.text for r in records], [r.title for r in records]
    )
    classes = grader.class_probabilities_of_ids(pairs.input_ids, True, pairs.prefix_lengths)
    rate = len(records) / max(time.perf_counter() - start, 1e-9)
    return Scored(
        relevant_probability(classes, grader.relevant_from).astype(np.float64),
        rate,
        classes if grader.graded else None,
        grader.relevant_from,
    )


def _calibration_scores(
    config: CheckpointEvalConfig, records: list[Judgment], scorer: Scorer | None
) -> tuple[np.ndarray, str]:
    """P(relevant) of the calibration pairs and where it came from: those that training stored
    for this very grader are read back (``models.grader.VALIDATION_SCORES``), not scored again."""
    if scorer:
        return _timed(scorer, records).probabilities, "scored"
    if config.model and not config.zero_shot:
        from models.grader import resolve_device_and_dtype, stored_validation_scores

        _, dtype = resolve_device_and_dtype(config.device, config.dtype)
        stored = stored_validation_scores(config.model, [(r.qid, r.doc_id) for r in records], dtype)
        if stored is not None:
            logger.info("%s: validation scores stored by training, not recomputed", config.model)
            return stored, "stored by training"
    return _score(config, records).probabilities, "scored"


def _timed(scorer: Scorer, records: list[Judgment]) -> Scored:
    start = time.perf_counter()
    scores = np.asarray(scorer(records), dtype=np.float64)
    return Scored(scores, len(records) / max(time.perf_counter() - start, 1e-9))


class GradeAgreement(BaseModel):
    """A graded grader's 0-3 grades against reference grades (None without pairs or variety)."""

    model_config = ConfigDict(extra="forbid")
    pairs: int
    accuracy: float | None
    mae: float | None
    weighted_kappa: float | None


class PrimaryMetric(BaseModel):
    """The figure a checkpoint is judged by: F1 against one reference's labels."""

    model_config = ConfigDict(extra="forbid")
    labels: str  # "teacher" or "human"
    metric: str
    value: float


class SourceMetrics(BaseModel):
    """One reference's metrics (its key ``at_0.5`` is no identifier, hence the alias). Each
    ``at_*`` entry is core.metrics.BinaryMetrics.to_dict(), kept open: files written before a
    metric was added lack it. The validation threshold and the uncalibrated ECE come with
    --calibration_data, the oracle one with both classes, grades with a graded grader."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)
    at_half: dict[str, Any] = Field(alias="at_0.5")
    oracle_best_f1_threshold: float | None = None
    missing: int = 0  # pairs this reference has no label for
    at_validation_threshold: dict[str, Any] | None = None
    ece_uncalibrated: float | None = None
    at_oracle_threshold: dict[str, Any] | None = None
    grades: GradeAgreement | None = None

    @property
    def decided(self) -> dict[str, Any]:
        """The figures at the validation threshold where one was fitted, else at 0.5: what the
        tables and the primary metric show."""
        if self.at_validation_threshold is not None:
            return self.at_validation_threshold
        return self.at_half


class CheckpointMetrics(Artifact):
    """OUT/metrics.json of relevance-grader evaluate (keys in the order written): what was
    evaluated, what was fitted on --calibration_data, the metrics against each reference and the
    primary one.
    relevance-grader study adds its stamp and the time its model took; models.export reads its
    part of it through models.grader_config.ExportedEvaluation (that layer may not import this
    one)."""

    model_config = ConfigDict(extra="forbid")
    FILE = "metrics.json"
    FORMAT_VERSION = 1
    name: str
    data: str
    pairs: int
    pairs_per_second: float | None = None
    config: dict[str, Any] = Field(default_factory=dict)  # the CheckpointEvalConfig, as given
    calibration_scores: str | None = None  # "scored" or "stored by training"
    score_mapping: dict[str, Any] | None = None  # a baseline's Platt scaling (PlattScaling's)
    calibration: StoredCalibration | None = None  # core.metrics.Calibration's fields
    threshold: float | None = None
    calibration_pairs: int | None = None
    metrics: dict[str, SourceMetrics]  # "teacher" / "human" -> its metrics
    primary: PrimaryMetric | None = None
    study_fingerprint: str | None = None
    seconds: float | None = None

    @property
    def baseline(self) -> str | None:
        """The untrained baseline evaluated (``--baseline``); None for a model or judge."""
        return self.config.get("baseline")

    def dump(self) -> dict[str, Any]:
        """The JSON object: the fields the writer set, nulls among them (an undefined
        statistic, a judge's unknown speed)."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)


def grade_agreement(predicted: np.ndarray, reference: np.ndarray) -> GradeAgreement:
    """How a graded grader's 0-3 grades agree with reference grades: exact accuracy, mean
    absolute error and quadratic-weighted κ (the usual agreement measure for ordinal grades)."""
    from sklearn.metrics import cohen_kappa_score

    mask = ~np.isnan(reference)
    y, p = reference[mask].astype(int), predicted[mask].astype(int)
    agree = len(np.unique(np.concatenate([y, p]))) > 1
    return GradeAgreement(
        pairs=int(mask.sum()),
        accuracy=float(np.mean(p == y)) if len(y) else None,
        mae=float(np.mean(np.abs(p - y))) if len(y) else None,
        weighted_kappa=float(cohen_kappa_score(y, p, weights="quadratic")) if agree else None,
    )


def reference_labels(
    config: CheckpointEvalConfig, records: list[Judgment]
) -> dict[str, np.ndarray]:
    refs: dict[str, np.ndarray] = {}
    if config.labels in ("teacher", "both"):
        refs["teacher"] = np.array([r.label for r in records], dtype=float)
    if config.labels in ("human", "both"):
        if not config.qrels:
            raise InputError("qrels: --labels human/both needs --qrels")
        qrels = graded_qrels(read_qrels(config.qrels), config.qrels)
        refs["human"] = np.array(
            [
                label_from_grade(qrels[r.qid][r.doc_id], config.label_threshold)
                if r.doc_id in qrels.get(r.qid, {})
                else np.nan
                for r in records
            ],
            dtype=float,
        )
    return refs


def reference_grades(
    config: CheckpointEvalConfig, records: list[Judgment], refs: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The 0-3 grades behind each reference source (NaN where a pair has none)."""
    grades: dict[str, np.ndarray] = {}
    if "teacher" in refs:
        grades["teacher"] = np.array(
            [np.nan if r.grade is None else r.grade for r in records], dtype=float
        )
    if "human" in refs and config.qrels:
        qrels = graded_qrels(read_qrels(config.qrels), config.qrels)
        grades["human"] = np.array(
            [qrels.get(r.qid, {}).get(r.doc_id, np.nan) for r in records], dtype=float
        )
    return grades


Scorer = Callable[[list[Judgment]], np.ndarray]


def evaluate(config: CheckpointEvalConfig, scorer: Scorer | None = None) -> CheckpointMetrics:
    """Metrics of ``config``'s model, judge or baseline; ``scorer`` (records -> P(relevant))
    replaces the model's own scoring where a caller has a cheaper exact path (eval.jobs.study)."""
    records = [r for r in read_records(config.data, Judgment) if r.error is None]
    if not records:
        raise InputError(f"{config.data}: no usable judgments")
    scored = _timed(scorer, records) if scorer else _score(config, records)
    probabilities, rate = scored.probabilities, scored.rate
    refs = reference_labels(config, records)
    fields: dict[str, Any] = {  # in the order written
        "name": config.name
        or config.baseline
        or Path(config.judgments or config.model or "model").name,
        "data": config.data,
        "pairs": len(records),
        "pairs_per_second": None if np.isnan(rate) else round(rate, 2),
        "config": asdict(config),
    }
    calibration, threshold = Calibration(), 0.5
    if config.calibration_data:
        probabilities, calibration, threshold = fit_on_calibration_data(
            config, records, probabilities, scorer, fields
        )
    calibrated = calibration.apply(probabilities) if config.calibration_data else probabilities
    qids = np.array([r.qid for r in records])
    metrics = {
        source: metrics_against(labels, probabilities, calibrated, threshold, qids, config)
        for source, labels in refs.items()
    }
    grades = None
    if scored.grade_probabilities is not None:  # the grades on the side of each decision
        from models.scoring import decided_grades

        grades = decided_grades(
            scored.grade_probabilities, calibrated >= threshold, scored.relevant_from
        )
        for source, reference in reference_grades(config, records, refs).items():
            metrics[source].grades = grade_agreement(grades, reference)
    result = CheckpointMetrics(**fields, metrics=metrics, primary=primary_metric(metrics, refs))
    out = Path(config.out)
    write_jsonl(
        out / "predictions.jsonl", prediction_rows(records, calibrated, threshold, grades, refs)
    )
    result.write(out / CheckpointMetrics.FILE)
    if config.plots:
        from measure.classification.plots import write_plots

        for source, labels in refs.items():
            mask = ~np.isnan(labels) & ~np.isnan(calibrated)
            labelled = labels[mask].astype(int)
            write_plots(calibrated[mask], labelled, out, prefix=f"{source}_", threshold=threshold)
    return result


def fit_on_calibration_data(
    config: CheckpointEvalConfig,
    records: list[Judgment],
    probabilities: np.ndarray,
    scorer: Scorer | None,
    result: dict[str, Any],
) -> tuple[np.ndarray, Calibration, float]:
    """(the evaluated pairs' P(relevant), a temperature, a threshold), fitted on the
    calibration pairs only (a baseline's raw scores first mapped by Platt scaling); what was
    fitted is recorded in ``result`` (CheckpointMetrics' fields, in the order written)."""
    calibration_records = [
        r for r in read_records(config.calibration_data, Judgment) if r.error is None
    ]
    overlap = {(r.qid, r.doc_id) for r in calibration_records} & {
        (r.qid, r.doc_id) for r in records
    }
    if overlap:
        raise InputError(
            f"calibration_data shares {len(overlap)} pair(s) with data: thresholds must not be "
            "fitted on the evaluated split"
        )
    calibration_probabilities, result["calibration_scores"] = _calibration_scores(
        config, calibration_records, scorer
    )
    valid = ~np.isnan(calibration_probabilities)
    calibration_labels = np.array([r.label for r in calibration_records])[valid]
    source = f"calibration_data: {config.calibration_data}"
    if config.baseline:  # scores -> P(relevant), fitted on the calibration pairs only
        from measure.classification.baselines import PlattScaling

        platt = PlattScaling.fit(calibration_probabilities[valid], calibration_labels, source)
        probabilities = platt.apply(probabilities)
        calibration_probabilities = platt.apply(calibration_probabilities)
        result["score_mapping"] = platt.to_dict()
    calibration = fit_temperature(calibration_probabilities[valid], calibration_labels, source)
    threshold = best_f1_threshold(
        calibration.apply(calibration_probabilities[valid]), calibration_labels, source
    )
    result["calibration"] = calibration.to_dict()
    result["threshold"] = threshold
    result["calibration_pairs"] = int(valid.sum())
    return probabilities, calibration, threshold


def metrics_against(
    labels: np.ndarray,
    probabilities: np.ndarray,
    calibrated: np.ndarray,
    threshold: float,
    qids: np.ndarray,
    config: CheckpointEvalConfig,
) -> SourceMetrics:
    """Metrics against one reference's labels: at 0.5, at the validation threshold (with
    calibration data) and at the threshold best on these labels themselves (an oracle)."""
    mask = ~np.isnan(labels) & ~np.isnan(probabilities)
    y, queries = labels[mask].astype(int), qids[mask]
    oracle = best_f1_threshold(probabilities[mask], y) if len(np.unique(y)) > 1 else None
    at_half = binary_metrics(probabilities[mask], y, 0.5, queries)
    entry: dict[str, Any] = {
        "at_0.5": at_half.to_dict(),
        "oracle_best_f1_threshold": oracle,
        "missing": int((~mask).sum()),
    }
    if config.calibration_data:
        validated = binary_metrics(calibrated[mask], y, threshold, queries)
        entry["at_validation_threshold"] = validated.to_dict()
        entry["ece_uncalibrated"] = at_half.ece
    if oracle is not None:
        entry["at_oracle_threshold"] = binary_metrics(
            probabilities[mask], y, oracle, queries
        ).to_dict()
    return SourceMetrics.model_validate(entry)


def primary_metric(metrics: dict[str, SourceMetrics], refs: dict[str, np.ndarray]) -> PrimaryMetric:
    """F1 against the teacher's labels where given, else the human ones; at the validation
    threshold where one was fitted."""
    source = "teacher" if "teacher" in refs else "human"
    return PrimaryMetric(labels=source, metric="f1", value=metrics[source].decided["f1"])


def prediction_rows(
    records: list[Judgment],
    calibrated: np.ndarray,
    threshold: float,
    grades: np.ndarray | None,
    refs: dict[str, np.ndarray],
) -> list[dict[str, Any]]:
    """predictions.jsonl: each pair's calibrated P(relevant), decision, grade and labels."""
    rows = []
    for i, record in enumerate(records):
        missing = bool(np.isnan(calibrated[i]))
        row = {
            "qid": record.qid,
            "doc_id": record.doc_id,
            "probability": None if missing else float(calibrated[i]),
            "predicted": None if missing else int(calibrated[i] >= threshold),
        }
        if grades is not None:
            row["grade"] = int(grades[i])
        for source, labels in refs.items():
            row[f"{source}_label"] = None if np.isnan(labels[i]) else int(labels[i])
        rows.append(row)
    return rows


def summary_line(result: CheckpointMetrics) -> str:
    parts = [f"{result.name}: {result.pairs} pairs"]
    if result.pairs_per_second:
        parts.append(f"{result.pairs_per_second} pairs/s")
    for source, entry in result.metrics.items():
        metrics = entry.decided
        auc = metrics["roc_auc"]
        parts.append(
            f"vs {source}: acc {metrics['accuracy']:.3f} P {metrics['precision']:.3f} R {metrics['recall']:.3f} "
            f"F1 {metrics['f1']:.3f} κ {metrics['kappa']:.3f} AUC {auc if auc is None else round(auc, 3)}"
        )
    return "; ".join(parts)


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([CheckpointEvalConfig], args)
    result = evaluate(config)
    print(summary_line(result))
    print(
        f"wrote {config.out}/metrics.json, predictions.jsonl"
        + (" and plots" if config.plots else "")
    )
    if result.primary is not None:
        logger.debug(result.primary.model_dump_json())


if __name__ == "__main__":
    run_main(main)
