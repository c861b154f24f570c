"""Repository contracts: stage imports point one way, one table of commands (no alias modules)
whose every command answers --help, the commands in the README and docs/ name commands of that
table and their flags, configs load."""

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
# estimators, designs, draw, records and recalibration); eval has no modules at its top.
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
        "report",  # the report: its inputs read once, the page and the Markdown renderings
        "zoo",  # the labeler leaderboard on the system zoo (relevance-grader zoo)
        "history",  # the evaluation history store (eval.search records into it)
        "search",  # the search command
        "api",  # the REST service
        "jobs",  # the main job and the study
    ),
}


def part_of(module: str) -> str | None:
    """The part of its layer a dotted module belongs to (judgments.annotate.app -> annotate,
    judgments.ppi -> *); None for a layer without parts."""
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
                if relative.name != "__init__.py":
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
        ("core.io", None),
    ],
)
def test_part_of(module: str, part: str | None):
    assert part_of(module) == part


# The one module that only runs another's main: ``accelerate launch -m train`` needs a package
# to launch (docs/training.md), and accelerate takes no console script.
LAUNCHED = ("train/__main__.py",)


def runs_only_another_main(path: Path) -> bool:
    """Whether a module is an alias: past its docstring it only imports (and re-exports) names
    and runs an imported ``main`` (``run_main(main)``, or ``runpy`` in a function), or points its
    package at another folder (``__path__ = ...``); it defines nothing of its own."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = tree.body[1:] if tree.body and isinstance(tree.body[0], ast.Expr) else tree.body
    names = [getattr(target, "id", "") for node in body if isinstance(node, ast.Assign)
             for target in node.targets]  # fmt: skip
    if "__path__" in names:
        return True
    runs = [node for node in body if isinstance(node, ast.If)]
    own = [
        node
        for node in body
        if not isinstance(node, (ast.Import, ast.ImportFrom, ast.If))
        and not (isinstance(node, ast.Assign) and names and set(names) <= {"__all__"})
        and not (isinstance(node, ast.FunctionDef) and "runpy" in ast.unparse(node))
    ]
    return bool(runs) and not own


def test_no_module_is_another_name_for_a_command():
    """One name per command: the ``relevance-grader`` table points at the module that does the
    work, and no module of the product only runs another module's main under a second name
    (``eval.checkpoint`` was ``measure.classification.checkpoint``)."""
    aliases = sorted(
        str(path.relative_to(REPO))
        for stage in STAGES
        for path in stage_files(stage)
        if runs_only_another_main(path) and str(path.relative_to(REPO)) not in LAUNCHED
    )
    assert aliases == []


@pytest.mark.parametrize(
    ("source", "alias"),
    [
        ('"""x"""\nfrom core.cli import run_main\nfrom a.b import main\n\n'
         'if __name__ == "__main__":\n    run_main(main)\n', True),
        ('"""x"""\nfrom core.cli import run_main\nfrom a.b import X, main\n\n__all__ = ["X"]\n\n'
         'if __name__ == "__main__":\n    run_main(main)\n', True),
        ('"""x"""\nimport runpy\n\n\ndef main() -> None:\n    runpy.run_module("b")\n\n\n'
         'if __name__ == "__main__":\n    main()\n', True),
        ('from pathlib import Path\n__path__ = [str(Path("b"))]\n', True),
        ('"""x"""\nfrom core.cli import run_main\n\n\ndef main(args=None):\n    return 1\n\n\n'
         'if __name__ == "__main__":\n    run_main(main)\n', False),
        ('"""x"""\nfrom a.b import f\n\n__all__ = ["f"]\n', False),
    ],
)  # fmt: skip
def test_the_alias_check_tells_an_alias_from_a_command(tmp_path: Path, source: str, alias: bool):
    module = tmp_path / "m.py"
    module.write_text(source, encoding="utf-8")
    assert runs_only_another_main(module) is alias


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


def benchmark_modules() -> list[str]:
    """The benchmarks, run from a checkout as ``python -m benchmarks.NAME`` (not installed, so
    not commands): the modules with a ``__main__`` block."""
    modules = []
    for path in stage_files("benchmarks"):
        if 'if __name__ == "__main__"' in path.read_text(encoding="utf-8"):
            parts = path.relative_to(REPO).with_suffix("").parts
            modules.append(".".join(parts[:-1] if parts[-1] == "__main__" else parts))
    return modules


def command_names() -> list[str]:
    from core.commands import COMMANDS

    return list(COMMANDS)


def is_benchmark(target: str) -> bool:
    """A benchmark module (``benchmarks.grading``) or the benchmarks' runner (``benchmarks``)."""
    return target.split(".")[0] == "benchmarks"


