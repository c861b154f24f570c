"""Teacher labels: judge (query, document) pairs with a large LLM (or human qrels), resumably.

    # human judgments as the teacher (TREC DL 2019 judged pool)
    relevance-grader label --collection data/collections/trec-dl-2019-passage --pool_from_qrels true \\
        --backend qrels --qrels data/collections/trec-dl-2019-passage/qrels.tsv --out runs/labels/human.jsonl
    # the embedded local judge on 500 pairs, scored from yes/no token probabilities
    relevance-grader label --collection data/collections/trec-dl-2019-passage --pool_from_qrels true \\
        --backend hf --model smollm2-135m --prompt binary --sample 500 --out runs/labels/smollm2.jsonl
    # any OpenAI-compatible endpoint (OpenAI, vLLM server, Ollama, llama.cpp server)
    relevance-grader label --pairs pairs.jsonl --backend openai --base_url http://localhost:8000/v1 \\
        --model meta-llama/Llama-3.1-70B-Instruct --prompt binary-cot --concurrency 32 --out judgments.jsonl
    relevance-grader label --config my-judge.yaml --sample 1000   # a YAML of the fields below

Pairs come from a pairs JSONL (``--pairs``) or from a BEIR collection plus a TREC run
(``--collection DIR --run RUN``) or its judged pool (``--pool_from_qrels true``).

Every finished judgment is appended (and flushed) to a cache keyed by a hash of (judge model,
prompt name+version, query, document, sampling settings), so a killed run loses nothing and a
re-run sends no request for a finished pair. The output JSONL is written atomically at the end in
input order, with a summary (done, cached, failed, tokens, cost, pairs/s).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from tqdm.auto import tqdm

from core.cli import bounded, parse_config, run_main
from core.errors import InputError
from core.io import KeyedCache, read_records, refuse_overlap, write_json, write_jsonl
from core.records import Judgment, Pair
from data.beir import Collection, read_trec_run
from data.judges.backends import BATCH_BACKENDS, JudgeConfig, make_backend
from data.judges.prompts import Prompt, load_prompt

if TYPE_CHECKING:
    from data.judges.batch import BatchRun

logger = logging.getLogger(__name__)
MIN_REPLIES_CHECKED = 20  # the share of unusable replies is judged from this many on


@dataclass
class LabelConfig:
    """Which pairs to judge and where the judgments go."""

    out: str = field(
        default="runs/labels/judgments.jsonl", metadata={"help": "Output judgments JSONL."}
    )
    pairs: str | None = field(
        default=None, metadata={"help": "Pairs JSONL (alternative to --collection)."}
    )
    collection: str | None = field(default=None, metadata={"help": "BEIR-layout folder."})
    run: str | None = field(
        default=None, metadata={"help": "TREC run with the pairs to judge (with --collection)."}
    )
    pool_from_qrels: bool = field(
        default=False,
        metadata={
            "help": "Judge the collection's judged pool (every qrels pair, by query id, then "
            "document id)."
        },
    )
    sample: int = bounded(0, 0, help="Judge a seeded random sample of this many pairs (0: all).")
    seed: int = field(default=0)
    cache: str | None = field(
        default=None, metadata={"help": "Cache JSONL (default: OUT with .cache.jsonl)."}
    )
    retry_errors: bool = field(
        default=True, metadata={"help": "Re-judge pairs whose cached judgment is an error."}
    )
    max_error_share: float = bounded(
        0.5,
        0,
        1,
        help=f"Stop when more than this share of this run's replies (once there are "
        f"{MIN_REPLIES_CHECKED}) is unusable: no answer, or a failed request. Finished "
        "judgments stay cached. 1: never stop.",
    )


@dataclass
class UnusableReplies:
    """Stops a run whose teacher mostly gives no usable reply (a prompt the model cannot follow,
    a server that refuses every request) where it happens, instead of a later stage failing on
    too few labels: one line naming the prompt, the teacher and a sample of what it replied."""

    max_share: float
    teacher: str
    replies: int = 0
    unusable: int = 0
    sample: str = ""

    def count(self, judgment: Judgment) -> None:
        self.replies += 1
        if judgment.error is None:
            return
        self.unusable += 1
        self.sample = self.sample or f"pair {judgment.qid}/{judgment.doc_id}: {judgment.error}"
        if self.replies >= MIN_REPLIES_CHECKED and self.unusable > self.max_share * self.replies:
            raise InputError(
                f"{self.unusable} of {self.replies} replies this run were unusable (more than "
                f"--max_error_share {self.max_share:g}) from {self.teacher}; e.g. "
                f"{self.sample[:300]}. The finished judgments are cached; change the prompt, "
                "the model or --response_format, or pass --max_error_share 1 to go on"
            )


def teacher_description(judge_config: JudgeConfig, prompt_id: str) -> str:
    """The prompt, the backend and where it runs, for messages about the teacher."""
    where = judge_config.base_url or judge_config.azure_endpoint
    place = f" at {where}" if where else ""
    return f"prompt {prompt_id}, backend {judge_config.backend}{place}, model {judge_config.model}"


def batch_record_path(out: Path) -> Path:
    """Where ``--batch true`` records its batches (and, in the folder of the same name, their
    request and result files): beside the output, so a re-run finds them."""
    return out.with_suffix(".batches.json")


def load_pairs(config: LabelConfig) -> list[Pair]:
    if config.pairs:
        pairs = list(read_records(config.pairs, Pair))
    elif config.collection:
        collection = Collection.load(config.collection)
        if config.run:
            pairs = list(collection.pairs(read_trec_run(config.run)))
        elif config.pool_from_qrels:
            pairs = list(collection.judged_pool())
        else:
            raise InputError("with --collection, give --run RUN or --pool_from_qrels true")
    else:
        raise InputError("pairs: give --pairs FILE or --collection DIR")
    if config.sample and config.sample < len(pairs):
        pairs = random.Random(config.seed).sample(pairs, config.sample)
        pairs.sort(key=lambda p: (p.qid, p.rank or 0, p.doc_id))
    return pairs


def cache_key(
    model: str, prompt_id: str, settings: dict[str, Any], pair: Pair, by_ids: bool = False
) -> str:
    """Identical texts share a judgment (an LLM judge sees only text); human qrels go by ids."""
    parts: list[Any] = [model, prompt_id, settings, pair.query, pair.title or "", pair.text]
    if by_ids:
        parts += [pair.qid, pair.doc_id]
    payload = json.dumps(parts, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def output_paths(label_config: LabelConfig, judge_config: JudgeConfig) -> tuple[Path, Path]:
    """(--out, the cache), checked before any pair is paid for: the judgments are written over
    --out at the end and the cache is appended to, so neither may land on the other or an input."""
    out = Path(label_config.out)
    if out.is_dir():
        raise IsADirectoryError(
            f"out: {out} is a folder; give a file such as {out}/judgments.jsonl"
        )
    if out.parent.exists() and not out.parent.is_dir():
        raise NotADirectoryError(f"out: {out.parent} is a file, not a folder")
    cache_path = Path(label_config.cache) if label_config.cache else out.with_suffix(".cache.jsonl")
    inputs = [
        ("pairs", label_config.pairs),
        ("run", label_config.run),
        ("qrels", judge_config.qrels),
    ]
    refuse_overlap("out", out, [("cache", cache_path), *inputs])
    refuse_overlap("cache", cache_path, inputs)
    if judge_config.batch and judge_config.backend not in BATCH_BACKENDS:
        raise InputError(
            f"batch: the {judge_config.backend} backend has no batch mode (it runs on "
            f"{', '.join(BATCH_BACKENDS)})"
        )
    return out, cache_path


class JudgeNamed(TypedDict):
    backend: str
    model: str
    prompt: str


class LabelSummary(TypedDict):
    """OUT.summary.json: what one labelling did (keys in the order written)."""

    pairs: int
    judged_now: int
    cached: int
    failed: int
    relevant: int
    input_tokens: int
    output_tokens: int
    estimated_cost: float
    seconds: float
    pairs_per_second: float | None  # None when nothing was judged now
    judge: JudgeNamed
    # The structured output the endpoint took (models.llm_client.ChatClient: json_schema, or
    # json_object / none after a refusal); None where no endpoint was asked in this run.
    response_format: str | None
    out: str
    cache: str
    batches: BatchRun | None  # --batch true's record
    config: dict[str, Any]  # {"label": LabelConfig, "judge": JudgeConfig}, as given


def judge_pairs(
    todo: list[Pair],
    keys: list[str],
    cache: KeyedCache[Judgment],
    key_of: Any,
    judge_config: JudgeConfig,
    prompt: Prompt,
    label_config: LabelConfig,
) -> tuple[BatchRun | None, str | None]:
    """Judge ``todo`` (cache ``keys``), each judgment cached as it arrives: the batch record of
    ``--batch true`` (else None), and the structured output the endpoint took (None: no
    endpoint was asked synchronously)."""
    judge = None
    if judge_config.batch:
        from data.judges.batch import BatchJudge

        judge = BatchJudge.for_config(
            judge_config,
            prompt,
            batch_record_path(Path(label_config.out)),
            sync_backend=lambda: make_backend(judge_config, prompt),
        )
    backend = judge.backend if judge else make_backend(judge_config, prompt)
    bar = tqdm(
        total=len(todo), desc=f"judging ({judge_config.backend})", unit="pair", file=sys.stderr
    )
    # Human qrels miss pairs by design; an LLM teacher's errors are replies it got wrong.
    unusable = (
        UnusableReplies(label_config.max_error_share, teacher_description(judge_config, prompt.id))
        if judge_config.backend != "qrels"
        else None
    )
    failed = 0

    def on_result(judgment: Judgment) -> None:
        nonlocal failed
        cache.put(key_of(judgment), judgment)  # cached first: a stop below loses nothing paid for
        failed += judgment.error is not None
        bar.update(1)
        bar.set_postfix(failed=failed, refresh=False)
        if unusable is not None:
            unusable.count(judgment)

    try:
        if judge is not None:
            return judge.run(todo, keys, on_result), None
        backend.run(todo, on_result)
        client = getattr(backend, "client", None)  # a chat backend's (not the qrels teacher's)
        return None, getattr(client, "accepted_response_format", None)
    finally:
        bar.close()
        backend.close()


def cost_of(judgments: list[dict[str, Any]], judge_config: JudgeConfig) -> float:
    """The estimated price: judgments from a Batch API at its price (about half), retries made
    synchronously at the full price."""
    cost = 0.0
    for j in judgments:
        usage = j.get("usage", {})
        batch = j.get("judge", {}).get("backend", "").endswith("-batch")
        factor = judge_config.batch_price_factor if batch else 1.0
        cost += factor * (
            usage.get("input_tokens", 0) / 1e6 * judge_config.price_input_per_mtok
            + usage.get("output_tokens", 0) / 1e6 * judge_config.price_output_per_mtok
        )
    return cost


def label(label_config: LabelConfig, judge_config: JudgeConfig) -> LabelSummary:
    out, cache_path = output_paths(label_config, judge_config)
    prompt = load_prompt(judge_config.prompt)
    pairs = load_pairs(label_config)
    settings = judge_config.sampling_settings(prompt)
    model_id = (
        judge_config.model if judge_config.backend != "qrels" else f"qrels:{judge_config.qrels}"
    )
    by_ids = judge_config.backend == "qrels"

    def key_of(pair: Pair) -> str:
        return cache_key(model_id, prompt.id, settings, pair, by_ids)

    keys = [key_of(p) for p in pairs]
    # Exclusive from the open: a second data.label on this cache is refused before it pays.
    with KeyedCache(
        cache_path, Judgment.model_validate, key_field="cache_key", exclusive=True
    ) as cache:
        first: dict[str, int] = {}
        for index, key in enumerate(keys):
            first.setdefault(key, index)
        retry = label_config.retry_errors
        todo_keys = [k for k in first if k not in cache or (retry and cache[k].error is not None)]
        todo = [pairs[first[k]] for k in todo_keys]
        logger.info(
            "%d pairs: %d cached, %d to judge with %s",
            len(pairs),
            len(pairs) - len(todo),
            len(todo),
            prompt.id,
        )
        start = time.perf_counter()
        batches, response_format = (
            judge_pairs(todo, todo_keys, cache, key_of, judge_config, prompt, label_config)
            if todo
            else (None, None)
        )
        elapsed = time.perf_counter() - start
        judgments = []
        for pair, key in zip(pairs, keys, strict=True):
            record = cache[key].model_dump(mode="json", exclude_none=True)
            record.pop("cache_key", None)
            # The cache is shared by pairs with identical text; keep this pair's own ids and rank.
            record.update(pair.pair_fields())
            judgments.append(record)
    write_jsonl(out, judgments)
    summary: LabelSummary = {
        "pairs": len(pairs),
        "judged_now": len(todo),
        "cached": len(pairs) - len(todo),
        "failed": sum(1 for j in judgments if j.get("error")),
        "relevant": sum(1 for j in judgments if j.get("label") == 1),
        "input_tokens": sum(j.get("usage", {}).get("input_tokens", 0) for j in judgments),
        "output_tokens": sum(j.get("usage", {}).get("output_tokens", 0) for j in judgments),
        "estimated_cost": round(cost_of(judgments, judge_config), 6),
        "seconds": round(elapsed, 2),
        "pairs_per_second": round(len(todo) / elapsed, 2) if todo and elapsed > 0 else None,
        "judge": {
            "backend": judge_config.backend,
            "model": judge_config.model,
            "prompt": prompt.id,
        },
        "response_format": response_format,
        "out": str(out),
        "cache": str(cache_path),
        "batches": batches,
        "config": {"label": asdict(label_config), "judge": asdict(judge_config)},
    }
    write_json(out.with_suffix(".summary.json"), summary)
    return summary


def main(args: Sequence[str] | None = None) -> None:
    label_config, judge_config = parse_config([LabelConfig, JudgeConfig], args)
    summary = label(label_config, judge_config)
    rate = f", {summary['pairs_per_second']} pairs/s" if summary["pairs_per_second"] else ""
    if summary["response_format"]:
        rate += f", response_format {summary['response_format']}"
    print(
        f"{summary['pairs']} pairs: {summary['judged_now']} judged now, {summary['cached']} from cache, "
        f"{summary['failed']} failed, {summary['relevant']} relevant; tokens in/out "
        f"{summary['input_tokens']}/{summary['output_tokens']}, est. cost {summary['estimated_cost']}"
        f"{rate} -> {summary['out']}"
    )


if __name__ == "__main__":
    run_main(main)
