from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from core.io import read_records
from core.records import Judgment
from data.judges.backends import JudgeConfig, majority
from data.judges.prompts import (
    PROMPTS_DIR,
    ParseError,
    Verdict,
    available_prompts,
    load_prompt,
    parse_reply,
)
from data.label import LabelConfig, label
from support.fake_openai import FakeOpenAI
from tests.commands import run_command

REPO = Path(__file__).resolve().parents[2]


def write_pairs(path: Path, modes: list[str]) -> Path:
    lines = []
    for i, mode in enumerate(modes):
        rel = i % 2
        lines.append(
            {
                "qid": f"q{i % 3}",
                "query": f"query {i % 3}",
                "doc_id": f"d{i}",
                "text": f"[[id=d{i} mode={mode} rel={rel}]] body",
            }
        )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def openai_judge(server: FakeOpenAI, **overrides) -> JudgeConfig:
    settings = {
        "backend": "openai",
        "model": "fake-judge",
        "prompt": "binary-cot",
        "base_url": server.base_url,
        "concurrency": 4,
        "max_retries": 3,
        "request_timeout": 10.0,
        "parse_retries": 1,
        "price_input_per_mtok": 2.0,
        "price_output_per_mtok": 8.0,
    }
    settings.update(overrides)
    return JudgeConfig(**settings)


def test_every_prompt_loads_with_name_version_and_slots():
    assert set(available_prompts()) >= {"binary", "binary-cot", "checklist", "trec-graded"}
    for name in available_prompts():
        prompt = load_prompt(name)
        user = prompt.messages("QUERY-X", "DOC-Y")[1]["content"]
        assert "QUERY-X" in user and "DOC-Y" in user and prompt.version >= 1


def _instances(schema: dict) -> list[dict]:
    """Replies in a prompt's answer shape, as constrained decoding makes them (each enum value;
    a value of each type otherwise)."""
    examples = {"string": "checked", "boolean": True, "integer": 2}
    properties = schema["properties"]
    if "answer" in properties:
        return [{"answer": word} for word in properties["answer"]["enum"]]
    value = {
        key: spec["enum"][0] if "enum" in spec else examples[spec["type"]]
        for key, spec in properties.items()
    }
    return [value]


@pytest.mark.parametrize("name", ["binary", "binary-cot", "checklist", "trec-graded"])
def test_every_prompt_carries_its_answer_shape_and_a_reply_in_that_shape_is_an_answer(name: str):
    """A small local model (SmolLM2 on llama.cpp) answered trec-graded with a grade's definition
    in 19 of 20 replies: every prompt now carries its answer's schema, sent where the server
    constrains output, and a reply in that shape parses."""
    prompt = load_prompt(name)
    schema = prompt.json_schema
    assert schema and schema["type"] == "object" and schema["additionalProperties"] is False
    assert set(schema["required"]) == set(schema["properties"])  # OpenAI's strict mode
    for reply in _instances(schema):
        verdict = parse_reply(prompt, json.dumps(reply))
        if prompt.direct_answer:
            assert verdict == prompt.verdict_from_answer(prompt.answers[reply["answer"]])


def test_a_direct_prompt_file_gets_its_answer_shape_and_a_wrong_one_is_named(tmp_path: Path):
    from data.judges.prompts import answer_schema

    text = (PROMPTS_DIR / "binary.yaml").read_text().split("\njson_schema:")[0]
    (tmp_path / "mine.yaml").write_text(text)
    assert load_prompt(str(tmp_path / "mine.yaml")).json_schema == answer_schema(
        {"no": 0, "yes": 1}
    )
    wrong = text + "\njson_schema: {type: object, properties: {verdict: {type: string}}}\n"
    (tmp_path / "wrong.yaml").write_text(wrong)
    with pytest.raises(ValueError, match=r"wrong.yaml: json_schema: a direct prompt's answer"):
        load_prompt(str(tmp_path / "wrong.yaml"))
    reply_only = (PROMPTS_DIR / "checklist.yaml").read_text().split("\njson_schema:")[0]
    (tmp_path / "loose.yaml").write_text(reply_only)
    with pytest.raises(ValueError, match=r"loose.yaml: json_schema: required"):
        load_prompt(str(tmp_path / "loose.yaml"))


