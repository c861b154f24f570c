"""The main job's held-out quality for the report: its k-fold cross-validation by query
(``summary.json``, else ``cv/study.json`` while the job still runs), the grader's out-of-fold
predictions against people, and which evaluated queries the exported grader learned from."""

from __future__ import annotations

from typing import Any

from data.build import DatasetManifest
from eval.report.inputs import CV_DIR, Inputs
from eval.report.model import (
    AucDifference,
    FoldRow,
    HeldOut,
    LabelAgreement,
    PooledRow,
)
from eval.report.sections import Labelled, agreement_of
from judgments.samples import human_qrels
from measure.classification.crossval import (
    POOLED_COLUMNS,
    PREDICTIONS,
    CrossValidationRecord,
    OutOfFold,
)
from measure.classification.summaries import JobSummary, StudySummary

SOURCES = {"human": "human judgments", "teacher": "teacher labels"}


def _row_tables(name: str, value: Any) -> dict[str, list[dict[str, Any]]]:
    """A list of flat records, or a dict of such lists, as named tables (else nothing)."""

    def flat(rows: Any) -> bool:
        return (
            isinstance(rows, list)
            and bool(rows)
            and all(isinstance(row, dict) for row in rows)
            and all(not isinstance(v, dict | list) for row in rows for v in row.values())
        )

    if flat(value):
        return {name: value}
    if isinstance(value, dict):
        return {f"{name}: {key}": rows for key, rows in value.items() if flat(rows)}
    return {}


def _pooled_rows(cross: CrossValidationRecord, names: dict[str, str]) -> list[PooledRow]:
    baselines = {d.baseline for d in cross.differences}
    return [
        PooledRow(
            model=model,
            name=names.get(model, model),
            baseline=model in baselines,
            pairs=metrics.pairs,
            queries=metrics.queries,
            metrics={key: getattr(metrics, key) for key, _ in POOLED_COLUMNS},
            differences=[
                AucDifference(d.baseline, d.queries, d.mean, d.low, d.high, d.beats)
                for d in cross.differences
                if d.model == model
            ],
            beats_every_baseline=cross.beats_every_baseline.get(model),
        )
        for model, metrics in cross.pooled.items()
    ]


def _per_fold(study: JobSummary | StudySummary, manifest: DatasetManifest | None) -> list[FoldRow]:
    """ROC-AUC per fold and model, with each fold's split sizes (dataset/manifest.json)."""
    aucs: dict[int, dict[str, float | None]] = {}
    for row in study.per_fold:
        aucs.setdefault(row.fold, {})[row.model] = row.roc_auc
    tested = study.queries_per_fold
    rows = []
    for fold in range(study.folds):
        splits = manifest.fold_splits(fold) if manifest else None
        counts = splits.counts if splits else {}
        queries = {split: c.queries for split, c in counts.items() if c.queries is not None}
        if not queries and fold < len(tested):
            queries = {"test": tested[fold]}
        test = splits.counts.get("test") if splits else None
        test_pairs = test.pairs if test else None
        rows.append(FoldRow(fold, aucs.get(fold, {}), queries, test_pairs))
    return rows


def held_out(inputs: Inputs) -> HeldOut | None:
    """The cross-validation's pooled table and its folds (None outside a main-job folder)."""
    if inputs.kind != "main job":
        return None
    summary = inputs.summary
    extra: dict[str, list[dict[str, Any]]] = {}
    for key, value in (summary.extra_tables() if summary else {}).items():
        extra.update(_row_tables(key, value))
    study = summary or inputs.study  # the study's own file while the job still runs
    if study is None:
        return HeldOut(extra=extra) if extra else None
    cross = study.cross_validation
    return HeldOut(
        folds=cross.folds,
        source=SOURCES.get(cross.source, cross.source),
        columns=[list(column) for column in POOLED_COLUMNS],
        rows=_pooled_rows(cross, summary.names if summary else {}),
        per_fold=_per_fold(study, inputs.manifest),
        export_fold=summary.export_fold if summary else None,
        extra=extra,
    )


def _human_grades(inputs: Inputs) -> dict[str, dict[str, int]]:
    """The job's human qrels as 0-3 grades (empty when they cannot be read as such)."""
    path = inputs.files.qrels.found
    if path is None:
        return {}
    try:
        return human_qrels(str(path))
    except ValueError:
        return {}


def out_of_fold_agreement(inputs: Inputs, held: HeldOut | None) -> LabelAgreement | None:
    """The grader against people on its out-of-fold predictions: every judged pair scored by the
    grader of the fold that held its query out (None unless the folds were scored against human
    judgments and their predictions are here)."""
    if held is None or held.source != SOURCES["human"]:
        return None
    graders = [row for row in held.rows if row.differences]
    if not graders:
        return None
    grader = next((row for row in graders if row.model == "grader"), graders[0])
    folders = [inputs.root / CV_DIR / f"fold-{k}" / grader.model for k in range(held.folds)]
    if not all((folder / PREDICTIONS).is_file() for folder in folders):
        return None
    oof = OutOfFold.read(folders, "human")
    grades = _human_grades(inputs)
    pairs = [
        Labelled(bool(label), grades.get(qid, {}).get(doc), bool(decision), None, float(score))
        for qid, doc, label, decision, score in zip(
            oof.qids, oof.doc_ids, oof.labels, oof.decisions, oof.probabilities, strict=True
        )
    ]
    scope = (
        f"out of fold: each judged pair scored by the {grader.name} of the fold that held its "
        f"query out ({held.folds} folds, each calibrated and thresholded on its own validation "
        "queries), so no pair was seen in training: the pooled predictions behind the held-out "
        "table below"
    )
    source = (inputs.job_config.qrels if inputs.job_config else None) or "the human qrels"
    return agreement_of(pairs, source, scope)


def learned_queries_note(inputs: Inputs, evaluated: set[str], judged: set[str]) -> str | None:
    """A note when the exported grader learned from queries the runs are evaluated on (its
    fold's training and validation queries): there its labels are better than on new ones."""
    export = inputs.summary.export_fold if inputs.summary else None
    manifest = inputs.manifest
    exported = manifest.fold_splits(export) if manifest and export is not None else None
    if manifest is None or exported is None:
        return None
    in_folds = {q for fold in manifest.folds or [] for q in fold.queries.get("test", [])}
    learned = (evaluated & in_folds) - set(exported.queries.get("test", []))
    if not learned:
        return None
    of_judged = (
        f" ({len(learned & judged)} of the {len(judged)} judged by people)" if judged else ""
    )
    return (
        f"The exported grader (fold {export}) learned from {len(learned)} of the "
        f"{len(evaluated)} queries evaluated here{of_judged}: they were its training or "
        "validation queries, so it has seen the teacher's labels of their pairs, and on them its "
        "labels, its agreement with people and what PPI++ gains from it are better than on "
        "queries it never saw. Its quality on unseen queries is the cross-validated one (held-out "
        "quality)."
    )
