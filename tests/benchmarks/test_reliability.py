"""The reliability campaign (benchmarks.reliability): one test per bad-input case (a clear one-line
error naming the option or the file and line, a non-zero exit, no traceback, the inputs unchanged)
and the teacher-fault run (kill and resume against a faulty endpoint)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.reliability import (
    REPLAYS_DATA,
    REPLAYS_EVAL,
    REPLAYS_JUDGING,
    REPLAYS_TEACHER_API,
    Case,
    Replay,
    cases,
    replay_report,
    report,
    run_case,
    run_replay,
    teacher_faults,
)


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


@pytest.mark.slow
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


# ---- Round 3 (issue 42), data side -----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("replay", REPLAYS_DATA, ids=lambda r: f"item{r.item}-{r.name}")
def test_round_3_data_replays_hold(replay: Replay, tmp_path: Path):
    assert run_replay(replay, tmp_path) is None


@pytest.mark.slow
@pytest.mark.parametrize("replay", REPLAYS_EVAL, ids=lambda r: f"item{r.item}-{r.name}")
def test_round_3_evaluation_replays_hold(replay: Replay, tmp_path: Path):
    assert run_replay(replay, tmp_path) is None


@pytest.mark.parametrize("replay", REPLAYS_JUDGING, ids=lambda r: f"item{r.item}-{r.name}")
def test_round_3_judging_replays_hold(replay: Replay, tmp_path: Path):
    assert run_replay(replay, tmp_path) is None


@pytest.mark.slow
@pytest.mark.parametrize("replay", REPLAYS_TEACHER_API, ids=lambda r: f"item{r.item}-{r.name}")
def test_round_4_api_text_and_teacher_replays_hold(replay: Replay, tmp_path: Path):
    assert run_replay(replay, tmp_path) is None


def test_a_replay_that_fails_is_reported_with_what_went_wrong(tmp_path: Path):
    def broken(root: Path) -> None:
        raise AssertionError("3 replies cached of 20")

    problem = run_replay(Replay(1, "broken", broken), tmp_path)
    assert problem == "AssertionError: 3 replies cached of 20"
    assert "0/1 replays hold" in replay_report([(Replay(1, "broken", broken), problem)])
