"""Teacher labeling throughput against a local endpoint with a fixed simulated latency.

    python -m benchmarks.teacher --pairs 256 --latency_ms 200 --concurrency 1 4 16 64

A chat-completions server on 127.0.0.1 answers every request after ``latency_ms``; labels/s
should grow with concurrency until the endpoint (or this client) is the limit.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from benchmarks.common import machine, print_table, trec_dl_pairs
from core.cli import parse_config, run_main
from core.io import write_jsonl
from data.judges.backends import JudgeConfig
from data.label import LabelConfig, label


@dataclass
class BenchTeacherConfig:
    pairs: int = field(default=256)
    latency_ms: float = field(default=200.0)
    concurrency: list[int] = field(default_factory=lambda: [1, 4, 16, 64])


def serve(latency: float) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(latency)
            reply = {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "yes"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 200, "completion_tokens": 1, "total_tokens": 201},
            }
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.request_queue_size = 256
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([BenchTeacherConfig], args)
    server = serve(config.latency_ms / 1000)
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    work = Path(tempfile.mkdtemp(prefix="bench-teacher-"))
    pairs = [
        {
            "qid": f"q{i}",
            "query": q,
            "doc_id": f"d{i}",
            "text": f"{d} [{i}]",
        }  # unique texts: no cache sharing
        for i, (q, d) in enumerate(trec_dl_pairs(config.pairs))
    ]
    write_jsonl(work / "pairs.jsonl", pairs)
    rows = []
    for concurrency in config.concurrency:
        out = work / f"c{concurrency}.jsonl"
        start = time.perf_counter()
        summary = label(
            LabelConfig(out=str(out), pairs=str(work / "pairs.jsonl")),
            JudgeConfig(
                backend="openai",
                model="sim",
                prompt="binary",
                base_url=base_url,
                concurrency=concurrency,
            ),
        )
        seconds = time.perf_counter() - start
        ideal = concurrency / (config.latency_ms / 1000)
        rows.append(
            [
                concurrency,
                summary["pairs"] / seconds,
                ideal,
                100 * summary["pairs"] / seconds / ideal,
            ]
        )
    server.shutdown()
    print_table(
        f"Teacher labels/s, {config.pairs} pairs, simulated latency {config.latency_ms:.0f} ms",
        ["concurrency", "labels/s", "endpoint limit (concurrency / latency)", "% of limit"],
        rows,
        machine(),
    )


if __name__ == "__main__":
    run_main(main)
