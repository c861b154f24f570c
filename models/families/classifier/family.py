"""The classifier family's scoring and export read-out: a sequence-classification head on the
decoder's last token.

P(relevant) is the softmax mass of the relevant classes: the second of two (``labels: binary``),
or grades >= 2 of a graded 0-3 head, which also gives each pair a grade. Modes ``full``,
``frozen``, ``top_layers`` and ``lora`` (the paper's configurations B and C). vLLM serves the
export as a classifier.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from models.families.base import LoadedGrader, PairBatch, Pairs, PlainExport, ScoringFamily
from models.families.plain import softmax_snippet, truncated_inputs

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from models.grader_config import GraderDescription
    from models.input_format import GraderInputFormat


class ClassifierFamily(ScoringFamily):
    name = "classifier"
    task = "classification"
    supports_graded = True
    pipeline_tag = "text-classification"
    summary = "a classification head on the last token"

    def trainable_head(self, model: PreTrainedModel) -> list[torch.nn.Module]:
        return [model.score]

    def lora_modules_to_save(self) -> list[str] | None:
        # Without it the trained head is lost on reload (peft #310, #577, #876, #1070).
        return ["score"]

    def input_format(
        self, tokenizer: PreTrainedTokenizerBase, max_length: int, prompt_format: str, model: str
    ) -> GraderInputFormat:
        """The grader prompt, or with ``query-likelihood`` the query-likelihood grader's own: a
        frozen head beside that grader then reads the last-layer states its pass stored for the
        same token ids (``models.families.query_likelihood.scoring.pmi_scores``), so the backbone
        runs once per pair for both rows of a cross-validation."""
        if prompt_format == "query-likelihood":
            from models.families.query_likelihood.scoring import query_likelihood_format

            return query_likelihood_format(max_length)
        return super().input_format(tokenizer, max_length, prompt_format, model)

    def class_probabilities(self, grader: LoadedGrader, batch: PairBatch) -> np.ndarray:
        from models.scoring import classifier_probabilities, shared_prefix_classifier_probabilities

        if grader.compile:  # the opt-in fast path (models.speed)
            from models.speed import compiled_classifier_probabilities

            return compiled_classifier_probabilities(grader, batch)
        if grader.prefix_cache and batch.prefix_lengths is not None:
            return shared_prefix_classifier_probabilities(
                grader.model, batch.input_ids, batch.prefix_lengths, batch_size=grader.batch_size
            )
        return classifier_probabilities(
            grader.model,
            batch.input_ids,
            batch_size=grader.batch_size,
            max_batch_tokens=grader.max_batch_tokens,
            show_progress=batch.show_progress,
        )

    def reference_probabilities(self, export: PlainExport, pairs: Pairs) -> np.ndarray:
        fmt = export.description["input_format"]
        relevant_from = export.description.get("relevant_from", 1)
        out = []
        for query, document in pairs:
            inputs = truncated_inputs(export.tokenizer, fmt, query, document)
            with torch.no_grad():
                logits = export.model(**inputs).logits[0]
            out.append(torch.softmax(logits.float(), -1)[relevant_from:].sum().item())
        return np.asarray(out)

    def usage_snippet(self, path: str) -> str:
        read_out = "    with torch.no_grad():\n        logits = model(**inputs).logits[0]\n"
        return softmax_snippet(path, "AutoModelForSequenceClassification", read_out)

    def serving_section(self, name: str, description: GraderDescription) -> str:
        from models.input_format import GraderInputFormat

        fmt = GraderInputFormat.from_dict(description.input_format or {})
        threshold, temperature = description.threshold, description.temperature
        special = "true" if fmt.add_special_tokens else "false"
        relevant_from = description.relevant_from
        return f"""
## Serving with vLLM

The export is a standard `LlamaForSequenceClassification`, which vLLM serves as a classifier
(`/classify`; older vLLM versions need `--task classify`):

```bash
vllm serve {name}
curl localhost:8000/classify -H 'Content-Type: application/json' -d '{{"model": "{name}",
  "input": ["<the prompt, filled as fill() does above>"],
  "add_special_tokens": {special}}}'
```

vLLM returns softmax(logits) as `probs` and applies nothing that the grader stores beside the
weights: fill the prompt template yourself (`fill` above; the template already holds any special
tokens, hence `add_special_tokens` as shown), sum `probs[{relevant_from}:]` (the relevant
classes) into P(relevant), divide its log-odds by the temperature ({temperature:.3f}) before the
sigmoid, and compare with the threshold ({threshold:.3f}). That sum alone is the uncalibrated
P(relevant), meant for threshold 0.5.
"""


CLASSIFIER = ClassifierFamily()
