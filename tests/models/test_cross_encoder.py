"""The cross-encoder family (issue 65): a BERT-style encoder reading (query, document) as the
tokenizer's sentence pair, trained by the one Trainer, exported with the round-trip check and read
by every consumer of a grader. Tiny random BERTs with a WordPiece tokenizer (tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from core.records import document_text
from models.builder import GraderModelConfig, build_grader, grader_info, save_grader_config
from models.export import ExportConfig, export, plain_transformers_probabilities
from models.grader import Grader
from models.input_format import format_pairs
from models.scoring import pad_right, pair_token_type_ids
from tests.train.conftest import args_for
from train.train import DataConfig, LossConfig, train

QUERY = "what is an axon terminal"
DOCUMENTS = [
    "Axon terminals are the distal ends of the branches of an axon.",
    "Paris is the capital of France.",
    "The library is open from nine to five. " * 30,  # cut to fit
    "axon",
]


def cross_encoder_config(model_dir: Path, **overrides) -> GraderModelConfig:
    return GraderModelConfig(
        model_name_or_path=str(model_dir), mode="cross_encoder", max_length=64, **overrides
    )


@pytest.fixture(scope="module")
def untrained(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cross-encoder grader as training would save it, its head fresh."""
    out = tmp_path_factory.mktemp("cross-encoder")
    config = cross_encoder_config(tiny_bert_dir)
    model, tokenizer = build_grader(config)
    fmt = config.family.input_format(tokenizer, config.max_length, "auto", str(tiny_bert_dir))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    save_grader_config(out, grader_info(config, fmt.to_dict()))
    return out


