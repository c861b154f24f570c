"""history compare, gate and monitor on a store of evaluations whose per-query values are known:
the paired estimate is the mean difference, refusals name what differs, the gate's exit status
follows the data, and the monitor raises an alarm on a real drop but not on noise."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from core.errors import InputError
from eval.history.compare import CompareConfig, compare_evaluations, comparison_text, positional
from eval.history.gate import GateConfig, decide
from eval.history.monitor import MonitorConfig, run_checks
from eval.history.store import open_store
from tests.commands import run_command
from tests.history.records import record, values


def test_a_comparison_is_the_mean_paired_difference_with_an_interval_around_it(store):
    base, cand = values(1), values(2)
    record(store, "v1", base, day=1)
    record(store, "v2", cand, day=2)
    result = compare_evaluations(store, CompareConfig(a="dense@v2", b="dense@v1"))
    c = result.metrics["ndcg@10"]
    expected = np.mean([cand[q] - base[q] for q in base])
    assert c.estimate == pytest.approx(expected)
    assert c.low < c.estimate < c.high
    assert c.queries == 40 and c.human_queries == 0
    assert "paired t" in c.method and "no human judgments" in c.method
    biggest = max(base, key=lambda q: abs(cand[q] - base[q]))
    assert result.moved[0].qid == biggest


def test_the_moved_queries_name_the_hits_that_entered_and_left_with_their_labels(store):
    base, cand = {"q1": 0.2, "q2": 0.5, "q3": 0.5}, {"q1": 0.9, "q2": 0.5, "q3": 0.4}
    record(store, "v1", base, 1, tops={q: ["d1", "d2"] for q in base}, labels={"q1": {"d2": 0}})
    record(
        store,
        "v2",
        cand,
        2,
        tops={"q1": ["d1", "d7"], "q2": ["d1", "d2"], "q3": ["d1", "d2"]},
        labels={"q1": {"d7": 3}},
    )
    result = compare_evaluations(store, CompareConfig(a="dense@v2", b="dense@v1", moved=1))
    (moved,) = result.moved
    assert (moved.qid, [h.doc_id for h in moved.entered], [h.doc_id for h in moved.left]) == (
        "q1",
        ["d7"],
        ["d2"],
    )
    assert moved.entered[0].label == 3 and moved.left[0].label == 0
    text = comparison_text(result)
    assert "q1: 0.200" not in text and "d7 (3)" in text and "d2 (0)" in text


def test_evaluations_by_different_labelers_are_refused_in_one_line_naming_it(store):
    record(store, "v1", values(1), 1, labeler="a")
    record(store, "v2", values(2), 2, labeler="z")
    with pytest.raises(InputError, match=r"differ in labeler .*--relabel") as error:
        compare_evaluations(store, CompareConfig(a="dense@v2", b="dense@v1"))
    assert "\n" not in str(error.value)


def test_different_query_sets_are_compared_on_the_shared_queries_only_when_asked(store):
    record(store, "v1", values(1), 1)
    record(store, "v2", values(2, n=30), 2)
    with pytest.raises(InputError, match="differ in query set"):
        compare_evaluations(store, CompareConfig(a="dense@v2", b="dense@v1"))
    result = compare_evaluations(
        store, CompareConfig(a="dense@v2", b="dense@v1", common_queries=True)
    )
    assert result.metrics["ndcg@10"].queries == 30


def test_compare_takes_its_two_evaluations_as_positional_arguments():
    assert positional(["3", "dense@v1", "--store", "s"]) == [
        "--a",
        "3",
        "--b",
        "dense@v1",
        "--store",
        "s",
    ]
    assert positional(["--a", "3"]) == ["--a", "3"]


def gate_config(**changes) -> GateConfig:
    return GateConfig(**{"store": "unused", "system": "dense", "candidate": "v2", **changes})


def test_the_gate_fails_a_real_regression_and_passes_an_unchanged_system(store):
    record(store, "v1", values(1), 1)
    record(store, "v2", values(1, shift=0.2), 2)  # every query 0.2 worse (clipped at 0)
    record(store, "v3", values(1), 3)
    failed = decide(store, gate_config(margin=0.02))
    assert not failed.passed and failed.reason.startswith("FAIL ndcg@10")
    assert "dense@v2 − dense@v1" in failed.reason
    passed = decide(store, gate_config(candidate="v3", baseline="v1", margin=0.02))
    assert passed.passed, passed.reason


def test_non_inferiority_needs_evidence_that_a_regression_gate_does_not(store):
    record(store, "v1", values(1, n=40), 1)
    record(store, "v2", values(7, n=40), 2)  # another system's noise: a wide interval around 0
    regression = decide(store, gate_config(margin=0.02))
    non_inferiority = decide(store, gate_config(margin=0.02, mode="non-inferiority"))
    assert regression.passed and not non_inferiority.passed


def test_a_gate_without_a_baseline_says_so_and_passes_only_when_told(store):
    record(store, "v2", values(1), 1)
    with pytest.raises(InputError, match="no baseline yet"):
        decide(store, gate_config())
    assert decide(store, gate_config(without_baseline="pass")).passed


def test_the_monitor_raises_an_alarm_on_a_drop_and_not_on_fresh_noise(store):
    record(store, "v1", values(0, n=200, prefix="q"), 0)
    # Each daily check evaluates queries of its own (fresh traffic) against the fixed baseline.
    rng = np.random.default_rng(5)
    base = values(0, n=200, prefix="q")
    for day in range(1, 6):
        sample = rng.choice(sorted(base), size=40, replace=False)
        noisy = {q: float(np.clip(base[q] + rng.normal(0, 0.05), 0, 1)) for q in sample}
        record(store, "live", noisy, day)
    config = MonitorConfig(store="unused", system="dense", baseline="v1", margin=0.02)
    assert all(check.decision and check.decision.passed for check in run_checks(store, config))
    for day in range(6, 12):
        sample = rng.choice(sorted(base), size=40, replace=False)
        record(store, "live", {q: max(base[q] - 0.3, 0) for q in sample}, day)
    checks = run_checks(store, config)
    assert checks[-1].decision is not None and not checks[-1].decision.passed


def test_the_gate_command_exits_1_with_one_line_and_0_when_unchanged(tmp_path: Path):
    path = tmp_path / "history.sqlite"
    store = open_store(str(path))
    record(store, "v1", values(1), 1)
    record(store, "v2", values(1, shift=0.2), 2)
    store.close()
    command = ["history", "gate", "--store", str(path), "--system", "dense", "--margin", "0.02"]
    failed = run_command([*command, "--candidate", "v2"])
    assert failed.returncode == 1 and failed.stdout.startswith("FAIL"), failed.stderr
    assert len(failed.stdout.strip().splitlines()) == 1
    nowhere = run_command(
        [*command[:3], str(tmp_path / "none.sqlite"), *command[4:], "--candidate", "v2"]
    )
    assert nowhere.returncode == 2 and "no such file" in nowhere.stderr
    assert not (tmp_path / "none.sqlite").exists()  # a reader creates no empty store
    missing = run_command([*command, "--candidate", "v9"])
    assert missing.returncode == 2 and "no evaluation dense@v9" in missing.stderr


def test_the_gate_appends_its_decision_and_comparison_as_markdown(tmp_path: Path):
    from eval.history.gate import main as gate_main

    path = tmp_path / "history.sqlite"
    store = open_store(str(path))
    record(store, "v1", values(1), 1)
    record(store, "v2", values(1, shift=0.2), 2)
    store.close()
    summary = tmp_path / "summary.md"
    summary.write_text("earlier steps' summary\n")
    flags = ["--store", str(path), "--system", "dense", "--candidate", "v2", "--margin", "0.02"]
    with pytest.raises(SystemExit) as exit_:
        gate_main([*flags, "--markdown", str(summary)])
    assert exit_.value.code == 1
    text = summary.read_text()
    assert text.startswith("earlier steps' summary\n### Search quality gate: FAIL\n")
    assert "| ndcg@10 | −0.1" in text  # the candidate is 0.2 worse, less where clipped at 0
    assert "Queries that moved most in ndcg@10:" in text
    assert len(re.findall(r"^\| q\d+ \|", text, re.M)) == 5


def test_the_gate_advises_what_it_has_for_another_labeler_and_never_relabel(store):
    record(store, "v1", values(1), 1, labeler="a")
    record(store, "v2", values(2), 2, labeler="z")
    with pytest.raises(InputError) as caught:
        decide(store, gate_config())
    message = str(caught.value)
    assert "evaluations id:2 (dense@v2) and id:1 (dense@v1) differ in labeler" in message
    assert "give --baseline a version measured by the candidate's" in message
    assert "`history compare id:2 id:1 --relabel LABELER --corpus PATH`" in message
    assert "give --relabel" not in message  # the gate has no --relabel


def test_the_monitor_skips_a_check_of_another_labeler_and_carries_on(store):
    base = values(0, n=200)
    record(store, "v1", base, 0)
    rng = np.random.default_rng(8)
    for day in range(1, 5):
        sample = rng.choice(sorted(base), size=40, replace=False)
        noisy = {q: float(np.clip(base[q] + rng.normal(0, 0.05), 0, 1)) for q in sample}
        record(store, "live", noisy, day, labeler="z" if day == 2 else "a")
    checks = run_checks(store, MonitorConfig(store="unused", system="dense", baseline="v1"))
    assert [check.decision is None for check in checks] == [False, True, False, False]
    skipped = checks[1].line
    assert skipped.startswith("check id:3 (dense@live): skipped: evaluations id:3 (dense@live)")
    assert "differ in labeler (qrels:z.txt vs qrels:a.txt)" in skipped
    assert "--relabel" not in skipped
    assert checks[-1].decision is not None and "queries over 3 checks" in checks[-1].line


def test_twenty_checks_of_the_same_queries_are_the_evidence_of_one(store):
    """A fixed set of 43 queries, 0.08 worse on average with a wide spread, checked 20 times:
    counted as 860 observations the sequence would exclude the margin; as 43 it does not."""
    base = values(0, n=43)
    rng = np.random.default_rng(3)
    live = {q: float(np.clip(v + rng.normal(-0.08, 0.3), 0, 1)) for q, v in base.items()}
    record(store, "v1", base, 0)
    record(store, "live", live, 1)
    config = MonitorConfig(store="unused", system="dense", baseline="v1", margin=0.02)
    (one,) = run_checks(store, config)
    for day in range(2, 21):
        record(store, "live", live, day)
    twenty = run_checks(store, config)
    assert len(twenty) == 20 and all(check.decision == one.decision for check in twenty)
    assert one.decision is not None and one.decision.passed  # no alarm
    assert "43 distinct queries over 1 check" in one.decision.reason
    assert "43 of its 43 queries were in earlier checks" in twenty[-1].line


def several_metrics(store, version: str, day: int, shift: float) -> None:
    """An evaluation recording five metrics whose per-query values are B's plus ``shift``."""
    from eval.history.record import t_estimate
    from eval.history.store import EvaluationRecord
    from tests.history.records import START, run_text

    metrics = ("ndcg@10", "map", "mrr", "p@10", "recall@10")
    per_metric = {m: values(i, shift=-shift) for i, m in enumerate(metrics)}
    import datetime as dt

    store.record(
        EvaluationRecord(
            system="dense",
            version=version,
            k=10,
            labeler="qrels:a.txt",
            labeler_fingerprint="a" * 64,
            corpus_fingerprint="b" * 64,
            queries_fingerprint="c" * 64,
            run_fingerprint=f"{day:064d}",
            run_name="dense",
            search_metrics="{}",
            run_text=run_text({q: ["d1"] for q in per_metric["map"]}, "dense"),
            labeler_values=per_metric,
            estimates=[t_estimate(m, list(v.values()), 0.05) for m, v in per_metric.items()],
            created_at=START + dt.timedelta(days=day),
        )
    )


