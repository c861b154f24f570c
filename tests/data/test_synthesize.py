"""Synthetic queries: prompt filling, the reply and retrieval filters, labels, cache and resume."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest

from core.cli import cli_args
from core.io import read_records
from core.records import Judgment, document_text
from data.synthesize import (
    SYNTHETIC_PREFIX,
    SynthesisConfig,
    Synthesizer,
    SyntheticTeacherConfig,
    load_query_prompt,
    main,
    query_from_reply,
    sample_passages,
)
from models.llm_client import ChatClient, ChatRequest, ChatSettings, Reply
from support.fake_openai import FakeOpenAI

REPO = Path(__file__).resolve().parents[2]
PASSAGE = (
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris and is 330 metres tall."
)


@pytest.mark.parametrize(
    ("reply", "finished", "query", "problem"),
    [
        (
            "When was the Eiffel Tower completed?",
            True,
            "When was the Eiffel Tower completed?",
            None,
        ),
        ('Query: "eiffel tower height"', True, "eiffel tower height", None),
        (
            "how tall is the eiffel tower\nIt is 330 metres.",
            True,
            "how tall is the eiffel tower",
            None,
        ),
        ("", True, None, "empty reply"),
        ("  \n ", True, None, "empty reply"),
        ('""', True, None, "empty reply"),
        ("I'm sorry, I cannot help with that.", True, None, "refusal"),
        ("The Eiffel Tower was completed in 1889 for the World's Fair", True, None, "echo"),
        ("What is this passage about?", True, None, "not a query"),
        ("Here's a possible question", True, None, "not a query"),
        ("What a great question! How about the tower?", True, None, "not a query"),
        ("What is the answer?", True, None, "names no topic"),
        ("What is the function of red blood cells?", True, None, "copied an example"),
        ("eiffel", True, None, "too short"),
        (" ".join(["word"] * 30), True, None, "too long"),
        ("When was the Eiffel Tower completed and who", False, None, "cut off"),
    ],
)
def test_a_reply_becomes_a_query_only_when_it_is_one(reply, finished, query, problem):
    found, error = query_from_reply(
        reply, PASSAGE, ["what is the function of red blood cells"], finished=finished
    )
    assert found == query
    if problem is None:
        assert error is None
    else:
        assert error is not None and problem in error


def test_every_query_prompt_loads():
    from data.synthesize import QUERY_PROMPTS_DIR

    names = sorted(p.stem for p in QUERY_PROMPTS_DIR.glob("*.yaml"))
    assert {"inpars", "question"} <= set(names)
    for name in names:
        prompt = load_query_prompt(name)
        _, user = prompt.messages("", "DOC-Y")
        assert "DOC-Y" in user["content"] and prompt.version >= 1


def test_prompts_fill_examples_and_the_document():
    inpars = load_query_prompt("inpars")
    block = inpars.examples_block(
        [{"query": "q one", "text": "doc one " * 100}, {"query": "q two", "text": ""}], chars=20
    )
    assert "Query: q one" in block and "Query: q two" in block
    assert "Document: doc one doc one doc \nQuery: q one\n\n" in block  # cut at 20 characters
    system, user = inpars.messages(block, "THE PASSAGE")
    assert system["role"] == "system" and user["content"].startswith("Document: doc one")
    assert user["content"].rstrip().endswith("Document: THE PASSAGE\nQuery:")
    question = load_query_prompt("question")
    _, user = question.messages(question.examples_block([], 400), "THE PASSAGE")
    assert "Example" not in user["content"] and "THE PASSAGE" in user["content"]


def test_a_prompt_without_its_slots_is_refused(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\nversion: 1\nsystem: s\nuser: 'no slots'\nexample: '{query}'\n"
        "example_without_document: '{query}'\n"
    )
    with pytest.raises(
        ValueError, match=re.escape("bad.yaml: user: the template needs a {examples} slot")
    ):
        load_query_prompt(str(bad))


class ScriptedWriter:
    """Stands in for the generator: a reply per passage chosen by the passage's id."""

    def __init__(self, collection_dir: Path, fail_after: int | None = None) -> None:
        corpus = [json.loads(x) for x in (collection_dir / "corpus.jsonl").open()]
        self.reply_for = {}
        for doc in corpus:
            key = document_text(doc["text"], doc.get("title"))[:60]
            number = int(doc["_id"])
            if number % 5 == 0:
                self.reply_for[key] = "I'm sorry, I can't write that."
            elif number % 7 == 0:
                self.reply_for[key] = ""
            else:  # a keyword query from the passage itself: BM25 finds its source
                self.reply_for[key] = " ".join(doc["text"].split()[:5])
        self.asked = 0
        self.fail_after = fail_after

    def complete(self, requests, on_reply=None, usable=None):
        out = []
        for index, request in enumerate(requests):
            if self.fail_after is not None and self.asked >= self.fail_after:
                raise KeyboardInterrupt  # Ctrl-C after fail_after replies
            self.asked += 1
            passage = request.messages[-1]["content"].split("Passage:\n", 1)[1]
            out.append(Reply([self.reply_for[passage[:60]]], [True], [{}], 50, 6, attempts=1))
            if on_reply is not None:
                on_reply(index, out[-1])
        return out


