"""The report's data (no browser): it shows metrics.json's numbers, each query's hits with the
labeler's and people's labels, and says plainly when there is no interval."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from core.job_stages import StageRecord
from data.beir import graded_qrels, read_qrels
from eval.report.build import ReportOptions, build_report
from eval.report.page import render, write_report
from measure.metrics.results import PerQueryResults
from tests.commands import run_command
from tests.eval.report_inputs import JUDGED, K, make_main_job_folder, make_search_folders


@pytest.fixture(scope="module")
def folders(adi_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("report")
    found = make_search_folders(adi_dir, root)
    found["main_job"] = make_main_job_folder(found["human"], adi_dir, root)
    return found


def read(folder: Path, name: str):
    return json.loads((folder / name).read_text())


def test_eval_search_writes_the_page_by_default_and_records_how_it_ran(folders):
    assert (folders["human"] / "report.html").is_file()
    assert not (folders["no_human"] / "report.html").exists()  # --report false
    provenance = read(folders["human"], "provenance.json")
    assert provenance["command"].startswith("relevance-grader search --run ")
    assert provenance["config"]["human"] == str(folders["human_qrels"])
    assert provenance["versions"]["ranx"] and provenance["date"]


def test_the_headline_is_metrics_json(folders):
    metrics = read(folders["human"], "metrics.json")
    ppi = metrics["ppi"]
    headline = build_report(folders["human"]).headline
    assert headline.intervals and headline.judged_queries == JUDGED
    assert headline.runs == ["good", "shuffled"]
    assert headline.metrics[:4] == [f"ndcg@{K}", "map", "mrr", f"precision@{K}"]
    for run in headline.runs:
        for metric in headline.metrics:
            cell, entry = headline.cells[run][metric], ppi["runs"][run][metric]
            assert cell.labeler_mean == metrics["mean"][run][metric]
            for side in ("ppi", "human_only"):
                shown = getattr(cell, side)
                assert (shown.estimate, shown.low, shown.high) == tuple(
                    entry[side][key] for key in ("estimate", "low", "high")
                )
    for difference in headline.differences:
        entry = ppi["differences"]["shuffled - good"][difference.metric]
        assert difference.ppi.estimate == entry["ppi"]["estimate"]
        assert difference.labeler == entry["labeler_mean"]


def test_significance_marks_follow_the_paired_test(folders):
    metrics = read(folders["human"], "metrics.json")
    table = metrics["comparison"][f"ndcg_burges@{K}"]
    p = table["good"]["comparisons"]["shuffled"][f"ndcg_burges@{K}"]
    assert p < 0.01  # relevant documents first against a shuffle
    # The marks sit on the labeler's means they were tested on: without human judgments, and only
    # the primary metric's, Holm-adjusted (one pair of runs: the p itself), as eval.search says.
    headline = build_report(folders["no_human"]).headline
    cells = headline.cells
    assert cells["good"][f"ndcg@{K}"].beats == ["shuffled"]
    assert cells["good"][f"ndcg@{K}"].p_holm == {"shuffled": p}
    assert cells["shuffled"][f"ndcg@{K}"].beats == []
    # The other metrics' tests are marginal: never a mark, even below the level.
    p_map = table_p(metrics, "map")
    assert p_map < 0.05 and cells["good"]["map"].beats == []
    assert "Only ndcg@5, the primary metric, is marked" in headline.labeler_rule
    significant = {d.metric for d in headline.differences if d.significant}
    assert significant == {f"ndcg@{K}"}
    # A PPI++ estimate carries none: a test on the labeler's labels says nothing of it.
    corrected = build_report(folders["human"]).headline.cells
    assert all(not cell.beats for cells in corrected.values() for cell in cells.values())


def table_p(metrics: dict, metric: str) -> float:
    return metrics["comparison"][metric]["good"]["comparisons"]["shuffled"][metric]


def test_only_the_primary_metric_can_be_significant_after_holm(folders):
    metrics = read(folders["human"], "metrics.json")
    rule = metrics["ppi"]["multiplicity"]
    assert rule["primary"] == f"ndcg@{K}" and "Holm" in rule["rule"]
    headline = build_report(folders["human"]).headline
    assert "Holm" in headline.multiplicity
    for difference in headline.differences:
        entry = metrics["ppi"]["differences"]["shuffled - good"][difference.metric]
        if difference.metric == f"ndcg@{K}":
            assert entry["p_holm"] >= entry["p_value"]
            assert difference.significant == (entry["p_holm"] < 0.05)
        else:
            assert "p_holm" not in entry and not difference.significant


def test_the_labeler_difference_is_the_paired_mean_of_per_query_values(folders):
    """Without human judgments the difference comes from per_query.json; it must equal what
    eval.search's PPI report computes from the same values when there are judgments."""
    with_human = build_report(folders["human"]).headline.differences
    without = {d.metric: d for d in build_report(folders["no_human"]).headline.differences}
    for difference in with_human:
        assert without[difference.metric].labeler == pytest.approx(difference.labeler, abs=1e-12)
        assert without[difference.metric].ppi is None


