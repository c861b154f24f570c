from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from core.errors import InputError
from measure.classification.checkpoint import CheckpointEvalConfig, CheckpointMetrics, evaluate
from tests.commands import run_command


def write_split(path: Path, rows: list[tuple[str, str, int]]) -> Path:
    path.write_text(
        "".join(
            json.dumps(
                {"qid": q, "query": f"query {q}", "doc_id": d, "text": f"text of {d}", "grade": g}
            )
            + "\n"
            for q, d, g in rows
        )
    )
    return path


@pytest.fixture()
def splits(tmp_path: Path) -> dict[str, Path]:
    test_rows = [(f"q{i % 4}", f"t{i}", [0, 1, 2, 3][i % 4]) for i in range(24)]
    val_rows = [(f"v{i % 3}", f"v{i}", [0, 3, 2][i % 3]) for i in range(18)]
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{3 - g}\n" for q, d, g in test_rows)
    )  # humans disagree with the teacher on purpose
    return {
        "test": write_split(tmp_path / "test.jsonl", test_rows),
        "validation": write_split(tmp_path / "validation.jsonl", val_rows),
        "qrels": qrels,
    }


def test_zero_shot_evaluation_writes_metrics_predictions_and_plots(
    tiny_model_dir: Path, splits, tmp_path: Path
):
    out = tmp_path / "eval"
    result = evaluate(
        CheckpointEvalConfig(
            data=str(splits["test"]),
            out=str(out),
            model=str(tiny_model_dir),
            zero_shot=True,
            calibration_data=str(splits["validation"]),
            labels="both",
            qrels=str(splits["qrels"]),
        )
    )
    assert set(result.metrics) == {"teacher", "human"}
    assert result.calibration.temperature > 0 and 0 <= result.threshold <= 1
    teacher = result.metrics["teacher"]
    assert teacher.at_half["pairs"] == 24 and teacher.at_validation_threshold is not None
    human = result.metrics["human"].at_half
    assert human["positive_rate"] == pytest.approx(0.5)
    lines = (out / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == 24 and {"teacher_label", "human_label", "probability"} <= set(
        json.loads(lines[0])
    )
    for name in ("pr_curve", "roc_curve", "confusion_matrix", "reliability", "score_histogram"):
        assert (out / f"teacher_{name}.png").stat().st_size > 1000
    assert result.pairs_per_second > 0
    written = json.loads((out / "metrics.json").read_text())  # the keys as before the model
    assert list(written)[1:6] == ["name", "data", "pairs", "pairs_per_second", "config"]
    assert {"at_0.5", "oracle_best_f1_threshold", "missing"} <= set(written["metrics"]["teacher"])
    assert CheckpointMetrics.read(out / "metrics.json").dump() == written  # rewritten as read


def test_threshold_is_never_fitted_on_the_evaluated_split(
    tiny_model_dir: Path, splits, tmp_path: Path
):
    with pytest.raises(ValueError, match="must not be fitted on the evaluated split"):
        evaluate(
            CheckpointEvalConfig(
                data=str(splits["test"]),
                out=str(tmp_path / "x"),
                model=str(tiny_model_dir),
                zero_shot=True,
                calibration_data=str(splits["test"]),
            )
        )


def test_calibration_pairs_of_one_class_are_refused_not_fitted(
    tiny_model_dir: Path, splits, tmp_path: Path
):
    """No relevant calibration pair once fitted a threshold of 4e-84 (every pair relevant) and
    exited 0: a threshold or a temperature needs both classes."""
    none_relevant = write_split(
        tmp_path / "none-relevant.jsonl", [(f"v{i % 3}", f"v{i}", i % 2) for i in range(12)]
    )
    with pytest.raises(ValueError, match=r"calibration_data: .*none-relevant.jsonl: no relevant"):
        evaluate(
            CheckpointEvalConfig(
                data=str(splits["test"]),
                out=str(tmp_path / "x"),
                model=str(tiny_model_dir),
                zero_shot=True,
                calibration_data=str(none_relevant),
                plots=False,
            )
        )


def test_judgments_file_as_a_baseline(splits, tmp_path: Path):
    judgments = tmp_path / "judge.jsonl"
    rows = [json.loads(line) for line in splits["test"].read_text().splitlines()]
    for row in rows:
        row.pop("grade")
        row["label"] = int(row["doc_id"] in {"t2", "t3", "t6"})
    judgments.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = evaluate(
        CheckpointEvalConfig(
            data=str(splits["test"]), out=str(tmp_path / "j"), judgments=str(judgments), plots=False
        )
    )
    assert result.pairs_per_second is None  # a judge's speed is unknown, written as null
    written = json.loads((tmp_path / "j" / "metrics.json").read_text())
    assert written["pairs_per_second"] is None and "calibration" not in written
    metrics = result.metrics["teacher"].at_half
    assert metrics["precision"] == pytest.approx(1.0) and metrics["recall"] == pytest.approx(3 / 12)


def test_bad_input_is_reported_clearly(tmp_path: Path):
    bad = tmp_path / "test.jsonl"
    bad.write_text('{"qid": "q", "query": "x", "doc_id": "d", "text": "t", "grade": "high"}\n')
    result = run_command(["evaluate", "--data", str(bad), "--model", "x"])
    assert result.returncode == 2 and f"{bad}:1: grade:" in result.stderr


@pytest.mark.slow
def test_compare_builds_one_table_in_three_formats(splits, tmp_path: Path, tiny_model_dir: Path):
    from measure.classification.compare import CompareConfig, compare

    paths = []
    for name in ("a", "b"):
        evaluate(
            CheckpointEvalConfig(
                data=str(splits["test"]),
                out=str(tmp_path / name),
                model=str(tiny_model_dir),
                zero_shot=True,
                plots=False,
                name=f"model-{name}",
            )
        )
        paths.append(str(tmp_path / name / "metrics.json"))
    rows = compare(CompareConfig(results=paths, out=str(tmp_path / "cmp")))["rows"]
    assert [r["model"] for r in rows] == ["model-a", "model-b"]
    assert "| model-a | 24 |" in (tmp_path / "cmp.md").read_text()
    assert (tmp_path / "cmp.csv").read_text().startswith("model,baseline,pairs,accuracy")
    written = json.loads((tmp_path / "cmp.json").read_text())
    assert written["rows"][0]["f1"] == rows[0]["f1"] and written["left_out"] == []


def _lexical_split(path: Path, queries: range) -> Path:
    """Relevant documents share the query's rare word; the others do not."""
    rows = []
    for q in queries:
        for d in range(6):
            relevant = d % 3 == 0
            text = f"notes on topic{q} and more" if relevant else f"unrelated filler number {d}"
            rows.append(
                {
                    "qid": f"q{q}",
                    "query": f"about topic{q}",
                    "doc_id": f"{q}-{d}",
                    "text": text,
                    "grade": 3 if relevant else 0,
                }
            )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_bm25_baseline_scores_the_same_pairs_and_is_mapped_on_validation(tmp_path: Path):
    result = evaluate(
        CheckpointEvalConfig(
            baseline="bm25",
            data=str(_lexical_split(tmp_path / "test.jsonl", range(0, 4))),
            calibration_data=str(_lexical_split(tmp_path / "val.jsonl", range(4, 8))),
            out=str(tmp_path / "bm25"),
            plots=False,
        )
    )
    metrics = result.metrics["teacher"].at_validation_threshold
    assert result.pairs == 24 and metrics["roc_auc"] == 1.0 and metrics["f1"] == 1.0
    assert metrics["query_roc_auc"] == 1.0  # the pairs' qids reach the per-query metric
    assert result.score_mapping["method"] == "platt" and result.score_mapping["slope"] > 0
    assert result.baseline == "bm25" and result.primary.value == 1.0


def test_a_baseline_needs_validation_pairs_and_one_source():
    with pytest.raises(ValueError, match="calibration_data"):
        CheckpointEvalConfig(baseline="cosine", data="x.jsonl")
    with pytest.raises(ValueError, match="exactly one"):
        CheckpointEvalConfig(baseline="bm25", model="m", calibration_data="v.jsonl")
    with pytest.raises(ValueError, match="baseline: expected one of"):
        CheckpointEvalConfig(baseline="tfidf", calibration_data="v.jsonl")


def test_compare_flags_a_model_that_does_not_beat_the_baselines():
    from measure.classification.compare import comparison_rows, to_markdown

    def result(name: str, auc: float, baseline: str | None = None) -> CheckpointMetrics:
        metrics = {"pairs": 10, "roc_auc": auc, "f1": 0.5, "threshold": 0.5}
        return CheckpointMetrics.validated(
            {
                "name": name,
                "data": "test.jsonl",
                "pairs": 10,
                "config": {"baseline": baseline},
                "metrics": {"human": {"at_0.5": metrics}},
            },
            name,
        )

    rows = comparison_rows(
        [
            result("bm25", 0.74, "bm25"),
            result("cosine", 0.79, "cosine"),
            result("weak grader", 0.78),
            result("good grader", 0.86),
        ],
        "human",
    )
    verdicts = {r["model"]: r["beats_baselines"] for r in rows}
    assert verdicts == {"bm25": None, "cosine": None, "weak grader": False, "good grader": True}
    table = to_markdown(rows, "human")
    assert "| weak grader |" in table and "**NO**" in table and "Warning**: weak grader" in table


def test_compare_names_every_result_it_leaves_out_and_why(tmp_path: Path, capsys):
    """A grader evaluated with --labels both and a baseline evaluated as the docs show (no
    --qrels: teacher labels only): --labels human dropped the baseline row without a word."""
    from measure.classification.compare import main

    def write(name: str, labels: tuple[str, ...], baseline: str | None = None) -> str:
        metrics = {"pairs": 10, "roc_auc": 0.8, "f1": 0.5, "threshold": 0.5}
        result = {
            "format_version": 1,
            "name": name,
            "data": "test.jsonl",
            "pairs": 10,
            "pairs_per_second": None,
            "config": {"baseline": baseline},
            "metrics": {
                source: {"at_0.5": metrics, "oracle_best_f1_threshold": None, "missing": 0}
                for source in labels
            },
            "primary": {"labels": labels[0], "metric": "f1", "value": 0.5},
        }
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(result))
        return str(path)

    grader, bm25 = write("grader", ("teacher", "human")), write("bm25", ("teacher",), "bm25")
    main(["--results", grader, bm25, "--labels", "human", "--out", str(tmp_path / "cmp")])
    printed = capsys.readouterr().out
    reason = (
        "evaluated against teacher labels only, not human (re-run relevance-grader evaluate with "
        "--labels both --qrels QRELS)"
    )
    line = f"- baseline: bm25 ({bm25}): {reason}"
    assert line in printed and line in (tmp_path / "cmp.md").read_text()
    assert "The verdicts are against the baselines shown only, not bm25." in printed
    written = json.loads((tmp_path / "cmp.json").read_text())
    assert [r["model"] for r in written["rows"]] == ["grader"]
    assert written["left_out"] == [
        {"result": bm25, "model": "bm25", "baseline": True, "reason": reason}
    ]
    with pytest.raises(ValueError, match=f"no result has human labels \\({re.escape(bm25)}: "):
        main(["--results", bm25, "--labels", "human"])


