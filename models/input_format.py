"""The grader's input: the one place where (query, document) becomes text and tokens.

Training, evaluation, zero-shot baselines and the exported model all call :func:`format_pairs`
with a :class:`GraderInputFormat`. The format is rendered once from the tokenizer's chat template
(or a plain template when there is none) into a single string with ``{query}`` and ``{document}``
slots; that string, its name and version travel with every checkpoint, so a later change of the
tokenizer's template (Llama-3 templates print today's date) cannot silently change the inputs.

Long inputs lose the end of the document, never the closing question; a query too long to leave
a quarter of ``max_length`` for the document loses its end too (and is reported as cut). The final
token is the last token of the prompt (the assistant header in chat form), never the pad token,
so last-token pooling reads the right position (transformers issue #35352).

A *sentence-pair* format (``pair``, the cross-encoder's ``cross-encoder@1``) has no prompt: the
tokenizer joins query and document in its own pair layout (``[CLS] query [SEP] document [SEP]``
for BERT), the document cut at its last tokens as ``truncation="only_second"`` cuts it; its
``template`` only shows that layout.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from transformers import PreTrainedTokenizerBase

from core.errors import InputError
from core.records import document_text, normalise_text

FORMAT_NAME = "grader-chat"
PLAIN_FORMAT_NAME = "grader-plain"
PAIR_FORMAT_NAME = "cross-encoder"
FORMAT_VERSION = 1
DEFAULT_MAX_LENGTH = 512

SYSTEM_PROMPT = (
    "You are a search quality rater. You read a search query and one retrieved document, "
    "and you decide whether the document contains information that answers the query."
)
QUESTION = (
    "Query: {query}\n\nDocument:\n{document}\n\n"
    "Does the document answer the query? Answer yes or no."
)
PLAIN_SUFFIX = "\nAnswer:"
# A date pinned for chat templates that print one (Llama 3), so the rendered template is stable.
TEMPLATE_DATE = "26 Jul 2024"

_SLOT = re.compile(r"\{(query|document)\}")


# Markers of a chat-tuned model in a hub name ("meta-llama/Llama-3.2-1B-Instruct", "...-chat").
_CHAT_TUNED = re.compile(r"(instruct|chat|-it\b|-it-)", re.IGNORECASE)


def use_chat_template(prompt_format: str, model_name_or_path: str) -> bool | None:
    """The chat-or-plain decision for ``from_tokenizer`` (None: chat when a template exists).

    ``auto`` reads a hub id (``org/name``, not a local folder) without an instruct/chat marker as
    a base model: its template's header tokens were never trained, so the plain prompt is used.
    Embedded names and local folders keep the template rule.
    """
    if prompt_format in ("chat", "plain"):
        return prompt_format == "chat"
    from pathlib import Path

    name = str(model_name_or_path)
    hub_id = "/" in name and not Path(name).exists()
    if hub_id and not _CHAT_TUNED.search(name.rsplit("/", 1)[-1]):
        return False
    return None


@dataclass(frozen=True)
class GraderInputFormat:
    """A named, versioned prompt with two slots, plus how to tokenize and truncate it."""

    name: str
    version: int
    template: str
    max_length: int = DEFAULT_MAX_LENGTH
    add_special_tokens: bool = False
    # For generative scoring (config A, zero-shot baselines): the answer words, label order.
    label_words: tuple[str, str] = ("no", "yes")
    answer_prefix: str = ""
    truncation: str = "document_end"
    extra: dict[str, Any] = field(default_factory=dict)
    # Query and document tokenized as a sentence pair by the tokenizer (a cross-encoder), with
    # every special-token string inside the texts read as plain text.
    pair: bool = False

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"

    def render(self, query: str, document: str) -> str:
        values = {"query": query, "document": document}
        return _SLOT.sub(lambda match: values[match.group(1)], self.template)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["label_words"] = list(self.label_words)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GraderInputFormat:
        data = dict(data)
        if "label_words" in data:
            data["label_words"] = tuple(data["label_words"])
        return cls(**data)

    @classmethod
    def from_tokenizer(
        cls,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int = DEFAULT_MAX_LENGTH,
        use_chat_template: bool | None = None,
    ) -> GraderInputFormat:
        """Render the prompt with the tokenizer's chat template (if it has one) into a template."""
        chat = (
            tokenizer.chat_template is not None if use_chat_template is None else use_chat_template
        )
        if chat:
            messages = [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": QUESTION},
            ]
            template = tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, date_string=TEMPLATE_DATE
            )
            fmt = cls(FORMAT_NAME, FORMAT_VERSION, template, max_length, add_special_tokens=False)
        else:
            template = f"{SYSTEM_PROMPT}\n\n{QUESTION}{PLAIN_SUFFIX}"
            fmt = cls(
                PLAIN_FORMAT_NAME,
                FORMAT_VERSION,
                template,
                max_length,
                add_special_tokens=True,
                answer_prefix=" ",
            )
        _check_last_token(fmt, tokenizer)
        return fmt

    @classmethod
    def sentence_pair(
        cls, tokenizer: PreTrainedTokenizerBase, max_length: int = DEFAULT_MAX_LENGTH
    ) -> GraderInputFormat:
        """The cross-encoder's input: the tokenizer's own pair of sequences (``[CLS] query [SEP]
        document [SEP]``, token types 0 then 1); a tokenizer without that layout is refused."""
        name = getattr(tokenizer, "name_or_path", "") or "the model"
        cls_token, sep_token = tokenizer.cls_token, tokenizer.sep_token
        ids = tokenizer("q", "d", split_special_tokens=True)
        types = ids.get("token_type_ids")
        if cls_token is None or sep_token is None or not types or types[-1] != 1:
            raise InputError(
                f"model_name_or_path: {name}'s tokenizer builds no [CLS] query [SEP] document "
                "[SEP] pair with token types; the cross_encoder family needs a BERT-style encoder "
                "(e.g. minilm-l6)"
            )
        if max_length > tokenizer.model_max_length:  # an encoder's learnt positions end there
            raise InputError(
                f"max_length: {name} reads at most {tokenizer.model_max_length} tokens, got "
                f"{max_length}"
            )
        template = f"{cls_token} {{query}} {sep_token} {{document}} {sep_token}"
        return cls(
            PAIR_FORMAT_NAME,
            FORMAT_VERSION,
            template,
            max_length,
            add_special_tokens=True,
            truncation="only_second",
            pair=True,
        )

    def label_token_ids(self, tokenizer: PreTrainedTokenizerBase) -> list[int]:
        """First token of each answer word (label order) as it follows the prompt."""
        ids = []
        for word in self.label_words:
            tokens = tokenizer(self.answer_prefix + word, add_special_tokens=False)["input_ids"]
            ids.append(tokens[0])
        if len(set(ids)) != len(ids):
            raise InputError(f"answer words {self.label_words} share their first token")
        return ids