@pytest.mark.parametrize("name", ["binary", "trec-graded", "binary-cot", "checklist"])
@pytest.mark.parametrize("refused", [{}, {"json_schema": 500}], ids=["takes", "refuses"])
def test_each_prompt_asks_for_its_shape_and_falls_back_where_refused(
    tmp_path: Path, name: str, refused: dict
):
    """The request body carries the prompt's schema (json_schema; json_object with the schema
    where a server refuses json_schema, as llama-cpp-python's does), and the replies in that
    shape are labels, with P(relevant) read at the answer token of {"answer": ...}."""
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 4)
    with FakeOpenAI() as server:
        server.refused_formats = refused
        summary = label(
            LabelConfig(out=str(tmp_path / "j.jsonl"), pairs=str(pairs)),
            openai_judge(server, prompt=name),
        )
        bodies = [b for b in server.bodies if b["response_format"]["type"] not in refused]
    schema = load_prompt(name).json_schema
    asked = bodies[-1]["response_format"]
    sent = asked["json_schema"]["schema"] if "json_schema" in asked else asked["schema"]
    assert sent == schema and asked["type"] == ("json_object" if refused else "json_schema")
    assert summary["failed"] == 0 and server.refusals == len(refused)
    judged = list(read_records(tmp_path / "j.jsonl", Judgment))
    assert [j.label for j in judged] == [i % 2 for i in range(4)]
    if name == "binary":
        assert [round(j.p_relevant, 3) for j in judged] == [0.1, 0.8, 0.1, 0.8]


@pytest.mark.parametrize(
    ("prompt", "reply", "grade", "label"),
    [
        ("binary-cot", '{"analysis": "a", "relevant": true}', None, 1),
        ("binary", '{"answer": "yes"}', None, 1),
        ("trec-graded", '{"answer": "0"}', 0, 0),
        ("trec-graded", '{ "answer" : "3" }', 3, 1),
        ("binary-cot", 'Sure!\n```json\n{"analysis": "a", "relevant": "no"}\n```', None, 0),
        ("binary-cot", "analysis: ... relevant: yes", None, 1),
        (
            "checklist",
            '{"partial": true, "substantial": true, "precise": false, "grade": 2, "confidence": 4}',
            2,
            1,
        ),
        ("trec-graded", " 1.", 1, 0),
        ("trec-graded", "Score: 3", 3, 1),
        ("binary", "Yes.", None, 1),
        ("binary", "No, it is about something else.", None, 0),
        ("binary", "**Answer:** yes", None, 1),
        # The first word after list numbering, a bullet or markdown is the answer.
        ("binary", "1. Yes", None, 1),
        ("binary", "**No**", None, 0),
        ("binary", "- yes.", None, 1),
        ("binary", "1) No, it is about trains.", None, 0),
        ("binary", "> Yes", None, 1),
        ("binary", "* **Yes**", None, 1),
        ("trec-graded", "1. 3", 3, 1),
        ("trec-graded", "2. The passage answers part of it.", 2, 1),
    ],
)
def test_replies_parse(prompt: str, reply: str, grade: int | None, label: int):
    verdict = parse_reply(load_prompt(prompt), reply)
    assert (verdict.grade, verdict.label) == (grade, label)


@pytest.mark.parametrize(
    ("prompt", "reply"),
    [
        ("binary-cot", "cannot tell"),
        ("checklist", '{"grade": 7}'),
        ("binary", "maybe"),
        ("binary", "No idea, sorry."),
        ("binary", "I can't answer yes or no to that."),
        ("binary", "Yes and no."),
        ("binary", "1. Maybe"),
        ("binary", "- Yes and no"),
        ("trec-graded", "Somewhere between 1 and 2"),
        ("trec-graded", '{"answer": "4"}'),
        ("binary", '{"verdict": "yes"}'),
    ],
)
def test_unparseable_replies_raise(prompt: str, reply: str):
    with pytest.raises(ParseError):
        parse_reply(load_prompt(prompt), reply)


def test_majority_vote_sets_agreement_as_confidence():
    verdict = majority([Verdict(2, 1), Verdict(2, 1), Verdict(0, 0)])
    assert (verdict.grade, verdict.confidence) == (2, pytest.approx(2 / 3))


