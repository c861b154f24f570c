"""Export a trained grader as a self-describing, standard transformers model.

    python -m models.export --checkpoint runs/grader --out runs/export/grader \\
        --metrics runs/eval/grader/metrics.json

- LoRA adapters are merged into the base weights; the trained head is kept.
- ``id2label`` {0: not_relevant, 1: relevant} (or the grades 0-3 of a graded grader), the pad
  token id, safetensors weights, tokenizer.
- The grader's description travels in ``config.json`` (key ``grader``) and ``grader_config.json``:
  input format name, version and template, maximum length, decision threshold and calibration
  (from ``--metrics``, fitted on validation by ``python -m eval.checkpoint``), the label threshold
  on grades, the training data summary and metrics.
- A model card (``README.md`` with hub metadata) is generated from the run.
- Round trip: the export is reloaded with plain transformers (no code from this repository) and
  its probabilities compared with the checkpoint's on sample pairs; a mismatch beyond the stated
  tolerance fails the export.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from data.cli import parse_config, run_main
from data.io import check_replaceable, replace_folder
from data.records import DEFAULT_RELEVANCE_THRESHOLD
from models.builder import (
    GRADER_CONFIG_FILE,
    QUERY_LIKELIHOOD,
    is_causal_lm,
    is_generative,
    load_trained,
    read_grader_config,
)
from models.resolve import LABEL_NAMES

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
        metadata={"help": "metrics.json from eval.checkpoint: threshold, calibration, results."},
    )
    pairs: str | None = field(
        default=None, metadata={"help": "Judgments/pairs JSONL for the round-trip sample."}
    )
    sample_size: int = field(
        default=16, metadata={"help": "Pairs compared in the round-trip check."}
    )
    tolerance: float = field(
        default=1e-4, metadata={"help": "Max abs difference of P(relevant) allowed."}
    )
    dtype: str = field(default="float32", metadata={"help": "Exported weights dtype."})
    model_name: str | None = field(default=None, metadata={"help": "Name in the model card."})
    license: str | None = field(
        default=None,
        metadata={
            "help": "Licence in the model card (default: the base model's, e.g. llama3.2 for a "
            "Llama 3.2 student, apache-2.0 for SmolLM2)."
        },
    )


EXPORT_MARKER = "export_check.json"  # written last: a folder holding it is a finished export


class RoundTripError(ValueError):
    pass


def fill_template(template: str, query: str, document: str) -> str:
    """What a user of the export does with plain Python: put the texts into the stored template."""
    import re

    values = {"query": query, "document": document}
    return re.sub(r"\{(query|document)\}", lambda m: values[m.group(1)], template)


def plain_transformers_probabilities(
    export_dir: Path, pairs: Sequence[tuple[str, str]]
) -> np.ndarray:
    """P(relevant) computed with plain transformers and the exported description only."""
    from transformers import (
        AutoConfig,
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
    )

    config = AutoConfig.from_pretrained(export_dir)
    grader = config.grader
    fmt = grader["input_format"]
    tokenizer = AutoTokenizer.from_pretrained(export_dir)
    generative = is_generative(str(grader.get("mode", "")))
    causal = is_causal_lm(str(grader.get("mode", "")))
    cls = AutoModelForCausalLM if causal else AutoModelForSequenceClassification
    model = cls.from_pretrained(export_dir, dtype=torch.float32).eval()
    if grader.get("mode") == QUERY_LIKELIHOOD:
        return np.asarray(
            [_plain_query_likelihood(model, tokenizer, grader, q, d) for q, d in pairs]
        )
    out = []
    for query, document in pairs:
        fixed = len(
            tokenizer(
                fill_template(fmt["template"], query, ""),
                add_special_tokens=fmt["add_special_tokens"],
            )["input_ids"]
        )
        budget = fmt["max_length"] - fixed
        doc_ids = tokenizer(document, add_special_tokens=False)["input_ids"]
        while True:
            text = fill_template(fmt["template"], query, tokenizer.decode(doc_ids[:budget]))
            ids = tokenizer(text, add_special_tokens=fmt["add_special_tokens"], return_tensors="pt")
            if ids["input_ids"].shape[1] <= fmt["max_length"]:
                break
            budget -= ids["input_ids"].shape[1] - fmt["max_length"]
        with torch.no_grad():
            if generative:
                yes_no = [
                    tokenizer(fmt["answer_prefix"] + w, add_special_tokens=False)["input_ids"][0]
                    for w in fmt["label_words"]
                ]
                logits = model(**ids).logits[0, -1, yes_no]
            else:
                logits = model(**ids).logits[0]
        relevant_from = grader.get("relevant_from", 1)
        out.append(torch.softmax(logits.float(), -1)[relevant_from:].sum().item())
    return np.asarray(out)


def plain_query_log_likelihood(
    model: Any, tokenizer: Any, text: str, marker: str, add_special_tokens: bool
) -> float:
    """log P(tokens after the last ``marker`` | everything before), from one unbatched forward
    pass over all logits: the query-likelihood read-out as a user would write it."""
    ids = tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"]
    marker_ids = tokenizer(marker, add_special_tokens=False)["input_ids"]
    start = max(
        i + len(marker_ids)
        for i in range(len(ids) - len(marker_ids) + 1)
        if ids[i : i + len(marker_ids)] == marker_ids
    )
    with torch.no_grad():
        log_p = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    return sum(log_p[t - 1, ids[t]].item() for t in range(start, len(ids)))


def _plain_query_likelihood(
    model: Any, tokenizer: Any, grader: dict[str, Any], query: str, document: str
) -> float:
    """Uncalibrated P(relevant) of a query-likelihood export, from its description alone."""
    fmt, ql = grader["input_format"], grader["query_likelihood"]
    special = fmt["add_special_tokens"]
    fixed = len(
        tokenizer(fill_template(fmt["template"], query, ""), add_special_tokens=special)[
            "input_ids"
        ]
    )
    doc_ids = tokenizer(document, add_special_tokens=False)["input_ids"]
    doc = tokenizer.decode(doc_ids[: fmt["max_length"] - fixed])
    pmi = plain_query_log_likelihood(
        model, tokenizer, fill_template(fmt["template"], query, doc), ql["marker"], special
    ) - plain_query_log_likelihood(
        model, tokenizer, fill_template(fmt["template"], query, ""), ql["marker"], special
    )
    return float(torch.sigmoid(torch.tensor(ql["scale"] * pmi + ql["bias"])))


def _sample_pairs(config: ExportConfig) -> list[tuple[str, str]]:
    if not config.pairs:
        return SAMPLE_PAIRS
    from data.io import read_records
    from data.records import Pair, document_text

    pairs = []
    for record in read_records(config.pairs, Pair):
        pairs.append((record.query, document_text(record.text, record.title)))
        if len(pairs) >= config.sample_size:
            break
    return pairs


def relevant_grade(info: dict[str, Any]) -> int:
    """The 0-3 grade from which the training pairs counted as relevant."""
    if len(info.get("label_names") or LABEL_NAMES) > len(LABEL_NAMES):
        return int(info["relevant_from"])  # a graded head's first relevant class is that grade
    return DEFAULT_RELEVANCE_THRESHOLD


def _check_out(checkpoint: Path, out: Path, overwrite: bool) -> None:
    """Refuse an --out that would destroy the checkpoint or a user's folder, before any work."""
    source, target = checkpoint.resolve(), out.resolve()
    if target == source or source.is_relative_to(target) or target.is_relative_to(source):
        raise ValueError(
            f"out: {out} overlaps the checkpoint {checkpoint}; export to a separate folder"
        )
    check_replaceable(out, EXPORT_MARKER, overwrite, "export")