def test_without_human_judgments_the_means_are_called_biased_with_no_interval(folders):
    report = build_report(folders["no_human"])
    headline = report.headline
    assert not headline.intervals
    assert "biased" in headline.notice and "no interval" in headline.notice
    assert all(
        c.ppi is None and c.human_only is None
        for cells in headline.cells.values()
        for c in cells.values()
    )
    assert report.agreement is None
    assert not any(row.judged or row.human for row in report.queries)
    json.dumps(report.to_dict(), allow_nan=False)


def test_every_query_has_its_row_and_its_hits_in_order(folders, adi_dir: Path):
    per_query = PerQueryResults.read(folders["human"] / "per_query.json").runs
    human = graded_qrels(read_qrels(folders["human_qrels"]), "human")
    report = build_report(folders["human"])
    rows = {row.qid: row for row in report.queries}
    assert set(rows) == set(per_query["good"]) | set(per_query["shuffled"])
    corpus = {
        json.loads(line)["_id"]: json.loads(line)["text"]
        for line in (adi_dir / "corpus.jsonl").read_text().splitlines()
    }
    for run, results in per_query.items():
        for qid, result in results.items():
            row = rows[qid]
            assert row.labeler[run] == result.metrics
            assert [h.doc_id for h in row.hits[run]] == [h.id for h in result.hits]
            assert [h.score for h in row.hits[run]] == [h.score for h in result.hits]
            for hit in row.hits[run]:
                assert report.documents[hit.doc_id].text == corpus[hit.doc_id][:600]
                grade = human.get(qid, {}).get(hit.doc_id)
                assert hit.human_grade == grade
                assert hit.disagrees == (None if grade is None else (grade >= 2) != hit.relevant)
    assert {qid for qid, row in rows.items() if row.judged} == set(human)


def test_per_query_human_values_average_to_the_human_only_estimate(folders):
    """The per-query values under people, averaged over the judged queries, are the classical
    (human-only) estimate eval.search reports."""
    ppi = read(folders["human"], "metrics.json")["ppi"]
    report = build_report(folders["human"])
    judged = [row for row in report.queries if row.judged]
    assert len(judged) == JUDGED
    for run in report.headline.runs:
        for metric in (f"ndcg@{K}", "map", "mrr"):
            mean = sum(row.human[run][metric] for row in judged) / len(judged)
            assert mean == pytest.approx(ppi["runs"][run][metric]["human_only"]["estimate"])


