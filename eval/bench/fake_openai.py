"""A chat-completions server on 127.0.0.1 for tests, with scripted misbehaviour.

Each document carries a marker ``[[id=ID mode=MODE rel=0|1]]``; the server answers according to
MODE and counts requests per ID:
- ``ok``: a valid reply (JSON for JSON prompts, a bare yes/no for direct prompts);
- ``garbage``: always unparseable text;
- ``garbage-once``: unparseable the first time, valid afterwards;
- ``429-once``: HTTP 429 with Retry-After: 1 the first time, valid afterwards;
- ``500-twice``: HTTP 500 twice, valid afterwards;
- ``slow``: sleeps past any short client timeout;
- ``delay``: valid after 0.1 s (for kill-and-resume tests);
- ``truncated-once``: the first reply stops mid-analysis (``finish_reason: length``);
- ``not-json`` / ``text-plain``: a 200 whose body is invalid JSON / a text/plain page;
- ``reply=TEXT``: answers TEXT verbatim (underscores for spaces).

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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MARKER = re.compile(r"\[\[id=(\S+) mode=(\S+) rel=(\d)\]\]")


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                content = body["messages"][-1]["content"]
                found = MARKER.search(content)
                doc_id, mode, relevant = found.groups() if found else ("?", "ok", "0")
                with server.lock:
                    server.requests[doc_id] += 1
                    server.bodies.append(body)
                    count = server.requests[doc_id]
                if body["model"].startswith("o"):
                    unsupported = [
                        k for k in ("temperature", "max_tokens", "logprobs") if k in body
                    ]
                    if unsupported:
                        message = f"Unsupported parameter: '{unsupported[0]}' is not supported"
                        return self._send(
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
                if mode == "429-once" and count == 1:
                    return self._send(
                        429, {"error": {"message": "slow down"}}, {"Retry-After": "1"}
                    )
                if mode == "500-twice" and count <= 2:
                    return self._send(500, {"error": {"message": "boom"}})
                if mode == "slow":
                    time.sleep(3)
                if mode == "delay":
                    time.sleep(0.1)
                if mode in ("not-json", "text-plain"):
                    return self._send_raw(
                        200,
                        b'{"choices": [' if mode == "not-json" else b"<html>Bad gateway</html>",
                        "application/json" if mode == "not-json" else "text/plain",
                    )
                finish = "stop"
                if mode == "truncated-once" and count == 1:
                    text, finish = '{"analysis": "The passage is relevant: yes, it', "length"
                elif mode.startswith("reply="):
                    text = mode.removeprefix("reply=").replace("_", " ")
                elif mode == "garbage" or (mode == "garbage-once" and count == 1):
                    text = "I am not sure what you mean."
                elif "JSON object" in content:
                    text = json.dumps({"analysis": "checked", "relevant": relevant == "1"})
                else:
                    text = "yes" if relevant == "1" else "no"
                reply = {
                    "id": f"chatcmpl-{count}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": finish,
                        }
                    ],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107},
                }
                if body.get("logprobs"):
                    p_yes = 0.8 if relevant == "1" else 0.1
                    alternatives = [("yes", p_yes * 0.9), ("Yes", p_yes * 0.1), ("no", 1 - p_yes)]
                    reply["choices"][0]["logprobs"] = {
                        "content": [
                            {
                                "token": text.split()[0] if text.split() else "",
                                "logprob": -0.1,
                                "bytes": None,
                                "top_logprobs": [
                                    {"token": t, "logprob": math.log(p), "bytes": None}
                                    for t, p in alternatives
                                ],
                            }
                        ]
                    }
                self._send(200, reply)

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
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serve_forever() -> None:  # pragma: no cover - used by a subprocess in tests
    with FakeOpenAI() as server:
        print(server.base_url, flush=True)
        while True:
            time.sleep(1)
