"""Shared fixtures: offline mode, the committed tiny tokenizer and a tiny random Llama."""

from __future__ import annotations

import atexit
import json
import os
import random
import shutil
import sys
import tempfile

# No hub at test time, ever (set before transformers is imported anywhere).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# pytest-xdist runs one test process per core (pyproject's addopts): each computes on one thread,
# as do the processes its tests start, so that the processes do not fight over the cores.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
# Exact comparisons need float32; CI machines may or may not have bf16 instructions (bf16 is tested explicitly).
os.environ.setdefault("RELEVANCE_GRADER_CPU_DTYPE", "float32")

from pathlib import Path

import pytest

from models.assets import TINY_TOKENIZER
from tests.browser import browser  # noqa: F401  (the page tests' fixture)

# The state cache (models.state_cache) is on, as for a user, but this session's, not the machine's:
# one folder shared by the tests and the processes they start, removed at the end.
_SESSION_STATES = tempfile.mkdtemp(prefix="relevance-grader-states-")
os.environ.setdefault("RELEVANCE_GRADER_STATE_CACHE", _SESSION_STATES)
atexit.register(shutil.rmtree, _SESSION_STATES, ignore_errors=True)

REPO = Path(__file__).resolve().parents[1]
COLLECTIONS = REPO / "data" / "collections"
# The multi-GPU launch as a user runs it, with two processes; without a GPU, DDP runs on gloo.
TWO_PROCESS_LAUNCH = [
    sys.executable,
    "-m",
    "accelerate.commands.launch",
    "--config_file",
    str(REPO / "train/configs/accelerate/ddp.yaml"),
    "--num_processes",
    "2",
    "--mixed_precision",
    "no",
]


# The end-to-end jobs take minutes each: started first, so that no test process is left running
# one of them alone at the end while the others have finished.
LONGEST_FIRST = ("tests/eval/test_pipeline.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A page test (headless Chromium) is slow too: ``-m "not slow"`` is the fast tier. The
    end-to-end jobs' tests go first (pytest-xdist hands tests out in this order); the rest keep
    file order, so that a module's fixtures are built once per test process."""
    for item in items:
        if item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST_FIRST))  # stable


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from models.resolve import load_tokenizer

    return load_tokenizer(str(TINY_TOKENIZER))


def build_tiny_llama(path: Path, seed: int = 0, tokenizer_dir: Path | None = None) -> Path:
    """A 2-layer random Llama with the tiny tokenizer, saved as a causal LM like a hub checkpoint."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from models.random_model import llama_config

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir or TINY_TOKENIZER)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama_config("tiny", tokenizer))
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def build_tiny_bert(path: Path, seed: int = 0) -> Path:
    """A 2-layer random BERT (a ``BertModel``, as the embedded all-MiniLM-L6-v2 is) with a small
    uncased WordPiece tokenizer: what the cross-encoder family starts from, in miniature. The
    vocabulary is every character (alone and as a ``##`` continuation) and the most frequent
    words of committed queries and passages, picked by count then spelling, so that every build
    is the same (the tokenizers library's trainer breaks ties differently from run to run)."""
    from collections import Counter

    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, BertTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    normalizer = normalizers.BertNormalizer(lowercase=True)
    splitter = pre_tokenizers.BertPreTokenizer()
    words: Counter[str] = Counter()
    for name, file in (("adi", "corpus.jsonl"), ("trec-dl-2019-passage", "queries.jsonl")):
        for line in (COLLECTIONS / name / file).read_text().splitlines():
            row = json.loads(line)
            text = normalizer.normalize_str(f"{row.get('title', '')} {row['text']}")
            words.update(word for word, _ in splitter.pre_tokenize_str(text))
    characters = sorted({c for word in words for c in word})
    frequent = sorted(words, key=lambda w: (-words[w], w))[:600]
    vocab = dict.fromkeys([*specials, *characters, *(f"##{c}" for c in characters), *frequent])
    wordpiece = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    wordpiece.normalizer = normalizer
    wordpiece.pre_tokenizer = splitter
    wordpiece.decoder = decoders.WordPiece()
    wordpiece.post_processor = processors.BertProcessing(
        ("[SEP]", vocab_index(vocab, "[SEP]")), ("[CLS]", vocab_index(vocab, "[CLS]"))
    )
    tokenizer = BertTokenizerFast(
        tokenizer_object=wordpiece, do_lower_case=True, model_max_length=512
    )
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        pad_token_id=tokenizer.pad_token_id,
    )
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def vocab_index(vocab: dict[str, None], token: str) -> int:
    return list(vocab).index(token)


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture
def model_dir_for(request: pytest.FixtureRequest):
    """The tiny base model a training mode starts from: a BERT for the cross-encoder family, a
    Llama for the others."""

    def model_dir(mode: str) -> Path:
        from models.families import CROSS_ENCODER, family_of

        encoder = family_of(mode) is CROSS_ENCODER
        return request.getfixturevalue("tiny_bert_dir" if encoder else "tiny_model_dir")

    return model_dir


@pytest.fixture(scope="session")
def llama3_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama with the Llama-3-style tokenizer (what ``relevance-grader random-model
    --shape tiny`` writes)."""
    from models.random_model import RandomModelConfig, write_random_model

    out = tmp_path_factory.mktemp("tiny-llama3")
    return write_random_model(RandomModelConfig(out=str(out), shape="tiny", dtype="float32"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def trec_dl_dir() -> Path:
    return COLLECTIONS / "trec-dl-2019-passage"


@pytest.fixture(scope="session")
def adi_dir() -> Path:
    return COLLECTIONS / "adi"


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Judgments whose relevance is visible in the text, so a tiny model can learn it."""
    from data.build import BuildConfig, build_dataset

    root = tmp_path_factory.mktemp("ds")
    rng = random.Random(0)
    lines = []
    for q in range(16):
        # Every query has as many relevant as irrelevant pairs, so every split has both labels.
        grades = [0, 0, 1, 2, 3, rng.choice([2, 3])]
        rng.shuffle(grades)
        for d, grade in enumerate(grades):
            text = ("axon terminal definition " * grade) + "the passage talks about something"
            lines.append(
                {
                    "qid": f"q{q}",
                    "query": f"query {q} axon",
                    "doc_id": f"d{q}-{d}",
                    "text": text,
                    "grade": grade,
                }
            )
    (root / "j.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    build_dataset(
        BuildConfig(judgments=[str(root / "j.jsonl")], out=str(root / "ds"), save_dataset=False)
    )
    return root / "ds"


@pytest.fixture(scope="session")
def tiny_grader_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from models.builder import GraderModelConfig, build_grader, grader_info, save_grader_config
    from models.input_format import GraderInputFormat

    out = tmp_path_factory.mktemp("grader")
    config = GraderModelConfig(model_name_or_path=str(tiny_model_dir), mode="full", max_length=256)
    model, tokenizer = build_grader(config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    save_grader_config(
        out, grader_info(config, GraderInputFormat.from_tokenizer(tokenizer, 256).to_dict())
    )
    return out
