from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from core.errors import InputError
from models import export as export_module
from models.export import ExportConfig, RoundTripError, export
from models.families.plain import fill_template
from models.grader import Grader
from models.push import PushConfig, push
from tests.train.conftest import args_for
from train.train import DataConfig, LossConfig, train


@pytest.fixture(scope="module")
def lora_checkpoint(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from models.builder import GraderModelConfig

    root = tmp_path_factory.mktemp("lora")
    lines = [
        {
            "qid": f"q{i % 12}",
            "query": f"query {i % 12}",
            "doc_id": f"d{i}",
            "text": "axon " * (i // 12 % 4) + "text",
            "grade": i // 12 % 4,  # every query has every grade
        }
        for i in range(120)
    ]
    (root / "j.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    from data.build import BuildConfig, build_dataset

    build_dataset(
        BuildConfig(judgments=[str(root / "j.jsonl")], out=str(root / "ds"), save_dataset=False)
    )
    model_config = GraderModelConfig(
        model_name_or_path=str(tiny_model_dir), mode="lora", max_length=256, lora_r=4
    )
    train(
        model_config,
        DataConfig(dataset=str(root / "ds")),
        LossConfig(),
        args_for(root, num_train_epochs=1, save_strategy="epoch"),  # a checkpoint too
    )
    metrics = {
        "format_version": 1,
        "threshold": 0.42,
        "calibration": {"method": "temperature", "temperature": 1.7},
    }
    (root / "metrics.json").write_text(json.dumps(metrics))
    return root


@pytest.fixture(scope="module")
def exported(lora_checkpoint: Path) -> Path:
    out = lora_checkpoint / "export"
    export(
        ExportConfig(
            checkpoint=str(lora_checkpoint / "out"),
            out=str(out),
            metrics=str(lora_checkpoint / "metrics.json"),
        )
    )
    return out


def test_export_is_a_self_describing_standard_classifier(exported: Path):
    config = json.loads((exported / "config.json").read_text())
    assert config["architectures"] == ["LlamaForSequenceClassification"]
    assert config["id2label"] == {"0": "not_relevant", "1": "relevant"}
    assert config["pad_token_id"] == 2
    grader = config["grader"]
    assert (
        grader["input_format"]["name"] == "grader-chat"
        and "{query}" in grader["input_format"]["template"]
    )
    assert grader["threshold"] == 0.42 and grader["calibration"]["temperature"] == 1.7
    assert grader["label_threshold"]["relevant_when_grade_at_least"] == 2
    assert grader["mode"] == "lora" and grader["data"]["train_pairs"] > 0
    assert (exported / "model.safetensors").exists() and not (
        exported / "adapter_config.json"
    ).exists()
    check = json.loads((exported / "export_check.json").read_text())
    assert check["max_abs_difference"] <= check["tolerance"] == 1e-4
    card = (exported / "README.md").read_text()
    front = yaml.safe_load(card.split("---")[1])
    assert (
        front["pipeline_tag"] == "text-classification" and front["library_name"] == "transformers"
    )
    assert (
        "AutoModelForSequenceClassification" in card and "## Intended use and limitations" in card
    )
    # The tiny student is no Llama 3.2: Apache; serving with vLLM says what vLLM leaves out.
    assert front["license"] == "apache-2.0"
    flat = " ".join(card.split())
    assert "vllm serve" in flat and "threshold (0.420)" in flat and "temperature (1.700)" in flat


def test_the_card_licence_follows_the_base_model():
    from models.card import base_model_license

    assert base_model_license("meta-llama/Llama-3.2-1B-Instruct") == "llama3.2"
    assert base_model_license("meta-llama/Llama-3.1-70B-Instruct") == "llama3.1"
    assert base_model_license("HuggingFaceTB/SmolLM2-135M-Instruct") == "apache-2.0"


def test_round_trip_mismatch_fails_loudly(
    lora_checkpoint: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    real = export_module.plain_transformers_probabilities
    monkeypatch.setattr(
        export_module, "plain_transformers_probabilities", lambda d, p: real(d, p) + 0.01
    )
    with pytest.raises(RoundTripError, match="does not reproduce"):
        export(ExportConfig(checkpoint=str(lora_checkpoint / "out"), out=str(tmp_path / "bad")))


def test_export_never_destroys_the_checkpoint_or_a_users_folder(
    lora_checkpoint: Path, tmp_path: Path
):
    checkpoint = lora_checkpoint / "out"
    before = sorted(p.name for p in checkpoint.iterdir())
    for out in (checkpoint, checkpoint / "export", lora_checkpoint):
        with pytest.raises(ValueError, match=r"(would replace|is inside) --checkpoint"):
            export(ExportConfig(checkpoint=str(checkpoint), out=str(out)))
    assert sorted(p.name for p in checkpoint.iterdir()) == before
    users = tmp_path / "mine"
    users.mkdir()
    (users / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="not a previous export"):
        export(ExportConfig(checkpoint=str(checkpoint), out=str(users)))
    assert (users / "notes.txt").read_text() == "keep me"


def test_a_failed_export_leaves_the_previous_export_in_place(
    exported: Path, lora_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
):
    before = {p.name: p.read_bytes() for p in exported.iterdir() if p.is_file()}
    monkeypatch.setattr(
        export_module, "plain_transformers_probabilities", lambda d, p: np.zeros(len(p))
    )
    with pytest.raises(RoundTripError, match="previous export, if any, is unchanged"):
        export(ExportConfig(checkpoint=str(lora_checkpoint / "out"), out=str(exported)))
    assert {p.name: p.read_bytes() for p in exported.iterdir() if p.is_file()} == before
    assert [p.name for p in exported.parent.iterdir() if p.name.startswith(".")] == []


def test_grader_loads_the_export_and_applies_threshold_and_calibration(
    exported: Path, lora_checkpoint: Path
):
    grader = Grader.from_pretrained(exported, device="cpu")
    checkpoint = Grader.from_pretrained(lora_checkpoint / "out", device="cpu")
    documents = ["axon axon text", "text", "axon text"]
    raw = grader.raw_probabilities(["query 1"] * 3, documents)
    np.testing.assert_allclose(
        raw, checkpoint.raw_probabilities(["query 1"] * 3, documents), atol=1e-5
    )
    calibrated = grader.score("query 1", documents)
    logits = np.log(raw) - np.log1p(-raw)
    np.testing.assert_allclose(calibrated, 1 / (1 + np.exp(-logits / 1.7)), atol=1e-5)
    assert list(grader.label("query 1", documents)) == list(calibrated >= 0.42)


def test_text_classification_pipeline_accepts_the_export(exported: Path):
    from transformers import pipeline

    grader = Grader.from_pretrained(exported, device="cpu")
    text = fill_template(grader.input_format.template, "query 2", "axon text")
    classify = pipeline("text-classification", model=str(exported), device="cpu")
    result = classify(text, top_k=None, tokenizer_kwargs={"add_special_tokens": False})
    scores = {r["label"]: r["score"] for r in result}
    assert scores["relevant"] == pytest.approx(
        float(grader.raw_probabilities(["query 2"], ["axon text"])[0]), abs=1e-5
    )


class RecordingApi:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.uploaded: dict[str, bytes] = {}

    def create_repo(self, **kwargs):
        self.calls.append(("create_repo", kwargs))
        return f"https://hub.example/{kwargs['repo_id']}"

    def create_branch(self, **kwargs):
        self.calls.append(("create_branch", kwargs))

    def upload_folder(self, **kwargs):
        self.calls.append(("upload_folder", kwargs))
        self.uploaded = {p.name: p.read_bytes() for p in Path(kwargs["folder_path"]).iterdir()}
        return type("Commit", (), {"oid": "abc123"})()


def test_push_uploads_exactly_the_export(exported: Path):
    api = RecordingApi()
    result = push(
        PushConfig(export=str(exported), repo_id="org/grader", private=True, revision="v1"), api=api
    )
    names = [name for name, _ in api.calls]
    assert names == ["create_repo", "create_branch", "upload_folder"]
    assert api.calls[0][1] == {
        "repo_id": "org/grader",
        "repo_type": "model",
        "private": True,
        "exist_ok": True,
    }
    assert api.calls[2][1]["revision"] == "v1"
    assert set(api.uploaded) == {p.name for p in exported.iterdir()}
    assert {
        "config.json",
        "grader_config.json",
        "README.md",
        "model.safetensors",
        "tokenizer.json",
    } <= set(api.uploaded)
    assert json.loads(api.uploaded["config.json"])["grader"]["threshold"] == 0.42
    # The pushed card names the model by its hub id, never the local folder, and links no
    # local path as its base model.
    card = api.uploaded["README.md"].decode()
    assert "# org/grader: a relevance grader" in card and 'path = "org/grader"' in card
    assert f'"{exported.name}"' not in card and str(exported.parent) not in card
    assert "base_model: /" not in card and "base_model: ." not in card
    assert result["commit"] == "abc123"
    push(
        PushConfig(export=str(exported), repo_id="org/grader"), api=api
    )  # idempotent: exist_ok again
    assert api.calls[3][1]["exist_ok"] is True


def test_push_without_a_token_is_a_clear_error(exported: Path, monkeypatch: pytest.MonkeyPatch):
    import huggingface_hub

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    with pytest.raises(ValueError, match="no hub token"):
        push(PushConfig(export=str(exported), repo_id="org/grader"))
    with pytest.raises(ValueError, match="repo_id: expected ORG/NAME"):
        push(PushConfig(export=str(exported), repo_id="grader"))


def test_an_unreachable_hub_is_one_line_naming_the_repo(exported: Path):
    import httpx2

    class UnreachableApi(RecordingApi):
        def create_repo(self, **kwargs):
            raise httpx2.ConnectError("[Errno -3] Temporary failure in name resolution")

    with pytest.raises(ConnectionError, match=r"hub: pushing to org/grader failed: \[Errno -3\]"):
        push(PushConfig(export=str(exported), repo_id="org/grader"), api=UnreachableApi())


@pytest.mark.parametrize(
    "content", ["{not json", '{"tolerance": 0.001}', '{"max_abs_difference": "x", "tolerance": 1}']
)
def test_a_damaged_export_check_is_named_before_pushing(
    exported: Path, tmp_path: Path, content: str
):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(exported, copy)
    (copy / "export_check.json").write_text(content)
    api = RecordingApi()
    with pytest.raises(ValueError, match=r"copy/export_check\.json: not a round-trip record"):
        push(PushConfig(export=str(copy), repo_id="org/grader"), api=api)
    assert api.calls == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "labels"),
    [
        ("full", "binary"),
        ("frozen", "binary"),
        ("top_layers", "binary"),
        ("generative", "binary"),
        ("top_layers", "graded"),
        ("query_likelihood", "binary"),
        ("cross_encoder", "binary"),
        ("cross_encoder", "graded"),
    ],
)
def test_every_mode_exports_with_the_checkpoints_scores_and_a_card_snippet_that_runs(
    mode: str, labels: str, model_dir_for, tiny_dataset: Path, tmp_path: Path, capsys
):
    """Export parity beyond LoRA, and the card's usage code run as a user would paste it."""
    import re

    from models.builder import GraderModelConfig

    model_config = GraderModelConfig(
        model_name_or_path=str(model_dir_for(mode)),
        mode=mode,
        max_length=256,
        trainable_layers=1,
        labels=labels,
    )
    train(model_config, DataConfig(dataset=str(tiny_dataset)), LossConfig(), args_for(tmp_path))
    metrics = {
        "format_version": 1,
        "threshold": 0.3,
        "calibration": {"method": "temperature", "temperature": 1.3},
    }
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    out = tmp_path / "export"
    export(
        ExportConfig(
            checkpoint=str(tmp_path / "out"), out=str(out), metrics=str(tmp_path / "metrics.json")
        )
    )
    query, document = (
        "what is an axon terminal",
        "Axon terminals are the ends of an axon's branches.",
    )
    checkpoint = Grader.from_pretrained(tmp_path / "out", dtype="float32", device="cpu")
    exported_grader = Grader.from_pretrained(out, dtype="float32", device="cpu")
    raw = checkpoint.raw_probabilities([query], [document])
    np.testing.assert_allclose(
        exported_grader.raw_probabilities([query], [document]), raw, atol=1e-5
    )
    stored = exported_grader.score(query, [document])[0]  # with the stored temperature
    card = (out / "README.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", card, re.S).group(1)  # as it is, unchanged
    capsys.readouterr()  # drop what training and export printed
    namespace: dict = {}
    exec(compile(snippet, "model-card-snippet", "exec"), namespace)
    # float32 through two code paths (the card's plain loop, the grader's batches): a query
    # likelihood sums per-token log-probabilities, so its rounding reaches ~1e-5.
    assert namespace["p"] == pytest.approx(float(stored), abs=5e-5)
    assert capsys.readouterr().out.split()[1] == str(bool(stored >= 0.3))
    if labels == "graded":
        config = json.loads((out / "config.json").read_text())
        assert config["id2label"] == {
            "0": "irrelevant",
            "1": "related",
            "2": "highly_relevant",
            "3": "perfectly_relevant",
        }
        assert config["grader"]["relevant_from"] == 2
        if model_config.family.name == "classifier":  # its vLLM section says what to sum
            assert "sum `probs[2:]`" in card
        assert exported_grader.graded and exported_grader.grade(query, [document])[0] in (
            0,
            1,
            2,
            3,
        )


def _edited_copy(exported: Path, tmp_path: Path, file: str, **changes) -> Path:
    import shutil

    copy = tmp_path / "edited"
    shutil.copytree(exported, copy)
    config = json.loads((copy / file).read_text())
    config.update(changes)
    (copy / file).write_text(json.dumps(config))
    return copy


@pytest.mark.parametrize("threshold", [7, 0, "high", True])
def test_a_stored_threshold_that_is_not_a_probability_is_named(
    exported: Path, tmp_path: Path, threshold
):
    copy = _edited_copy(exported, tmp_path, "grader_config.json", threshold=threshold)
    with pytest.raises(ValueError, match=r"edited/grader_config\.json: threshold: expected a prob"):
        Grader.from_pretrained(copy, dtype="float32", device="cpu")


@pytest.mark.parametrize(
    ("file", "changes", "problem"),
    [
        ("config.json", {"num_hidden_layers": 1}, "unused"),
        ("grader_config.json", {"mode": "generative"}, "missing|unused"),
    ],
    ids=["fewer-layers", "another-family"],
)
def test_an_edited_grader_folder_is_refused_not_half_loaded(
    exported: Path, tmp_path: Path, file: str, changes: dict, problem: str
):
    copy = _edited_copy(exported, tmp_path, file, **changes)
    with pytest.raises(ValueError, match=rf"edited: the weights do not match .*({problem})"):
        Grader.from_pretrained(copy, dtype="float32", device="cpu")


def test_a_bfloat16_export_passes_its_own_round_trip_check(lora_checkpoint: Path, tmp_path: Path):
    import torch
    from safetensors import safe_open

    out = tmp_path / "bf16"
    # The reference holds the export's rounded weights, so float32's tolerance holds too.
    export(ExportConfig(checkpoint=str(lora_checkpoint / "out"), out=str(out), dtype="bfloat16"))
    check = json.loads((out / "export_check.json").read_text())
    assert check["tolerance"] == 1e-4 and check["max_abs_difference"] <= 1e-5
    with safe_open(str(out / "model.safetensors"), "pt") as weights:
        name = next(k for k in weights.keys() if "layers.0" in k)  # noqa: SIM118 - not a dict
        assert weights.get_tensor(name).dtype == torch.bfloat16


def test_the_round_trip_reference_holds_the_exports_weights_and_float32_positions(
    lora_checkpoint: Path, tmp_path: Path
):
    import torch
    from transformers import AutoModelForSequenceClassification

    from models.export import export_reference

    out = tmp_path / "bf16"
    export(ExportConfig(checkpoint=str(lora_checkpoint / "out"), out=str(out), dtype="bfloat16"))
    reference = export_reference(lora_checkpoint / "out", torch.bfloat16).model
    loaded = AutoModelForSequenceClassification.from_pretrained(out, dtype=torch.float32)
    # The same weights exactly (LoRA merged once, in float32, then rounded) ...
    expected = dict(loaded.named_parameters())
    assert set(dict(reference.named_parameters())) == set(expected)
    for name, parameter in reference.named_parameters():
        assert torch.equal(parameter, expected[name]), name
    # ... and the rotary frequencies a plain reload computes, not their bfloat16 rounding, which
    # turned positions enough to fail real exports at the Llama-3.2-1B shape.
    buffers = dict(loaded.named_buffers())
    rotary = {n: b for n, b in reference.named_buffers() if "inv_freq" in n}
    assert rotary and all(torch.equal(b, buffers[n]) for n, b in rotary.items())
    assert any(not torch.equal(b, b.to(torch.bfloat16).float()) for b in rotary.values())


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.2-1B"),
        ("smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct"),
        (
            "/root/.cache/relevance-grader/models/smollm2-135m",
            "HuggingFaceTB/SmolLM2-135M-Instruct",
        ),
        ("/data/models/my-llama", None),
        ("runs/models/llama", None),
    ],
)
def test_the_card_links_only_a_hub_id_as_its_base_model(base: str, expected: str | None):
    from models.card import hub_base_model

    assert hub_base_model(base) == expected


