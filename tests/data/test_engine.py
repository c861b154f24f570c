"""data.engine against real HTTP servers on 127.0.0.1 answering in Pinecone's, OpenSearch's and
Vespa's shapes from a tiny corpus: the run's ids, order and scores, headers from the
environment, retries on timeouts, a 5xx mid-run and the re-run that asks only the rest, an empty
hit list, a hit without text, and the one-line refusals of a bad engine YAML."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from core.cli import run_main
from core.errors import InputError
from data.beir import ranked, read_corpus, read_trec_run
from data.engine.client import EngineError
from data.engine.command import main, partial_path
from data.engine.config import PRESET_FILES, PRESETS_DIR, load_engine
from tests.commands import run_command

CORPUS = {
    "d1": "apples are red fruit",
    "d2": "bananas are yellow fruit",
    "d3": "red cars drive fast",
    "d4": "a yellow submarine song",
    "d5": "fruit salad with apples and bananas",
}
QUERIES = {
    "q1": "red apples",
    "q2": "yellow fruit",
    "q3": "fast cars",
    "q4": "fruit salad",
    "q5": "a song",
}


def expected_ranking(query: str, k: int) -> dict[str, float]:
    """The servers' retrieval: shared words, shorter documents first among equals."""
    words = set(query.lower().split())
    scores = {
        doc_id: len(words & set(text.split())) + 1 / (1 + len(text))
        for doc_id, text in CORPUS.items()
        if words & set(text.split())
    }
    return dict(sorted(scores.items(), key=lambda item: -item[1])[:k])


def shaped(shape: str, hits: list[dict[str, Any]]) -> dict[str, Any]:
    """A response in one engine's shape; each hit is {id, score, text (may be absent)}."""
    if shape == "pinecone":
        rows = [
            {"_id": h["id"], "_score": h["score"], "fields": _text(h, "chunk_text")} for h in hits
        ]
        return {"result": {"hits": rows}, "usage": {"read_units": 1}}
    if shape == "opensearch":
        rows = [
            {"_index": "docs", "_id": h["id"], "_score": h["score"], "_source": _text(h, "text")}
            for h in hits
        ]
        return {
            "took": 1,
            "timed_out": False,
            "hits": {"total": {"value": len(rows)}, "hits": rows},
        }
    rows = [
        {"id": f"id:docs:doc::{h['id']}", "relevance": h["score"], "fields": _text(h, "text")}
        for h in hits
    ]
    return {"root": {"id": "toplevel", "relevance": 1.0, "children": rows}}


def _text(hit: dict[str, Any], name: str) -> dict[str, Any]:
    return {name: hit["text"]} if "text" in hit else {}


def asked(shape: str, body: dict[str, Any] | None, params: dict[str, list[str]]) -> tuple[str, int]:
    """(query, k) of a request in one engine's shape (Vespa also by GET parameters)."""
    if body is None:
        return params["query"][0], int(params["hits"][0])
    if shape == "pinecone":
        return body["query"]["inputs"]["text"], body["query"]["top_k"]
    if shape == "opensearch":
        return body["query"]["match"]["text"], body["size"]
    return body["query"], body["hits"]


class FakeEngine:
    """What a server answers and what it was asked: ``fail`` {query: status} fails a query
    every time, ``slow`` {query: requests} sleeps past the client's timeout that many times,
    ``empty`` answers no hits, ``no_text`` leaves those documents' texts out."""

    def __init__(self, shape: str) -> None:
        self.shape = shape
        self.log: list[dict[str, Any]] = []
        self.fail: dict[str, int] = {}
        self.slow: Counter[str] = Counter()
        self.sleep = 0.6
        self.empty: set[str] = set()
        self.no_text: set[str] = set()
        self.throttle: Counter[str] = Counter()  # 429 with Retry-After, that many times
        self.retry_after = "0"  # the 429's Retry-After header
        self.redirect: str | None = None  # a 307 to there, its body the hits
        self.lock = threading.Lock()

    def answer(self, body: Any, params: dict[str, list[str]], headers: dict) -> tuple[int, Any]:
        query, k = asked(self.shape, body, params)
        with self.lock:
            slow = self.slow[query] > 0
            self.slow[query] -= 1 if slow else 0
            status = 429 if self.throttle[query] > 0 else self.fail.get(query, 200)
            status = 307 if self.redirect and status == 200 else status
            self.throttle[query] -= 1
            self.log.append({"query": query, "k": k, "status": status, "headers": headers})
        if slow:
            time.sleep(self.sleep)
        if status not in (200, 307):
            return status, {"error": "unavailable"}
        hits = [
            {"id": d, "score": s, **({} if d in self.no_text else {"text": CORPUS[d]})}
            for d, s in expected_ranking(query, k).items()
        ]
        return status, shaped(self.shape, [] if query in self.empty else hits)

    def answered(self) -> list[str]:
        return [entry["query"] for entry in self.log if entry["status"] == 200]


