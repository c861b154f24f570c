"""The report's other sections, each from the files that hold it (None when they are absent): the
labeler against people, the system ranking under each labeler, the held-out quality of the grader
beside the baselines, and where the numbers came from."""

from __future__ import annotations

import math
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data.provenance import environment
from eval.report.inputs import HumanLabels, Inputs, read_json, read_optional
from eval.report.model import (
    Command,
    Headline,
    HeldOut,
    LabelAgreement,
    Provenance,
    Ranking,
    ReliabilityBin,
    Tau,
)

BINARY = ["not relevant", "relevant"]
GRADES = ["0", "1", "2", "3"]


def _judged_pairs(
    per_query: dict[str, Any], human: HumanLabels
) -> list[tuple[dict, int | None, bool]]:
    """(the labeler's hit record, human grade, human verdict) of every hit people judged, each
    query–document pair once (the labels are pooled across runs)."""
    seen: dict[tuple[str, str], tuple[dict, int | None, bool]] = {}
    for results in per_query.values():
        for qid, result in results.items():
            for hit in result["hits"]:
                grade, relevant = human.of(qid, hit["id"])
                if relevant is not None:
                    seen.setdefault((qid, hit["id"]), (hit, grade, relevant))
    return list(seen.values())


def label_agreement(
    per_query: dict[str, Any] | None, human: HumanLabels | None
) -> LabelAgreement | None:
    """Confusion matrix, κ, reliability and scores per human grade on the hits people judged."""
    from sklearn.metrics import cohen_kappa_score

    from data.metrics import label_metrics
    from eval.plots import reliability_bins

    if not per_query or human is None:
        return None
    pairs = _judged_pairs(per_query, human)
    if len(pairs) < 2:
        return None
    truth = np.array([int(relevant) for _, _, relevant in pairs])
    verdict = np.array([int(bool(hit["relevant"])) for hit, _, _ in pairs])
    human_grades = [grade for _, grade, _ in pairs]
    labeler_grades = [hit.get("grade") for hit, _, _ in pairs]
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
        source=human.source,
        pairs=len(pairs),
        human_scale=human_scale,
        labeler_scale=labeler_scale,
        confusion=confusion.tolist(),
        **{name: metrics[name] for name in ("kappa", "accuracy", "precision", "recall", "f1")},
    )
    if rows_graded and columns_graded:
        result.weighted_kappa = float(
            cohen_kappa_score(
                human_grades, labeler_grades, weights="quadratic", labels=[0, 1, 2, 3]
            )
        )
    scores = [hit.get("score") for hit, _, _ in pairs]
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
    """The runs ordered under each labeler (an eval.ranking_agreement result where there is one,
    and the PPI++ estimates where human judgments exist) and Kendall's τ with the reference."""
    if len(headline.runs) < 2:
        return None
    agreement = read_json(Path(agreement_path)) if agreement_path else inputs.agreement
    if agreement:
        metric, reference = agreement["metric"], agreement["reference"]
        scores = {spec: dict(values) for spec, values in agreement["scores"].items()}
        source = "eval.ranking_agreement (every labeler labels every run's top k)"
    else:
        metric, reference = headline.primary, None
        scores = {
            inputs.metrics.get("labeler", "labeler"): {
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


# summary.json keys the page shows elsewhere; any other table it holds appears as it is.
SHOWN_ELSEWHERE = {
    "run_dir",
    "seconds",
    "stage_seconds",
    "dataset",
    "classification",
    "search",
    "agreement",
    "ppi",
    "human_all_queries",
    "export",
}


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


def held_out(inputs: Inputs) -> HeldOut | None:
    """The main job's held-out classification tables (summary.json, else eval/*/metrics.json)."""
    from eval.compare import COLUMNS, comparison_rows

    if inputs.kind != "main job":
        return None
    summary = inputs.summary or {}
    tables = summary.get("classification")
    if not tables:
        results = [read_json(p) for p in sorted(inputs.root.glob("eval/*/metrics.json"))]
        results.sort(key=lambda r: not (r.get("config") or {}).get("baseline"))
        sources = list(dict.fromkeys(s for r in results for s in r.get("metrics", {})))
        tables = {source: comparison_rows(results, source) for source in sources}
    extra: dict[str, list[dict[str, Any]]] = {}
    for key, value in summary.items():
        if key not in SHOWN_ELSEWHERE:
            extra.update(_row_tables(key, value))
    if not tables and not extra:
        return None
    return HeldOut(
        columns=["model", "pairs", *COLUMNS, "beats_baselines"],
        tables=tables,
        extra=extra,
        dataset=summary.get("dataset"),
    )


def _export(inputs: Inputs) -> dict[str, Any] | None:
    """The exported grader behind a ``grader:PATH`` labeler: what it is and how it decides."""
    labeler = inputs.metrics.get("labeler") or ""
    if not labeler.startswith("grader:"):
        return None
    folder = inputs.resolve(labeler.removeprefix("grader:"))
    config = read_optional(folder / "grader_config.json") if folder else None
    if not config:
        return {"path": labeler.removeprefix("grader:")}
    input_format = config.get("input_format") or {}
    check = read_optional(folder / "export_check.json") or {}
    return {
        "path": labeler.removeprefix("grader:"),
        "base_model": config.get("base_model"),
        "mode": config.get("mode"),
        "input_format": f"{input_format.get('name')}@{input_format.get('version')}",
        "max_length": input_format.get("max_length"),
        "threshold": config.get("threshold"),
        "calibration": config.get("calibration"),
        "format_version": config.get("format_version"),
        "round_trip_max_abs_difference": check.get("max_abs_difference"),
    }


def provenance(inputs: Inputs) -> Provenance:
    if inputs.stage_commands:
        commands = [Command(name, cmd) for name, cmd in inputs.stage_commands.items()]
    else:
        commands = [Command("eval.search", inputs.search_command)] if inputs.search_command else []
    evaluated = inputs.evaluated
    settings = inputs.job_config or (
        asdict(inputs.search_config) if is_dataclass(inputs.search_config) else None
    )
    summary = inputs.summary or {}
    return Provenance(
        folder=str(inputs.root),
        labeler=inputs.metrics.get("labeler"),
        k=inputs.metrics.get("k"),
        export=_export(inputs),
        commands=commands,
        evaluated={
            key: evaluated[key] for key in ("date", "versions", "machine") if key in evaluated
        }
        if evaluated
        else None,
        page=environment(),
        settings=settings,
        seconds=summary.get("seconds"),
        stage_seconds=summary.get("stage_seconds"),
    )
