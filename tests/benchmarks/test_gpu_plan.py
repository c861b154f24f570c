"""The GPU kit (benchmarks.gpu.gpu_plan): its dry run goes through every step of the plan on the CPU
with tiny shapes, refusing the packages the GPU machine lacks; the model's parts rebuild the file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.gpu.gpu_plan import (
    CALL_OVERHEAD_S,
    DEVICE_S,
    FINISHED,
    GGUF_PARTS,
    NOT_ON_THE_GPU,
    REPO,
    SERVED_CONFIG,
    SERVING_PARTS,
    SETTINGS_FILE,
    START_S,
    WHEELS_LIST,
    Plan,
    call_sequence,
    first_part_bytes,
    left_to_run,
    main,
    measured_with,
    parser,
    read_archive,
    write_archive,
)
from benchmarks.gpu.gpu_steps import (
    compress_for_travel,
    join_parts,
    split_file,
    unmet_requirements,
    unpack_parts,
)


def test_the_parts_rebuild_the_file_and_a_missing_or_damaged_part_is_named(tmp_path: Path):
    original = tmp_path / "model.gguf"
    original.write_bytes(os.urandom(100_003))
    folders = [tmp_path / f"part{i}" for i in range(3)]
    manifest = split_file(original, folders)
    assert [p["size"] for p in manifest["parts"]] == [33_335, 33_335, 33_333]
    joined = join_parts(folders, tmp_path / "out" / "model.gguf")
    assert joined["sha256"] == manifest["sha256"]
    assert (tmp_path / "out" / "model.gguf").read_bytes() == original.read_bytes()

    with pytest.raises(FileNotFoundError, match=r"model\.gguf\.part1"):
        join_parts([folders[0], folders[2]], tmp_path / "again" / "model.gguf")
    damaged = folders[2] / "model.gguf.part2"
    damaged.write_bytes(b"x" + damaged.read_bytes()[1:])
    with pytest.raises(ValueError, match="damaged"):
        join_parts(folders, tmp_path / "again" / "model.gguf")
    assert not (tmp_path / "again" / "model.gguf").exists()

    uneven = [tmp_path / f"uneven{i}" for i in range(2)]
    assert [p["size"] for p in split_file(original, uneven, [40_000])["parts"]] == [40_000, 60_003]
    assert join_parts(uneven, tmp_path / "uneven" / "model.gguf")["sha256"] == manifest["sha256"]
    with pytest.raises(ValueError, match="cannot cut"):
        split_file(original, [tmp_path / "x", tmp_path / "y"], [100_003])


def test_a_compressed_file_travels_in_parts_and_unpacks_to_the_original(tmp_path: Path):
    """The kit carries the GGUF xz-compressed (the calls' room); the GPU machine joins the parts,
    checks them and decompresses; a kit from before the compression still joins as it was."""
    original = tmp_path / "model.gguf"
    original.write_bytes(os.urandom(50_000) + bytes(50_000))  # half noise, half compressible
    packed = compress_for_travel(original, tmp_path / "cache" / "model.gguf.xz")
    assert packed.stat().st_size < 0.6 * original.stat().st_size
    folders = [tmp_path / f"part{i}" for i in range(2)]
    split_file(packed, folders)
    out, manifest = unpack_parts(folders, tmp_path / "work" / "model.gguf")
    assert out.read_bytes() == original.read_bytes() and manifest["file"] == "model.gguf.xz"
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.gguf"]  # the .xz is gone

    plain = [tmp_path / f"plain{i}" for i in range(2)]
    split_file(original, plain)
    out, _ = unpack_parts(plain, tmp_path / "old" / "model.gguf")
    assert out.read_bytes() == original.read_bytes()


def test_the_calls_carry_each_part_once_and_leave_the_same_room(tmp_path: Path):
    """Call 1 carries the wheels and runs steps 1 and 3; call 2 the rest of the model and the
    baselines, and runs step 4; the cut leaves both calls the same room."""
    calls = call_sequence(tmp_path, finished=tmp_path / "finished.tar.gz")
    carried = [Path(c).name for call in calls for c in call["carry"]]
    parts = [f"smollm2-part{i}" for i in range(GGUF_PARTS)]
    assert sorted(c for c in carried if c.startswith("smollm2")) == parts
    assert carried.count("wheels") == 1 and "wheels" in calls[0]["carry"][0]
    step4 = [call for call in calls if "--steps 4" in call["command"]]
    assert len(step4) == 1 and any("baselines" in c for c in step4[0]["carry"])
    model, wheels, baselines = 98_362_432, 5_376_000, 158_687
    first = first_part_bytes(model, wheels, baselines)
    assert abs((wheels + first) - (model - first + baselines)) <= 1


def every_trained_study_row() -> dict[str, bytes]:
    from benchmarks.gpu.gpu_steps import STUDY, STUDY_MODELS

    folds = range(STUDY["gpu"]["folds"])
    return {f"study/fold-{k}/{model}/metrics.json": b"{}" for k in folds for model in STUDY_MODELS}


@pytest.mark.parametrize("device_s", [DEVICE_S, 2 * DEVICE_S])
def test_the_calls_fit_the_sessions_device_time(tmp_path: Path, device_s: float):
    """A start, every call at its time limit and its own cost stay within the session's device
    time; a session the study leaves no room in runs no levers, and once every study row has come
    back, the study's call is left out and the levers get its time."""
    archive = tmp_path / "finished.tar.gz"
    for finished in (False, True):
        if finished:
            step3 = ("grading-real", "grading-full512", *SERVING_PARTS)
            done = {f"done/{part}.json": b"{}" for part in step3}
            settings = {SETTINGS_FILE: json.dumps(measured_with()).encode()}
            write_archive(archive, {**every_trained_study_row(), **done, **settings})
            assert left_to_run(archive) == {"step3": [], "study_rows": []}
        calls = call_sequence(tmp_path, device_s, archive)
        spent = START_S + sum(c["timeout_s"] + CALL_OVERHEAD_S for c in calls)
        assert spent <= device_s and all(c["timeout_s"] <= 600 for c in calls)
        assert all(c["budget_s"] < c["timeout_s"] for c in calls)
        study = [c for c in calls if "--steps 4" in c["command"]]
        levers = [c for c in calls if " levers " in c["command"]]
        assert len(study) == (0 if finished else 1)
        assert len(levers) == (1 if finished or device_s > DEVICE_S else 0)
        assert all(f"--budget_s {c['budget_s']} " in c["command"] for c in calls)


def test_what_a_call_finished_comes_back_and_seeds_the_next_session(tmp_path: Path):
    """A part's record and each finished study row go into one archive beside --out (a call
    brings back 8 files at most, 2 folders down); collect merges it into --finished (committed); a
    fresh machine's run seeds its work folder from it and re-reports the part (with the date it
    was measured) instead of running it. Parts that leave files on the machine, and study rows
    without their metrics, do not travel; --fresh takes nothing."""
    first = Plan(
        parser().parse_args(
            ["run", "--work", str(tmp_path / "a"), "--out", str(tmp_path / "out1" / "c.jsonl")]
        )
    )
    figures = tmp_path / "figures.json"
    script = f"import json; json.dump({{'pairs_per_s': 5.0}}, open({str(figures)!r}, 'w'))"
    for name in ("grading-real", "setup-dataset"):
        assert (
            first.part(3, name, [sys.executable, "-c", script], figures, min_s=0)["status"] == "ok"
        )
    rows = (
        ("fold-0/lora", ("predictions.jsonl", "metrics.json")),
        ("fold-0/bm25", ("predictions.jsonl", "metrics.json")),  # seconds from carried scores
        ("fold-1/lora", ("predictions.jsonl",)),  # not finished
    )
    for row, files in rows:
        for name in files:
            (tmp_path / "a" / "study" / row).mkdir(parents=True, exist_ok=True)
            (tmp_path / "a" / "study" / row / name).write_text("{}\n")
    first.export_finished()
    assert sorted(p.name for p in (tmp_path / "out1").iterdir()) == ["c.jsonl", "c.log", FINISHED]
    assert sorted(read_archive(tmp_path / "out1" / FINISHED)) == [
        "done/grading-real.json",
        SETTINGS_FILE,
        "study/fold-0/lora/metrics.json",
        "study/fold-0/lora/predictions.jsonl",
    ]

    kit, finished = tmp_path / "kit", tmp_path / "committed" / "finished.tar.gz"
    returned = ["--returned", str(tmp_path / "out1")]
    main(["collect", "--kit", str(kit), "--finished", str(finished), *returned])
    assert read_archive(finished)["study/fold-0/lora/predictions.jsonl"] == b"{}\n"
    assert (kit / "returned").is_dir()
    everything = len(left_to_run(tmp_path / "none")["study_rows"])
    assert len(left_to_run(finished)["study_rows"]) == everything - 1
    packed = finished.read_bytes()
    main(["collect", "--kit", str(kit), "--finished", str(finished), *returned])
    assert finished.read_bytes() == packed  # the same files, the same bytes: no noise in git

    args = ["run", "--steps", "1,3", "--work", str(tmp_path / "b"), "--finished", str(finished)]
    second = Plan(parser().parse_args([*args, "--out", str(tmp_path / "out2" / "c.jsonl")]))
    second.seed_finished()
    assert (tmp_path / "b" / "study/fold-0/lora/predictions.jsonl").exists()
    again = second.part(3, "grading-real", [sys.executable, "-c", "exit(1)"], figures, min_s=0)
    assert again["status"] == "ok" and again["from_earlier_call"]
    assert again["figures"] == {"pairs_per_s": 5.0}
    assert again["measured"] == first.results["grading-real"]["date"]
    assert not (tmp_path / "b" / "done" / "setup-dataset.json").exists()
    # Config C's export does not travel: while step 3 still has parts to serve, C trains again.
    assert second.serves_step3(SERVED_CONFIG)
    for part in SERVING_PARTS:
        (tmp_path / "b" / "done" / f"{part}.json").write_text("{}")
    assert not second.serves_step3(SERVED_CONFIG)

    fresh = Plan(
        parser().parse_args([*args, "--out", str(tmp_path / "o3.jsonl"), "--fresh", "true"])
    )
    shutil.rmtree(tmp_path / "b")
    fresh.seed_finished()
    assert not (tmp_path / "b" / "done" / "grading-real.json").exists()


def test_results_of_other_settings_are_neither_reused_nor_mixed(tmp_path: Path):
    """A dry run's archive (or one measured with other sizes) plans and seeds nothing on the GPU,
    and collect refuses to merge it into an archive of other settings; a damaged archive is
    recorded and the call goes on."""
    row = "study/fold-0/lora/metrics.json"
    dry = {row: b"{}", SETTINGS_FILE: json.dumps({**measured_with(), "kind": "dry"}).encode()}
    write_archive(tmp_path / "dry.tar.gz", dry)
    assert len(left_to_run(tmp_path / "dry.tar.gz")["study_rows"]) == len(
        left_to_run(tmp_path / "none.tar.gz")["study_rows"]
    )
    out = tmp_path / "out.jsonl"
    args = ["run", "--work", str(tmp_path / "w"), "--out", str(out)]
    plan = Plan(parser().parse_args([*args, "--finished", str(tmp_path / "dry.tar.gz")]))
    plan.seed_finished()
    assert not (tmp_path / "w" / row).exists()
    assert json.loads(out.read_text().splitlines()[-1])["status"] == "skipped"

    (tmp_path / "returned").mkdir()
    shutil.copyfile(tmp_path / "dry.tar.gz", tmp_path / "returned" / FINISHED)
    committed = tmp_path / "committed.tar.gz"
    write_archive(committed, {SETTINGS_FILE: json.dumps(measured_with()).encode()})
    collect = ["collect", "--kit", str(tmp_path / "kit"), "--finished", str(committed)]
    with pytest.raises(SystemExit, match="other settings"):
        main([*collect, "--returned", str(tmp_path / "returned")])
    assert read_archive(committed) == {SETTINGS_FILE: json.dumps(measured_with()).encode()}
    for damaged in (b"not gzip", None):  # not an archive; an archive without its settings
        if damaged is None:
            write_archive(tmp_path / "returned" / FINISHED, {"done/x.json": b"{}"})
        else:
            (tmp_path / "returned" / FINISHED).write_bytes(damaged)
        with pytest.raises(SystemExit, match="not a plan's archive of finished work"):
            main([*collect, "--returned", str(tmp_path / "returned")])
    assert read_archive(committed) == {SETTINGS_FILE: json.dumps(measured_with()).encode()}

    (tmp_path / "damaged.tar.gz").write_bytes(b"not gzip")
    plan = Plan(parser().parse_args([*args, "--finished", str(tmp_path / "damaged.tar.gz")]))
    plan.seed_finished()
    assert json.loads(out.read_text().splitlines()[-1])["status"] == "failed"


def test_a_long_part_sends_what_finished_while_it_runs(tmp_path: Path, monkeypatch):
    """The device tool may cut a call short of its limit: while a part runs (the study: up to
    440 s), what finished is exported every EXPORT_EVERY_S, not only when it ends."""
    import benchmarks.gpu.gpu_plan as gpu_plan

    monkeypatch.setattr(gpu_plan, "EXPORT_EVERY_S", 0.2)
    args = ["run", "--work", str(tmp_path / "w"), "--out", str(tmp_path / "out.jsonl")]
    plan = Plan(parser().parse_args(args))
    exports = []
    monkeypatch.setattr(plan, "export_finished", lambda: exports.append(time.monotonic()))
    plan.part(4, "study", [sys.executable, "-c", "import time; time.sleep(1.5)"], min_s=0)
    assert len(exports) >= 5  # every 0.2 s while it ran, and once at its end


def test_a_failed_part_keeps_what_it_measured_and_is_not_taken_as_done(tmp_path: Path):
    """On the first GPU, three checks failed at their export and their training figures were lost
    with them; a part that wrote figures before failing now keeps them in its record."""
    args = parser().parse_args(
        ["run", "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out.jsonl")]
    )
    plan = Plan(args)
    figures = tmp_path / "figures.json"
    script = f"import json; json.dump({{'loss_falls': True}}, open({str(figures)!r}, 'w')); exit(3)"
    line = plan.part(1, "check-x", [sys.executable, "-c", script], figures, min_s=0)
    assert line["status"] == "failed" and line["returncode"] == 3
    assert line["figures"] == {"loss_falls": True}
    assert not (tmp_path / "work" / "done" / "check-x.json").exists()  # run again next call
    recorded = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert recorded[-1]["figures"] == {"loss_falls": True}