def handler_for(engine: FakeEngine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self, body: Any) -> None:
            url = urlparse(self.path)
            status, answer = engine.answer(body, parse_qs(url.query), dict(self.headers))
            data = json.dumps(answer).encode()
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", engine.retry_after)
            if status == 307:
                self.send_header("Location", engine.redirect)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._reply(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            self._reply(json.loads(self.rfile.read(length)))

        def log_message(self, *args: Any) -> None:  # quiet
            pass

    return Handler


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out closed the socket a sleeping handler writes to


@pytest.fixture
def serve():
    servers: list[QuietServer] = []

    def start(shape: str) -> tuple[FakeEngine, str]:
        engine = FakeEngine(shape)
        server = QuietServer(("127.0.0.1", 0), handler_for(engine))
        # A short poll: shutdown() waits for it (0.5 s a test by default).
        threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
        servers.append(server)
        return engine, f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def queries(tmp_path: Path) -> Path:
    path = tmp_path / "queries.jsonl"
    path.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    return path


def engine_yaml(tmp_path: Path, **keys: Any) -> Path:
    path = tmp_path / "engine.yaml"
    path.write_text(yaml.safe_dump(keys))
    return path


def run(engine: Path, queries: Path, out: Path, *more: str) -> None:
    main(["--engine", str(engine), "--queries", str(queries), "--out", str(out), *more])


@pytest.mark.parametrize("name", sorted(p.name for p in PRESETS_DIR.glob("*.yaml")))
def test_every_preset_loads_and_fills_a_short_yaml(name: str, tmp_path: Path):
    preset = load_engine(PRESETS_DIR / name)
    assert preset.hits and preset.id and preset.score and preset.text
    for word in [w for w, file in PRESET_FILES.items() if file == name]:
        short = load_engine(engine_yaml(tmp_path, preset=word, url="http://x/search", retries=1))
        assert (short.hits, short.id, short.body) == (preset.hits, preset.id, preset.body)
        assert (short.url, short.retries) == ("http://x/search", 1)


@pytest.mark.parametrize("shape", ["pinecone", "opensearch", "vespa"])
def test_a_run_from_each_shape_holds_the_engines_ids_order_scores_and_texts(
    shape, serve, queries, tmp_path, monkeypatch
):
    server, url = serve(shape)
    monkeypatch.setenv("TEST_API_KEY", "s3cret")
    monkeypatch.setenv("OPENSEARCH_URL", url)
    monkeypatch.setenv("OPENSEARCH_INDEX", "docs")
    if shape == "opensearch":  # the preset file itself, its url from the environment
        engine = PRESETS_DIR / "opensearch.yaml"
    else:
        path = "/records/namespaces/ns/search" if shape == "pinecone" else "/search/"
        headers = {"Api-Key": "${TEST_API_KEY}", "X-Pinecone-API-Version": "2025-04"}
        engine = engine_yaml(tmp_path, preset=shape, url=url + path, headers=headers)
    out = tmp_path / "out" / f"{shape}.trec"
    run(engine, queries, out, "--k", "2", "--texts")
    written = read_trec_run(out)
    for qid, query in QUERIES.items():
        expected = expected_ranking(query, 2)
        assert written[qid] == pytest.approx(expected, abs=1e-6)
        assert [doc for doc, _ in ranked(written[qid])] == list(expected)
    assert {line.split()[5] for line in out.read_text().splitlines()} == {shape}
    corpus = read_corpus(out.with_name(f"{shape}.corpus.jsonl"))
    assert {d: doc.text for d, doc in corpus.items()} == {
        d: CORPUS[d] for q in QUERIES.values() for d in expected_ranking(q, 2)
    }
    assert {entry["k"] for entry in server.log} == {2}
    assert not partial_path(out).exists() and sorted(server.answered()) == sorted(QUERIES.values())


def test_headers_come_from_the_environment_and_a_missing_one_is_named(
    serve, queries, tmp_path, monkeypatch
):
    server, url = serve("pinecone")
    engine = engine_yaml(
        tmp_path, preset="pinecone", url=url + "/s", headers={"Api-Key": "${TEST_API_KEY}"}
    )
    monkeypatch.setenv("TEST_API_KEY", "s3cret-value")
    run(engine, queries, tmp_path / "a.trec")
    assert {entry["headers"]["Api-Key"] for entry in server.log} == {"s3cret-value"}
    monkeypatch.delenv("TEST_API_KEY")
    with pytest.raises(
        InputError,
        match=r"headers\.Api-Key names environment variable TEST_API_KEY, which is not set",
    ):
        run(engine, queries, tmp_path / "b.trec")
    assert len(server.log) == len(QUERIES)  # nothing asked without the key


def test_a_get_url_takes_the_query_encoded_and_ranks_by_order_without_a_score(serve, tmp_path):
    server, url = serve("vespa")
    odd = {"q1": "red & apples?", "q2": "fruit salad 100%"}
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in odd.items()))
    engine = engine_yaml(
        tmp_path, method="GET", url=url + "/search/?query={query}&hits={k}",
        hits="root.children", id="fields.missing", score=None,
    )  # fmt: skip
    with pytest.raises(
        InputError, match=r"path 'fields\.missing' matches no id in hit 1 of query q1"
    ):
        run(engine, queries, tmp_path / "r.trec")
    engine = engine_yaml(
        tmp_path, method="GET", url=url + "/search/?query={query}&hits={k}",
        hits="root.children", id="id", id_after="::",
    )  # fmt: skip
    run(engine, queries, tmp_path / "r.trec", "--k", "3", "--run_name", "vespa-get")
    assert [entry["query"] for entry in server.log[-2:]] == list(odd.values())
    written = read_trec_run(tmp_path / "r.trec")
    for qid, query in odd.items():
        engine_order = list(expected_ranking(query, 3))
        assert engine_order  # the query found something
        n = len(engine_order)
        assert written[qid] == {doc: float(n - i) for i, doc in enumerate(engine_order)}


