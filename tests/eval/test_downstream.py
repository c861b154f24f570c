"""eval.downstream and the downstream-grounded labelers, on hand-made data and tiny models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from eval.downstream.experiment import (
    DownstreamConfig,
    DownstreamRun,
    chunk_corpus,
    correlations,
    dual_label_probabilities,
    main,
)
from eval.downstream.reader import CachedReader, Reader, ReaderConfig, ReaderOutput
from eval.labelers import AnswersLabeler, ERAGLabeler, GoldDocLabeler, Hit, make_labeler
from eval.search.metrics import label_list_metrics

REPO = Path(__file__).resolve().parents[2]


def list_metrics(values: list[float], k: int) -> dict[str, float]:
    return label_list_metrics({"q": values}, k)["q"]


def test_list_metrics_against_hand_values():
    values = [0.0, 1.0, 0.5, 0.0, 0.0]
    metrics = list_metrics(values, k=5)
    assert metrics["precision"] == pytest.approx(1.5 / 5)  # mean label over k
    assert metrics["hit"] == 1.0  # max label
    assert metrics["mrr"] == 0.5  # first label >= 0.5 at rank 2
    dcg = 1 / np.log2(3) + 0.5 / np.log2(4)
    ideal = 1 / np.log2(2) + 0.5 / np.log2(3)
    assert metrics["ndcg"] == pytest.approx(dcg / ideal)
    # eRAG's F1 labels are gains as they are: 0.3 counts three tenths of a 1
    f1 = list_metrics([0.3, 0.0, 1.0], k=3)
    dcg = 0.3 + 1.0 / np.log2(4)
    assert f1["ndcg"] == pytest.approx(dcg / (1.0 + 0.3 / np.log2(3)), rel=1e-5)
    assert f1["mrr"] == pytest.approx(1 / 3)
    assert list_metrics([0.0, 0.0], k=5) == {"precision": 0.0, "hit": 0.0, "mrr": 0.0, "ndcg": 0.0}
    # A list shorter than k still divides precision by k.
    assert list_metrics([1.0], k=4)["precision"] == 0.25


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


class ScriptedReader(Reader):
    """Answers with the passage's first word (so eRAG labels are known by hand); counts calls."""

    calls: ClassVar[list[int]] = []

    def _answer(self, items):
        ScriptedReader.calls.append(len(items))
        return [ReaderOutput(reply=p[0].split()[0], answer=p[0].split()[0]) for _, p in items]


def test_erag_answers_and_gold_doc_labels(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("eval.downstream.reader.make_reader", lambda config: ScriptedReader(config))
    ScriptedReader.calls = []
    reader = CachedReader(ReaderConfig(batch_size=2), tmp_path / "reader.jsonl")
    answers = {"q": ["Denver Broncos", "Broncos"]}
    hits = [
        Hit("d1#0", "Broncos won the game", source_id="d1"),
        Hit("d2#0", "Panthers lost, the Broncos won", source_id="d2"),
        Hit("d1#1", "Denver is a city", source_id="d1"),
    ]
    f1 = ERAGLabeler(reader, answers, "f1").label("q", "who won?", hits)
    assert [lab.score for lab in f1] == pytest.approx(
        [1.0, 0.0, 2 / 3]
    )  # "denver" vs "denver broncos"
    assert [lab.relevant for lab in f1] == [True, False, True]
    em = ERAGLabeler(reader, answers, "em").label("q", "who won?", hits)
    assert [lab.score for lab in em] == [1.0, 0.0, 0.0]
    assert sum(ScriptedReader.calls) == 3  # the EM labeler reused the F1 labeler's answers
    word = AnswersLabeler(answers).label("q", "who won?", hits)
    assert [lab.relevant for lab in word] == [True, True, False]
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq\td1\t1\n")
    doc = GoldDocLabeler(str(qrels)).label("q", "who won?", hits)
    assert [lab.relevant for lab in doc] == [True, False, True]


def test_reader_cache_resumes_after_a_kill_without_asking_again(tmp_path: Path, monkeypatch):
    class DiesOnThirdBatch(ScriptedReader):
        def _answer(self, items):
            if len(ScriptedReader.calls) == 2:
                raise KeyboardInterrupt
            return super()._answer(items)

    items = [(f"question {i}", [f"answer{i} passage"]) for i in range(7)]
    path = tmp_path / "reader.jsonl"
    ScriptedReader.calls = []
    monkeypatch.setattr(
        "eval.downstream.reader.make_reader", lambda config: DiesOnThirdBatch(config)
    )
    with pytest.raises(KeyboardInterrupt):
        CachedReader(ReaderConfig(batch_size=3), path).answer(items)
    assert len(path.read_text().splitlines()) == 6  # two finished batches kept
    ScriptedReader.calls = []
    monkeypatch.setattr("eval.downstream.reader.make_reader", lambda config: ScriptedReader(config))
    outputs = CachedReader(ReaderConfig(batch_size=3), path).answer(items)
    assert ScriptedReader.calls == [1]  # only the missing item was asked
    assert [o.answer for o in outputs] == [f"answer{i}" for i in range(7)]
    # Another prompt is another reader: nothing is reused across settings.
    ScriptedReader.calls = []
    CachedReader(ReaderConfig(batch_size=3, system="Be brief."), path).answer(items[:1])
    assert ScriptedReader.calls == [1]


def test_make_labeler_builds_downstream_labelers_from_files(tmp_path: Path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"_id": "q", "text": "?", "answers": ["x"]}) + "\n")
    reader_yaml = tmp_path / "reader.yaml"
    reader_yaml.write_text(f"model: smollm2-135m\nanswers: {queries}\n")
    labeler = make_labeler(f"erag:{reader_yaml}", cache_dir=tmp_path)
    assert isinstance(labeler, ERAGLabeler) and labeler.metric == "f1" and labeler.continuous
    assert make_labeler(f"erag-em:{reader_yaml}", cache_dir=tmp_path).metric == "em"
    assert isinstance(make_labeler(f"answers:{queries}"), AnswersLabeler)
    (tmp_path / "no-answers.yaml").write_text("model: smollm2-135m\n")
    with pytest.raises(ValueError, match="answers"):
        make_labeler(f"erag:{tmp_path / 'no-answers.yaml'}")


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

    monkeypatch.setattr("eval.downstream.reader.make_reader", no_model)
    monkeypatch.setattr("eval.labelers.GraderLabeler.label_many", no_model)
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
    with pytest.raises(FileNotFoundError, match=r"no grader at .*missing.*eval.pipeline"):
        DownstreamRun(config).grader  # noqa: B018 - the property loads the grader


