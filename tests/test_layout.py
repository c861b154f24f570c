"""Repository contracts: stage imports point one way, every step answers --help, the commands in
the README and docs/ name real modules and flags, configs load."""

from __future__ import annotations

import ast
import functools
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STAGES = ("core", "data", "models", "train", "measure", "judgments", "eval")
# docs/design.md, "Layout": each layer imports only the layers below it, so there is no import
# cycle between them. core (records, I/O, the cache, the command line, processes, classification
# metrics) is the bottom; models builds on it; data's stages (collections, teacher labels,
# datasets) on both; train on those; measure (the labelers, the retrieval-metric library,
# held-out classification evaluation) and judgments (people's judgments: PPI++, designs, the
# judging page, recalibration) above; eval (the commands and services: search, report, history,
# API, jobs) on all. Beside the product, run from a checkout and not installed: the benchmarks
# (benchmarks/: any product layer and the doubles), the doubles they share with the tests
# (support/: the bottom layer at most) and the tests; no product layer imports any of them, and
# the benchmarks and the tests do not import each other (but tests/benchmarks/ tests them).
LAYERS = ("core", "models", "data", "train", "measure", "judgments", "eval")
MAY_IMPORT = {layer: set(LAYERS[: i + 1]) for i, layer in enumerate(LAYERS)}
MAY_IMPORT["benchmarks"] = {*LAYERS, "benchmarks", "support"}
MAY_IMPORT["support"] = {"core", "support"}
BESIDE = ("benchmarks", "support")
# Above train, only eval's jobs that train import train.
EVAL_MAY_TRAIN = ("eval/jobs/",)


def stage_files(stage: str) -> list[Path]:
    return sorted(p for p in (REPO / stage).rglob("*.py") if "__pycache__" not in p.parts)


def layer_of(module: str) -> str | None:
    """The layer a dotted module name belongs to (core.io -> core, data.label -> data)."""
    if module == "core" or module.startswith("core."):
        return "core"
    top = module.split(".")[0]
    return top if top in (*STAGES, *BESIDE, "tests") else None