def test_label_agreement_is_judge_agreement_on_the_judged_hits(folders):
    from core.io import read_records
    from core.records import Judgment
    from data.judge_agreement import agreement

    per_query = PerQueryResults.read(folders["human"] / "per_query.json").runs
    shown = {(q, h.id) for run in per_query.values() for q, r in run.items() for h in r.hits}
    human = graded_qrels(read_qrels(folders["human_qrels"]), "human")
    reference = {(q, d): g for q, docs in human.items() for d, g in docs.items()}
    labels = [
        j
        for j in read_records(folders["human"].parent / "labeler.jsonl", Judgment)
        if (j.qid, j.doc_id) in shown
    ]
    expected = agreement(labels, reference, 2, reference_grades=True)
    found = build_report(folders["human"]).agreement
    assert found.pairs == expected["pairs"]
    assert found.kappa == pytest.approx(expected["kappa"])
    assert found.weighted_kappa == pytest.approx(expected["quadratic_weighted_kappa"])
    assert found.confusion == expected["grade_confusion_matrix"]
    assert sum(b.pairs for b in found.reliability) == found.pairs
    assert sum(len(v) for v in found.scores_by_grade.values()) == found.pairs


def test_the_main_job_folder_adds_the_ranking_and_unknown_tables(folders):
    report = build_report(folders["main_job"])
    assert report.kind == "main job"
    ranking = report.ranking
    assert ranking.reference == "qrels:HUMAN"
    assert ranking.taus["judgments:LABELER"].kendall_tau == pytest.approx(-1.0)
    assert ranking.orders["qrels:HUMAN"] == ["shuffled", "good"]
    assert "3 of the 40 pairs in the runs' top k lack a label" in ranking.source  # left out
    assert f"PPI++ ({JUDGED} human-judged queries)" in ranking.scores
    assert len(report.held_out.extra["calibration_check"]) == 5  # a table the page did not know
    assert report.headline.cells["good"][f"ndcg@{K}"].human_all == pytest.approx(0.5)
    assert report.provenance.stage_seconds == {"retrieval runs": 40.0, "metric pipeline": 3.0}
    assert report.provenance.stage_times == {
        "retrieval runs": "skipped (done earlier, 40.0 s)",
        "metric pipeline": "3.0",
    }
    assert report.provenance.total_note == (
        "in this run, 1 of 2 stages done earlier (40.0 s when they ran)"
    )


def test_the_held_out_quality_is_the_cross_validation_of_summary_json(folders):
    summary = read(folders["main_job"], "summary.json")
    cross = summary["cross_validation"]
    held = build_report(folders["main_job"]).held_out
    assert held.folds == 5 and held.source == "human judgments" and held.export_fold == 0
    assert [row.model for row in held.rows] == list(cross["pooled"])
    assert [row.name for row in held.rows] == [
        "BM25 score",
        "MiniLM cosine",
        "judge",  # no display name: its key
        "grader (ours)",
    ]
    for row in held.rows:
        pooled = cross["pooled"][row.model]
        assert row.pairs == pooled["pairs"] and row.queries == pooled["queries"]
        assert row.metrics == {key: pooled[key] for key, _ in held.columns}
        assert row.baseline == (row.model in ("bm25", "cosine"))
    grader = held.rows[-1]
    expected = [d for d in cross["differences"] if d["model"] == "grader"]
    assert [(d.baseline, d.mean, d.low, d.high, d.beats) for d in grader.differences] == [
        (d["baseline"], d["mean"], d["low"], d["high"], d["beats"]) for d in expected
    ]
    assert grader.beats_every_baseline == cross["beats_every_baseline"]["grader"]
    for fold in held.per_fold:
        rows = [r for r in summary["per_fold"] if r["fold"] == fold.fold]
        assert fold.roc_auc == {r["model"]: r["roc_auc"] for r in rows}
        assert fold.queries["test"] == summary["queries_per_fold"][fold.fold]
        assert sum(fold.queries.values()) == len(
            PerQueryResults.read(folders["main_job"] / "search/per_query.json").runs["good"]
        )


