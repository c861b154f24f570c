"""Benchmark ``relevance-grader build`` on synthetic judgments: wall time and peak memory.

    python -m benchmarks.build_dataset --n 1000000

The judgments file is generated first (not timed); the build runs in a child process whose peak
resident memory is read from the OS.
"""

from __future__ import annotations

import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.cli import parse_config, run_main
from core.io import markdown_table


@dataclass
class BenchBuildConfig:
    n: int = field(default=1_000_000, metadata={"help": "Number of synthetic judgments."})
    per_query: int = field(default=50, metadata={"help": "Judgments per query."})
    balance: str = field(default="both")
    workdir: str | None = field(
        default=None, metadata={"help": "Where to write (default: a temp dir)."}
    )


def write_synthetic(path: Path, n: int, per_query: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    grades = rng.choice(4, size=n, p=[0.55, 0.2, 0.17, 0.08])
    words = np.array(
        [
            "the",
            "a",
            "search",
            "engine",
            "result",
            "passage",
            "answer",
            "query",
            "relevant",
            "water",
            "pump",
            "cat",
            "tax",
            "law",
        ]
    )
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            text = " ".join(words[rng.integers(0, len(words), size=40)])
            record = {
                "qid": f"q{i // per_query}",
                "query": f"synthetic query {i // per_query}",
                "doc_id": f"d{i}",
                "text": text,
                "grade": int(grades[i]),
                "rank": i % per_query + 1,
            }
            handle.write(json.dumps(record) + "\n")


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([BenchBuildConfig], args)
    work = Path(config.workdir or tempfile.mkdtemp(prefix="bench-build-"))
    work.mkdir(parents=True, exist_ok=True)
    source = work / "judgments.jsonl"
    start = time.perf_counter()
    write_synthetic(source, config.n, config.per_query)
    generated = time.perf_counter() - start
    command = [
        sys.executable,
        "-m",
        "data.build",
        "--judgments",
        str(source),
        "--out",
        str(work / "dataset"),
        "--balance",
        config.balance,
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True)
    elapsed = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    size_mib = source.stat().st_size / 2**20
    print()
    header = ["judgments", "file MiB", "build s", "judgments/s", "peak RSS MiB", "machine"]
    row = [
        f"{config.n:,}",
        f"{size_mib:.0f}",
        f"{elapsed:.1f}",
        f"{config.n / elapsed:,.0f}",
        f"{peak_mib:,.0f}",
        f"{platform.machine()}, {platform.python_version()}",
    ]
    print(markdown_table(header, [row]), end="")
    print(f"(generating the input took {generated:.1f} s; command: {' '.join(command)})")


if __name__ == "__main__":
    run_main(main)
