"""The exported grader's model card (``README.md`` with hub metadata).

The usage snippet and the serving section come from the grader's scoring family
(``models.families``). The card's title names the model by the name it will have on a hub; a
local export's snippet and serving commands load it from its absolute path (a bare folder name
would be looked up on the hub from anywhere but the folder's parent), and a pushed card's from its
repo id (``models.push`` writes the card again).
"""

from __future__ import annotations

from pathlib import Path

from core.io import markdown_table
from core.records import DEFAULT_RELEVANCE_THRESHOLD
from models.families import family_of_description
from models.grader_config import GraderDescription, TrainingData
from models.input_format import GraderInputFormat
from models.resolve import LABEL_NAMES

# Hub ids of the embedded defaults, for the card's ``base_model``.
HUB_IDS = {
    "smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "minilm-l6": "sentence-transformers/all-MiniLM-L6-v2",
}


def hub_base_model(base: str) -> str | None:
    """The base model's hub id, or None for a local model a hub cannot link to (a path, or a
    folder named like an embedded default)."""
    import re

    for candidate in (base, base.rstrip("/").rsplit("/", 1)[-1]):
        if candidate in HUB_IDS:
            return HUB_IDS[candidate]
    looks_like_id = re.fullmatch(r"[\w.-]+/[\w.-]+", base) is not None
    return (
        base
        if looks_like_id and not base.startswith((".", "/")) and not Path(base).exists()
        else None
    )


def relevant_grade(description: GraderDescription) -> int:
    """The 0-3 grade from which the training pairs counted as relevant."""
    if len(description.label_names or LABEL_NAMES) > len(LABEL_NAMES):
        return description.relevant_from  # a graded head's first relevant class
    return DEFAULT_RELEVANCE_THRESHOLD


def base_model_license(base_model: str) -> str:
    """The model card's licence id: a fine-tuned model stays under its base model's licence."""
    name = base_model.lower()
    for marker, license_id in (
        ("llama-3.2", "llama3.2"),
        ("llama-3.1", "llama3.1"),
        ("llama-3", "llama3"),
        ("gemma", "gemma"),
    ):
        if marker in name:
            return license_id
    return "apache-2.0"  # SmolLM2, Qwen2.5 and the other Apache-licensed bases


def metrics_table(description: GraderDescription) -> str:
    # relevance-grader evaluate's results keep their own open shape inside the description.
    evaluation = (description.evaluation or {}).get("metrics", {})
    if not evaluation:
        return "No evaluation results were attached to this export (`--metrics`).\n"
    rows = []
    for source, entry in evaluation.items():
        m = entry.get("at_validation_threshold", entry["at_0.5"])
        auc = "–" if m.get("roc_auc") is None else f"{m['roc_auc']:.3f}"
        rows.append(
            [
                source,
                m["pairs"],
                f"{m['accuracy']:.3f}",
                f"{m['precision']:.3f}",
                f"{m['recall']:.3f}",
                f"{m['f1']:.3f}",
                f"{m['kappa']:.3f}",
                auc,
                f"{m['threshold']:.3f}",
            ]
        )
    header = [
        "labels",
        "pairs",
        "accuracy",
        "precision",
        "recall",
        "F1",
        "κ",
        "ROC-AUC",
        "threshold",
    ]
    return markdown_table(header, rows)


def what_it_is(description: GraderDescription, base: str) -> str:
    """How the grader came to be, as it is: a zero-shot grader (no weight trained) says so
    rather than 'fine-tuned'."""
    family = family_of_description(description)
    untrained = family.untrained_origin(description, base)
    if untrained:
        return untrained
    return (
        f"It was trained on a teacher's relevance labels from `{base}` ({description.mode} "
        f"fine-tuning, scored by {family.summary}, loss `{description.loss_name}`)."
    )


def _known(value: float | None, spec: str = "") -> str:
    return "unknown" if value is None else format(value, spec)


def model_card(
    description: GraderDescription,
    name: str,
    license_id: str | None = None,
    path: str | None = None,
) -> str:
    """The card of an export described by ``description`` and published as ``name``; its code
    loads the model from ``path`` (the export's absolute path; default: ``name``, a hub id)."""
    path = path or name
    family = family_of_description(description)
    fmt = GraderInputFormat.from_dict(description.input_format or {})
    data = description.data or TrainingData()
    base = description.base_model or ""
    hub_id = hub_base_model(base)
    hub_base = hub_id or "a local base model"
    threshold, temperature = description.threshold, description.temperature
    names = description.label_names or list(LABEL_NAMES)
    license_id = license_id or base_model_license(hub_id or base)
    graded_note = (
        "; the head predicts the grade itself (classes "
        + ", ".join(f"{i} {n}" for i, n in enumerate(names))
        + "), and P(relevant) is the mass of the relevant grades"
        if len(names) > len(LABEL_NAMES)
        else ""
    )
    llama_terms = (
        " (Llama 3.2 Community License: attribution and its acceptable use policy apply)"
        if license_id == "llama3.2"
        else ""
    )
    return f"""---
license: {license_id}
library_name: transformers
pipeline_tag: {family.pipeline_tag}
{f"base_model: {hub_id}" + chr(10) if hub_id else ""}tags:
- relevance
- reranking
- retrieval-evaluation
- llm-judge-distillation
---

# {name}: a relevance grader

Says whether a document answers a search query: P(relevant) for a (query, document) pair.
{what_it_is(description, hub_base)} It labels retrieval results for search and RAG
evaluation (NDCG, MAP, MRR) at a fraction of a large judge's cost.

## Results

{metrics_table(description)}
Evaluated on held-out queries; the decision threshold ({threshold:.3f}) and the temperature
({temperature:.3f}) were fitted on the validation split, never on the test split.

## Training data and teacher

- training pairs: {_known(data.train_pairs)} (positive rate {_known(data.train_positive_rate, ".3f")}),
  validation pairs: {_known(data.validation_pairs)}; dataset: `{Path(data.dataset or "").name}`
- relevant means grade ≥ {relevant_grade(description)} on a 0–3 scale (TREC's convention){graded_note}
- the teacher is recorded per judgment in the training data (`judge` field)

## Usage with plain transformers

{family.input_section(fmt)}

```python
{family.usage_snippet(path)}```

With this repository: `Grader.from_pretrained(path).score(query, documents)`.
{family.serving_section(path, description)}
## Intended use and limitations

- Intended for labeling retrieved passages to compute retrieval metrics and to compare retrieval
  systems offline; not for ranking in production without checking latency and quality.
- It inherits the teacher's biases and the training collection's domain and language (English).
  Expect lower agreement on other domains; re-check against a few hundred human judgments.
- Scores are calibrated on one validation split; recalibrate for a different collection.
- Licence: {license_id}, the base model's{llama_terms}.
"""
