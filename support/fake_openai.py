"""A chat-completions server on 127.0.0.1 for tests, with scripted misbehaviour.

Each document carries a marker ``[[id=ID mode=MODE rel=0|1]]``; the server answers according to
MODE and counts requests per ID:
- ``ok``: a valid reply (JSON for JSON prompts, a bare yes/no for direct prompts, or
  ``{"answer": WORD}`` when the request asks for that shape with a schema);
- ``garbage``: always unparseable text;
- ``garbage-once``: unparseable the first time, valid afterwards;
- ``429-once``: HTTP 429 with Retry-After: 1 the first time, valid afterwards;
- ``500-twice``: HTTP 500 twice, valid afterwards;
- ``slow``: sleeps past any short client timeout;
- ``delay``: valid after 0.1 s (for kill-and-resume tests);
- ``truncated-once``: the first reply stops mid-analysis (``finish_reason: length``);
- ``not-json`` / ``text-plain``: a 200 whose body is invalid JSON / a text/plain page;
- ``reply=TEXT``: answers TEXT verbatim (underscores for spaces);
- ``rambles``: a small local model (SmolLM2 on llama.cpp): in the shape asked when the request
  carries a schema, else a grade's definition instead of an answer;
- ``refusal``: the model declines (``message.refusal`` set, ``content`` null), as OpenAI's
  structured output does;
- ``error-body`` / ``no-choices``: a 200 whose body is an error object (``{"error": {"message":
  ...}}``) / a completion with an empty ``choices`` list.

The Batch API is there too (``/files``, ``/batches``, ``/files/ID/content``): a batch runs every
line through the same chat logic on its ``batch_polls``-th retrieve and ends as ``batch_outcome``
says (``completed``; ``expire_half``: the second half of its lines expire unrun; ``failed``);
``forget_batches`` makes every batch id a 404 and ``batches_accepted`` refuses batches past a
count (the provider's enqueued-token limit). ``python -m support.fake_openai run-batch -i IN -o
OUT --model M`` answers a request file as vLLM's ``run_batch`` does.

``refused_formats`` makes the server refuse a ``response_format`` type as llama.cpp's server
refuses ``json_schema`` (HTTP 500, "Input should be 'text' or 'json_object'").

Models named ``o*`` behave like OpenAI's reasoning models: ``temperature``, ``max_tokens`` or
``logprobs`` in the request get HTTP 400. Others return the first token's top log-probabilities
when asked (``logprobs``): P(yes) 0.8 for relevant documents, 0.1 for the others.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import Counter
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MARKER = re.compile(r"\[\[id=(\S+) mode=(\S+) rel=(\d)\]\]")


def _instance(schema: dict, relevant: bool) -> dict:
    """A reply in ``schema``'s shape that says ``relevant``: booleans true, numbers at their
    maximum (else false and the minimum), strings "checked"."""
    value: dict = {}
    for key, spec in schema["properties"].items():
        if spec.get("type") == "boolean":
            value[key] = relevant
        elif spec.get("type") in ("integer", "number"):
            value[key] = spec.get("maximum", 1) if relevant else spec.get("minimum", 0)
        else:
            value[key] = spec["enum"][-1 if relevant else 0] if "enum" in spec else "checked"
    return value


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        # The Batch API: uploaded files, batches, and how they end.
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.batch_polls = 1  # retrieves before a batch finishes
        self.batch_outcome = "completed"  # completed, expire_half, failed
        self.forget_batches = False  # every batch id answers 404 (deleted at the provider)
        self.batches_accepted: int | None = None  # after this many, creating one is refused
        self.chat_delay = 0.0  # seconds every chat request waits (for interrupt-and-resume tests)
        # Answer this many chat requests, then hold every later one until ``release`` is set:
        # an interrupt test then interrupts a client that is waiting, whatever the machine's speed.
        self.hold_after: int | None = None
        self.release = threading.Event()
        self.answered = 0  # chat replies sent
        self.admitted = 0  # chat requests let through (answered or being answered)
        self.held = 0  # chat requests waiting for ``release``
        # response_format types refused, with the status (llama.cpp's server: json_schema, 500)
        self.refused_formats: dict[str, int] = {}
        self.refusals = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                path = self.path.split("?")[0]
                data = self.rfile.read(int(self.headers["Content-Length"]))
                if path.endswith("/files"):
                    return self._send(200, server.upload(self.headers["Content-Type"], data))
                if path.endswith("/batches"):
                    return self._send(*server.create_batch(json.loads(data)))
                server.hold_if_due()
                status, payload, content_type, headers = server.chat(json.loads(data))
                self._send_raw(status, payload, content_type, headers)
                with server.lock:
                    server.answered += 1

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                parts = path.strip("/").split("/")
                if path.endswith("/batches"):
                    return self._send(200, server.list_batches())
                if len(parts) >= 2 and parts[-2] == "batches":
                    return self._send(*server.retrieve_batch(parts[-1]))
                if path.endswith("/content") and parts[-2] in server.files:
                    return self._send_raw(200, server.files[parts[-2]], "application/jsonl")
                self._send(404, {"error": {"message": f"no route {path}"}})

            def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
                self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

            def _send_raw(
                self, status: int, data: bytes, content_type: str, headers: dict | None = None
            ) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        # A short poll: leaving waits for it (0.5 s by default).
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    def hold_if_due(self) -> None:
        """Wait for ``release`` once ``hold_after`` requests have been let through."""
        # Counted as let through here, not when answered: a request in flight while another
        # arrives must not let both pass the last place.
        with self.lock:
            due = self.hold_after is not None and self.admitted >= self.hold_after
            if due:
                self.held += 1
            else:
                self.admitted += 1
        if due:
            self.release.wait()

    def chat(self, body: dict) -> tuple[int, bytes, str, dict]:
        """(status, body, content type, headers) of one chat-completions request."""
        content = body["messages"][-1]["content"]
        found = MARKER.search(content)
        doc_id, mode, relevant = found.groups() if found else ("?", "ok", "0")
        with self.lock:
            self.requests[doc_id] += 1
            self.bodies.append(body)
            count = self.requests[doc_id]
        time.sleep(self.chat_delay)

        def send(status: int, payload: dict, headers: dict | None = None):
            return status, json.dumps(payload).encode(), "application/json", headers or {}

        if body["model"].startswith("o"):
            unsupported = [k for k in ("temperature", "max_tokens", "logprobs") if k in body]
            if unsupported:
                message = f"Unsupported parameter: '{unsupported[0]}' is not supported"
                return send(
                    400,
                    {
                        "error": {
                            "message": message,
                            "type": "invalid_request_error",
                            "param": unsupported[0],
                            "code": "unsupported_parameter",
                        }
                    },
                )
        asked_format = (body.get("response_format") or {}).get("type")
        if asked_format in self.refused_formats:
            with self.lock:
                self.refusals += 1
            # llama-cpp-python's server validates the body with pydantic and answers 500
            problem = "Input should be 'text' or 'json_object'"
            return send(
                self.refused_formats[asked_format],
                {
                    "error": {
                        "message": f"[{{'type': 'literal_error', 'loc': ('body', "
                        f"'response_format', 'type'), 'msg': \"{problem}\"}}]",
                        "type": "internal_server_error",
                    }
                },
            )
        if mode == "429-once" and count == 1:
            return send(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"})
        if mode == "500-twice" and count <= 2:
            return send(500, {"error": {"message": "boom"}})
        if mode == "slow":
            time.sleep(3)
        if mode == "delay":
            time.sleep(0.1)
        if mode in ("not-json", "text-plain"):
            return (
                200,
                b'{"choices": [' if mode == "not-json" else b"<html>Bad gateway</html>",
                "application/json" if mode == "not-json" else "text/plain",
                {},
            )
        if mode == "error-body":
            message = "The model is overloaded; try again later"
            return send(200, {"error": {"message": message, "type": "server_error", "code": 503}})
        if mode == "no-choices":
            return send(200, {"id": "chatcmpl-0", "object": "chat.completion", "choices": []})
        # The answer words of a direct prompt's schema ({"answer": {"enum": [...]}}), sent as
        # json_schema or (llama.cpp) as json_object's "schema".
        asked = body.get("response_format") or {}
        schema = (asked.get("json_schema") or {}).get("schema") or asked.get("schema") or {}
        answers = ((schema.get("properties") or {}).get("answer") or {}).get("enum")
        finish = "stop"
        if mode == "truncated-once" and count == 1:
            text, finish = '{"analysis": "The passage is relevant: yes, it', "length"
        elif mode == "rambles" and not schema.get("properties"):
            text = "3 = the passage is dedicated to the query and contains the exact answer."
        elif mode.startswith("reply="):
            text = mode.removeprefix("reply=").replace("_", " ")
        elif mode == "garbage" or (mode == "garbage-once" and count == 1):
            text = "I am not sure what you mean."
        elif answers:  # a direct prompt asked in its shape: {"answer": "yes"}
            text = json.dumps({"answer": answers[-1] if relevant == "1" else answers[0]})
        elif schema.get("properties"):  # any other shape asked, as constrained decoding fills it
            text = json.dumps(_instance(schema, relevant == "1"))
        elif "JSON object" in content:
            text = json.dumps({"analysis": "checked", "relevant": relevant == "1"})
        else:
            text = "yes" if relevant == "1" else "no"
        message = {"role": "assistant", "content": text}
        if mode == "refusal":
            message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
        reply = {
            "id": f"chatcmpl-{count}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107},
        }
        if body.get("logprobs"):
            p_yes = 0.8 if relevant == "1" else 0.1
            top, bottom = (answers[-1], answers[0]) if answers else ("yes", "no")
            alternatives = [
                (top, p_yes * 0.9),
                (top.capitalize(), p_yes * 0.1),
                (bottom, 1 - p_yes),
            ]

            def token(text: str, alternatives: list) -> dict:
                tops = [
                    {"token": t, "logprob": math.log(p), "bytes": None} for t, p in alternatives
                ]
                return {"token": text, "logprob": -0.1, "bytes": None, "top_logprobs": tops}

            if answers and text.startswith("{"):  # the answer token inside {"answer": "..."}
                word = json.loads(text)["answer"]
                tokens = [token('{"', []), token("answer", []), token('":', []), token(' "', [])]
                tokens += [token(word, alternatives), token('"}', [])]
            else:
                tokens = [token(text.split()[0] if text.split() else "", alternatives)]
            reply["choices"][0]["logprobs"] = {"content": tokens}
        return send(200, reply)

    # The Batch API (files, batches): just what the SDK's calls need.
    def upload(self, content_type: str, data: bytes) -> dict:
        message = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + data
        )
        fields = {
            part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
            for part in message.iter_parts()
        }
        with self.lock:
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = fields["file"]
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(fields["file"]),
            "created_at": 0,
            "filename": "requests.jsonl",
            "purpose": "batch",
            "status": "processed",
        }

    def create_batch(self, body: dict) -> tuple[int, dict]:
        with self.lock:
            if self.batches_accepted is not None and len(self.batches) >= self.batches_accepted:
                return 400, {
                    "error": {
                        "message": "Enqueued token limit reached for this model.",
                        "code": "token_limit_exceeded",
                    }
                }
            batch_id = f"batch_{len(self.batches) + 1}"
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": body["endpoint"],
                "errors": None,
                "input_file_id": body["input_file_id"],
                "completion_window": body["completion_window"],
                "status": "validating",
                "output_file_id": None,
                "error_file_id": None,
                "created_at": 0,
                "request_counts": {"total": 0, "completed": 0, "failed": 0},
                "polls": 0,
            }
        return 200, self._public(self.batches[batch_id])

    def _public(self, batch: dict) -> dict:
        return {k: v for k, v in batch.items() if k != "polls"}

    def list_batches(self) -> dict:
        data = [self._public(b) for b in self.batches.values()]
        return {"object": "list", "data": data, "has_more": False}

    def retrieve_batch(self, batch_id: str) -> tuple[int, dict]:
        batch = self.batches.get(batch_id)
        if batch is None or self.forget_batches:
            return 404, {"error": {"message": f"No batch found with id '{batch_id}'."}}
        batch["polls"] += 1
        if batch["status"] in ("validating", "in_progress"):
            if batch["polls"] >= self.batch_polls:
                self._run(batch)
            else:
                batch["status"] = "in_progress"
        return 200, self._public(batch)

    def _run(self, batch: dict) -> None:
        lines = self.files[batch["input_file_id"]].decode().splitlines()
        if self.batch_outcome == "failed":
            batch["status"] = "failed"
            batch["errors"] = {
                "object": "list",
                "data": [
                    {"code": "invalid_request", "message": "the model does not exist", "line": 1}
                ],
            }
            return
        half = lines[: (len(lines) + 1) // 2]  # at least one line runs
        run = half if self.batch_outcome == "expire_half" else lines
        output, errors = [], []
        for line in lines:
            request = json.loads(line)
            if line not in run:
                errors.append(
                    {
                        "id": f"batch_req_{len(output) + len(errors)}",
                        "custom_id": request["custom_id"],
                        "response": None,
                        "error": {"code": "batch_expired", "message": "This request expired"},
                    }
                )
                continue
            status, body, _, _ = self.chat(request["body"])
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = body.decode()
            result = {
                "id": f"batch_req_{len(output) + len(errors)}",
                "custom_id": request["custom_id"],
                "response": {"status_code": status, "request_id": "r", "body": parsed},
                "error": None,
            }
            (output if status == 200 else errors).append(result)
        for kind, results in (("output", output), ("error", errors)):
            if results:
                file_id = f"file-{len(self.files) + 1}"
                self.files[file_id] = "".join(json.dumps(r) + "\n" for r in results).encode()
                batch[f"{kind}_file_id"] = file_id
        batch["status"] = "expired" if self.batch_outcome == "expire_half" else "completed"
        batch["request_counts"] = {
            "total": len(lines),
            "completed": len([r for r in output]),
            "failed": len(errors),
        }

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def run_batch(argv: list[str]) -> None:
    """vLLM's ``run_batch`` as the fake answers it: ``run-batch -i IN -o OUT --model M``."""
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    fake = FakeOpenAI()
    out = []
    for line in Path(options["-i"]).read_text(encoding="utf-8").splitlines():
        request = json.loads(line)
        status, body, _, _ = fake.chat(request["body"])
        out.append(
            {
                "id": f"vllm-{len(out)}",
                "custom_id": request["custom_id"],
                "response": {"status_code": status, "request_id": "r", "body": json.loads(body)},
                "error": None,
            }
        )
    with open(options["-o"], "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in out)
    fake.httpd.server_close()


def serve_forever() -> None:  # pragma: no cover - used by a subprocess in tests
    with FakeOpenAI() as server:
        print(server.base_url, flush=True)
        while True:
            time.sleep(1)


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - used by subprocesses
    import argparse

    parser = argparse.ArgumentParser(description="A fake OpenAI-compatible server for tests.")
    parser.add_argument("command", nargs="?", default="serve", choices=("serve", "run-batch"))
    parser.add_argument("-i", help="run-batch: the request file")
    parser.add_argument("-o", help="run-batch: the result file")
    parser.add_argument("--model", help="run-batch: the model name (unused)")
    options = parser.parse_args(argv)
    if options.command == "run-batch":
        run_batch(["-i", options.i, "-o", options.o])
    else:
        serve_forever()


if __name__ == "__main__":
    main()
