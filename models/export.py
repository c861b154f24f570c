"""Export a trained grader as a self-describing, standard transformers model.

    relevance-grader export --checkpoint runs/grader --out runs/export/grader \\
        --metrics runs/eval/grader/metrics.json

- LoRA adapters are merged into the base weights; the trained head is kept.
- ``id2label`` {0: not_relevant, 1: relevant} (or the grades 0-3 of a graded grader), the pad
  token id, safetensors weights, tokenizer.
- The grader's description travels in ``config.json`` (key ``grader``) and ``grader_config.json``:
  input format name, version and template, maximum length, decision threshold and calibration
  (from ``--metrics``, fitted on validation by ``relevance-grader evaluate``), the label threshold
  on grades, the training data summary and metrics.
- A model card (``README.md`` with hub metadata) is generated from the run.
- Round trip: the export is reloaded with plain transformers (no code from this repository) and
  its probabilities compared with the checkpoint's on sample pairs; a mismatch beyond the stated
  tolerance fails the export.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from core.cli import check_choices, choice, parse_config, run_main
from core.io import check_replaceable, refuse_overlap, replace_folder
from models.builder import GRADER_CONFIG_FILE, load_trained, read_grader_config
from models.card import model_card, relevant_grade
from models.families import family_of_description
from models.families.base import PlainExport
from models.grader_config import (
    Calibration,
    ExportCheck,
    ExportedEvaluation,
    GraderDescription,
)
from models.resolve import LABEL_NAMES

if TYPE_CHECKING:
    from models.grader import Grader

logger = logging.getLogger(__name__)
SAMPLE_PAIRS = [
    (
        "what is an axon terminal",
        "Axon terminals are the distal terminations of the branches of an axon.",
    ),
    ("what is an axon terminal", "Paris is the capital and most populous city of France."),
    (
        "causes of left ventricular hypertrophy",
        "High blood pressure is the most common cause of LVH. " * 40,
    ),
    (
        "how long is a marathon",
        "A marathon is a long-distance foot race with a distance of 42.195 km.",
    ),
]


@dataclass
class ExportConfig:
    checkpoint: str = field(default="runs/grader", metadata={"help": "Trained grader checkpoint."})
    out: str = field(
        default="runs/export/grader",
        metadata={
            "help": "Export folder; a previous export there is replaced once the new one passes."
        },
    )
    overwrite: bool = field(
        default=False,
        metadata={"help": "Replace a non-empty --out that is not a previous export."},
    )
    metrics: str | None = field(
        default=None,
        metadata={
            "help": "metrics.json from relevance-grader evaluate: threshold, calibration, results."
        },
    )
    pairs: str | None = field(
        default=None, metadata={"help": "Judgments/pairs JSONL for the round-trip sample."}
    )
    sample_size: int = field(
        default=16, metadata={"help": "Pairs compared in the round-trip check."}
    )
    tolerance: float = field(
        default=1e-4,
        metadata={
            "help": "Max abs difference of P(relevant) allowed between the export and the "
            "checkpoint holding the same (rounded) weights, both computed in float32."
        },
    )
    dtype: str = choice("float32", ("float32", "bfloat16", "float16"), "Exported weights dtype.")
    model_name: str | None = field(default=None, metadata={"help": "Name in the model card."})
    license: str | None = field(
        default=None,
        metadata={
            "help": "Licence in the model card (default: the base model's, e.g. llama3.2 for a "
            "Llama 3.2 student, apache-2.0 for SmolLM2)."
        },
    )

    def __post_init__(self) -> None:
        check_choices(self)


EXPORT_MARKER = ExportCheck.FILE  # written last: a folder holding it is a finished export


class RoundTripError(ValueError):
    pass


def plain_transformers_probabilities(
    export_dir: Path, pairs: Sequence[tuple[str, str]]
) -> np.ndarray:
    """P(relevant) computed with plain transformers and the exported description only (each
    family's reference scorer, written as a user of the export would)."""
    from transformers import (
        AutoConfig,
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
    )

    description = AutoConfig.from_pretrained(export_dir).grader  # as a user's code reads it
    family = family_of_description(
        GraderDescription.from_data(description, f"{export_dir}/config.json: grader")
    )
    auto = (
        AutoModelForCausalLM if family.task == "causal-lm" else AutoModelForSequenceClassification
    )
    model = auto.from_pretrained(export_dir, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(export_dir)
    return family.reference_probabilities(PlainExport(model, tokenizer, description), pairs)


def check_round_trip(
    reference: Any, folder: Path, pairs: Sequence[tuple[str, str]], tolerance: float, name: Path
) -> float:
    """The largest |ΔP(relevant)| between ``reference`` (a ``Grader``) and the export in
    ``folder`` read with plain transformers; RoundTripError beyond ``tolerance``."""
    expected = reference.raw_probabilities([q for q, _ in pairs], [d for _, d in pairs])
    difference = float(np.max(np.abs(expected - plain_transformers_probabilities(folder, pairs))))
    if difference > tolerance:
        raise RoundTripError(
            f"export {name} does not reproduce {reference.name}: max |ΔP(relevant)| = "
            f"{difference:.2e} over {len(pairs)} pairs (tolerance {tolerance:.0e}); the previous "
            "export, if any, is unchanged"
        )
    return difference


def export_reference(checkpoint: Path, dtype: torch.dtype) -> Grader:
    """Our inference path on ``checkpoint`` holding exactly the weights an export in ``dtype``
    stores (LoRA merged in float32, each weight rounded to ``dtype``), computing in float32 on the
    CPU, so that the round trip measures the export and not the rounding. Only parameters are
    rounded: the rotary frequencies are buffers that transformers recomputes in float32 on load,
    and rounding them too (``model.to(bfloat16)``) turned positions by up to 0.4 rad at 400 tokens
    and failed three of five bfloat16 exports at the Llama-3.2-1B shape."""
    from models.grader import Grader

    reference = Grader.from_pretrained(checkpoint, device="cpu", dtype=torch.float32)
    if hasattr(reference.model, "merge_and_unload"):
        reference.model = reference.model.merge_and_unload()
    if dtype != torch.float32:
        with torch.no_grad():
            for parameter in reference.model.parameters():
                parameter.copy_(parameter.to(dtype))
    return reference


def _sample_pairs(config: ExportConfig) -> list[tuple[str, str]]:
    if not config.pairs:
        return SAMPLE_PAIRS
    from core.io import read_records
    from core.records import Pair, document_text

    pairs = []
    for record in read_records(config.pairs, Pair):
        pairs.append((record.query, document_text(record.text, record.title)))
        if len(pairs) >= config.sample_size:
            break
    return pairs


def _check_out(config: ExportConfig) -> None:
    """Refuse an --out that would destroy an input or a user's folder, before any work."""
    inputs = [("checkpoint", config.checkpoint), ("pairs", config.pairs)]
    refuse_overlap("out", config.out, [*inputs, ("metrics", config.metrics)])
    check_replaceable(config.out, EXPORT_MARKER, config.overwrite, "export")


def exported_description(
    info: GraderDescription, metrics: ExportedEvaluation, names: list[str], where: str
) -> GraderDescription:
    """The checkpoint's description with what export adds: the threshold and calibration
    relevance-grader evaluate fitted (its metrics.json), the label threshold, the evaluation; a
    threshold outside (0, 1) is one line naming ``where``."""
    threshold = metrics.threshold if metrics.threshold is not None else info.threshold or 0.5
    calibration = (  # the file's as it gives it, else the checkpoint's
        metrics.calibration.model_dump(mode="json", exclude_unset=True)
        if metrics.calibration is not None
        else (info.calibration or Calibration()).model_dump(mode="json")
    )
    added = {
        "threshold": float(threshold),
        "calibration": calibration,
        "label_threshold": {"scale": "0-3", "relevant_when_grade_at_least": relevant_grade(info)},
        "evaluation": metrics.results(),
        "label_names": names,
        "relevant_from": info.relevant_from,  # written even at 1: a user's code reads it
    }
    return GraderDescription.from_data(info.dump() | added, where)


def export(config: ExportConfig) -> ExportCheck:
    checkpoint = Path(config.checkpoint)
    out = Path(config.out)
    _check_out(config)
    info = read_grader_config(checkpoint)
    if info is None:
        raise FileNotFoundError(f"{checkpoint}: no {GRADER_CONFIG_FILE} (not a grader checkpoint)")
    metrics = ExportedEvaluation.read(config.metrics) if config.metrics else ExportedEvaluation()
    dtype = getattr(torch, config.dtype)
    # Merged in float32 and rounded once: a merge in bfloat16 rounds the base weights and the
    # LoRA product apart (|ΔP| 5e-2 at the Llama-3.2-1B shape, on an H200).
    model, tokenizer = load_trained(checkpoint, dtype=torch.float32)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()  # LoRA into the base weights; the saved head copy is kept
    model = model.to(dtype)
    causal = family_of_description(info).task == "causal-lm"
    model.config.pad_token_id = tokenizer.pad_token_id
    names = list(info.label_names or LABEL_NAMES)
    if not causal:
        model.config.id2label = dict(enumerate(names))
        model.config.label2id = {name: i for i, name in enumerate(names)}
    description = exported_description(info, metrics, names, config.metrics or str(checkpoint))
    model.config.grader = description.dump()  # the same object, in config.json for transformers
    with replace_folder(out) as staging:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        description.write(staging / GRADER_CONFIG_FILE)
        name = config.model_name or out.name
        card = model_card(description, name, config.license, path=str(out.resolve()))
        (staging / "README.md").write_text(card)

        # Round trip: plain transformers on the export vs our inference path on the checkpoint;
        # a failure leaves the previous export in place.
        pairs = _sample_pairs(config)
        reference = export_reference(checkpoint, dtype)
        difference = check_round_trip(reference, staging, pairs, config.tolerance, out)
        report = ExportCheck(
            out=str(out),
            pairs_checked=len(pairs),
            max_abs_difference=difference,
            tolerance=config.tolerance,
        )
        report.write(staging / EXPORT_MARKER)
    return report


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([ExportConfig], args)
    report = export(config)
    print(
        f"exported {config.checkpoint} -> {report.out}; round trip with plain transformers on "
        f"{report.pairs_checked} pairs: max |ΔP| = {report.max_abs_difference:.2e} (tolerance {report.tolerance:.0e})"
    )


if __name__ == "__main__":
    run_main(main)
