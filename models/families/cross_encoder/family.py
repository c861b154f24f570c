"""The cross-encoder family: a BERT-style encoder reads query and document together.

The pair is tokenized as the tokenizer's sentence pair (``[CLS] query [SEP] document [SEP]``,
token types 0 then 1; ``models.input_format``'s ``cross-encoder@1``), the document cut at its
end, and a fresh classification head on the pooled ``[CLS]`` state gives two classes (or the
grades 0-3); P(relevant) is the relevant classes' softmax mass, which for two classes is
sigmoid(l1 - l0): a one-logit head in a form that keeps the classifier's losses, metrics and
graded heads. Mode ``cross_encoder``: everything trains. Initialised from an embedder such as
all-MiniLM-L6-v2 (``minilm-l6``), whose weights the dense retriever shares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from core.errors import InputError
from models.families.base import LoadedGrader, PairBatch, Pairs, PlainExport, ScoringFamily

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from models.grader_config import GraderDescription
    from models.input_format import GraderInputFormat


SNIPPET = """import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

path = "{path}"
grader = AutoConfig.from_pretrained(path).grader
fmt = grader["input_format"]
tokenizer = AutoTokenizer.from_pretrained(path)
model = AutoModelForSequenceClassification.from_pretrained(path).eval()

def p_relevant(query, document):
    # The tokenizer's sentence pair: [CLS] query [SEP] document [SEP], the document cut to fit;
    # a "[SEP]" written inside a text is read as text.
    inputs = tokenizer(query, document, truncation="only_second", max_length=fmt["max_length"],
                       split_special_tokens=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits[0]
    # P(relevant): the relevant classes' mass (relevant_from is 1 for a binary head, 2 for the
    # grades 0-3), calibrated by temperature on its log-odds.
    p = torch.softmax(logits.float(), -1)[grader.get("relevant_from", 1):].sum()
    temperature = grader["calibration"].get("temperature", 1.0)
    return torch.sigmoid(torch.logit(p, eps=1e-7) / temperature).item()

p = p_relevant("what is an axon terminal", "Axon terminals are the ends of an axon's branches.")
print(p, p >= grader["threshold"])
"""


class CrossEncoderFamily(ScoringFamily):
    name = "cross_encoder"
    task = "classification"
    supports_graded = True
    pipeline_tag = "text-classification"
    summary = "a classification head on an encoder reading the query and document as one pair"

    def trainable_head(self, model: PreTrainedModel) -> list[torch.nn.Module]:
        return [model.classifier]

    def input_format(
        self, tokenizer: PreTrainedTokenizerBase, max_length: int, prompt_format: str, model: str
    ) -> GraderInputFormat:
        from models.input_format import GraderInputFormat

        if prompt_format != "auto":
            raise InputError(
                f"prompt_format: a cross-encoder reads no prompt, only the (query, document) "
                f"pair; leave it at auto (got {prompt_format})"
            )
        return GraderInputFormat.sentence_pair(tokenizer, max_length)

    def class_probabilities(self, grader: LoadedGrader, batch: PairBatch) -> np.ndarray:
        from models.scoring import classifier_probabilities

        # Bidirectional attention: a query's shared leading tokens depend on its document, so
        # the classifier's shared-prefix pass does not apply.
        return classifier_probabilities(
            grader.model,
            batch.input_ids,
            batch_size=grader.batch_size,
            max_batch_tokens=grader.max_batch_tokens,
            show_progress=batch.show_progress,
            pair_separator=grader.tokenizer.sep_token_id,
        )

    def reference_probabilities(self, export: PlainExport, pairs: Pairs) -> np.ndarray:
        fmt = export.description["input_format"]
        relevant_from = export.description.get("relevant_from", 1)
        out = []
        for query, document in pairs:
            inputs = export.tokenizer(
                query,
                document,
                truncation="only_second",
                max_length=fmt["max_length"],
                split_special_tokens=True,
                return_tensors="pt",
            )
            with torch.no_grad():
                logits = export.model(**inputs).logits[0]
            out.append(torch.softmax(logits.float(), -1)[relevant_from:].sum().item())
        return np.asarray(out)

    def input_section(self, fmt: GraderInputFormat) -> str:
        return (
            f"The input format `{fmt.id}` is stored in `config.json` (key `grader`): the "
            f"tokenizer's sentence pair `{fmt.template}`, at most {fmt.max_length} tokens; long "
            "documents are cut at the end, never the query."
        )

    def usage_snippet(self, path: str) -> str:
        return SNIPPET.format(path=path)

    def serving_section(self, name: str, description: GraderDescription) -> str:
        return """
## Serving

The export is a standard `BertForSequenceClassification` with two classes (or four grades).
vLLM's scoring API (`/score`, `/rerank`) serves only cross-encoders with a single output, so
serve this one with transformers as above (a batch of pairs: pass lists of queries and documents
to the tokenizer with `padding=True`).
"""


CROSS_ENCODER = CrossEncoderFamily()
