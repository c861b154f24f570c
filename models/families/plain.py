"""Plain-transformers building blocks of the export's reference scorers and the model card's
snippets: what a user writes without this repository, kept apart from the batched inference path
so that the round-trip check compares two independent implementations."""

from __future__ import annotations

import re
from typing import Any

import torch

_SLOT = re.compile(r"\{(query|document)\}")


def fill_template(template: str, query: str, document: str) -> str:
    """Put the texts into the stored template, as a user of the export does with plain Python."""
    values = {"query": query, "document": document}
    return _SLOT.sub(lambda m: values[m.group(1)], template)


def truncated_inputs(
    tokenizer: Any, fmt: dict[str, Any], query: str, document: str
) -> dict[str, torch.Tensor]:
    """The tokenized prompt with the document cut at its end to fit ``max_length``."""
    special = fmt["add_special_tokens"]
    fixed = len(
        tokenizer(fill_template(fmt["template"], query, ""), add_special_tokens=special)[
            "input_ids"
        ]
    )
    budget = fmt["max_length"] - fixed
    doc_ids = tokenizer(document, add_special_tokens=False)["input_ids"]
    while True:
        text = fill_template(fmt["template"], query, tokenizer.decode(doc_ids[:budget]))
        ids = tokenizer(text, add_special_tokens=special, return_tensors="pt")
        if ids["input_ids"].shape[1] <= fmt["max_length"]:
            return ids
        budget -= ids["input_ids"].shape[1] - fmt["max_length"]


def softmax_snippet(path: str, load: str, read_out: str) -> str:
    """The card's example for the families read through a softmax (classifier, answer token)."""
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
