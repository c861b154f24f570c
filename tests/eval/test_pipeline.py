from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from core.cli import parse_config
from eval.jobs.pipeline import Pipeline, PipelineConfig, StageFailed
from models.state_cache import STATE_CACHE_ENV

REPO = Path(__file__).resolve().parents[2]


def test_main_config_parses():
    (config,) = parse_config([PipelineConfig], ["--config", str(REPO / "eval/configs/main.yaml")])
    assert config.student == "smollm2-135m" and config.teacher_backend == "qrels"
    assert (REPO / config.train_config).exists()
    assert (REPO / config.classifier_config).exists()  # the paper's method beside ours
    assert (REPO / config.collection / "corpus.jsonl").exists()
    assert config.retrievers == ["bm25", "dense"] and config.rerank == "dense"
    assert config.judge_model  # the untrained reference row of the report
    assert all((REPO / path).exists() for path in config.train_only)


def small_trec_dl(root: Path, source: Path, queries: int = 10, docs_per_query: int = 30) -> Path:
    """A few TREC DL 2019 queries with part of their judged pool, in the BEIR layout."""
    from core.io import write_jsonl
    from data.beir import Collection, write_beir_qrels

    collection = Collection.load(source)
    qids = sorted(collection.qrels)[:queries]
    qrels = {q: dict(sorted(collection.qrels[q].items())[:docs_per_query]) for q in qids}
    doc_ids = sorted({d for docs in qrels.values() for d in docs})
    write_jsonl(
        root / "corpus.jsonl",
        ({"_id": d, "title": "", "text": collection.corpus[d].text} for d in doc_ids),
    )
    write_jsonl(root / "queries.jsonl", ({"_id": q, "text": collection.queries[q]} for q in qids))
    write_beir_qrels(root / "qrels.tsv", qrels)
    return root


def small_zoo(path: Path) -> Path:
    """Five systems, one of them the grader's own rerank (no dense system: no embedder to load)."""
    path.write_text(
        "systems:\n"
        "  - {name: bm25, kind: bm25}\n"
        "  - {name: bm25-k0.9-b0.4, kind: bm25, k1: 0.9, b: 0.4}\n"
        "  - {name: bm25-first5words, kind: bm25, first_words: 5}\n"
        "  - {name: bm25-top10-grader, kind: rerank, of: bm25, by: grader, depth: 10}\n"
        "  - {name: random, kind: random}\n"
    )
    return path