def imported_modules(path: Path) -> set[str]:
    """Every project module ``path`` imports, at the top or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if layer_of(name) is not None}


def imported_stages(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_modules(path)}


def layer_violations(relative: str, modules: set[str]) -> list[str]:
    """The modules that ``relative`` (a file's path in the repository) may not import."""
    own = layer_of(relative.removesuffix(".py").replace("/", "."))
    return sorted(name for name in modules if layer_of(name) not in MAY_IMPORT[own])


@pytest.mark.parametrize("stage", [*STAGES, *BESIDE])
def test_every_import_points_down_the_layers(stage: str):
    offenders = {}
    for path in stage_files(stage):
        relative = str(path.relative_to(REPO))
        if found := layer_violations(relative, imported_modules(path)):
            offenders[relative] = found
    assert offenders == {}


@pytest.mark.parametrize(
    ("module", "imports", "allowed"),
    [
        ("core/io.py", "models.resolve", False),
        ("core/io.py", "data.label", False),
        ("models/grader.py", "core.io", True),
        ("models/grader.py", "data.beir", False),
        ("data/label.py", "models.llm_client", True),
        ("data/label.py", "eval.search", False),
        ("train/train.py", "measure.classification.checkpoint", False),
        ("eval/search/command.py", "support.fake_openai", False),
        ("eval/search/command.py", "benchmarks.common", False),
        ("measure/labelers/__init__.py", "tests.doubles", False),
        ("benchmarks/reliability.py", "support.fake_openai", True),
        ("benchmarks/reliability.py", "eval.api", True),
        ("benchmarks/training.py", "train.trainer", True),
        ("benchmarks/reliability.py", "tests.doubles", False),
        ("support/fake_openai.py", "core.io", True),
        ("support/fake_openai.py", "eval.api", False),
        ("support/fake_openai.py", "benchmarks.common", False),
    ],
)
def test_the_layer_check_catches_an_import_against_the_design(
    tmp_path: Path, module: str, imports: str, allowed: bool
):
    probe = tmp_path / "probe.py"
    probe.write_text(f"def late():\n    from {imports} import something\n", encoding="utf-8")
    assert (REPO / module).exists()
    assert (layer_violations(module, imported_modules(probe)) == []) is allowed


def test_only_the_jobs_that_train_import_train():
    offenders = sorted(
        str(path.relative_to(REPO))
        for layer in ("measure", "judgments", "eval")
        for path in stage_files(layer)
        if "train" in imported_stages(path)
        and not str(path.relative_to(REPO)).startswith(EVAL_MAY_TRAIN)
    )
    assert offenders == []


# docs/design.md, "Inside the layers": the upper layers' parts by role, each importing only the
# parts before it in its layer. "*" stands for the modules at the layer's top (judgments' PPI++
# estimators, designs, draw, records and recalibration). eval's top modules are commands' names
# (thin, such as eval.ppi for judgments.draw) and may import any part.
PARTS = {
    "measure": (
        "labelers",  # the labelers, the RAG reader of the eRAG ones, the grader rerank
        "metrics",  # the retrieval-metric library, labelling runs, ranking agreement, the results
        "zoo",  # the system zoo: its definition, its systems, the leaderboard's record
        "classification",  # held-out classification evaluation: baselines, checkpoints, plots
    ),
    "judgments": (
        "*",  # PPI++ estimators, designs and the draw, records and the store, recalibration
        "annotate",  # the judging page
    ),
    "eval": (
        "zoo",  # the labeler leaderboard on the system zoo (relevance-grader zoo)
        "report",  # the HTML report
        "history",  # the evaluation history store (eval.search records into it)
        "search",  # the eval.search command
        "api",  # the REST service
        "jobs",  # the main job and the study
    ),
}
# eval's folders that only keep former command names (each module a few lines).
FORMER_NAMES = ("annotate", "bench", "downstream")


def part_of(module: str) -> str | None:
    """The part of its layer a dotted module belongs to (judgments.annotate.app -> annotate,
    judgments.ppi -> *); None for a layer without parts and for eval's commands (eval.ppi)."""
    layer, *rest = module.split(".")
    parts = PARTS.get(layer, ())
    if rest and rest[0] in parts:
        return rest[0]
    return "*" if "*" in parts else None


def test_parts_import_one_way():
    offenders = {}
    for layer, parts in PARTS.items():
        for path in stage_files(layer):
            relative = path.relative_to(REPO)
            own = part_of(".".join(relative.with_suffix("").parts))
            if own is None:
                if len(relative.parts) > 2 and relative.parts[1] not in FORMER_NAMES:
                    offenders[str(relative)] = [f"in no part of PARTS[{layer!r}]"]
                continue
            allowed = set(parts[: parts.index(own) + 1])
            found = sorted(
                name
                for name in imported_modules(path)
                if name.split(".")[0] == layer and part_of(name) not in allowed
            )
            if found:
                offenders[str(relative)] = found
    assert offenders == {}


@pytest.mark.parametrize(
    ("module", "part"),
    [
        ("judgments.annotate.app", "annotate"),
        ("judgments.ppi", "*"),
        ("measure.metrics.retrieval", "metrics"),
        ("eval.history.store", "history"),
        ("eval.ppi", None),
        ("core.io", None),
    ],
)
def test_part_of(module: str, part: str | None):
    assert part_of(module) == part


def test_eval_top_holds_only_thin_commands():
    """Each module at eval's top, or in a folder of former names, is a command's name that runs a
    part's main (at most a few lines), so that every piece of the product lives in the one
    folder of its role."""
    thin = [*(REPO / "eval").glob("*.py")]
    thin += [path for name in FORMER_NAMES for path in (REPO / "eval" / name).glob("*.py")]
    fat = {
        str(path.relative_to(REPO)): len(path.read_text(encoding="utf-8").splitlines())
        for path in thin
        if path.name != "__init__.py" and len(path.read_text(encoding="utf-8").splitlines()) > 15
    }
    assert fat == {}


def test_only_the_tests_of_the_benchmarks_import_them():
    """Tests import a benchmark only to test it, under tests/benchmarks/."""
    offenders = sorted(
        str(path.relative_to(REPO))
        for path in stage_files("tests")
        if "benchmarks" in imported_stages(path)
        and not str(path.relative_to(REPO)).startswith("tests/benchmarks/")
    )
    assert offenders == []


def test_no_module_outside_the_families_tests_a_mode_name():
    """A mode's meaning lives in models/families (the registry) and its family's modules; the rest
    asks the family. A mode name compared or matched elsewhere is a new branch to find."""
    from models.families import MODES

    quoted = "|".join(f"[\"']{re.escape(name)}[\"']" for name in MODES)
    comparison = re.compile(
        rf"(==|!=|\bin)\s*[(\[{{]?\s*({quoted})|({quoted})\s*(==|!=|\bin\b|\bnot in\b)"
    )
    offenders = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for stage in (*STAGES, *BESIDE)
        for path in stage_files(stage)
        if "families" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if comparison.search(line)
    ]
    assert offenders == []


