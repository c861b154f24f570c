from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from data.beir import graded_qrels, read_qrels, read_trec_run, write_trec_run
from measure.labelers import Hit
from measure.metrics.results import PerQueryResults
from measure.metrics.retrieval import evaluate_query, ranx_metrics
from tests.commands import run_command
from tests.doubles import DictLabeler


def test_hand_worked_example():
    hits = [Hit("a", "x"), Hit("b", "y"), Hit("c", "z"), Hit("d", "w")]
    labeler = DictLabeler({"a": 3, "b": 0, "c": 1, "d": 2})
    result = evaluate_query("q", hits, labeler, k=3, num_relevant=3)
    # DCG@3 = (2^3-1)/log2(2) + 0 + (2^1-1)/log2(4) = 7.5; IDCG@3 = 7 + 3/log2(3) + 1/log2(4)
    idcg = 7 + 3 / math.log2(3) + 0.5
    metrics = result.metrics
    assert metrics["ndcg@3"] == pytest.approx(7.5 / idcg)
    # Binary relevance (grade >= 2): a (rank 1) and d (rank 4); 3 relevant in all.
    assert metrics["map"] == pytest.approx((1 / 1 + 2 / 4) / 3)
    assert metrics["mrr"] == 1.0
    assert metrics["precision@3"] == pytest.approx(1 / 3)
    assert metrics["recall@3"] == pytest.approx(1 / 3)
    assert metrics["hit@3"] == 1.0
    assert [h.relevant for h in result.hits] == [True, False, False, True]
    assert result.evaluation_input_tokens == 40
    assert result.to_dict()["usage"] == {"evaluation_input_tokens": 40}


def test_ranx_and_ir_measures_agree_on_random_runs():
    import ir_measures
    from ir_measures import AP, RR, P, nDCG

    rng = np.random.default_rng(0)
    graded, binary, run = {}, {}, {}
    for q in range(20):
        docs = [f"d{i}" for i in range(15)]
        grades = rng.integers(0, 4, len(docs))
        graded[f"q{q}"] = {d: int(g) for d, g in zip(docs, grades, strict=True)}
        binary[f"q{q}"] = {d: int(g >= 2) for d, g in zip(docs, grades, strict=True)}
        run[f"q{q}"] = {d: float(s) for d, s in zip(docs, rng.random(len(docs)), strict=True)}
    ranx = ranx_metrics(graded, binary, run, 10, recall=False)
    measures = [nDCG(gains={0: 0, 1: 1, 2: 3, 3: 7}) @ 10, AP, RR, P @ 10]
    by_query = {
        (m.query_id, str(m.measure)): m.value
        for m in ir_measures.iter_calc(measures[:1], graded, run)
    }
    by_query.update(
        {
            (m.query_id, str(m.measure)): m.value
            for m in ir_measures.iter_calc(measures[1:], binary, run)
        }
    )
    names = {"ndcg@10": str(measures[0]), "map": "AP", "mrr": "RR", "precision@10": "P@10"}
    for ours, theirs in names.items():
        for qid in run:
            assert ranx[ours][qid] == pytest.approx(by_query[(qid, theirs)], abs=1e-9), (ours, qid)


def _tied_runs(seed: int) -> tuple[dict, dict, dict]:
    """Graded and binary qrels and a run whose scores tie often (one decimal)."""
    rng = np.random.default_rng(seed)
    graded, binary, run = {}, {}, {}
    for q in range(30):
        docs = [f"d{i:02d}" for i in rng.permutation(14)]
        grades = rng.integers(0, 4, len(docs))
        graded[f"q{q}"] = {d: int(g) for d, g in zip(docs, grades, strict=True)}
        binary[f"q{q}"] = {d: int(g >= 2) for d, g in zip(docs, grades, strict=True)}
        scores = np.round(rng.random(len(docs)), 1)
        run[f"q{q}"] = {d: float(s) for d, s in zip(docs, scores, strict=True)}
    return graded, binary, run


