"""The evaluation history: a store (SQLite file or PostgreSQL database) that remembers every
recorded ``eval.search`` evaluation, its per-query values and its estimates, so that later
evaluations can be compared with earlier ones.

    store = open_store("runs/history.sqlite")           # or "postgresql://user@host/db"
    evaluation_id = store.record(record)                  # one transaction per evaluation
    store.estimates("dense", "ndcg@10")                   # the trend, in time order

The schema carries a version (``schema_info``): an older store is migrated on opening, in one
transaction, by the steps of :data:`MIGRATIONS`; a newer one is refused (this release cannot know
what changed). On SQLite the file runs in WAL mode with a busy timeout, and a write takes the
write lock at its start (``BEGIN IMMEDIATE``), so that two processes recording at once both
succeed, one after the other.
"""

from __future__ import annotations

import datetime as dt
import json
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url

from core.errors import InputError

SCHEMA_VERSION = 2
# Rows per INSERT statement of the per-query values (SQLAlchemy's insertmanyvalues batches).
INSERT_BATCH = 5000
# Any constant: the PostgreSQL advisory lock that serialises opening (creating, migrating) a store.
_SCHEMA_LOCK = 7_405_112

metadata = sa.MetaData()
schema_info = sa.Table("schema_info", metadata, sa.Column("version", sa.Integer, nullable=False))
evaluations = sa.Table(
    "evaluations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("system", sa.String(200), nullable=False, index=True),
    sa.Column("version", sa.String(200), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("note", sa.Text),
    sa.Column("k", sa.Integer, nullable=False),
    sa.Column("labeler", sa.Text, nullable=False),
    sa.Column("labeler_fingerprint", sa.String(64), nullable=False),
    sa.Column("corpus_fingerprint", sa.String(64), nullable=False),
    sa.Column("queries_fingerprint", sa.String(64), nullable=False),
    sa.Column("human_fingerprint", sa.String(64)),
    sa.Column("run_fingerprint", sa.String(64), nullable=False),
    sa.Column("run_name", sa.String(200), nullable=False),
    sa.Column("report_path", sa.Text),
    sa.Column("queries", sa.Integer),  # added in version 1 (see _v0_to_v1)
    sa.Column("search_metrics", sa.Text, nullable=False),  # metrics.json (SearchMetrics)
    sa.Column("run_trec", sa.LargeBinary, nullable=False),  # the run, zlib-compressed TREC text
    # The labeler's label of each hit in the run's top k, zlib-compressed JSON {qid: {doc: label}}
    # (added in version 2): the hits a comparison shows entering or leaving a top k, labelled.
    sa.Column("hit_labels", sa.LargeBinary),
)
query_values = sa.Table(
    "query_values",
    metadata,
    sa.Column(
        "evaluation_id",
        sa.Integer,
        sa.ForeignKey("evaluations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    # The primary key's (evaluation_id, metric, qid) order is the index a comparison reads by.
    sa.Column("metric", sa.String(100), primary_key=True),
    sa.Column("qid", sa.String(200), primary_key=True),
    sa.Column("labeler_value", sa.Float, nullable=False),
    sa.Column("human_value", sa.Float),  # where that query was judged by people
    sqlite_with_rowid=False,  # the rows live in the key's order: no second copy of the key
)
estimates_table = sa.Table(
    "estimates",
    metadata,
    sa.Column(
        "evaluation_id",
        sa.Integer,
        sa.ForeignKey("evaluations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("metric", sa.String(100), primary_key=True),
    sa.Column("method", sa.String(20), nullable=False),  # "ppi++" or "t" (see Estimate)
    sa.Column("labeler_mean", sa.Float, nullable=False),
    sa.Column("estimate", sa.Float, nullable=False),
    sa.Column("low", sa.Float, nullable=False),
    sa.Column("high", sa.Float, nullable=False),
    sa.Column("queries", sa.Integer, nullable=False),
    sa.Column("human_queries", sa.Integer),
)


@dataclass(frozen=True)
class Estimate:
    """One metric of one evaluation: the labeler's mean over its queries and the estimate with
    its interval. ``method`` "ppi++": the PPI++ estimate from ``human_queries`` human-judged
    queries; "t": the labeler's mean with a Student's t interval over the queries."""

    metric: str
    method: str
    labeler_mean: float
    estimate: float
    low: float
    high: float
    queries: int
    human_queries: int | None = None


@dataclass(frozen=True)
class EvaluationRecord:
    """What one recorded evaluation holds (built by :mod:`eval.history.record`)."""

    system: str
    version: str
    k: int
    labeler: str
    labeler_fingerprint: str
    corpus_fingerprint: str
    queries_fingerprint: str
    run_fingerprint: str
    run_name: str
    search_metrics: str  # metrics.json's text
    run_text: str  # the run as TREC text
    labeler_values: Mapping[str, Mapping[str, float]]  # metric -> qid -> value
    estimates: list[Estimate]
    human_values: Mapping[str, Mapping[str, float]] | None = None  # metric -> qid -> value
    human_fingerprint: str | None = None
    hit_labels: Mapping[str, Mapping[str, float]] | None = None  # qid -> doc -> the labeler's label
    report_path: str | None = None
    note: str | None = None
    created_at: dt.datetime | None = None  # now (UTC) when not given


@dataclass(frozen=True)
class EvaluationInfo:
    """One recorded evaluation, without its values: what lists and trends show."""

    id: int
    system: str
    version: str
    created_at: dt.datetime  # UTC
    note: str | None
    k: int
    labeler: str
    labeler_fingerprint: str
    corpus_fingerprint: str
    queries_fingerprint: str
    human_fingerprint: str | None
    run_fingerprint: str
    run_name: str
    report_path: str | None
    queries: int | None

    @property
    def ref(self) -> str:
        return f"{self.system}@{self.version}"


INFO_COLUMNS = [evaluations.c[name] for name in EvaluationInfo.__dataclass_fields__]


def _info(values: dict[str, Any]) -> EvaluationInfo:
    created = values["created_at"]
    # SQLite hands back the naive UTC time it was given; PostgreSQL an aware one.
    values["created_at"] = (
        created.replace(tzinfo=dt.timezone.utc)
        if created.tzinfo is None
        else created.astimezone(dt.timezone.utc)
    )
    return EvaluationInfo(**values)


def _v0_to_v1(conn: Connection) -> None:
    """Version 0 (the first layout, before ``schema_info``) had no ``evaluations.queries``: add
    it and fill it with each evaluation's number of queries from its per-query values."""
    conn.exec_driver_sql("ALTER TABLE evaluations ADD COLUMN queries INTEGER")
    conn.exec_driver_sql(
        "UPDATE evaluations SET queries = (SELECT COUNT(DISTINCT qid) FROM query_values "
        "WHERE query_values.evaluation_id = evaluations.id)"
    )
    schema_info.create(conn)
    conn.execute(schema_info.insert().values(version=0))


def _v1_to_v2(conn: Connection) -> None:
    """Version 2 keeps each hit's label: evaluations recorded before have none (NULL)."""
    blob = "BYTEA" if conn.dialect.name == "postgresql" else "BLOB"
    conn.exec_driver_sql(f"ALTER TABLE evaluations ADD COLUMN hit_labels {blob}")


# MIGRATIONS[v] turns a store of version v into one of version v + 1.
MIGRATIONS: list[Callable[[Connection], None]] = [_v0_to_v1, _v1_to_v2]
assert len(MIGRATIONS) == SCHEMA_VERSION


def store_url(target: str, create: bool = True) -> sa.URL:
    """The SQLAlchemy URL of ``target``: a URL as given (plain ``postgresql://`` with the
    psycopg 3 driver), anything else a SQLite file whose folder must exist (and the file too,
    unless ``create``)."""
    if "://" in target:
        try:
            url = make_url(target)
        except sa.exc.ArgumentError:
            raise InputError(f"store {target}: not a database URL") from None
        if url.drivername in ("postgresql", "postgres"):
            url = url.set(drivername="postgresql+psycopg")
        return url
    path = Path(target).expanduser()
    if not path.parent.is_dir():
        raise InputError(f"store {target}: folder {path.parent} does not exist")
    if not create and not path.exists():
        raise InputError(f"store {target}: no such file (record an evaluation to create it)")
    if path.is_dir():
        raise InputError(f"store {target}: is a folder; give a file (e.g. {path}/history.sqlite)")
    return sa.URL.create("sqlite", database=str(path.resolve()))


def _sqlite_engine(url: sa.URL) -> Engine:
    engine = sa.create_engine(url)

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # SQLAlchemy, not the driver, begins transactions (below), so that a write can BEGIN
        # IMMEDIATE: a deferred one that reads first may be refused the upgrade to a write.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = 60000")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        writes = conn.get_execution_options().get("history_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")

    return engine


def _copy_rows(conn: Connection, rows: list[tuple]) -> None:
    """The per-query values by PostgreSQL's COPY, inside the evaluation's transaction (several
    times as fast as INSERTs: a large evaluation records within the time a caller waits)."""
    names = ", ".join(column.name for column in query_values.columns)
    driver = conn.connection.driver_connection
    assert driver is not None
    with driver.cursor() as cursor, cursor.copy(f"COPY query_values ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def open_store(target: str, create: bool = True) -> HistoryStore:
    """The store at ``target`` (a file path or a SQLAlchemy URL), created (unless not
    ``create``: readers name an existing store) or migrated to :data:`SCHEMA_VERSION` as needed;
    one-line :class:`InputError` when it cannot be."""
    url = store_url(target, create)
    if url.get_backend_name() == "sqlite":
        engine = _sqlite_engine(url)
    else:
        connect_args = {"connect_timeout": 10} if url.get_backend_name() == "postgresql" else {}
        engine = sa.create_engine(url, connect_args=connect_args)
    # Messages name a file as given, a URL without its password.
    name = target if "://" not in target else url.render_as_string(hide_password=True)
    store = HistoryStore(engine, name)
    store.prepare()
    return store


class HistoryStore:
    """Reads and writes one store; see :func:`open_store`."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine = engine
        self.name = name  # the file, or the URL without its password, for messages
        self._writer = engine.execution_options(history_write=True)

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._connected(self._writer) as conn, conn.begin():
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._connected(self.engine) as conn, conn.begin():
            yield conn

    @contextmanager
    def _connected(self, engine: Engine) -> Iterator[Connection]:
        try:
            conn = engine.connect()
        except sa.exc.DatabaseError as exc:  # a server not there, or a file not a database
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
            what = "cannot open" if engine.dialect.name == "sqlite" else "cannot connect"
            raise InputError(f"store {self.name}: {what} ({reason})") from None
        with conn:
            yield conn

    def prepare(self) -> None:
        """Create the tables of a new store, or migrate an older one, in one transaction."""
        with self._write() as conn:
            if conn.dialect.name == "postgresql":  # two processes opening a new store at once
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_SCHEMA_LOCK)))
            tables = set(sa.inspect(conn).get_table_names())
            if "schema_info" in tables:
                version = conn.execute(sa.select(schema_info.c.version)).scalar_one()
            elif "evaluations" in tables:
                version = 0
            else:
                metadata.create_all(conn)
                conn.execute(schema_info.insert().values(version=SCHEMA_VERSION))
                return
            if version > SCHEMA_VERSION:
                raise InputError(
                    f"store {self.name} has schema version {version}; this release reads up to "
                    f"{SCHEMA_VERSION}: upgrade relevance-grader"
                )
            for step in MIGRATIONS[version:]:
                step(conn)
            conn.execute(schema_info.update().values(version=SCHEMA_VERSION))

    def schema_version(self) -> int:
        with self._read() as conn:
            return conn.execute(sa.select(schema_info.c.version)).scalar_one()

    # Writing.

    def record(self, record: EvaluationRecord) -> int:
        """Store one evaluation, all of it or (on any failure) nothing; its id."""
        created = record.created_at or dt.datetime.now(dt.timezone.utc)
        if created.tzinfo is None:
            raise ValueError("created_at: give a time with its time zone")
        created = created.astimezone(dt.timezone.utc)
        row = {
            name: getattr(record, name)
            for name in EvaluationInfo.__dataclass_fields__
            if name not in ("id", "created_at", "queries")
        }
        row |= {
            # SQLite keeps no time zone: a naive UTC time there; PostgreSQL's timestamptz
            # takes the zone and would otherwise read a naive time in the session's.
            "created_at": created.replace(tzinfo=None)
            if self.engine.dialect.name == "sqlite"
            else created,
            "queries": len({qid for values in record.labeler_values.values() for qid in values}),
            "search_metrics": record.search_metrics,
            "run_trec": zlib.compress(record.run_text.encode("utf-8"), 6),
            "hit_labels": None
            if record.hit_labels is None
            else zlib.compress(json.dumps(record.hit_labels, sort_keys=True).encode("utf-8"), 6),
        }
        with self._write() as conn:
            evaluation_id = conn.execute(
                evaluations.insert().values(**row).returning(evaluations.c.id)
            ).scalar_one()
            self._insert_values(conn, evaluation_id, record)
            self._insert_estimates(conn, evaluation_id, record.estimates)
        return evaluation_id

    def _insert_values(
        self, conn: Connection, evaluation_id: int, record: EvaluationRecord
    ) -> None:
        human = record.human_values or {}
        rows = [
            (evaluation_id, metric, qid, value, human.get(metric, {}).get(qid))
            for metric, values in record.labeler_values.items()
            for qid, value in values.items()
        ]
        if conn.dialect.name == "postgresql":
            _copy_rows(conn, rows)
            return
        names = [column.name for column in query_values.columns]
        for start in range(0, len(rows), INSERT_BATCH):
            batch = [
                dict(zip(names, row, strict=True)) for row in rows[start : start + INSERT_BATCH]
            ]
            conn.execute(query_values.insert(), batch)

    def _insert_estimates(
        self, conn: Connection, evaluation_id: int, estimates: list[Estimate]
    ) -> None:
        if estimates:
            rows = [{"evaluation_id": evaluation_id, **vars(e)} for e in estimates]
            conn.execute(estimates_table.insert(), rows)

    # Reading.

    def list_evaluations(self, system: str | None = None) -> list[EvaluationInfo]:
        """Every evaluation (of ``system``), oldest first."""
        query = sa.select(*INFO_COLUMNS).order_by(evaluations.c.created_at, evaluations.c.id)
        if system is not None:
            query = query.where(evaluations.c.system == system)
        with self._read() as conn:
            return [_info(row._asdict()) for row in conn.execute(query)]

    def systems(self) -> list[str]:
        with self._read() as conn:
            query = sa.select(evaluations.c.system).distinct().order_by(evaluations.c.system)
            return list(conn.execute(query).scalars())

    def get(self, ref: str) -> EvaluationInfo:
        """The evaluation ``ref`` names: an id ("12") or "system@version" (that version's latest
        evaluation); one line listing some that exist when none matches."""
        query = sa.select(*INFO_COLUMNS)
        if ref.strip().isdigit():
            query = query.where(evaluations.c.id == int(ref))
        else:
            system, at, version = ref.partition("@")
            if not at:
                raise InputError(f"evaluation {ref!r}: expected an id or SYSTEM@VERSION")
            query = query.where(evaluations.c.system == system, evaluations.c.version == version)
        query = query.order_by(evaluations.c.created_at.desc(), evaluations.c.id.desc()).limit(1)
        with self._read() as conn:
            row = conn.execute(query).first()
        if row is None:
            raise InputError(f"store {self.name}: no evaluation {ref}; {self._some()}")
        return _info(row._asdict())

    def _some(self, shown: int = 5) -> str:
        """A few existing evaluations, newest first, for an error message."""
        query = (
            sa.select(evaluations.c.id, evaluations.c.system, evaluations.c.version)
            .order_by(evaluations.c.created_at.desc(), evaluations.c.id.desc())
            .limit(shown + 1)
        )
        with self._read() as conn:
            rows = conn.execute(query).all()
        if not rows:
            return "the store holds no evaluations yet"
        named = ", ".join(f"{r.id} ({r.system}@{r.version})" for r in rows[:shown])
        return f"it holds {named}{', ...' if len(rows) > shown else ''}"

    def query_values(
        self, evaluation_id: int, metric: str
    ) -> dict[str, tuple[float, float | None]]:
        """{qid: (labeler value, human value or None)} of one evaluation's metric."""
        query = sa.select(
            query_values.c.qid, query_values.c.labeler_value, query_values.c.human_value
        ).where(query_values.c.evaluation_id == evaluation_id, query_values.c.metric == metric)
        with self._read() as conn:
            return {qid: (labeler, human) for qid, labeler, human in conn.execute(query)}

    def evaluation_estimates(self, evaluation_id: int) -> list[Estimate]:
        """Every metric's estimate of one evaluation, by metric name."""
        query = (
            sa.select(*(estimates_table.c[name] for name in Estimate.__dataclass_fields__))
            .where(estimates_table.c.evaluation_id == evaluation_id)
            .order_by(estimates_table.c.metric)
        )
        with self._read() as conn:
            return [Estimate(**row._asdict()) for row in conn.execute(query)]

    def estimates(self, system: str, metric: str) -> list[tuple[EvaluationInfo, Estimate]]:
        """The trend: ``metric``'s estimate in each evaluation of ``system``, oldest first."""
        estimate_columns = [
            estimates_table.c[name].label(f"e_{name}") for name in Estimate.__dataclass_fields__
        ]
        query = (
            sa.select(*INFO_COLUMNS, *estimate_columns)
            .join(estimates_table, estimates_table.c.evaluation_id == evaluations.c.id)
            .where(evaluations.c.system == system, estimates_table.c.metric == metric)
            .order_by(evaluations.c.created_at, evaluations.c.id)
        )
        out = []
        with self._read() as conn:
            for row in conn.execute(query):
                values = row._asdict()
                fields = Estimate.__dataclass_fields__
                estimate = Estimate(**{name: values.pop(f"e_{name}") for name in fields})
                out.append((_info(values), estimate))
        return out

    def metrics(self, evaluation_id: int) -> str:
        """The evaluation's metrics.json text (``SearchMetrics``)."""
        return self._column(evaluations.c.search_metrics, evaluation_id)

    def run_text(self, evaluation_id: int) -> str:
        """The evaluated run as TREC text, as it was recorded."""
        return zlib.decompress(self._column(evaluations.c.run_trec, evaluation_id)).decode("utf-8")

    def hit_labels(self, evaluation_id: int) -> dict[str, dict[str, float]]:
        """{qid: {doc: the labeler's label}} of the run's top k hits; empty for an evaluation
        recorded without them (before schema version 2)."""
        self._column(evaluations.c.id, evaluation_id)  # an unknown id is one line
        with self._read() as conn:
            blob = conn.execute(
                sa.select(evaluations.c.hit_labels).where(evaluations.c.id == evaluation_id)
            ).scalar_one()
        return {} if blob is None else json.loads(zlib.decompress(blob).decode("utf-8"))

    def _column(self, column: sa.Column, evaluation_id: int) -> Any:
        with self._read() as conn:
            value = conn.execute(
                sa.select(column).where(evaluations.c.id == evaluation_id)
            ).scalar_one_or_none()
        if value is None:
            raise InputError(f"store {self.name}: no evaluation {evaluation_id}; {self._some()}")
        return value

    def close(self) -> None:
        self.engine.dispose()