def step_modules() -> list[str]:
    modules = []
    for stage in (*STAGES, "benchmarks"):
        for path in stage_files(stage):
            if 'if __name__ == "__main__"' in path.read_text(encoding="utf-8"):
                parts = path.relative_to(REPO).with_suffix("").parts
                modules.append(".".join(parts[:-1] if parts[-1] == "__main__" else parts))
    return modules


def test_there_are_steps():
    assert {"data.validate", "models.prepare"} <= set(step_modules())


def test_every_step_imports_in_process_with_its_entry_point():
    """The fast tier's side of the --help check (slow: one process per step): every step module,
    the former names among them, imports and has the main its ``__main__`` block calls."""
    import importlib

    from data.judge_agreement import main as judge_agreement
    from measure.metrics.ranking_agreement import main as ranking_agreement

    for module in step_modules():
        imported = importlib.import_module(module)
        if not hasattr(imported, "main"):  # a package run as ``python -m train``
            imported = importlib.import_module(f"{module}.__main__")
        assert callable(imported.main), module
    assert importlib.import_module("data.agreement").main is judge_agreement
    assert importlib.import_module("eval.agreement").main is ranking_agreement


@functools.cache
def help_texts() -> dict[str, subprocess.CompletedProcess]:
    """``python -m MODULE --help`` of every step, run on every core at once (each one is mostly
    importing torch and transformers, so one after another they cost minutes)."""
    from concurrent.futures import ThreadPoolExecutor

    def run(module: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", module, "--help"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )

    modules = step_modules()
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(zip(modules, pool.map(run, modules), strict=True))


def help_text(module: str) -> subprocess.CompletedProcess:
    return help_texts()[module]


@pytest.mark.slow
@pytest.mark.parametrize("module", step_modules())
def test_every_step_prints_help(module: str):
    result = help_text(module)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout


DOCUMENTS = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]


SHELL_FENCES = ("", "bash", "sh", "shell", "console", "zsh")
# What ends one command of a line and starts the next (a pipe's flags are not the module's).
SHELL_OPERATORS = {"|", "||", "&&", ";", "&"}


def documented_commands(text: str) -> list[list[str]]:
    """Command lines of a Markdown text: every command of the lines of its shell code blocks
    (fences indented or not, continuations joined, a ``$ `` prompt dropped, ``a | b`` and
    ``a && b`` split) and inline code that starts a command."""
    lines, block, language = [], None, ""
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if block is None:
                block, language = [], line.lstrip()[3:].strip()
            else:
                if language in SHELL_FENCES:
                    lines += "\n".join(block).replace("\\\n", " ").splitlines()
                block = None
        elif block is not None:
            block.append(line.strip())
    lines += re.findall(r"`((?:python -m|relevance-grader|accelerate launch) [^`]+)`", text)
    commands = []
    for line in lines:
        line = line.removeprefix("$ ").replace("\\|", "|")
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError:
            continue
        command: list[str] = []
        for token in [*tokens, ";"]:
            if token in SHELL_OPERATORS:
                if command:
                    commands.append(command)
                command = []
            else:
                command.append(token)
    return commands


