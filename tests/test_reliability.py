"""The reliability campaign (eval.bench.reliability): one test per bad-input case (a clear one-line
error naming the option or the file and line, a non-zero exit, no traceback, the inputs unchanged)
and the teacher-fault run (kill and resume against a faulty endpoint)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.bench.reliability import Case, cases, report, run_case, teacher_faults


@pytest.mark.parametrize("case", cases(), ids=lambda case: case.name)
def test_bad_input_gets_a_clear_error_and_loses_nothing(case: Case, tmp_path: Path):
    outcome = run_case(case, tmp_path)
    assert not outcome.traceback, outcome.last_line
    assert outcome.exit_code, "exited 0 on bad input"
    assert outcome.clear, f"unclear error: {outcome.last_line!r} (expected {case.expect})"
    assert outcome.inputs_unchanged


def test_the_campaign_covers_at_least_40_cases_and_reports_them(tmp_path: Path):
    table = cases()
    assert len(table) >= 40 and len({c.name for c in table}) == len(table)
    text = report([run_case(table[0], tmp_path)])
    assert "1/1 bad inputs" in text


def test_teacher_faults_and_a_kill_lose_nothing_pay_nothing_twice_and_mislabel_nothing(
    tmp_path: Path,
):
    figures = teacher_faults(tmp_path, kill_after=20)
    assert figures["resume_exit"] == 0 and figures["finished_before_kill"] >= 20
    assert not figures["output_written_before_the_end"]
    assert figures["pairs_lost"] == 0 and figures["finished_pairs_cached_twice"] == 0
    assert figures["completed_pairs_paid_twice"] == 0
    assert figures["labels_from_unusable_replies"] == 0
    assert figures["error_records"] == figures["unusable_pairs"]
