"""Recording eval.search evaluations: ``eval.search --track`` end to end on ADI with a qrels
labeler, ``history record`` of an existing folder (an old one without human values among them),
the main job's recording, and the ``history list`` and ``show`` output."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from core.errors import InputError
from data.beir import read_corpus, read_qrels, read_queries, write_trec_qrels, write_trec_run
from eval.history import listing, record_command, show
from eval.history.store import open_store
from measure.metrics.results import PerQueryResults
from support.postgres import free_port
from tests.commands import run_command
from tests.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures

REPO = Path(__file__).resolve().parents[2]
ADI = REPO / "data" / "collections" / "adi"
JUDGED = 12


def write_run(path: Path, seed: int) -> Path:
    """A run over every ADI query: 10 documents each, in a seeded random order."""
    docs = sorted(read_corpus(ADI / "corpus.jsonl"))
    rng = np.random.default_rng(seed)
    run = {
        q: {d: float(10 - i) for i, d in enumerate(rng.choice(docs, 10, replace=False))}
        for q in sorted(read_queries(ADI / "queries.jsonl"))
    }
    write_trec_run(path, run)
    return path


def human_sample(path: Path) -> Path:
    """People's judgments of JUDGED queries: ADI's qrels of those, on the 0-3 scale."""
    qrels = read_qrels(ADI / "qrels.tsv")
    chosen = sorted(qrels)[:JUDGED]
    write_trec_qrels(path, {q: {d: 3 * g for d, g in qrels[q].items()} for q in chosen})
    return path


def search(tmp: Path, out: str, *extra: str) -> Path:
    from eval.search.command import main

    main(
        [
            "--run", str(tmp / "dense.trec"), "--corpus", str(ADI),
            "--labeler", f"qrels:{ADI / 'qrels.tsv'}", "--out", str(tmp / out),
            "--report", "false", *extra,
        ]
    )  # fmt: skip
    return tmp / out


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An eval.search output folder with human judgments, not recorded."""
    tmp = tmp_path_factory.mktemp("search")
    write_run(tmp / "dense.trec", seed=0)
    write_run(tmp / "bm25.trec", seed=1)
    return search(tmp, "s", "--human", str(human_sample(tmp / "human.qrels")))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    return request.getfixturevalue("postgres_url")


@pytest.mark.slow
def test_search_track_records_the_primary_run_with_its_human_values(
    folder: Path, target: str, capsys
):
    tmp = folder.parent
    out = search(
        tmp, "tracked", "--compare", str(tmp / "bm25.trec"), "--human", str(tmp / "human.qrels"),
        "--track", target, "--version", "v3", "--note", "new index",
    )  # fmt: skip
    assert (
        f"recorded evaluation id:1 (dense@v3) in {open_store(target).name}"
        in capsys.readouterr().out
    )
    store = open_store(target)
    info = store.get("dense@v3")
    assert (info.run_name, info.note, info.k, info.queries) == ("dense", "new index", 10, 35)
    assert store.systems() == ["dense"]  # the --compare run is not recorded
    per_query = PerQueryResults.read(out / "per_query.json").runs["dense"]
    human = json.loads((out / "human_per_query.json").read_text())["values"]["dense"]
    values = store.query_values(info.id, "ndcg@10")
    assert {q: v for q, (v, _) in values.items()} == {
        q: r.metrics["ndcg@10"] for q, r in per_query.items()
    }
    assert {q: h for q, (_, h) in values.items() if h is not None} == human["ndcg@10"]
    assert len(human["ndcg@10"]) == JUDGED
    (estimate,) = [e for e in store.evaluation_estimates(info.id) if e.metric == "ndcg@10"]
    ppi = json.loads((out / "metrics.json").read_text())["ppi"]["runs"]["dense"]["ndcg@10"]["ppi"]
    assert (estimate.method, estimate.estimate, estimate.low, estimate.high) == (
        "ppi++",
        ppi["estimate"],
        ppi["low"],
        ppi["high"],
    )
    assert estimate.human_queries == JUDGED
    assert store.run_text(info.id) == (tmp / "dense.trec").read_text()
    corpus = hashlib.sha256((ADI / "corpus.jsonl").read_bytes()).hexdigest()
    assert info.corpus_fingerprint == corpus and info.human_fingerprint is not None
    # Without --human: no human values, the labeler's t interval, a time stamp for a version.
    search(tmp, "tracked", "--track", target)
    assert not (out / "human_per_query.json").exists()
    latest = store.list_evaluations("dense")[-1]
    assert latest.version.endswith("Z") and latest.human_fingerprint is None
    assert all(h is None for _, h in store.query_values(latest.id, "map").values())
    assert {e.method for e in store.evaluation_estimates(latest.id)} == {"t"}
    store.close()


