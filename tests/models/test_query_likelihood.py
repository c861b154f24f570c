"""Query-likelihood grading: the PMI primitive, its cached-state training path and the grader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from models.builder import GraderModelConfig, read_grader_config
from models.families import QUERY_LIKELIHOOD
from models.families.query_likelihood.family import plain_query_log_likelihood, scale_and_bias
from models.families.query_likelihood.scoring import (
    MARKER,
    pmi_probabilities,
    pmi_scores,
    query_likelihood_format,
    split_inputs,
)
from models.grader import Grader, stored_validation_scores
from models.input_format import format_pairs
from models.resolve import load_model
from models.state_cache import STATE_CACHE_ENV
from tests.train.conftest import args_for
from train.train import DataConfig, GraderTrainingArguments, LossConfig, train

QUERIES = ["what is an axon terminal", "what is an axon terminal", "capital of france"]
DOCUMENTS = [
    "Axon terminals are the ends of an axon's branches, where signals pass to the next cell.",
    "Paris.",
    "Paris is the capital and largest city of France, on the Seine.",
]


def log_likelihood_by_hand(model, tokenizer, text: str) -> float:
    """The export's plain read-out: one unbatched pass over all logits, no padding, no prior
    sharing (``models.families.query_likelihood.family.plain_query_log_likelihood``)."""
    return plain_query_log_likelihood(model, tokenizer, text, MARKER, add_special_tokens=True)


@pytest.fixture(scope="module")
def causal_lm(tiny_model_dir: Path):
    model, tokenizer = load_model(str(tiny_model_dir), task="causal-lm", dtype=torch.float32)
    return model.eval(), tokenizer


def test_pmi_equals_the_query_log_likelihood_gain_computed_by_hand(causal_lm):
    """Batched, right-padded and with each query's prior computed once, the PMI is log P(query |
    document) - log P(query | empty passage) of two plain forward passes."""
    model, tokenizer = causal_lm
    fmt = query_likelihood_format(256)
    pairs = format_pairs(tokenizer, fmt, QUERIES, DOCUMENTS)
    scores = pmi_scores(model, tokenizer, fmt, pairs.input_ids, batch_size=3)
    by_hand = [
        log_likelihood_by_hand(model, tokenizer, fmt.render(q, d))
        - log_likelihood_by_hand(model, tokenizer, fmt.render(q, ""))
        for q, d in zip(QUERIES, DOCUMENTS, strict=True)
    ]
    np.testing.assert_allclose(scores, by_hand, atol=1e-4)
    split = split_inputs(tokenizer, fmt, pairs.input_ids)
    assert len(split.prior_ids) == 2 and split.prior_of == [0, 0, 1]  # one prior per query


def test_stored_pmi_is_the_graders_pmi_and_runs_the_model_once_per_sequence(
    causal_lm, tmp_path: Path
):
    """With no decoder layer trained, cross-validation folds read each pair's and each query
    prior's log-likelihood from the state cache: the model runs once per sequence."""
    from models.state_cache import StateCache

    model, tokenizer = causal_lm
    fmt = query_likelihood_format(256)
    ids = format_pairs(tokenizer, fmt, QUERIES, DOCUMENTS).input_ids
    cache = StateCache(tmp_path / "states", "tiny")
    options = {"batch_size": 2, "dtype": torch.float32, "cache": cache}
    first = pmi_scores(model, tokenizer, fmt, ids, **options)
    # Other batches, other float32 summation order: equal to ~1e-5.
    np.testing.assert_allclose(first, pmi_scores(model, tokenizer, fmt, ids), atol=2e-5)
    # pairs + query priors, and each pair's last-layer state for a frozen head (below)
    assert len(list((tmp_path / "states").glob("*.pt"))) == 3 + 2 + 3

    class Unreachable(torch.nn.Module):
        def parameters(self, recurse: bool = True):
            return model.parameters(recurse)

        def forward(self, *args, **kwargs):
            raise AssertionError("the model ran for a cached sequence")

    np.testing.assert_array_equal(
        pmi_scores(Unreachable(), tokenizer, fmt, ids[1:], **options), first[1:]
    )


