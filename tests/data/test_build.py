from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from core.errors import InputError
from core.io import RecordError, read_records
from core.records import Judgment
from data.build import BuildConfig, balance_indices, build_dataset, summary_table


def make_judgments(path: Path, n_queries: int = 40, per_query: int = 10, seed: int = 0) -> Path:
    """Synthetic judgments with ~20% relevant, a few error records and duplicates."""
    rng = np.random.default_rng(seed)
    lines = []
    for q in range(n_queries):
        for d in range(per_query):
            grade = int(rng.choice([0, 1, 2, 3], p=[0.6, 0.2, 0.15, 0.05]))
            lines.append(
                {
                    "qid": f"q{q}",
                    "query": f"query {q}",
                    "doc_id": f"d{q}-{d}",
                    "text": f"doc {d}",
                    "grade": grade,
                }
            )
    lines.append({**lines[0]})  # duplicate
    lines.append(
        {"qid": "q0", "query": "query 0", "doc_id": "bad", "text": "x", "error": "unparseable"}
    )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def split_ids(out: Path, name: str) -> list[tuple[str, str]]:
    return [(r.qid, r.doc_id) for r in read_records(out / f"{name}.jsonl", Judgment)]


@pytest.fixture()
def judgments(tmp_path: Path) -> Path:
    return make_judgments(tmp_path / "judgments.jsonl")


def test_query_split_keeps_queries_on_one_side_and_similar_positive_ratios(
    judgments: Path, tmp_path: Path
):
    manifest = build_dataset(
        BuildConfig(judgments=[str(judgments)], out=str(tmp_path / "ds"), save_dataset=False)
    )
    out = tmp_path / "ds"
    queries = {
        name: {q for q, _ in split_ids(out, name)} for name in ("train", "validation", "test")
    }
    assert not queries["train"] & queries["test"]
    assert not queries["train"] & queries["validation"]
    assert not queries["validation"] & queries["test"]
    assert sum(len(v) for v in queries.values()) == 40
    counts = manifest.counts
    ratios = [counts[s].positive / counts[s].pairs for s in ("train", "test")]
    assert abs(ratios[0] - ratios[1]) < 0.1
    assert manifest.cleaning["errors_dropped"] == 1
    assert manifest.cleaning["duplicates_dropped"] == 1
    assert manifest.cleaning["kept"] == 400
    assert "dropped 1 error record(s), 1 duplicate(s)" in summary_table(manifest)


@pytest.mark.parametrize("mode", ["oversample", "undersample", "both"])
def test_balancing_hits_the_target_ratio_and_never_touches_test(
    judgments: Path, tmp_path: Path, mode: str
):
    base = build_dataset(
        BuildConfig(judgments=[str(judgments)], out=str(tmp_path / "plain"), save_dataset=False)
    )
    manifest = build_dataset(
        BuildConfig(
            judgments=[str(judgments)],
            out=str(tmp_path / mode),
            balance=mode,
            target_ratio=0.5,
            save_dataset=False,
        )
    )
    train = manifest.counts["train"]
    assert train.positive / train.negative == pytest.approx(0.5, abs=0.01)
    assert split_ids(tmp_path / mode, "test") == split_ids(tmp_path / "plain", "test")
    assert split_ids(tmp_path / mode, "validation") == split_ids(tmp_path / "plain", "validation")
    assert manifest.counts["test"] == base.counts["test"]
    assert manifest.counts_before_balancing["train"] == base.counts["train"]


def test_balance_indices_counts():
    labels = np.array([1] * 10 + [0] * 90)
    over = balance_indices(labels, "oversample", 1.0, seed=0)
    assert (labels[over] == 1).sum() == 90 and (labels[over] == 0).sum() == 90
    under = balance_indices(labels, "undersample", 1.0, seed=0)
    assert (labels[under] == 1).sum() == 10 and (labels[under] == 0).sum() == 10
    both = balance_indices(labels, "both", 1.0, seed=0)
    assert (labels[both] == 1).sum() == 50 and len(both) == 100
    assert set(over[labels[over] == 1]) == set(np.flatnonzero(labels == 1))  # every positive kept


def test_same_seed_same_splits_other_seed_other_splits(judgments: Path, tmp_path: Path):
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        build_dataset(
            BuildConfig(
                judgments=[str(judgments)],
                out=str(tmp_path / name),
                seed=seed,
                balance="both",
                save_dataset=False,
            )
        )
    for split in ("train", "validation", "test"):
        assert split_ids(tmp_path / "a", split) == split_ids(tmp_path / "b", split)
    assert split_ids(tmp_path / "a", "test") != split_ids(tmp_path / "c", "test")