def test_every_metric_equals_trec_eval_on_runs_with_ties():
    """trec_eval's own C code (pytrec_eval) on runs whose scores tie: one tie rule everywhere."""
    import pytrec_eval

    graded, binary, run = _tied_runs(1)
    assert sum(len(set(s.values())) < len(s) for s in run.values()) == len(run)  # ties in all
    ours = ranx_metrics(graded, binary, run, 10, recall=True)
    gains = {q: {d: 2**g - 1 for d, g in docs.items()} for q, docs in graded.items()}
    theirs = pytrec_eval.RelevanceEvaluator(gains, {"ndcg_cut.10"}).evaluate(run)
    binary_measures = {"map", "recip_rank", "P.10", "success.10", "recall.10"}
    for qid, values in (
        pytrec_eval.RelevanceEvaluator(binary, binary_measures).evaluate(run).items()
    ):
        theirs[qid].update(values)
    names = {
        "ndcg@10": "ndcg_cut_10",
        "map": "map",
        "mrr": "recip_rank",
        "precision@10": "P_10",
        "hit@10": "success_10",
        "recall@10": "recall_10",
    }
    for metric, trec_name in names.items():
        for qid in run:
            assert ours[metric][qid] == pytest.approx(theirs[qid][trec_name], abs=1e-6), (
                metric,
                qid,
            )


def test_a_hit_list_with_one_id_twice_is_refused():
    hits = [Hit("a", "x"), Hit("b", "y"), Hit("a", "z")]
    with pytest.raises(ValueError, match=r"id 'a' is listed twice \(hits 0 and 2\)"):
        evaluate_query("q", hits, DictLabeler({"a": 3}))


def test_ties_are_broken_by_descending_document_id_as_trec_eval_does():
    from data.beir import ranked

    assert [d for d, _ in ranked({"a": 1.0, "c": 1.0, "b": 2.0, "d": 0.5})] == ["b", "c", "a", "d"]


@pytest.mark.slow
def test_bulk_run_compare_and_inferred_qrels(adi_dir: Path, tmp_path: Path):
    from data.candidates import CandidatesConfig, generate_candidates

    generate_candidates(
        CandidatesConfig(
            collection=str(adi_dir), out=str(tmp_path / "c"), retrievers=["bm25"], k=10
        )
    )
    good = read_trec_run(tmp_path / "c" / "bm25.trec")
    worse = {
        q: {d: -s for d, s in docs.items()} for q, docs in good.items()
    }  # the same documents, reversed
    write_trec_run(tmp_path / "worse.trec", worse)
    qrels = adi_dir / "qrels.tsv"
    result = run_command(
        [
            "search",
            "--run",
            str(tmp_path / "c" / "bm25.trec"),
            "--compare",
            str(tmp_path / "worse.trec"),
            "--corpus",
            str(adi_dir),
            "--labeler",
            f"qrels:{qrels}",
            "--out",
            str(tmp_path / "s"),
            "--k",
            "5",
            # R from the qrels: the summary's MAP and the significance test's must be one MAP.
            "--num_relevant_from",
            str(qrels),
        ]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "s" / "metrics.json").read_text())
    assert report["mean"]["bm25"]["ndcg@5"] > report["mean"]["worse"]["ndcg@5"]
    assert "recall@5" in report["mean"]["bm25"]
    assert "table_ndcg_burges@5" in report["comparison"]
    # The significance table compares the same top-5 metrics that the summary reports.
    for run in ("bm25", "worse"):
        for ours, theirs in (("map", "map"), ("mrr", "mrr"), ("ndcg@5", "ndcg_burges@5")):
            compared = report["comparison"][theirs][run]["scores"][theirs]
            assert compared == pytest.approx(report["mean"][run][ours], abs=1e-9), (run, ours)
    # trec_eval -q's layout: a block per run, each query's value, then the mean as "all".
    blocks: dict[str, dict[tuple[str, str], float]] = {}
    for line in (tmp_path / "s" / "per_query.txt").read_text().splitlines():
        metric, qid, value = line.split("\t")
        if metric == "runid":
            blocks[value] = current = {}
        else:
            current[(metric, qid)] = float(value)
    assert list(blocks) == ["bm25", "worse"]
    per_query = PerQueryResults.read(tmp_path / "s" / "per_query.json").runs
    for run, rows in blocks.items():
        for metric, mean in report["mean"][run].items():
            assert rows[(metric, "all")] == pytest.approx(mean, abs=5e-5)
            for qid, result in per_query[run].items():
                assert rows[(metric, qid)] == pytest.approx(result.metrics[metric], abs=5e-5)
    inferred = read_qrels(tmp_path / "s" / "inferred_qrels.txt")
    truth = graded_qrels(read_qrels(qrels), qrels)  # ADI is binary: its 1 is grade 3
    assert any(g == 3 for docs in inferred.values() for g in docs.values())
    assert all(
        grade == truth.get(q, {}).get(d, 0)
        for q, docs in inferred.items()
        for d, grade in docs.items()
    )


