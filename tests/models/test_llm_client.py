"""The one LLM client: request bodies, re-asking an unusable reply, and the backend names."""

from __future__ import annotations

import dataclasses

import pytest

from models.llm_client import (
    CHAT_BACKENDS,
    ChatClient,
    ChatRequest,
    ChatSettings,
)
from support.fake_openai import FakeOpenAI

SCHEMA = {"type": "object", "properties": {"relevant": {"type": "boolean"}}}


def test_the_body_follows_the_reasoning_model_rules_and_asks_for_what_the_request_wants():
    plain = ChatClient(ChatSettings(model="gpt-4o-mini", base_url="http://127.0.0.1:1/v1"))
    request = ChatRequest([{"role": "user", "content": "q"}], 8, logprobs=True, json_schema=SCHEMA)
    body = plain.body(request)
    assert body["max_tokens"] == 8 and body["temperature"] == 0.0
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    reasoning = ChatClient(
        dataclasses.replace(plain.settings, model="o3-mini", reasoning_effort="low")
    )
    body = reasoning.body(request)
    assert body["max_completion_tokens"] == 8 + 4096 and body["reasoning_effort"] == "low"
    assert not {"temperature", "max_tokens", "logprobs"} & set(body)
    as_object = ChatClient(dataclasses.replace(plain.settings, response_format="json_object"))
    # llama.cpp's server and llama-cpp-python constrain json_object to its "schema".
    assert as_object.body(request)["response_format"] == {"type": "json_object", "schema": SCHEMA}
    wrapped = dataclasses.replace(request, structured_max_tokens=20)
    assert plain.body(wrapped)["max_tokens"] == 20  # room for {"answer": ...}
    unstructured = ChatClient(dataclasses.replace(plain.settings, response_format="none"))
    assert unstructured.body(wrapped)["max_tokens"] == 8
    assert "response_format" not in unstructured.body(wrapped)


def test_an_unusable_reply_is_asked_again_and_every_attempt_is_counted():
    with FakeOpenAI() as server:
        settings = ChatSettings(
            model="fake", base_url=server.base_url, max_retries=0, parse_retries=2
        )
        marker = "[[id=a mode=garbage-once rel=1]]"
        request = ChatRequest([{"role": "user", "content": f"Passage: {marker}"}], 8)
        seen: list[str] = []

        def usable(text: str, finished: bool) -> str | None:
            seen.append(text)
            return None if text.strip().lower().startswith(("yes", "no")) else "not yes/no"

        (reply,) = ChatClient(settings).complete([request], usable=usable)
        (once,) = ChatClient(settings).complete([request])  # no check: the reply as it comes
    assert reply.attempts == 2 and len(seen) == 2 and reply.text.lower().startswith("yes")
    assert reply.input_tokens > once.input_tokens > 0  # both attempts were billed
    assert once.attempts == 1


def test_a_failed_request_is_a_reply_with_an_error_and_no_text():
    with FakeOpenAI() as server:
        settings = ChatSettings(model="fake", base_url=server.base_url, max_retries=0)
        request = ChatRequest([{"role": "user", "content": "[[id=b mode=500-twice rel=1]]"}], 8)
        (reply,) = ChatClient(settings).complete([request])
    assert reply.error and "500" in reply.error and reply.texts == []


def test_backend_names_are_declared_once():
    from data.judges.backends import BACKENDS, JudgeConfig
    from eval.jobs.pipeline import PipelineConfig
    from measure.labelers.reader import ReaderConfig

    def choices(cls: type, name: str) -> list[str]:
        return cls.__dataclass_fields__[name].metadata["choices"]

    assert (*CHAT_BACKENDS, "qrels") == BACKENDS
    assert choices(JudgeConfig, "backend") == list(BACKENDS)
    assert choices(ReaderConfig, "backend") == list(CHAT_BACKENDS)
    assert choices(PipelineConfig, "teacher_backend") == list(BACKENDS)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (ChatSettings(model=""), "model: the openai backend needs a model"),
        (ChatSettings(backend="azure", model="m", base_url="x"), "azure_endpoint"),
        (ChatSettings(backend="claude", model="m"), "backend: expected one of"),
        (ChatSettings(model="m", base_url="x", response_format="xml"), "response_format"),
    ],
)
def test_bad_settings_fail_before_any_request(settings: ChatSettings, message: str):
    with pytest.raises(ValueError, match=message):
        ChatClient(settings)


def test_a_refusal_is_recorded_as_such_and_asked_once():
    """A model's refusal (message.refusal, content null) was read as an empty reply and asked
    three times, billed each time."""
    with FakeOpenAI() as server:
        settings = ChatSettings(model="fake", base_url=server.base_url, parse_retries=2)
        request = ChatRequest([{"role": "user", "content": "[[id=r mode=refusal rel=1]]"}], 8)
        (reply,) = ChatClient(settings).complete([request], usable=lambda text, done: "empty")
    assert server.requests["r"] == 1 and reply.attempts == 1
    assert reply.refusal == "I can't help with that."
    assert reply.error == "the model refused: I can't help with that."


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("error-body", "error in its body: The model is overloaded; try again later (503)"),
        ("no-choices", "a 200 response with no choices"),
    ],
)
def test_a_200_without_choices_says_what_the_provider_said_in_one_line(mode: str, said: str):
    with FakeOpenAI() as server:
        settings = ChatSettings(model="fake", base_url=server.base_url, max_retries=0)
        request = ChatRequest([{"role": "user", "content": f"[[id=e mode={mode} rel=1]]"}], 8)
        (reply,) = ChatClient(settings).complete([request])
    assert said in reply.error and "\n" not in reply.error, reply.error
    assert "malformed response body" not in reply.error


def test_the_provider_error_is_found_where_providers_put_it():
    from models.llm_client import provider_error

    assert provider_error({"error": {"message": "quota exceeded", "code": 429}}) == (
        "quota exceeded (429)"
    )
    assert provider_error({"error": "upstream timed out"}) == "upstream timed out"
    assert provider_error({"object": "error", "message": "bad model"}) == "bad model"
    choice_error = {"choices": [{"error": {"message": "cut mid-way"}, "finish_reason": "error"}]}
    assert provider_error(choice_error) == "cut mid-way"
    assert provider_error({"choices": [{"message": {"content": "yes"}}]}) is None