def test_the_pass_stores_the_states_a_frozen_head_on_the_same_prompt_reads(
    causal_lm, tmp_path: Path
):
    """In float32 the query-likelihood pass leaves each pair's last-token output of the last
    layer in the state cache, where a frozen classifier on the same token ids looks: the
    classifier's own pass finds every pair there and computes nothing, and the states equal what
    that pass computes (to float32 summation order)."""
    from models.backbone import decoder
    from models.cached_states import compute_states
    from models.state_cache import StateCache

    model, tokenizer = causal_lm
    fmt = query_likelihood_format(256)
    ids = format_pairs(tokenizer, fmt, QUERIES, DOCUMENTS).input_ids
    cache = StateCache(tmp_path / "states", "tiny")
    layers = len(decoder(model).layers)
    pmi_scores(model, tokenizer, fmt, ids, batch_size=2, dtype=torch.float32, cache=cache)
    stored = len(list((tmp_path / "states").glob("*.pt")))

    from_cache = compute_states(model, ids, layers, dtype=torch.float32, cache=cache)
    assert len(list((tmp_path / "states").glob("*.pt"))) == stored  # nothing computed
    computed = compute_states(model, ids, layers, batch_size=1, dtype=torch.float32)
    for cached, fresh in zip(from_cache, computed, strict=True):
        assert cached.shape == fresh.shape == (1, model.config.hidden_size)
        torch.testing.assert_close(cached, fresh, atol=1e-5, rtol=1e-5)


def test_no_states_are_stored_from_a_bf16_pass(causal_lm, tmp_path: Path):
    """A bf16 pass runs bf16 weights where the frozen head's pass autocasts float32 ones: its
    states would differ from the head's, so only the log-likelihoods are kept."""
    from models.state_cache import StateCache

    model, tokenizer = causal_lm
    fmt = query_likelihood_format(256)
    ids = format_pairs(tokenizer, fmt, QUERIES, DOCUMENTS).input_ids
    cache = StateCache(tmp_path / "states", "tiny")
    pmi_scores(model, tokenizer, fmt, ids, dtype=torch.bfloat16, cache=cache)
    assert len(list((tmp_path / "states").glob("*.pt"))) == 3 + 2


def test_the_query_is_found_after_the_last_marker_even_when_the_document_quotes_it(causal_lm):
    _, tokenizer = causal_lm
    fmt = query_likelihood_format(256)
    document = f"An FAQ page. {MARKER} something else entirely."
    pairs = format_pairs(tokenizer, fmt, ["axon terminal"], [document])
    split = split_inputs(tokenizer, fmt, pairs.input_ids)
    query_tokens = pairs.input_ids[0][split.target_starts[0] :]
    assert tokenizer.decode(query_tokens).strip() == "axon terminal"
    with pytest.raises(ValueError, match="no query after"):
        split_inputs(tokenizer, fmt, [tokenizer("no marker here")["input_ids"]])


