"""Judgments → a training dataset: clean, split (by query or by pair), balance the train split.

    relevance-grader build --judgments runs/labels/judgments.jsonl --out runs/dataset
    relevance-grader build --judgments a.jsonl b.jsonl --split_by pair --balance both --target_ratio 1.0
    relevance-grader build --config my-build.yaml --seed 13   # a YAML of the fields below

Steps, in order:
1. read the judgments (strict: stop at the first bad line with ``file:line: field: problem``;
   ``--strict false``: skip bad lines and list each one in the manifest);
2. drop records with ``error``; a (qid, doc_id) pair judged twice keeps its last judgment
   (duplicates and conflicting verdicts counted); one text per query id, no empty document;
3. binary label from the grade at ``label_threshold`` (default: grade >= 2 of 0-3), or the
   judgment's own label when it has no grade;
4. sort by (query id, document id) and keep at most ``max_pairs_per_query`` pairs per query:
   from here on nothing depends on the input's line order (``data.splits``), so the same
   judgments in any order give the same folder, byte for byte;
5. split into train / test and carve validation from train: ``query`` mode keeps every query on
   one side, sized in queries and stratified by each query's share of relevant pairs (``--folds
   N``: N cross-validation folds instead, one folder each); ``pair`` mode is the paper's
   stratified 80/20;
6. balance the train split only (oversample positives, undersample negatives, or both) to
   ``target_ratio`` positives per negative. Validation and test are never resampled.

Output in ``out`` (with ``--folds``, in each ``out/fold-K``, and every tested pair once in
``out/tested.jsonl``): the splits as JSONL, a
``datasets.DatasetDict`` (``dataset/``), ``manifest.json`` (counts before and after balancing,
the held-out queries, sources with an order-free digest, seed, config, skipped lines) and a
printed summary table.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from core.artifacts import Artifact
from core.cli import bounded, check_choices, choice, parse_config, run_main
from core.errors import InputError
from core.io import (
    RecordError,
    check_replaceable,
    read_numbered_records,
    refuse_overlap,
    replace_folder,
    write_jsonl,
)
from core.records import (
    DEFAULT_RELEVANCE_THRESHOLD,
    EMPTY_DOCUMENT,
    Judgment,
    is_empty_document,
    keep_last,
    label_from_grade,
)
from data.splits import (
    MIN_VALIDATION_QUERIES,
    canonical_order,
    cap_per_query,
    held_out_queries,
    queries_for_share,
    query_folds,
    relevant_share,
)

logger = logging.getLogger(__name__)
SPLIT_MODES = ("query", "pair")
TESTED_FILE = "tested.jsonl"  # with --folds: every pair that some fold tests, each once
BALANCE_MODES = ("none", "oversample", "undersample", "both")
COLUMNS = (
    "qid",
    "query",
    "doc_id",
    "text",
    "title",
    "grade",
    "label",
    "confidence",
    "p_relevant",
    "rank",
    "retriever_score",
    "judge",
)


@dataclass
class BuildConfig:
    judgments: list[str] = field(
        default_factory=list, metadata={"help": "Judgments JSONL file(s)."}
    )
    train_only: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Judgments added to the train split alone (other collections, e.g. "
            "relevance-grader mix)."
        },
    )
    out: str = field(default="runs/dataset", metadata={"help": "Output folder."})
    label_threshold: int = bounded(
        DEFAULT_RELEVANCE_THRESHOLD, 1, 3, help="Relevant when grade >= this (0-3 scale)."
    )
    split_by: str = choice(
        "query", SPLIT_MODES, "query (grouped, stratified) or pair (the paper's)."
    )
    test_size: float = bounded(
        0.2,
        0,
        help="Held out for test: a fraction of the queries (or pairs), or a number of them when >= 1.",
        open_low=True,
    )
    validation_size: float = bounded(
        0.2,
        0,
        help="Carved from train for validation (thresholds, calibration, model choice): a "
        f"fraction or a number, as test_size; 0: none. Fewer than {MIN_VALIDATION_QUERIES} "
        "validation queries draw a warning.",
    )
    folds: int = bounded(
        0,
        0,
        help="Cross-validation by query: write fold-0 ... fold-(N-1), each fold's queries the test "
        "split of its folder and validation carved from the others (test_size unused); 0: one split.",
    )
    balance: str = choice(
        "none", BALANCE_MODES, "none, oversample, undersample or both (train only)."
    )
    target_ratio: float = bounded(
        1.0, 0, help="Positives per negative in train after balancing.", open_low=True
    )
    max_pairs_per_query: int | None = bounded(
        None, 1, help="Keep a seeded random sample of at most this many pairs per query."
    )
    seed: int = field(default=42)
    strict: bool = field(
        default=True, metadata={"help": "Stop at the first bad line (false: skip and list it)."}
    )
    save_dataset: bool = field(
        default=True, metadata={"help": "Also save a datasets.DatasetDict (dataset/)."}
    )
    overwrite: bool = field(
        default=False, metadata={"help": "Replace a non-empty --out that is not a built dataset."}
    )

    def __post_init__(self) -> None:
        check_choices(self)  # YAML values and library callers too, before anything is read
        for name in ("test_size", "validation_size"):
            value = getattr(self, name)
            if value >= 1 and value != int(value):
                raise InputError(f"{name}: a number of queries or pairs is whole, got {value}")
        if self.folds == 1 or (self.folds and self.split_by != "query"):
            raise InputError(
                f"folds: expected 0 (one split) or >= 2 folds by query, got {self.folds} "
                f"with split_by {self.split_by}"
            )


def load_judgments(config: BuildConfig) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Valid, de-duplicated rows with a binary label, and the cleaning report.

    A pair judged twice keeps its last judgment, and conflicting verdicts are counted in a warning
    (:func:`core.records.keep_last`, the policy of every judgments reader). A query id with two
    different texts, or a document with no text, is an error.
    """
    skipped: list[RecordError] | None = None if config.strict else []
    entries: list[tuple[tuple[str, str], dict[str, Any], str]] = []
    query_texts: dict[str, tuple[str, str, int]] = {}  # qid -> (text, file, line)
    report: dict[str, Any] = {"read": 0, "errors_dropped": 0}
    for path in config.judgments:
        for number, judgment in read_numbered_records(path, Judgment, skipped=skipped):
            report["read"] += 1
            if judgment.error is not None:
                report["errors_dropped"] += 1
                continue
            first = query_texts.setdefault(judgment.qid, (judgment.query, str(path), number))
            if first[0] != judgment.query:
                raise RecordError(
                    path,
                    number,
                    "query",
                    f"query id {judgment.qid!r} has another text at {first[1]}:{first[2]} "
                    f"({first[0][:60]!r} here {judgment.query[:60]!r}); one id, one query",
                )
            if is_empty_document(judgment):
                raise RecordError(path, number, "text", EMPTY_DOCUMENT)
            entries.append((judgment.key, _row(judgment, config), f"{path}:{number}"))
    kept = keep_last(entries, "judgments", verdict=lambda row: (row["label"], row["grade"]))
    rows = list(kept.items.values())
    report["duplicates_dropped"] = kept.duplicates
    report["conflicting_duplicates"] = kept.conflicts
    report["skipped_lines"] = [str(e) for e in skipped or []]
    report["kept"] = len(rows)
    return rows, report