def test_pair_mode_is_stratified_80_20(judgments: Path, tmp_path: Path):
    manifest = build_dataset(
        BuildConfig(
            judgments=[str(judgments)],
            out=str(tmp_path / "p"),
            split_by="pair",
            validation_size=0,
            save_dataset=False,
        )
    )
    assert manifest.counts["test"].pairs == 80
    assert manifest.counts["train"].pairs == 320
    ratios = [manifest.counts[s].positive / manifest.counts[s].pairs for s in ("train", "test")]
    assert abs(ratios[0] - ratios[1]) < 0.02


def test_strict_stops_and_lenient_lists_bad_lines(judgments: Path, tmp_path: Path):
    with open(judgments, "a") as handle:
        handle.write('{"qid": "q1", "query": "x", "doc_id": "z", "text": "t", "grade": 9}\n')
    with pytest.raises(RecordError, match=r"judgments\.jsonl:403: grade"):
        build_dataset(
            BuildConfig(judgments=[str(judgments)], out=str(tmp_path / "s"), save_dataset=False)
        )
    manifest = build_dataset(
        BuildConfig(judgments=[str(judgments)], out=str(tmp_path / "l"), strict=False)
    )
    assert manifest.cleaning["skipped_lines"] == [
        f"{judgments}:403: grade: Input should be less than or equal to 3"
    ]
    from datasets import load_from_disk

    dataset = load_from_disk(str(tmp_path / "l" / "dataset"))
    assert set(dataset) == {"train", "validation", "test"}
    assert dataset["test"].num_rows == manifest.counts["test"].pairs
    assert manifest.sources[0]["sorted_lines_sha256"] and manifest.config["seed"] == 42


def test_train_only_judgments_reach_the_train_split_alone(tmp_path: Path):
    from data.build import BuildConfig, build_dataset

    def judgments(path: Path, prefix: str, queries: int) -> Path:
        rows = [
            {
                "qid": f"{prefix}{q}",
                "query": f"query {q}",
                "doc_id": f"{prefix}{q}-{d}",
                "text": "text",
                "grade": 3 if d % 3 == 0 else 0,
            }
            for q in range(queries)
            for d in range(6)
        ]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    main = judgments(tmp_path / "main.jsonl", "q", 20)
    extra = judgments(tmp_path / "extra.jsonl", "squad:", 5)
    manifest = build_dataset(
        BuildConfig(
            judgments=[str(main)],
            train_only=[str(extra)],
            out=str(tmp_path / "ds"),
            save_dataset=False,
            validation_size=0.2,
        )
    )
    split_qids = {
        name: {json.loads(line)["qid"] for line in (tmp_path / "ds" / f"{name}.jsonl").open()}
        for name in ("train", "validation", "test")
    }
    extra_qids = {f"squad:{q}" for q in range(5)}
    assert extra_qids <= split_qids["train"]
    assert not extra_qids & (split_qids["validation"] | split_qids["test"])
    assert manifest.train_only_sources[0]["path"] == str(extra)
    with pytest.raises(ValueError, match="train_only"):
        build_dataset(
            BuildConfig(
                judgments=[str(main)],
                train_only=[str(main)],
                out=str(tmp_path / "x"),
                save_dataset=False,
            )
        )


def test_the_dataset_folder_is_replaced_as_one_unit(
    judgments: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import data.build as build_module

    out = tmp_path / "ds"
    build_dataset(BuildConfig(judgments=[str(judgments)], out=str(out), save_dataset=False))
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # a kill after the splits were written, before the manifest

    monkeypatch.setattr(build_module, "_save_dataset_dict", killed)
    with pytest.raises(KeyboardInterrupt):
        build_dataset(BuildConfig(judgments=[str(judgments)], out=str(out), seed=7))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []

    monkeypatch.undo()
    build_dataset(
        BuildConfig(judgments=[str(judgments)], out=str(out), validation_size=0, save_dataset=False)
    )
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "test.jsonl", "train.jsonl"]


