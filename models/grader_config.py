"""The grader's description (``grader_config.json``): one typed file, written by training and
export and read by every stage that loads, exports, recalibrates, reports on or publishes a grader.

``config.json``'s ``grader`` key (which transformers keeps, for a user of the export with plain
transformers) holds the same object, built from this model. Keys this release does not know are
kept as they are, so a rewrite (recalibration) loses nothing a user's code reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic_core import PydanticCustomError

from core.artifacts import Artifact
from core.errors import InputError


class Calibration(BaseModel):
    """The fitted calibration of P(relevant): a temperature on the logits (1: none)."""

    model_config = ConfigDict(extra="allow")
    method: str = "none"
    temperature: float = 1.0


class QueryLikelihoodReadOut(BaseModel):
    """A query-likelihood grader's read-out: sigmoid(scale * PMI + bias) after ``marker``."""

    model_config = ConfigDict(extra="allow")
    scale: float
    bias: float
    marker: str
    # The state-cache name of a backbone that never trained (its base model's likelihoods).
    backbone: str | None = None


class Parameters(BaseModel):
    total: int
    trainable: int


class TrainingData(BaseModel):
    """What the grader was trained on (the other figures are the card's, kept open)."""

    model_config = ConfigDict(extra="allow")
    dataset: str | None = None
    train_pairs: int | None = None
    validation_pairs: int | None = None
    train_positive_rate: float | None = None


class LabelThreshold(BaseModel):
    scale: str = "0-3"
    relevant_when_grade_at_least: int


class GraderDescription(Artifact):
    """``grader_config.json``. Training writes the model, its input format, the label names, the
    loss, the data and the parameter counts; export adds the decision threshold, the calibration,
    the label threshold and the evaluation; recalibration replaces the threshold and calibration
    and records how."""

    model_config = ConfigDict(extra="allow")
    FILE = "grader_config.json"
    FORMAT_VERSION = 1
    mode: str | None = None  # None: a description older than the modes, of a classifier
    base_model: str | None = None
    model: dict[str, Any] | None = None  # models.builder.GraderModelConfig, as trained
    input_format: dict[str, Any] | None = None  # models.input_format.GraderInputFormat's dict
    label_names: list[str] | None = None
    relevant_from: int = 1  # the first class counted as relevant
    loss: dict[str, Any] | None = None  # train.losses.LossConfig, as trained
    data: TrainingData | None = None
    parameters: Parameters | None = None
    query_likelihood: QueryLikelihoodReadOut | None = None
    metrics: dict[str, Any] | None = None  # the training run's figures
    threshold: float | None = None  # None until evaluation fits one and export stores it
    calibration: Calibration | None = None
    label_threshold: LabelThreshold | None = None
    evaluation: dict[str, Any] | None = None  # relevance-grader evaluate's results, for the card
    recalibration: dict[str, Any] | None = None  # relevance-grader recalibrate's record

    @field_validator("threshold", mode="before")
    @classmethod
    def _probability(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise PydanticCustomError(
                "probability",
                "expected a probability in (0, 1), got {value}",
                {"value": repr(value)},
            )
        return value

    @property
    def temperature(self) -> float:
        """The calibration temperature (1: none fitted)."""
        return self.calibration.temperature if self.calibration else 1.0

    @property
    def loss_name(self) -> str:
        """The training loss (a generative grader's description names none)."""
        return str((self.loss or {}).get("loss", "generative"))

    def dump(self) -> dict[str, Any]:
        """The JSON object: what was read or set, inside too; a field never set is left out, as
        before the file was typed (a read description is written back as it was)."""
        return self.model_dump(mode="json", exclude_unset=True)


def read_description(folder: str | Path) -> GraderDescription | None:
    """The description of a grader folder: ``grader_config.json``, else the ``grader`` key of
    its ``config.json`` (an export read without the file); None when it has neither."""
    file = Path(folder) / GraderDescription.FILE
    if file.is_file():
        return GraderDescription.read(file)
    config = Path(folder) / "config.json"
    if not config.is_file():
        return None
    try:
        transformers_config = json.loads(config.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InputError(f"{config}: not JSON ({exc})") from None
    if not isinstance(transformers_config, dict) or "grader" not in transformers_config:
        return None
    return GraderDescription.from_data(transformers_config["grader"], f"{config}: grader")


class ExportCheck(Artifact):
    """``export_check.json``: an export's round-trip check (plain transformers on the export
    against the grader's own scoring of the checkpoint), written last by models.export, so a
    folder holding it is a finished export; models.push pushes only one that passed, and the
    report shows the difference."""

    FILE = "export_check.json"
    FORMAT_VERSION = 1
    out: str
    pairs_checked: int
    max_abs_difference: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.max_abs_difference <= self.tolerance


class ExportedEvaluation(Artifact):
    """What models.export takes from relevance-grader evaluate's ``metrics.json``: the threshold and
    calibration fitted on validation, and the results the card shows. The file's full model is
    measure.classification.checkpoint.CheckpointMetrics, which this layer may not import; this
    one names only the fields the export reads (the same names and types, which the checkpoint's
    tests hold to) and passes over the rest. Every field is optional: a hand-written file that
    gives only a threshold and a calibration exports too."""

    model_config = ConfigDict(extra="ignore")
    FILE = "metrics.json"
    FORMAT_VERSION = 1  # CheckpointMetrics.FORMAT_VERSION
    data: str | None = None
    pairs: int | None = None
    threshold: float | None = None
    calibration: Calibration | None = None
    metrics: dict[str, Any] | None = None  # reference -> its metrics, as the card reads them

    def results(self) -> dict[str, Any]:
        """The evaluation the export stores in the description: the metrics, data and pairs the
        file gives."""
        return self.model_dump(
            mode="json", include={"metrics", "data", "pairs"}, exclude_unset=True
        )
