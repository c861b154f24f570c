"""The measured coverage shown beside intervals: the lowest over every population studied, read
at the studied sizes around the session's n, a metric below the target marked †, an n the study
did not measure marked ‡, and the committed table holding every population
docs/results/ppi-coverage.md reports."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import judgments.coverage as coverage
from eval.report.ppi_markdown import ppi_table
from judgments.ppi import estimate_metric
from measure.metrics.ppi_record import PpiRecord

REPO = Path(__file__).resolve().parents[2]
TABLE = {
    "format_version": 2,
    "confidence": 0.95,
    "populations": [
        {
            "name": "large",
            "source": "docs/results/ppi-coverage.md 2026-11-26",
            "coverage": {
                "ndcg@10": {"5": 0.90, "10": 0.94, "20": 0.95},
                "map": {"5": 0.80, "10": 0.85},
            },
        },
        {
            "name": "held-out",
            "source": "docs/results/ppi-coverage.md 2026-11-26",
            "coverage": {"ndcg@10": {"10": 0.91, "20": 0.96}, "map": {"10": 0.88}},
        },
    ],
}


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setattr(coverage, "coverage_table", lambda: TABLE)


def test_the_lowest_coverage_over_every_population_is_shown_with_its_population(table):
    # At n = 10 the held-out population is lower (0.91) than the large one (0.94): it is shown,
    # named, and below the target, where the large population alone would pass.
    found = coverage.measured_coverage("ndcg@10", 10)
    assert (found.coverage, found.at_n, found.population, found.populations) == (
        0.91,
        10,
        "held-out",
        2,
    )
    assert found.below_target and coverage.coverage_marks(found, 10) == "†"
    assert coverage.measured_coverage("ndcg@10", 20).coverage == 0.95  # the lower of 0.95, 0.96
    assert coverage.measured_coverage("map@10", 10).coverage == 0.85  # MAP with its cut-off


def test_an_n_the_study_did_not_measure_is_marked(table):
    # n = 15 lies between the studied 10 and 20: the lower of the two, marked as not studied.
    found = coverage.measured_coverage("ndcg@10", 15)
    assert (found.coverage, found.at_n) == (0.91, 10)
    assert coverage.coverage_marks(found, 15) == "†‡"
    assert "n = 15 not studied; at n = 10" in coverage.coverage_note("ndcg@10", found, 15)
    # Beyond the largest studied size, and a metric never studied: marked too.
    assert coverage.coverage_marks(coverage.measured_coverage("ndcg@10", 99), 99) == "‡"
    assert coverage.measured_coverage("hit@5", 10) is None
    assert coverage.coverage_marks(None, 10) == "‡"
    assert "not measured" in coverage.coverage_note("hit@5", None, 10)
    assert coverage.coverage_marks(coverage.measured_coverage("ndcg@10", 20), 20) == ""


def test_the_search_table_marks_and_explains_every_mark(table):
    labeler = {f"q{i}": 0.1 * (i % 7) for i in range(30)}
    human = {f"q{i}": 0.1 * ((i + 1) % 7) for i in range(12)}
    entry = estimate_metric(labeler, human, bounds=(0.0, 1.0)).record()
    report = PpiRecord(
        confidence=0.95,
        judged_queries=12,
        estimator="PPI++",
        runs={"bm25": {"ndcg@10": entry, "map": entry, "hit@10": entry}},
        differences={},
        measured_coverage={m: coverage.measured_coverage(m, 12) for m in ("ndcg@10", "map")}
        | {"hit@10": None},
    )
    text = ppi_table(report)
    assert "| map †‡ |" in text and "| ndcg@10 †‡ |" in text and "| hit@10 ‡ |" in text
    assert "map: measured coverage 0.850 (n = 12 not studied; at n = 10, lowest of 2 " in text
    assert "†: the lowest coverage measured" in text and "‡: the coverage study did not" in text


def test_the_committed_table_holds_every_population_the_results_record_reports():
    """docs/results/ppi-coverage.md's 2026-11-26 summary gives each population's lowest
    human-only / PPI++ coverage per metric and n; judgments/coverage.json must hold every one of
    those populations with those PPI++ figures (TREC DL included), so that a held-out population's lower figure is
    the one shown."""
    text = (REPO / "docs" / "results" / "ppi-coverage.md").read_text(encoding="utf-8")
    start = text.index("| population, labeler | metric | n = 5 | n = 10 | n = 20 | n = 40 |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        ppi = [float(re.search(r"/ ([\d.]+)", c).group(1)) for c in cells[2:]]
        rows.append((cells[0], cells[1], ppi))
    populations = coverage.coverage_table()["populations"]
    assert len(populations) == len({name for name, _, _ in rows}) == 4
    for name, metric, ppi in rows:
        expected = dict(zip(["5", "10", "20", "40"], ppi, strict=True))
        assert any(p["coverage"][metric] == expected for p in populations), (name, metric)
    # The figures a user is shown at n = 10: TREC DL's (finite-population correction) are the
    # lowest for P@10 and MAP, below the target where the two large populations alone were not.
    p10 = coverage.measured_coverage("precision@10", 10)
    assert (p10.coverage, p10.below_target) == (0.898, True)
    assert "TREC DL 2019" in p10.population
    assert coverage.measured_coverage("map", 10).coverage == 0.793