def test_system_ranking_agreement_is_perfect_for_identical_labels(adi_dir: Path, tmp_path: Path):
    from data.candidates import CandidatesConfig, generate_candidates
    from measure.metrics.ranking_agreement import SystemAgreementConfig, agreement

    generate_candidates(
        CandidatesConfig(
            collection=str(adi_dir), out=str(tmp_path / "c"), retrievers=["bm25"], k=10
        )
    )
    good = read_trec_run(tmp_path / "c" / "bm25.trec")
    runs = [tmp_path / "c" / "bm25.trec"]
    for name, shift in (("shifted", 2), ("reversed", None)):
        other = {}
        for q, docs in good.items():
            order = sorted(docs, key=lambda d: -docs[d])
            order = order[::-1] if shift is None else order[shift:] + order[:shift]
            other[q] = {d: float(len(order) - i) for i, d in enumerate(order)}
        write_trec_run(tmp_path / f"{name}.trec", other)
        runs.append(tmp_path / f"{name}.trec")
    judgments = tmp_path / "j.jsonl"
    qrels = read_qrels(adi_dir / "qrels.tsv")
    lines = [
        {
            "qid": q,
            "query": "x",
            "doc_id": d,
            "text": "t",
            "grade": 3 if qrels.get(q, {}).get(d) else 0,
        }
        for q, docs in good.items()
        for d in docs
    ]
    judgments.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = agreement(
        SystemAgreementConfig(
            runs=[str(r) for r in runs],
            corpus=str(adi_dir),
            labelers=[f"judgments:{judgments}"],
            reference=f"qrels:{adi_dir / 'qrels.tsv'}",
            metric="ndcg@10",
            out=str(tmp_path / "agr"),
        )
    )
    assert result.agreement[f"judgments:{judgments}"].kendall_tau == pytest.approx(1.0)
    assert result.reference_ranking[0] == "bm25"


def test_an_unknown_stat_test_is_refused_before_any_labelling(tmp_path: Path):
    from eval.search.settings import SearchEvalConfig

    with pytest.raises(ValueError, match="stat_test"):
        SearchEvalConfig(stat_test="bogus")  # as a YAML value reaches it
    config = tmp_path / "search.yaml"
    config.write_text("stat_test: bogus\n")
    from core.cli import parse_config

    with pytest.raises((ValueError, SystemExit)):
        parse_config([SearchEvalConfig], ["--config", str(config)])


def _adi_run(adi_dir: Path, path: Path, depth: int, seed: int = 0) -> dict:
    """A run over every ADI query: ``depth`` documents per query, in a seeded random order."""
    from data.beir import read_corpus, read_queries

    docs = sorted(read_corpus(adi_dir / "corpus.jsonl"))
    rng = np.random.default_rng(seed)
    run = {
        q: {d: float(depth - i) for i, d in enumerate(rng.choice(docs, depth, replace=False))}
        for q in sorted(read_queries(adi_dir / "queries.jsonl"))
    }
    write_trec_run(path, run)
    return run


def _search(adi_dir: Path, tmp_path: Path, run: Path, *extra: str) -> dict:
    from eval import search as search_module

    search_module.main(
        [
            "--run", str(run), "--corpus", str(adi_dir), "--labeler",
            f"qrels:{adi_dir / 'qrels.tsv'}", "--out", str(tmp_path / "s"), "--report", "false",
            *extra,
        ]
    )  # fmt: skip
    return json.loads((tmp_path / "s" / "metrics.json").read_text())


