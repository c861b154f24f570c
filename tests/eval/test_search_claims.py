"""eval.search's numbers never claim more than their data (issue 61): no interval from fewer
judged queries (or hits) than the coverage study supports, a human qrels file read on its own
scale (never on the grades one session happened to reach), and one significance rule with its
marks explained where they are printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from core.errors import InputError
from data.beir import read_corpus, read_qrels, read_queries, write_trec_qrels, write_trec_run
from judgments.coverage import MIN_JUDGED_QUERIES

K = 5


def _runs(adi_dir: Path, tmp_path: Path) -> list[Path]:
    """Three runs over every ADI query: 'good' puts a relevant document first, 'shuffled' and
    'other' rank the same documents at random."""
    qrels = read_qrels(adi_dir / "qrels.tsv")
    docs = sorted(read_corpus(adi_dir / "corpus.jsonl"))
    rng = np.random.default_rng(0)
    runs: dict[str, dict] = {"good": {}, "shuffled": {}, "other": {}}
    for q in sorted(read_queries(adi_dir / "queries.jsonl")):
        chosen = sorted(set(rng.choice(docs, 8, replace=False)) | set(qrels.get(q, {})))
        runs["good"][q] = {
            d: (10.0 if d in qrels.get(q, {}) else 0.0) + rng.random() for d in chosen
        }
        runs["shuffled"][q] = {d: float(rng.random()) for d in chosen}
        runs["other"][q] = {d: float(rng.random()) for d in chosen}
    paths = []
    for name, run in runs.items():
        write_trec_run(tmp_path / f"{name}.trec", run)
        paths.append(tmp_path / f"{name}.trec")
    return paths


def _search(adi_dir: Path, tmp_path: Path, runs: list[Path], *extra: str) -> dict:
    from eval.search.command import main

    main(
        [
            "--run", str(runs[0]), *(["--compare", *map(str, runs[1:])] if runs[1:] else []),
            "--corpus", str(adi_dir), "--labeler", f"qrels:{adi_dir / 'qrels.tsv'}",
            "--k", str(K), "--out", str(tmp_path / "s"), "--report", "false", *extra,
        ]
    )  # fmt: skip
    return json.loads((tmp_path / "s" / "metrics.json").read_text())


def _human_sample(adi_dir: Path, path: Path, queries: int, grade_of_relevant: int = 3) -> Path:
    """People's grades of the first ``queries`` ADI queries' documents (relevant ones at
    ``grade_of_relevant``)."""
    qrels = read_qrels(adi_dir / "qrels.tsv")
    chosen = sorted(qrels)[:queries]
    write_trec_qrels(path, {q: {d: grade_of_relevant for d in qrels[q]} for q in chosen})
    return path


def test_fewer_judged_queries_than_the_minimum_get_no_interval(adi_dir: Path, tmp_path: Path):
    """Two judged queries gave an interval 0.02 wide that missed the all-query value: below the
    minimum nothing is estimated, one line says why (the study's worst coverage below it) and
    how many more to judge, before any labelling; at the minimum the intervals are made."""
    runs = _runs(adi_dir, tmp_path)
    for judged in (2, MIN_JUDGED_QUERIES - 1):
        human = _human_sample(adi_dir, tmp_path / f"human-{judged}.qrels", judged)
        with pytest.raises(InputError) as refused:
            _search(adi_dir, tmp_path, runs[:2], "--human", str(human))
        assert str(refused.value) == (
            f"human: {human} judges {judged} queries in full; an interval needs at least "
            f"{MIN_JUDGED_QUERIES} (95% intervals from 5 judged queries covered as little as "
            f"0.720 (map)): judge {MIN_JUDGED_QUERIES - judged} more, or leave the judgments out"
        )
        assert not (tmp_path / "s" / "metrics.json").exists()
    human = _human_sample(adi_dir, tmp_path / "human-10.qrels", MIN_JUDGED_QUERIES)
    report = _search(adi_dir, tmp_path, runs[:2], "--human", str(human))
    assert report["ppi"]["judged_queries"] == MIN_JUDGED_QUERIES


def test_too_few_judged_hits_get_no_interval(adi_dir: Path, tmp_path: Path):
    runs = _runs(adi_dir, tmp_path)
    run = {q: docs for q, docs in read_qrels(adi_dir / "qrels.tsv").items()}
    rows = [
        {"qid": q, "query": "q", "doc_id": d, "text": "t", "label": 1}
        for q in sorted(run)[:3]
        for d in list(run[q])[:2]
    ]
    (tmp_path / "hits.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"judges \d hits; an interval needs at least 10"):
        _search(adi_dir, tmp_path, runs[:1], "--human_pairs", str(tmp_path / "hits.jsonl"))


def test_a_0_to_3_session_with_no_grade_2_is_not_read_as_binary(
    adi_dir: Path, tmp_path: Path, capsys, caplog
):
    """A TREC qrels file of a session in which every judged hit got 0 or 1 ("not relevant") is on
    the 0-3 scale: every query's human hit@5 is 0 (read as binary it was 1 wherever a judged
    hit was retrieved). Binary only when --human_scale says so; the scale is in metrics.json and
    printed above the table."""
    runs = _runs(adi_dir, tmp_path)
    human = _human_sample(adi_dir, tmp_path / "session.qrels", 12, grade_of_relevant=1)
    report = _search(adi_dir, tmp_path, runs[:1], "--human", str(human))
    values = json.loads((tmp_path / "s" / "human_per_query.json").read_text())["values"]
    assert set(values["good"][f"hit@{K}"].values()) == {0.0}
    assert report["ppi"]["human_scale"] == "0-3 (TREC-format qrels)"
    assert "Their grades read on the scale 0-3 (TREC-format qrels)" in capsys.readouterr().out
    assert "--human_scale binary" in caplog.text  # said, not acted on
    report = _search(adi_dir, tmp_path, runs[:1], "--human", str(human), "--human_scale", "binary")
    values = json.loads((tmp_path / "s" / "human_per_query.json").read_text())["values"]
    assert set(values["good"][f"hit@{K}"].values()) == {1.0}  # 'good' ranks a relevant one first
    assert report["ppi"]["human_scale"] == "binary (--human_scale)"
    with pytest.raises(InputError, match="human_scale: give --human"):
        _search(adi_dir, tmp_path, runs[:1], "--human_scale", "binary")


def test_the_console_table_marks_only_the_primary_metric_and_explains_the_marks(
    adi_dir: Path, tmp_path: Path, capsys
):
    """ranx's tables marked every metric at p < 0.01, unadjusted, with no legend: the table now
    marks the primary metric's means only, Holm-adjusted over the pairs of runs at --alpha, and
    says so below it."""
    _search(adi_dir, tmp_path, _runs(adi_dir, tmp_path))
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    rows = {
        cells[1]: cells
        for cells in ([c.strip() for c in r.strip("|").split("|")] for r in table[1:4])
    }
    primary = header.index(f"ndcg@{K}")
    assert rows["good"][primary].endswith("ᵇᶜ")  # beats shuffled (b) and other (c)
    marked = [cell for cells in rows.values() for cell in cells[2:] if re.search(r"[ᵃ-ᶻ]", cell)]
    assert marked == [rows["good"][primary]]
    assert f"A superscript letter beside a mean of ndcg@{K} names each run it beats" in out
    assert "Holm-adjusted over the 3 pair(s) of runs, p < 0.05" in out
    assert "the other metrics' tests are marginal" in out


def test_holm_removes_a_mark_that_one_unadjusted_test_would_give():
    """Three pairs: p = 0.02 alone is below 0.05, but Holm's adjustment multiplies the smallest
    by 3 (0.06): no mark; p = 0.01 becomes 0.03 and is marked."""
    from measure.metrics.significance import labeler_tests, marked_table

    p = {("a", "b"): 0.02, ("a", "c"): 0.5, ("b", "c"): 0.6}
    means = {"a": 0.9, "b": 0.5, "c": 0.4}

    def p_value(metric, run, other):
        return p.get((run, other), p.get((other, run)))

    tests = labeler_tests(p_value, list(means), means, "ndcg@10", 0.05, "student")
    assert tests.beaten("a") == []
    mean = {run: {"ndcg@10": value, "map": value} for run, value in means.items()}
    assert "ᵇ" not in marked_table(mean, tests)
    p[("a", "b")] = 0.01
    tests = labeler_tests(p_value, list(means), means, "ndcg@10", 0.05, "student")
    assert tests.beaten("a") == ["b"] and tests.adjusted[frozenset("ab")] == pytest.approx(0.03)
    assert "| a | a | 0.9000 | 0.9000ᵇ |" in marked_table(mean, tests)  # map unmarked
