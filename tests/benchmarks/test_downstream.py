"""The downstream experiment (benchmarks.downstream): which labeler tracks a RAG reader's
end-to-end quality, on hand-made data and tiny models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy.stats import kendalltau, spearmanr

from benchmarks.downstream.experiment import (
    DownstreamConfig,
    DownstreamRun,
    chunk_corpus,
    correlations,
    dual_label_probabilities,
    main,
)
from measure.labelers.reader import ReaderConfig

REPO = Path(__file__).resolve().parents[2]


def test_dual_label_probabilities_against_a_hand_count():
    doc = [True, True, False, False, True, False]
    word = [True, False, True, False, True, False]
    probs = dual_label_probabilities(doc, word)
    # doc: 3/6, word: 3/6, both (positions 0 and 4): 2/6; P(Doc|Word) = 2/3, P(Word|Doc) = 2/3
    assert probs["P(Doc)"] == pytest.approx(0.5)
    assert probs["P(Word)"] == pytest.approx(0.5)
    assert probs["P(Doc ∩ Word)"] == pytest.approx(2 / 6)
    assert probs["P(Doc | Word)"] == pytest.approx(2 / 3)
    assert probs["P(Word | Doc)"] == pytest.approx(2 / 3)
    none = dual_label_probabilities([False, False], [False, True])
    assert none["P(Word | Doc)"] is None and none["P(Doc | Word)"] == 0.0


def test_correlations_are_scipys_tau_b_and_rho_with_ties():
    x = [0.2, 0.2, 0.5, 0.9, 0.0, 0.5, 1.0]
    y = [0.0, 1.0, 0.5, 1.0, 0.0, 0.0, 1.0]
    result = correlations(x, y)
    assert result["tau"] == pytest.approx(kendalltau(x, y).statistic)
    assert result["rho"] == pytest.approx(spearmanr(x, y).statistic)
    assert correlations([1, 1, 1], [0, 1, 2])["tau"] is None  # a constant side has no ranking


def test_chunks_remember_their_source_document():
    from data.beir import Document

    corpus = {"d1": Document("d1", "aaaa bbbb cccc dddd eeee", "T"), "d2": Document("d2", "short")}
    chunks, source = chunk_corpus(corpus, 10, 5)
    assert list(chunks) == ["d1#0", "d1#1", "d1#2", "d1#3", "d2#0"]
    assert chunks["d1#1"].text == "bbbb cccc" and chunks["d1#1"].title == "T"
    assert source["d1#3"] == "d1" and source["d2#0"] == "d2"
    whole, source = chunk_corpus(corpus, 0, 0)
    assert list(whole) == ["d1", "d2"] and source == {"d1": "d1", "d2": "d2"}


def _squad_like(root: Path) -> Path:
    """Two articles of three paragraphs; each question's answer is in its gold paragraph."""
    root.mkdir()
    topics = {
        "a0": ["Denver Broncos won Super Bowl fifty", "The game was played in Santa Clara",
               "Tickets were sold out early"],
        "a1": ["Warsaw is the capital of Poland", "The Vistula river crosses Warsaw",
               "Chopin was born near Warsaw"],
    }  # fmt: skip
    corpus, queries, qrels = [], [], ["query-id\tcorpus-id\tscore"]
    questions = {
        "a0-p0": ("Who won Super Bowl fifty?", "Denver Broncos"),
        "a0-p1": ("Where was the game played?", "Santa Clara"),
        "a1-p0": ("What is the capital of Poland?", "Warsaw"),
        "a1-p1": ("Which river crosses Warsaw?", "Vistula"),
        "a1-p2": ("Who was born near Warsaw?", "Chopin"),
    }
    for article, paragraphs in topics.items():
        for p, text in enumerate(paragraphs):
            corpus.append({"_id": f"{article}-p{p}", "title": article, "text": text})
    for n, (doc, (question, answer)) in enumerate(questions.items()):
        queries.append(
            {"_id": f"q{n}", "text": question, "answers": [answer], "metadata": {"gold_doc": doc}}
        )
        qrels.append(f"q{n}\t{doc}\t1")
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (root / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    return root


@pytest.mark.slow
def test_downstream_end_to_end_on_tiny_models(
    tmp_path: Path, tiny_model_dir: Path, tiny_grader_dir: Path, monkeypatch
):
    collection = _squad_like(tmp_path / "squad")
    reader_yaml = tmp_path / "reader.yaml"
    reader_yaml.write_text(
        f"model: {tiny_model_dir}\nmax_new_tokens: 3\nbatch_size: 4\ndevice: cpu\ndtype: float32\n"
    )
    judge_yaml = tmp_path / "judge.yaml"
    judge_yaml.write_text(f"backend: hf\nmodel: {tiny_model_dir}\nprompt: binary\ndevice: cpu\n")
    out = tmp_path / "out"
    args = [
        "--collection", str(collection), "--queries", "4", "--chunk_chars", "24",
        "--chunk_overlap", "4", "--retrievers", "bm25", "--k", "2", "--reader", str(reader_yaml),
        "--grader", str(tiny_grader_dir), "--out", str(out), "--labelers", "erag", "erag-em",
        "answers", "gold-doc", "grader", f"judge:{judge_yaml}",
    ]  # fmt: skip
    main(args)
    results = json.loads((out / "results.json").read_text())
    assert results["queries"] == 4 and results["systems"] == ["bm25"]
    names = {key.split(" | ")[0] for key in results["correlation"]}
    assert names == {"erag", "erag-em", "answers", "gold-doc", "grader", "judge:judge"}
    rows = [json.loads(line) for line in (out / "per_query.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(len(r["chunks"]) <= 2 for r in rows)
    # The table's τ is scipy's on the per-query metric and end-to-end F1 it wrote.
    x = [r["metrics"]["answers"]["hit"] for r in rows]
    y = [r["end_to_end"]["f1"] for r in rows]
    expected = correlations(x, y)["tau"]
    assert results["correlation"]["answers | hit"]["f1:all"]["tau"] == expected
    # Dual labels: hand count from the per-query chunks and the gold document of each query.
    gold = {
        json.loads(line)["_id"]: json.loads(line)["metadata"]["gold_doc"]
        for line in (collection / "queries.jsonl").read_text().splitlines()
    }
    top1 = [r["chunks"][0].split("#")[0] == gold[r["qid"]] for r in rows]
    assert results["dual_labels"]["bm25 top-1"]["P(Doc)"] == pytest.approx(sum(top1) / 4)
    assert results["cost"]["erag"]["prompts"] >= 4 and results["cost"]["end_to_end"]["prompts"] == 4
    assert (out / "table.md").read_text().count("| erag |") == 4
    assert (out / "correlation.png").stat().st_size > 0

    # A second run asks no model anything: readers, grader and judge labels all come from cache.
    def no_model(*args, **kwargs):
        raise AssertionError("a cached run loaded a model")

    monkeypatch.setattr("measure.labelers.reader.make_reader", no_model)
    monkeypatch.setattr("measure.labelers.GraderLabeler.label_many", no_model)
    monkeypatch.setattr("data.judges.backends.make_backend", no_model)
    main(args)
    assert json.loads((out / "results.json").read_text())["correlation"] == results["correlation"]


def test_downstream_config_errors_name_the_field(tmp_path: Path):
    with pytest.raises(ValueError, match="retrievers"):
        DownstreamConfig(retrievers=["splade"])
    with pytest.raises(ValueError, match="rerank_depth"):
        DownstreamConfig(rerank_depth=3, k=5)
    with pytest.raises(ValueError, match="chunk_overlap"):
        DownstreamConfig(chunk_chars=10, chunk_overlap=10)
    config = DownstreamConfig(
        collection=str(_squad_like(tmp_path / "squad")),
        grader=str(tmp_path / "missing"),
        labelers=["grader"],
        out=str(tmp_path / "out"),
    )
    with pytest.raises(
        FileNotFoundError, match=r"no grader at .*missing.*relevance-grader pipeline"
    ):
        DownstreamRun(config).grader  # noqa: B018 - the property loads the grader


def test_squad_config_parses():
    from core.cli import parse_config

    (config,) = parse_config(
        [DownstreamConfig], ["--config", str(REPO / "benchmarks/downstream/squad.yaml")]
    )
    assert config.k == 5 and config.queries >= 200 and set(config.retrievers) == {"bm25", "dense"}
    reader = ReaderConfig.from_yaml(REPO / config.reader)
    assert reader.backend == "hf" and reader.model == "smollm2-135m"
    from measure.labelers import JudgeLabeler

    judge = next(s for s in config.labelers if s.startswith("judge:"))
    labeler = JudgeLabeler(str(REPO / judge.removeprefix("judge:")))  # a local model loads lazily
    assert labeler.config.backend == "hf" and labeler.prompt.name == "binary"
    for path in (REPO / "eval/configs").glob("reader-*.yaml"):
        assert ReaderConfig.from_yaml(path).max_new_tokens >= 1


@pytest.mark.slow
def test_downstream_on_the_committed_squad_subset_with_the_embedded_reader(tmp_path: Path):
    """The shipped reader config and collection, on a few questions (BM25 only, no grader)."""
    out = tmp_path / "out"
    main(
        [
            "--config", str(REPO / "benchmarks/downstream/squad.yaml"), "--queries", "4",
            "--retrievers", "bm25", "--reader", str(REPO / "eval/configs/reader-smollm2.yaml"),
            "--labelers", "erag", "answers", "gold-doc", "--out", str(out),
        ]
    )  # fmt: skip
    results = json.loads((out / "results.json").read_text())
    assert results["queries"] == 4 and results["chunks"] > 6000
    rows = [json.loads(line) for line in (out / "per_query.jsonl").read_text().splitlines()]
    assert all(isinstance(r["end_to_end"]["answer"], str) for r in rows)
    assert all(0.0 <= r["end_to_end"]["f1"] <= 1.0 for r in rows)
    assert results["dual_labels"]["bm25 top-1"]["chunks"] == 4