@pytest.mark.slow
def test_a_graded_grader_is_also_scored_on_its_grades(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    """Held-out grades, decided at the validation threshold, against the teacher's and the
    humans' grades: accuracy, error and quadratic-weighted κ, from the same single pass."""
    from data.beir import write_beir_qrels
    from models.builder import GraderModelConfig
    from tests.train.conftest import args_for
    from train.train import DataConfig, LossConfig, train

    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir),
        mode="top_layers",
        trainable_layers=1,
        max_length=256,
        labels="graded",
    )
    args = args_for(tmp_path, num_train_epochs=8, learning_rate=1e-2)
    train(model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args)
    test = [json.loads(line) for line in (tiny_dataset / "test.jsonl").open()]
    qrels = tmp_path / "qrels.tsv"  # the humans give every grade one lower than the teacher
    human: dict[str, dict[str, int]] = {r["qid"]: {} for r in test}
    for r in test:
        human[r["qid"]][r["doc_id"]] = max(r["grade"] - 1, 0)
    write_beir_qrels(qrels, human)
    out = tmp_path / "eval"
    result = evaluate(
        CheckpointEvalConfig(
            data=str(tiny_dataset / "test.jsonl"),
            calibration_data=str(tiny_dataset / "validation.jsonl"),
            out=str(out),
            model=args.output_dir,
            labels="both",
            qrels=str(qrels),
            plots=False,
        )
    )
    rows = [json.loads(line) for line in (out / "predictions.jsonl").open()]
    grades = np.array([row["grade"] for row in rows])
    assert all((row["grade"] >= 2) == bool(row["predicted"]) for row in rows)
    for source, reference in (
        ("teacher", np.array([r["grade"] for r in test])),
        ("human", np.array([max(r["grade"] - 1, 0) for r in test])),
    ):
        found = result.metrics[source].grades
        assert found.pairs == len(test)
        assert found.accuracy == pytest.approx(np.mean(grades == reference))
        assert found.mae == pytest.approx(np.mean(np.abs(grades - reference)))
    # The tiny task is learnable: the grades agree with the teacher's far above chance.
    assert result.metrics["teacher"].grades.weighted_kappa > 0.5


