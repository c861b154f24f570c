"""The REST API's error messages: each says what is wrong with the request."""

from __future__ import annotations

import json

import pytest

from tests.eval.test_search import DictLabeler, request_body


@pytest.fixture(scope="module")
def client():
    from fastapi.testclient import TestClient

    from eval.api import create_app

    with TestClient(create_app(labeler=DictLabeler({"d1": 3}), token="")) as test_client:
        yield test_client


def detail(response) -> list[dict]:
    assert response.status_code == 422, response.text
    return response.json()["detail"]


def test_a_list_valued_hit_field_is_named_as_such_not_as_an_extra_input(client):
    hit = {"id": "d1", "title": "Axon", "text": ["Axon terminals", "are"]}
    (error,) = detail(client.post("/v1/eval/search", json=request_body(hits=[hit])))
    assert error["loc"] == ["body", "hits", 0]
    assert error["msg"].startswith("'text': ") and "must be strings, got a list" in error["msg"]
    assert "Extra inputs" not in error["msg"]


def test_a_body_that_is_not_a_json_object_says_why(client):
    body = json.dumps(request_body())
    (error,) = detail(
        client.post("/v1/eval/search", content=body, headers={"content-type": "text/plain"})
    )
    assert "Content-Type: application/json" in error["msg"] and "text/plain" in error["msg"]
    assert "valid dictionary" not in error["msg"]
    (error,) = detail(client.post("/v1/eval/search", json=[request_body()]))
    assert "must be a JSON object" in error["msg"] and "not a list" in error["msg"]