def test_judged_hits_outside_the_top_k_are_counted_and_named_as_ignored(
    adi_dir: Path, tmp_path: Path, caplog, capsys
):
    run = _adi_run(adi_dir, tmp_path / "run.trec", depth=10)
    judged = [(q, d) for q, docs in run.items() for d in list(docs)[:3]]  # ranks 1-3
    rows = [
        {"qid": q, "query": "q", "doc_id": d, "text": "t", "label": i % 2}
        for i, (q, d) in enumerate(judged)
    ]
    (tmp_path / "hits.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = _search(adi_dir, tmp_path, tmp_path / "run.trec", "--k", "2", "--human_pairs",
                     str(tmp_path / "hits.jsonl"))  # fmt: skip
    ppi = report["ppi"]
    assert ppi["judged_pairs"] == 105 and ppi["judged_pairs_used"] == {"run": 70}
    assert ppi["pairs"]["run"]["relevant share"]["ppi"]["n"] == 70
    assert "35 of the 105 judged hits are not in run's top 2 and are ignored" in caplog.text
    assert "105 sampled hits (in each run's top 2, the ones used: run 70" in capsys.readouterr().out


def test_a_human_file_giving_a_pair_twice_keeps_the_last_line_with_a_warning(
    tmp_path: Path, caplog
):
    from judgments.samples import human_qrels, read_human_pairs

    rows = [
        {"qid": "q1", "query": "q", "doc_id": "d1", "text": "t", "grade": grade} for grade in (0, 3)
    ] + [{"qid": "q1", "query": "q", "doc_id": "d2", "text": "t", "grade": 2}]
    path = tmp_path / "human.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert human_qrels(str(path)) == {"q1": {"d1": 3, "d2": 2}}  # the last line, not the lower
    assert read_human_pairs(str(path)) == {("q1", "d1"): 1, ("q1", "d2"): 1}
    assert "human.jsonl: 1 pair(s) given twice with different verdicts" in caplog.text
    (tmp_path / "human.qrels").write_text("q1 0 d1 3\nq1 0 d1 0\n")
    assert human_qrels(str(tmp_path / "human.qrels")) == {"q1": {"d1": 0}}
    assert "human.qrels: 1 pair(s) given twice" in caplog.text


def _graded_adi_run(adi_dir: Path, path: Path) -> tuple[dict, dict[str, int]]:
    """A run over every ADI query with one of its relevant documents at rank 1 to 5 (the
    query's place in id order, mod 5) among non-relevant ones, so that the labeler's NDCG@5
    spreads; and that rank of each query."""
    from data.beir import read_corpus

    qrels = read_qrels(adi_dir / "qrels.tsv")
    docs = sorted(read_corpus(adi_dir / "corpus.jsonl"))
    run, ranks = {}, {}
    for i, q in enumerate(sorted(qrels)):
        ranking = [d for d in docs if d not in qrels[q]][:9]
        ranks[q] = i % 5 + 1
        ranking.insert(ranks[q] - 1, sorted(qrels[q])[0])
        run[q] = {d: float(10 - r) for r, d in enumerate(ranking)}
    write_trec_run(path, run)
    return run, ranks


