"""Fit an exported grader's threshold and temperature to a new collection, on a few judged queries.

    # human labels for the top hits of a few queries of your collection: the judging page's
    # folder (judgments.annotate) or any judgments JSONL, e.g. from
    # `relevance-grader label --backend qrels`
    relevance-grader recalibrate --export runs/main/export --judgments runs/judging \\
        --out runs/export-mine

A grader's threshold and temperature are fitted on one collection's validation queries and do not
travel: where relevance is more common or the texts differ, the stored threshold can call almost
every pair relevant. The judged queries are split by query (``fit_share`` of them, seeded): the
temperature and the best-F1 threshold are fitted on one part, and F1 and Cohen's κ before and after
are measured on the other. The export is copied to ``--out`` with the new threshold and
temperature in its description and model card; the weights are untouched, and the copy passes the
export's round-trip check with plain transformers again.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from core.cli import bounded, parse_config, run_main
from core.errors import InputError
from core.io import (
    check_replaceable,
    markdown_table,
    read_records,
    refuse_overlap,
    replace_folder,
    strict,
)
from core.metrics import best_f1_threshold, binary_metrics, fit_temperature
from core.records import Judgment, document_text
from data.splits import held_out_queries, queries_for_share, relevant_share
from models.grader_config import GraderDescription

logger = logging.getLogger(__name__)
RECALIBRATED = "recalibration.json"  # written last: the folder is a finished recalibrated copy


@dataclass
class RecalibrateConfig:
    export: str = field(
        default="", metadata={"help": "An exported grader (relevance-grader export)."}
    )
    judgments: str = field(
        default="",
        metadata={
            "help": "Judgments JSONL with human labels of a few queries' hits, or a "
            "relevance-grader annotate folder (several assessors' labels folded into one per hit). "
            "Pairs of the export's own validation or training split (its dataset, named in the "
            "export) are counted in a warning: the stored threshold was fitted on them."
        },
    )
    out: str = field(default="", metadata={"help": "Where the recalibrated copy is written."})
    fit_share: float = bounded(
        0.5, 0, 1, help="Share of the judged queries the fit uses.", open_low=True, open_high=True
    )
    seed: int = field(default=0)
    overwrite: bool = field(default=False, metadata={"help": "Replace a non-empty --out."})


# Fewer queries on a side and the refitted threshold, or its test, rests on a query or two.
MIN_QUERIES_PER_SIDE = 3


def fit_and_held_out(records: Sequence[Judgment], fit_share: float, seed: int) -> tuple[set, set]:
    """(fit, held-out) queries, split as data.build splits (data.splits: stratified by each
    query's share of relevant pairs, seeded by ids, never by line order); one query at least on
    each side."""
    shares = relevant_share({"qid": r.qid, "label": r.label} for r in records)
    if len(shares) < 2:
        raise InputError(
            f"judgments: {len(shares)} judged queries; at least {2 * MIN_QUERIES_PER_SIDE} are "
            f"needed ({MIN_QUERIES_PER_SIDE} to fit on, {MIN_QUERIES_PER_SIDE} to test on)"
        )
    held_out = set(held_out_queries(shares, queries_for_share(len(shares), 1 - fit_share), seed))
    fit = set(shares) - held_out
    if min(len(fit), len(held_out)) < MIN_QUERIES_PER_SIDE:
        raise InputError(
            f"judgments: {len(shares)} judged queries split into {len(fit)} to fit on and "
            f"{len(held_out)} held out; each side needs at least {MIN_QUERIES_PER_SIDE} (a "
            "threshold fitted or tested on one or two queries says little): judge more queries "
            "or change --fit_share"
        )
    return fit, held_out


class HeldOutMetrics(TypedDict):
    """The held-out queries' figures at one threshold (``before``: the stored one)."""

    pairs: int
    f1: float
    kappa: float
    precision: float
    recall: float
    threshold: float
    predicted_relevant: float  # the share called relevant


class _Overlap(TypedDict):
    dataset: str | None
    checked: bool  # False where the dataset is not here


class DataOverlap(_Overlap, total=False):
    """How many judged pairs are the export's own validation or training pairs."""

    validation_pairs: int
    train_pairs: int


class _Recalibration(TypedDict):
    export: str
    judgments: str
    export_data_overlap: DataOverlap
    fit_queries: list[str]
    held_out_queries: list[str]
    before: HeldOutMetrics
    after: HeldOutMetrics
    calibration: dict[str, Any]  # Calibration.to_dict()


class Recalibration(_Recalibration, total=False):
    """The recalibrated copy's RECALIBRATED file (its description keeps it, less ``export``)."""

    round_trip_max_abs_difference: float


def _metrics(probabilities: np.ndarray, labels: np.ndarray, threshold: float) -> HeldOutMetrics:
    m = binary_metrics(probabilities, labels, threshold)
    return {
        "pairs": m.pairs,
        "f1": m.f1,
        "kappa": m.kappa,
        "precision": m.precision,
        "recall": m.recall,
        "threshold": threshold,
        "predicted_relevant": float(np.mean(probabilities >= threshold)),
    }


def _pair_keys(records: Iterable[Judgment]) -> set[tuple[str, str, str]]:
    return {(r.qid, r.doc_id, r.query) for r in records}


def data_overlap(description: GraderDescription, records: list[Judgment]) -> DataOverlap:
    """How many judged pairs (query id, document id and query text) are the export's own
    validation or training pairs, read from the dataset its description names; a warning when
    any are (the stored threshold was fitted on the validation split, so its figures flatter
    it there)."""
    dataset = description.data.dataset if description.data else None
    out: DataOverlap = {"dataset": dataset, "checked": False}
    if not dataset or not Path(dataset).is_dir():
        logger.info("export: its dataset (%s) is not here; the overlap is not checked", dataset)
        return out
    judged = _pair_keys(records)
    out["checked"] = True

    def shared(split: str) -> int:
        file = Path(dataset) / f"{split}.jsonl"
        split_pairs = _pair_keys(read_records(file, Judgment)) if file.is_file() else set()
        return len(judged & split_pairs)

    out["validation_pairs"], out["train_pairs"] = shared("validation"), shared("train")
    if out["validation_pairs"] or out["train_pairs"]:
        logger.warning(
            "judgments: %d of the %d judged pairs are the export's validation pairs and %d its "
            "training pairs (%s): the stored threshold was fitted on the validation split, so "
            "the 'stored' figures are measured on its own data; judge pairs of other queries",
            out["validation_pairs"],
            len(judged),
            out["train_pairs"],
            dataset,
        )
    return out


def recalibrate(config: RecalibrateConfig) -> Recalibration:
    from models.builder import GRADER_CONFIG_FILE, read_grader_config
    from models.card import model_card
    from models.export import EXPORT_MARKER, check_round_trip
    from models.grader import Grader

    export, out = Path(config.export), Path(config.out)
    if not (export / EXPORT_MARKER).is_file():
        raise FileNotFoundError(f"export: {export} is not a finished export (no {EXPORT_MARKER})")
    if not config.out:
        raise InputError("out: give the folder for the recalibrated copy")
    # Both ways: the copy inside the export, or the export (or the judgments) inside the copy.
    refuse_overlap("out", out, [("export", export), ("judgments", config.judgments)])
    check_replaceable(out, RECALIBRATED, config.overwrite, "recalibrated export")
    from judgments.store import one_per_hit, read_judgments

    records = one_per_hit(read_judgments(config.judgments, refuse_errors=False))
    described = read_grader_config(export) or GraderDescription()
    overlap = data_overlap(described, records)  # said before the grading
    fit, held_out = fit_and_held_out(records, config.fit_share, config.seed)
    labels = np.array([r.label for r in records])
    for name, part in (("fit", fit), ("held-out", held_out)):
        part_labels = {int(r.label) for r in records if r.qid in part}
        if part_labels != {0, 1}:
            raise InputError(
                f"judgments: the {name} queries need relevant and non-relevant pairs "
                f"({config.judgments}); judge more queries or change --seed"
            )

    grader = Grader.from_pretrained(export, device="cpu", dtype="float32")
    print(f"scoring {len(records)} judged pairs with {export}", flush=True)
    raw = grader.raw_probabilities(
        [r.query for r in records],
        [document_text(r.text, r.title) for r in records],
        show_progress=True,  # about 6 pairs a second for SmolLM2 on 2 cores in float32
    )
    in_fit = np.array([r.qid in fit for r in records])
    calibration = fit_temperature(raw[in_fit], labels[in_fit])
    threshold = best_f1_threshold(calibration.apply(raw[in_fit]), labels[in_fit])
    before = _metrics(grader.calibrate(raw)[~in_fit], labels[~in_fit], grader.threshold)
    after = _metrics(calibration.apply(raw)[~in_fit], labels[~in_fit], threshold)

    report: Recalibration = {
        "export": str(export),
        "judgments": config.judgments,
        "export_data_overlap": overlap,
        "fit_queries": sorted(fit),
        "held_out_queries": sorted(held_out),
        "before": before,
        "after": after,
        "calibration": calibration.to_dict(),
    }
    recalibration = {k: v for k, v in report.items() if k != "export"}
    update = {"threshold": threshold, "calibration": calibration.to_dict()}
    description = GraderDescription.from_data(
        described.dump() | update | {"recalibration": recalibration}, str(export)
    )
    sample = [(r.query, document_text(r.text, r.title)) for r in records[:8]]
    with replace_folder(out) as staging:
        shutil.copytree(export, staging, dirs_exist_ok=True)
        config_file = staging / "config.json"
        model_config = json.loads(config_file.read_text())
        model_config["grader"] = description.dump()  # transformers' key, the same object
        config_file.write_text(
            json.dumps(strict(model_config), allow_nan=False, indent=2, ensure_ascii=False) + "\n"
        )
        description.write(staging / GRADER_CONFIG_FILE)
        (staging / "README.md").write_text(
            model_card(description, out.name, path=str(out.resolve()))
        )
        # The weights are the export's: plain transformers must still give its raw scores.
        difference = check_round_trip(grader, staging, sample, 1e-4, out)
        report["round_trip_max_abs_difference"] = difference
        (staging / RECALIBRATED).write_text(
            json.dumps(strict(report), allow_nan=False, indent=2) + "\n"
        )
    return report


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([RecalibrateConfig], args)
    if not config.export or not config.judgments:
        raise InputError("give --export and --judgments")
    report = recalibrate(config)
    rows = [
        [
            when,
            m["pairs"],
            f"{m['threshold']:.3f}",
            f"{m['predicted_relevant']:.2f}",
            f"{m['precision']:.3f}",
            f"{m['recall']:.3f}",
            f"{m['f1']:.3f}",
            f"{m['kappa']:.3f}",
        ]
        for when, m in (("stored", report["before"]), ("refitted", report["after"]))
    ]
    print(
        f"{len(report['held_out_queries'])} held-out queries (fitted on "
        f"{len(report['fit_queries'])}; temperature {report['calibration']['temperature']:.3f}):\n"
    )
    header = ["threshold from", "pairs", "threshold", "called relevant", "precision", "recall"]
    print(markdown_table([*header, "F1", "κ"], rows), end="")
    print(f"wrote {config.out}")


if __name__ == "__main__":
    run_main(main)
