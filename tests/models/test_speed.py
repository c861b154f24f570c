"""The grading fast path (models.speed, ``Grader(compile=True)``): bucketed static shapes give the
plain path's scores, one score per pair whatever else is in the call, each shape compiled once;
the options that cannot run here are refused in one line."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch

from core.errors import InputError
from models.grader import Grader
from models.input_format import GraderInputFormat
from models.speed import bucket_batches, bucketed_classifier_probabilities

QUERY = "what is an axon terminal"
# Documents of 1 to 60 words: inputs of several bucket widths (64-token buckets).
DOCUMENTS = [" ".join(["axon terminal passage"] * n) for n in (1, 4, 9, 15, 22, 30, 41, 60)]


@pytest.fixture(scope="module")
def classifier(llama3_model_dir: Path):
    from models.resolve import load_model

    torch.manual_seed(0)
    model, tokenizer = load_model(str(llama3_model_dir), task="classification", dtype=torch.float32)
    return model.eval(), tokenizer


def grader(classifier, **options) -> Grader:
    model, tokenizer = classifier
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=512)
    return Grader(model=model, tokenizer=tokenizer, input_format=fmt, **options)


def test_bucket_batches_have_static_shapes():
    """Every batch of a width has that width's row count; every input lands in one batch whose
    width holds it, rounded up to the bucket."""
    lengths = [5, 64, 65, 130, 500, 512, 70, 71, 72, 73, 74, 1]
    batches = bucket_batches(lengths, 256, 64)
    assert sorted(i for _, _, batch in batches for i in batch) == list(range(len(lengths)))
    for width, rows, batch in batches:
        assert rows == max(1, 256 // width) and 0 < len(batch) <= rows
        assert all(width - 64 < lengths[i] <= width for i in batch)
    assert [b[:2] for b in batches][:2] == [(512, 1), (512, 1)]
    assert {b[:2] for b in batches} == {(512, 1), (192, 1), (128, 2), (64, 4)}


def test_the_bucketed_path_scores_as_the_plain_path_and_each_pair_alone(classifier):
    """Eager, without compiling: the bucketed shapes (pad rows, read-out at each input's last
    token) give the plain path's probabilities, and a pair's probability is the same, to the
    bit, whether it is scored with the others or alone."""
    model, _ = classifier
    ids = grader(classifier).encode([QUERY] * len(DOCUMENTS), DOCUMENTS)
    assert len({-(-len(x) // 64) for x in ids}) >= 3  # several widths
    plain = grader(classifier).raw_probabilities([QUERY] * len(DOCUMENTS), DOCUMENTS)
    together = bucketed_classifier_probabilities(model, ids, 1024)
    np.testing.assert_allclose(together[:, 1], plain, rtol=0, atol=1e-5)
    for index in (0, 3, 7):
        alone = bucketed_classifier_probabilities(model, [ids[index]], 1024)
        assert alone[0, 1] == together[index, 1]


def compiled_grader_scores(classifier, monkeypatch, backend: str):
    """The compiled grader's scores twice, with the graphs dynamo built in each call."""
    import models.speed

    monkeypatch.setattr(
        models.speed,
        "compile_layers",
        functools.partial(models.speed.compile_layers, backend=backend),
    )
    torch._dynamo.reset()
    fast = grader(classifier, compile=True)
    counters = torch._dynamo.utils.counters["stats"]
    graphs = [counters["unique_graphs"]]
    scores = []
    for _ in range(2):
        scores.append(fast.score(QUERY, DOCUMENTS))
        graphs.append(counters["unique_graphs"])
    return scores, np.diff(graphs).tolist()


@pytest.mark.slow
def test_the_compiled_grader_traces_one_graph_per_shape(classifier, monkeypatch):
    """``compile=True`` through dynamo's tracing (its eager backend: no C++ build): one graph per
    bucket width in the first call, none in the second, and the plain grader's scores."""
    model, _ = classifier
    plain = grader(classifier).score(QUERY, DOCUMENTS)
    ids = grader(classifier).encode([QUERY] * len(DOCUMENTS), DOCUMENTS)
    widths = len({-(-len(x) // 64) for x in ids})
    try:
        scores, new_graphs = compiled_grader_scores(classifier, monkeypatch, "eager")
    finally:
        undo_compile(model)
    assert new_graphs == [widths, 0]
    for got in scores:
        np.testing.assert_allclose(got, plain, rtol=0, atol=1e-5)


@pytest.mark.slow
def test_the_compiled_grader_scores_as_the_plain_grader_under_inductor(classifier, monkeypatch):
    """The product's path as it runs: inductor compiles each width once (slowly on a CPU)."""
    model, _ = classifier
    documents = DOCUMENTS[:3]  # two widths: two compilations
    plain = grader(classifier).score(QUERY, documents)
    try:
        torch._dynamo.reset()
        fast = grader(classifier, compile=True)
        first, second = fast.score(QUERY, documents), fast.score(QUERY, documents)
    finally:
        undo_compile(model)
    np.testing.assert_allclose(first, plain, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(first, second)


def undo_compile(model) -> None:
    import models.speed
    from models.backbone import decoder

    for layer in decoder(model).layers:
        layer._compiled_call_impl = None
    models.speed._compiled.discard(model)
    torch._dynamo.reset()


def test_options_that_cannot_run_are_refused_in_one_line(classifier, tiny_model_dir: Path):
    with pytest.raises(InputError, match=r"^liger_kernel: Liger's kernels are Triton kernels"):
        grader(classifier, liger_kernel=True)
    both = grader(classifier, compile=True)
    both.prefix_cache = True
    with pytest.raises(InputError, match=r"^compile and prefix_cache are two different"):
        both.score(QUERY, DOCUMENTS[:2])
    with pytest.raises(InputError, match=r"^compile: the compiled fast path serves classifier"):
        Grader.from_pretrained(tiny_model_dir, zero_shot=True, device="cpu", compile=True)
