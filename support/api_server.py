"""An ASGI app under uvicorn on a free local port, in a background thread, for the duration of a
``with`` block: the API benchmark's server (``benchmarks.api_load``) and the API tests' real
middleware stack."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """``app`` under uvicorn; entering waits (up to 300 s) until its ``/healthz`` says ok."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.app = app
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Server:
        import httpx

        self.thread.start()
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).json()["status"] == "ok":
                    return self
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.2)
        raise TimeoutError("the API did not come up within 300 s")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