def test_compare_calls_only_the_primary_metric_and_explains_every_mark(store):
    several_metrics(store, "v1", 1, 0.0)
    several_metrics(store, "v2", 2, 0.1)  # every metric of every query 0.1 better (clipped)
    result = compare_evaluations(store, CompareConfig(a="dense@v2", b="dense@v1"))
    assert all(c.low > 0 for c in result.metrics.values())  # every interval excludes 0...
    verdicts = {metric: result.verdict(metric) for metric in result.metrics}
    assert verdicts == {  # ...but only the primary metric is called better
        "ndcg@10": "A better",
        "map": "marginal",
        "mrr": "marginal",
        "p@10": "marginal",
        "recall@10": "marginal",
    }
    text = comparison_text(result)
    assert text.count("A better") == 1 and text.count("marginal") >= 4
    legend = text.splitlines()[6]
    assert legend.startswith("Only ndcg@10, the primary metric, is called better or worse")
    assert "Holm-adjusted over the 1 comparison made here" in legend
    assert "marginal: a 95% interval not adjusted for the number of metrics" in legend
    without_primary = compare_evaluations(
        store, CompareConfig(a="dense@v1", b="dense@v2", metrics=["map", "mrr"])
    )
    assert {without_primary.verdict(m) for m in without_primary.metrics} == {"marginal"}
    assert (
        "\nndcg@10, the primary metric, was not compared: every other metric's interval is "
        "marginal" in comparison_text(without_primary)
    )