def export(config: ExportConfig) -> dict[str, Any]:
    from models.grader import Grader

    checkpoint = Path(config.checkpoint)
    out = Path(config.out)
    _check_out(checkpoint, out, config.overwrite)
    info = read_grader_config(checkpoint)
    if not info:
        raise FileNotFoundError(f"{checkpoint}: no {GRADER_CONFIG_FILE} (not a grader checkpoint)")
    metrics: dict[str, Any] = {}
    if config.metrics:
        metrics = json.loads(Path(config.metrics).read_text())
    dtype = getattr(torch, config.dtype)
    model, tokenizer = load_trained(checkpoint, dtype=dtype)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()  # LoRA into the base weights; the saved head copy is kept
    causal = is_causal_lm(str(info.get("mode", "")))
    model.config.pad_token_id = tokenizer.pad_token_id
    names = list(info.get("label_names") or LABEL_NAMES)
    if not causal:
        model.config.id2label = dict(enumerate(names))
        model.config.label2id = {name: i for i, name in enumerate(names)}
    description = {
        **info,
        "format_version": 1,
        "threshold": float(metrics.get("threshold", info.get("threshold", 0.5))),
        "calibration": metrics.get(
            "calibration", info.get("calibration", {"method": "none", "temperature": 1.0})
        ),
        "label_threshold": {
            "scale": "0-3",
            "relevant_when_grade_at_least": relevant_grade(info),
        },
        "evaluation": {k: metrics[k] for k in ("metrics", "data", "pairs") if k in metrics},
        "label_names": names,
        "relevant_from": int(info.get("relevant_from", 1)),
    }
    model.config.grader = description
    with replace_folder(out) as staging:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        (staging / GRADER_CONFIG_FILE).write_text(
            json.dumps(description, indent=2, ensure_ascii=False) + "\n"
        )
        (staging / "README.md").write_text(model_card(description, config))

        # Round trip: plain transformers on the export vs our inference path on the checkpoint;
        # a failure leaves the previous export in place.
        pairs = _sample_pairs(config)
        reference = Grader.from_pretrained(checkpoint, device="cpu", dtype=torch.float32)
        expected = reference.raw_probabilities([q for q, _ in pairs], [d for _, d in pairs])
        actual = plain_transformers_probabilities(staging, pairs)
        difference = float(np.max(np.abs(expected - actual)))
        if difference > config.tolerance:
            raise RoundTripError(
                f"export {out} does not reproduce {checkpoint}: max |ΔP(relevant)| = "
                f"{difference:.2e} over {len(pairs)} pairs (tolerance {config.tolerance:.0e}); "
                "the previous export, if any, is unchanged"
            )
        report = {
            "out": str(out),
            "pairs_checked": len(pairs),
            "max_abs_difference": difference,
            "tolerance": config.tolerance,
        }
        (staging / EXPORT_MARKER).write_text(json.dumps(report, indent=2) + "\n")
    return report