def test_the_grader_against_people_is_its_pooled_out_of_fold_predictions(folders):
    """In the main job the confusion matrix, κ and reliability come from every fold's test
    predictions (no pair seen in training), with the human grades of the job's qrels."""
    from collections import Counter

    run = folders["main_job"]
    qrels = graded_qrels(read_qrels(read(run, "config.json")["qrels"]), "qrels")
    rows = [
        json.loads(line)
        for k in range(5)
        for line in (run / "cv" / f"fold-{k}" / "grader" / "predictions.jsonl")
        .read_text()
        .splitlines()
    ]
    found = build_report(run).agreement
    assert "out of fold" in found.scope and found.pairs == len(rows)
    assert found.human_scale == ["0", "1", "2", "3"] and found.labeler_scale == [
        "not relevant",
        "relevant",
    ]
    counts = Counter((qrels[r["qid"]][r["doc_id"]], r["predicted"]) for r in rows)
    assert found.confusion == [[counts[(g, v)] for v in (0, 1)] for g in range(4)]
    pooled = read(run, "summary.json")["cross_validation"]["pooled"]["grader"]
    assert found.kappa == pytest.approx(pooled["kappa"]) and found.f1 == pytest.approx(pooled["f1"])
    assert sum(b.pairs for b in found.reliability) == len(rows)
    assert {g: len(v) for g, v in found.scores_by_grade.items()} == {
        str(g): sum(n for (grade, _), n in counts.items() if grade == g) for g in range(4)
    }


def test_the_page_says_which_evaluated_queries_the_exported_grader_learned_from(folders):
    run = folders["main_job"]
    tested = set(read(run, "dataset/manifest.json")["folds"][0]["queries"]["test"])
    report = build_report(run)
    evaluated = {row.qid for row in report.queries}
    judged = {row.qid for row in report.queries if row.judged}
    (note,) = [n for n in report.notes if "learned from" in n]
    assert f"learned from {len(evaluated - tested)} of the {len(evaluated)} queries" in note
    assert f"({len(judged - tested)} of the {len(judged)} judged by people)" in note


def test_while_the_job_runs_the_held_out_quality_comes_from_the_study(folders, tmp_path: Path):
    """Before summary.json exists: cv/study.json gives the table (models by their keys, no
    exported fold yet)."""
    import shutil

    run = tmp_path / "running"
    shutil.copytree(folders["main_job"], run)
    (run / "summary.json").unlink()
    held = build_report(run).held_out
    study = read(run, "cv/study.json")
    assert [row.name for row in held.rows] == list(study["cross_validation"]["pooled"])
    assert held.export_fold is None and held.extra == {}
    (run / "cv" / "study.json").unlink()
    assert build_report(run).held_out is None


def test_a_folder_without_its_optional_files_still_gives_a_page(folders, tmp_path: Path):
    """Only metrics.json is needed: no per_query.json, no provenance, no summary (a job still
    running or an older version)."""
    import shutil

    run = tmp_path / "partial"
    (run / "search").mkdir(parents=True)
    shutil.copy(folders["human"] / "metrics.json", run / "search" / "metrics.json")
    report = build_report(run)
    assert report.queries == [] and report.held_out is None
    assert any("per_query.json" in note for note in report.notes)
    assert report.headline.intervals
    assert "<!doctype html>" in render(report, {})