@pytest.mark.slow
def test_an_old_folder_without_human_values_records_none_and_keeps_its_estimates(
    folder: Path, tmp_path: Path, capsys
):
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    (old / "human_per_query.json").unlink()  # as a release before the file wrote it
    store = str(tmp_path / "h.sqlite")
    record_command.main(
        ["--store", store, "--from", str(old), "--system", "dense", "--version", "v1"]
    )
    assert "recorded evaluation id:1 (dense@v1)" in capsys.readouterr().out
    opened = open_store(store)
    assert all(h is None for _, h in opened.query_values(1, "ndcg@10").values())
    assert {e.method for e in opened.evaluation_estimates(1)} == {"ppi++"}


@pytest.mark.slow
def test_a_folder_whose_run_is_gone_is_one_line(folder: Path, tmp_path: Path):
    moved = tmp_path / "moved"
    shutil.copytree(folder, moved)
    provenance = json.loads((moved / "provenance.json").read_text())
    provenance["config"]["run"] = str(tmp_path / "gone.trec")
    (moved / "provenance.json").write_text(json.dumps(provenance))
    with pytest.raises(InputError, match=r"names run .*gone.trec, which is not there"):
        record_command.main(["--store", str(tmp_path / "h.sqlite"), "--from", str(moved)])
    assert open_store(str(tmp_path / "h.sqlite")).list_evaluations() == []


@pytest.mark.slow
def test_history_record_refuses_a_name_that_could_not_be_named_back(folder: Path, tmp_path: Path):
    store = tmp_path / "h.sqlite"
    flags = ["--store", str(store), "--from", str(folder)]
    with pytest.raises(InputError, match=r"--system: system 'my@sys' holds '@'"):
        record_command.main([*flags, "--system", "my@sys"])
    with pytest.raises(InputError, match=r"--version: version 'v{40}…' is 201 characters long"):
        record_command.main([*flags, "--version", "v" * 201])
    assert not store.exists()  # refused before the store is opened


@pytest.mark.parametrize("flag", ["system", "version", "note"])
def test_a_name_version_or_note_without_a_store_is_refused(flag: str):
    from eval.jobs.pipeline import PipelineConfig
    from eval.search.settings import SearchEvalConfig

    for config in (SearchEvalConfig, PipelineConfig):
        with pytest.raises(InputError, match=f"{flag}: give --track STORE"):
            config(**{flag: "v1"})
        assert getattr(config(**{flag: "v1", "track": "h.sqlite"}), flag) == "v1"


def test_search_refuses_an_unreachable_store_before_labelling(tmp_path: Path):
    write_run(tmp_path / "dense.trec", seed=0)
    url = f"postgresql://u:pw@127.0.0.1:{free_port()}/history"
    with pytest.raises(InputError, match="cannot connect"):
        search(tmp_path, "s", "--track", url)
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_list_and_show_print_the_evaluations_and_the_trend(folder: Path, tmp_path: Path, capsys):
    store = str(tmp_path / "h.sqlite")
    for version, note in (("v1", "baseline"), ("v2", "new index")):
        record_command.main(["--store", store, "--from", str(folder), "--version", version, "--note", note])  # fmt: skip
    capsys.readouterr()
    listing.main(["--store", store])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    assert [row.split(" | ")[1] for row in rows] == ["dense@v1", "dense@v2"]
    assert rows[1].endswith("| qrels:" + str(ADI / "qrels.tsv") + " | 35 | new index |")
    show.main(["--store", store, "--system", "dense", "--metric", "map"])
    out = capsys.readouterr().out
    estimate = open_store(store).estimates("dense", "map")[-1][1]
    assert out.startswith("dense: map")
    assert (
        f"{estimate.estimate:.4f} [{estimate.low:.4f}, {estimate.high:.4f}] | ppi++ | 35 (12 human-judged) |"
        in out
    )
    show.main(["--store", store, "--system", "dense"])
    assert capsys.readouterr().out.count("dense: ") == len(
        open_store(store).evaluation_estimates(1)
    )
    with pytest.raises(InputError, match=r"dense's evaluations record no ndcg@3 .*map"):
        show.main(["--store", store, "--system", "dense", "--metric", "ndcg@3"])
    with pytest.raises(InputError, match=r"no system 'bm25' \(systems: dense\)"):
        show.main(["--store", store, "--system", "bm25"])


