"""The report's other sections, each from the files that hold it (None when they are absent): the
labeler against people, the system ranking under each labeler, and where the numbers came from
(the main job's held-out quality: eval.report.held_out)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.job_stages import stage_times, total_note
from core.provenance import environment
from eval.report.inputs import HumanLabels, Inputs
from eval.report.model import (
    Command,
    ExportShown,
    Headline,
    LabelAgreement,
    Provenance,
    Ranking,
    ReliabilityBin,
    Tau,
)
from measure.metrics.ranking_agreement import RankingAgreement, left_out_note
from measure.metrics.results import RunResults
from models.grader_config import ExportCheck, GraderDescription

BINARY = ["not relevant", "relevant"]
GRADES = ["0", "1", "2", "3"]


@dataclass
class Labelled:
    """One query–document pair labelled by both people and the labeler."""

    relevant: bool  # people's verdict
    grade: int | None  # people's 0-3 grade, where they graded
    verdict: bool  # the labeler's
    labeler_grade: int | None  # the labeler's 0-3 grade, where it grades
    score: float | None  # the labeler's score


HITS_SCOPE = (
    "the hits of the evaluated runs that people judged, each query–document pair once: the "
    "pairs that decide the metrics above"
)


def _judged_hits(per_query: dict[str, RunResults], human: HumanLabels) -> list[Labelled]:
    """Every hit people judged, each query–document pair once (the labels are pooled across
    runs)."""
    seen: dict[tuple[str, str], Labelled] = {}
    for results in per_query.values():
        for qid, result in results.items():
            for hit in result.hits:
                grade, relevant = human.of(qid, hit.id)
                if relevant is not None and (qid, hit.id) not in seen:
                    seen[(qid, hit.id)] = Labelled(
                        relevant, grade, hit.relevant, hit.grade, hit.score
                    )
    return list(seen.values())


def label_agreement(
    per_query: dict[str, RunResults] | None, human: HumanLabels | None
) -> LabelAgreement | None:
    """The labeler against people on the hits people judged."""
    if not per_query or human is None:
        return None
    return agreement_of(_judged_hits(per_query, human), human.source, HITS_SCOPE)


def agreement_of(pairs: list[Labelled], source: str, scope: str) -> LabelAgreement | None:
    """Confusion matrix, κ, reliability and scores per human grade (None under two pairs)."""
    from sklearn.metrics import cohen_kappa_score

    from core.metrics import label_metrics
    from measure.classification.plots import reliability_bins

    if len(pairs) < 2:
        return None
    truth = np.array([int(p.relevant) for p in pairs])
    verdict = np.array([int(p.verdict) for p in pairs])
    human_grades = [p.grade for p in pairs]
    labeler_grades = [p.labeler_grade for p in pairs]
    rows_graded = None not in human_grades
    columns_graded = None not in labeler_grades
    rows = human_grades if rows_graded else truth.tolist()
    columns = labeler_grades if columns_graded else verdict.tolist()
    human_scale = GRADES if rows_graded else BINARY
    labeler_scale = GRADES if columns_graded else BINARY
    confusion = np.zeros((len(human_scale), len(labeler_scale)), dtype=int)
    for row, column in zip(rows, columns, strict=True):
        confusion[row, column] += 1
    metrics = label_metrics(truth, verdict)
    result = LabelAgreement(
        source=source,
        scope=scope,
        pairs=len(pairs),
        human_scale=human_scale,
        labeler_scale=labeler_scale,
        confusion=confusion.tolist(),
        kappa=metrics.kappa,
        accuracy=metrics.accuracy,
        precision=metrics.precision,
        recall=metrics.recall,
        f1=metrics.f1,
    )
    if rows_graded and columns_graded:
        result.weighted_kappa = float(
            cohen_kappa_score(
                human_grades, labeler_grades, weights="quadratic", labels=[0, 1, 2, 3]
            )
        )
    scores = [p.score for p in pairs]
    if None not in scores and all(0.0 <= s <= 1.0 for s in scores):
        centers, fractions, counts = reliability_bins(np.array(scores), truth, bins=10)
        result.reliability = [
            ReliabilityBin(c, f, n) for c, f, n in zip(centers, fractions, counts, strict=True)
        ]
        result.scores_by_grade = {
            human_scale[g]: [float(s) for s, h in zip(scores, rows, strict=True) if h == g]
            for g in sorted(set(rows))
        }
    return result


def _tau(reference: dict[str, float], scores: dict[str, float]) -> Tau:
    from scipy.stats import kendalltau, spearmanr

    runs = sorted(set(reference) & set(scores))
    if len(runs) < 2:
        return Tau(None, None, None)
    a, b = [reference[r] for r in runs], [scores[r] for r in runs]
    tau, rho = kendalltau(a, b), spearmanr(a, b)
    return Tau(_number(tau.statistic), _number(tau.pvalue), _number(rho.statistic))


def _number(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def ranking(inputs: Inputs, headline: Headline, agreement_path: str | None) -> Ranking | None:
    """The runs ordered under each labeler (a relevance-grader ranking-agreement result where
    there is one, and the PPI++ estimates where human judgments exist) and Kendall's τ with the
    reference."""
    if len(headline.runs) < 2:
        return None
    agreement = RankingAgreement.read(agreement_path) if agreement_path else inputs.agreement
    if agreement:
        metric, reference = agreement.metric, agreement.reference
        scores = {spec: dict(values) for spec, values in agreement.scores.items()}
        source = "relevance-grader ranking-agreement (every labeler labels every run's top k)"
        if note := left_out_note(agreement.left_out):
            source = f"{source}. {note}"
    else:
        metric, reference = headline.primary, None
        scores = {
            inputs.metrics.labeler or "labeler": {
                run: headline.cells[run][metric].labeler_mean for run in headline.runs
            }
        }
        source = "this evaluation's labeler means"
    if headline.intervals and metric in headline.metrics:
        name = f"PPI++ ({headline.judged_queries} human-judged queries)"
        cells = {run: headline.cells[run][metric] for run in headline.runs}
        if all(cell.ppi for cell in cells.values()):
            scores[name] = {run: cell.ppi.estimate for run, cell in cells.items()}
            reference = reference or name
    reference = reference or next(iter(scores))
    return Ranking(
        metric=metric,
        reference=reference,
        scores=scores,
        orders={spec: sorted(values, key=lambda r: -values[r]) for spec, values in scores.items()},
        taus={
            spec: _tau(scores[reference], values)
            for spec, values in scores.items()
            if spec != reference
        },
        source=source,
    )


def _export(inputs: Inputs) -> ExportShown | None:
    """The exported grader behind a ``grader:PATH`` labeler: what it is and how it decides."""
    labeler = inputs.metrics.labeler or ""
    if not labeler.startswith("grader:"):
        return None
    folder = inputs.files.export.found
    file = folder / GraderDescription.FILE if folder else None
    if file is None or not file.is_file():
        return {"path": labeler.removeprefix("grader:")}
    description = GraderDescription.read(file)
    # The input format's own open shape (models.input_format), shown as it is stored.
    input_format = description.input_format or {}
    check_file = folder / ExportCheck.FILE
    check = ExportCheck.read(check_file) if check_file.is_file() else None
    calibration = description.calibration
    return {
        "path": labeler.removeprefix("grader:"),
        "base_model": description.base_model,
        "mode": description.mode,
        "input_format": f"{input_format.get('name')}@{input_format.get('version')}",
        "max_length": input_format.get("max_length"),
        "threshold": description.threshold,
        "calibration": calibration.model_dump(mode="json") if calibration else None,
        "format_version": description.format_version,
        "round_trip_max_abs_difference": check.max_abs_difference if check else None,
    }


def provenance(inputs: Inputs) -> Provenance:
    if inputs.stage_commands:
        commands = [Command(name, cmd) for name, cmd in inputs.stage_commands.items()]
    else:
        commands = [Command("search", inputs.search_command)] if inputs.search_command else []
    evaluated = inputs.evaluated
    settings = (inputs.job_config.settings() if inputs.job_config else None) or (
        inputs.search_config.recorded if inputs.search_config else None
    )
    summary = inputs.summary
    return Provenance(
        folder=str(inputs.root),
        labeler=inputs.metrics.labeler,
        k=inputs.metrics.k,
        export=_export(inputs),
        commands=commands,
        evaluated=evaluated.environment().to_json() if evaluated else None,
        page=environment().to_json(),
        settings=settings,
        seconds=summary.seconds if summary else None,
        stage_seconds=summary.stage_seconds if summary else None,
        stage_times=stage_times(summary) if summary else None,
        total_note=total_note(summary).strip() if summary else "",
    )