@functools.cache
def help_text(target: str) -> str:
    """What ``relevance-grader TARGET --help`` (a benchmark: ``python -m TARGET --help``) prints,
    asked in this process: one import of torch for all of them instead of one per command (the
    console script itself is run as a process in test_the_console_script_runs_as_a_process).
    The exit code must be 0."""
    from tests.commands import run_command, run_module

    # argparse wraps to the terminal's width; the flag check reads whole option lines.
    env = {**os.environ, "COLUMNS": "100"}
    if is_benchmark(target):
        result = run_module(target, ["--help"], env=env)
    else:
        result = run_command([*target.split(), "--help"], env=env)
    assert result.returncode == 0, f"{target} --help exited {result.returncode}: {result.stderr}"
    return result.stdout


@pytest.mark.parametrize("target", [*command_names(), *benchmark_modules()])
def test_every_command_prints_help(target: str):
    """Every command of the table, and every benchmark, imports, has its main and answers
    --help with a usage line that names it as typed."""
    text = help_text(target)
    assert "usage:" in text
    if not is_benchmark(target):
        assert f"usage: relevance-grader {target}" in text


@pytest.mark.slow
def test_the_console_script_runs_as_a_process():
    """The console script from a fresh interpreter: a command's help and a group's (the rest
    are asked in this process by help_text)."""
    for args, expected in (
        (["label", "--help"], "usage: relevance-grader label"),
        (["history", "gate", "--help"], "usage: relevance-grader history gate"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "core.commands", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert expected in result.stdout


# The guides, the results record (docs/results/) and the benchmark records (docs/benchmarks/,
# BENCHMARKS.md).
DOCUMENTS = [
    "README.md",
    "BENCHMARKS.md",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md")),
]


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


# Written by module, a product command has a second name: the docs write `relevance-grader NAME`.
# `python -m benchmarks.NAME` (not installed), `python -m pytest` and `accelerate launch -m
# train` (training on several processes) stay.
PRODUCT_PACKAGES = STAGES


def command_target(tokens: list[str]) -> tuple[str, list[str]] | str | None:
    """What a documented command line runs: (a command's name or a benchmark module, its
    arguments), a problem in words, or None for a line that runs nothing of the project."""
    from core.commands import COMMANDS

    by_module = {command.module: name for name, command in COMMANDS.items()}
    for i, token in enumerate(tokens):
        script = token == "relevance-grader"
        if token == "core.commands" and tokens[i - 1 : i] == ["-m"]:  # the script, from a checkout
            script = True
        if script:
            words = tokens[i + 1 : i + 3]
            if not words or words[0].startswith("-"):  # the script's own --help
                return None
            if words[0].isupper():  # a placeholder: relevance-grader NAME
                return words[0], []
            for size in (2, 1):
                if " ".join(words[:size]) in COMMANDS:
                    return " ".join(words[:size]), tokens[i + 1 + size :]
            return f"relevance-grader {words[0]}: not a command of the table"
        if token == "-m" and i + 1 < len(tokens) and (i == 0 or tokens[i - 1] != "pip"):
            module, args = tokens[i + 1], tokens[i + 2 :]
            if module == "core.commands":  # read on as the script
                continue
            launched = "accelerate" in tokens[:i]
            if module.split(".")[0] not in PRODUCT_PACKAGES:
                return (module, args) if module.split(".")[0] == "benchmarks" else None
            if launched and (module == "train" or module in by_module):
                return by_module.get(module, "train"), args
            name = by_module.get(module, "NAME")
            spelt = "accelerate launch -m" if launched else "python -m"
            return f"{spelt} {module}: a command's module; write `relevance-grader {name}`"
    return None


def documented_problems(text: str, help_of=None) -> tuple[list[str], int]:
    """(problems, commands checked) of the project commands in a Markdown ``text``: a name that
    is no command, a product command spelt by its module, a benchmark that is no module, and,
    with ``help_of(target)``, a flag the target's ``--help`` does not list as an option."""
    problems, found = [], 0
    benchmarks = set(benchmark_modules())
    for tokens in documented_commands(text):
        target = command_target(tokens)
        if target is None:
            continue
        found += 1
        if isinstance(target, str):
            problems.append(target)
            continue
        name, args = target
        if name.split(".")[-1].isupper():  # a placeholder: NAME, benchmarks.NAME
            continue
        if name.startswith("benchmarks.") and name not in benchmarks:
            problems.append(f"{name}: not a benchmark module ({' '.join(tokens)[:80]})")
            continue
        if help_of is None:
            continue
        flags = accepted_flags(help_of(name))
        # A quoted value such as "--concurrency 32" is passed through to another command.
        for flag in (a.split("=")[0] for a in args if re.fullmatch(r"--[\w-]+(=.*)?", a)):
            if flag not in flags:
                problems.append(f"{name} {flag}: not an option of its --help")
    return problems, found


@pytest.mark.parametrize("document", DOCUMENTS)
def test_documented_commands_are_commands_of_the_table(document: str):
    """Every command in the README, BENCHMARKS.md and docs/ is written `relevance-grader NAME`
    with NAME in the table (or is a benchmark module): none by the module that runs it."""
    text = (REPO / document).read_text(encoding="utf-8")
    problems, found = documented_problems(text)
    assert problems == []
    if document == "README.md":
        assert found >= 5


@pytest.mark.parametrize("script", [".ci/run", "install.sh"])
def test_the_scripts_run_commands_of_the_table(script: str):
    """CI's script and the install script run the product as a user does, by the command table
    (a module they named was deleted once, and only CI's main job found out)."""
    text = (REPO / script).read_text(encoding="utf-8")
    problems, _ = documented_problems(f"```bash\n{text}\n```\n")
    assert problems == []


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a Markdown text's headings (lower case, punctuation dropped,
    spaces as hyphens, a repeated heading numbered), code blocks left out."""
    anchors, seen, fenced = set(), {}, False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"#{1,6} (.*)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_anchors_follow_github():
    assert heading_anchors(
        "# A B\n```\n# not one\n```\n## 2026-11-23 — The job's (CPU-B)\n# A B"
    ) == {
        "a-b",
        "2026-11-23--the-jobs-cpu-b",
        "a-b-1",
    }


@pytest.mark.parametrize("document", DOCUMENTS)
def test_documented_links_lead_somewhere(document: str):
    """Every relative link of the README, BENCHMARKS.md and docs/ names a file of the repository,
    and a heading of it where the link has an anchor (the results and benchmark records moved
    into docs/results/ and docs/benchmarks/; a link left behind is caught here)."""
    path = REPO / document
    text = path.read_text(encoding="utf-8")
    problems = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            problems.append(f"{target}: no such file")
        elif (
            anchor
            and linked.suffix == ".md"
            and anchor not in heading_anchors(linked.read_text(encoding="utf-8"))
        ):
            problems.append(f"{target}: no such heading")
    assert problems == []


@pytest.mark.parametrize("document", DOCUMENTS)
def test_documented_commands_use_only_their_flags(document: str):
    """Every flag a documented command gives is one its --help lists as an option."""
    text = (REPO / document).read_text(encoding="utf-8")
    problems, _ = documented_problems(text, help_text)
    assert problems == []


CHECKED = """
  ```bash
  $ relevance-grader search --run r.trec --corpus c \\
      --labeler qrels:q.tsv --made_up 1 | tee log --append
  ```

```console
cd runs && relevance-grader search --config s.yaml --stat-test fisher --lab qrels:q.tsv
```

Inline: `relevance-grader search --run r.trec --compare` and `relevance-grader search --human_pair x`;
`relevance-grader ppi --run r.trec --human q.qrels` (ppi's help says "(--human)" in prose);
`relevance-grader history gate --store s --margn 1`, `relevance-grader evaluat --data d`,
`python -m eval.search --run r.trec`, `python -m measure.labelers.rerank --run r`,
`accelerate launch -m measure.labelers.rerank --run r`, `python -m benchmarks.nosuch`,
`python -m benchmarks.grading --pairs 3` and `python -m pytest -q`.

```python
python -m eval.search --not_shell_code
```
"""


def test_the_documented_command_check_catches_every_other_name():
    problems, found = documented_problems(CHECKED)
    assert found == 12
    assert problems == [
        "relevance-grader evaluat: not a command of the table",
        "python -m eval.search: a command's module; write `relevance-grader NAME`",
        "python -m measure.labelers.rerank: a command's module; write `relevance-grader rerank`",
        "benchmarks.nosuch: not a benchmark module (python -m benchmarks.nosuch)",
    ]


def test_the_documented_command_check_catches_what_the_parser_would_refuse():
    """The check itself: a made-up flag, a flag only the help's prose mentions, an abbreviation
    argparse would expand, in a fenced block (indented, with a prompt, after ``&&``) or inline,
    are each caught; a pipe's flags and an option's alias are not the command's problem."""

    def help_of(target: str) -> str:
        assert target in ("search", "ppi", "history gate", "rerank", "benchmarks.grading")
        return help_text(target)

    problems, _ = documented_problems(CHECKED, help_of)
    assert problems[:4] == [
        "search --made_up: not an option of its --help",
        "search --lab: not an option of its --help",
        "search --human_pair: not an option of its --help",
        "ppi --human: not an option of its --help",
    ]
    assert problems[4] == "history gate --margn: not an option of its --help"
    # Only the synopsis and option lines count, not a flag named in an option's help text.
    assert "--human" in help_of("ppi") and "--human" not in accepted_flags(help_of("ppi"))
    usage = help_of("search")
    assert {"--run", "--compare", "--stat-test", "--stat_test", "--config"} <= accepted_flags(usage)
    assert "--made_up" not in accepted_flags(usage)


def test_the_console_script_lists_and_runs_every_command(capsys, monkeypatch):
    from core.commands import COMMANDS, main, usage

    assert all(name in usage() for name in COMMANDS)
    monkeypatch.setattr(sys, "argv", ["relevance-grader"])
    for args, code, stream, line in [
        (["nosuch"], 2, "err", "error: unknown command 'nosuch'; `relevance-grader --help` lists them"),
        (["history"], 2, "err", "error: history: give a command: record, list, show, compare, gate, monitor, page"),
        (["history", "gauge"], 2, "err", "error: history: unknown command 'gauge'; expected one of record, list, show, compare, gate, monitor, page"),
        (["history", "--help"], 0, "out", "usage: relevance-grader history COMMAND [--help] [ARGS ...]"),
        (["build", "--help"], 0, "out", "usage: relevance-grader build"),
    ]:  # fmt: skip
        with pytest.raises(SystemExit) as exit_info:
            main(args)
        assert exit_info.value.code == code, args
        printed = capsys.readouterr()
        assert getattr(printed, stream).startswith(line), args


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
    "benchmarks/suite.yaml": "tests/benchmarks/test_suite.py::test_every_command_of_the_list_parses",
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
