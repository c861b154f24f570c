"""per_query.json as a typed file (PerQueryResults): written and read through one model; the bare
{run: {qid: result}} file of an earlier format, a newer version and a damaged hit each refused in
one line naming the file (and the field)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import InputError
from measure.metrics.results import HitResult, PerQueryResults, QueryResult, QueryUsage


def _results() -> PerQueryResults:
    hits = [
        HitResult(index=0, id="d1", relevant=True, score=0.8, justification="p = 0.8"),
        HitResult(index=1, id="d2", relevant=False, grade=1, judged=False),
        HitResult(index=2, id="d3", relevant=False, unusable="no verdict in the reply"),
    ]
    return PerQueryResults(
        runs={
            "bm25": {
                "q1": QueryResult(
                    hits=hits,
                    metrics={"ndcg@10": 0.5, "map": None},
                    usage=QueryUsage(evaluation_input_tokens=12),
                )
            },
            "dense": {"q1": QueryResult(hits=hits[:1], metrics={"ndcg@10": 1.0})},
        }
    )


def test_written_and_read_back_with_its_format_version(tmp_path: Path):
    path = tmp_path / PerQueryResults.FILE
    _results().write(path)
    written = json.loads(path.read_text())
    assert written["format_version"] == PerQueryResults.FORMAT_VERSION
    hits = written["runs"]["bm25"]["q1"]["hits"]
    # Every field is written, None included; "unusable" only on the hit that has one.
    assert hits[0] == {
        "index": 0,
        "id": "d1",
        "relevant": True,
        "score": 0.8,
        "grade": None,
        "justification": "p = 0.8",
        "judged": True,
    }
    assert [("unusable" in hit) for hit in hits] == [False, False, True]
    assert PerQueryResults.read(path) == _results()


def test_a_bare_file_of_an_earlier_format_is_refused_with_the_stage_to_re_run(tmp_path: Path):
    """The first per_query.json was {run: {qid: result}} with no format_version: not upgraded,
    one line naming it."""
    bare = {run: results for run, results in _results().dump()["runs"].items()}
    path = tmp_path / PerQueryResults.FILE
    path.write_text(json.dumps(bare))
    with pytest.raises(InputError) as refused:
        PerQueryResults.read(path)
    assert str(refused.value) == (
        f"{path}: no format version, but this release reads version 1: "
        "re-run the stage that wrote it"
    )


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda data: data.update(format_version=7),
            "format version 7 is newer than this release reads (1); upgrade relevance-grader "
            "to read it",
        ),
        (
            lambda data: data["runs"]["bm25"]["q1"]["hits"][1].update(relevant="maybe"),
            "runs.bm25.q1.hits.1.relevant: Input should be a valid boolean, unable to interpret "
            "input",
        ),
        (
            lambda data: data["runs"]["dense"]["q1"]["hits"][0].pop("id"),
            "runs.dense.q1.hits.0.id: Field required",
        ),
        (
            lambda data: data["runs"]["dense"]["q1"].update(hits=None),
            "runs.dense.q1.hits: Input should be a valid list",
        ),
    ],
)
def test_a_file_that_does_not_fit_is_one_line_naming_it(tmp_path: Path, change, problem):
    data = _results().dump()
    change(data)
    path = tmp_path / PerQueryResults.FILE
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as refused:
        PerQueryResults.read(path)
    assert str(refused.value) == f"{path}: {problem}"
    assert "\n" not in str(refused.value)


def test_a_folder_is_read_through_its_file_and_a_missing_one_named(tmp_path: Path):
    _results().write(tmp_path / PerQueryResults.FILE)
    assert PerQueryResults.of(tmp_path) == _results()
    with pytest.raises(FileNotFoundError, match="elsewhere not found"):
        PerQueryResults.of(tmp_path / "elsewhere")