def test_openai_backend_retries_parses_records_errors_and_caches(tmp_path: Path):
    modes = ["ok", "ok", "garbage", "garbage-once", "429-once", "500-twice"]
    pairs = write_pairs(tmp_path / "pairs.jsonl", modes)
    out = tmp_path / "judgments.jsonl"
    with FakeOpenAI() as server:
        summary = label(LabelConfig(out=str(out), pairs=str(pairs)), openai_judge(server))
        judgments = {j.doc_id: j for j in read_records(out, Judgment)}
        assert [j.doc_id for j in read_records(out, Judgment)] == [
            f"d{i}" for i in range(6)
        ]  # input order
        assert judgments["d0"].label == 0 and judgments["d1"].label == 1
        assert judgments["d0"].rationale == "checked"
        assert (
            judgments["d0"].judge.prompt == "binary-cot"
            and judgments["d0"].judge.prompt_version == 1
        )
        # Unparseable twice (1 + parse_retries): an error, never a label.
        assert (
            judgments["d2"].error.startswith("unparseable after 2 attempt(s)")
            and judgments["d2"].label is None
        )
        assert server.requests["d2"] == 2
        # Re-asked once after garbage; 429 honoured then retried; 500 retried twice by the SDK.
        assert (judgments["d3"].label, server.requests["d3"]) == (1, 2)
        assert (judgments["d4"].label, server.requests["d4"]) == (0, 2)
        assert (judgments["d5"].label, server.requests["d5"]) == (1, 3)
        assert judgments["d3"].usage.input_tokens == 200  # both attempts are paid for
        assert summary["failed"] == 1 and summary["judged_now"] == 6
        assert summary["estimated_cost"] == pytest.approx(
            (summary["input_tokens"] * 2 + summary["output_tokens"] * 8) / 1e6
        )
        assert server.bodies[0]["response_format"]["type"] == "json_schema"

        # Second run: cached pairs send nothing; the error is retried by default.
        before = sum(server.requests.values())
        again = label(LabelConfig(out=str(out), pairs=str(pairs)), openai_judge(server))
        assert again["cached"] == 5 and again["judged_now"] == 1
        assert sum(server.requests.values()) == before + 2
        # With retry_errors off, nothing is sent at all.
        label(LabelConfig(out=str(out), pairs=str(pairs), retry_errors=False), openai_judge(server))
        assert sum(server.requests.values()) == before + 2
        # Another prompt is another cache key.
        other = label(
            LabelConfig(
                out=str(tmp_path / "b.jsonl"),
                pairs=str(pairs),
                cache=str(out.with_suffix(".cache.jsonl")),
            ),
            openai_judge(server, prompt="binary"),
        )
        assert other["cached"] == 0


@pytest.mark.parametrize(
    ("refused", "used"),
    [
        ({}, "json_schema"),
        ({"json_schema": 500}, "json_object"),
        ({"json_schema": 400, "json_object": 400}, None),
    ],
    ids=["takes-json_schema", "llama.cpp-refuses-json_schema", "refuses-both"],
)
def test_a_server_that_refuses_the_response_format_is_found_once_and_asked_the_next_way(
    tmp_path: Path, caplog, refused: dict, used: str | None
):
    """llama.cpp's server refuses json_schema (500: "Input should be 'text' or 'json_object'");
    every pair of a JSON prompt failed after three tries each. Now the first request finds the
    refusal (no SDK retries), and every pair is asked the accepted way and judged."""
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 12)
    out = tmp_path / "judgments.jsonl"
    with FakeOpenAI() as server:
        server.refused_formats = refused
        summary = label(LabelConfig(out=str(out), pairs=str(pairs)), openai_judge(server))
        formats = [(b.get("response_format") or {}).get("type") for b in server.bodies]
    assert summary["failed"] == 0 and summary["judged_now"] == 12
    # The summary says which format the server finally took (once only a log line did).
    written = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["response_format"] == written["response_format"] == (used or "none")
    assert server.refusals == len(refused)  # one refused request per refused format, no retries
    assert formats[: len(refused)] == list(refused)
    assert formats[len(refused) :] == [used] * 12
    assert sum(server.requests.values()) == 12 + len(refused)
    if refused:
        assert f"refused response_format json_schema ({refused['json_schema']}" in caplog.text
    judged = list(read_records(out, Judgment))
    assert [j.label for j in judged] == [i % 2 for i in range(12)]