def synthesize(adi_dir: Path, out: Path, **overrides) -> dict:
    config = SynthesisConfig(
        collection=str(adi_dir),
        out=str(out),
        passages=30,
        negative_retrievers=["bm25"],
        negatives=2,
        labels="source",
        index_dir=str(out.parent / "indexes"),
    )
    for key, value in overrides.items():
        setattr(config, key, value)
    teacher = SyntheticTeacherConfig(batch_size=1, concurrency=1)  # 8 replies per call
    return Synthesizer(config, teacher).run()


def test_synthesis_writes_filtered_queries_and_labelled_pairs(
    adi_dir: Path, tmp_path: Path, monkeypatch
):
    writer = ScriptedWriter(adi_dir)
    monkeypatch.setattr(ChatClient, "complete", writer.complete)
    out = tmp_path / "synthetic"
    summary = synthesize(adi_dir, out)
    generated = [json.loads(x) for x in (out / "generated.jsonl").open()]
    assert summary["passages"] == 30 == len(generated) == writer.asked
    errors = [g for g in generated if "error" in g]
    assert any("refusal" in g["error"] for g in errors)
    assert any("empty reply" in g["error"] for g in errors)
    queries = {q["_id"]: q for q in map(json.loads, (out / "queries.jsonl").open())}
    assert queries and len(queries) == summary["queries"]
    for g in generated:  # a refusal or an empty reply is never a query
        assert (g["qid"] in queries) == ("error" not in g)
        assert g["qid"].startswith(SYNTHETIC_PREFIX)
    judgments = list(read_records(out / "judgments.jsonl", Judgment))
    by_query: dict[str, list[Judgment]] = {}
    for judgment in judgments:
        by_query.setdefault(judgment.qid, []).append(judgment)
    assert set(by_query) == set(queries)
    for qid, pairs in by_query.items():
        source = queries[qid]["metadata"]["source"]
        assert [p.doc_id for p in pairs if p.label == 1] == [source]  # labelled by construction
        assert 1 <= len(pairs) <= 3 and len({p.doc_id for p in pairs}) == len(pairs)
        assert all(p.query == queries[qid]["text"] for p in pairs)
    assert len(judgments) > 2 * len(queries)  # hard negatives beside the sources
    # The output folder is a BEIR collection: the metric pipeline can run on it.
    from data.beir import Collection

    assert set(Collection.load(out).queries) == set(queries)


def test_the_retrieval_filter_drops_queries_whose_passage_is_not_found(
    adi_dir: Path, tmp_path: Path, monkeypatch
):
    writer = ScriptedWriter(adi_dir)
    for key in writer.reply_for:  # the same query for every passage: only one source can win
        writer.reply_for[key] = "information retrieval systems evaluation"
    monkeypatch.setattr(ChatClient, "complete", writer.complete)
    summary = synthesize(adi_dir, tmp_path / "out", filter_k=1)
    assert summary["queries"] <= 1
    assert summary["fates"].get("duplicate", 0) + summary["fates"].get("not retrieved", 0) >= 29


def test_a_killed_synthesis_resumes_without_asking_twice(
    adi_dir: Path, tmp_path: Path, monkeypatch
):
    out = tmp_path / "synthetic"
    writer = ScriptedWriter(adi_dir, fail_after=13)  # Ctrl-C after 13 replies
    monkeypatch.setattr(ChatClient, "complete", writer.complete)
    with pytest.raises(KeyboardInterrupt):
        synthesize(adi_dir, out)
    assert len((out / "generation.cache.jsonl").read_text().splitlines()) == 13  # each one kept
    resumed = ScriptedWriter(adi_dir)
    monkeypatch.setattr(ChatClient, "complete", resumed.complete)
    first = synthesize(adi_dir, out)
    assert resumed.asked == 30 - 13
    again = ScriptedWriter(adi_dir)
    monkeypatch.setattr(ChatClient, "complete", again.complete)
    second = synthesize(adi_dir, out)
    assert again.asked == 0 and second["queries"] == first["queries"]
    # A larger sample with the same seed extends the first: only the new passages are asked.
    more = ScriptedWriter(adi_dir)
    monkeypatch.setattr(ChatClient, "complete", more.complete)
    synthesize(adi_dir, out, passages=40)
    assert more.asked == 10


