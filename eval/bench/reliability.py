"""Reliability campaign: bad inputs get one clear line, teacher faults lose and mislabel nothing.

    python -m eval.bench.reliability            # the table and the figures
    python -m eval.bench.reliability --json out.json

Bad inputs: each case runs a command's ``main`` in this process (as ``python -m`` would, through
``data.cli.run_main``) on files made for it, and passes when the command exits non-zero with a
last line ``error: ...`` that names what is wrong (the option, the file and line) and no
traceback, and the files it was given are unchanged.

Teacher faults: ``data.label`` against a fault-injecting OpenAI-compatible endpoint
(:mod:`eval.bench.fake_openai`: 429s, 500s, cut-off replies, invalid JSON and text/plain bodies,
non-answers), killed with SIGKILL mid-run and resumed; counted: pairs lost, completed pairs paid
twice, labels taken from unusable replies. The figures go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import io
import json
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from data import COLLECTIONS
from data.io import markdown_table
from models.assets import TINY_TOKENIZER

ADI = COLLECTIONS / "adi"


@dataclass(frozen=True)
class Case:
    name: str
    module: str
    args: list[str]  # "{dir}" is the case's folder
    expect: list[str]  # every string must appear in the error line (case-insensitive)


JUDGMENT = {
    "qid": "q1",
    "query": "what is an axon",
    "doc_id": "d1",
    "text": "An axon ...",
    "grade": 3,
}
PAIR = {"qid": "q1", "query": "what is an axon", "doc_id": "d1", "text": "An axon ..."}


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def make_files(root: Path) -> None:
    """The inputs the cases point at: good ones, and each kind of bad one."""
    judgments = [
        {**JUDGMENT, "qid": f"q{i % 10}", "doc_id": f"d{i}", "grade": i % 4} for i in range(60)
    ]
    (root / "judgments.jsonl").write_text(_jsonl(judgments))
    (root / "pairs.jsonl").write_text(_jsonl([PAIR]))
    # A judgment is also a valid pair: the bad files serve data.build and data.label alike.
    (root / "missing-field.jsonl").write_text(_jsonl([JUDGMENT, {"qid": "q2", "query": "x"}]))
    (root / "bad-json.jsonl").write_text(_jsonl([JUDGMENT]) + "{not json\n")
    (root / "latin1.jsonl").write_bytes(
        _jsonl([JUDGMENT]).encode() + '{"qid": "é"}\n'.encode("latin-1")
    )
    (root / "a-folder").mkdir()
    (root / "a-file").write_text("not a folder\n")
    (root / "run-dup.trec").write_text("1 Q0 1 1 2.0 r\n1 Q0 1 2 1.0 r\n")
    (root / "run-nan.trec").write_text("1 Q0 1 1 nan r\n")
    (root / "run-short.trec").write_text("1 Q0 1 1 2.0\n")
    (root / "run-empty.trec").write_text("\n")
    for folder in ("system-a", "system-b"):  # two files, one system name
        (root / folder).mkdir()
        (root / folder / "run.trec").write_text("1 Q0 1 1 2.0 r\n")
    (root / "run-other-queries.trec").write_text("2 Q0 1 1 2.0 r\n")
    (root / "run-unknown-doc.trec").write_text("1 Q0 1 1 2.0 r\n1 Q0 nosuchdoc 2 1.0 r\n")
    two_texts = [JUDGMENT, {**JUDGMENT, "doc_id": "other", "query": "another text"}]
    (root / "one-qid-two-texts.jsonl").write_text(_jsonl(two_texts))
    (root / "blank-query.jsonl").write_text(_jsonl([{**JUDGMENT, "query": " \u200b "}]))
    (root / "labels.cache.jsonl").write_text(_jsonl([JUDGMENT]))
    (root / "holds-judgments").mkdir()
    (root / "holds-judgments" / "judgments.jsonl").write_text(_jsonl(judgments))
    (root / "syntax.yaml").write_text("test_size: 0.3\njudgments: [a\n")
    (root / "types-list.yaml").write_text("test_size: [0.3]\n")
    (root / "types-str.yaml").write_text("judgments: judgments.jsonl\n")
    (root / "types-int.yaml").write_text("concurrency: lots\n")
    (root / "not-a-mapping.yaml").write_text("- a\n- b\n")
    (root / "latin1.yaml").write_bytes("model: caf\xe9\n".encode("latin-1"))
    checkpoint = root / "truncated-config"
    checkpoint.mkdir()
    (checkpoint / "grader_config.json").write_text(json.dumps({"mode": "full"}))
    (checkpoint / "config.json").write_text('{"architectures": ["LlamaForSeq')
    weights = root / "truncated-weights"
    weights.mkdir()
    (weights / "grader_config.json").write_text(json.dumps({"mode": "full"}))
    (weights / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForSequenceClassification"],
                "model_type": "llama",
                "hidden_size": 8,
                "intermediate_size": 16,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "num_hidden_layers": 1,
                "vocab_size": 32,
            }
        )
    )
    shutil.copytree(TINY_TOKENIZER, weights, dirs_exist_ok=True)
    (weights / "model.safetensors").write_bytes(b'\x08\x00\x00\x00\x00\x00\x00\x00{"a":')
    (root / "grader-config-bad.json").write_text("{")


# One bad input per line: command | case | arguments | words the error line must contain.
# {dir} is the case's folder (make_files); {build}, {label} and {search} are the commands' usual
# good arguments, {adi} the committed ADI collection and {qrels} its qrels as a labeler.
CASE_TABLE = """
data.build | missing judgments file | --judgments {dir}/nope.jsonl | nope.jsonl
data.build | judgments is a folder | --judgments {dir}/a-folder | a-folder
data.build | judgments line is not JSON | --judgments {dir}/bad-json.jsonl | bad-json.jsonl:2
data.build | judgments record misses a field | --judgments {dir}/missing-field.jsonl | missing-field.jsonl:2
data.build | judgments not UTF-8 | --judgments {dir}/latin1.jsonl | latin1.jsonl:2, utf-8
data.build | test_size 1.5 | {build} --test_size 1.5 | test_size
data.build | test_size 0 | {build} --test_size 0 | test_size
data.build | validation_size -0.1 | {build} --validation_size -0.1 | validation_size
data.build | max_pairs_per_query -3 | {build} --max_pairs_per_query -3 | max_pairs_per_query
data.build | target_ratio 0 | {build} --target_ratio 0 | target_ratio
data.build | split_by unknown | {build} --split_by doc | split_by
data.build | balance unknown | {build} --balance lots | balance
data.build | out is a file | --judgments {dir}/judgments.jsonl --out {dir}/a-file | a-file
data.build | YAML syntax error | --config {dir}/syntax.yaml | syntax.yaml:, YAML
data.build | YAML list for a number | --config {dir}/types-list.yaml {build} | types-list.yaml, test_size
data.build | YAML string for a list | --config {dir}/types-str.yaml | types-str.yaml, judgments
data.build | YAML not a mapping | --config {dir}/not-a-mapping.yaml | not-a-mapping.yaml
data.build | YAML file missing | --config {dir}/nope.yaml | nope.yaml
data.label | YAML not UTF-8 | --config {dir}/latin1.yaml | latin1.yaml, utf-8
data.label | pairs missing | --pairs {dir}/nope.jsonl --out {dir}/l.jsonl | nope.jsonl
data.label | pairs record misses a field | --pairs {dir}/missing-field.jsonl --out {dir}/l.jsonl | missing-field.jsonl:2
data.label | label out is a folder | --pairs {dir}/pairs.jsonl --out {dir}/a-folder | a-folder, folder
data.label | concurrency words in YAML | --config {dir}/types-int.yaml {label} | types-int.yaml, concurrency
data.label | concurrency 0 | {label} --backend openai --concurrency 0 | concurrency
data.label | batch_size 0 | {label} --batch_size 0 | batch_size
data.label | samples 0 | {label} --samples 0 | samples
data.label | parse_retries -1 | {label} --parse_retries -1 | parse_retries
data.label | unknown prompt | {label} --backend qrels --qrels {adi}/qrels.tsv --prompt nope | nope
data.label | qrels backend without qrels | {label} --backend qrels | qrels
data.label | binary qrels without grade_map | {label} --backend qrels --qrels {adi}/qrels.tsv | grade_map
data.label | unknown backend | {label} --backend gpt | backend
eval.search | search k 0 | {search} --k 0 | k
eval.search | search k -1 | {search} --k -1 | k
eval.search | batch_queries 0 | {search} --batch_queries 0 | batch_queries
eval.search | run ranks a document twice | --run {dir}/run-dup.trec --corpus {adi} --labeler {qrels} --out {dir}/s | run-dup.trec:2, twice
eval.search | run score NaN | --run {dir}/run-nan.trec --corpus {adi} --labeler {qrels} --out {dir}/s | run-nan.trec:1, score
eval.search | run line short | --run {dir}/run-short.trec --corpus {adi} --labeler {qrels} --out {dir}/s | run-short.trec:1
eval.search | run missing | --run {dir}/nope.trec --corpus {adi} --labeler {qrels} | nope.trec
eval.search | labeler unknown kind | --run {dir}/system-a/run.trec --corpus {adi} --labeler oracle:x | oracle
eval.search | run empty | --run {dir}/run-empty.trec --corpus {adi} --labeler {qrels} --out {dir}/s | run-empty.trec, empty run
eval.search | two runs with one name | --run {dir}/system-a/run.trec --compare {dir}/system-b/run.trec --corpus {adi} --labeler {qrels} --out {dir}/s | both system 'run'
eval.search | runs over different queries | --run {dir}/system-a/run.trec --compare {dir}/run-other-queries.trec --corpus {adi} --labeler {qrels} --out {dir}/s | rank different queries
eval.search | stat_test unknown | {search} --stat_test bogus | stat_test
eval.rerank | rerank onto its own run | --run {dir}/system-a/run.trec --corpus {adi} --grader {dir}/a-folder --out {dir}/system-a/run.trec | would replace --run
eval.rerank | rerank unknown document | --run {dir}/run-unknown-doc.trec --corpus {adi} --grader {dir}/a-folder --out {dir}/r.trec | nosuchdoc, corpus.jsonl
data.label | label out onto its cache | --pairs {dir}/pairs.jsonl --out {dir}/labels.cache.jsonl --cache {dir}/labels.cache.jsonl | would replace --cache
data.build | build out holds its judgments | --judgments {dir}/holds-judgments/judgments.jsonl --out {dir}/holds-judgments --overwrite true | would replace --judgments
data.build | build label_threshold 5 | --judgments {dir}/judgments.jsonl --label_threshold 5 --out {dir}/ds | label_threshold
data.build | build one query id, two texts | --judgments {dir}/one-qid-two-texts.jsonl --out {dir}/ds | one-qid-two-texts.jsonl:2, query
data.build | build blank query | --judgments {dir}/blank-query.jsonl --out {dir}/ds | blank-query.jsonl:1, blank query
data.candidates | candidates k 0 | --collection {adi} --k 0 --out {dir}/c | k
data.candidates | candidates collection missing | --collection {dir}/nope --out {dir}/c | nope
eval.rerank | rerank k 0 | --run {dir}/run-dup.trec --corpus {adi} --grader {dir}/a-folder --k 0 | k
models.export | export of a non-checkpoint | --checkpoint {dir}/a-folder --out {dir}/e | a-folder
models.export | export truncated config.json | --checkpoint {dir}/truncated-config --out {dir}/e | config.json
models.export | export truncated weights | --checkpoint {dir}/truncated-weights --out {dir}/e | model.safetensors
models.export | export onto the checkpoint | --checkpoint {dir}/truncated-config --out {dir}/truncated-config | would replace --checkpoint
models.export | export onto a user's folder | --checkpoint {dir}/truncated-config --out {dir}/users | not a previous export
eval.checkpoint | evaluate batch_size 0 | --judgments {dir}/judgments.jsonl --batch_size 0 | batch_size
eval.checkpoint | evaluate missing data | --judgments {dir}/nope.jsonl --data {dir}/nope.jsonl | nope.jsonl
train | train mode unknown | --mode everything | mode
train | train dataset missing | --dataset {dir}/nope --model_name_or_path {dir}/a-folder | nope
"""


def cases() -> list[Case]:
    shorthands = {
        "{build}": "--judgments {dir}/judgments.jsonl --out {dir}/ds",
        "{label}": "--pairs {dir}/pairs.jsonl --out {dir}/labels.jsonl",
        "{search}": "--run {adi}/qrels.tsv --corpus {adi} --labeler {qrels}",
        "{qrels}": "qrels:{adi}/qrels.tsv",
        "{adi}": str(ADI),
    }
    table = []
    for line in CASE_TABLE.strip().splitlines():
        module, name, arguments, expect = (cell.strip() for cell in line.split(" | "))
        for short, full in shorthands.items():
            arguments = arguments.replace(short, full)
        table.append(Case(name, module, arguments.split(), [w.strip() for w in expect.split(",")]))
    return table


@dataclass
class Outcome:
    case: Case
    exit_code: int | None
    last_line: str
    clear: bool
    traceback: bool
    inputs_unchanged: bool
    seconds: float

    @property
    def passed(self) -> bool:
        return self.clear and not self.traceback and self.inputs_unchanged and bool(self.exit_code)


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def run_case(case: Case, root: Path) -> Outcome:
    from data.cli import run_main

    folder = root / case.name.replace(" ", "-").replace("'", "")
    folder.mkdir()
    make_files(folder)
    (folder / "users").mkdir()
    (folder / "users" / "notes.txt").write_text("a user's file\n")
    before = _digest(folder)
    args = [a.replace("{dir}", str(folder)) for a in case.args]
    module = importlib.import_module(case.module if case.module != "train" else "train.train")
    main: Callable = module.main
    stderr, stdout = io.StringIO(), io.StringIO()
    code: int | None = 0
    crashed = False
    start = time.perf_counter()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
        try:
            run_main(main, args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception:  # what a user would see as a traceback
            crashed = True
            code = 1
            traceback.print_exc(file=stderr)
    seconds = time.perf_counter() - start
    lines = [line for line in stderr.getvalue().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    clear = last.lower().startswith(("error:", f"{Path(sys.argv[0]).name}: error:")) or (
        ": error: " in last
    )
    clear = clear and all(word.lower() in last.lower() for word in case.expect)
    after = _digest(folder)
    unchanged = all(after.get(name) == digest for name, digest in before.items())
    return Outcome(case, code, last[:240], clear, crashed, unchanged, round(seconds, 2))


def campaign(selected: list[Case] | None = None) -> list[Outcome]:
    import logging

    logging.disable(logging.CRITICAL)  # the commands' progress logs are not what is judged
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return [run_case(case, Path(tmp)) for case in (selected or cases())]
    finally:
        logging.disable(logging.NOTSET)


def report(outcomes: list[Outcome]) -> str:
    rows = [
        [
            o.case.name,
            o.case.module,
            o.exit_code,
            "yes" if o.clear and not o.traceback else "NO: " + o.last_line,
            "yes" if o.inputs_unchanged else "NO",
        ]
        for o in outcomes
    ]
    header = ["case", "command", "exit", "clear one-line error", "inputs unchanged"]
    passed = sum(o.passed for o in outcomes)
    lines = [markdown_table(header, rows)]
    lines.append(
        f"{passed}/{len(outcomes)} bad inputs: clear one-line error, non-zero exit, inputs kept; "
        f"{sum(o.traceback for o in outcomes)} tracebacks"
    )
    return "\n".join(lines)


# Modes of the fake endpoint; the unusable ones can never give a label.
FAULT_MODES = {
    "delay": 50,
    "truncated-once": 8,
    "429-once": 6,
    "500-twice": 6,
    "not-json": 6,
    "text-plain": 6,
    "garbage": 6,
    "reply=No_idea,_sorry.": 6,
    "reply=I_can't_answer_yes_or_no_to_that.": 6,
}
UNUSABLE = {"not-json", "text-plain", "garbage"} | {
    m for m in FAULT_MODES if m.startswith("reply=")
}


def kill_when_cached(
    command: list[str], cache: Path, lines: int, env: dict[str, str], timeout: float = 120
) -> None:
    """Run a labelling command and SIGKILL it once its cache holds ``lines`` finished pairs."""
    import signal
    import subprocess

    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + timeout
    while time.time() < deadline and process.poll() is None:
        if cache.exists() and len(cache.read_text().splitlines()) >= lines:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()


def teacher_faults(root: Path, kill_after: int = 30) -> dict[str, int]:
    """Label pairs against the faulty endpoint, SIGKILL mid-run, resume; count what went wrong."""
    import os
    import subprocess

    from data.cli import cli_args
    from data.io import read_records
    from data.records import Judgment
    from eval.bench.fake_openai import FakeOpenAI

    modes = [mode for mode, count in FAULT_MODES.items() for _ in range(count)]
    rows = [
        {
            "qid": f"q{i % 7}",
            "query": f"query {i % 7}",
            "doc_id": f"d{i}",
            "text": f"[[id=d{i} mode={mode} rel={i % 2}]] body",
        }
        for i, mode in enumerate(modes)
    ]
    pairs, out = root / "fault-pairs.jsonl", root / "fault-judgments.jsonl"
    pairs.write_text(_jsonl(rows))
    cache = out.with_suffix(".cache.jsonl")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with FakeOpenAI() as server:
        command = [
            sys.executable,
            "-m",
            "data.label",
            *cli_args(
                pairs=pairs,
                out=out,
                backend="openai",
                model="fake",
                prompt="binary-cot",
                base_url=server.base_url,
                concurrency=4,
                max_retries=3,
                parse_retries=1,
            ),
        ]
        kill_when_cached(command, cache, kill_after, env)
        written_before_end = out.exists()  # the final file is only written at the end
        finished = {
            json.loads(line)["doc_id"]
            for line in cache.read_text().splitlines()
            if line.endswith("}") and json.loads(line).get("error") is None
        }
        paid_before = dict(server.requests)
        resumed = subprocess.run(command, env=env, capture_output=True, text=True)
        paid_twice = sum(server.requests[d] > paid_before.get(d, 0) for d in finished)
    judged = {j.doc_id: j for j in read_records(out, Judgment)} if out.exists() else {}
    cached = [json.loads(line) for line in cache.read_text().splitlines()]
    # A failed pair is retried and cached again; a finished pair is cached once.
    keys = [entry["cache_key"] for entry in cached if entry.get("error") is None]
    by_id = {row["doc_id"]: mode for row, mode in zip(rows, modes, strict=True)}
    return {
        "pairs": len(rows),
        "finished_before_kill": len(finished),
        "resume_exit": resumed.returncode,
        "output_written_before_the_end": written_before_end,
        "finished_pairs_cached_twice": len(keys) - len(set(keys)),
        "pairs_lost": len(rows) - len(judged),
        "completed_pairs_paid_twice": paid_twice,
        "labels_from_unusable_replies": sum(
            j.label is not None for d, j in judged.items() if by_id[d] in UNUSABLE
        ),
        "error_records": sum(j.error is not None for j in judged.values()),
        "unusable_pairs": sum(m in UNUSABLE for m in modes),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="Also write the outcomes here.")
    options = parser.parse_args(argv)
    outcomes = campaign()
    print(report(outcomes))
    with tempfile.TemporaryDirectory() as tmp:
        faults = teacher_faults(Path(tmp))
    print(
        f"\nteacher faults: {faults['pairs']} pairs, SIGKILL after "
        f"{faults['finished_before_kill']} finished, resumed: {faults['pairs_lost']} pairs lost, "
        f"{faults['completed_pairs_paid_twice']} completed pairs paid twice, "
        f"{faults['labels_from_unusable_replies']} labels from unusable replies "
        f"({faults['error_records']} error records for {faults['unusable_pairs']} unusable pairs)"
    )
    if options.json:
        Path(options.json).write_text(
            json.dumps(
                [
                    {
                        "case": o.case.name,
                        "module": o.case.module,
                        "exit": o.exit_code,
                        "error": o.last_line,
                        "passed": o.passed,
                    }
                    for o in outcomes
                ],
                indent=2,
            )
        )
    faults_ok = not (
        faults["pairs_lost"]
        or faults["completed_pairs_paid_twice"]
        or faults["labels_from_unusable_replies"]
    )
    sys.exit(0 if all(o.passed for o in outcomes) and faults_ok else 1)


if __name__ == "__main__":
    main()
