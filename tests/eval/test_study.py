"""The quality study on a slice of TREC DL with the tiny model: folds, rows, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.cli import parse_config
from eval.jobs.study import Study, StudyConfig
from models.state_cache import STATE_CACHE_ENV
from tests.eval.test_pipeline import small_trec_dl

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sorted((REPO / "eval/configs").glob("study*.yaml")), ids=str)
def test_study_configs_parse(path: Path):
    (config,) = parse_config([StudyConfig], ["--config", str(path)])
    # Every study trains at least one grader and scores it beside both baselines.
    assert config.folds == 5 and config.trained_models()
    assert {"bm25", "cosine"} <= set(config.models)
    for train_config in config.trained_models().values():
        assert (REPO / train_config).exists()
    for extra in config.train_only:  # committed, or what data.synthesize writes under runs/,
        # or a QA mix that a data/configs/ config of data.mix builds there
        assert (
            (REPO / extra).exists()
            or (not config.real_training_queries and extra.startswith("runs/"))
            or extra in built_mixes()
        )


def built_mixes() -> set[str]:
    """The judgments files that data.mix's committed configs write (under runs/, not committed)."""
    from data.mix import MixConfig

    return {
        f"{parse_config([MixConfig], ['--config', str(path)])[0].out}/judgments.jsonl"
        for path in (REPO / "data/configs").glob("qa-mix*.yaml")
    }


@pytest.mark.slow
def test_the_study_folds_are_the_main_jobs_build(trec_dl_dir: Path, tmp_path: Path):
    """The study labels the judged pool and splits it with data.build, as the main job does."""
    config = StudyConfig(
        collection=str(trec_dl_dir), out=str(tmp_path / "study"), max_pairs_per_query=5
    )
    folders = Study(config).build_folds()
    tests = [json.loads((f / "manifest.json").read_text())["queries"]["test"] for f in folders]
    flat = [q for group in tests for q in group]
    assert len(flat) == len(set(flat)) == 43 and max(map(len, tests)) - min(map(len, tests)) <= 1
    from data.build import BuildConfig, build_dataset

    build_dataset(
        BuildConfig(
            judgments=[str(tmp_path / "study/pool/judgments.jsonl")],
            out=str(tmp_path / "main-dataset"),
            folds=5,
            max_pairs_per_query=5,
            validation_size=0.2,
            save_dataset=False,
        )
    )
    for number, folder in enumerate(folders):
        main = tmp_path / "main-dataset" / f"fold-{number}"
        assert (main / "test.jsonl").read_bytes() == (folder / "test.jsonl").read_bytes()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"folds": 1}, "folds"),
        ({"models": ["bm26"]}, "models"),
        ({"learning_curve": [1.5]}, "learning_curve"),
    ],
)
def test_bad_study_settings_fail_early(override: dict, message: str):
    with pytest.raises(ValueError, match=message):
        StudyConfig(**override)


@pytest.mark.slow
def test_a_study_on_other_sources_alone_tests_every_judged_query(trec_dl_dir: Path, tmp_path: Path):
    collection = small_trec_dl(tmp_path / "dl", trec_dl_dir, queries=6, docs_per_query=8)
    synthetic = tmp_path / "synthetic.jsonl"
    rows = [
        {
            "qid": f"synthetic:{q}:0",
            "query": f"question {q}",
            "doc_id": f"d{i}",
            "text": "t",
            "label": int(i == 0),
        }
        for q in range(10)
        for i in range(3)
    ]
    synthetic.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match="real_training_queries"):
        StudyConfig(real_training_queries=False)
    config = StudyConfig(
        collection=str(collection),
        out=str(tmp_path / "study"),
        real_training_queries=False,
        train_only=[str(synthetic)],
        max_pairs_per_query=8,
        models=["bm25", "cosine"],
    )
    summary = Study(config).run().dump()  # study.json as written
    queries = json.loads((tmp_path / "study/fold-0/data-all/manifest.json").read_text())["queries"]
    assert len(queries["test"]) == 6 and summary["folds"] == 1
    assert all(q.startswith("synthetic:") for q in queries["train"] + queries["validation"])
    assert len(queries["train"]) == 8 and len(queries["validation"]) == 2
    assert {r["model"] for r in summary["per_fold"]} == {"bm25", "cosine"}