def test_timeouts_are_retried_and_one_that_outlives_the_retries_names_the_url(
    serve, queries, tmp_path, monkeypatch
):
    server, url = serve("opensearch")
    server.sleep = 0.5
    monkeypatch.setenv("TEST_API_KEY", "s3cret")
    keys = dict(preset="opensearch", url=url + "/docs/_search?key=${TEST_API_KEY}")
    engine = engine_yaml(tmp_path, **keys, timeout=0.2, retries=2, retry_wait=0)
    server.slow["yellow fruit"] = 2  # q2: two timeouts, then an answer
    run(engine, queries, tmp_path / "a.trec")
    assert Counter(entry["query"] for entry in server.log)["yellow fruit"] == 3
    assert set(read_trec_run(tmp_path / "a.trec")) == set(QUERIES)

    server.slow["fast cars"] = 10
    engine = engine_yaml(tmp_path, **keys, timeout=0.2, retries=1, retry_wait=0)
    with pytest.raises(EngineError) as caught:
        run(engine, queries, tmp_path / "b.trec")
    message = str(caught.value)
    assert message == (
        f"query q3: no answer within 0.2 s (timeout) from {url}/docs/_search after 1 retries"
    )
    assert "s3cret" not in message


def test_a_5xx_mid_run_stops_keeps_the_answers_and_the_rerun_asks_only_the_rest(
    serve, queries, tmp_path
):
    server, url = serve("pinecone")
    engine = engine_yaml(
        tmp_path, preset="pinecone", url=url + "/s", headers={}, retries=2, retry_wait=0
    )
    out = tmp_path / "run.trec"
    server.fail["fast cars"] = 503  # q3, every time
    with pytest.raises(EngineError, match=r"^query q3: HTTP 503 .* after 2 retries$"):
        run(engine, queries, out)
    assert not out.exists()
    kept = [json.loads(line)["qid"] for line in partial_path(out).read_text().splitlines()]
    assert kept == ["q1", "q2"]
    assert [e["query"] for e in server.log].count("fast cars") == 3  # one try and two retries
    first_run = len(server.log)

    server.fail.clear()
    run(engine, queries, out)
    assert [e["query"] for e in server.log[first_run:]] == ["fast cars", "fruit salad", "a song"]
    assert sorted(Counter(server.answered()).values()) == [1] * len(QUERIES)  # none asked twice
    assert set(read_trec_run(out)) == set(QUERIES) and not partial_path(out).exists()


