from __future__ import annotations

import pytest

from models.input_format import FORMAT_NAME, PLAIN_FORMAT_NAME, GraderInputFormat, format_pairs

QUERY = "what is the definition of an axon terminal"
LONG_DOC = "Axon terminals are the distal terminations of the branches of an axon. " * 80


@pytest.fixture(scope="module")
def chat_format(tiny_tokenizer) -> GraderInputFormat:
    return GraderInputFormat.from_tokenizer(tiny_tokenizer, max_length=256)


def test_chat_template_renders_query_document_and_generation_prompt(chat_format, tiny_tokenizer):
    assert chat_format.name == FORMAT_NAME and chat_format.version == 1
    out = format_pairs(tiny_tokenizer, chat_format, [QUERY], ["Short document."])
    text = out.texts[0]
    assert "<|im_start|>system\n" in text
    assert f"Query: {QUERY}" in text and "Short document." in text
    assert text.endswith("<|im_start|>assistant\n")
    assert out.input_ids[0] == tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    assert out.truncated == [False]


def test_long_documents_are_cut_but_never_the_query_or_the_question(chat_format, tiny_tokenizer):
    out = format_pairs(tiny_tokenizer, chat_format, [QUERY, QUERY], [LONG_DOC, "tiny"])
    assert out.truncated == [True, False]
    ids = out.input_ids[0]
    assert len(ids) <= chat_format.max_length
    assert len(ids) >= chat_format.max_length - 3  # the budget is used, not wasted
    text = out.texts[0]
    assert f"Query: {QUERY}" in text
    assert text.endswith(
        "Does the document answer the query? Answer yes or no.<|im_end|>\n<|im_start|>assistant\n"
    )
    # The document kept its beginning.
    assert "Axon terminals are the distal terminations" in text


def test_last_token_is_never_the_pad_token(chat_format, tiny_tokenizer):
    out = format_pairs(tiny_tokenizer, chat_format, ["q", QUERY], ["d", LONG_DOC])
    assert all(ids[-1] != tiny_tokenizer.pad_token_id for ids in out.input_ids)


def test_an_over_long_query_is_cut_but_never_the_question_nor_the_documents_share(
    tiny_tokenizer,
):
    fmt = GraderInputFormat.from_tokenizer(tiny_tokenizer, max_length=256)
    out = format_pairs(tiny_tokenizer, fmt, [QUERY * 10, QUERY], [LONG_DOC, "doc"])
    assert out.query_truncated == [True, False]
    assert all(len(ids) <= fmt.max_length for ids in out.input_ids)
    assert out.texts[0].endswith(
        "Does the document answer the query? Answer yes or no.<|im_end|>\n<|im_start|>assistant\n"
    )
    assert f"Query: {QUERY}" in out.texts[0]  # the query keeps its beginning
    document = out.texts[0].split("Document:\n", 1)[1]
    assert len(tiny_tokenizer(document)["input_ids"]) >= fmt.max_length // 4 - 20
    with pytest.raises(ValueError, match="raise max_length"):
        format_pairs(
            tiny_tokenizer,
            GraderInputFormat.from_tokenizer(tiny_tokenizer, max_length=150),
            ["q"],
            ["d"],
        )


def test_slot_text_inside_values_is_not_substituted_again(chat_format, tiny_tokenizer):
    out = format_pairs(tiny_tokenizer, chat_format, ["a {document} b"], ["c {query} d"])
    assert "Query: a {document} b" in out.texts[0] and "c {query} d" in out.texts[0]


def test_titles_lead_the_document(chat_format, tiny_tokenizer):
    out = format_pairs(tiny_tokenizer, chat_format, ["q"], ["body"], titles=["Heading"])
    assert "Document:\nHeading\nbody" in out.texts[0]


def test_plain_template_without_chat_template(tiny_tokenizer):
    fmt = GraderInputFormat.from_tokenizer(tiny_tokenizer, use_chat_template=False)
    assert fmt.name == PLAIN_FORMAT_NAME and fmt.add_special_tokens
    text = format_pairs(tiny_tokenizer, fmt, ["q"], ["d"]).texts[0]
    assert text.endswith("Answer yes or no.\nAnswer:") and "<|im_start|>" not in text


def test_format_round_trips_through_a_dict(chat_format, tiny_tokenizer):
    again = GraderInputFormat.from_dict(chat_format.to_dict())
    assert again == chat_format
    assert again.id == "grader-chat@1"
    yes_no = again.label_token_ids(tiny_tokenizer)
    assert len(set(yes_no)) == 2


@pytest.mark.parametrize(
    ("prompt_format", "name", "expected"),
    [
        ("auto", "meta-llama/Llama-3.2-1B", False),  # a base model: untrained chat headers
        ("auto", "meta-llama/Llama-3.2-1B-Instruct", None),
        ("auto", "Qwen/Qwen2.5-0.5B-chat", None),
        ("auto", "smollm2-135m", None),  # embedded: SmolLM2-135M-Instruct
        ("chat", "meta-llama/Llama-3.2-1B", True),
        ("plain", "meta-llama/Llama-3.2-1B-Instruct", False),
    ],
)
def test_the_prompt_format_follows_base_or_instruct(prompt_format, name, expected):
    from models.input_format import use_chat_template

    assert use_chat_template(prompt_format, name) is expected


def test_a_local_base_model_folder_keeps_the_template_rule(tmp_path):
    from models.input_format import use_chat_template

    folder = tmp_path / "org" / "Llama-3.2-1B"
    folder.mkdir(parents=True)
    assert use_chat_template("auto", str(folder)) is None


def test_composed_and_decomposed_accents_are_one_input(chat_format, tiny_tokenizer):
    import unicodedata

    texts = ("café crème brûlée", "Ångström’s résumé")
    composed = format_pairs(tiny_tokenizer, chat_format, [texts[0]], [texts[1]])
    decomposed = format_pairs(
        tiny_tokenizer,
        chat_format,
        [unicodedata.normalize("NFD", texts[0])],
        [unicodedata.normalize("NFD", texts[1])],
    )
    assert unicodedata.normalize("NFD", texts[0]) != texts[0]
    assert composed.input_ids == decomposed.input_ids


def test_zero_width_characters_inside_a_text_are_not_part_of_the_input(chat_format, tiny_tokenizer):
    plain = format_pairs(tiny_tokenizer, chat_format, ["axon terminal"], ["An axon ends here."])
    hidden = format_pairs(
        tiny_tokenizer,
        chat_format,
        ["ax\u200bon\u2060 ter\u200dminal\ufeff"],
        ["An\u200c axon ends\u200b here."],
    )
    assert plain.input_ids == hidden.input_ids
