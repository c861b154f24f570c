"""The benchmark list (benchmarks/suite.yaml) and its runner (python -m benchmarks)."""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchmarks.__main__ import SHAPES, SUITE, load_suite
from benchmarks.__main__ import main as run_list
from core.cli import run_main
from tests.test_layout import REPO, benchmark_modules

SUITE_LINES = [
    pytest.param(benchmark.name, shape, line, id=f"{benchmark.name}-{shape}-{i}")
    for benchmark in load_suite()
    for shape in SHAPES
    for i, line in enumerate(getattr(benchmark, shape))
]


def test_the_list_has_every_benchmark_once():
    """Every benchmark module is run by an entry of the list (or named a study's tool), and each
    entry has a full shape, the one behind its figures, recorded in a file that exists."""
    suite = load_suite()
    names = [benchmark.name for benchmark in suite]
    assert len(names) == len(set(names)) and len(names) >= 15
    listed = {
        shlex.split(line)[2]
        for benchmark in suite
        for line in benchmark.smoke + benchmark.full
        if line.startswith("python -m benchmarks")
    }
    tools = set(yaml.safe_load(SUITE.read_text(encoding="utf-8"))["tools"])
    # The runner is no entry; benchmarks.downstream.experiment runs as benchmarks.downstream.
    unlisted = [
        module
        for module in benchmark_modules()
        if module != "benchmarks"
        and not any(module == run or module.startswith(f"{run}.") for run in listed | tools)
    ]
    assert unlisted == []
    assert listed & tools == set()
    for benchmark in suite:
        assert benchmark.full, benchmark.name
        assert (REPO / benchmark.figures).is_file(), benchmark.name
        for path in benchmark.paths:  # a shape needs the paths its commands name
            assert any(path in line for line in benchmark.smoke + benchmark.full), path
        if benchmark.result:  # the file it embeds is one its command writes under {tmp}
            written = f"{{tmp}}/{Path(benchmark.result).parts[0]}"
            assert any(written in line for line in benchmark.full), benchmark.name


class Parsed(Exception):
    """Raised where a main has parsed its arguments, before it does any work."""


def parse_only(line: str, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parse ``line``'s arguments as its main does (its dataclass config, with the YAML, choice
    and bound checks of core.cli.parse_config, or its argparse parser), and stop there."""
    from core.commands import COMMANDS

    words = [w.replace("{tmp}", str(tmp)).replace("{run}", "runs/main") for w in shlex.split(line)]
    if words[0] == "relevance-grader":
        main, args = COMMANDS[words[1]].main(), words[2:]
    else:
        assert words[:2] == ["python", "-m"], line
        module, args = importlib.import_module(words[2]), words[3:]
        if not hasattr(module, "main"):  # a package: its __main__
            module = importlib.import_module(f"{words[2]}.__main__")
        main = module.main
    defined_in = sys.modules[main.__module__]
    if hasattr(defined_in, "parse_config"):
        real = defined_in.parse_config

        def parse_config(types, given=None):
            raise Parsed(real(types, given))

        monkeypatch.setattr(defined_in, "parse_config", parse_config)
    else:
        real_parse_args = argparse.ArgumentParser.parse_args

        def parse_args(self, given=None, namespace=None):
            raise Parsed(real_parse_args(self, given, namespace))

        monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
    monkeypatch.setattr(sys, "argv", [words[2] if words[0] == "python" else words[1], *args])
    with pytest.raises(Parsed):
        main(args) if inspect.signature(main).parameters else main()


@pytest.mark.parametrize(("name", "shape", "line"), SUITE_LINES)
def test_every_command_of_the_list_parses(
    name: str, shape: str, line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(REPO)
    parse_only(line, tmp_path, monkeypatch)


def test_the_runner_records_ok_failed_and_skipped(tmp_path: Path, capsys):
    """One line each: the result file embedded, a failure's exit code, a missing file skipped."""
    suite = tmp_path / "suite.yaml"
    write = "import json, sys; open(sys.argv[1], 'w').write(json.dumps({'pairs_per_s': 2.5}))"
    suite.write_text(
        yaml.safe_dump(
            {
                "benchmarks": [
                    {
                        "name": "ok",
                        "full": f'python -c "{write}" {{tmp}}/r.json',
                        "result": "r.json",
                    },
                    {"name": "fails", "full": ["python -c pass", "python -c 'exit(3)'"]},
                    {
                        "name": "needs",
                        "full": "python -c pass {run}/export",
                        "paths": ["{run}/export"],
                    },
                ]
            }
        )
    )
    out = tmp_path / "list.jsonl"
    argv = ["--suite", str(suite), "--shape", "full", "--out", str(out), "--run", str(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        run_list([*argv, "--only", "ok", "fails", "needs"])
    assert exit_info.value.code == 1
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["name"], r["status"], r["exit_code"]) for r in lines] == [
        ("ok", "ok", 0),
        ("fails", "failed", 3),
        ("needs", "skipped", None),
    ]
    assert lines[0]["result"] == {"pairs_per_s": 2.5} and lines[0]["shape"] == "full"
    assert lines[2]["reason"] == f"{tmp_path}/export is missing"
    assert {"cpu", "cores", "torch"} <= set(lines[0]["machine"]) and lines[0]["seconds"] > 0
    with pytest.raises(SystemExit) as exit_info:
        run_main(run_list, [*argv, "--only", "nosuch"])
    assert exit_info.value.code == 2
    assert "only: unknown nosuch; the list has ok, fails, needs" in capsys.readouterr().err


@pytest.mark.slow
def test_the_runner_runs_a_cheap_benchmark_at_its_smoke_shape(tmp_path: Path):
    out = tmp_path / "list.jsonl"
    command = [sys.executable, "-m", "benchmarks", "--only", "build_dataset", "--out", str(out)]
    subprocess.run(command, cwd=REPO, check=True, timeout=600)
    (line,) = [json.loads(text) for text in out.read_text().splitlines()]
    assert line["name"] == "build_dataset" and line["shape"] == "smoke"
    assert line["status"] == "ok" and line["exit_code"] == 0
    assert line["command"] == ["python -m benchmarks.build_dataset --n 2000 --workdir {tmp}/build"]
    assert "| 2,000 |" in line["output_tail"]
