"""Run the benchmark list (benchmarks/suite.yaml) at one shape, a JSON line per benchmark.

    python -m benchmarks                                   # every benchmark, smoke shape
    python -m benchmarks --only grading teacher --shape full --out runs/benchmarks.jsonl

Each benchmark's command lines run in order, each its own process from the repository root; its
line, appended to ``--out`` as it ends, holds the name, shape, commands, date, seconds, exit code,
status (ok, failed, or skipped with the reason: no CUDA GPU, a missing file, a missing package, no
such shape), the machine, the end of its output and, where it writes JSON, that file (result).
"""

from __future__ import annotations

import collections
import datetime
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.cli import choice, parse_config, run_main
from core.errors import InputError

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "benchmarks" / "suite.yaml"
SHAPES = ("smoke", "full")
TAIL_LINES = 40


@dataclass
class SuiteConfig:
    only: list[str] = field(
        default_factory=list, metadata={"help": "Names of the list to run (default: all)."}
    )
    shape: str = choice("smoke", SHAPES, "smoke: the smallest args; full: the figures' args.")
    out: str = field(default="runs/benchmarks.jsonl", metadata={"help": "JSONL file appended to."})
    run: str = field(default="runs/main", metadata={"help": "The main job's run folder ({run})."})
    suite: str = field(default=str(SUITE), metadata={"help": "The list (YAML)."})


@dataclass
class Benchmark:
    """One entry of the list: its shapes' command lines and what it needs."""

    name: str
    full: list[str]
    smoke: list[str] = field(default_factory=list)
    figures: str = ""
    result: str | None = None
    gpu: bool = False
    paths: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)


def load_suite(path: str | Path = SUITE) -> list[Benchmark]:
    entries = yaml.safe_load(Path(path).read_text(encoding="utf-8"))["benchmarks"]
    for entry in entries:
        for shape in SHAPES:  # one command line, or a list run in order
            if isinstance(entry.get(shape), str):
                entry[shape] = [entry[shape]]
    return [Benchmark(**entry) for entry in entries]


def argv(line: str, tmp: str, run: str) -> list[str]:
    """A command line of the list as this interpreter runs it, its placeholders filled."""
    words = [w.replace("{tmp}", tmp).replace("{run}", run) for w in shlex.split(line)]
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    if words[0] == "relevance-grader":  # the console script, from the checkout
        return [sys.executable, "-m", "core.commands", *words[1:]]
    raise InputError(f"{line!r}: a command of the list starts with python or relevance-grader")


def unmet(benchmark: Benchmark, shape: str, run: str) -> str | None:
    """Why ``benchmark`` cannot run here at ``shape`` (None: it can)."""
    import torch

    lines = getattr(benchmark, shape)
    if not lines:
        return f"no {shape} shape"
    if benchmark.gpu and not torch.cuda.is_available():
        return "no CUDA GPU here"
    named = (p for p in benchmark.paths if any(p in line for line in lines))
    for path in (p.replace("{run}", run) for p in named):
        if not (REPO / path).exists():  # a relative path: from the repository root
            return f"{path} is missing"
    for package in benchmark.packages:
        if importlib.util.find_spec(package) is None:
            return f"the package {package} is not installed"
    return None


def stream(command: list[str], tail: collections.deque[str]) -> int:
    """Run ``command`` from the repository root, its output printed and its last lines kept."""
    with subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            print(line, end="", flush=True)
            tail.append(line)
    return process.returncode


def read_result(path: Path) -> Any:
    """A benchmark's JSON file, or its JSONL file as a list."""
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def run_benchmark(benchmark: Benchmark, config: SuiteConfig, machine: dict) -> dict[str, Any]:
    run = str(Path(config.run).resolve())
    lines = getattr(benchmark, config.shape)
    record: dict[str, Any] = {
        "name": benchmark.name,
        "shape": config.shape,
        "command": [line.replace("{run}", config.run) for line in lines],
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine,
    }
    reason = unmet(benchmark, config.shape, run)
    if reason:
        return {**record, "status": "skipped", "reason": reason, "seconds": 0, "exit_code": None}
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    start, code = time.perf_counter(), 0
    with tempfile.TemporaryDirectory(prefix=f"bench-{benchmark.name}-") as tmp:
        for line in lines:
            print(f"$ {line}", flush=True)
            code = stream(argv(line, tmp, run), tail)
            if code:
                break
        record.update(
            status="ok" if code == 0 else "failed",
            seconds=round(time.perf_counter() - start, 2),
            exit_code=code,
            output_tail="".join(tail)[-4000:],
        )
        if benchmark.result and Path(tmp, benchmark.result).is_file():
            record["result"] = read_result(Path(tmp, benchmark.result))
    return record


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([SuiteConfig], args)
    suite = load_suite(config.suite)
    unknown = sorted(set(config.only) - {b.name for b in suite})
    if unknown:
        names = ", ".join(b.name for b in suite)
        raise InputError(f"only: unknown {', '.join(unknown)}; the list has {names}")
    from benchmarks.common import machine

    info = {**machine(), "cores": os.cpu_count()}
    out = Path(config.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    failed = []
    for benchmark in (b for b in suite if not config.only or b.name in config.only):
        record = run_benchmark(benchmark, config, info)
        with open(out, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=str) + "\n")
        print(f"{benchmark.name}: {record['status']} {record.get('reason', '')}", flush=True)
        if record["status"] == "failed":
            failed.append(benchmark.name)
    print(f"wrote {out}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    run_main(main)
