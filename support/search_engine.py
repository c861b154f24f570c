"""A live search endpoint for the tests and the demo: word-overlap retrieval over a BEIR corpus,
answering OpenSearch's ``_search`` shape on 127.0.0.1 (``{"hits": {"hits": [{"_id", "_score",
"_source"}]}}``). ``mode`` switches what it answers, as a release would:

* ``"overlap"``: the documents sharing most of the query's words (by their length) first;
* ``"broken"``: the least matching first (a broken index: the regression a gate must stop);
* ``"titles"``: overlap with the titles counted twice (a small change, for better or worse).
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

WORDS = re.compile(r"[a-z]+")
MODES = ("overlap", "broken", "titles")


def _words(text: str | None) -> set[str]:
    return set(WORDS.findall((text or "").lower()))


class SearchEngine(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, corpus: Path, mode: str = "overlap") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.docs = {}
        with open(corpus, encoding="utf-8") as handle:
            for line in handle:
                doc = json.loads(line)
                self.docs[doc["_id"]] = (_words(doc.get("title")), _words(doc.get("text")))
        self.mode = mode

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> SearchEngine:
        # A short poll: stop() waits for it (0.5 s by default).
        threading.Thread(target=self.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def search(self, text: str, size: int) -> list[dict[str, Any]]:
        words = _words(text)
        title_weight = 2 if self.mode == "titles" else 1
        scored = sorted(
            (
                (title_weight * len(words & title) + len(words & body)) / (1 + len(body)) ** 0.3,
                doc,
            )
            for doc, (title, body) in self.docs.items()
        )
        ordered = scored if self.mode == "broken" else scored[::-1]
        return [{"_id": doc, "_score": score, "_source": {}} for score, doc in ordered[:size]]


class _Handler(BaseHTTPRequestHandler):
    server: SearchEngine

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        hits = self.server.search(body["query"]["match"]["text"], int(body["size"]))
        data = json.dumps({"hits": {"hits": hits}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:  # quiet
        pass