def test_bm25_scores_a_query_without_an_indexable_word_zero_instead_of_crashing():
    """A query with no indexable word ("v 0": one-letter words) was an IndexError inside bm25s."""
    from measure.classification.baselines import bm25_scores

    scores = bm25_scores(["v 0", "axon terminal"], ["axon terminals", "axon terminals"])
    assert scores[0] == 0.0 and scores[1] > 0


def test_a_baselines_default_out_never_replaces_the_graders():
    from measure.classification.checkpoint import CheckpointEvalConfig

    grader = CheckpointEvalConfig(model="runs/grader")
    baseline = CheckpointEvalConfig(baseline="bm25", calibration_data="val.jsonl")
    assert grader.out == "runs/eval/grader" and baseline.out == "runs/eval/bm25"


def _metrics_file() -> dict:
    """metrics.json as relevance-grader evaluate writes it."""
    at_half = {"pairs": 10, "accuracy": 0.7, "f1": 0.6, "roc_auc": None, "threshold": 0.5}
    return {
        "format_version": 1,
        "name": "grader",
        "data": "runs/dataset/test.jsonl",
        "pairs": 10,
        "pairs_per_second": 12.5,
        "config": {"baseline": None, "labels": "teacher"},
        "calibration_scores": "scored",
        "calibration": {"method": "temperature", "temperature": 1.4},
        "threshold": 0.35,
        "calibration_pairs": 8,
        "metrics": {
            "teacher": {
                "at_0.5": at_half,
                "oracle_best_f1_threshold": None,
                "missing": 0,
                "at_validation_threshold": at_half | {"f1": 0.65, "threshold": 0.35},
                "ece_uncalibrated": 0.1,
            }
        },
        "primary": {"labels": "teacher", "metric": "f1", "value": 0.65},
    }