def test_build_refuses_a_folder_it_did_not_write(judgments: Path, tmp_path: Path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    config = BuildConfig(judgments=[str(judgments)], out=str(tmp_path / "mine"))
    with pytest.raises(InputError, match="not a previous dataset"):
        build_dataset(config)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    build_dataset(BuildConfig(**{**vars(config), "overwrite": True, "save_dataset": False}))
    assert not (tmp_path / "mine" / "notes.txt").exists()


@pytest.mark.parametrize("overwrite", [False, True])
def test_build_refuses_an_out_that_holds_its_own_inputs(tmp_path: Path, overwrite: bool):
    """--out is replaced as a whole: judgments inside it would be deleted with it."""
    out = tmp_path / "ds"
    out.mkdir()
    inside = make_judgments(out / "judgments.jsonl")
    before = inside.read_bytes()
    for config in (
        BuildConfig(judgments=[str(inside)], out=str(out), overwrite=overwrite),
        BuildConfig(
            judgments=[str(make_judgments(tmp_path / "j.jsonl"))],
            train_only=[str(inside)],
            out=str(out),
            overwrite=overwrite,
        ),
    ):
        with pytest.raises(ValueError, match=r"out: .* would replace --(judgments|train_only)"):
            build_dataset(config)
    assert inside.read_bytes() == before


def test_a_linked_dataset_folder_is_rebuilt_behind_its_link(judgments: Path, tmp_path: Path):
    real = tmp_path / "store" / "ds"
    build_dataset(BuildConfig(judgments=[str(judgments)], out=str(real), save_dataset=False))
    link = tmp_path / "ds"
    link.symlink_to(real, target_is_directory=True)
    build_dataset(
        BuildConfig(judgments=[str(judgments)], out=str(link), seed=9, save_dataset=False)
    )
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert json.loads((real / "manifest.json").read_text())["config"]["seed"] == 9


def test_outputs_get_the_ordinary_file_modes_not_tempfiles_private_ones(
    judgments: Path, tmp_path: Path
):
    import stat

    from core.io import _UMASK

    out = tmp_path / "ds"
    build_dataset(BuildConfig(judgments=[str(judgments)], out=str(out), save_dataset=False))
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~_UMASK
    for path in out.rglob("*"):
        expected = (0o777 if path.is_dir() else 0o666) & ~_UMASK
        assert stat.S_IMODE(path.stat().st_mode) == expected, path


@pytest.mark.parametrize("threshold", [5, 0, -1])
def test_a_label_threshold_off_the_grade_scale_is_refused(threshold: int):
    with pytest.raises(ValueError, match="label_threshold"):
        BuildConfig(judgments=["j.jsonl"], label_threshold=threshold)


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _row(q: int, d: int, grade: int, **extra) -> dict:
    return {
        "qid": f"q{q}",
        "query": f"query {q}",
        "doc_id": f"d{d}",
        "text": "t",
        "grade": grade,
    } | extra


def test_a_held_out_split_without_relevant_pairs_is_refused(tmp_path: Path):
    # One relevant pair in 20 queries: at least one held-out split has none.
    rows = [_row(q, d, 3 if (q, d) == (0, 0) else 0) for q in range(20) for d in range(5)]
    with pytest.raises(
        ValueError, match=r"(validation|test)_size: the .* split .* no relevant pairs"
    ):
        build_dataset(
            BuildConfig(
                judgments=[str(_write(tmp_path / "j.jsonl", rows))], out=str(tmp_path / "ds")
            )
        )
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            _row(1, 7, 0, query="another text"),
            r"j\.jsonl:4: query: query id 'q1' has another text at .*j\.jsonl:2",
        ),
        (_row(1, 7, 0, text=" \u200b", title=""), r"j\.jsonl:4: text: an empty document"),
    ],
    ids=["one-id-two-texts", "empty-document"],
)
def test_inconsistent_judgments_are_named_by_file_and_line(tmp_path: Path, bad: dict, message: str):
    rows = [_row(0, 0, 3), _row(1, 1, 0), _row(1, 2, 2), bad]
    with pytest.raises(RecordError, match=message):
        build_dataset(
            BuildConfig(
                judgments=[str(_write(tmp_path / "j.jsonl", rows))], out=str(tmp_path / "ds")
            )
        )


