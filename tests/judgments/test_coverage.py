"""The measured coverage shown beside intervals: looked up at the largest studied n not above the
session's, and a metric below the target marked in eval.search's table."""

from __future__ import annotations

import pytest

import judgments.coverage as coverage
from eval.search.ppi_report import ppi_table
from judgments.ppi import estimate_metric
from measure.metrics.ppi_record import PpiRecord

TABLE = {
    "source": "docs/results.md 2026-11-26",
    "coverage": {
        "ndcg@10": {"5": 0.90, "10": 0.94, "20": 0.95},
        "map": {"5": 0.80, "10": 0.85},
    },
}


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setattr(coverage, "coverage_table", lambda: TABLE)


def test_coverage_is_read_at_the_largest_studied_n_not_above(table):
    # n = 15 lies between the studied 10 and 20: the lower of the two.
    assert coverage.measured_coverage("ndcg@10", 15).coverage == 0.94
    assert coverage.measured_coverage("ndcg@10", 15).at_n == 10
    assert coverage.measured_coverage("ndcg@10", 10).coverage == 0.94
    assert coverage.measured_coverage("ndcg@10", 99).at_n == 20
    assert coverage.measured_coverage("ndcg@10", 4) is None  # smaller than any studied n
    assert coverage.measured_coverage("map@10", 10).below_target  # MAP with its cut-off
    assert coverage.measured_coverage("hit@5", 10) is None
    assert "not measured" in coverage.coverage_note("hit@5", 10)
    assert "below the 0.93 target" in coverage.coverage_note("map", 12)
    # Coverage need not grow with n: between 20 and 40, the lower of the two.
    falling = {"coverage": {"precision@10": {"10": 0.95, "20": 0.95, "40": 0.89}}}
    coverage.coverage_table = lambda: falling  # restored by the fixture's monkeypatch
    found = coverage.measured_coverage("precision@10", 30)
    assert (found.coverage, found.at_n, found.below_target) == (0.89, 40, True)


def test_the_search_table_marks_a_metric_measured_below_the_target(table):
    labeler = {f"q{i}": 0.1 * (i % 7) for i in range(30)}
    human = {f"q{i}": 0.1 * ((i + 1) % 7) for i in range(10)}
    entry = estimate_metric(labeler, human, bounds=(0.0, 1.0)).record()
    report = PpiRecord(
        confidence=0.95,
        judged_queries=10,
        estimator="PPI++",
        runs={"bm25": {"ndcg@10": entry, "map": entry}},
        differences={},
        measured_coverage={m: coverage.measured_coverage(m, 10) for m in ("ndcg@10", "map")},
    )
    text = ppi_table(report)
    assert "| map † |" in text and "| ndcg@10 |" in text
    assert "map: measured coverage 0.850 at n = 10 (below the 0.93 target)" in text
