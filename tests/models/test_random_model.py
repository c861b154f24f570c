from __future__ import annotations

from pathlib import Path

import pytest
import torch

from models.random_model import llama3_style_tokenizer, llama_config, main


def test_the_1b_shape_is_llama_3_2_1b():
    """1.236 B parameters with tied embeddings, as the hub's Llama-3.2-1B (counted on the meta
    device: nothing is allocated)."""
    from transformers import LlamaForCausalLM

    with torch.device("meta"):
        model = LlamaForCausalLM(llama_config("llama-3.2-1b", llama3_style_tokenizer()))
    assert sum(p.numel() for p in model.parameters()) == 1_235_814_400
    assert model.config.num_key_value_heads == 8 and model.config.vocab_size == 128256


@pytest.mark.slow
def test_the_written_model_trains_as_a_student(tmp_path: Path, tiny_dataset: Path, capsys):
    """What a GPU machine without hub access runs: write the model, then train it by path."""
    from models.builder import GraderModelConfig
    from models.resolve import RESERVED_PAD_TOKEN, load_tokenizer
    from tests.train.conftest import args_for
    from train.train import DataConfig, LossConfig, train

    out = tmp_path / "random"
    main(["--shape", "tiny", "--out", str(out), "--dtype", "float32"])
    assert "random-weight tiny" in capsys.readouterr().out
    tokenizer = load_tokenizer(str(out))
    assert tokenizer.pad_token == RESERVED_PAD_TOKEN
    model_config = GraderModelConfig(model_name_or_path=str(out), mode="lora", lora_r=4)
    metrics = train(
        model_config,
        DataConfig(dataset=str(tiny_dataset)),
        LossConfig(),
        args_for(tmp_path, max_steps=2),
    )
    assert metrics["train_loss"] > 0 and (tmp_path / "out" / "adapter_config.json").exists()