@pytest.mark.slow
def test_main_job_end_to_end_reduced(
    tiny_model_dir: Path, trec_dl_dir: Path, tmp_path: Path, monkeypatch
):
    """The main job's stages on a slice of TREC DL with the tiny model: a failed stage stops the
    run with its log named, a re-run resumes, an unchanged re-run skips every stage and a changed
    setting re-runs exactly the stages that depend on it."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv(STATE_CACHE_ENV, str(tmp_path / "states"))  # every stage's, by the switch
    collection = small_trec_dl(tmp_path / "dl", trec_dl_dir, queries=12)
    config = PipelineConfig(
        run_dir=str(tmp_path / "run"),
        collection=str(collection),
        qrels=str(collection / "qrels.tsv"),
        max_pairs_per_query=12,
        folds=3,
        validation_size=2,
        student=str(tiny_model_dir),
        train_config="train/configs/smollm2-135m-B-frozen.yaml",
        classifier_config="train/configs/smollm2-135m-B-frozen.yaml",
        train_args=["--num_train_epochs", "2"],
        zero_shot=True,
        judge_model=str(tiny_model_dir),
        judge_sample=10,
        retrievers=["bm25"],
        rerank="bm25",
        k=5,
        human_queries=10,
        zoo=str(small_zoo(tmp_path / "zoo.yaml")),
    )
    broken = dataclasses.replace(config, train_args=["--mode", "frozne"])
    with pytest.raises(StageFailed, match="cross-validation") as failure:
        Pipeline(broken).run()
    log = tmp_path / "run" / "logs" / "cross-validation.log"
    assert str(log) in str(failure.value) and "mode" in log.read_text()
    first = Pipeline(config)
    summary = first.run().dump()  # summary.json as written
    assert {"teacher labels", "dataset"} <= set(first.done_earlier)  # done before the failure
    assert "cross-validation" not in first.done_earlier and first.timings["cross-validation"] > 0
    fold0 = json.loads((tmp_path / "run" / "cv" / "fold-0" / "grader" / "metrics.json").read_text())
    run = tmp_path / "run"
    expected = [
        "report.md",
        "report.html",
        "summary.json",
        "dataset/fold-2/test.jsonl",
        "cv/study.json",
        "cv/fold-0/grader/metrics.json",
        "cv/fold-2/zero-shot/metrics.json",
        "cv/fold-1/judge/predictions.jsonl",
        "export/model.safetensors",
        "export/README.md",
        "search/metrics.json",
        "search/inferred_qrels.txt",
        "zoo/leaderboard.json",
        "zoo/systems/bm25-top10-grader.trec",
        "stages/cross-validation.json",
        "logs/cross-validation.log",
    ]
    for path in expected:
        assert (run / path).exists(), path
    cross = summary["cross_validation"]
    assert cross["source"] == "human" and summary["folds"] == 3
    assert set(cross["pooled"]) == {"bm25", "cosine", "zero-shot", "judge", "grader", "classifier"}
    tested = len((run / "dataset" / "tested.jsonl").read_text().splitlines())
    assert cross["pooled"]["grader"]["pairs"] == cross["pooled"]["bm25"]["pairs"] == tested
    assert cross["pooled"]["judge"]["pairs"] <= 10  # its sample
    verdict = cross["beats_every_baseline"]["grader"]
    # The paper's classifier head is a row of its own, paired with the baselines like ours.
    assert {d["baseline"] for d in cross["differences"] if d["model"] == "classifier"} == {
        "bm25",
        "cosine",
    }
    paired = [d for d in cross["differences"] if d["model"] == "grader"]
    assert {d["baseline"] for d in paired} == {"bm25", "cosine"}
    assert verdict == all(d["low"] is not None and d["low"] > 0 for d in paired)
    # The exported grader is fold 0's, evaluated on fold 0's test queries.
    card = json.loads((run / "export" / "config.json").read_text())["grader"]
    assert card["data"]["dataset"].endswith("fold-0")
    report = (run / "report.md").read_text()
    assert "3-fold cross-validation by query" in report and "MiniLM cosine (baseline)" in report
    # A grader that does not beat both baselines is said in the report's first lines.
    first_lines = report.split("## Held-out quality")[0]
    assert ("Not trustworthy: the grader" in first_lines) == (not verdict)
    assert "classifier head (smollm2-135m-B-frozen)" in report
    assert set(summary["search"]) == {"bm25", "bm25-grader"}
    # The labelers ranked on the zoo: the grader (which also reranks), the calibrated cosine and
    # BM25 score, a constant and a random labeler.
    board = summary["leaderboard"]
    assert len(board["systems"]) == 5 and board["queries"] == 12
    readings = {(r["labeler"], r["reading"]) for r in board["readings"]}
    assert {("grader", "labels"), ("grader", "scores")} <= readings
    assert {("MiniLM cosine", "labels"), ("BM25 score", "labels"), ("random", "labels")} <= readings
    grader = next(r for r in board["readings"] if r["labeler"] == "grader")
    assert grader["self_preference"]["own_systems"] == ["bm25-top10-grader"]
    assert "Labelers ranked by how they rank 5 systems" in (run / "report.md").read_text()
    # Ten queries keep their human judgments: PPI estimates of every run and of the difference.
    assert summary["ppi"]["judged_queries"] == 10
    assert set(summary["ppi"]["runs"]) == {"bm25", "bm25-grader"}
    assert "bm25-grader - bm25" in summary["ppi"]["differences"]
    assert "corrected by 10 human-judged queries" in report
    # The README's results block comes from this summary, between its markers, and the check
    # finds a README that says something else.
    from eval.report.readme import END, START, differences, replace_between_markers, results_table
    from measure.classification.summaries import JobSummary

    table = results_table(JobSummary.read(run / JobSummary.FILE))
    assert f"| {tiny_model_dir.name} grader (ours) | " in table and "BM25 score (baseline)" in table
    readme = replace_between_markers(f"intro\n{START}\nold\n{END}\nrest\n", table)
    assert readme == f"intro\n{START}\n{table}{END}\nrest\n"
    assert differences(table, table) == []
    assert (
        json.loads((run / "export" / "export_check.json").read_text())["max_abs_difference"] <= 1e-4
    )
    again = Pipeline(config)
    again.run()
    assert set(again.done_earlier) == set(again.timings)  # every stage skipped on resume
    # A skipped stage keeps the time it took when it ran.
    assert again.timings["cross-validation"] == first.timings["cross-validation"]
    changed = Pipeline(dataclasses.replace(config, judge_sample=8))
    changed.run()
    rerun = set(changed.timings) - set(changed.done_earlier)
    assert rerun == {"LLM judge labels", "cross-validation"}
    # Only the judge's rows were evaluated again: the graders' folds are reused.
    assert json.loads((run / "cv" / "fold-0" / "grader" / "metrics.json").read_text()) == fold0


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (["--teacher_backend", "opnai"], "teacher_backend"),
        (["--retrievers", "bm25", "splade"], "retrievers"),
        (["--rerank", "dense", "--retrievers", "bm25"], "rerank"),
        (["--folds", "1"], "folds"),
        (["--validation_size", "0"], "validation_size"),
        (["--validation_size", "2.5"], "validation_size"),
        (["--k", "0"], "k: expected >= 1"),
        (["--max_pairs_per_query", "-3"], "max_pairs_per_query"),
        (["--balance", "smote"], "balance"),
    ],
)
def test_bad_pipeline_settings_fail_before_any_stage(override: list[str], message: str, capsys):
    args = ["--config", str(REPO / "eval/configs/main.yaml"), *override]
    with pytest.raises((ValueError, SystemExit)) as failure:
        parse_config([PipelineConfig], args)
    said = str(failure.value) + capsys.readouterr().err
    assert message.split(":")[0] in said


def unjudged_corpus(
    root: Path, queries: int = 8, docs_per_query: int = 6, unusable: int | None = None
) -> Path:
    """A user's corpus in the BEIR layout without qrels; each document carries the fake
    endpoint's marker, relevant when it is about its query's topic; the teacher's reply about
    document ``unusable`` of each query is garbage."""
    from core.io import write_jsonl

    topics = ["axon", "marathon", "volcano", "tariff", "glacier", "sonnet", "enzyme", "orbit"]
    documents = []
    for q in range(queries):
        for d in range(docs_per_query):
            relevant = d % 2 == 0
            words = f"{topics[q]} {topics[q]} facts" if relevant else f"{topics[q]} mentioned once"
            documents.append(
                {
                    "_id": f"d{q}-{d}",
                    "title": "",
                    "text": f"{words} [[id=d{q}-{d} mode={'garbage' if d == unusable else 'ok'} "
                    f"rel={int(relevant)}]] filler text",
                }
            )
    write_jsonl(root / "corpus.jsonl", documents)
    write_jsonl(
        root / "queries.jsonl",
        ({"_id": f"q{q}", "text": f"what about {topics[q]}"} for q in range(queries)),
    )
    return root


@pytest.mark.slow
def test_main_job_on_a_corpus_without_qrels(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """qrels: none. The retrievers run first, the teacher (an OpenAI-compatible endpoint) labels
    their pooled top-k, and the grader is measured against the teacher, the only reference. The
    teacher's replies about one hit per query are unusable (kept as error records, never labels)."""
    from core.io import read_records
    from core.records import Judgment, Pair
    from support.fake_openai import FakeOpenAI

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    collection = unjudged_corpus(tmp_path / "corpus", unusable=5)
    run = tmp_path / "run"
    monkeypatch.setenv(STATE_CACHE_ENV, "none")  # states in memory: the switch reaches every stage
    with FakeOpenAI() as server:
        config = PipelineConfig(
            run_dir=str(run),
            collection=str(collection),
            qrels=None,
            teacher_backend="openai",
            teacher_model="gpt-4o-mini",
            teacher_args=["--base_url", server.base_url],
            student=str(tiny_model_dir),
            train_config="train/configs/smollm2-135m-B-frozen.yaml",
            train_args=["--num_train_epochs", "2"],
            zero_shot=False,
            judge_model=None,
            retrievers=["bm25"],
            rerank="bm25",
            k=5,
        )
        pipeline = Pipeline(config)
        assert [s.name for s in pipeline.stages()][:2] == ["retrieval runs", "teacher labels"]
        summary = pipeline.run().dump()
    pool = list(read_records(run / "candidates" / "pool.pairs.jsonl", Pair))
    judgments = list(read_records(run / "labels" / "teacher.jsonl", Judgment))
    assert len(judgments) == len(pool) > 0  # every retrieved pair, labelled once
    assert {(j.qid, j.doc_id) for j in judgments} == {(p.qid, p.doc_id) for p in pool}
    usable = [j for j in judgments if j.error is None]
    assert all(j.label == int("rel=1" in j.text) for j in usable)  # the teacher's word
    unusable = len(judgments) - len(usable)
    assert unusable == len([p for p in pool if "mode=garbage" in p.text]) > 0
    assert summary["cross_validation"]["source"] == "teacher"
    assert set(summary["search"]) == {"bm25", "bm25-grader"}
    # No people, no leaderboard: a labeler is judged against human judgments.
    assert "leaderboard" not in summary and "labeler leaderboard" not in pipeline.timings
    assert "No labeler leaderboard: it needs human judgments" in (run / "report.md").read_text()