def test_squad_config_parses():
    from data.core.cli import parse_config

    (config,) = parse_config(
        [DownstreamConfig], ["--config", str(REPO / "eval/configs/squad.yaml")]
    )
    assert config.k == 5 and config.queries >= 200 and set(config.retrievers) == {"bm25", "dense"}
    reader = ReaderConfig.from_yaml(REPO / config.reader)
    assert reader.backend == "hf" and reader.model == "smollm2-135m"
    from eval.labelers import JudgeLabeler

    judge = next(s for s in config.labelers if s.startswith("judge:"))
    labeler = JudgeLabeler(str(REPO / judge.removeprefix("judge:")))  # a local model loads lazily
    assert labeler.config.backend == "hf" and labeler.prompt.name == "binary"
    for path in (REPO / "eval/configs").glob("reader-*.yaml"):
        assert ReaderConfig.from_yaml(path).max_new_tokens >= 1


def test_an_openai_compatible_reader_answers_by_model_name(tmp_path: Path):
    """A real reader is a model name behind any OpenAI-compatible endpoint (here a local fake)."""
    from tests.support.fake_openai import FakeOpenAI

    with FakeOpenAI() as server:
        config = ReaderConfig(
            backend="openai", model="my-reader-70b", base_url=server.base_url, batch_size=4
        )
        reader = CachedReader(config, tmp_path / "reader.jsonl")
        items = [
            ("who won?", ["[[id=a mode=reply=The_answer_is:_Denver_Broncos rel=1]] text"]),
            ("where?", ["[[id=b mode=reply=Santa_Clara rel=1]] one", "two"]),
        ]
        outputs = reader.answer(items)
        assert [o.answer for o in outputs] == ["Denver Broncos", "Santa Clara"]
        bodies = {b["messages"][-1]["content"].rsplit("Question: ", 1)[1]: b for b in server.bodies}
        body = bodies["who won?\nShort answer:"]
        assert body["model"] == "my-reader-70b" and body["max_tokens"] == config.max_new_tokens
        # top-k passages together are numbered
        assert "[1]" in bodies["where?\nShort answer:"]["messages"][-1]["content"]
        labels = ERAGLabeler(reader, {"q": ["Denver Broncos"]}, "em").label(
            "q", "who won?", [Hit("d", items[0][1][0])]
        )
        assert labels[0].score == 1.0 and server.requests["a"] == 1  # the cached answer


def test_a_vllm_reader_passes_its_engine_options(tmp_path: Path, monkeypatch):
    """A stand-in ``vllm`` module: the engine options and sampling the reader asks for."""
    import sys
    import types
    from types import SimpleNamespace as NS

    engines: list[dict] = []

    class LLM:
        def __init__(self, **kwargs):
            engines.append(kwargs)

        def chat(self, conversations, params, use_tqdm=False):
            assert params.max_tokens == 7 and params.temperature == 0.0
            return [
                NS(prompt_token_ids=[1, 2], outputs=[NS(text="Answer: Warsaw\n", token_ids=[5])])
                for _ in conversations
            ]

    fake = types.ModuleType("vllm")
    fake.LLM = LLM
    fake.SamplingParams = lambda **kwargs: NS(**kwargs)
    monkeypatch.setitem(sys.modules, "vllm", fake)
    config = ReaderConfig(
        backend="vllm", model="/models/reader", max_new_tokens=7, tensor_parallel_size=4,
        max_model_len=8192, gpu_memory_utilization=0.8,
    )  # fmt: skip
    outputs = CachedReader(config, tmp_path / "r.jsonl").answer([("capital?", ["Warsaw is..."])])
    assert outputs[0].answer == "Warsaw" and outputs[0].input_tokens == 2
    assert engines == [
        {
            "model": "/models/reader",
            "dtype": "auto",
            "tensor_parallel_size": 4,
            "max_model_len": 8192,
            "gpu_memory_utilization": 0.8,
        }
    ]


@pytest.mark.slow
def test_downstream_on_the_committed_squad_subset_with_the_embedded_reader(tmp_path: Path):
    """The shipped reader config and collection, on a few questions (BM25 only, no grader)."""
    out = tmp_path / "out"
    main(
        [
            "--config", str(REPO / "eval/configs/squad.yaml"), "--queries", "4",
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