def _check_last_token(fmt: GraderInputFormat, tokenizer: PreTrainedTokenizerBase) -> None:
    ids = tokenizer(fmt.render("q", "d"), add_special_tokens=fmt.add_special_tokens)["input_ids"]
    if tokenizer.pad_token_id is not None and ids[-1] == tokenizer.pad_token_id:
        raise InputError(
            "the grader's prompt ends with the pad token, so the classifier would pool the wrong "
            "position; pick a different pad token (transformers issue #35352)"
        )


@dataclass
class FormattedPairs:
    texts: list[str]
    input_ids: list[list[int]]
    truncated: list[bool]
    query_truncated: list[bool] = field(default_factory=list)
    # Leading tokens of each input that belong to its query's part (prompt + query, up to the
    # document): inputs of one query share them, so they can be computed once.
    prefix_lengths: list[int] = field(default_factory=list)


# The document's share of max_length that an over-long query may never take.
MIN_DOCUMENT_SHARE = 0.25


def query_budget(fmt: GraderInputFormat, template_tokens: int) -> int:
    """Most tokens a query may take: the document keeps MIN_DOCUMENT_SHARE of max_length."""
    return fmt.max_length - template_tokens - int(fmt.max_length * MIN_DOCUMENT_SHARE)


def format_pairs(
    tokenizer: PreTrainedTokenizerBase,
    fmt: GraderInputFormat,
    queries: Sequence[str],
    documents: Sequence[str],
    titles: Sequence[str | None] | None = None,
) -> FormattedPairs:
    """Build the grader's input text and token ids for each (query, document) pair.

    The document is cut (at a token boundary, then re-tokenized as part of the whole text) until
    the whole input fits ``fmt.max_length``; the prompt is never cut, and the query only when it
    would leave the document less than a quarter of ``max_length`` (``query_truncated``).
    """
    if len(queries) != len(documents):
        raise ValueError(f"{len(queries)} queries but {len(documents)} documents")
    if titles is not None:
        documents = [
            document_text(doc, title) for doc, title in zip(documents, titles, strict=True)
        ]
    # Library callers and the API reach here without a reader: normalise as the readers do.
    queries = [normalise_text(q) for q in queries]
    documents = [normalise_text(d) for d in documents]
    if fmt.pair:
        return _format_sentence_pairs(tokenizer, fmt, queries, documents)
    special = fmt.add_special_tokens

    def encode(texts: list[str], add_special: bool) -> list[list[int]]:
        if not texts:
            return []
        return tokenizer(texts, add_special_tokens=add_special)["input_ids"]

    query_truncated = [False] * len(queries)
    # Each query's prompt without a document: its length is the document's budget, and the tokens
    # it shares with the full input are the query's part (prefix_lengths).
    heads = encode([fmt.render(q, "") for q in queries], special)
    fixed_lengths = [len(ids) for ids in heads]
    template = len(encode([fmt.render("", "")], special)[0])
    limit = query_budget(fmt, template)
    if limit <= 0:
        raise InputError(
            f"max_length={fmt.max_length} leaves no room for a query and a document after the "
            f"{fmt.name} prompt; raise max_length"
        )
    long_queries = [i for i, n in enumerate(fixed_lengths) if n - template > limit]
    for i, tokens in zip(
        long_queries, encode([queries[i] for i in long_queries], False), strict=True
    ):
        # Cut the query's end, never the prompt's closing question (a classic collection's
        # 300-token topic must not stop a bulk run).
        queries[i] = tokenizer.decode(tokens[:limit])
        query_truncated[i] = True
        heads[i] = encode([fmt.render(queries[i], "")], special)[0]
        fixed_lengths[i] = len(heads[i])
    budgets = [fmt.max_length - length for length in fixed_lengths]
    doc_tokens = encode(list(documents), False)
    current_docs = list(documents)
    truncated = [False] * len(documents)
    for i, tokens in enumerate(doc_tokens):
        if len(tokens) > budgets[i]:
            current_docs[i] = tokenizer.decode(tokens[: budgets[i]])
            truncated[i] = True
    texts = [fmt.render(q, d) for q, d in zip(queries, current_docs, strict=True)]
    input_ids = encode(texts, special)
    # Tokens can merge across the slot boundary after the cut; shave until everything fits.
    for _ in range(8):
        over = [i for i, ids in enumerate(input_ids) if len(ids) > fmt.max_length]
        if not over:
            break
        for i in over:
            budgets[i] -= len(input_ids[i]) - fmt.max_length
            current_docs[i] = tokenizer.decode(doc_tokens[i][: max(budgets[i], 0)])
            truncated[i] = True
            texts[i] = fmt.render(queries[i], current_docs[i])
        for i, ids in zip(over, encode([texts[i] for i in over], special), strict=True):
            input_ids[i] = ids
    else:
        raise RuntimeError("could not fit the input within max_length")  # pragma: no cover
    prefix_lengths = [_common_prefix(ids, head) for ids, head in zip(input_ids, heads, strict=True)]
    return FormattedPairs(
        texts=texts,
        input_ids=input_ids,
        truncated=truncated,
        query_truncated=query_truncated,
        prefix_lengths=prefix_lengths,
    )