def test_a_429_is_retried_after_its_wait_and_a_closed_port_is_named(serve, queries, tmp_path):
    server, url = serve("vespa")
    server.throttle["fruit salad"] = 2
    engine = engine_yaml(tmp_path, preset="vespa", url=url + "/search/", retry_wait=5)
    started = time.perf_counter()
    run(engine, queries, tmp_path / "r.trec")
    assert time.perf_counter() - started < 5  # Retry-After: 0, not the configured 5 s
    assert [e["status"] for e in server.log if e["query"] == "fruit salad"] == [429, 429, 200]
    assert set(read_trec_run(tmp_path / "r.trec")) == set(QUERIES)

    closed = url.rsplit(":", 1)[0] + ":9"  # the discard port: nothing listens there
    engine = engine_yaml(tmp_path, preset="vespa", url=closed + "/search/", retries=1, retry_wait=0)
    with pytest.raises(EngineError, match=r"^query q1: cannot connect \(ConnectError\) from "):
        run(engine, queries, tmp_path / "c.trec")


@pytest.mark.parametrize("retry_after", ["-1", "nan", "Wed, 21 Oct 2015 07:28:00 GMT", "soon"])
def test_a_429_whose_retry_after_is_negative_nan_past_or_garbage_is_retried(
    serve, queries, tmp_path, retry_after
):
    """`Retry-After: -1` or `nan` crashed at time.sleep (ValueError, a traceback)."""
    server, url = serve("vespa")
    server.throttle["fruit salad"] = 1
    server.retry_after = retry_after
    engine = engine_yaml(tmp_path, preset="vespa", url=url + "/search/", retry_wait=0)
    run(engine, queries, tmp_path / "r.trec")
    assert [e["status"] for e in server.log if e["query"] == "fruit salad"] == [429, 200]
    assert set(read_trec_run(tmp_path / "r.trec")) == set(QUERIES)


def test_retry_after_is_whole_seconds_or_an_http_date_within_the_cap():
    from datetime import datetime, timezone

    from data.engine.client import RETRY_WAIT_CAP, retry_after

    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert retry_after("3", now) == 3 and retry_after(" 0 ", now) == 0
    assert retry_after("86400", now) == RETRY_WAIT_CAP  # never a day's sleep
    assert retry_after("Thu, 01 Jan 2026 12:00:07 GMT", now) == 7
    assert retry_after("Thursday, 01-Jan-26 12:00:07 GMT", now) == 7  # RFC 850, obsolete
    assert retry_after("Wed, 31 Dec 2025 12:00:00 GMT", now) == 0  # past: at once
    for bad in (None, "", "-1", "nan", "inf", "1e3", "1.5", "soon", "Thu, 99 Jan 2026"):
        assert retry_after(bad, now) is None, bad  # the backoff decides