def test_a_teacher_whose_replies_are_mostly_unusable_stops_the_stage_where_it_happens(
    tmp_path: Path,
):
    """145 of 149 replies unusable once passed as a success, and data.build failed a stage later:
    past --max_error_share of at least 20 replies the stage stops, naming the prompt, the server
    and a reply, with every finished judgment cached."""
    modes = ["ok", "ok"] + ["reply=I_think_it_is_relevant."] * 38
    pairs = write_pairs(tmp_path / "pairs.jsonl", modes)
    out = tmp_path / "judgments.jsonl"
    with FakeOpenAI() as server:
        judge = openai_judge(server, prompt="binary", parse_retries=0, concurrency=1)
        with pytest.raises(ValueError) as stopped:
            label(LabelConfig(out=str(out), pairs=str(pairs)), judge)
        message = str(stopped.value)
        assert "18 of 20 replies this run were unusable" in message
        assert f"prompt binary@1, backend openai at {server.base_url}" in message
        assert "I think it is relevant." in message and "--max_error_share" in message
        assert sum(server.requests.values()) == 20  # nothing more was asked
    assert not out.exists()
    assert len(out.with_suffix(".cache.jsonl").read_text().splitlines()) == 20
    # A teacher that fails a few pairs goes on; so does one told to (--max_error_share 1).
    mostly_fine = write_pairs(tmp_path / "fine.jsonl", ["ok"] * 14 + ["garbage"] * 6)
    with FakeOpenAI() as server:
        judge = openai_judge(server, prompt="binary", parse_retries=0)
        summary = label(LabelConfig(out=str(tmp_path / "f.jsonl"), pairs=str(mostly_fine)), judge)
        assert summary["failed"] == 6
        config = LabelConfig(out=str(out), pairs=str(pairs), max_error_share=1.0)
        assert label(config, judge)["failed"] == 38


def test_unfinished_replies_and_bad_bodies_never_become_labels_nor_stop_the_run(
    tmp_path: Path,
):
    modes = ["truncated-once", "not-json", "text-plain", "ok", "reply=No_idea,_sorry."]
    pairs = write_pairs(tmp_path / "pairs.jsonl", modes)
    out = tmp_path / "judgments.jsonl"
    with FakeOpenAI() as server:
        summary = label(LabelConfig(out=str(out), pairs=str(pairs)), openai_judge(server))
        judged = {j.doc_id: j for j in read_records(out, Judgment)}
        # The cut-off analysis said "relevant: yes"; it is re-asked and the finished reply counts.
        assert (judged["d0"].label, server.requests["d0"]) == (0, 2)
        for bad in ("d1", "d2"):  # each bad body fails its own pair, once, and nothing else
            assert judged[bad].label is None and "malformed" in judged[bad].error
            assert server.requests[bad] == 1
        assert judged["d3"].label == 1
        assert judged["d4"].label is None and judged["d4"].error.startswith("unparseable")
        assert summary["failed"] == 3 and summary["judged_now"] == 5
        direct = label(
            LabelConfig(out=str(tmp_path / "direct.jsonl"), pairs=str(pairs)),
            openai_judge(server, prompt="binary"),
        )
        judged = {j.doc_id: j for j in read_records(tmp_path / "direct.jsonl", Judgment)}
        assert judged["d4"].label is None and direct["failed"] == 3


def test_reasoning_models_get_their_own_request_and_others_give_p_relevant(tmp_path: Path):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 4)
    with FakeOpenAI() as server:
        # o3-mini rejects temperature / max_tokens / logprobs with a 400: none is sent.
        summary = label(
            LabelConfig(out=str(tmp_path / "o3.jsonl"), pairs=str(pairs)),
            openai_judge(server, model="o3-mini", prompt="binary", reasoning_effort="low"),
        )
        assert summary["failed"] == 0
        request = server.bodies[-1]
        assert "temperature" not in request and "max_tokens" not in request
        # The prompt's 4 tokens, 16 for the {"answer": ...} shape asked, room for reasoning.
        assert request["max_completion_tokens"] == 4 + 16 + 4096
        assert request["reasoning_effort"] == "low"
        # A chat model is asked for log-probabilities: judgments carry P(relevant).
        label(
            LabelConfig(out=str(tmp_path / "chat.jsonl"), pairs=str(pairs)),
            openai_judge(server, model="gpt-4o", prompt="binary"),
        )
        judged = list(read_records(tmp_path / "chat.jsonl", Judgment))
        assert server.bodies[-1]["logprobs"] is True
        assert [round(j.p_relevant, 3) for j in judged] == [0.1, 0.8, 0.1, 0.8]
        assert [j.label for j in judged] == [0, 1, 0, 1]


