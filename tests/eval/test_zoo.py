"""The labeler leaderboard (relevance-grader zoo): labelers ranked by how they rank systems."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from core.errors import InputError
from eval.zoo.command import ZooConfig, ZooRun, main
from eval.zoo.leaderboard import Reading, ScoreMapping, reading_matrices, readings
from judgments.ppi import ppi_mean
from judgments.ranking import corrected_ranking_taus, people_only_taus, ppi_estimates
from measure.labelers import HitLabel
from measure.zoo.record import Leaderboard

ZOO = """
systems:
  - {name: bm25, kind: bm25}
  - {name: bm25-k0.9-b0.4, kind: bm25, k1: 0.9, b: 0.4}
  - {name: bm25-k2.0-b0.9, kind: bm25, k1: 2.0, b: 0.9}
  - {name: bm25-first5words, kind: bm25, first_words: 5}
  - {name: bm25-first2words, kind: bm25, first_words: 2}
  - {name: bm25-half-index, kind: bm25, index_share: 0.5}
  - {name: fused, kind: rrf, of: [bm25, bm25-first5words]}
  - {name: bm25-random-rerank, kind: rerank, of: bm25, by: random, depth: 20}
  - {name: bm25-shuffled, kind: shuffle, of: bm25, within: 5}
  - {name: random, kind: random}
"""


@pytest.fixture(scope="module")
def board_dir(tmp_path_factory, adi_dir) -> Path:
    """One leaderboard on ADI (35 queries, 82 documents): people's own judgments as a labeler
    (pooled), BM25's score, a constant and a random labeler."""
    root = tmp_path_factory.mktemp("zoo")
    (root / "zoo.yaml").write_text(ZOO)
    main(
        [
            "--zoo", str(root / "zoo.yaml"),
            "--collection", str(adi_dir),
            "--labelers", f"people=qrels:{adi_dir}/qrels.tsv", "random=random:0",
            "constant=constant:", f"bm25=bm25:{adi_dir}",
            "--k", "5", "--depth", "20", "--resamples", "200",
            "--ppi_queries", "5", "10", "--ppi_draws", "40",
            "--out", str(root / "out"),
        ]
    )  # fmt: skip
    return root


def test_people_s_judgments_rank_the_systems_best_and_random_worst(board_dir):
    board = Leaderboard.read(board_dir / "out" / "leaderboard.json")
    assert len(board.systems) == 10 and board.queries == 35
    tau = {(r.labeler, r.reading): r.agreement["ndcg@5"].kendall_tau for r in board.readings}
    assert tau[("people", "labels")].value > 0.8
    assert tau[("people", "labels")].value > tau[("random", "labels")].value
    # Every interval holds its estimate and has a width.
    for estimate in tau.values():
        if estimate.value is not None and estimate.low is not None:
            assert estimate.low <= estimate.value <= estimate.high and estimate.high > estimate.low
    # A constant labeler calls every hit relevant: it only sees how many hits a system returns.
    assert tau[("constant", "labels")].value < tau[("bm25", "scores")].value
    assert ("constant", "scores") not in tau  # no P(relevant) of its own
    # BM25's score gives no verdict without a calibration: read as scores only.
    assert ("bm25", "labels") not in tau and ("bm25", "scores") in tau


def test_the_human_ranking_is_trec_eval_s(board_dir, adi_dir):
    """Each system's human NDCG@5 and P@5 as pytrec_eval (trec_eval's C code) computes them."""
    import pytrec_eval

    from data.beir import graded_qrels, read_qrels, read_trec_run

    board = Leaderboard.read(board_dir / "out" / "leaderboard.json")
    qrels = graded_qrels(read_qrels(adi_dir / "qrels.tsv"), adi_dir / "qrels.tsv")
    relevant = {q: {d: int(g >= 2) for d, g in docs.items()} for q, docs in qrels.items()}
    for system in board.systems:
        run = read_trec_run(board_dir / "out" / "systems" / f"{system.name}.trec")
        run = {q: {d: s for d, s in docs.items()} for q, docs in run.items() if q in qrels}
        graded = pytrec_eval.RelevanceEvaluator(
            {q: {d: int(g) for d, g in docs.items()} for q, docs in qrels.items()}, {"ndcg_cut.5"}
        ).evaluate(run)
        binary = pytrec_eval.RelevanceEvaluator(relevant, {"P.5"}).evaluate(run)
        ndcg = np.mean([graded.get(q, {}).get("ndcg_cut_5", 0.0) for q in qrels])
        precision = np.mean([binary.get(q, {}).get("P_5", 0.0) for q in qrels])
        assert system.human["ndcg@5"] == pytest.approx(ndcg, abs=1e-6), system.name
        assert system.human["p@5"] == pytest.approx(precision, abs=1e-6), system.name