def test_a_redirect_is_an_error_naming_where_it_points_and_is_never_followed(
    serve, queries, tmp_path, monkeypatch
):
    """A 307 whose body held hits was written as the run; following it would send the key."""
    server, url = serve("opensearch")
    elsewhere, other_url = serve("opensearch")
    server.redirect = other_url + "/docs/_search?token=abc"
    monkeypatch.setenv("TEST_API_KEY", "s3cret")
    engine = engine_yaml(
        tmp_path, preset="opensearch", url=url + "/docs/_search",
        headers={"Authorization": "ApiKey ${TEST_API_KEY}"}, retry_wait=0,
    )  # fmt: skip
    out = tmp_path / "r.trec"
    with pytest.raises(EngineError) as caught:
        run(engine, queries, out)
    assert str(caught.value) == (
        f"query q1: HTTP 307 from {url}/docs/_search: it redirects to {other_url}/docs/_search; "
        f"put the address it should ask in {engine}'s url (redirects are not followed: the "
        "request's headers may hold a key)"
    )
    assert not out.exists() and len(server.log) == 1 and elsewhere.log == []


def test_texts_never_replace_an_input_or_a_file_this_command_did_not_write(
    serve, queries, tmp_path
):
    """`run --texts` wrote OUT-STEM.corpus.jsonl over whatever was there, --queries included."""
    server, url = serve("opensearch")
    engine = engine_yaml(tmp_path, preset="opensearch", url=url + "/docs/_search")
    named_like_the_corpus = tmp_path / "q.corpus.jsonl"
    named_like_the_corpus.write_text(queries.read_text())
    with pytest.raises(InputError) as caught:
        run(engine, named_like_the_corpus, tmp_path / "q.trec", "--texts")
    assert str(caught.value) == (
        f"--texts: {tmp_path}/q.corpus.jsonl would replace --queries {named_like_the_corpus}; "
        "write somewhere else"
    )
    assert named_like_the_corpus.read_text() == queries.read_text()

    notes = tmp_path / "r.corpus.jsonl"
    notes.write_text('{"_id": "d1", "title": "Apples", "text": "my own corpus"}\n')
    with pytest.raises(InputError, match=r"r\.corpus\.jsonl exists and is not a corpus this"):
        run(engine, queries, tmp_path / "r.trec", "--texts")
    assert "my own corpus" in notes.read_text() and server.log == []

    notes.unlink()
    run(engine, queries, tmp_path / "r.trec", "--texts")
    run(engine, queries, tmp_path / "r.trec", "--texts")  # the corpus it wrote is replaced
    assert "d1" in read_corpus(notes) and len(server.log) == 2 * len(QUERIES)


@pytest.mark.parametrize("method", ["POST", "GET"])
def test_a_query_is_sent_as_written_never_read_as_a_template(serve, tmp_path, method):
    """A query holding `{k}` reached the engine with the number put in."""
    server, url = serve("vespa")
    odd = {"q1": "fruit {k} {query} ${HOME} salad"}
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in odd.items()))
    if method == "GET":
        engine = engine_yaml(
            tmp_path, method="GET", url=url + "/search/?query={query}&hits={k}",
            hits="root.children", id="id", id_after="::",
        )  # fmt: skip
    else:
        engine = engine_yaml(tmp_path, preset="vespa", url=url + "/search/")
    run(engine, queries, tmp_path / "r.trec", "--k", "3")
    assert [(entry["query"], entry["k"]) for entry in server.log] == [(odd["q1"], 3)]


def test_a_4xx_is_not_retried(serve, queries, tmp_path):
    server, url = serve("opensearch")
    engine = engine_yaml(tmp_path, preset="opensearch", url=url + "/docs/_search", retry_wait=0)
    server.fail["red apples"] = 401
    with pytest.raises(
        EngineError, match=r"^query q1: HTTP 401 \('\{\"error\": \"unavailable\"\}'\) from "
    ):
        run(engine, queries, tmp_path / "r.trec")
    assert len(server.log) == 1


def test_an_empty_hit_list_and_a_hit_without_text_are_named(serve, queries, tmp_path, caplog):
    server, url = serve("opensearch")
    engine = engine_yaml(tmp_path, preset="opensearch", url=url + "/docs/_search")
    server.empty = {"a song"}
    server.no_text = {"d5"}
    out = tmp_path / "r.trec"
    with caplog.at_level(logging.WARNING, logger="data.engine"):
        run(engine, queries, out, "--texts")
    assert "1 of 5 queries got no hits (first: q5)" in caplog.text
    assert "left out of its means rather than counted as 0" in caplog.text
    without = sum("d5" in expected_ranking(q, 10) for q in QUERIES.values())
    assert f"{without} hits have no text at path '_source.text' (first: d5 of query" in caplog.text
    assert "q5" not in read_trec_run(out) and "d5" in read_trec_run(out)["q4"]
    assert "d5" not in read_corpus(out.with_name("r.corpus.jsonl"))


