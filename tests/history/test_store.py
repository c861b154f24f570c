"""The evaluation history store on SQLite and on a real PostgreSQL server (the same tests):
recording and reading back, two writers at once, a write killed midway, schema versions,
unreachable stores and unknown evaluations."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from core.errors import InputError
from eval.history.record import t_estimate
from eval.history.store import SCHEMA_VERSION, EvaluationRecord, open_store
from support.postgres import free_port
from tests.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures

REPO = Path(__file__).resolve().parents[2]
METRICS = ("ndcg@10", "map", "mrr")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store's target on each backend: a SQLite file, a PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    return request.getfixturevalue("postgres_url")


def make_record(
    system: str, version: str, queries: int = 50, seed: int = 0, judged: int = 0
) -> EvaluationRecord:
    """A synthetic evaluation: random per-query values, ``judged`` of the queries with human
    values, t estimates, a run of ``queries`` lines."""
    rng = np.random.default_rng(seed)
    qids = [f"q{i}" for i in range(queries)]
    values = {
        m: {q: float(v) for q, v in zip(qids, rng.random(queries), strict=True)} for m in METRICS
    }
    human = {m: {q: float(rng.random()) for q in qids[:judged]} for m in METRICS}
    return EvaluationRecord(
        system=system,
        version=version,
        k=10,
        labeler="qrels:q.tsv",
        labeler_fingerprint="a" * 64,
        corpus_fingerprint="b" * 64,
        queries_fingerprint="c" * 64,
        run_fingerprint=f"{seed:064d}",
        run_name=system,
        search_metrics='{"labeler": "qrels:q.tsv", "k": 10, "mean": {}}',
        run_text="".join(f"{q} Q0 d{seed} 1 1.5 {system}\n" for q in qids),
        labeler_values=values,
        human_values=human if judged else None,
        estimates=[t_estimate(m, list(values[m].values()), 0.05) for m in METRICS],
        note=f"seed {seed}",
    )


def test_an_evaluation_reads_back_as_recorded(target: str):
    store = open_store(target)
    first = make_record("dense", "v1", seed=1, judged=5)
    first_id = store.record(first)
    later_id = store.record(make_record("dense", "v1", seed=2))  # the same version again
    store.record(make_record("bm25", "v1", seed=3))
    values = store.query_values(first_id, "map")
    assert values == {
        q: (v, first.human_values["map"].get(q) if first.human_values else None)
        for q, v in first.labeler_values["map"].items()
    }
    assert sum(human is not None for _, human in values.values()) == 5
    assert store.run_text(first_id) == first.run_text
    assert store.get(str(first_id)).note == "seed 1"
    assert store.get("dense@v1").id == later_id  # the version's latest evaluation
    assert store.get("dense@v1").queries == 50
    assert store.systems() == ["bm25", "dense"]
    assert [e.id for e in store.list_evaluations("dense")] == [first_id, later_id]
    trend = store.estimates("dense", "ndcg@10")
    assert [info.id for info, _ in trend] == [first_id, later_id]
    mean = float(np.mean(list(first.labeler_values["ndcg@10"].values())))
    estimate = trend[0][1]
    assert estimate.method == "t" and estimate.estimate == pytest.approx(mean)
    assert estimate.low < mean < estimate.high and estimate.queries == 50
    assert trend[0][0].created_at.tzinfo == dt.timezone.utc
    store.close()


def test_the_store_refuses_a_newer_schema_in_one_line(target: str):
    open_store(target).close()
    engine = sa.create_engine(open_store(target).engine.url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE schema_info SET version = {SCHEMA_VERSION + 1}")
    engine.dispose()
    with pytest.raises(InputError) as caught:
        open_store(target)
    message = str(caught.value)
    assert (
        f"has schema version {SCHEMA_VERSION + 1}; this release reads up to {SCHEMA_VERSION}: "
        "upgrade relevance-grader" in message
    )
    assert "\n" not in message


def test_a_version_0_store_is_migrated_and_keeps_its_data(target: str):
    store = open_store(target)
    kept = store.record(make_record("dense", "v0", queries=30, seed=4))
    # Version 0: no schema_info, no evaluations.queries (nor version 2's hit labels).
    with store.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE evaluations DROP COLUMN queries")
        conn.exec_driver_sql("ALTER TABLE evaluations DROP COLUMN hit_labels")
        conn.exec_driver_sql("DROP TABLE schema_info")
    store.close()
    migrated = open_store(target)
    assert migrated.schema_version() == SCHEMA_VERSION
    assert migrated.get(str(kept)).queries == 30  # filled from the per-query values
    assert len(migrated.query_values(kept, "mrr")) == 30
    migrated.record(make_record("dense", "v1", seed=5))
    assert len(migrated.list_evaluations()) == 2
    migrated.close()


def test_a_version_1_store_gains_hit_labels_and_keeps_its_evaluations(target: str):
    store = open_store(target)
    kept = store.record(make_record("dense", "v1", queries=5, seed=4))
    with store.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE evaluations DROP COLUMN hit_labels")
        conn.exec_driver_sql("UPDATE schema_info SET version = 1")
    store.close()
    migrated = open_store(target)
    assert migrated.schema_version() == SCHEMA_VERSION
    assert migrated.hit_labels(kept) == {}  # recorded before labels were kept
    labels = {"q0": {"d4": 3.0, "d9": 0.0}}
    later = migrated.record(replace(make_record("dense", "v2", seed=5), hit_labels=labels))
    assert migrated.hit_labels(later) == labels
    assert len(migrated.query_values(kept, "mrr")) == 5
    migrated.close()


def test_an_unreachable_url_is_one_line_without_the_password():
    port = free_port()  # nothing listens there
    with pytest.raises(InputError) as caught:
        open_store(f"postgresql://me:s3cret@127.0.0.1:{port}/history")
    message = str(caught.value)
    assert f"postgresql+psycopg://me:***@127.0.0.1:{port}/history" in message
    assert "s3cret" not in message and "\n" not in message and "cannot connect" in message


def test_a_file_in_a_missing_folder_is_one_line(tmp_path: Path):
    with pytest.raises(InputError, match=r"folder .*nowhere does not exist"):
        open_store(str(tmp_path / "nowhere" / "history.sqlite"))


def test_a_reader_does_not_create_a_store_it_is_given_by_mistake(tmp_path: Path):
    with pytest.raises(InputError, match=r"typo\.sqlite: no such file"):
        open_store(str(tmp_path / "typo.sqlite"), create=False)
    assert not (tmp_path / "typo.sqlite").exists()


def test_a_file_that_is_not_a_database_is_one_line_and_left_as_it_was(tmp_path: Path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    with pytest.raises(InputError, match=r"notes\.txt: cannot open \(file is not a database\)"):
        open_store(str(notes))
    assert notes.read_text() == "my notes\n"


def test_an_unknown_evaluation_is_one_line_naming_what_exists(target: str):
    store = open_store(target)
    with pytest.raises(InputError, match="no evaluation dense@v1; the store holds no evaluations"):
        store.get("dense@v1")
    for version in ("v1", "v2"):
        store.record(make_record("dense", version))
    with pytest.raises(InputError) as caught:
        store.get("dense@v9")
    assert "it holds 2 (dense@v2), 1 (dense@v1)" in str(caught.value)
    with pytest.raises(InputError, match="no evaluation 99"):
        store.get("99")
    store.close()


def test_a_failure_midway_leaves_nothing_half_written(target: str, monkeypatch):
    store = open_store(target)
    kept = store.record(make_record("dense", "v1", seed=1))

    def fail(*args, **kwargs):
        raise RuntimeError("injected after the per-query values")

    monkeypatch.setattr(type(store), "_insert_estimates", fail)
    with pytest.raises(RuntimeError, match="injected"):
        store.record(make_record("dense", "v2", seed=2))
    monkeypatch.undo()
    assert [e.id for e in store.list_evaluations()] == [kept]
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM query_values").scalar() == 50 * 3
    store.close()


# A process recording one evaluation, stopped inside its transaction (after the per-query values,
# before the estimates) until it is killed.
KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    from eval.history.store import HistoryStore, open_store
    from tests.history.test_store import make_record

    def hang(*args, **kwargs):
        print("inside", flush=True)
        time.sleep(120)

    HistoryStore._insert_estimates = hang
    open_store(sys.argv[1]).record(make_record("dense", "killed", queries=2000, seed=9))
    """
)