def _format_sentence_pairs(
    tokenizer: PreTrainedTokenizerBase,
    fmt: GraderInputFormat,
    queries: list[str],
    documents: list[str],
) -> FormattedPairs:
    """:func:`format_pairs` of a sentence-pair format: the tokenizer's pair encoding, the
    document cut at its end (``only_second``), an over-long query at its end as above."""
    split = {"split_special_tokens": True}  # a "[SEP]" inside a text is text, not a boundary
    limit = query_budget(fmt, tokenizer.num_special_tokens_to_add(pair=True))
    if limit <= 0:
        raise InputError(f"max_length={fmt.max_length} leaves no room for a query and a document")
    # Lengths only matter up to the cut: counting further would tokenize whole long texts (and
    # warn that they exceed the model's 512 positions, which no input here does).
    query_tokens = tokenizer(
        queries, add_special_tokens=False, truncation=True, max_length=limit + 1, **split
    )["input_ids"]
    query_truncated = [len(tokens) > limit for tokens in query_tokens]
    queries = [
        tokenizer.decode(tokens[:limit]) if cut else query
        for query, tokens, cut in zip(queries, query_tokens, query_truncated, strict=True)
    ]
    # [CLS] query [SEP]: the part that the inputs of one query share.
    heads = [len(ids) for ids in tokenizer(queries, **split)["input_ids"]]
    doc_lengths = [
        len(ids)
        for ids in tokenizer(
            documents, add_special_tokens=False, truncation=True, max_length=fmt.max_length, **split
        )["input_ids"]
    ]
    input_ids = tokenizer(
        queries, documents, truncation="only_second", max_length=fmt.max_length, **split
    )["input_ids"]
    return FormattedPairs(
        texts=[tokenizer.decode(ids) for ids in input_ids],
        input_ids=input_ids,
        # The head, the document and its closing [SEP].
        truncated=[h + n + 1 > fmt.max_length for h, n in zip(heads, doc_lengths, strict=True)],
        query_truncated=query_truncated,
        prefix_lengths=heads,
    )


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    length = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        length += 1
    return length