def test_unmet_requirements_of_the_carried_wheels_are_listed(tmp_path: Path):
    info = tmp_path / "site" / "carried-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: carried\nVersion: 1.0\n"
        "Requires-Dist: numpy>=999\n"
        "Requires-Dist: pyyaml\n"
        "Requires-Dist: no-such-package-here\n"
        "Requires-Dist: other-missing; extra == 'docs'\n"
        "Requires-Dist: old-python-only; python_version < '3.0'\n"
    )
    problems = unmet_requirements(str(tmp_path / "site"))
    assert len(problems) == 2
    assert problems[0].startswith("carried needs no-such-package-here, found None")
    assert problems[1].startswith("carried needs numpy>=999, found ")


def test_the_wheel_list_pins_each_package_once_and_none_the_gpu_plan_refuses():
    lines = [
        line.strip()
        for line in (REPO / WHEELS_LIST).read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", line) for line in lines)
    names = [line.split("==")[0].lower().replace("_", "-") for line in lines]
    assert len(names) == len(set(names))
    assert {"trl", "datasets", "pydantic", "pydantic-core", "gguf"} <= set(names)
    assert not {name.replace("_", "-") for name in NOT_ON_THE_GPU} & set(names)


@pytest.mark.slow
def test_the_dry_run_records_every_step_of_the_plan(tmp_path: Path):
    """The plan's dry run, as the GPU runs it but tiny and on the CPU (one step-1 config, the
    one step 3 serves): each step ran and left its figures in the one results file. Then a fresh
    machine, seeded with what came back: every finished part is re-reported, not run, and the
    study keeps every finished row."""
    out = tmp_path / "call1" / "results.jsonl"
    command = [
        sys.executable,
        "-m",
        "benchmarks.gpu.gpu_plan",
        "run",
        "--dry_run",
        "true",
        "--work",
        str(tmp_path / "work"),
        "--out",
        str(out),
        "--configs",
        "llama-3.2-1b-C-full",
        "--budget_s",
        "1800",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = [r["record"] for r in records]
    assert kinds[0] == "install" and "environment" in kinds and kinds[-1] == "summary"
    steps = {r["step"]: r for r in records if r["record"] == "step"}
    failed = {s: r.get("errors") for s, r in steps.items() if r["status"] != "ran"}
    assert sorted(steps) == [1, 2, 3, 4] and failed == {}
    assert records[-1]["steps"] == {"1": "ran", "2": "ran", "3": "ran", "4": "ran"}

    parts = {r["part"]: r for r in records if r["record"] in ("part", "part-figures")}
    assert all("date" in r and "command" in r for r in parts.values() if r["status"] == "ok")
    check = parts["check-llama-3.2-1b-C-full"]["figures"]
    assert check["loads_and_scores"] and check["export"]["round_trip_passed"]
    assert check["real_tokens_per_s"] > 0 and check["losses_logged"] == 2
    training = {name: parts[name] for name in parts if name.startswith("training-")}
    assert training["training-paper-padded-full"]["figures"]["batch_size"] == 4
    assert training["training-ours-full-compiled"]["status"] == "skipped"
    grading = parts["grading-real"]["figures"]
    assert grading["paths"][2]["path"].startswith("paper") and grading["paths"][2]["x_paper"] == 1
    assert parts["grading-full512"]["figures"]["mean_tokens"] == 256  # every input cut there
    assert parts["grading-data-parallel-rerank"]["figures"]["pairs"] == 43 * 3
    assert parts["serving-model-card"]["figures"]["max_abs_difference_snippet_vs_grader"] < 1e-4
    study = parts["study"]["figures"]
    assert set(study["pooled"]["pooled"]) == {"bm25", "cosine", "C-full", "lora", "ql-all-layers"}
    assert study["trainable_layers_ql"] == study["student_layers"] == 2
    assert (tmp_path / "call1" / "results.log").exists()

    finished = tmp_path / "committed" / "finished.tar.gz"
    returned = ["--returned", str(tmp_path / "call1")]
    left = [p for p in (tmp_path / "call1").rglob("*") if p.is_file()]
    assert len(left) <= 8 and all(len(p.relative_to(tmp_path / "call1").parts) <= 3 for p in left)
    main(["collect", "--kit", str(tmp_path / "kit"), "--finished", str(finished), *returned])
    first_run = {n: b for n, b in read_archive(finished).items() if n.endswith("metrics.json")}
    assert len(first_run) == 2 * 3  # the dry run's 2 folds x 3 trained models
    shutil.rmtree(tmp_path / "work")
    again = tmp_path / "call2" / "results.jsonl"
    command[command.index(str(out))] = str(again)
    command += ["--finished", str(finished), "--steps", "1,3,4"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = [json.loads(line) for line in again.read_text().splitlines()]
    parts = {r["part"]: r for r in records if r["record"] == "part"}
    carried = [name for name in parts if not name.startswith(("setup-", "environment", "study"))]
    assert carried and all(parts[name]["from_earlier_call"] for name in carried)
    for name, content in first_run.items():
        assert (tmp_path / "work" / name).read_bytes() == content, name
    assert parts["study"]["status"] == "ok"