def _metrics_table(description: dict[str, Any]) -> str:
    evaluation = description.get("evaluation", {}).get("metrics", {})
    if not evaluation:
        return "No evaluation results were attached to this export (`--metrics`).\n"
    lines = [
        "| labels | pairs | accuracy | precision | recall | F1 | κ | ROC-AUC | threshold |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for source, entry in evaluation.items():
        m = entry.get("at_validation_threshold", entry["at_0.5"])
        auc = "–" if m.get("roc_auc") is None else f"{m['roc_auc']:.3f}"
        lines.append(
            f"| {source} | {m['pairs']} | {m['accuracy']:.3f} | {m['precision']:.3f} | {m['recall']:.3f} | "
            f"{m['f1']:.3f} | {m['kappa']:.3f} | {auc} | {m['threshold']:.3f} |"
        )
    return "\n".join(lines) + "\n"


QUERY_LIKELIHOOD_SNIPPET = """import re, torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

path = "{path}"
grader = AutoConfig.from_pretrained(path).grader
fmt, ql = grader["input_format"], grader["query_likelihood"]
tokenizer = AutoTokenizer.from_pretrained(path)
model = AutoModelForCausalLM.from_pretrained(path).eval()
marker = tokenizer(ql["marker"], add_special_tokens=False)["input_ids"]

def fill(query, document):
    slots = {{"query": query, "document": document}}
    return re.sub(r"\\{{(query|document)\\}}", lambda m: slots[m.group(1)], fmt["template"])

def query_log_likelihood(text):
    # log P(query tokens | everything before them): the tokens after the template's marker.
    ids = tokenizer(text, add_special_tokens=fmt["add_special_tokens"])["input_ids"]
    start = max(i + len(marker) for i in range(len(ids) - len(marker) + 1)
                if ids[i:i + len(marker)] == marker)
    with torch.no_grad():
        log_p = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    return sum(log_p[t - 1, ids[t]].item() for t in range(start, len(ids)))

def p_relevant(query, document):
    fixed = len(tokenizer(fill(query, ""), add_special_tokens=fmt["add_special_tokens"])["input_ids"])
    doc_ids = tokenizer(document, add_special_tokens=False)["input_ids"]
    doc = tokenizer.decode(doc_ids[: fmt["max_length"] - fixed])
    # How much the document raises the query's likelihood over an empty passage (PMI).
    pmi = query_log_likelihood(fill(query, doc)) - query_log_likelihood(fill(query, ""))
    temperature = grader["calibration"].get("temperature", 1.0)
    return torch.sigmoid(torch.tensor((ql["scale"] * pmi + ql["bias"]) / temperature)).item()

p = p_relevant("what is an axon terminal", "Axon terminals are the ends of an axon's branches.")
print(p, p >= grader["threshold"])
"""


def usage_snippet(path: str, generative: bool, query_likelihood: bool = False) -> str:
    """The model card's plain-transformers example (run by the tests against stored scores)."""
    if query_likelihood:
        return QUERY_LIKELIHOOD_SNIPPET.format(path=path)
    if generative:
        load = "AutoModelForCausalLM"
        read_out = (
            "    answers = [tokenizer(fmt['answer_prefix'] + w, add_special_tokens=False)['input_ids'][0]\n"
            "               for w in fmt['label_words']]\n"
            "    with torch.no_grad():\n"
            "        logits = model(**inputs).logits[0, -1, answers]\n"
        )
    else:
        load = "AutoModelForSequenceClassification"
        read_out = "    with torch.no_grad():\n        logits = model(**inputs).logits[0]\n"
    return f"""import re, torch
from transformers import AutoConfig, {load}, AutoTokenizer

path = "{path}"
grader = AutoConfig.from_pretrained(path).grader
fmt = grader["input_format"]
tokenizer = AutoTokenizer.from_pretrained(path)
model = {load}.from_pretrained(path).eval()

def fill(query, document):
    slots = {{"query": query, "document": document}}
    return re.sub(r"\\{{(query|document)\\}}", lambda m: slots[m.group(1)], fmt["template"])

def p_relevant(query, document):
    special = fmt["add_special_tokens"]
    fixed = len(tokenizer(fill(query, ""), add_special_tokens=special)["input_ids"])
    doc_ids = tokenizer(document, add_special_tokens=False)["input_ids"]
    doc = tokenizer.decode(doc_ids[: fmt["max_length"] - fixed])
    inputs = tokenizer(fill(query, doc), add_special_tokens=special, return_tensors="pt")
{read_out}    # P(relevant): the relevant classes' mass (relevant_from is 1 for a binary head, 2 for
    # the grades 0-3), calibrated by temperature on its log-odds.
    p = torch.softmax(logits.float(), -1)[grader.get("relevant_from", 1):].sum()
    temperature = grader["calibration"].get("temperature", 1.0)
    return torch.sigmoid(torch.logit(p, eps=1e-7) / temperature).item()

p = p_relevant("what is an axon terminal", "Axon terminals are the ends of an axon's branches.")
print(p, p >= grader["threshold"])
"""


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


def vllm_section(
    name: str,
    generative: bool,
    threshold: float,
    temperature: float,
    add_special_tokens: bool,
    relevant_from: int = 1,
) -> str:
    if generative:
        return ""
    return f"""
## Serving with vLLM

The export is a standard `LlamaForSequenceClassification`, which vLLM serves as a classifier
(`/classify`; older vLLM versions need `--task classify`):

```bash
vllm serve {name}
curl localhost:8000/classify -H 'Content-Type: application/json' -d '{{"model": "{name}",
  "input": ["<the prompt, filled as fill() does above>"],
  "add_special_tokens": {"true" if add_special_tokens else "false"}}}'
```

vLLM returns softmax(logits) as `probs` and applies nothing that the grader stores beside the
weights: fill the prompt template yourself (`fill` above; the template already holds any special
tokens, hence `add_special_tokens` as shown), sum `probs[{relevant_from}:]` (the relevant
classes) into P(relevant), divide its log-odds by the temperature ({temperature:.3f}) before the
sigmoid, and compare with the threshold ({threshold:.3f}). That sum alone is the uncalibrated
P(relevant), meant for threshold 0.5.
"""


def model_card(description: dict[str, Any], config: ExportConfig) -> str:
    fmt = description["input_format"]
    data = description.get("data", {})
    base = description.get("base_model", "")
    hub_base = "HuggingFaceTB/SmolLM2-135M-Instruct" if base == "smollm2-135m" else base
    generative = is_generative(str(description.get("mode", "")))
    query_likelihood = description.get("mode") == QUERY_LIKELIHOOD
    name = config.model_name or Path(config.out).name
    threshold = description["threshold"]
    temperature = description["calibration"].get("temperature", 1.0)
    license_id = config.license or base_model_license(hub_base)
    graded_note = (
        "; the head predicts the grade itself (classes "
        + ", ".join(f"{i} {n}" for i, n in enumerate(description["label_names"]))
        + "), and P(relevant) is the mass of the relevant grades"
        if len(description["label_names"]) > len(LABEL_NAMES)
        else ""
    )
    return f"""---
license: {license_id}
library_name: transformers
pipeline_tag: {"text-generation" if generative or query_likelihood else "text-classification"}
base_model: {hub_base}
tags:
- relevance
- reranking
- retrieval-evaluation
- llm-judge-distillation
---

# {name}: a relevance grader

Says whether a document answers a search query: P(relevant) for a (query, document) pair. It was
distilled from a relevance judge into `{hub_base}` ({description.get("mode")} fine-tuning,
loss `{description.get("loss", {}).get("loss", "generative")}`) to label retrieval results for
search and RAG evaluation (NDCG, MAP, MRR) at a fraction of a large judge's cost.

## Results

{_metrics_table(description)}
Evaluated on held-out queries; the decision threshold ({threshold:.3f}) and the temperature
({temperature:.3f}) were fitted on the validation split, never on the test split.

## Training data and teacher

- training pairs: {data.get("train_pairs", "unknown")} (positive rate {data.get("train_positive_rate", float("nan")):.3f}),
  validation pairs: {data.get("validation_pairs", "unknown")}; dataset: `{data.get("dataset", "")}`
- relevant means grade ≥ {relevant_grade(description)} on a 0–3 scale (TREC's convention){graded_note}
- the teacher is recorded per judgment in the training data (`judge` field)

## Usage with plain transformers

The input format `{fmt["name"]}@{fmt["version"]}` is stored in `config.json` (key `grader`): a
template with `{{query}}` and `{{document}}` slots, at most {fmt["max_length"]} tokens; long
documents are cut at the end, never the query.

```python
{usage_snippet(name, generative, query_likelihood)}```

With this repository: `Grader.from_pretrained(path).score(query, documents)`.
{vllm_section(name, generative or query_likelihood, threshold, temperature, bool(fmt.get("add_special_tokens")), description["relevant_from"])}
## Intended use and limitations

- Intended for labeling retrieved passages to compute retrieval metrics and to compare retrieval
  systems offline; not for ranking in production without checking latency and quality.
- It inherits the teacher's biases and the training collection's domain and language (English).
  Expect lower agreement on other domains; re-check against a few hundred human judgments.
- Scores are calibrated on one validation split; recalibrate for a different collection.
- Licence: {license_id}, the base model's{" (Llama 3.2 Community License: attribution and its acceptable use policy apply)" if license_id == "llama3.2" else ""}.
"""


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([ExportConfig], args)
    report = export(config)
    print(
        f"exported {config.checkpoint} -> {report['out']}; round trip with plain transformers on "
        f"{report['pairs_checked']} pairs: max |ΔP| = {report['max_abs_difference']:.2e} (tolerance {report['tolerance']:.0e})"
    )


if __name__ == "__main__":
    run_main(main)