def test_probabilities_are_a_logistic_function_of_pmi():
    probabilities = pmi_probabilities(np.array([-2.0, 0.0, 3.0]), scale=0.5, bias=-1.0)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)
    expected = 1 / (1 + np.exp(-(0.5 * np.array([-2.0, 0.0, 3.0]) - 1.0)))
    np.testing.assert_allclose(probabilities[:, 1], expected, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("trainable_layers", [0, 1])
def test_a_query_likelihood_grader_trains_on_cached_states_and_scores_the_same_reloaded(
    trainable_layers: int, tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path, monkeypatch
):
    """The Trainer fits the scale and bias (and the top layer) on cached states; reloaded, the
    grader's full forward passes give the Trainer's own validation scores."""
    from core.metrics import classification_metrics

    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir),
        mode="query_likelihood",
        trainable_layers=trainable_layers,
        max_length=256,
    )
    monkeypatch.setenv(STATE_CACHE_ENV, str(tmp_path / "states"))
    args = args_for(tmp_path, num_train_epochs=4, learning_rate=1e-2, head_learning_rate=1e-2)
    metrics = train(model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args)
    assert metrics["eval_roc_auc"] >= 0.8, metrics
    if trainable_layers:
        assert metrics["eval_f1"] > 0.5, metrics  # not collapsed to the majority class
    info = read_grader_config(args.output_dir)
    assert info and info.mode == "query_likelihood"
    assert info.input_format["name"] == "query-likelihood"
    # Only an untrained backbone names its base model: its log-likelihoods are the base's.
    backbone = set() if trainable_layers else {"backbone"}
    written = json.loads((Path(args.output_dir) / "grader_config.json").read_text())
    assert set(written["query_likelihood"]) == {"scale", "bias", "marker", *backbone}

    grader = Grader.from_pretrained(args.output_dir, dtype="float32", device="cpu")
    assert grader.family is QUERY_LIKELIHOOD
    assert scale_and_bias(grader.info) == (
        written["query_likelihood"]["scale"],
        written["query_likelihood"]["bias"],
    )
    validation = [json.loads(line) for line in (tiny_dataset / "validation.jsonl").open()]
    reloaded = grader.raw_probabilities(
        [r["query"] for r in validation], [r["text"] for r in validation]
    )
    again = classification_metrics(reloaded, np.array([r["label"] for r in validation]))
    assert again["roc_auc"] == pytest.approx(metrics["eval_roc_auc"], abs=1e-6)
    assert again["f1"] == pytest.approx(metrics["eval_f1"], abs=1e-6)
    # What training stored for its evaluation to reuse is what the reloaded grader computes.
    stored = stored_validation_scores(
        args.output_dir, [(r["qid"], r["doc_id"]) for r in validation], torch.float32
    )
    assert stored is not None
    # The cached-state pass and the full forward sum in different orders: float32 noise only.
    np.testing.assert_allclose(stored, reloaded, atol=1e-4)
    # Cross-validation's path: the states from the cache, the trained top
    # (models.families.query_likelihood.states).
    from types import SimpleNamespace

    from train.config import TrainingSettings
    from train.recipes import recipe_for

    settings = TrainingSettings(
        model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args
    )
    scorer = recipe_for(model_config.family).state_scorer(Path(args.output_dir), settings)
    records = [SimpleNamespace(query=r["query"], text=r["text"], title=None) for r in validation]
    np.testing.assert_allclose(scorer(records), reloaded, atol=1e-4)

    base, _ = load_model(str(tiny_model_dir), task="causal-lm", dtype=torch.float32)
    trained = grader.model.model.layers
    changed = [
        not torch.equal(a.self_attn.q_proj.weight, b.self_attn.q_proj.weight)
        for a, b in zip(trained, base.model.layers, strict=True)
    ]
    assert changed == [False] * (len(changed) - trainable_layers) + [True] * trainable_layers


@pytest.mark.slow
def test_a_frozen_head_on_the_query_likelihood_prompt_trains_on_the_graders_states(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path, monkeypatch
):
    """The main job's held-out table: beside a query-likelihood grader, a frozen classifier head
    reading the grader's prompt trains on the states the grader's pass left in the state cache,
    running no backbone pass of its own."""
    states = tmp_path / "states"
    monkeypatch.setenv(STATE_CACHE_ENV, str(states))
    data = DataConfig(dataset=str(tiny_dataset))
    grader = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir),
        mode="query_likelihood",
        trainable_layers=0,  # the main job's: only the scale and bias
        max_length=256,
    )
    train(grader, data, LossConfig(), args_for(tmp_path / "ql"))
    stored = sorted(states.glob("*.pt"))
    head = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir),
        mode="frozen",
        prompt_format="query-likelihood",
        max_length=256,
    )
    metrics = train(head, data, LossConfig(), args_for(tmp_path / "head"))
    assert sorted(states.glob("*.pt")) == stored  # every state was there already
    assert "eval_roc_auc" in metrics
    info = read_grader_config(tmp_path / "head" / "out")
    assert info is not None and info.input_format["name"] == "query-likelihood"


@pytest.mark.parametrize(
    ("model_overrides", "loss", "data", "training", "message"),
    [
        ({"labels": "graded"}, {}, {}, {}, "one relevance score"),
        ({}, {"loss": "contrastive"}, {}, {}, "cross_entropy loss on hard labels"),
        ({}, {}, {"soft_targets": "p_relevant"}, {}, "cross_entropy loss on hard labels"),
        ({}, {}, {}, {"cache_states": False}, "cached states only"),
    ],
)
def test_query_likelihood_refuses_settings_it_would_ignore(
    model_overrides,
    loss,
    data,
    training,
    message,
    tiny_model_dir: Path,
    tiny_dataset: Path,
    tmp_path: Path,
):
    with pytest.raises(ValueError, match=message):
        train(
            GraderModelConfig(
                model_name_or_path=str(tiny_model_dir), mode="query_likelihood", **model_overrides
            ),
            DataConfig(dataset=str(tiny_dataset), **data),
            LossConfig(**loss),
            args_for(tmp_path, **training),
        )