def test_answer_probability_renormalises_over_the_answers():
    from data.judges.backends import answer_probability

    binary, graded = load_prompt("binary"), load_prompt("trec-graded")
    logs = {"yes": math.log(0.3), " Yes": math.log(0.3), "no": math.log(0.2), "maybe": -0.5}
    assert answer_probability(binary, logs) == pytest.approx(0.75)
    assert answer_probability(binary, {"perhaps": -0.1}) is None
    grades = {"0": math.log(0.1), "1": math.log(0.2), "2": math.log(0.3), "3": math.log(0.2)}
    assert answer_probability(graded, grades) == pytest.approx(0.5 / 0.8)


def test_timeouts_become_error_records(tmp_path: Path):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["slow", "ok"])
    with FakeOpenAI() as server:
        summary = label(
            LabelConfig(out=str(tmp_path / "j.jsonl"), pairs=str(pairs)),
            openai_judge(server, request_timeout=0.3, max_retries=1),
        )
        judgments = list(read_records(tmp_path / "j.jsonl", Judgment))
    assert judgments[0].error.startswith("request failed") and judgments[1].ok
    assert server.requests["d0"] == 2 and summary["failed"] == 1


def test_self_consistency_samples_and_votes(tmp_path: Path):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok", "ok"])
    with FakeOpenAI() as server:
        label(
            LabelConfig(out=str(tmp_path / "j.jsonl"), pairs=str(pairs)),
            openai_judge(server, samples=3, temperature=0.7),
        )
    judgments = list(read_records(tmp_path / "j.jsonl", Judgment))
    assert server.requests["d0"] == 3 and judgments[0].confidence == 1.0


def test_qrels_backend_maps_grades_and_flags_unjudged(tmp_path: Path, adi_dir: Path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        json.dumps({"qid": "1", "query": "q", "doc_id": "17", "text": "t"})
        + "\n"
        + json.dumps({"qid": "1", "query": "q", "doc_id": "2", "text": "t"})
        + "\n"
    )
    judge = JudgeConfig(backend="qrels", qrels=str(adi_dir / "qrels.tsv"), grade_map='{"1": 3}')
    label(LabelConfig(out=str(tmp_path / "j.jsonl"), pairs=str(pairs)), judge)
    first, second = read_records(tmp_path / "j.jsonl", Judgment)
    assert (first.grade, first.label) == (3, 1)
    assert second.error == "no human judgment for this pair"
    judge.unjudged = "zero"
    label(LabelConfig(out=str(tmp_path / "k.jsonl"), pairs=str(pairs)), judge)
    assert [j.label for j in read_records(tmp_path / "k.jsonl", Judgment)] == [1, 0]
    # Without the map, a binary 1 would be grade 1 ("not relevant"): refused before any work.
    judge.grade_map = None
    with pytest.raises(ValueError, match="binary"):
        label(LabelConfig(out=str(tmp_path / "m.jsonl"), pairs=str(pairs)), judge)
    assert not (tmp_path / "m.jsonl").exists()


def test_hf_backend_scores_direct_prompts_and_generates_for_json_prompts(
    tmp_path: Path, tiny_model_dir: Path
):
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 5)
    summary = label(
        LabelConfig(out=str(tmp_path / "a.jsonl"), pairs=str(pairs)),
        JudgeConfig(backend="hf", model=str(tiny_model_dir), prompt="trec-graded", batch_size=2),
    )
    judgments = list(read_records(tmp_path / "a.jsonl", Judgment))
    assert summary["failed"] == 0
    for judgment in judgments:
        assert judgment.grade in {0, 1, 2, 3} and 0 <= judgment.p_relevant <= 1
        assert judgment.usage.input_tokens > 20
    # A random model's generation is gibberish: every pair must be an error record, not a label.
    label(
        LabelConfig(out=str(tmp_path / "b.jsonl"), pairs=str(pairs)),
        JudgeConfig(
            backend="hf", model=str(tiny_model_dir), prompt="binary-cot", max_output_tokens=8
        ),
    )
    generated = list(read_records(tmp_path / "b.jsonl", Judgment))
    assert all(j.error and j.label is None for j in generated)


