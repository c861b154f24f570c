"""Load on the REST API: concurrent clients, one poisoned request among them, latency percentiles.

    python -m benchmarks.api_load --model runs/main/export --clients 20 --hits 10
    python -m benchmarks.api_load --model runs/main/export --clients 0 --burst 300

Starts the API (``eval.api.create_app``) under uvicorn on a free local port, sends ``clients``
concurrent requests of ``hits`` TREC DL passages each, plus one poisoned request (a query far over
the grader's ``max_length`` that once failed every request batched with it), and reports status
codes, server errors and p50/p95/max latency. ``--burst N`` sends N small requests spread over
``--burst_seconds`` from clients that give up after ``--client_timeout`` (as the second
reliability campaign did), then one more request, and reports how many were answered, shed (503
with Retry-After) or timed out, their latencies, and how soon the request after the burst was
served. Then, with ``--schemathesis N``, runs schemathesis
(``pip install schemathesis``) against the API's OpenAPI schema for N generated requests and
counts server errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import machine, trec_dl_pairs
from support.api_server import Server


def api_server(model: str, **limits: Any) -> Server:
    """The API of the grader at ``model`` under uvicorn (a ``with`` block runs it)."""
    from eval.api import ApiSettings, create_app

    return Server(create_app(settings=ApiSettings(model=model, token=None, **limits)))


def request_body(query: str, passages: list[str]) -> dict[str, Any]:
    return {
        "query": {"inputs": {"text": query}},
        "eval": {"fields": ["text"]},
        "hits": [{"id": f"d{i}", "fields": {"text": text}} for i, text in enumerate(passages)],
    }


async def _load(url: str, bodies: list[dict[str, Any]]) -> list[tuple[int, float]]:
    import httpx

    async with httpx.AsyncClient(timeout=600) as client:

        async def one(body: dict[str, Any]) -> tuple[int, float]:
            start = time.perf_counter()
            response = await client.post(f"{url}/v1/eval/search", json=body)
            return response.status_code, time.perf_counter() - start

        return list(await asyncio.gather(*(one(body) for body in bodies)))


def load_test(model: str, clients: int, hits: int) -> dict[str, Any]:
    pairs = trec_dl_pairs(clients * hits + 1, seed=3)
    bodies = [
        request_body(pairs[i * hits][0], [d for _, d in pairs[i * hits : (i + 1) * hits]])
        for i in range(clients)
    ]
    poisoned = request_body(" ".join(["definition of an axon terminal"] * 600), [pairs[-1][1]])
    with api_server(model) as server:
        asyncio.run(_load(server.url, bodies[:1]))  # warm-up: first-call allocations
        start = time.perf_counter()
        # The poisoned request first, so that it is graded rather than shed with the queue full.
        results = asyncio.run(_load(server.url, [poisoned, *bodies]))
        wall = time.perf_counter() - start
    normal = [seconds for status, seconds in results[1:] if status == 200]
    return {
        "clients": clients,
        "hits_per_request": hits,
        "status_codes": [status for status, _ in results],
        "shed": sum(status == 503 for status, _ in results),
        "server_errors": sum(status >= 500 and status != 503 for status, _ in results),
        "poisoned_status": results[0][0],
        "p50_s": round(float(np.percentile(normal, 50)), 2),
        "p95_s": round(float(np.percentile(normal, 95)), 2),
        "max_s": round(max(normal), 2),
        "wall_s": round(wall, 2),
        "pairs_per_s": round(len(normal) * hits / wall, 2),
    }


async def _burst(
    url: str, bodies: list[dict[str, Any]], seconds: float, client_timeout: float
) -> list[tuple[str, float, str | None]]:
    """Each body sent at its own moment, spread evenly over ``seconds``: (status or "timeout",
    latency, Retry-After)."""
    import httpx

    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
    async with httpx.AsyncClient(timeout=client_timeout, limits=limits) as client:

        async def one(index: int, body: dict[str, Any]) -> tuple[str, float, str | None]:
            await asyncio.sleep(index * seconds / len(bodies))
            start = time.perf_counter()
            try:
                response = await client.post(f"{url}/v1/eval/search", json=body)
            except httpx.TimeoutException:  # the client gives up and disconnects
                return "timeout", time.perf_counter() - start, None
            status = str(response.status_code)
            return status, time.perf_counter() - start, response.headers.get("retry-after")

        return list(await asyncio.gather(*(one(i, b) for i, b in enumerate(bodies))))


def _percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50_s": None, "p95_s": None, "max_s": None}
    return {
        "p50_s": round(float(np.percentile(values, 50)), 2),
        "p95_s": round(float(np.percentile(values, 95)), 2),
        "max_s": round(max(values), 2),
    }


def burst_test(
    model: str, requests: int, seconds: float, hits: int, client_timeout: float
) -> dict[str, Any]:
    """``requests`` small requests spread over ``seconds``, clients that give up after
    ``client_timeout``, then one request once the burst is over: how many are answered, shed
    (503 with Retry-After) or timed out, their latencies, and how soon the next caller is served."""
    pairs = trec_dl_pairs(requests * hits + hits, seed=5)
    bodies = [
        request_body(pairs[i * hits][0], [d for _, d in pairs[i * hits : (i + 1) * hits]])
        for i in range(requests + 1)
    ]
    with api_server(model) as server:
        asyncio.run(_load(server.url, bodies[:1]))  # warm-up: first-call allocations
        start = time.perf_counter()
        results = asyncio.run(_burst(server.url, bodies[:-1], seconds, client_timeout))
        burst_wall = time.perf_counter() - start
        after = asyncio.run(_load(server.url, bodies[-1:]))[0]
        batcher = server.app.state.batcher
        graded_batches, dropped = batcher.batches, batcher.dropped
    by_status: dict[str, list[float]] = {}
    for status, seconds_taken, _ in results:
        by_status.setdefault(status, []).append(seconds_taken)
    retry_after = [int(r) for status, _, r in results if status == "503" and r]
    return {
        "requests": requests,
        "over_s": seconds,
        "hits_per_request": hits,
        "client_timeout_s": client_timeout,
        "counts": {status: len(values) for status, values in sorted(by_status.items())},
        "answered": _percentiles(by_status.get("200", [])),
        "shed": _percentiles(by_status.get("503", [])),
        "retry_after_s": {
            "min": min(retry_after, default=None),
            "median": float(np.median(retry_after)) if retry_after else None,
            "max": max(retry_after, default=None),
        },
        "burst_wall_s": round(burst_wall, 2),
        "after_burst": {"status": after[0], "seconds": round(after[1], 2)},
        "graded_batches": graded_batches,
        "abandoned_requests_dropped": dropped,
    }


def schemathesis_run(model: str, examples: int) -> dict[str, Any]:
    """Schemathesis against the live API; limits kept small so each generated request is quick."""
    with api_server(model, max_hits=4, max_text_chars=400) as server:
        command = [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "run",
            f"{server.url}/openapi.json",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            str(examples),
            "--phases",
            "examples,coverage,fuzzing",
            "--suppress-health-check",
            "all",
            "--request-timeout",
            "120",  # what is judged is server errors; latency is the load test's figure
        ]
        result = subprocess.run(command, capture_output=True, text=True)
    tail = result.stdout.strip().splitlines()[-12:]
    return {"exit": result.returncode, "summary": tail}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="runs/main/export")
    parser.add_argument("--clients", type=int, default=20, help="0: skip the load test.")
    parser.add_argument("--hits", type=int, default=10)
    parser.add_argument("--burst", type=int, default=0, help="Requests in a burst (0: skip).")
    parser.add_argument("--burst_seconds", type=float, default=20.0)
    parser.add_argument("--burst_hits", type=int, default=2)
    parser.add_argument("--client_timeout", type=float, default=120.0)
    parser.add_argument("--schemathesis", type=int, default=0, help="Generated requests (0: skip).")
    parser.add_argument("--json", help="Also write the figures here.")
    options = parser.parse_args(argv)
    if not Path(options.model).exists():
        parser.error(f"--model {options.model}: no such grader (export one first)")
    figures: dict[str, Any] = {"machine": machine()}
    if options.clients:
        figures["load"] = load_test(options.model, options.clients, options.hits)
    if options.burst:
        figures["burst"] = burst_test(
            options.model,
            options.burst,
            options.burst_seconds,
            options.burst_hits,
            options.client_timeout,
        )
    if options.schemathesis:
        figures["schemathesis"] = schemathesis_run(options.model, options.schemathesis)
    print(json.dumps(figures, indent=2))
    if options.json:
        Path(options.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
