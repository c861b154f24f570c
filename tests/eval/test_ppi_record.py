"""metrics.json's typed ``ppi`` section (measure.metrics.ppi_record): what eval.search writes reads
back as it was written, key for key, and a file of an earlier format or a section that does not
fit is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import InputError
from eval.report.ppi_markdown import ppi_table
from eval.search.ppi_report import ppi_estimates
from eval.search.settings import SearchEvalConfig
from measure.metrics.ppi_record import PpiRecord
from measure.metrics.results import SearchMetrics

INTERVAL_KEYS = {"estimate", "low", "high", "n", "unjudged", "lam", "method", "se", "df", "width"}


def _section() -> PpiRecord:
    """eval.search's section for two runs on 30 queries, 10 of them judged by people."""
    labeler = {f"q{i}": 0.1 * (i % 7) for i in range(30)}
    human = {f"q{i}": 0.1 * ((i + 1) % 7) for i in range(10)}
    shifted = {q: min(1.0, v + 0.05) for q, v in labeler.items()}
    lower = {q: 0.3 * v for q, v in human.items()}
    per_run = {
        "a": {"ndcg@10": labeler, "map": labeler},
        "b": {"ndcg@10": shifted, "map": labeler},
        "c": {"ndcg@10": labeler, "map": labeler},
    }
    truth = {
        "a": {"ndcg@10": human, "map": human},
        "b": {"ndcg@10": human, "map": human},
        "c": {"ndcg@10": lower, "map": human},
    }
    return ppi_estimates(SearchEvalConfig(human="h.qrels"), per_run, truth)


def test_the_written_section_reads_back_key_for_key(tmp_path: Path):
    ppi = _section()
    path = tmp_path / "metrics.json"
    SearchMetrics(labeler="qrels", k=10, mean={"a": {"ndcg@10": 0.3}}, ppi=ppi).write(path)
    written = json.loads(path.read_text())["ppi"]
    assert set(written) == {
        "human",
        "judged_queries",
        "estimator",
        "confidence",
        "runs",
        "differences",
        "measured_coverage",
        "multiplicity",
    }
    own = written["runs"]["a"]["ndcg@10"]
    assert set(own) == {"labeler_mean", "queries", "human_only", "ppi", "effective_human_queries"}
    assert set(own["ppi"]) == INTERVAL_KEYS  # se and df kept where null
    difference = written["differences"]["b - a"]
    assert set(difference["ndcg@10"]) == set(own) | {"p_value", "p_holm"}  # Holm: primary only
    assert set(difference["map"]) == set(own) | {"p_value"}
    assert written["multiplicity"]["method"] == "holm"
    # Holm over the two primary differences: the smaller p doubled, the larger kept above it.
    (p1, h1), (p2, h2) = sorted(
        (d["ndcg@10"]["p_value"], d["ndcg@10"]["p_holm"]) for d in written["differences"].values()
    )
    assert h1 == pytest.approx(min(1.0, 2 * p1)) and h2 == pytest.approx(max(h1, p2))

    read = SearchMetrics.read(path).ppi
    assert read == ppi and read.dump() == written
    assert read.runs["a"]["ndcg@10"].ppi.n == 10
    assert read.differences["b - a"]["ndcg@10"].p_holm == pytest.approx(
        ppi.differences["b - a"]["ndcg@10"].p_holm
    )
    assert ppi_table(read) == ppi_table(ppi)


def test_a_file_of_an_earlier_format_is_refused_in_one_line(tmp_path: Path):
    """A metrics.json without a format_version (as the section was first written, with no se,
    df, p-values or coverage) is not upgraded: one line says to re-run the stage."""
    written = SearchMetrics(labeler="qrels", k=10, mean={"a": {"ndcg@10": 0.3}}, ppi=_section())
    earlier = written.dump()
    del earlier["format_version"]
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(earlier))
    with pytest.raises(InputError) as refused:
        SearchMetrics.read(path)
    assert str(refused.value) == (
        f"{path}: no format version, but this release reads version 1: "
        "re-run the stage that wrote it"
    )


def test_a_section_that_does_not_fit_is_refused_in_one_line(tmp_path: Path):
    written = SearchMetrics(labeler="qrels", k=10, mean={"a": {"ndcg@10": 0.3}}, ppi=_section())
    broken = written.dump()
    del broken["ppi"]["runs"]["a"]["ndcg@10"]["ppi"]["low"]
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(InputError, match=r"metrics\.json: ppi\.runs\.a\.ndcg@10\.ppi\.low: ") as e:
        SearchMetrics.read(path)
    assert "\n" not in str(e.value)
