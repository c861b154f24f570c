"""Judgments → a training dataset: clean, split (by query or by pair), balance the train split.

    python -m data.build --judgments runs/labels/judgments.jsonl --out runs/dataset
    python -m data.build --judgments a.jsonl b.jsonl --split_by pair --balance both --target_ratio 1.0
    python -m data.build --config my-build.yaml --seed 13   # a YAML of the fields below

Steps, in order:
1. read the judgments (strict: stop at the first bad line with ``file:line: field: problem``;
   ``--strict false``: skip bad lines and list each one in the manifest);
2. drop records with ``error``; a (qid, doc_id) pair judged twice keeps its last judgment
   (duplicates and conflicting verdicts counted); one text per query id, no empty document;
3. binary label from the grade at ``label_threshold`` (default: grade >= 2 of 0-3), or the
   judgment's own label when it has no grade;
4. split into train / test (and validation carved from train the same way): ``query`` mode keeps
   every query on one side and stratifies so both sides have similar positive ratios
   (scikit-learn's StratifiedGroupKFold); ``pair`` mode is the paper's stratified 80/20;
5. balance the train split only (oversample positives, undersample negatives, or both) to
   ``target_ratio`` positives per negative. Validation and test are never resampled.

Output in ``out``: a ``datasets.DatasetDict`` (``dataset/``), the same splits as JSONL,
``manifest.json`` (counts before and after balancing, queries per split, sources with sha256,
seed, config, skipped lines) and a printed summary table.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from data.cli import bounded, check_choices, choice, parse_config, run_main
from data.io import (
    RecordError,
    check_replaceable,
    read_numbered_records,
    refuse_overlap,
    replace_folder,
    sha256_file,
    write_json,
    write_jsonl,
)
from data.records import (
    DEFAULT_RELEVANCE_THRESHOLD,
    Judgment,
    document_text,
    is_blank,
    label_from_grade,
)

logger = logging.getLogger(__name__)
SPLIT_MODES = ("query", "pair")
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
            "help": "Judgments added to the train split alone (other collections, e.g. data.mix)."
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
        1,
        help="Fraction of queries (or pairs) held out for test.",
        open_low=True,
        open_high=True,
    )
    validation_size: float = bounded(
        0.1, 0, 1, help="Fraction of train carved out for validation (0: none).", open_high=True
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


def load_judgments(config: BuildConfig) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Valid, de-duplicated rows with a binary label, and the cleaning report.

    A pair judged twice keeps its last judgment (judgment files are append-only logs: a later line
    re-judges; the ``judgments:`` labeler reads them the same way), and conflicting verdicts are
    counted. A query id with two different texts, or a document with no text, is an error.
    """
    skipped: list[RecordError] | None = None if config.strict else []
    by_pair: dict[tuple[str, str], dict[str, Any]] = {}
    query_texts: dict[str, tuple[str, str, int]] = {}  # qid -> (text, file, line)
    report = {"read": 0, "errors_dropped": 0, "duplicates_dropped": 0, "conflicting_duplicates": 0}
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
            if is_blank(document_text(judgment.text, judgment.title)):
                raise RecordError(path, number, "text", "an empty document")
            label = (
                judgment.label
                if judgment.grade is None
                else label_from_grade(judgment.grade, config.label_threshold)
            )
            judge = judgment.judge
            row = {
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
            earlier = by_pair.get((judgment.qid, judgment.doc_id))
            if earlier is not None:
                report["duplicates_dropped"] += 1
                if (earlier["label"], earlier["grade"]) != (row["label"], row["grade"]):
                    report["conflicting_duplicates"] += 1
            by_pair[(judgment.qid, judgment.doc_id)] = row
    if report["conflicting_duplicates"]:
        logger.warning(
            "%d pair(s) judged twice with different verdicts: the last judgment of each is kept",
            report["conflicting_duplicates"],
        )
    rows = list(by_pair.values())
    report["skipped_lines"] = [str(e) for e in skipped or []]
    report["kept"] = len(rows)
    return rows, report


def split_indices(
    labels: np.ndarray, groups: np.ndarray | None, test_size: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(keep, held_out) index arrays: grouped + stratified when ``groups`` is given, else stratified."""
    indices = np.arange(len(labels))
    if not 0 < test_size < 1:
        raise ValueError(f"split size must be between 0 and 1, got {test_size}")
    if groups is None:
        from sklearn.model_selection import train_test_split

        stratify = (
            labels
            if min(Counter(labels.tolist()).values()) >= 2 and len(set(labels.tolist())) > 1
            else None
        )
        keep, held = train_test_split(
            indices, test_size=test_size, random_state=seed, stratify=stratify
        )
        return np.sort(keep), np.sort(held)
    from sklearn.model_selection import StratifiedGroupKFold

    n_groups = len(np.unique(groups))
    if n_groups < 2:
        raise ValueError(f"{n_groups} query is too few for a query-level split")
    # With fewer queries than folds, hold out a single query's fold rather than fail.
    n_splits = min(max(2, round(1 / test_size)), n_groups)
    # Stratification needs each class to appear; with a single class, plain group folds do.
    y = labels if len(np.unique(labels)) > 1 else np.zeros_like(labels)
    folds = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    keep, held = next(folds.split(indices, y, groups))
    return np.sort(keep), np.sort(held)


def balance_indices(labels: np.ndarray, mode: str, target_ratio: float, seed: int) -> np.ndarray:
    """Resample train indices so that positives / negatives == target_ratio (as close as counts allow)."""
    if mode == "none":
        return np.arange(len(labels))
    if target_ratio <= 0:
        raise ValueError("target_ratio: must be positive")
    rng = np.random.default_rng(seed)
    pos = np.flatnonzero(labels == 1)
    neg = np.flatnonzero(labels == 0)
    if len(pos) == 0 or len(neg) == 0:
        raise ValueError("balance: the train split needs both labels to balance")
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
        raise ValueError(f"balance: expected one of {BALANCE_MODES}, got {mode!r}")
    return np.concatenate([_resample(pos, n_pos, rng), _resample(neg, n_neg, rng)])


def _resample(indices: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    if count <= len(indices):
        return np.sort(rng.choice(indices, size=count, replace=False))
    # Every original once, the rest drawn with replacement.
    extra = rng.choice(indices, size=count - len(indices), replace=True)
    return np.concatenate([indices, extra])


def _cap_per_query(rows: list[dict[str, Any]], cap: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    by_query: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_query.setdefault(row["qid"], []).append(i)
    keep = sorted(
        i
        for indices in by_query.values()
        for i in (indices if len(indices) <= cap else rng.choice(indices, cap, replace=False))
    )
    return [rows[i] for i in keep]


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    labels = Counter(row["label"] for row in rows)
    return {
        "pairs": len(rows),
        "positive": labels.get(1, 0),
        "negative": labels.get(0, 0),
        "queries": len({row["qid"] for row in rows}),
    }


def build_dataset(config: BuildConfig) -> dict[str, Any]:
    if not config.judgments:
        raise ValueError("judgments: give at least one judgments JSONL file")
    # --out is replaced as a whole: an input inside it would be deleted.
    inputs = [("judgments", p) for p in config.judgments] + [
        ("train_only", p) for p in config.train_only
    ]
    refuse_overlap("out", config.out, inputs)
    check_replaceable(config.out, "manifest.json", config.overwrite, "dataset")
    rows, cleaning = load_judgments(config)
    if not rows:
        raise ValueError("no usable judgments (every record was an error, a duplicate or skipped)")
    if config.max_pairs_per_query:
        rows = _cap_per_query(rows, config.max_pairs_per_query, config.seed)
        cleaning["capped_to"] = len(rows)
    labels = np.array([row["label"] for row in rows], dtype=np.int64)
    groups = np.array([row["qid"] for row in rows]) if config.split_by == "query" else None
    train_idx, test_idx = split_indices(labels, groups, config.test_size, config.seed)
    splits: dict[str, np.ndarray] = {"test": test_idx}
    if config.validation_size > 0:
        sub_groups = groups[train_idx] if groups is not None else None
        keep, val = split_indices(
            labels[train_idx], sub_groups, config.validation_size, config.seed + 1
        )
        splits["validation"] = train_idx[val]
        train_idx = train_idx[keep]
    splits["train"] = train_idx
    for name in ("validation", "test"):
        # A split without both labels gives no threshold (training stored 1e-83) and no ROC-AUC.
        held_out = labels[splits[name]] if name in splits else None
        if held_out is not None and len(set(held_out.tolist())) < 2:
            raise ValueError(
                f"{name}_size: the {name} split ({len(held_out)} pairs) has "
                f"{'no relevant' if held_out.sum() == 0 else 'only relevant'} pairs; judge more "
                f"queries or raise {name}_size"
            )
    if config.train_only:
        extra, cleaning["train_only"] = load_judgments(
            dataclasses.replace(config, judgments=config.train_only)
        )
        shared = sorted({r["qid"] for r in extra} & {r["qid"] for r in rows})
        if shared:
            raise ValueError(
                f"train_only: {len(shared)} query id(s) also occur in judgments (e.g. "
                f"{shared[0]!r}); they could reach the validation or test split"
            )
        first = len(rows)
        rows = rows + extra
        labels = np.concatenate([labels, np.array([r["label"] for r in extra], dtype=np.int64)])
        train_idx = np.concatenate([train_idx, np.arange(first, len(rows))])
        splits["train"] = train_idx
    before = {name: _counts([rows[i] for i in idx]) for name, idx in splits.items()}
    balanced = train_idx[
        balance_indices(labels[train_idx], config.balance, config.target_ratio, config.seed)
    ]
    rng = np.random.default_rng(config.seed)
    splits["train"] = balanced[rng.permutation(len(balanced))]
    split_rows = {
        name: [rows[i] for i in splits[name]]
        for name in ("train", "validation", "test")
        if name in splits
    }
    after = {name: _counts(items) for name, items in split_rows.items()}

    manifest = {
        "counts_before_balancing": before,
        "counts": after,
        "cleaning": cleaning,
        "sources": [{"path": str(p), "sha256": sha256_file(p)} for p in config.judgments],
        "train_only_sources": [
            {"path": str(p), "sha256": sha256_file(p)} for p in config.train_only
        ],
        "seed": config.seed,
        "config": asdict(config),
    }
    # The folder is replaced as one unit: a kill mid-write leaves the previous dataset whole, and
    # splits of an earlier build (a validation split no longer asked for) do not survive.
    with replace_folder(config.out) as out:
        for name, items in split_rows.items():
            write_jsonl(
                out / f"{name}.jsonl",
                ({k: v for k, v in row.items() if v is not None} for row in items),
            )
        if config.save_dataset:
            _save_dataset_dict(split_rows, out / "dataset")
        write_json(out / "manifest.json", manifest)  # last: its presence marks a finished build
    return manifest


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


def summary_table(manifest: dict[str, Any]) -> str:
    lines = [
        f"{'split':<11} {'pairs':>9} {'pos':>8} {'neg':>9} {'pos %':>6} {'queries':>8}   (before balancing)",
    ]
    for name, counts in manifest["counts"].items():
        before = manifest["counts_before_balancing"][name]
        share = 100 * counts["positive"] / max(counts["pairs"], 1)
        note = "" if before == counts else f"   {before['pairs']} pairs, {before['positive']} pos"
        lines.append(
            f"{name:<11} {counts['pairs']:>9} {counts['positive']:>8} {counts['negative']:>9} "
            f"{share:>5.1f}% {counts['queries']:>8}{note}"
        )
    cleaning = manifest["cleaning"]
    lines.append(
        f"read {cleaning['read']}, kept {cleaning['kept']}; dropped {cleaning['errors_dropped']} error record(s), "
        f"{cleaning['duplicates_dropped']} duplicate(s), skipped {len(cleaning['skipped_lines'])} bad line(s)"
    )
    return "\n".join(lines)


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([BuildConfig], args)
    manifest = build_dataset(config)
    print(summary_table(manifest))
    print(f"wrote {config.out}/ (manifest.json, train/validation/test JSONL, dataset/)")
    logger.debug(json.dumps(manifest["counts"]))


if __name__ == "__main__":
    run_main(main)
