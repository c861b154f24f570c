"""The RAG reader (measure.labelers.reader) and the downstream-grounded labelers (eRAG, answers,
gold document), on hand-made data; the experiment that compares them is tested beside it, in
tests/benchmarks/test_downstream.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from measure.labelers import AnswersLabeler, ERAGLabeler, GoldDocLabeler, Hit, make_labeler
from measure.labelers.reader import CachedReader, Reader, ReaderConfig, ReaderOutput
from measure.metrics.retrieval import label_list_metrics

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


class ScriptedReader(Reader):
    """Answers with the passage's first word (so eRAG labels are known by hand); counts calls."""

    calls: ClassVar[list[int]] = []

    def _answer(self, items):
        ScriptedReader.calls.append(len(items))
        return [ReaderOutput(reply=p[0].split()[0], answer=p[0].split()[0]) for _, p in items]


def test_erag_answers_and_gold_doc_labels(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(
        "measure.labelers.reader.make_reader", lambda config: ScriptedReader(config)
    )
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
        "measure.labelers.reader.make_reader", lambda config: DiesOnThirdBatch(config)
    )
    with pytest.raises(KeyboardInterrupt):
        CachedReader(ReaderConfig(batch_size=3), path).answer(items)
    assert len(path.read_text().splitlines()) == 6  # two finished batches kept
    ScriptedReader.calls = []
    monkeypatch.setattr(
        "measure.labelers.reader.make_reader", lambda config: ScriptedReader(config)
    )
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


def test_an_openai_compatible_reader_answers_by_model_name(tmp_path: Path):
    """A real reader is a model name behind any OpenAI-compatible endpoint (here a local fake)."""
    from support.fake_openai import FakeOpenAI

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


def test_reader_and_judge_configs_load():
    """The committed reader and judge configs (the downstream experiment's defaults among them)."""
    from measure.labelers import JudgeLabeler

    readers = sorted((REPO / "eval/configs").glob("reader-*.yaml"))
    judges = sorted((REPO / "eval/configs").glob("judge-*.yaml"))
    assert readers and judges
    for path in readers:
        assert ReaderConfig.from_yaml(path).max_new_tokens >= 1
    for path in judges:
        labeler = JudgeLabeler(str(path))  # a local model loads lazily
        assert labeler.config.backend == "hf" and labeler.prompt.name == "binary"