def test_the_default_config_is_a_query_likelihood_grader():
    from core.cli import parse_config
    from tests.train.conftest import PARSERS

    model_config, _, _, training = parse_config(
        PARSERS, ["--config", "train/configs/smollm2-135m-ql.yaml"]
    )
    assert model_config.mode == "query_likelihood" and isinstance(training, GraderTrainingArguments)


@pytest.mark.slow
def test_evaluation_reuses_the_validation_scores_training_stored_for_exactly_these_weights(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    """eval.checkpoint fits its threshold on the scores training stored (no second pass) and
    gets what scoring the pairs again gives; once the grader's files change, it scores again."""
    from measure.classification.checkpoint import (
        CheckpointEvalConfig,
        CheckpointMetrics,
        evaluate,
    )

    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir), mode="query_likelihood", max_length=256
    )
    args = args_for(tmp_path, num_train_epochs=2, learning_rate=1e-2, head_learning_rate=1e-2)
    train(model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args)

    def evaluation(name: str) -> CheckpointMetrics:
        return evaluate(
            CheckpointEvalConfig(
                model=args.output_dir,
                data=str(tiny_dataset / "test.jsonl"),
                calibration_data=str(tiny_dataset / "validation.jsonl"),
                out=str(tmp_path / name),
                dtype="float32",
                device="cpu",
                plots=False,
            )
        )

    reused = evaluation("reused")
    assert reused.calibration_scores == "stored by training"
    # Stored in float32: a bf16 evaluation scores again.
    assert stored_validation_scores(args.output_dir, [], torch.float32) is not None
    assert stored_validation_scores(args.output_dir, [], torch.bfloat16) is None
    config_path = Path(args.output_dir) / "grader_config.json"
    info = json.loads(config_path.read_text())
    info["note"] = "edited after training"  # same read-out, but no longer the stored files
    config_path.write_text(json.dumps(info))
    rescored = evaluation("rescored")
    assert rescored.calibration_scores == "scored"
    # Scored in other batches: float32 summation order only.
    assert reused.threshold == pytest.approx(rescored.threshold, abs=1e-4)
    assert reused.calibration.temperature == pytest.approx(
        rescored.calibration.temperature, rel=1e-4
    )


def test_a_grader_on_an_untrained_backbone_reads_what_its_training_stored(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path, monkeypatch
):
    """One score per pair across stages: labelling the pairs its training scored, a grader with
    the state cache reads their log-likelihoods (the model runs for new pairs only), and gives
    the probabilities it computes without the cache."""
    monkeypatch.setenv(STATE_CACHE_ENV, str(tmp_path / "states"))
    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir),
        mode="query_likelihood",
        trainable_layers=0,
        max_length=256,
    )
    args = args_for(tmp_path, num_train_epochs=1)
    train(model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args)
    validation = [json.loads(line) for line in (tiny_dataset / "validation.jsonl").open()]
    queries, texts = [r["query"] for r in validation], [r["text"] for r in validation]
    grader = Grader.from_pretrained(args.output_dir, dtype="float32", device="cpu")
    computed = grader.raw_probabilities(queries, texts)

    grader.shares_states = True  # as batch labelling turns it on
    forward = grader.model.model.forward
    calls: list[int] = []

    def counted(*a, **k):
        calls.append(k["input_ids"].shape[0])
        return forward(*a, **k)

    grader.model.model.forward = counted
    stored = grader.raw_probabilities(queries, texts)
    assert calls == []  # every pair and query prior was stored by training
    np.testing.assert_allclose(stored, computed, atol=1e-4)
    grader.raw_probabilities(["a query nobody asked"], [texts[0]])
    assert sum(calls) == 2  # the new pair and its query's prior, once
    grader.raw_probabilities(["a query nobody asked"], [texts[0]])
    assert sum(calls) == 2  # stored now