def test_a_judged_subset_unlike_a_random_draw_is_warned_about_and_the_draw_recorded(
    adi_dir: Path, tmp_path: Path, caplog
):
    from judgments.design import write_design
    from judgments.draw import DrawConfig, draw

    _, ranks = _graded_adi_run(adi_dir, tmp_path / "run.trec")
    qrels = read_qrels(adi_dir / "qrels.tsv")
    best = sorted(ranks, key=lambda q: (ranks[q], q))[:10]  # the labeler's 10 best NDCG@5
    design = draw(DrawConfig(run=str(tmp_path / "run.trec"), n=10, seed=0))
    write_design(tmp_path / "draw.json", design)
    for name, judged in (("best", best), ("random", design.drawn)):
        (tmp_path / f"{name}.qrels").write_text(
            "".join(f"{q} 0 {d} 3\n" for q in judged for d in qrels[q])
        )
    caplog.clear()
    report = _search(adi_dir, tmp_path, tmp_path / "run.trec", "--k", "5", "--human",
                     str(tmp_path / "best.qrels"))  # fmt: skip
    sample = report["ppi"]["sample"]
    assert sample["drawn_by"] is None and "unknown" in sample["design"]
    assert sample["check"]["p"] < 0.01 and not sample["check"]["random_plausible"]
    assert "PPI++ is valid only for a random sample of the queries" in caplog.text
    caplog.clear()
    report = _search(adi_dir, tmp_path, tmp_path / "run.trec", "--k", "5", "--human",
                     str(tmp_path / "random.qrels"))  # fmt: skip
    assert report["ppi"]["sample"]["check"]["random_plausible"]
    assert "valid only for a random sample" not in caplog.text
    report = _search(adi_dir, tmp_path, tmp_path / "run.trec", "--k", "5", "--human",
                     str(tmp_path / "random.qrels"), "--draw", str(tmp_path / "draw.json"))  # fmt: skip
    sample = report["ppi"]["sample"]
    assert sample["drawn_by"] == "relevance-grader ppi" and sample["check"] is None
    assert sample["design"] == "uniform draw of 10 of 35 queries" and sample["seed"] == 0


def test_human_qrels_off_the_0_to_3_scale_are_refused_not_taken_as_gains(tmp_path: Path):
    from judgments.samples import human_qrels

    path = tmp_path / "human.qrels"
    path.write_text("q1 0 d1 4\nq1 0 d2 2\nq2 0 d3 -1\n")
    with pytest.raises(ValueError, match=r"human: .*human.qrels: grade 4 of q1/d1 is off the 0-3 "
                       r"scale \(2 such pair\(s\)\); map the grades onto 0-3 first"):  # fmt: skip
        human_qrels(str(path))
    path.write_text("q1 0 d1 3\nq1 0 d2 0\n")
    assert human_qrels(str(path)) == {"q1": {"d1": 3, "d2": 0}}


def test_metrics_json_records_the_dtype_the_scores_were_made_in(tmp_path: Path, monkeypatch):
    from eval.search.command import scoring_dtype

    monkeypatch.delenv("RELEVANCE_GRADER_CPU_DTYPE", raising=False)
    assert scoring_dtype() == "float32"  # every CPU, bf16 instructions or not
    monkeypatch.setenv("RELEVANCE_GRADER_CPU_DTYPE", "bfloat16")
    assert scoring_dtype() == "bfloat16"


def test_runs_shallower_than_k_are_named_in_a_warning(caplog):
    from eval.search.command import warn_shallow_runs

    warn_shallow_runs({"deep": {"q1": dict.fromkeys("abcdefghij", 1.0)}}, 10)
    assert not caplog.text
    warn_shallow_runs({"mine": {"q1": dict.fromkeys("abcde", 1.0), "q2": {"a": 1.0}}}, 10)
    assert "run mine: 2 of its 2 queries have fewer than k = 10 hits (as few as 1)" in caplog.text