def test_a_path_that_matches_nothing_is_one_line_and_exit_2(serve, queries, tmp_path, capsys):
    server, url = serve("pinecone")
    engine = engine_yaml(
        tmp_path, preset="pinecone", url=url + "/s", headers={}, hits="result.hitz"
    )
    args = ["--engine", str(engine), "--queries", str(queries), "--out", str(tmp_path / "r.trec")]
    with pytest.raises(SystemExit) as caught:
        run_main(main, args)
    assert caught.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error == (
        f"error: {engine}: path 'result.hitz' matches nothing in the response to query q1 "
        "(top-level keys: result, usage)"
    )
    assert len(server.log) == 1  # stopped at the first response


def test_an_unknown_or_bad_key_is_one_line_naming_the_file(tmp_path):
    engine = engine_yaml(tmp_path, url="http://x", hits="h", id="i", hitz="h")
    with pytest.raises(InputError, match=r"engine\.yaml: unknown key 'hitz' \(known: preset, url"):
        load_engine(engine)
    engine = engine_yaml(tmp_path, url="http://x", hits="h", id="i", method="PUT")
    with pytest.raises(InputError, match=r"engine\.yaml: method: Input should be 'GET' or 'POST'"):
        load_engine(engine)


def test_no_hit_for_any_query_writes_nothing_and_keeps_nothing(serve, queries, tmp_path):
    server, url = serve("opensearch")
    server.empty = set(QUERIES.values())
    engine = engine_yaml(tmp_path, preset="opensearch", url=url + "/docs/_search")
    out = tmp_path / "r.trec"
    with pytest.raises(InputError, match="none of the 5 queries got a hit"):
        run(engine, queries, out)
    assert not out.exists() and not partial_path(out).exists()
    server.empty = set()
    run(engine, queries, out)  # asked again, now that the index answers
    assert set(read_trec_run(out)) == set(QUERIES) and len(server.log) == 2 * len(QUERIES)


def test_a_url_without_http_and_a_run_name_with_a_space_are_refused(tmp_path, queries):
    engine = engine_yaml(tmp_path, url="localhost:9200/docs/_search", hits="h", id="i")
    with pytest.raises(InputError, match=r"engine\.yaml: url: expected http:// or https://"):
        run(engine, queries, tmp_path / "r.trec")
    with pytest.raises(InputError, match="--run_name: 'my run' is a TREC run's tag: one word"):
        run(engine, queries, tmp_path / "r.trec", "--run_name", "my run")
    empty = tmp_path / "none.jsonl"
    empty.write_text("")
    with pytest.raises(InputError, match=r"--queries: .*none\.jsonl holds no query"):
        run(engine_yaml(tmp_path, url="http://x/s", hits="h", id="i"), empty, tmp_path / "r.trec")


def test_texts_need_a_text_path(tmp_path, queries):
    engine = engine_yaml(tmp_path, url="http://127.0.0.1:9/s", hits="h", id="i")
    with pytest.raises(InputError, match=r"--texts: .* has no `text:` path"):
        run(engine, queries, tmp_path / "r.trec", "--texts")


@pytest.mark.slow
def test_the_console_command_writes_a_run_and_refuses_a_bad_path_in_one_line(
    serve, queries, tmp_path
):
    _, url = serve("vespa")
    good = engine_yaml(tmp_path, preset="vespa", url=url + "/search/")
    command = ["run", "--queries", str(queries), "--k", "3"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = run_command(
        [*command, "--engine", str(good), "--out", str(tmp_path / "v.trec")], env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(read_trec_run(tmp_path / "v.trec")) == set(QUERIES)
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"preset: vespa\nurl: {url}/search/\nhits: root.kids\n")
    refused = run_command(
        [*command, "--engine", str(bad), "--out", str(tmp_path / "b.trec")], env=env
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"error: {bad}: path 'root.kids' matches nothing in the response to query q1 "
        "(top-level keys: root)"
    ]