def test_self_preference_is_measured_for_the_labeler_whose_score_built_systems(board_dir):
    board = Leaderboard.read(board_dir / "out" / "leaderboard.json")
    bm25 = board.reading("bm25", "scores")
    own = set(bm25.self_preference.own_systems)
    assert {"bm25", "bm25-k0.9-b0.4", "bm25-shuffled", "fused"} <= own
    assert "random" not in own
    random = board.reading("random", "labels")
    assert random.self_preference.own_systems == ["bm25-random-rerank"]


def test_ppi_rows_and_people_alone_are_reported(board_dir):
    board = Leaderboard.read(board_dir / "out" / "leaderboard.json")
    people = board.reading("people", "labels")
    assert [row.judged for row in people.ppi] == [5, 10]
    assert [row.judged for row in board.people_only] == [5, 10]
    for row in [*people.ppi, *board.people_only]:
        assert row.draws == 40 and row.low <= row.mean <= row.high


def test_the_markdown_explains_every_column(board_dir):
    text = (board_dir / "out" / "leaderboard.md").read_text()
    for words in ("Kendall's τ-b", "τ_AP", "Spearman", "percentile bootstrap", "PPI++", "lift"):
        assert words in text


def test_a_second_run_labels_nothing_again(board_dir, adi_dir, capsys):
    labels = sorted((board_dir / "out" / "labels").glob("*.jsonl"))
    before = {path: path.read_bytes() for path in labels}
    main(
        [
            "--zoo", str(board_dir / "zoo.yaml"), "--collection", str(adi_dir),
            "--labelers", f"bm25=bm25:{adi_dir}", "random=random:0",
            "--k", "5", "--depth", "20", "--resamples", "100", "--ppi_queries", "5",
            "--ppi_draws", "10", "--out", str(board_dir / "out"),
        ]
    )  # fmt: skip
    assert {path: path.read_bytes() for path in labels} == before
    assert "building system" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--labelers", ["oops"], "NAME=VALUE"),
        ("--calibrations", ["cosine=x.json"], "not one of --labelers"),
        ("--labelers", ["ours=grader:no/such/export"], "ours: no/such/export does not exist"),
    ],
)
def test_bad_flags_are_one_line(adi_dir, tmp_path, flag, value, words):
    config = ZooConfig(collection=str(adi_dir), labelers=["random=random:0"], out=str(tmp_path))
    setattr(config, flag[2:], value)
    with pytest.raises(InputError, match=words):
        ZooRun(config)


def labels_of(values: dict[tuple[str, str], tuple[bool, float | None, int | None]]) -> dict:
    return {
        pair: HitLabel(relevant=relevant, score=score, grade=grade, threshold=0.4)
        for pair, (relevant, score, grade) in values.items()
    }


def test_a_labeler_is_read_by_its_verdicts_and_by_its_probabilities():
    labels = labels_of({("q", "a"): (True, 0.9, None), ("q", "b"): (False, 0.2, None)})
    by_name = {r.name: r for r in readings(labels, verdicts=True, mapping=None)}
    assert by_name["labels"].relevant == {("q", "a"): True, ("q", "b"): False}
    assert by_name["labels"].threshold == 0.4
    assert by_name["scores"].gains == {("q", "a"): 0.9, ("q", "b"): 0.2}
    assert by_name["scores"].probabilities