def test_vllm_backend_without_vllm_says_how_to_get_it(tmp_path: Path):
    try:
        import vllm  # noqa: F401

        pytest.skip("vLLM is installed")
    except ImportError:
        pass
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"])
    with pytest.raises(ValueError, match="vLLM is not installed"):
        label(
            LabelConfig(out=str(tmp_path / "j.jsonl"), pairs=str(pairs)),
            JudgeConfig(backend="vllm", model="x"),
        )


def test_vllm_backend_passes_its_engine_options_and_reads_logprobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A stand-in ``vllm`` module: what the backend asks of vLLM, and what it makes of the reply."""
    import types
    from types import SimpleNamespace as NS

    engines: list[dict] = []

    class LLM:
        def __init__(self, **kwargs):
            engines.append(kwargs)

        def chat(self, conversations, params, use_tqdm=False):
            assert params.logprobs == 5
            outputs = []
            for messages in conversations:
                relevant = "rel=1" in messages[-1]["content"]
                p_yes = 0.8 if relevant else 0.1
                step = {
                    11: NS(logprob=math.log(p_yes), decoded_token="yes"),
                    12: NS(logprob=math.log(1 - p_yes), decoded_token="no"),
                }
                text = "yes" if relevant else "no"
                completion = NS(text=text, token_ids=[11], finish_reason="stop", logprobs=[step])
                outputs.append(NS(prompt_token_ids=[1, 2, 3], outputs=[completion]))
            return outputs

    fake = types.ModuleType("vllm")
    fake.LLM = LLM
    fake.SamplingParams = lambda **kwargs: NS(**kwargs)
    monkeypatch.setitem(sys.modules, "vllm", fake)
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 2)
    judge = JudgeConfig(
        backend="vllm",
        model="meta-llama/Llama-3.1-70B-Instruct",
        tensor_parallel_size=4,
        max_model_len=8192,
        gpu_memory_utilization=0.85,
    )
    label(LabelConfig(out=str(tmp_path / "j.jsonl"), pairs=str(pairs)), judge)
    assert engines[0]["tensor_parallel_size"] == 4 and engines[0]["max_model_len"] == 8192
    assert engines[0]["gpu_memory_utilization"] == 0.85
    judged = list(read_records(tmp_path / "j.jsonl", Judgment))
    assert [round(j.p_relevant, 3) for j in judged] == [0.1, 0.8]


def test_cli_reports_bad_pairs_with_file_and_line(tmp_path: Path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        '{"qid": "1", "query": "q", "doc_id": "d", "text": "t"}\n{"qid": "1", "doc_id": "e", "text": "t"}\n'
    )
    result = run_command(["label", "--pairs", str(pairs), "--backend", "qrels", "--qrels", "x.tsv"])
    assert result.returncode == 2
    assert f"{pairs}:2: query: Field required" in result.stderr


def test_labelling_a_judgments_file_never_passes_the_old_verdict_on(tmp_path: Path):
    """Pairs read from a judgments file (e.g. a test split) carry a teacher's grade; the new judge's
    verdict must replace it, not merge with it."""
    pairs = tmp_path / "split.jsonl"
    rows = [
        {
            "qid": "q",
            "query": "query",
            "doc_id": "d0",
            "text": "[[id=d0 mode=ok rel=0]]",
            "grade": 3,
            "label": 1,
            "judge": {"model": "teacher", "prompt": "qrels"},
            "usage": {"input_tokens": 5},
        },
    ]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with FakeOpenAI() as server:
        label(
            LabelConfig(out=str(tmp_path / "j.jsonl"), pairs=str(pairs)),
            openai_judge(server, prompt="binary"),
        )
    (judgment,) = read_records(tmp_path / "j.jsonl", Judgment)
    assert (judgment.label, judgment.grade) == (0, None)
    assert judgment.judge.model == "fake-judge" and judgment.usage.input_tokens == 100


@pytest.mark.slow
def test_hf_backend_with_the_embedded_smollm2_judge(tmp_path: Path, trec_dl_dir: Path):
    from data.beir import Collection

    collection = Collection.load(trec_dl_dir)
    qid = sorted(collection.qrels)[0]
    docs = sorted(collection.qrels[qid])[:4]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        "".join(
            json.dumps(
                {
                    "qid": qid,
                    "query": collection.queries[qid],
                    "doc_id": d,
                    "text": collection.corpus[d].text,
                }
            )
            + "\n"
            for d in docs
        )
    )
    summary = label(
        LabelConfig(out=str(tmp_path / "j.jsonl"), pairs=str(pairs)),
        JudgeConfig(backend="hf", model="smollm2-135m", prompt="binary", batch_size=4),
    )
    judgments = list(read_records(tmp_path / "j.jsonl", Judgment))
    assert summary["failed"] == 0 and len(judgments) == 4
    assert all(j.label in (0, 1) and 0 <= j.p_relevant <= 1 for j in judgments)
    assert judgments[0].judge.model == "smollm2-135m" and judgments[0].judge.prompt == "binary"


def test_the_judge_labeler_answers_every_query_not_only_the_first(tmp_path: Path):
    """The OpenAI backend runs once per query in eval.search/agreement/the API: each run needs a
    client of its own (the previous run's event loop is gone)."""
    import dataclasses

    import yaml

    from measure.labelers import Hit, JudgeLabeler

    with FakeOpenAI() as server:
        config = tmp_path / "judge.yaml"
        config.write_text(yaml.safe_dump(dataclasses.asdict(openai_judge(server))))
        labeler = JudgeLabeler(str(config))
        for q in range(3):
            hits = [
                Hit(doc_id=f"q{q}d{d}", text=f"text [[id=q{q}d{d} mode=ok rel={d % 2}]]")
                for d in range(2)
            ]
            labels = labeler.label(f"q{q}", f"query {q}", hits)
            assert [label.relevant for label in labels] == [False, True]
        assert sum(server.requests.values()) == 6


def test_out_equal_to_the_cache_or_the_input_is_refused_before_any_work(tmp_path: Path):
    """The judgments are written over --out at the end: over the paid cache, a second run would
    pay for everything again."""
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok"] * 3)
    cache = tmp_path / "paid.cache.jsonl"
    cache.write_text('{"partial": true}\n')
    before = (cache.read_bytes(), pairs.read_bytes())
    judge = JudgeConfig(backend="openai", model="m", base_url="http://127.0.0.1:9/v1")
    for out, flag in ((cache, "cache"), (pairs, "pairs")):
        config = LabelConfig(pairs=str(pairs), out=str(out), cache=str(cache))
        with pytest.raises(ValueError, match=f"out: .* would replace --{flag}"):
            label(config, judge)
    assert (cache.read_bytes(), pairs.read_bytes()) == before


def test_the_judged_pool_is_ordered_by_query_then_document_and_carries_no_rank(tmp_path: Path):
    from data.label import LabelConfig, load_pairs

    collection = tmp_path / "c"
    collection.mkdir()
    (collection / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "text": f"text {d}"}) + "\n" for d in ("b", "a", "c"))
    )
    (collection / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": f"query {q}"}) + "\n" for q in ("2", "1"))
    )
    (collection / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n2\tc\t0\n1\tb\t1\n2\ta\t2\n1\ta\t0\n"
    )
    pairs = load_pairs(LabelConfig(collection=str(collection), pool_from_qrels=True, out="x"))
    assert [(p.qid, p.doc_id) for p in pairs] == [("1", "a"), ("1", "b"), ("2", "a"), ("2", "c")]
    assert {p.rank for p in pairs} == {None} and {p.retriever_score for p in pairs} == {None}


def test_each_prompt_gives_the_judgment_fields_the_design_says(tmp_path: Path):
    """The design's record listed grade and rationale for every judgment; binary prompts give
    neither. The record description now says which judge gives what, and the records agree."""
    pairs = write_pairs(tmp_path / "pairs.jsonl", ["ok", "ok"])
    given = {}
    with FakeOpenAI() as server:
        for prompt in ("binary", "binary-cot"):
            out = tmp_path / f"{prompt}.jsonl"
            label(LabelConfig(out=str(out), pairs=str(pairs)), openai_judge(server, prompt=prompt))
            given[prompt] = [json.loads(line) for line in out.read_text().splitlines()]
    assert all("grade" not in j and "rationale" not in j and "label" in j for j in given["binary"])
    assert all("grade" not in j and j["rationale"] == "checked" for j in given["binary-cot"])
    design = " ".join((REPO / "docs" / "design.md").read_text().split())
    assert "the yes/no prompts (`binary`, `binary-cot`) give a `label` and no `grade`" in design
    assert "`binary` and `trec-graded` answer in one word, so no `rationale`" in design
