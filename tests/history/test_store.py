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
from eval.history.store import SCHEMA_VERSION, EvaluationRecord, open_store, store_url
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
    assert store.get(f"id:{first_id}").note == "seed 1"
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


def schema_of(target: str) -> tuple[int | None, int]:
    """(schema_info's version or None without the table, evaluations) as a plain engine reads
    them: what a refused store still holds."""
    engine = sa.create_engine(store_url(target))
    with engine.connect() as conn:
        tables = sa.inspect(conn).get_table_names()
        version = (
            conn.exec_driver_sql("SELECT version FROM schema_info").scalar()
            if "schema_info" in tables
            else None
        )
        count = conn.exec_driver_sql("SELECT COUNT(*) FROM evaluations").scalar()
    engine.dispose()
    return version, count


@pytest.mark.parametrize("write", [True, False], ids=["recorder", "reader"])
def test_an_older_schema_is_refused_in_one_line_and_left_as_it_was(target: str, write: bool):
    store = open_store(target)
    store.record(make_record("dense", "v1", queries=5, seed=4))
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE schema_info SET version = 1")
    store.close()
    with pytest.raises(InputError) as caught:
        open_store(target, write=write)
    message = str(caught.value)
    assert (
        f"has schema version 1, written by a development build before this release's "
        f"{SCHEMA_VERSION}; it is not upgraded: record into a new store" in message
    )
    assert "\n" not in message
    assert schema_of(target) == (1, 1)  # nothing migrated, nothing lost


def test_the_first_layout_without_schema_info_is_refused_too(target: str):
    store = open_store(target)
    store.record(make_record("dense", "v0", queries=5))
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE schema_info")
    store.close()
    for write in (True, False):
        with pytest.raises(InputError, match="has schema version 0, written by a development"):
            open_store(target, write=write)
    assert schema_of(target) == (None, 1)


def test_a_reader_writes_nothing_and_reads_an_immutable_or_read_only_file(tmp_path: Path):
    path = tmp_path / "history.sqlite"
    store = open_store(str(path))
    store.record(make_record("dense", "v1", queries=5))
    store.close()
    before = path.read_bytes()
    for target in (
        f"file:{path}?immutable=1",  # a file nothing may change (a CI artifact, a read-only disk)
        f"file:{path}?mode=ro",
        f"sqlite:///file:{path}?mode=ro&uri=true",
        str(path),  # a plain path: a reader opens it read-only all the same
    ):
        reader = open_store(target, write=False)
        assert [e.ref for e in reader.list_evaluations()] == ["dense@v1"], target
        assert reader.schema_version() == SCHEMA_VERSION
        reader.close()
    assert path.read_bytes() == before


def test_the_list_command_reads_an_immutable_store(tmp_path: Path, capsys):
    from eval.history import listing

    path = tmp_path / "history.sqlite"
    store = open_store(str(path))
    store.record(make_record("dense", "v1", queries=5))
    store.close()
    listing.main(["--store", f"file:{path}?immutable=1"])
    assert "| id:1 | dense@v1 |" in capsys.readouterr().out


def test_a_recorder_refuses_a_store_opened_read_only(tmp_path: Path):
    path = tmp_path / "history.sqlite"
    open_store(str(path)).close()
    for target in (f"file:{path}?immutable=1", f"file:{path}?mode=ro"):
        with pytest.raises(InputError, match=r"opened read-only \((immutable=1|mode=ro)\); record"):
            open_store(target)


@pytest.mark.slow
def test_a_role_that_may_only_read_reads_and_cannot_record(postgres_url: str):  # noqa: F811
    import psycopg

    store = open_store(postgres_url)
    store.record(make_record("dense", "v1", queries=5))
    store.close()
    role = "reader_" + postgres_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
    url = postgres_url.replace("postgres@", f"{role}@")
    reader = open_store(url, write=False)
    assert [e.ref for e in reader.list_evaluations()] == ["dense@v1"]
    reader.close()
    recorder = open_store(url)  # the schema is there: opening writes nothing
    with pytest.raises(InputError, match=rf"{role}@.*: this role may not write it \(permission"):
        recorder.record(make_record("dense", "v2", queries=5))
    recorder.close()