def accepted_flags(help_output: str) -> set[str]:
    """The flags an argparse ``--help`` names as options: those of its usage synopsis and of its
    option lines (aliases such as ``--stat-test`` included), never a flag its prose mentions;
    ``--config`` where the parser takes a YAML of its flags (core.cli.parse_config)."""
    usage, _, rest = help_output.partition("\n\n")
    flags = set(re.findall(r"--[\w-]+", usage))
    for line in rest.splitlines():
        # An option line is indented by two spaces; its help text, by more.
        match = re.match(r"  (-\S.*?)(?:\s{2,}|$)", line)
        if match:
            flags.update(re.findall(r"--[\w-]+", match.group(1)))
    if "--config FILE.yaml gives values" in help_output:
        flags.add("--config")
    return flags


def unknown_flags(text: str, help_of) -> tuple[list[str], int]:
    """(problems, commands checked) of the project commands in a Markdown ``text``: a module that
    is not a step, or a flag its ``--help`` (``help_of(module)``) does not list as an option."""
    problems, found = [], 0
    steps = set(step_modules())
    for tokens in documented_commands(text):
        parsed = command_module(tokens)
        if parsed is None or parsed[0] in ("pytest", "pip"):
            continue
        found += 1
        module, args = parsed
        if module.isupper():  # a placeholder such as MODULE
            continue
        if module not in steps:
            problems.append(f"{module}: not a step module ({' '.join(tokens)[:80]})")
            continue
        flags = accepted_flags(help_of(module))
        # A quoted value such as "--concurrency 32" is passed through to another command.
        for flag in (a.split("=")[0] for a in args if re.fullmatch(r"--[\w-]+(=.*)?", a)):
            if flag not in flags:
                problems.append(f"{module} {flag}: not an option of its --help")
    return problems, found


def command_module(tokens: list[str]) -> tuple[str, list[str]] | None:
    """(module, its arguments) of ``python -m MODULE ...``, ``accelerate launch ... -m MODULE ...``
    or ``relevance-grader COMMAND ...``; None for any other line."""
    from core.commands import COMMANDS

    for i, token in enumerate(tokens):
        if token == "-m" and i + 1 < len(tokens) and (i == 0 or tokens[i - 1] != "pip"):
            return tokens[i + 1], tokens[i + 2 :]
        if token == "relevance-grader" and i + 1 < len(tokens) and tokens[i + 1] in COMMANDS:
            return COMMANDS[tokens[i + 1]][0], tokens[i + 2 :]
    return None


@pytest.mark.slow
@pytest.mark.parametrize("document", DOCUMENTS)
def test_documented_commands_name_real_modules_and_flags(document: str):
    """Every command in the README and docs/ is a step module whose --help lists each flag used
    as one of its options."""
    text = (REPO / document).read_text(encoding="utf-8")
    problems, found = unknown_flags(text, lambda module: help_text(module).stdout)
    assert problems == []
    if document == "README.md":
        assert found >= 5


