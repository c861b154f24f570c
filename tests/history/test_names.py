"""How evaluations are named (issue 61): a version is always a version, an all-digit one too; an
evaluation's id is written id:N everywhere one is taken; a name that could mean two evaluations
is refused in one line; and a system or version that could not be named back is refused when it
is recorded, before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import InputError
from eval.history.compare import CompareConfig, compare_evaluations
from eval.history.gate import GateConfig, decide
from eval.history.monitor import MonitorConfig, run_checks
from tests.history.records import record, values


def builds(store) -> None:
    """Builds 1, 5 and 2 of "dense" (ids 1, 2, 3), in that order; build 2 regressed by 0.3."""
    record(store, "1", values(1), 1)
    record(store, "5", values(1), 2)
    record(store, "2", values(1, shift=0.3), 3)


def gate_config(**changes) -> GateConfig:
    return GateConfig(**{"store": "unused", "system": "dense", "margin": 0.02, **changes})


def test_an_all_digit_candidate_is_a_version_not_an_id(store):
    builds(store)
    by_version = decide(store, gate_config(candidate="2"))
    assert not by_version.passed
    assert "dense@2 − dense@5" in by_version.reason  # build 2 against the build before it
    by_id = decide(store, gate_config(candidate="id:2"))  # evaluation 2 is build 5
    assert by_id.passed and "dense@5 − dense@1" in by_id.reason
    named = decide(store, gate_config(candidate="2", baseline="1"))
    assert not named.passed and "dense@2 − dense@1" in named.reason


def test_an_all_digit_monitor_baseline_is_a_version_not_an_id(store):
    builds(store)
    config = MonitorConfig(store="unused", system="dense", margin=0.02)
    with pytest.raises(InputError, match=r"after the baseline dense@2 \(id:3\)"):
        run_checks(store, MonitorConfig(**{**vars(config), "baseline": "2"}))
    checks = run_checks(store, MonitorConfig(**{**vars(config), "baseline": "5"}))
    assert [check.info.ref for check in checks] == ["dense@2"]
    by_id = run_checks(store, MonitorConfig(**{**vars(config), "baseline": "id:1"}))
    assert [check.info.ref for check in by_id] == ["dense@5", "dense@2"]


def test_a_version_that_does_not_exist_says_how_an_id_is_written(store):
    builds(store)
    with pytest.raises(InputError) as caught:
        decide(store, gate_config(candidate="7"))
    message = str(caught.value)
    assert "no evaluation dense@7; it holds id:3 (dense@2), id:2 (dense@5)" in message
    assert message.endswith("an evaluation's id is written id:7")


def test_compare_takes_id_n_or_system_at_version_and_refuses_a_bare_number(store):
    builds(store)
    result = compare_evaluations(store, CompareConfig(a="id:3", b="dense@5"))
    assert (result.a.ref, result.b.ref) == ("dense@2", "dense@5")
    with pytest.raises(InputError, match=r"'2': expected id:N .* \(evaluation id 2: give id:2\)"):
        compare_evaluations(store, CompareConfig(a="2", b="dense@5"))
    with pytest.raises(InputError, match="an id is written id: and a number"):
        compare_evaluations(store, CompareConfig(a="id:two", b="dense@5"))
    with pytest.raises(InputError, match=r"--candidate: evaluation id:1 is of system 'dense'"):
        decide(store, gate_config(system="bm25", candidate="id:1"))


def test_a_name_that_could_mean_two_evaluations_is_refused_in_one_line(store):
    builds(store)
    # Versions recorded before such names were refused: 'id:1' and 'last'.
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE evaluations SET version = 'id:1' WHERE id = 2")
    with pytest.raises(InputError) as caught:
        decide(store, gate_config(candidate="id:1"))
    assert "--candidate: 'id:1' could mean evaluation id 1 or dense's version 'id:1'" in str(
        caught.value
    )
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE evaluations SET version = 'last' WHERE id = 2")
    with pytest.raises(InputError, match="'last' could mean dense's previous version or its"):
        decide(store, gate_config(candidate="2"))


@pytest.mark.parametrize(
    "system, version, problem",
    [
        ("my@sys", "v2", r"system 'my@sys' holds '@', which separates a system from its version"),
        ("dense", "id:3", r"version 'id:3' begins with 'id:', which names an evaluation"),
        ("id:3", "v2", r"system 'id:3' begins with 'id:'"),
        ("dense", "last", r"version 'last' is 'last', which history gate's --baseline reads"),
        ("dense", " v2", r"version ' v2' begins or ends with white space"),
        ("dense", "v2\n", r"version 'v2\\n' begins or ends with white space"),
        ("dense", "", r"version '' is empty"),
        ("dense", "v" * 201, r"version 'v{40}…' is 201 characters long; the store keeps at most"),
    ],
)
def test_the_store_refuses_a_name_that_could_not_be_named_back(store, system, version, problem):
    with pytest.raises(InputError, match=problem):
        record(store, version, values(1), 1, system=system)
    assert store.list_evaluations() == []


def test_a_system_no_evaluation_can_be_of_is_one_line_saying_why(store):
    builds(store)
    with pytest.raises(InputError, match=r"system 'my@sys' holds '@'.*: no evaluation can be of"):
        decide(store, gate_config(system="my@sys", candidate="v2"))


def test_a_version_holding_at_is_named_back_as_itself(store):
    """``my`` + ``sys@v2`` prints as my@sys@v2 and reads back as that one evaluation: no system
    can hold '@', so the first '@' ends the system."""
    record(store, "sys@v2", values(1), 1, system="my")
    assert store.get("my@sys@v2").ref == "my@sys@v2"


def test_search_track_refuses_a_name_before_any_labelling(tmp_path: Path):
    from tests.history.test_record import search, write_run

    store = tmp_path / "h.sqlite"
    write_run(tmp_path / "dense.trec", seed=0)
    for flags, line in (
        (["--system", "my@sys"], r"--system: system 'my@sys' holds '@'"),
        (["--version", "v" * 300], r"--version: version 'v{40}…' is 300 characters long"),
        (["--version", "id:4"], r"--version: version 'id:4' begins with 'id:'"),
    ):
        with pytest.raises(InputError, match=line):
            search(tmp_path, "s", "--track", str(store), *flags)
    (tmp_path / "dense.trec").rename(tmp_path / "my@sys.trec")
    with pytest.raises(InputError, match=r"--system \(default: the run's name\): system 'my@sys'"):
        search_run(tmp_path, tmp_path / "my@sys.trec", "--track", str(store))
    assert not (tmp_path / "s").exists() and not store.exists()  # nothing labelled or created


def search_run(tmp: Path, run: Path, *extra: str) -> None:
    from eval.search.command import main
    from tests.history.test_record import ADI

    main(
        [
            "--run", str(run), "--corpus", str(ADI), "--labeler", f"qrels:{ADI / 'qrels.tsv'}",
            "--out", str(tmp / "s"), "--report", "false", *extra,
        ]
    )  # fmt: skip


def test_the_main_job_refuses_a_name_or_a_store_before_any_stage():
    from eval.jobs.pipeline import PipelineConfig

    with pytest.raises(InputError, match=r"--system: system 'my@sys' holds '@'"):
        PipelineConfig(track="h.sqlite", system="my@sys")
    with pytest.raises(InputError, match=r"--version: version 'v{40}…' is 250 characters long"):
        PipelineConfig(track="h.sqlite", version="v" * 250)
    with pytest.raises(InputError, match=r"mysql is not supported"):
        PipelineConfig(track="mysql://me@db/history")