def test_a_reader_refuses_an_empty_database_without_creating_a_store(tmp_path: Path):
    path = tmp_path / "empty.sqlite"
    sa.create_engine(f"sqlite:///{path}").connect().close()  # an empty SQLite file
    path.touch()
    with pytest.raises(InputError, match="holds no evaluation history yet"):
        open_store(str(path), write=False)
    assert path.stat().st_size == 0


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
        open_store(str(tmp_path / "typo.sqlite"), write=False)
    assert not (tmp_path / "typo.sqlite").exists()


def test_a_file_that_is_not_a_database_is_one_line_and_left_as_it_was(tmp_path: Path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    with pytest.raises(
        InputError, match=r"notes\.txt: damaged or not a store \(file is not a database\)"
    ):
        open_store(str(notes))
    assert notes.read_text() == "my notes\n"


def test_a_damaged_store_is_one_line(tmp_path: Path):
    from eval.history import listing

    path = tmp_path / "history.sqlite"
    store = open_store(str(path))
    store.record(make_record("dense", "v1", queries=500))
    store.close()
    damaged = bytearray(path.read_bytes())
    for page in range(1, len(damaged) // 4096):  # every b-tree page's header but the first
        damaged[page * 4096] = 0xFF
    path.write_bytes(bytes(damaged))
    for write in (False, True):
        with pytest.raises(InputError) as caught:
            open_store(str(path), write=write).list_evaluations()
        message = str(caught.value)
        assert "damaged or not a store (database disk image is malformed)" in message
        assert "\n" not in message
    with pytest.raises(InputError, match="database disk image is malformed"):
        listing.main(["--store", str(path)])


def test_an_unsupported_database_url_is_one_line_without_the_password():
    for url in ("mysql://me:s3cret@db.example.com/history", "oracle://me:s3cret@db/history"):
        with pytest.raises(InputError) as caught:
            open_store(url, write=False)
        message = str(caught.value)
        assert "is not supported; give a SQLite file or a postgresql:// URL" in message
        assert "s3cret" not in message


def test_a_name_longer_than_its_column_is_refused_before_anything_is_written(target: str):
    store = open_store(target)
    for record, line in (
        (make_record("dense", "v" * 201), r"version 'v{40}…' is 201 characters long; .* 200"),
        (make_record("d" * 300, "v1"), r"system 'd{40}…' is 300 characters long"),
    ):
        with pytest.raises(InputError, match=line):
            store.record(record)
    assert store.list_evaluations() == []
    store.record(make_record("dense", "v" * 200))  # the longest the column keeps
    assert [len(e.version) for e in store.list_evaluations()] == [200]
    store.close()


def test_an_unknown_evaluation_is_one_line_naming_what_exists(target: str):
    store = open_store(target)
    with pytest.raises(InputError, match="no evaluation dense@v1; the store holds no evaluations"):
        store.get("dense@v1")
    for version in ("v1", "v2"):
        store.record(make_record("dense", version))
    with pytest.raises(InputError) as caught:
        store.get("dense@v9")
    assert "it holds id:2 (dense@v2), id:1 (dense@v1)" in str(caught.value)
    with pytest.raises(InputError, match="no evaluation id:99"):
        store.get("id:99")
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
    read = store.get(f"id:{evaluation_id}").created_at
    assert read == when and read.tzinfo == dt.timezone.utc and read.hour == 10
    store.record(replace(make_record("dense", "v0"), created_at=when - dt.timedelta(days=1)))
    assert [e.version for e in store.list_evaluations()] == ["v0", "v1"]  # time order, not ids
    store.close()