@pytest.mark.slow
def test_study_end_to_end_on_a_tiny_model(
    tiny_model_dir: Path, trec_dl_dir: Path, tmp_path: Path, monkeypatch
):
    collection = small_trec_dl(tmp_path / "dl", trec_dl_dir, queries=8, docs_per_query=10)
    # A judge that labelled every other pair of the pool (P(yes) where it answered).
    judge = tmp_path / "judge.jsonl"
    config = StudyConfig(
        collection=str(collection),
        out=str(tmp_path / "study"),
        folds=2,
        max_pairs_per_query=10,
        validation_size=2,  # queries
        student=str(tiny_model_dir),
        max_length=256,
        models=[
            "bm25",
            "top=train/configs/smollm2-135m-top.yaml",
            "ql=train/configs/smollm2-135m-ql.yaml",
            f"judge=judgments:{judge}",
        ],
        train_args=["--num_train_epochs", "1", "--trainable_layers", "1"],
        learning_curve=[0.5],
        learning_curve_model="top",
    )
    monkeypatch.setenv(STATE_CACHE_ENV, str(tmp_path / "states"))
    pool = [json.loads(x) for x in Study(config).judged_pool().read_text().splitlines()]
    judge.write_text(
        "".join(
            json.dumps(row | {"p_relevant": 0.9 if row["label"] else 0.2}) + "\n"
            for row in pool[::2]
        )
    )
    summary = Study(config).run().dump()
    root = tmp_path / "study"
    test_pairs = 0
    for fold in range(2):
        data = root / "dataset" / f"fold-{fold}"
        splits = {
            name: {json.loads(x)["qid"] for x in (data / f"{name}.jsonl").open()}
            for name in ("train", "validation", "test")
        }
        train, validation, test = splits["train"], splits["validation"], splits["test"]
        assert not (train & test or validation & test or train & validation)
        assert test and validation and train
        pairs = [json.loads(x) for x in (data / "test.jsonl").open()]
        test_pairs += len(pairs)
        for model in ("bm25", "top", "ql"):  # every row is scored on the same pairs
            result = json.loads((root / f"fold-{fold}" / model / "metrics.json").read_text())
            assert result["pairs"] == len(pairs)
    assert set(summary["models"]) == {"bm25", "top", "ql", "judge"}
    # Each fold trains from one config file (typed values, no flag strings), kept beside it.
    import yaml

    trained = yaml.safe_load((root / "fold-0" / "top" / "grader-training.yaml").read_text())
    assert trained["model_name_or_path"] == str(tiny_model_dir) and trained["max_length"] == 256
    assert trained["report_to"] == "none"
    # The state cache is the process's: no config names it, and the folds' training filled it.
    assert "state_cache" not in trained and any((tmp_path / "states").glob("*.pt"))
    assert trained["output_dir"] == str(root / "fold-0" / "top" / "grader")
    assert summary["models"]["top"]["beats_baselines_in_folds"].endswith("/2")
    assert {p["share"] for p in summary["learning_curve"]} == {0.5, 1.0}
    assert (root / "study.md").exists() and (root / "study_auc.png").exists()
    cross = summary["cross_validation"]
    assert cross["pooled"]["bm25"]["pairs"] == cross["pooled"]["ql"]["pairs"] == test_pairs
    assert cross["pooled"]["judge"]["pairs"] == pytest.approx(test_pairs / 2, abs=2)
    assert {(d["model"], d["baseline"]) for d in cross["differences"]} == {
        ("top", "bm25"),
        ("ql", "bm25"),
    }
    assert "Pooled over the folds" in (root / "study.md").read_text()
    # The study scored the cached-state graders from its state cache; the plain Grader agrees.
    from measure.classification.checkpoint import CheckpointEvalConfig, evaluate

    data = root / "dataset" / "fold-0"
    for model in ("top", "ql"):
        plain = evaluate(
            CheckpointEvalConfig(
                model=str(root / "fold-0" / model / "grader"),
                data=str(data / "test.jsonl"),
                calibration_data=str(data / "validation.jsonl"),
                out=str(tmp_path / "plain" / model),
                plots=False,
            )
        )
        cached = json.loads((root / "fold-0" / model / "metrics.json").read_text())
        for split in ("at_0.5", "at_validation_threshold"):
            a, b = plain.dump()["metrics"]["teacher"][split], cached["metrics"]["teacher"][split]
            assert a["roc_auc"] == pytest.approx(b["roc_auc"], abs=1e-6)
            assert a["f1"] == pytest.approx(b["f1"], abs=1e-6)
    stamp = (root / "fold-0" / "top" / "metrics.json").stat().st_mtime
    Study(config).run()  # resumes: nothing recomputed
    assert (root / "fold-0" / "top" / "metrics.json").stat().st_mtime == stamp