def test_no_qrels_needs_a_teacher_that_is_not_qrels():
    args = ["--config", str(REPO / "eval/configs/main.yaml"), "--qrels", "none"]
    with pytest.raises(ValueError, match="teacher_backend"):
        parse_config([PipelineConfig], args)


def test_stage_flags_are_given_quoted_on_the_command_line():
    args = ["--config", str(REPO / "eval/configs/main.yaml")]
    args += ["--teacher_args", "--concurrency 32", "--train_args", "--labels graded"]
    (config,) = parse_config([PipelineConfig], args)
    assert config.teacher_args == ["--concurrency", "32"]
    assert config.train_args == ["--labels", "graded"]


def test_the_teacher_labels_the_pooled_top_k_the_flag_names(tmp_path: Path):
    """--k 3 retrieves and pools each retriever's top 3 (no floor of 10 paid for)."""
    args = ["--config", str(REPO / "eval/configs/main.yaml"), "--qrels", "none"]
    args += ["--teacher_backend", "openai", "--k", "3", "--run_dir", str(tmp_path / "run")]
    (config,) = parse_config([PipelineConfig], args)
    retrieval = next(s for s in Pipeline(config).stages() if s.name == "retrieval runs")
    assert retrieval.configs[0].k == 3


def test_the_teacher_endpoint_is_a_flag_of_the_job(tmp_path: Path):
    """The README's own-corpus command names its endpoint with --teacher_base_url, which reaches
    the label stage (--base_url was no flag of the job: a traceback)."""
    args = ["--config", str(REPO / "eval/configs/main.yaml"), "--qrels", "none"]
    args += ["--teacher_backend", "openai", "--run_dir", str(tmp_path / "run")]
    args += ["--teacher_base_url", "http://127.0.0.1:8080/v1"]
    (config,) = parse_config([PipelineConfig], args)
    teacher = next(s for s in Pipeline(config).stages() if s.name == "teacher labels")
    _, judge = teacher.configs
    assert judge.base_url == "http://127.0.0.1:8080/v1"
    (default,) = parse_config([PipelineConfig], args[:-2])
    stage = next(s for s in Pipeline(default).stages() if s.name == "teacher labels")
    assert stage.configs[1].base_url is None  # OPENAI_BASE_URL, else OpenAI's API
    refused = ["--config", str(REPO / "eval/configs/main.yaml"), *args[-2:]]
    with pytest.raises(ValueError, match="teacher_base_url: the qrels teacher asks no endpoint"):
        parse_config([PipelineConfig], refused)
