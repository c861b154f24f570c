"""The answer-token family: the causal LM answers yes or no after the grader's prompt.

P(relevant) = P(yes) / (P(yes) + P(no)) at the answer position. Modes ``generative`` and
``generative-lora`` (the paper's configuration A and its LoRA-SFT runs), and every zero-shot
causal LM (``Grader.from_pretrained(name, zero_shot=True)``).
"""

from __future__ import annotations

import numpy as np
import torch

from models.families.base import LoadedGrader, PairBatch, Pairs, PlainExport, ScoringFamily
from models.families.plain import softmax_snippet, truncated_inputs


class AnswerTokenFamily(ScoringFamily):
    name = "answer_token"
    task = "causal-lm"
    summary = "the answer token's probability (P(yes))"

    def class_probabilities(self, grader: LoadedGrader, batch: PairBatch) -> np.ndarray:
        from models.scoring import answer_token_probabilities

        probabilities, _ = answer_token_probabilities(
            grader.model,
            batch.input_ids,
            grader.input_format.label_token_ids(grader.tokenizer),
            pad_token_id=grader.tokenizer.pad_token_id,
            batch_size=grader.batch_size,
            max_batch_tokens=grader.max_batch_tokens,
            show_progress=batch.show_progress,
        )
        return probabilities

    def reference_probabilities(self, export: PlainExport, pairs: Pairs) -> np.ndarray:
        tokenizer, fmt = export.tokenizer, export.description["input_format"]
        relevant_from = export.description.get("relevant_from", 1)
        answers = [
            tokenizer(fmt["answer_prefix"] + word, add_special_tokens=False)["input_ids"][0]
            for word in fmt["label_words"]
        ]
        out = []
        for query, document in pairs:
            inputs = truncated_inputs(tokenizer, fmt, query, document)
            with torch.no_grad():
                logits = export.model(**inputs).logits[0, -1, answers]
            out.append(torch.softmax(logits.float(), -1)[relevant_from:].sum().item())
        return np.asarray(out)

    def usage_snippet(self, path: str) -> str:
        read_out = (
            "    answers = [tokenizer(fmt['answer_prefix'] + w, add_special_tokens=False)['input_ids'][0]\n"
            "               for w in fmt['label_words']]\n"
            "    with torch.no_grad():\n"
            "        logits = model(**inputs).logits[0, -1, answers]\n"
        )
        return softmax_snippet(path, "AutoModelForCausalLM", read_out)


ANSWER_TOKEN = AnswerTokenFamily()