def test_intervals_from_too_few_judged_queries_are_not_shown(folders, tmp_path: Path):
    """A metrics.json written before the minimum, with PPI++ estimates from 2 judged queries:
    the page shows the labeler's means with no interval and says why; at the minimum the marks
    carry the coverage study's evidence (†, ‡) and the worth is capped at the queries."""
    import shutil

    from judgments.coverage import MIN_JUDGED_QUERIES

    run = tmp_path / "two"
    shutil.copytree(folders["human"], run)
    metrics = read(run, "metrics.json")
    metrics["ppi"]["judged_queries"] = 2
    for group in ("runs", "differences"):
        for entries in metrics["ppi"][group].values():
            for entry in entries.values():
                entry["ppi"]["n"] = entry["human_only"]["n"] = 2
                entry["effective_human_queries"] = 1000.0  # before the cap
    (run / "metrics.json").write_text(json.dumps(metrics))
    report = build_report(run)
    assert not report.headline.intervals
    assert all(c.ppi is None for cells in report.headline.cells.values() for c in cells.values())
    assert any(
        f"come from 2 judged queries, fewer than the {MIN_JUDGED_QUERIES}" in note
        for note in report.notes
    )
    assert report.headline.notice.startswith("Too few human judgments for an interval")
    # The real folder: top 5 (the study measured top-10 metrics), so every metric is marked ‡,
    # the legend says what it means; worth never above the queries.
    headline = build_report(folders["human"]).headline
    assert {found["marks"] for found in headline.coverage.values()} == {"‡"}
    assert headline.coverage["map"]["note"] == "‡ coverage not measured for map at n = 12"
    assert "‡: the coverage study did not measure" in headline.coverage_legend
    queries = read(folders["human"], "metrics.json")["ppi"]["runs"]["good"]["map"]["queries"]
    metrics["ppi"]["judged_queries"] = 12
    for entries in metrics["ppi"]["runs"].values():
        for entry in entries.values():
            entry["ppi"]["n"] = entry["human_only"]["n"] = 12
    (run / "metrics.json").write_text(json.dumps(metrics))
    cells = build_report(run).headline.cells
    assert {c.worth for c in cells["good"].values() if c.worth is not None} == {queries}


def test_the_corpus_is_found_from_the_stage_config_when_provenance_is_missing(
    folders, tmp_path: Path, adi_dir: Path
):
    """A main job's eval.search settings are read from the config file its stage ran with
    (stages/metric-pipeline.yaml), never parsed back out of the recorded command line."""
    import shutil

    import yaml

    run = tmp_path / "older"
    shutil.copytree(folders["main_job"], run)
    (run / "search" / "provenance.json").unlink()
    stages = run / "stages"
    stages.mkdir()
    settings = {
        "run": "x.trec",
        "corpus": str(adi_dir),
        "labeler": "judgments:x",
        "human": str(folders["human_qrels"]),
    }
    (stages / "metric-pipeline.yaml").write_text(yaml.safe_dump(settings))
    config = str(stages / "x.yaml")
    command = [sys.executable, "-m", "core.commands", "search", "--config", config]
    StageRecord(fingerprint="x", command=command, config=config, outs=[], seconds=1.0).write(
        stages / "metric-pipeline.json"
    )
    report = build_report(run)
    assert not [
        note
        for note in report.notes
        if "learned from" not in note and not note.startswith("Not trustworthy")
    ]
    assert report.documents and any(row.judged for row in report.queries)
    assert report.provenance.commands[0].command.startswith("relevance-grader search --config")
    (stages / "metric-pipeline.yaml").unlink()  # no settings: the page it can, no documents
    assert not build_report(run).documents


def test_a_missing_corpus_is_a_note_not_a_failure(folders, tmp_path: Path):
    report = build_report(folders["human"], ReportOptions(corpus=str(tmp_path / "nowhere")))
    assert report.documents == {}
    assert any("give --corpus" in note for note in report.notes)


def test_hits_are_embedded_for_the_judged_queries_first_when_capped(folders):
    report = build_report(folders["human"], ReportOptions(max_queries=JUDGED))
    embedded = [row for row in report.queries if row.hits is not None]
    assert len(embedded) == JUDGED and all(row.judged for row in embedded)
    assert any("--max_queries" in note for note in report.notes)


def test_texts_cannot_close_the_embedded_script(folders):
    report = build_report(folders["human"])
    report.queries[0].query = "</script><script>alert(1)</script>"
    page = render(report, {})
    assert "</script><script>alert(1)" not in page
    assert page.count("</script>") == 2  # the data element's and the page script's


def test_an_output_that_would_replace_an_input_is_refused(folders):
    with pytest.raises(ValueError, match="would replace"):
        write_report(folders["human"], folders["human"] / "metrics.json")