@pytest.mark.slow
def test_out_at_a_jobs_stage_folder_is_refused(adi_dir: Path, tmp_path: Path):
    """`--out runs/main/search` by hand would overwrite the main job's metric stage under the
    stamp that calls it up to date: one line naming --out, exit 2, the stage untouched; the job
    itself (which sets STAGE_ENV for its stages) still writes there."""
    import os

    from core.job_stages import STAGE_ENV, StageRecord

    job = tmp_path / "main"
    stage = job / "search"
    stage.mkdir(parents=True)
    (stage / "metrics.json").write_text('{"from": "the job"}')
    config = str(job / "stages" / "metric-pipeline.yaml")
    command = [sys.executable, "-m", "core.commands", "search", "--config", config]
    StageRecord(
        fingerprint="x", command=command, config=config, outs=[str(stage)], seconds=1.0
    ).write(job / "stages" / "metric-pipeline.json")
    _adi_run(adi_dir, tmp_path / "run.trec", 5)
    args = [
        *("--run", str(tmp_path / "run.trec"), "--corpus", str(adi_dir)),
        *("--labeler", f"qrels:{adi_dir / 'qrels.tsv'}", "--k", "5", "--report", "false"),
    ]
    env = {k: v for k, v in os.environ.items() if k != STAGE_ENV}
    refused = run_command(["search", *args, "--out", str(job / "." / "search")], env=env)
    assert refused.returncode == 2, refused.stderr[-2000:]
    lines = refused.stderr.strip().splitlines()
    assert lines[-1].startswith("error: --out") and "'metric-pipeline' stage" in lines[-1]
    assert str(job) in lines[-1]
    assert (stage / "metrics.json").read_text() == '{"from": "the job"}'
    # The job's own run of the stage, and any other folder, are written as before.
    ran = run_command(["search", *args, "--out", str(stage)], env={**env, STAGE_ENV: "1"})
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "mean" in json.loads((stage / "metrics.json").read_text())
    from core.job_stages import stage_writing

    assert stage_writing(job / "mine") is None and stage_writing(tmp_path) is None