@pytest.mark.slow
def test_a_cross_encoder_is_a_study_row_beside_the_baselines(
    tiny_bert_dir: Path, trec_dl_dir: Path, tmp_path: Path
):
    """eval/configs/study-cross-encoder.yaml's row with a tiny BERT as the student: each fold
    trains the cross-encoder from its config and scores it on the baseline's test pairs."""
    import yaml

    collection = small_trec_dl(tmp_path / "dl", trec_dl_dir, queries=8, docs_per_query=10)
    config = StudyConfig(
        collection=str(collection),
        out=str(tmp_path / "study"),
        folds=2,
        max_pairs_per_query=10,
        validation_size=2,  # queries
        student=str(tiny_bert_dir),
        max_length=128,
        models=["bm25", "ce=train/configs/minilm-l6-cross-encoder.yaml"],
        train_args=["--per_device_train_batch_size", "8"],
    )
    summary = Study(config).run().dump()
    root = tmp_path / "study"
    for fold in range(2):
        pairs = (root / "dataset" / f"fold-{fold}" / "test.jsonl").read_text().splitlines()
        for model in ("bm25", "ce"):
            result = json.loads((root / f"fold-{fold}" / model / "metrics.json").read_text())
            assert result["pairs"] == len(pairs)
    trained = yaml.safe_load((root / "fold-0" / "ce" / "grader-training.yaml").read_text())
    assert trained["mode"] == "cross_encoder" and trained["model_name_or_path"] == str(
        tiny_bert_dir
    )
    grader = json.loads((root / "fold-0" / "ce" / "grader" / "grader_config.json").read_text())
    assert grader["input_format"]["name"] == "cross-encoder"
    assert set(summary["models"]) == {"bm25", "ce"}
    assert {(d["model"], d["baseline"]) for d in summary["cross_validation"]["differences"]} == {
        ("ce", "bm25")
    }


@pytest.mark.slow
def test_a_grader_trained_elsewhere_is_a_row_calibrated_per_fold_not_trained(
    tiny_grader_dir: Path, trec_dl_dir: Path, tmp_path: Path
):
    """NAME=grader:PATH: an export or checkpoint trained on other data (a QA mix) is scored on
    every fold's test pairs, its threshold fitted on that fold's validation pairs; nothing is
    trained, and the row pairs with the baselines like a trained one."""
    collection = small_trec_dl(tmp_path / "dl", trec_dl_dir, queries=8, docs_per_query=10)
    config = StudyConfig(
        collection=str(collection),
        out=str(tmp_path / "study"),
        folds=2,
        max_pairs_per_query=10,
        validation_size=2,  # queries
        models=["bm25", f"elsewhere=grader:{tiny_grader_dir}"],
    )
    summary = Study(config).run().dump()
    root = tmp_path / "study"
    for fold in range(2):
        pairs = (root / "dataset" / f"fold-{fold}" / "test.jsonl").read_text().splitlines()
        result = json.loads((root / f"fold-{fold}" / "elsewhere" / "metrics.json").read_text())
        assert result["pairs"] == len(pairs) and result["calibration_pairs"] > 0
        assert not (root / f"fold-{fold}" / "elsewhere" / "grader").exists()  # not trained
        assert 0 < result["threshold"] < 1
    assert {(d["model"], d["baseline"]) for d in summary["cross_validation"]["differences"]} == {
        ("elsewhere", "bm25")
    }
    assert config.trained_models() == {}