@pytest.mark.slow
def test_the_command_writes_the_page_and_names_a_bad_folder(folders, tmp_path: Path):
    out = tmp_path / "page.html"
    result = run_command(["report", "--input", str(folders["no_human"]), "--out", str(out)])
    assert result.returncode == 0, result.stderr[-2000:]
    assert out.stat().st_size < 2_000_000 and "no interval" in out.read_text()
    bad = run_command(["report", "--input", str(tmp_path)])
    assert bad.returncode == 2
    assert "holds neither a relevance-grader search output" in bad.stderr


def test_judged_hits_alone_give_the_share_of_relevant_hits_an_interval(folders, adi_dir: Path):
    """eval.search --human_pairs (people judged a sample of hits, not whole queries): the share
    of relevant hits gets a PPI++ interval, the other metrics say they have none, and the hits
    people judged carry their grades."""
    from core.io import write_jsonl
    from core.records import Judgment, label_from_grade
    from data.beir import Collection
    from eval.search.command import main as search_main

    root = folders["human"].parent
    collection = Collection.load(adi_dir)
    human = graded_qrels(read_qrels(folders["human_qrels"]), "human")
    sample = [
        Judgment(
            qid=q,
            query=collection.queries[q],
            doc_id=d,
            text=collection.corpus[d].text,
            grade=g,
            label=label_from_grade(g),
        )
        for q, docs in sorted(human.items())
        for d, g in sorted(docs.items())
    ]
    write_jsonl(root / "pairs.jsonl", sample)
    out = root / "pairs"
    search_main(
        [
            "--run",
            str(root / "good.trec"),
            "--corpus",
            str(adi_dir),
            "--labeler",
            f"judgments:{root / 'labeler.jsonl'}",
            "--k",
            str(K),
            "--out",
            str(out),
            "--human_pairs",
            str(root / "pairs.jsonl"),
            "--report",
            "false",
        ]
    )
    metrics = read(out, "metrics.json")
    report = build_report(out)
    cells = report.headline.cells["good"]
    entry = metrics["ppi"]["pairs"]["good"]["relevant share"]["ppi"]
    assert cells["relevant share"].ppi.estimate == entry["estimate"]
    assert cells[f"ndcg@{K}"].ppi is None
    assert "Only the share of relevant hits has an interval" in report.headline.notice
    judged = {
        (row.qid, h.doc_id): h.human_grade
        for row in report.queries
        for hits in row.hits.values()
        for h in hits
        if h.human_grade is not None
    }
    assert judged and all(human[q][d] == grade for (q, d), grade in judged.items())
    assert report.agreement.pairs == len(judged)


def test_report_never_overwrites_an_input_that_is_not_json(folders, tmp_path: Path, capsys):
    """--out naming the corpus, the human qrels or any existing file that is not a report page
    is refused before any work, and the file is untouched; a report page is replaced."""
    import shutil

    from eval.report.__main__ import main as report

    folder = tmp_path / "search"
    shutil.copytree(folders["human"], folder)
    inferred = folder / "inferred_qrels.txt"
    inferred.write_text("q1 0 d1 1\n")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "title": "", "text": "t"}\n')
    for target, extra in ((inferred, []), (corpus, ["--corpus", str(corpus)])):
        before = target.read_bytes()
        with pytest.raises(ValueError, match="--out"):
            report(["--input", str(folder), "--out", str(target), *extra])
        assert target.read_bytes() == before
    report(["--input", str(folder)])  # its own report.html, written then replaced
    report(["--input", str(folder)])
    assert (folder / "report.html").stat().st_size > 1000
    with pytest.raises(ValueError, match="--screenshot"):
        report(["--input", str(folder), "--screenshot", str(inferred)])
    assert inferred.read_text() == "q1 0 d1 1\n"


