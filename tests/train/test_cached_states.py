"""Cached-state training (frozen, top_layers): the split forward pass, resume, config checks."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from core.cli import parse_config
from core.errors import InputError
from models.backbone import split_index
from models.builder import GraderModelConfig, build_grader, read_grader_config
from models.cached_states import compute_states
from models.families.classifier.states import GraderTop
from models.input_format import GraderInputFormat, format_pairs
from models.scoring import pad_right
from models.state_cache import STATE_CACHE_ENV
from tests.train.conftest import PARSERS, args_for
from train.recipes.classifier import CachedStates, collate_states
from train.train import DataConfig, LossConfig, train


@pytest.mark.parametrize("trainable_layers", [0, 1, 2])
def test_bottom_then_top_equals_one_forward_pass(tiny_model_dir: Path, trainable_layers: int):
    model, tokenizer = build_grader(
        GraderModelConfig(model_name_or_path=str(tiny_model_dir), mode="full", max_length=256)
    )
    model.eval()
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=256)
    ids = format_pairs(
        tokenizer, fmt, ["a query", "another longer query here"], ["a doc", "x"]
    ).input_ids
    first = split_index(model, trainable_layers)
    states = compute_states(model, ids, first, batch_size=1)  # unpadded, one pair per batch
    batch = collate_states([{"hidden_states": s, "labels": 0, "soft_targets": 0.0} for s in states])
    with torch.no_grad():
        top = GraderTop(model, first)(batch["hidden_states"], batch["attention_mask"]).logits
        input_ids, mask = pad_right(ids, tokenizer.pad_token_id)
        full = model(input_ids=input_ids, attention_mask=mask).logits
    torch.testing.assert_close(top, full, rtol=1e-4, atol=1e-5)


def test_cached_states_dataset_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="differ in length"):
        CachedStates([torch.zeros(1, 4)], [0, 1], [0.0])


def _trained_weights(output_dir: Path) -> dict[str, torch.Tensor]:
    path = output_dir / "model.safetensors"
    if not path.exists():
        path = output_dir / "adapter_model.safetensors"
    return load_file(str(path))


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode", ["full", "frozen", "top_layers", "lora", "generative", "query_likelihood"]
)
def test_resume_from_a_checkpoint_gives_the_uninterrupted_result(
    mode: str, tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    """torchtune-style: stop after epoch 1, resume, and land on the same weights bit for bit."""
    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir),
        mode=mode,
        max_length=256,
        lora_r=4,
        trainable_layers=1,
    )
    settings = dict(
        num_train_epochs=2, save_strategy="epoch", eval_strategy="no", learning_rate=5e-3
    )
    straight = args_for(tmp_path / "straight", **settings)
    train(model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), straight)
    checkpoints = sorted(
        Path(straight.output_dir).glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1])
    )
    assert len(checkpoints) == 2
    resumed_dir = tmp_path / "resumed" / "out"
    resumed_dir.mkdir(parents=True)
    shutil.copytree(checkpoints[0], resumed_dir / checkpoints[0].name)  # as if killed after epoch 1
    # The folder by name, or "true" as the command line spells it: the last one in output_dir.
    by_name = mode in ("full", "lora", "query_likelihood")
    resumed = args_for(
        tmp_path / "resumed",
        **settings,
        resume_from_checkpoint=str(resumed_dir / checkpoints[0].name) if by_name else "true",
    )
    metrics = train(model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), resumed)
    assert metrics["history"][-1]["epoch"] == pytest.approx(2.0)
    a, b = _trained_weights(Path(straight.output_dir)), _trained_weights(resumed_dir)
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)
    # A query-likelihood grader's read-out lives beside the weights.
    straight_info = read_grader_config(straight.output_dir).query_likelihood
    assert straight_info == read_grader_config(resumed_dir).query_likelihood


def test_resume_from_a_missing_checkpoint_is_refused_before_training(tmp_path: Path):
    with pytest.raises(ValueError, match=r"resume_from_checkpoint: .*nope is not a checkpoint"):
        args_for(tmp_path, resume_from_checkpoint=str(tmp_path / "nope"))
    assert args_for(tmp_path, resume_from_checkpoint="false").resume_from_checkpoint is None


def _parse(tmp_path: Path, yaml_text: str, *overrides: str):
    config = tmp_path / "c.yaml"
    config.write_text(yaml_text)
    return parse_config(PARSERS, ["--config", str(config), "--output_dir", "x", *overrides])


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("mode: frozne\n", "mode: expected one of"),
        ("mode: full\nloss: hinge\n", "loss: expected one of"),
        ("mode: full\nsoft_targets: probability\n", "soft_targets: expected one of"),
        ("mode: full\ndtype: fp8\n", "dtype: expected one of"),
        ("mode: full\nstate_dtype: int4\n", "state_dtype: expected one of"),
        ("mode: top_layers\ntrainable_layers: 0\n", "trainable_layers"),
        ("mode: full\nclass_weights: [1.0, 0.0]\n", "class_weights"),
        ("mode: full\nlabels: ordinal\n", "labels: expected one of"),
        ("mode: generative\nlabels: graded\n", "classification head"),
        ("mode: query_likelihood\nlabels: graded\n", "one relevance score"),
        ("mode: query_likelihood\ntrainable_layers: -1\n", "trainable_layers"),
    ],
)
def test_bad_config_values_fail_while_parsing(tmp_path: Path, yaml_text: str, message: str):
    with pytest.raises(ValueError, match=message):
        _parse(tmp_path, yaml_text)


def test_bad_command_line_choice_fails_with_the_choices_listed(tmp_path: Path):
    with pytest.raises(InputError, match=r"argument --mode: invalid choice: 'frozne' .*'frozen'"):
        _parse(tmp_path, "mode: full\n", "--mode", "frozne")


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("mode: frozen\nloss: contrastive\nsoft_targets: p_relevant\n", "only the cross_entropy"),
        ("mode: generative\nloss: contrastive\n", "do not apply"),
        ("mode: generative\nsoft_targets: grade\n", "do not apply"),
        ("mode: full\nclass_weights: [1.0]\n", "2 classes, got 1 weights"),
        ("mode: full\nlabels: graded\nclass_weights: [1.0, 2.0]\n", "4 classes"),
        ("mode: full\nlabels: graded\nloss: contrastive\n", "hard targets"),
        ("mode: full\nlabels: graded\nsoft_targets: p_relevant\n", "hard targets"),
    ],
)
def test_ignored_combinations_fail_before_any_model_loads(
    tmp_path: Path, yaml_text: str, message: str
):
    model_config, data_config, loss_config, args = _parse(
        tmp_path, yaml_text + "model_name_or_path: /does/not/exist\ndataset: /does/not/exist\n"
    )
    with pytest.raises(ValueError, match=message):
        train(model_config, data_config, loss_config, args)


def test_top_layers_trains_only_the_top(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path, monkeypatch
):
    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir),
        mode="top_layers",
        trainable_layers=1,
        max_length=256,
    )
    before, _ = build_grader(model_config)
    monkeypatch.setenv(STATE_CACHE_ENV, str(tmp_path / "states"))
    args = args_for(tmp_path, num_train_epochs=2, learning_rate=1e-2)
    data = DataConfig(dataset=str(tiny_dataset))
    train(model_config, data, LossConfig(), args)
    after = load_file(str(Path(args.output_dir) / "model.safetensors"))
    changed = {
        name
        for name, value in before.state_dict().items()
        if name in after and not torch.equal(value, after[name])
    }
    assert changed, "nothing trained"
    assert all(name.startswith(("model.layers.1.", "model.norm.", "score.")) for name in changed)
    assert any(name.startswith("model.layers.1.") for name in changed)
    info = json.loads((Path(args.output_dir) / "grader_config.json").read_text())
    assert info["model"]["trainable_layers"] == 1
    # Scored from the cached states through the trained top (models.families.classifier.states,
    # what cross-validation uses), the grader gives its full forward pass's P(relevant).
    from types import SimpleNamespace

    from models.grader import Grader
    from train.config import TrainingSettings
    from train.recipes import recipe_for

    settings = TrainingSettings(model_config, data, LossConfig(), args)
    scorer = recipe_for(model_config.family).state_scorer(Path(args.output_dir), settings)
    assert scorer is not None
    rows = [json.loads(line) for line in (tiny_dataset / "validation.jsonl").open()][:12]
    cached = scorer([SimpleNamespace(query=r["query"], text=r["text"], title=None) for r in rows])
    grader = Grader.from_pretrained(args.output_dir, dtype="float32", device="cpu")
    full = grader.raw_probabilities([r["query"] for r in rows], [r["text"] for r in rows])
    np.testing.assert_allclose(cached, full, atol=1e-4)
    assert len(set(np.round(full, 4))) > 1  # the pairs differ: the comparison can fail


def test_state_cache_reads_back_what_it_stored_and_computes_only_new_pairs(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch
):
    import models.cached_states as cached_states
    from models.state_cache import StateCache

    model, tokenizer = build_grader(
        GraderModelConfig(model_name_or_path=str(tiny_model_dir), mode="full", max_length=256)
    )
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=256)
    ids = format_pairs(tokenizer, fmt, ["q one", "q two", "q three"], ["a", "bb", "c c"]).input_ids
    cache = StateCache(tmp_path / "states", "tiny")
    first = compute_states(model, ids[:2], 1, cache=cache)
    calls = []
    real = cached_states.run_layers
    monkeypatch.setattr(
        cached_states, "run_layers", lambda *a, **k: calls.append(len(a[2])) or real(*a, **k)
    )
    again = compute_states(model, ids, 1, cache=cache)
    assert calls == [1]  # only the third pair was computed
    for a, b in zip(first, again[:2], strict=True):
        assert torch.equal(a, b)
    assert len(list((tmp_path / "states").glob("*.pt"))) == 3


def test_states_with_a_cache_are_read_from_disk_when_indexed(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch
):
    """With a state cache the states are not all held in host memory (8 KB per token at
    Llama-3.2-1B width, in every DDP process): each is read back when the trainer asks for it,
    equal to the state computed in memory."""
    from models.cached_states import StoredStates
    from models.state_cache import StateCache

    model, tokenizer = build_grader(
        GraderModelConfig(model_name_or_path=str(tiny_model_dir), mode="full", max_length=256)
    )
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=256)
    ids = format_pairs(tokenizer, fmt, ["q one", "q two", "q three"], ["a", "bb", "c c"]).input_ids
    in_memory = compute_states(model, ids, 1)
    cache = StateCache(tmp_path / "states", "tiny")
    stored = compute_states(model, ids, 1, cache=cache)
    assert isinstance(stored, StoredStates) and len(stored) == 3
    reads = []
    real_get = cache.get
    monkeypatch.setattr(cache, "get", lambda *a: reads.append(1) or real_get(*a))
    assert torch.equal(stored[2], in_memory[2]) and len(reads) == 1
    tail = stored[1:]
    assert len(tail) == 2 and torch.equal(tail[0], in_memory[1])
    for path in (tmp_path / "states").glob("*.pt"):
        path.unlink()
    with pytest.raises(FileNotFoundError, match="state of pair 0 is gone"):
        stored[0]


def test_the_head_can_train_at_its_own_learning_rate(
    tiny_model_dir: Path, tiny_dataset: Path, tmp_path: Path
):
    from train.config import TrainingSettings
    from train.grader_data import load_split
    from train.recipes.base import TrainingJob
    from train.recipes.classifier import classifier_trainer

    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir),
        mode="top_layers",
        trainable_layers=1,
        max_length=256,
    )
    model, tokenizer = build_grader(model_config)
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=256)
    args = args_for(tmp_path, learning_rate=1e-4, head_learning_rate=1e-2, eval_strategy="no")
    settings = TrainingSettings(
        model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args
    )
    trainer = classifier_trainer(
        TrainingJob(settings, model, tokenizer, fmt, load_split(tiny_dataset, "train"), None)
    )
    optimizer = trainer.create_optimizer()
    head = {id(p) for p in model.score.parameters()}
    rates = {
        "head" if id(p) in head else "body": group["lr"]
        for group in optimizer.param_groups
        for p in group["params"]
    }
    assert rates == {"head": 1e-2, "body": 1e-4}


def test_two_writers_of_one_state_at_once_both_succeed(tmp_path: Path, monkeypatch):
    """DDP ranks store the same pairs at the same time; one write inside another stands for that
    interleaving, which a shared temporary name turned into a lost or missing file."""
    from models.state_cache import StateCache

    cache = StateCache(tmp_path / "states", "tiny")
    real_save = torch.save
    inner_done = []

    def save_then_let_the_other_rank_write(obj, path, *args, **kwargs):
        real_save(obj, path, *args, **kwargs)
        if not inner_done:
            inner_done.append(True)
            cache.put([1, 2, 3], 1, torch.float32, torch.ones(2))

    monkeypatch.setattr(torch, "save", save_then_let_the_other_rank_write)
    cache.put([1, 2, 3], 1, torch.float32, torch.ones(2))
    monkeypatch.setattr(torch, "save", real_save)
    assert torch.equal(cache.get([1, 2, 3], 1, torch.float32), torch.ones(2))
    assert [p.name for p in (tmp_path / "states").iterdir() if p.suffix != ".pt"] == []


def test_one_switch_sets_the_state_cache_every_layer_uses(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch
):
    """The state cache is the process's (models.state_cache): RELEVANCE_GRADER_STATE_CACHE names
    a folder or turns it off, no config passes one, and with it off a run keeps its states in
    memory and cross-validation scores graders by a full forward pass (no state scorer)."""
    from models.state_cache import default_state_cache, state_cache_for
    from train.config import TrainingSettings
    from train.recipes import recipe_for

    monkeypatch.setenv("RELEVANCE_GRADER_CACHE", str(tmp_path / "machine"))
    monkeypatch.delenv(STATE_CACHE_ENV, raising=False)
    assert default_state_cache() == tmp_path / "machine" / "states"  # the machine's, by default
    monkeypatch.setenv(STATE_CACHE_ENV, str(tmp_path / "mine"))
    cache = state_cache_for(str(tiny_model_dir))
    assert cache is not None and cache.folder == tmp_path / "mine"
    monkeypatch.setenv(STATE_CACHE_ENV, "none")
    assert default_state_cache() is None and state_cache_for(str(tiny_model_dir)) is None
    # DDP processes share states through the machine's folder even then: none holds them all.
    shared = state_cache_for(str(tiny_model_dir), processes=2)
    assert shared is not None and shared.folder == tmp_path / "machine" / "states"
    model_config = GraderModelConfig(model_name_or_path=str(tiny_model_dir), mode="frozen")
    settings = TrainingSettings(model_config, DataConfig(), LossConfig(), args_for(tmp_path))
    # Off: nothing stored to read, so no state scorer (and no grader loaded to find that out).
    assert recipe_for(model_config.family).state_scorer(tmp_path / "absent", settings) is None
    assert "state_cache" not in {f.name for f in dataclasses.fields(type(settings.args))}