def test_teacher_labels_go_through_data_label(
    adi_dir: Path, tiny_model_dir: Path, tmp_path: Path, monkeypatch
):
    monkeypatch.setattr(ChatClient, "complete", ScriptedWriter(adi_dir).complete)
    config = SynthesisConfig(
        collection=str(adi_dir),
        out=str(tmp_path / "out"),
        passages=12,
        negative_retrievers=["bm25"],
        negatives=1,
        index_dir=str(tmp_path / "indexes"),
    )
    teacher = SyntheticTeacherConfig(model=str(tiny_model_dir), prompt="binary", batch_size=4)
    summary = Synthesizer(config, teacher).run()
    labels = summary["labels"]
    assert labels["labels"] == "teacher" and labels["pairs"] == summary["pairs"] > 0
    judgments = list(read_records(tmp_path / "out" / "judgments.jsonl", Judgment))
    assert all(j.judge.backend == "hf" and j.p_relevant is not None for j in judgments)
    again = Synthesizer(config, teacher).run()  # the teacher's cache: nothing judged twice
    assert again["labels"]["judged_now"] == 0 and again["labels"]["cached"] == summary["pairs"]


def test_the_openai_writer_reports_failed_requests_without_caching_them():
    with FakeOpenAI() as server:
        settings = ChatSettings(
            base_url=server.base_url, max_retries=0, request_timeout=5, model="fake-writer"
        )
        chat = ChatClient(settings)
        requests = [
            ChatRequest(
                [{"role": "user", "content": "[[id=a mode=reply=what_is_a_heron rel=1]]"}], 16
            ),
            ChatRequest([{"role": "user", "content": "[[id=b mode=500-twice rel=1]]"}], 16),
        ]
        first, failed = chat.complete(requests)
        assert first.text == "what is a heron" and first.error is None
        assert failed.error and "500" in failed.error and failed.text == ""
        body = server.bodies[0]
        assert body["max_tokens"] == 16 and body["temperature"] == 0.0
        reasoning = ChatClient(dataclasses.replace(settings, model="o3-mini", reasoning_tokens=100))
        assert reasoning.body(ChatRequest([], 16)) == {
            "model": "o3-mini",
            "messages": [],
            "max_completion_tokens": 116,
        }