@pytest.mark.slow
def test_a_writer_killed_midway_leaves_the_store_intact(target: str):
    store = open_store(target)
    kept = store.record(make_record("dense", "v1", seed=1))
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, target], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "inside"
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    store.close()
    reopened = open_store(target)
    assert [e.id for e in reopened.list_evaluations()] == [kept]
    with reopened.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM query_values").scalar() == 50 * 3
    reopened.record(make_record("dense", "v2", seed=2))  # and it takes writes again
    assert len(reopened.list_evaluations()) == 2
    reopened.close()


WRITER = textwrap.dedent(
    """
    import sys
    from eval.history.store import open_store
    from tests.history.test_store import make_record

    store = open_store(sys.argv[1])
    for i in range(4):
        store.record(make_record(sys.argv[2], f"v{i}", queries=3000, seed=i))
    """
)


@pytest.mark.slow
def test_two_processes_recording_at_once_both_succeed(target: str):
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, target, system],
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
        )
        for system in ("dense", "bm25")
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err[-2000:]
    store = open_store(target)
    found = store.list_evaluations()
    assert sorted(e.ref for e in found) == sorted(
        f"{s}@v{i}" for s in ("dense", "bm25") for i in range(4)
    )
    assert all(len(store.query_values(e.id, "ndcg@10")) == 3000 for e in found)
    assert all(len(store.estimates(s, "map")) == 4 for s in ("dense", "bm25"))
    store.close()


def test_the_time_of_an_evaluation_reads_back_as_the_same_instant_in_utc(target: str):
    store = open_store(target)
    elsewhere = dt.timezone(dt.timedelta(hours=2))
    when = dt.datetime(2026, 3, 1, 12, 30, 15, tzinfo=elsewhere)
    evaluation_id = store.record(replace(make_record("dense", "v1"), created_at=when))
    read = store.get(str(evaluation_id)).created_at
    assert read == when and read.tzinfo == dt.timezone.utc and read.hour == 10
    store.record(replace(make_record("dense", "v0"), created_at=when - dt.timedelta(days=1)))
    assert [e.version for e in store.list_evaluations()] == ["v0", "v1"]  # time order, not ids
    store.close()