def test_the_page_carries_the_same_verdicts_and_their_legend(store, tmp_path: Path):
    from eval.history.page import PageConfig, build_page

    several_metrics(store, "v1", 1, 0.0)
    several_metrics(store, "v2", 2, 0.1)
    page = build_page(store, PageConfig(store="unused", out=str(tmp_path / "h.html")))
    (pair,) = page.pairs
    assert pair.metrics["ndcg@10"].verdict == "A better"
    assert {pair.metrics[m].verdict for m in ("map", "mrr", "p@10")} == {"marginal"}
    assert pair.legend.startswith("Only ndcg@10, the primary metric, is called better or worse")


def test_the_gate_names_the_interval_it_used(store):
    """Per-query values of 0 and 1 (hit@10-like): their differences lie on {−1, 0, 1}, where
    the interval is the t with Agresti–Coull pseudo-observations, and the line says so."""
    rng = np.random.default_rng(2)
    record(store, "v1", {f"q{i}": float(rng.random() < 0.6) for i in range(40)}, 1)
    record(store, "v2", {f"q{i}": float(rng.random() < 0.5) for i in range(40)}, 2)
    reason = decide(store, gate_config(margin=0.02)).reason
    assert "(95%, paired t with Agresti–Coull pseudo-observations over 40 queries)" in reason
    compared = compare_evaluations(store, CompareConfig(a="dense@v2", b="dense@v1"))
    assert "pseudo-observations" in compared.metrics["ndcg@10"].method