def test_a_calibrated_score_gets_a_threshold_and_an_uncalibrated_one_only_its_order():
    labels = {
        ("q", "a"): HitLabel(relevant=False, score=2.0),
        ("q", "b"): HitLabel(relevant=False, score=-1.0),
    }
    assert [r.name for r in readings(labels, verdicts=False, mapping=None)] == ["scores"]
    raw = readings(labels, verdicts=False, mapping=None)[0]
    assert raw.gains == {("q", "a"): 2.0, ("q", "b"): 0.0} and not raw.probabilities
    mapping = ScoreMapping(slope=1.0, intercept=0.0, temperature=1.0, threshold=0.5)
    calibrated = {r.name: r for r in readings(labels, verdicts=False, mapping=mapping)}
    assert calibrated["labels"].relevant == {("q", "a"): True, ("q", "b"): False}
    assert calibrated["scores"].gains[("q", "a")] == pytest.approx(1 / (1 + np.exp(-2.0)))


def test_precision_from_probabilities_is_the_mean_probability_of_the_top_k():
    reading = Reading("scores", {("q", "a"): 0.9, ("q", "b"): 0.3}, None, True)
    runs = {"one": {"q": {"a": 2.0, "b": 1.0}}, "other": {"q": {"b": 1.0}}}
    matrices = reading_matrices(reading, runs, {"q": ["a", "b"]}, 2)
    assert matrices["p@2"][:, 0] == pytest.approx([0.6, 0.15])
    assert "map@2" not in matrices
    assert matrices["ndcg@2"][0, 0] == pytest.approx(1.0)


def test_ppi_estimates_are_those_of_the_ppi_estimator():
    rng = np.random.default_rng(1)
    human = rng.random((4, 30))
    labeler = human + rng.normal(0, 0.1, (4, 30))
    judged = np.zeros(30, dtype=bool)
    judged[rng.choice(30, 10, replace=False)] = True
    estimates = ppi_estimates(human, labeler, judged)
    for s in range(4):
        expected = ppi_mean(human[s, judged], labeler[s, judged], labeler[s, ~judged])
        assert estimates[s] == pytest.approx(expected.estimate)


def test_a_good_labeler_corrected_by_ppi_beats_its_judged_queries_alone():
    rng = np.random.default_rng(2)
    quality = np.linspace(0.3, 0.7, 8)[:, None]
    human = quality + rng.normal(0, 0.25, (8, 60))
    labeler = human + rng.normal(0, 0.02, (8, 60))  # nearly the people's values
    corrected = corrected_ranking_taus(human, labeler, 10, draws=100)
    alone = people_only_taus(human, 10, draws=100)
    assert corrected.mean > alone.mean
    assert corrected.low <= corrected.mean <= corrected.high


def test_the_leaderboard_json_is_strict(board_dir):
    data = json.loads((board_dir / "out" / "leaderboard.json").read_text())
    assert data["format_version"] == Leaderboard.FORMAT_VERSION


def test_every_leaderboard_config_parses():
    from core.cli import parse_config

    for path in sorted(Path("eval/configs").glob("leaderboard-*.yaml")):
        (config,) = parse_config([ZooConfig], ["--config", str(path)])
        assert len(config.labelers) >= 7 and Path(config.zoo).is_file(), path


def test_the_validation_and_test_halves_split_the_judged_queries():
    """The fixed halves of TREC DL 2019's judged queries (eval/configs/queries/) that a choice of
    labeler is made and then checked on (`relevance-grader zoo --queries FILE`): disjoint, within
    a query of each other in size, and together every judged query the collection has."""
    from data.beir import Collection, read_qrels

    collection = Path("data/collections/trec-dl-2019-passage")
    queries = Collection.load(collection).queries
    judged = {q for q in read_qrels(collection / "qrels.tsv") if q in queries}
    halves = [
        set(Path(f"eval/configs/queries/trec-dl-2019-{name}.txt").read_text().split())
        for name in ("validation", "test")
    ]
    assert not halves[0] & halves[1] and halves[0] | halves[1] == judged
    assert abs(len(halves[0]) - len(halves[1])) <= 1