def _row(judgment: Judgment, config: BuildConfig) -> dict[str, Any]:
    """A judgment as a dataset row, its binary label at ``config.label_threshold``."""
    label = (
        judgment.label
        if judgment.grade is None
        else label_from_grade(judgment.grade, config.label_threshold)
    )
    judge = judgment.judge
    return {
        "qid": judgment.qid,
        "query": judgment.query,
        "doc_id": judgment.doc_id,
        "text": judgment.text,
        "title": judgment.title,
        "grade": judgment.grade,
        "label": int(label),
        "confidence": judgment.confidence,
        "p_relevant": judgment.p_relevant,
        "rank": judgment.rank,
        "retriever_score": judgment.retriever_score,
        "judge": judge.model_dump(mode="json", exclude_none=True) if judge else None,
        "relevance_threshold": None
        if config.label_threshold == DEFAULT_RELEVANCE_THRESHOLD
        else config.label_threshold,
    }


def split_pairs(labels: np.ndarray, held_out: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(keep, held_out) pair indices, stratified by label: the paper's pair-level split."""
    from sklearn.model_selection import train_test_split

    indices = np.arange(len(labels))
    counts = Counter(labels.tolist())
    stratify = labels if len(counts) > 1 and min(counts.values()) >= 2 else None
    size = int(held_out) if held_out >= 1 else held_out
    keep, held = train_test_split(indices, test_size=size, random_state=seed, stratify=stratify)
    return np.sort(keep), np.sort(held)


def balance_indices(labels: np.ndarray, mode: str, target_ratio: float, seed: int) -> np.ndarray:
    """Resample train indices so that positives / negatives == target_ratio (as close as counts allow)."""
    if mode == "none":
        return np.arange(len(labels))
    if target_ratio <= 0:
        raise InputError("target_ratio: must be positive")
    rng = np.random.default_rng(seed)
    pos = np.flatnonzero(labels == 1)
    neg = np.flatnonzero(labels == 0)
    if len(pos) == 0 or len(neg) == 0:
        raise InputError("balance: the train split needs both labels to balance")
    n_pos, n_neg = len(pos), len(neg)
    positives_short = n_pos < target_ratio * n_neg
    if mode == "oversample":  # grow the minority side
        if positives_short:
            n_pos = round(target_ratio * n_neg)
        else:
            n_neg = round(n_pos / target_ratio)
    elif mode == "undersample":  # shrink the majority side
        if positives_short:
            n_neg = max(1, round(n_pos / target_ratio))
        else:
            n_pos = max(1, round(target_ratio * n_neg))
    elif mode == "both":
        # Keep the split's size; meet the ratio by growing one side and shrinking the other.
        total = n_pos + n_neg
        n_pos = round(total * target_ratio / (1 + target_ratio))
        n_neg = total - n_pos
    else:
        raise InputError(f"balance: expected one of {BALANCE_MODES}, got {mode!r}")
    return np.concatenate([_resample(pos, n_pos, rng), _resample(neg, n_neg, rng)])


def _resample(indices: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    if count <= len(indices):
        return np.sort(rng.choice(indices, size=count, replace=False))
    # Every original once, the rest drawn with replacement.
    extra = rng.choice(indices, size=count - len(indices), replace=True)
    return np.concatenate([indices, extra])


MANIFEST_FILE = "manifest.json"


class SplitCounts(BaseModel):
    """A split's pairs by label and its queries (data.build writes all four)."""

    model_config = ConfigDict(extra="allow")
    pairs: int | None = None
    positive: int | None = None
    negative: int | None = None
    queries: int | None = None


class FoldSplits(BaseModel):
    """What one fold's splits (or the one split's) hold, before and after balancing, and the
    query ids of its held-out splits (the train split's are the rest)."""

    model_config = ConfigDict(extra="allow")
    counts_before_balancing: dict[str, SplitCounts] = Field(default_factory=dict)
    counts: dict[str, SplitCounts] = Field(default_factory=dict)
    queries: dict[str, list[str]] = Field(default_factory=dict)  # "validation", "test"


class DatasetManifest(Artifact):
    """A dataset folder's ``manifest.json``, written last by data.build (its presence marks a
    finished build): the cleaning, the sources and settings, and the splits, one
    :class:`FoldSplits` per fold (``folds``; each ``fold-K/`` has its own manifest, with ``fold``)
    or the one split's at the top. Every field may be absent: the cross-validation's folds of
    another source hold only their ``queries``. Keys this release does not know are kept."""

    model_config = ConfigDict(extra="allow")
    FILE = MANIFEST_FILE
    FORMAT_VERSION = 1
    cleaning: dict[str, Any] = Field(default_factory=dict)  # load_judgments' counts, open
    sources: list[dict[str, str]] = Field(default_factory=list)  # path and digest of each file
    train_only_sources: list[dict[str, str]] = Field(default_factory=list)
    seed: int | None = None
    config: dict[str, Any] = Field(default_factory=dict)  # the BuildConfig it was built with
    fold: int | None = None  # in fold-K/: K
    folds: list[FoldSplits] | None = None
    counts_before_balancing: dict[str, SplitCounts] = Field(default_factory=dict)
    counts: dict[str, SplitCounts] = Field(default_factory=dict)
    queries: dict[str, list[str]] = Field(default_factory=dict)

    @classmethod
    def of(cls, manifest: dict[str, Any]) -> DatasetManifest:
        return cls.validated(manifest, cls.FILE)

    def dump(self) -> dict[str, Any]:
        # exclude_unset: the keys written are the ones set.
        rest = self.model_dump(mode="json", exclude={"format_version"}, exclude_unset=True)
        return {"format_version": self.format_version, **rest}

    def fold_splits(self, fold: int) -> FoldSplits | None:
        """Fold ``fold``'s splits; None for a build without it."""
        return self.folds[fold] if self.folds and fold < len(self.folds) else None

    @property
    def label_threshold(self) -> int:
        """The grade from which its pairs are relevant (data.build's label_threshold)."""
        return int(self.config.get("label_threshold", DEFAULT_RELEVANCE_THRESHOLD))


def read_manifest(folder: str | Path) -> DatasetManifest | None:
    """The manifest of a dataset folder; None for a folder without one."""
    path = Path(folder) / MANIFEST_FILE
    return DatasetManifest.read(path) if path.is_file() else None


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    labels = Counter(row["label"] for row in rows)
    return {
        "pairs": len(rows),
        "positive": labels.get(1, 0),
        "negative": labels.get(0, 0),
        "queries": len({row["qid"] for row in rows}),
    }


def build_dataset(config: BuildConfig) -> DatasetManifest:
    if not config.judgments:
        raise InputError("judgments: give at least one judgments JSONL file")
    # --out is replaced as a whole: an input inside it would be deleted.
    inputs = [("judgments", p) for p in config.judgments] + [
        ("train_only", p) for p in config.train_only
    ]
    refuse_overlap("out", config.out, inputs)
    check_replaceable(config.out, "manifest.json", config.overwrite, "dataset")
    rows, cleaning = load_judgments(config)
    if not rows:
        raise InputError("no usable judgments (every record was an error, a duplicate or skipped)")
    rows = canonical_order(rows)  # from here on, nothing depends on the input's line order
    if config.max_pairs_per_query:
        rows = cap_per_query(rows, config.max_pairs_per_query, config.seed)
        cleaning["capped_to"] = len(rows)
    extra = _train_only_rows(config, rows, cleaning)
    plans = _query_plans(rows, config) if config.split_by == "query" else [_pair_plan(rows, config)]
    folds = [_fold(rows, extra, plan, config) for plan in plans]
    manifest = {
        "cleaning": cleaning,
        "sources": [_source(p) for p in config.judgments],
        "train_only_sources": [_source(p) for p in config.train_only],
        "seed": config.seed,
        "config": asdict(config),
    }
    # The folder is replaced as one unit: a kill mid-write leaves the previous dataset whole, and
    # splits of an earlier build (a validation split no longer asked for) do not survive.
    with replace_folder(config.out) as out:
        if config.folds:
            for number, fold in enumerate(folds):
                _write_splits(out / f"fold-{number}", fold, {**manifest, "fold": number}, config)
            manifest["folds"] = [fold.summary().model_dump() for fold in folds]
            # Every pair a fold tests, each once: what a judge labels to be compared on all folds.
            write_jsonl(out / TESTED_FILE, (_compact(row) for row in rows))
        else:
            manifest |= folds[0].summary().model_dump()
            _write_splits(out, folds[0], manifest, config)
        typed = DatasetManifest.of(manifest)
        typed.write(out / MANIFEST_FILE)  # last: its presence marks a finished build
    return typed


def _source(path: str) -> dict[str, str]:
    """A judgments file and an order-free digest of it (its lines, sorted)."""
    lines = sorted(Path(path).read_bytes().splitlines())
    return {"path": str(path), "sorted_lines_sha256": hashlib.sha256(b"\n".join(lines)).hexdigest()}


def _train_only_rows(
    config: BuildConfig, rows: list[dict[str, Any]], cleaning: dict[str, Any]
) -> list[dict[str, Any]]:
    if not config.train_only:
        return []
    extra, cleaning["train_only"] = load_judgments(
        dataclasses.replace(config, judgments=config.train_only)
    )
    shared = sorted({r["qid"] for r in extra} & {r["qid"] for r in rows})
    if shared:
        raise InputError(
            f"train_only: {len(shared)} query id(s) also occur in judgments (e.g. "
            f"{shared[0]!r}); they could reach the validation or test split"
        )
    return canonical_order(extra)


def _query_plans(rows: list[dict[str, Any]], config: BuildConfig) -> list[dict[str, np.ndarray]]:
    """Row indices of each split, by query: one split, or one plan per fold."""
    shares = relevant_share(rows)
    if config.folds:
        tests = query_folds(shares, config.folds, config.seed)
    else:
        count = queries_for_share(len(shares), config.test_size)
        tests = [held_out_queries(shares, count, config.seed)]
    plans = []
    for number, test in enumerate(tests):
        rest = {qid: share for qid, share in shares.items() if qid not in set(test)}
        splits = {"test": set(test), "train": set(rest)}
        if config.validation_size > 0:
            count = queries_for_share(len(rest), config.validation_size)
            splits["validation"] = set(held_out_queries(rest, count, config.seed + 1 + number))
            splits["train"] -= splits["validation"]
            if count < MIN_VALIDATION_QUERIES:
                logger.warning(
                    "validation_size: %d validation quer%s: thresholds and calibration fitted on "
                    "so few queries are unstable (at least %d advised)",
                    count,
                    "y" if count == 1 else "ies",
                    MIN_VALIDATION_QUERIES,
                )
        plans.append(
            {
                name: np.array([i for i, row in enumerate(rows) if row["qid"] in qids], dtype=int)
                for name, qids in splits.items()
            }
        )
    return plans


def _pair_plan(rows: list[dict[str, Any]], config: BuildConfig) -> dict[str, np.ndarray]:
    labels = np.array([row["label"] for row in rows], dtype=np.int64)
    train, test = split_pairs(labels, config.test_size, config.seed)
    plan = {"test": test, "train": train}
    if config.validation_size > 0:
        keep, validation = split_pairs(labels[train], config.validation_size, config.seed + 1)
        plan |= {"validation": train[validation], "train": train[keep]}
    return plan


@dataclass
class Fold:
    """One split of the rows: what each split holds before and after balancing."""

    split_rows: dict[str, list[dict[str, Any]]]
    before: dict[str, dict[str, int]]

    def summary(self) -> FoldSplits:
        return FoldSplits.model_validate(
            {
                "counts_before_balancing": self.before,
                "counts": {name: _counts(items) for name, items in self.split_rows.items()},
                "queries": {
                    name: sorted({row["qid"] for row in items})
                    for name, items in self.split_rows.items()
                    if name != "train"
                },
            }
        )


def _fold(
    rows: list[dict[str, Any]],
    extra: list[dict[str, Any]],
    plan: dict[str, np.ndarray],
    config: BuildConfig,
) -> Fold:
    every = rows + extra
    labels = np.array([row["label"] for row in every], dtype=np.int64)
    for name in ("validation", "test"):
        # A split without both labels gives no threshold (training stored 1e-83) and no ROC-AUC.
        held_out = labels[plan[name]] if name in plan else None
        if held_out is not None and len(set(held_out.tolist())) < 2:
            raise InputError(
                f"{name}_size: the {name} split ({len(held_out)} pairs) has "
                f"{'no relevant' if held_out.sum() == 0 else 'only relevant'} pairs; judge more "
                f"queries or raise {name}_size"
            )
    train = np.concatenate([plan["train"], np.arange(len(rows), len(every))]).astype(int)
    splits = {name: plan[name] for name in ("validation", "test") if name in plan}
    before = {"train": _counts([every[i] for i in train])}
    before |= {name: _counts([every[i] for i in idx]) for name, idx in splits.items()}
    balanced = train[
        balance_indices(labels[train], config.balance, config.target_ratio, config.seed)
    ]
    shuffled = balanced[np.random.default_rng(config.seed).permutation(len(balanced))]
    split_rows = {"train": [every[i] for i in shuffled]}
    split_rows |= {name: [every[i] for i in idx] for name, idx in splits.items()}
    return Fold(split_rows, before)


def _compact(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if v is not None}


def _write_splits(folder: Path, fold: Fold, manifest: dict[str, Any], config: BuildConfig) -> None:
    for name, items in fold.split_rows.items():
        write_jsonl(folder / f"{name}.jsonl", (_compact(row) for row in items))
    if config.save_dataset:
        _save_dataset_dict(fold.split_rows, folder / "dataset")
    DatasetManifest.of(manifest | fold.summary().model_dump()).write(folder / MANIFEST_FILE)


def _save_dataset_dict(split_rows: dict[str, list[dict[str, Any]]], path: Path) -> None:
    from datasets import Dataset, DatasetDict

    def cell(row: dict[str, Any], column: str) -> Any:
        value = row[column]
        if column == "judge" and isinstance(value, dict):
            return f"{value.get('model')}/{value.get('prompt')}"  # a flat column for the table
        return value

    dataset = DatasetDict(
        {
            name: Dataset.from_dict(
                {column: [cell(row, column) for row in items] for column in COLUMNS}
            )
            for name, items in split_rows.items()
        }
    )
    dataset.save_to_disk(str(path))


def summary_table(manifest: DatasetManifest) -> str:
    folds: list[FoldSplits] | list[DatasetManifest] = manifest.folds or [manifest]
    lines = [
        f"{'split':<11} {'pairs':>9} {'pos':>8} {'neg':>9} {'pos %':>6} {'queries':>8}   (before balancing)",
    ]
    for number, fold in enumerate(folds):
        for name, counts in fold.counts.items():
            before = fold.counts_before_balancing[name]
            share = 100 * (counts.positive or 0) / max(counts.pairs or 0, 1)
            note = "" if before == counts else f"   {before.pairs} pairs, {before.positive} pos"
            label = f"{number}:{name}" if manifest.folds else name
            lines.append(
                f"{label:<11} {counts.pairs:>9} {counts.positive:>8} {counts.negative:>9} "
                f"{share:>5.1f}% {counts.queries:>8}{note}"
            )
    cleaning = manifest.cleaning
    lines.append(
        f"read {cleaning['read']}, kept {cleaning['kept']}; dropped {cleaning['errors_dropped']} error record(s), "
        f"{cleaning['duplicates_dropped']} duplicate(s), skipped {len(cleaning['skipped_lines'])} bad line(s)"
    )
    return "\n".join(lines)


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([BuildConfig], args)
    manifest = build_dataset(config)
    print(summary_table(manifest))
    where = f"{config.out}/fold-0 ... fold-{config.folds - 1}" if config.folds else config.out
    print(f"wrote {where}/ (manifest.json, train/validation/test JSONL, dataset/)")


if __name__ == "__main__":
    run_main(main)