def test_the_weights_of_a_trained_grader_its_checkpoints_and_its_export_are_shareable(
    lora_checkpoint: Path, exported: Path
):
    """safetensors writes 0600: the weights would be the one file another user cannot read."""
    import os
    import stat

    mask = os.umask(0o022)
    os.umask(mask)
    weights = [
        *(lora_checkpoint / "out").rglob("*.safetensors"),
        *exported.rglob("*.safetensors"),
    ]
    assert any("checkpoint-" in str(path) for path in weights) and len(weights) >= 3
    for path in weights:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path


@pytest.mark.slow
def test_the_local_cards_snippet_runs_as_pasted_from_another_folder(exported: Path, tmp_path: Path):
    """The card's snippet said path = "export", which from anywhere but the export's parent is
    a hub id (a connection error offline). Pasted as it is and run elsewhere, it now loads the
    export and prints its P(relevant) and decision."""
    import os
    import re
    import subprocess
    import sys

    card = (exported / "README.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", card, re.S).group(1)
    assert f'path = "{exported.resolve()}"' in snippet
    elsewhere = tmp_path / "somewhere-else"
    elsewhere.mkdir()
    (elsewhere / "snippet.py").write_text(snippet)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "snippet.py"], cwd=elsewhere, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    p, decision = result.stdout.split()
    grader = Grader.from_pretrained(exported, dtype="float32", device="cpu")
    stored = grader.score(
        "what is an axon terminal", ["Axon terminals are the ends of an axon's branches."]
    )[0]
    assert float(p) == pytest.approx(float(stored), abs=5e-5)
    assert decision == str(bool(stored >= grader.threshold))


def test_the_card_says_a_zero_shot_query_likelihood_grader_is_not_fine_tuned():
    from models.card import what_it_is
    from models.grader_config import GraderDescription

    read_out = {"backbone": "smollm2-135m", "scale": 0.1, "bias": -1.0, "marker": "Q:"}
    zero_shot = GraderDescription.model_validate(
        {
            "mode": "query_likelihood",
            "parameters": {"trainable": 0, "total": 10},
            "query_likelihood": read_out,
        }
    )
    words = what_it_is(zero_shot, "HuggingFaceTB/SmolLM2-135M-Instruct")
    assert "zero-shot query likelihood" in words and "no weight" in words
    assert "distilled" not in words and "fine-tuning" not in words
    trained = GraderDescription.model_validate(
        {"mode": "frozen", "parameters": {"trainable": 5, "total": 10}, "loss": {"loss": "ce"}}
    )
    assert "frozen fine-tuning" in what_it_is(trained, "base")
