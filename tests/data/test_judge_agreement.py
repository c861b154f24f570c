from __future__ import annotations

import json
from pathlib import Path

import pytest

from data.judge_agreement import AgreementConfig, run_agreement
from tests.commands import run_command


def test_agreement_against_qrels_known_confusion(tmp_path: Path):
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"q\td{i}\t{g}\n" for i, g in enumerate([0, 1, 2, 3, 3, 0]))
    )
    # judge grades: d0 0 (TN), d1 2 (FP), d2 2 (TP), d3 1 (FN), d4 3 (TP), d5 error (skipped)
    judged = [(0, 0.1), (2, 0.7), (2, 0.8), (1, 0.4), (3, 0.9)]
    lines = [
        {"qid": "q", "query": "x", "doc_id": f"d{i}", "text": "t", "grade": g, "p_relevant": p}
        for i, (g, p) in enumerate(judged)
    ]
    lines.append({"qid": "q", "query": "x", "doc_id": "d5", "text": "t", "error": "unparseable"})
    judgments = tmp_path / "j.jsonl"
    judgments.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = run_agreement(
        AgreementConfig(judgments=str(judgments), qrels=str(qrels), out=str(tmp_path / "agr"))
    )
    assert result["pairs"] == 5 and result["skipped_errors"] == 1
    assert result["confusion_matrix"] == [[1, 1], [1, 2]]
    assert result["precision"] == pytest.approx(2 / 3) and result["recall"] == pytest.approx(2 / 3)
    # kappa = (po - pe) / (1 - pe) with po = 3/5, pe = (2/5)(2/5) + (3/5)(3/5) = 13/25
    assert result["kappa"] == pytest.approx((3 / 5 - 13 / 25) / (1 - 13 / 25))
    assert "quadratic_weighted_kappa" in result and result["roc_auc"] == pytest.approx(5 / 6)
    assert (tmp_path / "agr.md").read_text().startswith("# Agreement")
    assert json.loads((tmp_path / "agr.json").read_text())["per_query"]["q"]["pairs"] == 5


def test_agreement_cli_needs_a_reference(tmp_path: Path):
    judgments = tmp_path / "j.jsonl"
    judgments.write_text(
        json.dumps({"qid": "q", "query": "x", "doc_id": "d", "text": "t", "label": 1}) + "\n"
    )
    result = run_command(["judge-agreement", "--judgments", str(judgments)])
    assert result.returncode == 2 and "--qrels" in result.stderr