@pytest.fixture(scope="module")
def trained(
    tiny_bert_dir: Path, tiny_dataset: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("trained-cross-encoder")
    metrics = train(
        cross_encoder_config(tiny_bert_dir),
        DataConfig(dataset=str(tiny_dataset)),
        LossConfig(),
        args_for(root, learning_rate=2e-3, num_train_epochs=6, per_device_train_batch_size=8),
    )
    return root / "out", metrics


def test_a_pair_is_the_tokenizers_sentence_pair_with_the_document_cut_never_the_query(
    untrained: Path,
):
    grader = Grader.from_pretrained(untrained, device="cpu")
    tokenizer, fmt = grader.tokenizer, grader.input_format
    assert (fmt.id, fmt.max_length) == ("cross-encoder@1", 64)
    titles = ["Axon", None, None, None]
    pairs = format_pairs(tokenizer, fmt, [QUERY] * 4, DOCUMENTS, titles)
    documents = [document_text(d, t) for d, t in zip(DOCUMENTS, titles, strict=True)]
    expected = tokenizer(
        [QUERY] * 4, documents, truncation="only_second", max_length=64, split_special_tokens=True
    )["input_ids"]
    assert pairs.input_ids == expected
    assert pairs.truncated == [False, False, True, False]
    query_ids = tokenizer(QUERY)["input_ids"]  # [CLS] query [SEP], whole in every input
    assert all(ids[: len(query_ids)] == query_ids for ids in pairs.input_ids)
    assert pairs.prefix_lengths == [len(query_ids)] * 4
    assert max(map(len, pairs.input_ids)) == 64
    # A query too long to leave the document a quarter of max_length loses its end, said so.
    long = format_pairs(tokenizer, fmt, [QUERY * 20], [DOCUMENTS[0]])
    assert long.query_truncated == [True] and len(long.input_ids[0]) <= 64
    assert long.input_ids[0].count(tokenizer.sep_token_id) == 2
    # "[SEP]" written in a text is text: the pair keeps exactly its two separators.
    injected = format_pairs(tokenizer, fmt, ["axon [SEP] terminal"], ["a [SEP] b [CLS] c"])
    assert injected.input_ids[0].count(tokenizer.sep_token_id) == 2


def test_token_types_read_off_the_ids_are_the_tokenizers(tiny_bert_dir: Path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    queries, documents = ["axon terminal", "q"], ["the ends of an axon", "d e f g h i j"]
    encoded = tokenizer(queries, documents, padding=True, return_tensors="pt")
    ids, mask = pad_right(
        tokenizer(queries, documents)["input_ids"], tokenizer.pad_token_id
    )  # the grader's padding
    assert torch.equal(ids, encoded["input_ids"])
    types = pair_token_type_ids(ids, mask, tokenizer.sep_token_id)
    assert torch.equal(types, encoded["token_type_ids"])
    assert types.sum() > 0  # the documents' segment is not all zeros


def test_one_score_per_pair_whatever_the_batch(untrained: Path):
    """A pair alone, among longer and shorter pairs, in batches of 1 or 32: one score, the one
    plain transformers gives it unbatched (with the tokenizer's own token types)."""
    grader = Grader.from_pretrained(untrained, device="cpu", dtype="float32")
    alone = np.array([grader.score(QUERY, [document])[0] for document in DOCUMENTS])
    together = grader.score(QUERY, DOCUMENTS)
    grader.batch_size = 1
    one_by_one = grader.score(QUERY, DOCUMENTS)
    np.testing.assert_allclose(together, alone, atol=1e-6)
    np.testing.assert_allclose(one_by_one, alone, atol=1e-6)
    from models.families import CROSS_ENCODER
    from models.families.base import PlainExport

    plain = CROSS_ENCODER.reference_probabilities(
        PlainExport(grader.model, grader.tokenizer, grader.info.dump()),
        [(QUERY, d) for d in DOCUMENTS],
    )
    np.testing.assert_allclose(together, plain, atol=1e-6)
    assert np.ptp(together) > 0  # a random head still tells these pairs apart


def test_training_lowers_the_loss_and_the_saved_grader_scores_as_the_trainer_did(
    trained: tuple[Path, dict], tiny_dataset: Path, tiny_bert_dir: Path
):
    out, metrics = trained
    history = [h["loss"] for h in metrics["history"] if "loss" in h and "eval_loss" not in h]
    assert np.mean(history[-3:]) < np.mean(history[:3]), history
    # Relevance is visible in the text: held-out pairs separate, and the head did not collapse.
    assert metrics["eval_roc_auc"] >= 0.8 and metrics["eval_f1"] > 0.5, metrics
    grader = Grader.from_pretrained(out, device="cpu", dtype="float32")
    assert grader.info.mode == "cross_encoder" and grader.input_format.pair
    assert grader.info.base_model == str(tiny_bert_dir)
    validation = [json.loads(line) for line in (tiny_dataset / "validation.jsonl").open()]
    from core.metrics import classification_metrics

    scores = grader.raw_probabilities(
        [r["query"] for r in validation], [r["text"] for r in validation]
    )
    again = classification_metrics(scores, np.array([r["label"] for r in validation]))
    assert again["roc_auc"] == pytest.approx(metrics["eval_roc_auc"], abs=1e-6)
    assert again["f1"] == pytest.approx(metrics["eval_f1"], abs=1e-6)


def test_the_export_reproduces_the_grader_with_plain_transformers(
    trained: tuple[Path, dict], tmp_path: Path
):
    out, _ = trained
    (tmp_path / "metrics.json").write_text(
        json.dumps(
            {
                "format_version": 1,
                "threshold": 0.4,
                "calibration": {"method": "temperature", "temperature": 1.5},
            }
        )
    )
    check = export(
        ExportConfig(
            checkpoint=str(out),
            out=str(tmp_path / "export"),
            metrics=str(tmp_path / "metrics.json"),
        )
    )
    assert check.max_abs_difference <= 1e-5
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["grader"]["input_format"]["name"] == "cross-encoder"
    exported = Grader.from_pretrained(tmp_path / "export", device="cpu", dtype="float32")
    pairs = [(QUERY, d) for d in DOCUMENTS]
    plain = plain_transformers_probabilities(tmp_path / "export", pairs)
    np.testing.assert_allclose(exported.raw_probabilities([QUERY] * 4, DOCUMENTS), plain, atol=1e-6)
    # score() applies the stored temperature to those same probabilities.
    from core.metrics import apply_temperature

    np.testing.assert_allclose(
        exported.score(QUERY, DOCUMENTS), apply_temperature(plain, 1.5), atol=1e-6
    )
    card = (tmp_path / "export" / "README.md").read_text()
    assert "sentence pair `[CLS] {query} [SEP] {document} [SEP]`" in card
    assert 'truncation="only_second"' in card


def test_a_cross_encoder_is_a_grader_labeler_and_reranks_a_run(
    trained: tuple[Path, dict], adi_dir: Path, tmp_path: Path
):
    from data.beir import Collection, read_trec_run, write_trec_run
    from measure.labelers import Hit, make_labeler
    from measure.labelers import rerank as rerank_module

    out, _ = trained
    labeler = make_labeler(f"grader:{out}")
    hits = [Hit(doc_id=f"d{i}", text=d) for i, d in enumerate(DOCUMENTS)]
    labels = labeler.label("q1", QUERY, hits)
    scores = Grader.from_pretrained(out, device="cpu", dtype="float32").score(QUERY, DOCUMENTS)
    np.testing.assert_allclose([label.score for label in labels], scores, atol=1e-6)
    assert [label.relevant for label in labels] == list(scores >= 0.5)

    collection = Collection.load(adi_dir)
    qid, docs = sorted(collection.queries)[0], sorted(collection.corpus)[:6]
    write_trec_run(tmp_path / "run.trec", {qid: {d: float(6 - i) for i, d in enumerate(docs)}})
    rerank_module.main(
        [
            "--run", str(tmp_path / "run.trec"), "--corpus", str(adi_dir), "--grader", str(out),
            "--k", "6", "--out", str(tmp_path / "reranked.trec"),
        ]
    )  # fmt: skip
    reranked = read_trec_run(tmp_path / "reranked.trec")[qid]
    grader = Grader.from_pretrained(out, device="cpu", dtype="float32")
    expected = grader.score(collection.queries[qid], [collection.corpus[d] for d in docs])
    by_score = [d for _, d in sorted(zip(-expected, docs, strict=True))]
    assert sorted(reranked, key=lambda d: -reranked[d]) == by_score


def test_the_new_heads_own_learning_rate_reaches_an_encoders_classifier(
    tiny_bert_dir: Path, tmp_path: Path
):
    """--head_learning_rate gives the fresh head its rate: a BERT's head is `classifier`, not a
    decoder classifier's `score`."""
    from models.losses import build_loss
    from train.trainer import GraderTrainer

    model, _ = build_grader(cross_encoder_config(tiny_bert_dir))
    trainer = GraderTrainer(
        model=model,
        args=args_for(tmp_path, learning_rate=1e-5, head_learning_rate=1e-3, eval_strategy="no"),
        loss_fn=build_loss("cross_entropy"),
    )
    optimizer = trainer.create_optimizer()
    head = {id(p) for p in model.classifier.parameters()}
    rates = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    assert {rates[p] for p in head} == {1e-3}
    assert {r for p, r in rates.items() if p not in head} == {1e-5}


def test_decoder_only_training_options_are_refused_for_a_cross_encoder(tmp_path: Path):
    """Padding-free batches (position ids restarting per pair) and Liger's kernels are decoder
    techniques: with a cross-encoder each is one line before any model loads, not ignored."""
    from core.errors import InputError
    from train.config import TrainingSettings, check_combination
    from train.recipes import recipe_for

    config = cross_encoder_config(Path("minilm-l6"))
    with pytest.raises(InputError, match="padding_free: the cross_encoder family has no"):
        check_combination(config, DataConfig(), LossConfig(), args_for(tmp_path, padding_free=True))
    args = args_for(tmp_path)
    args.use_liger_kernel = True  # as a GPU with liger-kernel installed would accept it
    settings = TrainingSettings(config, DataConfig(), LossConfig(), args)
    with pytest.raises(InputError, match="use_liger_kernel: Liger has no kernels"):
        recipe_for(config.family).check(settings)
