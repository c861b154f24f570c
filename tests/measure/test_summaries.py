"""study.json and the main job's summary.json are typed: written and read by one model each, a
file of an earlier format (no format_version, or an older one) and a newer one refused in one
line, and the README block and report.md made from the typed summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import InputError
from measure.classification.crossval import CrossValidationRecord
from measure.classification.summaries import (
    METRICS,
    FoldResult,
    JobSummary,
    MeanSd,
    ModelSummary,
    StudySummary,
)
from measure.zoo.record import (
    Agreement,
    DrawnTausRecord,
    Estimate,
    Leaderboard,
    ReadingResult,
    SystemRecord,
)

MODELS = {"bm25": 0.6, "cosine": 0.7, "grader": 0.8}


def _cross() -> CrossValidationRecord:
    metrics = {name: None for name in METRICS}
    pooled = {
        m: {"pairs": 40, "queries": 4, **metrics, "roc_auc": auc} for m, auc in MODELS.items()
    }
    differences = [
        {"model": "grader", "baseline": b, "queries": 4, "mean": 0.1, "low": low, "high": 0.2}
        | {"beats": low > 0}
        for b, low in (("bm25", 0.05), ("cosine", -0.01))
    ]
    return CrossValidationRecord(
        folds=2,
        source="human",
        pooled=pooled,
        differences=differences,
        beats_every_baseline={"grader": False},
    )


def _per_fold() -> list[FoldResult]:
    rows = []
    for fold in range(2):
        for model, auc in MODELS.items():
            values = dict.fromkeys(METRICS, 0.5) | {"roc_auc": auc + fold / 100}
            rows.append(FoldResult(fold=fold, model=model, pairs=20, seconds=1.5, **values))
    return rows


def study() -> StudySummary:
    means = {
        m: ModelSummary(**{n: MeanSd(mean=auc, sd=0.01) for n in METRICS}, seconds=3.0)
        for m, auc in MODELS.items()
    }
    means["grader"].beats_baselines_in_folds = "1/2"
    return StudySummary(
        collection="data/collections/adi",
        folds=2,
        queries_per_fold=[2, 2],
        max_pairs_per_query=20,
        models=means,
        per_fold=_per_fold(),
        cross_validation=_cross(),
        learning_curve=[],
    )


def summary() -> JobSummary:
    runs = {"bm25": {"ndcg@10": 0.4}, "dense": {"ndcg@10": 0.5}}
    tau = Estimate(value=1.0, low=None, high=None)  # no interval: none estimable here
    leaderboard = Leaderboard(
        collection="c",
        qrels="q",
        queries=2,
        k=10,
        pooled_pairs=12,
        human_share_relevant=0.25,
        resamples=1000,
        systems=[
            SystemRecord(name=n, kind="bm25", human={"ndcg@10": v}, judged_at_k=1.0, seconds=0.1)
            for n, v in (("bm25", 0.3), ("dense", 0.6))
        ],
        people_only=[DrawnTausRecord(judged=1, draws=200, mean=None, sd=None, low=None, high=None)],
        readings=[
            ReadingResult(
                labeler="grader",
                spec="grader:G",
                reading="scores",
                means={"bm25": {"ndcg@10": 0.4}, "dense": {"ndcg@10": 0.5}},
                agreement={"ndcg@10": Agreement(kendall_tau=tau, tau_ap=tau, spearman_rho=tau)},
                top1=True,
                top3=None,
                largest_error=None,
            )
        ],
    )
    cv = study()
    return JobSummary(
        run_dir="runs/x",
        seconds=10.0,
        stage_seconds={"dataset": 1.0},
        folds=cv.folds,
        queries_per_fold=cv.queries_per_fold,
        names={"grader": "grader (ours)"},
        cross_validation=cv.cross_validation,
        per_fold=cv.per_fold,
        export_fold=0,
        search=runs,
        leaderboard=leaderboard,
        export="runs/x/export",
    )


@pytest.mark.parametrize("make", [study, summary])
def test_a_file_reads_back_as_written(make, tmp_path: Path):
    written = make()
    path = tmp_path / written.FILE
    written.write(path)
    again = type(written).read(path)
    assert again == written and again.format_version == type(written).FORMAT_VERSION


def test_a_study_file_without_a_format_version_is_refused_with_what_to_do(tmp_path: Path):
    """study.json files written before they were typed had today's shape and no
    format_version: not read as this release's, one line naming the file."""
    data = study().dump()
    data.pop("format_version")
    path = tmp_path / StudySummary.FILE
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as refused:
        StudySummary.read(path)
    assert str(refused.value) == (
        f"{path}: no format version, but this release reads version 1: "
        "re-run the stage that wrote it"
    )


def test_a_summary_of_the_three_run_agreement_is_refused_with_what_to_do(tmp_path: Path):
    data = summary().dump() | {"format_version": 1}
    path = tmp_path / JobSummary.FILE
    path.write_text(json.dumps(data))
    with pytest.raises(
        InputError, match=r"format version 1, but this release reads version 2: re-run"
    ):
        JobSummary.read(path)


@pytest.mark.parametrize("make", [study, summary])
def test_a_newer_or_misshapen_file_is_refused_in_one_line(make, tmp_path: Path):
    written = make()
    path = tmp_path / written.FILE
    path.write_text(json.dumps(written.dump() | {"format_version": 99}))
    with pytest.raises(InputError, match="format version 99 is newer") as newer:
        type(written).read(path)
    broken = written.dump()
    broken["per_fold"][0]["roc_auc"] = "high"
    path.write_text(json.dumps(broken))
    with pytest.raises(InputError, match=r"per_fold\.0\.roc_auc") as misshapen:
        type(written).read(path)
    for error in (newer, misshapen):
        assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_a_table_a_later_job_adds_to_summary_json_is_kept(tmp_path: Path):
    path = tmp_path / JobSummary.FILE
    data = summary().dump() | {"calibration_check": [{"fold": 0, "ece": 0.05}]}
    path.write_text(json.dumps(data))
    read = JobSummary.read(path)
    assert read.extra_tables() == {"calibration_check": [{"fold": 0, "ece": 0.05}]}
    assert read.dump() == data


def test_the_readme_block_and_report_md_read_the_typed_summary():
    from eval.report.markdown import report_markdown
    from eval.report.readme import results_table
    from eval.report.study import study_markdown

    typed = summary()
    block = results_table(typed)
    assert "2-fold cross-validation by query over 4 judged queries" in block
    assert "bm25 0.400, dense 0.500" in block and "| grader (ours) |" in block
    report = report_markdown(typed)
    assert report.startswith("# Main job report\n\n**Not trustworthy")  # cosine not beaten
    assert "- dataset: 1.0" in report
    assert "| 1 | 0.610 | 0.710 | 0.810 |" in study_markdown(study())  # ROC-AUC per fold