def test_a_metrics_file_reads_and_keeps_its_keys(tmp_path: Path):
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(_metrics_file()))
    result = CheckpointMetrics.read(path)
    teacher = result.metrics["teacher"]
    assert teacher.decided["f1"] == 0.65 and teacher.at_half["f1"] == 0.6
    assert result.calibration.temperature == 1.4 and result.baseline is None
    # eval.study's stamp and time go in and come back out.
    result.study_fingerprint, result.seconds = "abc123", 4.2
    result.write(path)
    written = json.loads(path.read_text())
    assert written == _metrics_file() | {"study_fingerprint": "abc123", "seconds": 4.2}
    again = CheckpointMetrics.read(path)
    assert (again.study_fingerprint, again.seconds) == ("abc123", 4.2)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"format_version": None}, "no format version, but this release reads version 1: re-run"),
        ({"surprise": 1}, "surprise: Extra inputs are not permitted"),
    ],
)
def test_a_metrics_file_of_an_earlier_format_or_another_shape_is_one_line(
    tmp_path: Path, change: dict, problem: str
):
    """A metrics.json without a format_version (as the command wrote it before it had one) is
    not read as this release's, nor one with a key this release does not write."""
    data = {k: v for k, v in (_metrics_file() | change).items() if v is not None}
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as refused:
        CheckpointMetrics.read(path)
    assert str(refused.value).startswith(f"{path}: {problem}")


def test_a_metrics_file_of_another_shape_is_refused_in_one_line(tmp_path: Path):
    from core.errors import InputError
    from measure.classification.compare import main

    search = tmp_path / "search.json"  # search's metrics.json, given to compare
    metrics = {"format_version": 1, "labeler": "x", "k": 10, "mean": {"run": {"ndcg@10": 0.5}}}
    search.write_text(json.dumps(metrics))
    with pytest.raises(InputError, match=f"^{re.escape(str(search))}: name: Field required$"):
        main(["--results", str(search)])
    bad = _metrics_file()
    bad["metrics"]["teacher"]["missing"] = "some"
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(InputError, match=f"^{re.escape(str(path))}: metrics.teacher.missing: "):
        CheckpointMetrics.read(path)


def test_the_export_reads_what_eval_checkpoint_writes(tmp_path: Path):
    """models.export reads metrics.json through its own model (its layer may not import
    CheckpointMetrics): the same version, and the fields it takes as written."""
    from models.grader_config import ExportedEvaluation

    assert ExportedEvaluation.FORMAT_VERSION == CheckpointMetrics.FORMAT_VERSION
    fields, full = ExportedEvaluation.model_fields, CheckpointMetrics.model_fields
    assert set(fields) <= set(full)
    for name in ("threshold", "calibration"):  # what it decides with: the same types
        assert fields[name].annotation == full[name].annotation
    path = tmp_path / "metrics.json"
    CheckpointMetrics.from_data(_metrics_file(), "test").write(path)
    exported = ExportedEvaluation.read(path)
    assert exported.threshold == 0.35 and exported.calibration.temperature == 1.4
    file = _metrics_file()
    assert exported.results() == {k: file[k] for k in ("data", "pairs", "metrics")}