def test_sampling_nests_and_respects_the_length_range(adi_dir: Path):
    from data.beir import Collection

    collection = Collection.load(adi_dir)
    small = sample_passages(collection, SynthesisConfig(collection=str(adi_dir), passages=10))
    large = sample_passages(collection, SynthesisConfig(collection=str(adi_dir), passages=20))
    assert large[:10] == small
    bounded_sample = sample_passages(
        collection,
        SynthesisConfig(collection=str(adi_dir), passages=500, min_passage_chars=300),
    )
    assert all(len(collection.corpus[d].text) >= 300 for d in bounded_sample)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--backend", "qrels"], "backend: 'qrels' cannot write queries"),
        (["--queries_per_passage", "3"], "generator_temperature"),
        (["--filter_retriever", "bm26"], "filter_retriever"),
        (["--negative_retrievers", "splade"], "negative_retrievers"),
        (["--examples", "2", "--examples_file", "/no/such/file.txt"], "examples_file"),
    ],
)
def test_bad_settings_fail_before_any_work(
    adi_dir: Path, tmp_path: Path, flags, message, monkeypatch, capsys
):
    monkeypatch.setattr(ChatClient, "complete", pytest.fail)
    from core.cli import run_main

    with pytest.raises(SystemExit) as exit_info:
        run_main(main, ["--collection", str(adi_dir), "--out", str(tmp_path / "o"), *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_an_out_overlapping_an_input_either_way_is_refused(adi_dir: Path, tmp_path: Path):
    with pytest.raises(ValueError, match="is inside --collection"):
        Synthesizer(
            SynthesisConfig(collection=str(adi_dir), out=str(adi_dir / "synthetic")),
            SyntheticTeacherConfig(),
        )
    examples = tmp_path / "synthetic" / "examples.txt"  # an input inside the output folder
    examples.parent.mkdir()
    examples.write_text("what is an axon\n")
    with pytest.raises(ValueError, match="would replace --examples_file"):
        Synthesizer(
            SynthesisConfig(
                collection=str(adi_dir), out=str(examples.parent), examples_file=str(examples)
            ),
            SyntheticTeacherConfig(),
        )


def test_a_corpus_without_queries_gets_them(adi_dir: Path, tmp_path: Path, monkeypatch):
    corpus_only = tmp_path / "corpus-only"
    corpus_only.mkdir()
    (corpus_only / "corpus.jsonl").write_text((adi_dir / "corpus.jsonl").read_text())
    from data.candidates import CandidatesConfig, generate_candidates

    with pytest.raises(ValueError, match=r"no queries\.jsonl.*relevance-grader synthesize"):
        generate_candidates(CandidatesConfig(collection=str(corpus_only), retrievers=["bm25"]))
    with pytest.raises(ValueError, match=r"examples_file: .* has no queries"):
        synthesize(corpus_only, tmp_path / "with-examples", examples=2)
    monkeypatch.setattr(ChatClient, "complete", ScriptedWriter(adi_dir).complete)
    out = tmp_path / "synthetic"
    summary = synthesize(corpus_only, out)  # the default prompt needs no example
    assert summary["queries"] > 0
    report = generate_candidates(
        CandidatesConfig(
            collection=str(out),
            retrievers=["bm25"],
            out=str(tmp_path / "candidates"),
            index_dir=str(tmp_path / "indexes"),
        )
    )
    assert report["bm25"]["queries"] == summary["queries"]


def test_a_local_model_writes_the_queries(adi_dir: Path, tiny_model_dir: Path, tmp_path: Path):
    """The hf backend end to end with the tiny random model: its replies are noise, and noise
    becomes error records, never queries."""
    config = SynthesisConfig(
        collection=str(adi_dir),
        out=str(tmp_path / "out"),
        passages=6,
        max_query_tokens=8,
        negative_retrievers=["bm25"],
        labels="source",
        index_dir=str(tmp_path / "indexes"),
    )
    summary = Synthesizer(config, SyntheticTeacherConfig(model=str(tiny_model_dir))).run()
    assert summary["replies"] == 6 and summary["generator"]["output_tokens"] > 0
    generated = [json.loads(x) for x in (tmp_path / "out" / "generated.jsonl").open()]
    kept = {json.loads(x)["_id"] for x in (tmp_path / "out" / "queries.jsonl").open()}
    assert all("query" in g or "error" in g for g in generated)
    assert kept == {g["qid"] for g in generated if "error" not in g}


def marked_corpus(root: Path, passages: int) -> Path:
    """A corpus whose passages tell the fake endpoint what to answer (a query per passage)."""
    root.mkdir(parents=True)
    lines = [
        {
            "_id": f"p{i}",
            "title": "",
            "text": f"[[id=p{i} mode=reply=gravel_roads_number_{i} rel=1]] " + "word " * 30,
        }
        for i in range(passages)
    ]
    (root / "corpus.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return root


@pytest.mark.slow
def test_ctrl_c_keeps_every_reply_that_arrived_and_the_resumed_run_asks_only_the_rest(
    tmp_path: Path,
):
    """A paid generator interrupted mid-run: each reply was cached as it arrived (not per chunk),
    and the resumed run asks only the passages without one."""
    import os
    import signal
    import subprocess
    import time

    collection = marked_corpus(tmp_path / "corpus", 40)
    out = tmp_path / "synthetic"
    cache = out / "generation.cache.jsonl"
    with FakeOpenAI() as server:
        server.hold_after = 20  # 20 replies, then the client waits: interrupted while it waits
        command = [
            sys.executable,
            "-m",
            "data.synthesize",
            *cli_args(
                collection=collection,
                out=out,
                passages=40,
                backend="openai",
                model="fake-writer",
                base_url=server.base_url,
                concurrency=2,
                labels="source",
                filter_retriever="none",
                negatives=0,
            ),
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
        # Started from a background job (`pytest &`), this process ignores SIGINT and a process
        # it starts would inherit that and never see the Ctrl-C: it starts with the default.
        ignoring = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        finally:
            signal.signal(signal.SIGINT, ignoring)
        deadline = time.time() + 300
        while not (server.answered >= 20 and server.held) and time.time() < deadline:
            time.sleep(0.02)
        # The 20 replies are cached as they arrive: wait for them, not for a time.
        while time.time() < deadline and (
            not cache.exists() or len(cache.read_text().splitlines()) < 20
        ):
            time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=300)  # a crowded machine winds down slowly
        server.hold_after = None
        server.release.set()
        assert process.returncode == 130, stderr
        assert "finished work is kept" in stderr
        kept = {json.loads(line)["doc_id"] for line in cache.read_text().splitlines()}
        asked_before = dict(server.requests)
        assert len(kept) == 20 and len(asked_before) < 40
        resumed = subprocess.run(command, env=env, capture_output=True, text=True)
        assert resumed.returncode == 0, resumed.stderr
    assert all(server.requests[doc_id] == 1 for doc_id in kept)  # not asked again
    assert set(server.requests) == {f"p{i}" for i in range(40)}
    assert len(cache.read_text().splitlines()) == 40