def test_a_metrics_json_of_the_wrong_shape_names_the_file_and_field(folders, tmp_path: Path):
    import shutil

    folder = tmp_path / "search"
    shutil.copytree(folders["no_human"], folder)
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["mean"] = {"good": ["not", "a", "mapping"]}
    (folder / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(
        ValueError, match=r"metrics\.json: mean\.good: Input should be a valid dictionary"
    ):
        build_report(folder)


def test_a_corpus_without_the_evaluated_documents_is_said(folders, tmp_path: Path):
    corpus = tmp_path / "other" / "corpus.jsonl"
    corpus.parent.mkdir()
    corpus.write_text('{"_id": "elsewhere", "title": "", "text": "another collection"}\n')
    (corpus.parent / "queries.jsonl").write_text('{"_id": "1", "text": "a query"}\n')
    report = build_report(folders["no_human"], ReportOptions(corpus=str(corpus.parent)))
    assert report.documents == {}
    assert any("holds none of the" in note for note in report.notes), report.notes


def test_a_grader_that_does_not_beat_its_baselines_is_said_first(folders):
    """The fixture's grader ties the cosine on held-out queries: the page's first note and the
    headline say the runs' metrics under its labels are not to be trusted, naming the best."""
    from measure.classification.crossval import held_out_warning
    from measure.classification.summaries import JobSummary

    summary = read(folders["main_job"], "summary.json")
    assert summary["cross_validation"]["beats_every_baseline"]["grader"] is False
    report = build_report(folders["main_job"])
    assert report.notes[0].startswith("Not trustworthy: the grader")
    assert "per-query ROC-AUC" in report.notes[0] and "MiniLM cosine" in report.notes[0]
    assert report.headline.untrusted and report.headline.notice.startswith("Not trustworthy")
    typed = JobSummary.read(folders["main_job"] / JobSummary.FILE)
    winning = typed.cross_validation.model_copy(update={"beats_every_baseline": {"grader": True}})
    assert held_out_warning(winning, typed.names) is None
    assert not build_report(folders["human"]).headline.untrusted  # no held-out study: no verdict


def test_the_job_config_is_read_and_one_of_another_shape_refused(folders, tmp_path: Path):
    """config.json: the job's settings for the page; one of another shape, or without a format
    version, is one line naming the file."""
    import shutil

    settings = build_report(folders["main_job"]).provenance.settings
    assert settings and settings["k"] == K and "format_version" not in settings
    run = tmp_path / "typed"
    shutil.copytree(folders["main_job"], run)
    (run / "config.json").write_text(json.dumps({"run_dir": 3, "qrels": None, "format_version": 1}))
    with pytest.raises(ValueError, match=r"config\.json: run_dir: Input should be a valid string"):
        build_report(run)
    (run / "config.json").write_text(json.dumps({"run_dir": "r", "qrels": None}))
    with pytest.raises(ValueError, match=r"config\.json: no format version, .*re-run the stage"):
        build_report(run)


def test_provenance_of_an_earlier_format_or_another_shape_is_refused(folders, tmp_path: Path):
    """provenance.json is a typed file: one without a format_version, or of another shape, is
    one line naming the file (and the field)."""
    import shutil

    folder = tmp_path / "search"
    shutil.copytree(folders["human"], folder)
    provenance = read(folder, "provenance.json")
    assert provenance["format_version"] == 1
    report = build_report(folder)
    assert report.provenance.evaluated["versions"] == provenance["versions"]
    assert report.provenance.commands[0].command == provenance["command"]
    assert provenance["command"].startswith("relevance-grader search ")
    earlier = {key: value for key, value in provenance.items() if key != "format_version"}
    (folder / "provenance.json").write_text(json.dumps(earlier))
    with pytest.raises(ValueError, match=r"provenance\.json: no format version, .*re-run the"):
        build_report(folder)
    (folder / "provenance.json").write_text(json.dumps({**provenance, "cwd": None}))
    with pytest.raises(ValueError, match=r"provenance\.json: cwd: Input should be a valid string"):
        build_report(folder)