def test_a_pair_judged_twice_keeps_its_last_judgment_as_the_judgments_labeler_does(tmp_path: Path):
    from measure.labelers import Hit, JudgmentsLabeler

    rows = [_row(q, d, 3 if d < 2 else 0) for q in range(30) for d in range(6)]
    rows.append(_row(0, 5, 3))  # re-judged later: relevant after all
    path = _write(tmp_path / "j.jsonl", rows)
    manifest = build_dataset(
        BuildConfig(judgments=[str(path)], out=str(tmp_path / "ds"), save_dataset=False)
    )
    assert manifest.cleaning["conflicting_duplicates"] == 1
    built = {
        (r.qid, r.doc_id): r.label
        for name in ("train", "validation", "test")
        for r in read_records(tmp_path / "ds" / f"{name}.jsonl", Judgment)
    }
    assert built[("q0", "d5")] == 1
    assert JudgmentsLabeler(str(path)).label("q0", "query 0", [Hit("d5", "t")])[0].relevant


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize("folds", [0, 3])
def test_the_same_judgments_in_any_line_order_give_a_byte_identical_folder(
    tmp_path: Path, folds: int
):
    source = tmp_path / "judgments.jsonl"
    make_judgments(source, n_queries=30, per_query=12)
    lines = source.read_text().splitlines(keepends=True)
    # The duplicate and the error record keep their places (a later line re-judges a pair).
    body, tail = lines[:-2], lines[-2:]
    config = dict(
        judgments=[str(source)],
        out=str(tmp_path / "ds"),
        max_pairs_per_query=8,
        balance="both",
        folds=folds,
        overwrite=True,
    )
    build_dataset(BuildConfig(**config))
    first = folder_bytes(tmp_path / "ds")
    np.random.default_rng(7).shuffle(body)
    source.write_text("".join(body + tail))
    build_dataset(BuildConfig(**config))
    second = folder_bytes(tmp_path / "ds")
    assert first.keys() == second.keys() and any(name.endswith(".arrow") for name in first)
    assert [name for name in first if first[name] != second[name]] == []
    # A different seed does change the choice.
    build_dataset(BuildConfig(**config | {"seed": 5}))
    test_split = "fold-0/test.jsonl" if folds else "test.jsonl"
    assert folder_bytes(tmp_path / "ds")[test_split] != first[test_split]


def test_folds_test_every_query_once_and_validate_inside_the_training_side(
    judgments: Path, tmp_path: Path
):
    manifest = build_dataset(
        BuildConfig(judgments=[str(judgments)], out=str(tmp_path / "ds"), folds=5)
    )
    tested = [q for fold in manifest.folds for q in fold.queries["test"]]
    assert sorted(tested) == sorted(f"q{i}" for i in range(40))  # each query tested once
    for number, fold in enumerate(manifest.folds):
        folder = tmp_path / "ds" / f"fold-{number}"
        splits = {name: {q for q, _ in split_ids(folder, name)} for name in fold.counts}
        assert splits["test"] == set(fold.queries["test"]) and len(splits["test"]) == 8
        assert not splits["test"] & (splits["train"] | splits["validation"])
        assert not splits["train"] & splits["validation"]
        assert len(splits["validation"]) == round(32 * 0.2)  # sized in queries
        assert json.loads((folder / "manifest.json").read_text())["fold"] == number
    positive = [fold.counts["test"].positive / 80 for fold in manifest.folds]
    assert max(positive) - min(positive) < 0.1  # every fold spans easy and hard queries


def test_held_out_sizes_count_queries_and_few_validation_queries_are_warned(
    judgments: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    manifest = build_dataset(
        BuildConfig(
            judgments=[str(judgments)],
            out=str(tmp_path / "ds"),
            test_size=10,
            validation_size=3,
            save_dataset=False,
        )
    )
    assert manifest.counts["test"].queries == 10
    assert manifest.counts["validation"].queries == 3
    assert "3 validation queries" in caplog.text and "unstable" in caplog.text
    with pytest.raises(ValueError, match="whole"):
        BuildConfig(judgments=[str(judgments)], validation_size=2.5)
    with pytest.raises(ValueError, match="folds"):
        BuildConfig(judgments=[str(judgments)], folds=1)


def test_the_manifest_is_typed_and_earlier_manifests_are_refused(judgments: Path, tmp_path: Path):
    """manifest.json keeps the keys it had, plus its format version; one without a format
    version (as it was first written) is refused in one line; the cross-validation's manifest
    of another source holds only its ``queries``."""
    from data.build import DatasetManifest, read_manifest

    manifest = build_dataset(
        BuildConfig(judgments=[str(judgments)], out=str(tmp_path / "d"), save_dataset=False)
    )
    written = json.loads((tmp_path / "d" / "manifest.json").read_text())
    keys = {"cleaning", "sources", "train_only_sources", "seed", "config", "counts", "queries"}
    assert set(written) == keys | {"counts_before_balancing", "format_version"}
    assert DatasetManifest.read(tmp_path / "d" / "manifest.json") == manifest
    del written["format_version"]
    (tmp_path / "old.json").write_text(json.dumps(written))
    with pytest.raises(ValueError, match=r"old\.json: no format version, .*re-run the stage"):
        DatasetManifest.read(tmp_path / "old.json")
    assert manifest.label_threshold == 2 and manifest.fold_splits(0) is None
    (tmp_path / "cv").mkdir()
    cv = {"format_version": 1, "queries": {"test": ["q1"]}}
    (tmp_path / "cv" / "manifest.json").write_text(json.dumps(cv))
    assert read_manifest(tmp_path / "cv").queries == {"test": ["q1"]}
    assert read_manifest(tmp_path) is None