@pytest.mark.slow
def test_the_documented_command_check_catches_what_the_parser_would_refuse():
    """The check itself: a made-up flag, a flag only the help's prose mentions, an abbreviation
    argparse would expand, in a fenced block (indented, with a prompt, after ``&&``) or inline,
    are each caught; a pipe's flags and an option's alias are not the module's problem."""

    def help_of(module: str) -> str:
        assert module in ("eval.search", "eval.ppi")
        result = subprocess.run(
            [sys.executable, "-m", module, "--help"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return result.stdout

    text = """
  ```bash
  $ python -m eval.search --run r.trec --corpus c \\
      --labeler qrels:q.tsv --made_up 1 | tee log --append
  ```

```console
cd runs && relevance-grader search --config s.yaml --stat-test fisher --lab qrels:q.tsv
```

Inline: `python -m eval.search --run r.trec --compare` and `relevance-grader search --human_pair x`;
`python -m eval.ppi --run r.trec --human q.qrels` (eval.ppi's help says "(--human)" in prose).

```python
python -m eval.search --not_shell_code
```
"""
    problems, found = unknown_flags(text, help_of)
    assert found == 5
    assert problems == [
        "eval.search --made_up: not an option of its --help",
        "eval.search --lab: not an option of its --help",
        "eval.search --human_pair: not an option of its --help",
        "eval.ppi --human: not an option of its --help",
    ]
    # Only the synopsis and option lines count, not a flag named in an option's help text.
    assert "--human" in help_of("eval.ppi") and "--human" not in accepted_flags(help_of("eval.ppi"))
    usage = help_of("eval.search")
    assert {"--run", "--compare", "--stat-test", "--stat_test", "--config"} <= accepted_flags(usage)
    assert "--made_up" not in accepted_flags(usage)


def test_the_console_script_lists_and_runs_every_command():
    from core.commands import COMMANDS, usage

    assert set(module for module, _ in COMMANDS.values()) <= set(step_modules())
    assert all(name in usage() for name in COMMANDS)
    result = subprocess.run(
        [sys.executable, "-m", "core.commands", "build", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage: relevance-grader build")
    unknown = subprocess.run(
        [sys.executable, "-m", "core.commands", "nosuch"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert unknown.returncode == 2 and "unknown command 'nosuch'" in unknown.stderr


# Each YAML location and the test that loads every file in it.
YAML_LOADED_BY = {
    "accelerate_config.yaml": "tests/test_accelerate_config.py",
    "train/configs/*.yaml": "tests/train/test_train.py::test_every_training_config_parses",
    "train/configs/accelerate/*.yaml": "tests/train/test_train.py::test_accelerate_variants_parse",
    "data/prompts/*.yaml": "tests/data/test_label.py::test_every_prompt_loads_with_name_version_and_slots",
    "data/prompts/queries/*.yaml": "tests/data/test_synthesize.py::test_every_query_prompt_loads",
    "data/configs/engines/*.yaml": "tests/data/test_engine.py::test_every_preset_loads_and_fills_a_short_yaml",
    "data/configs/qa-mix*.yaml": "tests/data/test_mix.py::test_every_mix_config_loads_and_builds_under_runs",
    "eval/configs/main.yaml": "tests/eval/test_pipeline.py::test_main_config_parses",
    "eval/configs/study*.yaml": "tests/eval/test_study.py::test_study_configs_parse",
    "eval/configs/reader-*.yaml": "tests/eval/test_downstream.py::test_reader_and_judge_configs_load",
    "eval/configs/judge-*.yaml": "tests/eval/test_downstream.py::test_reader_and_judge_configs_load",
    "eval/configs/zoo/*.yaml": "tests/measure/test_zoo.py::test_every_committed_zoo_loads",
    "eval/configs/leaderboard-*.yaml": "tests/eval/test_zoo.py::test_every_leaderboard_config_parses",
    "benchmarks/downstream/squad.yaml": "tests/benchmarks/test_downstream.py::test_squad_config_parses",
}


def test_every_yaml_config_is_loaded_by_a_test():
    """A new YAML file outside these locations needs a test that loads it (and an entry here)."""
    covered = {path for pattern in YAML_LOADED_BY for path in REPO.glob(pattern)}
    # The repository's files (tracked, or new and not ignored): a job's outputs under runs/
    # (a fold's training config among them) are not configs of the project.
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.yaml", "*.yml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    configs = {
        REPO / name
        for name in listed
        if (REPO / name).exists() and not any(part.startswith(".") for part in Path(name).parts)
    }
    assert sorted(str(p.relative_to(REPO)) for p in configs - covered) == []
    assert len(list(REPO.glob("train/configs/*.yaml"))) >= 10