def test_the_history_command_runs_its_subcommands(tmp_path: Path):
    store = tmp_path / "h.sqlite"
    open_store(str(store)).close()

    def history(*args: str) -> subprocess.CompletedProcess[str]:
        return run_command(["history", *args])

    listed = history("list", "--store", str(store))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("| id | system@version | time | labeler | queries | note |")
    unknown = history("gauge")
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert "history: unknown command 'gauge'; expected one of record, list, show" in unknown.stderr
    helped = history("--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: relevance-grader history")
    assert all(f"  {name} " in helped.stdout for name in ("record", "gate", "page"))
    gate = history("gate", "--help")
    assert gate.returncode == 0 and gate.stdout.startswith("usage: relevance-grader history gate")
    assert "--margin" in gate.stdout


@pytest.mark.slow
def test_the_main_job_records_its_metric_stage_once(folder: Path, tmp_path: Path):
    from eval.jobs.pipeline import Pipeline, PipelineConfig, Stage
    from eval.search.settings import SearchEvalConfig

    store = str(tmp_path / "h.sqlite")
    job = Pipeline(PipelineConfig(run_dir=str(tmp_path / "job"), track=store, version="v1"))
    output = folder / "metrics.json"
    stage = Stage("metric pipeline", output, "search", [SearchEvalConfig(k=10)])
    job.record_history(stage)
    job.record_history(stage)  # resumed: the same stage result
    assert [e.ref for e in open_store(store).list_evaluations()] == ["dense@v1"]
    job.record_history(Stage("metric pipeline", output, "search", [SearchEvalConfig(k=5)]))
    assert len(open_store(store).list_evaluations()) == 2  # a new result is a new evaluation


def test_ppi_estimates_from_too_few_judged_queries_are_recorded_as_the_labelers_t():
    """A metrics.json written before the minimum, whose PPI++ estimate came from 2 judged
    queries: the store records the labeler's t interval, as for a folder without judgments."""
    from eval.history.record import _estimates
    from judgments.ppi import estimate_metric
    from measure.metrics.results import SearchMetrics

    labeler = {f"q{i}": 0.1 * (i % 9) for i in range(20)}
    metrics = SearchMetrics(labeler="x", k=10, mean={"run": {"ndcg@10": 0.4, "map": 0.4}})
    two = estimate_metric(labeler, {"q1": 0.2, "q2": 0.3}, bounds=(0.0, 1.0))
    record = {
        "human": "h.qrels",
        "judged_queries": 2,
        "estimator": "PPI++",
        "confidence": 0.95,
        "differences": {},
        "runs": {"run": {m: two.record() for m in ("ndcg@10", "map")}},
    }
    metrics = SearchMetrics.model_validate(metrics.model_dump() | {"ppi": record})
    values = {"ndcg@10": labeler, "map": labeler}
    assert {e.method for e in _estimates(metrics, "run", values, 0.05)} == {"t"}
    record["judged_queries"] = 10
    for entry in record["runs"]["run"].values():
        entry.ppi.n = 10
    metrics = SearchMetrics.model_validate(metrics.model_dump() | {"ppi": record})
    assert {e.method for e in _estimates(metrics, "run", values, 0.05)} == {"ppi++"}
