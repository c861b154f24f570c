"""The query-likelihood family's scoring and export read-out: how much the document raises the
query's log-likelihood.

P(relevant) = sigmoid(scale * PMI + bias), PMI = log P(query | document) - log P(query | empty
passage) under the causal LM (:mod:`models.families.query_likelihood.scoring` holds the batched
primitives). Mode ``query_likelihood``: the scale and bias, and optionally the top decoder layers,
train on cached states (:mod:`models.families.query_likelihood.states`). vLLM has no read-out for
it: serve it with transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from core.errors import InputError
from models.families.base import LoadedGrader, PairBatch, Pairs, PlainExport, ScoringFamily
from models.families.plain import fill_template

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from models.grader_config import GraderDescription
    from models.input_format import GraderInputFormat


def scale_and_bias(description: GraderDescription) -> tuple[float, float]:
    """The fitted read-out stored in a query-likelihood grader's description."""
    read_out = description.query_likelihood
    if read_out is None:
        raise InputError("a query-likelihood grader's description has no `query_likelihood` entry")
    return read_out.scale, read_out.bias


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


SNIPPET = """import re, torch
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


class QueryLikelihoodFamily(ScoringFamily):
    name = "query_likelihood"
    task = "causal-lm"
    summary = "the query's likelihood given the document (PMI)"

    def input_format(
        self, tokenizer: PreTrainedTokenizerBase, max_length: int, prompt_format: str, model: str
    ) -> GraderInputFormat:
        from models.families.query_likelihood.scoring import query_likelihood_format

        return query_likelihood_format(max_length)

    def untrained_origin(self, description: GraderDescription, base: str) -> str | None:
        """A backbone that never trained leaves the base model's zero-shot likelihood, only its
        scale and bias fitted: training cannot change its ranking."""
        trained = description.parameters.trainable if description.parameters else None
        read_out = description.query_likelihood
        if not (read_out and read_out.backbone) and trained != 0:
            return None
        return (
            f"It is `{base}`'s zero-shot query likelihood (the pointwise mutual information of "
            "query and document), with a scale and a bias fitted on a teacher's labels: no weight "
            "of the model was trained, so its ranking within a query is the base model's."
        )

    def class_probabilities(self, grader: LoadedGrader, batch: PairBatch) -> np.ndarray:
        from models.families.query_likelihood.scoring import pmi_probabilities, pmi_scores
        from models.state_cache import StateCache, default_state_cache

        # A backbone that never trained is its base model: a grader that shares states reads the
        # log-likelihoods its training (or another grader on that base) stored in the state cache.
        read_out = grader.info.query_likelihood
        backbone = read_out.backbone if read_out else None
        folder = default_state_cache() if grader.shares_states and backbone else None
        pmi = pmi_scores(
            grader.model,
            grader.tokenizer,
            grader.input_format,
            batch.input_ids,
            batch_size=grader.batch_size,
            max_batch_tokens=grader.max_batch_tokens,
            show_progress=batch.show_progress,
            cache=StateCache(folder, backbone) if folder and backbone else None,
        )
        return pmi_probabilities(pmi, *scale_and_bias(grader.info))

    def reference_probabilities(self, export: PlainExport, pairs: Pairs) -> np.ndarray:
        model, tokenizer = export.model, export.tokenizer
        fmt, read_out = export.description["input_format"], export.description["query_likelihood"]
        special, marker = fmt["add_special_tokens"], read_out["marker"]
        out = []
        for query, document in pairs:
            empty = fill_template(fmt["template"], query, "")
            fixed = len(tokenizer(empty, add_special_tokens=special)["input_ids"])
            doc_ids = tokenizer(document, add_special_tokens=False)["input_ids"]
            doc = tokenizer.decode(doc_ids[: fmt["max_length"] - fixed])
            full = fill_template(fmt["template"], query, doc)
            pmi = plain_query_log_likelihood(
                model, tokenizer, full, marker, special
            ) - plain_query_log_likelihood(model, tokenizer, empty, marker, special)
            logit = torch.tensor(read_out["scale"] * pmi + read_out["bias"])
            out.append(float(torch.sigmoid(logit)))
        return np.asarray(out)

    def usage_snippet(self, path: str) -> str:
        return SNIPPET.format(path=path)


QUERY_LIKELIHOOD = QueryLikelihoodFamily()