def test_a_draw_file_that_is_not_there_is_one_error_naming_the_flag(adi_dir: Path, tmp_path: Path):
    """--draw naming a missing file (a typo, the wrong folder) is refused in one line naming
    --draw and the path, exit 2, before any labelling: never read as no draw (uniform), which
    would estimate a stratified sample with the wrong estimator. judgments.annotate's --draw too."""
    from judgments.annotate.pool import read_sample
    from judgments.design import read_design

    _adi_run(adi_dir, tmp_path / "run.trec", 5)
    missing = tmp_path / "draws" / "strata.json"
    result = run_command(
        [
            "search", "--run", str(tmp_path / "run.trec"),
            "--corpus", str(adi_dir), "--labeler", f"qrels:{adi_dir / 'qrels.tsv'}",
            "--human", str(adi_dir / "qrels.tsv"), "--draw", str(missing),
            "--out", str(tmp_path / "s"), "--k", "5",
        ]
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert (
        last
        == f"error: --draw: {missing} not found: give a draw file (relevance-grader ppi --out writes one)"
    )
    assert not (tmp_path / "s" / "metrics.json").exists()
    with pytest.raises(FileNotFoundError, match=f"^--draw: {re.escape(str(tmp_path))} is a folder"):
        read_design(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"^--draw: .*strata\.json not found"):
        read_sample(str(missing), [])


def test_more_metrics_by_name_with_their_own_cut_offs(adi_dir: Path, tmp_path: Path):
    """--metrics adds ranx-named metrics at their own cut-offs to every output: judged@c is the
    share of the top c in the qrels and R-precision the precision at R (the pooled relevant
    count), both checked by hand; the significance tests compare them too."""
    from data.beir import ranked

    runs = {name: _adi_run(adi_dir, tmp_path / f"{name}.trec", 5, seed) for name, seed in
            (("a", 0), ("b", 1))}  # fmt: skip
    report = _search(
        adi_dir, tmp_path, tmp_path / "a.trec", "--compare", str(tmp_path / "b.trec"),
        "--k", "5", "--metrics", "judged@5", "rprec", "ndcg@3", "map@3", "ndcg@5",
    )  # fmt: skip
    assert list(report["mean"]["a"]) == [
        "ndcg@5", "ndcg@3", "map", "mrr", "precision@5", "hit@5", "r-precision", "map@3",
        "judged@5",
    ]  # fmt: skip
    qrels = read_qrels(adi_dir / "qrels.tsv")
    per_query = PerQueryResults.read(tmp_path / "s" / "per_query.json").runs
    pooled_relevant = {
        qid: {d for run in runs.values() for d in list(run[qid])[:5] if d in qrels.get(qid, {})}
        for qid in runs["a"]
    }
    for name, run in runs.items():
        for qid, docs in run.items():
            top = [d for d, _ in ranked(docs)][:5]
            metrics = per_query[name][qid].metrics
            judged = sum(d in qrels.get(qid, {}) for d in top) / len(top)
            assert metrics["judged@5"] == pytest.approx(judged)
            r = len(pooled_relevant[qid])
            rprec = sum(d in pooled_relevant[qid] for d in top[:r]) / r if r else 0.0
            assert metrics["r-precision"] == pytest.approx(rprec)
    assert "r-precision" in report["comparison"] and "map@3" in report["comparison"]
    lines = (tmp_path / "s" / "per_query.txt").read_text().splitlines()
    assert any(line.startswith("judged@5\tall\t") for line in lines)


@pytest.mark.parametrize(
    ("names", "problem"),
    [
        (["ndcg@20"], "goes past --k 10"),
        (["bleu"], "unknown metric 'bleu'"),
        (["precision"], "precision needs a cut-off"),
        (["r-precision@5"], "takes no cut-off"),
        (["judged@0"], "positive integer"),
    ],
)
def test_a_metric_this_tool_does_not_compute_is_refused_before_labelling(names, problem):
    from eval.search.settings import SearchEvalConfig

    with pytest.raises(ValueError, match=r"^--metrics: ") as refused:
        SearchEvalConfig(metrics=names, k=10)
    assert problem in str(refused.value)


def test_a_qrels_labelers_unjudged_hits_are_marked_for_judged_at_k(tmp_path: Path):
    """A hit the qrels do not list is read as not relevant and marked unjudged; the library's
    evaluate_query gives judged@c from the marks."""
    from measure.labelers import Hit, QrelsLabeler
    from measure.metrics.names import parse_metric
    from measure.metrics.retrieval import evaluate_query

    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q 0 a 2\nq 0 b 0\n")
    hits = [Hit(doc_id=d, text=d) for d in ("a", "x", "b", "y")]
    result = evaluate_query(
        "query", hits, QrelsLabeler(str(qrels)), qid="q", k=4,
        extra=[parse_metric("judged@2", 4), parse_metric("judged@4", 4)],
    )  # fmt: skip
    assert [hit.judged for hit in result.hits] == [True, False, True, False]
    assert result.metrics["judged@2"] == 0.5 and result.metrics["judged@4"] == 0.5


def test_unusable_replies_are_a_typed_entry_of_metrics_json(tmp_path):
    """count_unusable's record is what metrics.json holds under ``unusable`` (keys as before);
    None, and no entry, when every reply had a verdict."""
    import json

    from eval.search.command import count_unusable
    from measure.metrics.results import HitResult, QueryResult, SearchMetrics

    def run(why: str | None) -> dict[str, QueryResult]:
        hits = [HitResult(id="d1", relevant=False, unusable=why), HitResult(id="d2", relevant=True)]
        return {"q1": QueryResult(hits=hits)}

    assert count_unusable({"bm25": run(None)}) is None
    unusable = count_unusable({"bm25": run("no digit"), "dense": run(None)})
    assert unusable is not None and unusable.counts == {"bm25": 1, "dense": 0}
    SearchMetrics(labeler="x", k=10, mean={"bm25": {}}, unusable=unusable).write(
        tmp_path / "m.json"
    )
    written = json.loads((tmp_path / "m.json").read_text())["unusable"]
    assert set(written) == {"counts", "rule"}
    assert SearchMetrics.read(tmp_path / "m.json").unusable == unusable


def test_the_report_reads_the_recorded_settings_with_the_flags_defaults():
    """The report reads eval.search's recorded settings as data (the search command builds on
    the report, so the report cannot import its flags): the keys it reads default as the flags
    do, and a folder's recorded settings come back key for key."""
    from dataclasses import asdict

    from eval.report.inputs import RecordedSearch, _search_config
    from eval.search.settings import SearchEvalConfig

    flags = asdict(SearchEvalConfig())
    read = RecordedSearch().model_dump(exclude={"recorded"})
    assert read == {name: flags[name] for name in read}
    recorded = asdict(SearchEvalConfig(corpus="c", human="h.qrels", human_scale="binary"))
    settings = _search_config(recorded)
    assert settings is not None and settings.recorded == recorded
    assert (settings.corpus, settings.declared_human_scale) == ("c", "binary")
    assert _search_config({"alpha": "not a level"}) is None
