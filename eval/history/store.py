"""The evaluation history: a store (SQLite file or PostgreSQL database) that remembers every
recorded ``eval.search`` evaluation, its per-query values and its estimates, so that later
evaluations can be compared with earlier ones.

    store = open_store("runs/history.sqlite")           # or "postgresql://user@host/db"
    evaluation_id = store.record(record)                  # one transaction per evaluation
    reader = open_store("runs/history.sqlite", write=False)
    reader.estimates("dense", "ndcg@10")                  # the trend, in time order

Reading never writes: a reader's store is opened read-only (a SQLite file with ``mode=ro``, a
PostgreSQL transaction ``READ ONLY``), so that an immutable file (``file:PATH?immutable=1``), a
CI artifact or a role that may only read can be read. Only a recorder (``write=True``) creates
the tables of a new store. The schema carries a version (``schema_info``); nothing has been
released, so there is no upgrade: a store of any other version is refused in one line, by
readers and recorders alike. On SQLite the file runs in WAL mode with a busy timeout, and a
write takes the write lock at its start (``BEGIN IMMEDIATE``), so that two processes recording
at once both succeed, one after the other.
"""

from __future__ import annotations

import datetime as dt
import json
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url

from core.errors import InputError
from eval.history.names import NAME_LENGTH, check_recordable, id_ref, name_problem, parse_id, shown

SCHEMA_VERSION = 2
# Rows per INSERT statement of the per-query values (SQLAlchemy's insertmanyvalues batches).
INSERT_BATCH = 5000
# Any constant: the PostgreSQL advisory lock that serialises creating a store.
_SCHEMA_LOCK = 7_405_112

metadata = sa.MetaData()
schema_info = sa.Table("schema_info", metadata, sa.Column("version", sa.Integer, nullable=False))
evaluations = sa.Table(
    "evaluations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("system", sa.String(NAME_LENGTH), nullable=False, index=True),
    sa.Column("version", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("note", sa.Text),
    sa.Column("k", sa.Integer, nullable=False),
    sa.Column("labeler", sa.Text, nullable=False),
    sa.Column("labeler_fingerprint", sa.String(64), nullable=False),
    sa.Column("corpus_fingerprint", sa.String(64), nullable=False),
    sa.Column("queries_fingerprint", sa.String(64), nullable=False),
    sa.Column("human_fingerprint", sa.String(64)),
    sa.Column("run_fingerprint", sa.String(64), nullable=False),
    sa.Column("run_name", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("report_path", sa.Text),
    sa.Column("queries", sa.Integer),
    sa.Column("search_metrics", sa.Text, nullable=False),  # metrics.json (SearchMetrics)
    sa.Column("run_trec", sa.LargeBinary, nullable=False),  # the run, zlib-compressed TREC text
    # The labeler's label of each hit in the run's top k, zlib-compressed JSON {qid: {doc: label}}
    # (NULL when recorded without them): the hits a comparison shows entering or leaving a top k.
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
    sa.Column("qid", sa.String(NAME_LENGTH), primary_key=True),
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

    @property
    def id_ref(self) -> str:
        """The evaluation's id as commands take it (``id:N``)."""
        return id_ref(self.id)


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


# The --store flag of the commands that read (opened read-only: they write nothing).
READER_STORE_HELP = (
    "The store, opened read-only: a SQLite file (file:PATH?immutable=1 for one nobody may "
    "write) or a postgresql:// URL."
)
# SQLite URI parameters that open a file read-only: a recorder cannot use them.
READ_ONLY_PARAMETERS = (("mode", "ro"), ("immutable", "1"))


def store_url(target: str, write: bool = True) -> sa.URL:
    """The SQLAlchemy URL of ``target``: a ``postgresql://`` URL (with the psycopg 3 driver), a
    ``sqlite:///PATH`` URL, a SQLite URI filename (``file:PATH?immutable=1``) or a SQLite file
    path. A SQLite file's folder must exist, and the file too unless ``write``; a reader's file
    is opened read-only. Any other database is refused in one line."""
    if target.startswith("file:"):
        return _sqlite_uri(target, target, write)
    if "://" not in target:
        return _sqlite_file(target, target, write)
    try:
        url = make_url(target)
    except sa.exc.ArgumentError:
        raise InputError(f"store {target}: not a database URL") from None
    backend = url.get_backend_name()
    if backend == "postgresql":
        return url.set(drivername="postgresql+psycopg")
    if backend != "sqlite":
        raise InputError(
            f"store {url.render_as_string(hide_password=True)}: {backend} is not supported; give "
            "a SQLite file or a postgresql:// URL"
        )
    if not url.database:
        raise InputError(f"store {target}: give a file (sqlite:///PATH); memory keeps nothing")
    query = {key: value for key, value in url.query.items() if key != "uri"}
    if url.database.startswith("file:"):
        return _sqlite_uri(target, f"{url.database}?{urlencode(query)}", write)
    return _sqlite_file(target, url.database, write)


def _sqlite_file(
    target: str, path_text: str, write: bool, parameters: dict[str, str] | None = None
) -> sa.URL:
    path = Path(unquote(path_text)).expanduser()
    if not path.parent.is_dir():
        raise InputError(f"store {target}: folder {path.parent} does not exist")
    if not write and not path.exists():
        raise InputError(f"store {target}: no such file (record an evaluation to create it)")
    if path.is_dir():
        raise InputError(f"store {target}: is a folder; give a file (e.g. {path}/history.sqlite)")
    parameters = dict(parameters or {})
    if write:
        if refused := [f"{k}={v}" for k, v in READ_ONLY_PARAMETERS if parameters.get(k) == v]:
            raise InputError(
                f"store {target}: opened read-only ({refused[0]}); record into a store that "
                "may be written"
            )
        if not parameters:
            return sa.URL.create("sqlite", database=str(path.resolve()))
    elif parameters.get("immutable") != "1":
        parameters["mode"] = "ro"  # a reader never writes, whatever the URI said
    uri = f"file:{quote(str(path.resolve()))}?{urlencode(parameters)}"
    return sa.URL.create("sqlite", database=uri, query={"uri": "true"})


def _sqlite_uri(target: str, uri: str, write: bool) -> sa.URL:
    """A SQLite URI filename (``file:PATH?PARAMETERS``, ``file:///PATH``) as a URL."""
    path, _, query = uri[len("file:") :].partition("#")[0].partition("?")
    if path.startswith("//"):  # file://HOST/PATH: only the local machine
        host, slash, rest = path[2:].partition("/")
        if host not in ("", "localhost"):
            raise InputError(f"store {target}: a file URI names this machine's files only")
        path = slash + rest
    return _sqlite_file(target, path, write, dict(parse_qsl(query)))


def _sqlite_engine(url: sa.URL, write: bool) -> Engine:
    engine = sa.create_engine(url)

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # SQLAlchemy, not the driver, begins transactions (below), so that a write can BEGIN
        # IMMEDIATE: a deferred one that reads first may be refused the upgrade to a write.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = 60000")
        if write:  # setting the journal mode writes the file: a reader leaves it as it is
            cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        writes = conn.get_execution_options().get("history_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")

    return engine


def _server_engine(url: sa.URL) -> Engine:
    try:
        return sa.create_engine(url, connect_args={"connect_timeout": 10})
    except ImportError:
        raise InputError(
            "store: a PostgreSQL store needs psycopg: pip install relevance-grader[postgres]"
        ) from None


def _copy_rows(conn: Connection, rows: list[tuple]) -> None:
    """The per-query values by PostgreSQL's COPY, inside the evaluation's transaction (several
    times as fast as INSERTs: a large evaluation records within the time a caller waits)."""
    names = ", ".join(column.name for column in query_values.columns)
    driver = conn.connection.driver_connection
    assert driver is not None
    with driver.cursor() as cursor, cursor.copy(f"COPY query_values ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def open_store(target: str, write: bool = True) -> HistoryStore:
    """The store at ``target`` (see :func:`store_url`). ``write``: a recorder's, whose tables
    are created when the store is new; otherwise a reader's, opened read-only, which writes
    nothing (not even to check the schema). Either refuses a schema of another version, a
    damaged file or a server out of reach in one line (:class:`InputError`)."""
    url = store_url(target, write)
    sqlite = url.get_backend_name() == "sqlite"
    engine = _sqlite_engine(url, write) if sqlite else _server_engine(url)
    # Messages name a file as given, a URL without its password.
    name = target if "://" not in target else url.render_as_string(hide_password=True)
    store = HistoryStore(engine, name, write)
    if write:
        store.prepare()
    else:
        store.check_schema()
    return store


def fault(exc: sa.exc.DBAPIError, store: str, write: bool) -> str | None:
    """The one line of a database error that is the store's state, not a bug: a damaged or
    foreign file, a file or role that may not be written or read, a server out of reach. None
    for any other error (a bug: its traceback shows)."""
    orig = exc.orig
    reason = str(orig).strip().splitlines()[0] if orig else type(exc).__name__
    code = getattr(orig, "sqlite_errorname", None)
    if code in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
        return f"store {store}: damaged or not a store ({reason}); restore it from a copy"
    if code is not None and code.startswith("SQLITE_READONLY"):
        return f"store {store}: cannot be written ({reason}); record into a store that may be"
    if code is not None and code.startswith("SQLITE_CANTOPEN"):
        hint = (
            "" if write else "; a file in a folder nobody may write reads as file:PATH?immutable=1"
        )
        return f"store {store}: cannot open ({reason}){hint}"
    state = getattr(orig, "sqlstate", None) or ""
    if state == "42501":  # insufficient_privilege
        what = "write" if write else "read"
        return f"store {store}: this role may not {what} it ({reason})"
    # A connection exception, or the driver's failure to reach the server (it has no code).
    reached = state or code or not isinstance(exc, sa.exc.OperationalError)
    if state.startswith("08") or not reached:
        return f"store {store}: cannot connect ({reason})"
    return None


class HistoryStore:
    """Reads (and, opened to write, records into) one store; see :func:`open_store`."""

    def __init__(self, engine: Engine, name: str, write: bool = True) -> None:
        self.engine = engine
        self.name = name  # the file, or the URL without its password, for messages
        self.writable = write
        self._writer = engine.execution_options(history_write=True)
        # A reader's PostgreSQL transactions are READ ONLY: the server refuses any write.
        self._reader = engine if write else engine.execution_options(postgresql_readonly=True)

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        assert self.writable, "a store opened to read is not written"
        with self._connected(self._writer) as conn, conn.begin():
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._connected(self._reader) as conn, conn.begin():
            yield conn

    @contextmanager
    def _connected(self, engine: Engine) -> Iterator[Connection]:
        try:
            conn = engine.connect()
        except sa.exc.DBAPIError as exc:  # a server not there, or a file not a database
            raise InputError(self._fault(exc)) from None
        with conn:
            try:
                yield conn
            except sa.exc.DBAPIError as exc:  # a damaged file, a role that may not write...
                if (line := fault(exc, self.name, self.writable)) is None:
                    raise
                raise InputError(line) from None

    def _fault(self, exc: sa.exc.DBAPIError) -> str:
        if line := fault(exc, self.name, self.writable):
            return line
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        what = "cannot open" if self.engine.dialect.name == "sqlite" else "cannot connect"
        return f"store {self.name}: {what} ({reason})"

    def prepare(self) -> None:
        """A recorder's opening: the tables of a new store created (in one transaction), an
        existing store's schema version checked; nothing else is written."""
        with self._write() as conn:
            if conn.dialect.name == "postgresql":  # two processes creating a new store at once
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_SCHEMA_LOCK)))
            tables = set(sa.inspect(conn).get_table_names())
            if "schema_info" not in tables and "evaluations" not in tables:
                metadata.create_all(conn)
                conn.execute(schema_info.insert().values(version=SCHEMA_VERSION))
                return
            version = self._version(conn, tables)
        self._check_version(version)

    def check_schema(self) -> None:
        """A reader's opening: the schema version read (never written) and checked."""
        with self._read() as conn:
            tables = set(sa.inspect(conn).get_table_names())
            if "schema_info" not in tables and "evaluations" not in tables:
                raise InputError(
                    f"store {self.name}: holds no evaluation history yet (record an evaluation "
                    "to create it)"
                )
            version = self._version(conn, tables)
        self._check_version(version)

    @staticmethod
    def _version(conn: Connection, tables: set[str]) -> int | None:
        if "schema_info" not in tables:
            return 0  # the first development layout had no schema_info
        return conn.execute(sa.select(schema_info.c.version)).scalar_one_or_none()

    def _check_version(self, version: int | None) -> None:
        if version == SCHEMA_VERSION:
            return
        if version is None:
            raise InputError(f"store {self.name}: its schema_info holds no version; not a store")
        if version > SCHEMA_VERSION:
            raise InputError(
                f"store {self.name} has schema version {version}; this release reads up to "
                f"{SCHEMA_VERSION}: upgrade relevance-grader"
            )
        raise InputError(
            f"store {self.name} has schema version {version}, written by a development build "
            f"before this release's {SCHEMA_VERSION}; it is not upgraded: record into a new store"
        )

    def schema_version(self) -> int:
        with self._read() as conn:
            return conn.execute(sa.select(schema_info.c.version)).scalar_one()

    # Writing.

    def record(self, record: EvaluationRecord) -> int:
        """Store one evaluation, all of it or (on any failure) nothing; its id. A name that
        could not be named back, or is longer than its column, is refused in one line."""
        qids = {qid for values in record.labeler_values.values() for qid in values}
        check_recordable(
            record.system,
            record.version,
            record.run_name,
            qids,
            system_source="record",
            version_source="record",
            run_source="record",
        )
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
            "queries": len(qids),
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
        """The evaluation ``ref`` names: ``id:N`` (by its id) or ``SYSTEM@VERSION`` (that
        version's latest evaluation, whatever the version looks like); one line listing some
        that exist when none matches."""
        evaluation_id = parse_id(ref)
        if evaluation_id is not None:
            return self._latest(evaluations.c.id == evaluation_id, ref)
        system, at, version = ref.partition("@")
        if not (at and system and version):
            hint = f" (evaluation id {ref}: give id:{ref})" if ref.isdigit() else ""
            raise InputError(
                f"evaluation {ref!r}: expected id:N (an evaluation's id) or SYSTEM@VERSION{hint}"
            )
        return self.version(system, version)

    def version(self, system: str, version: str) -> EvaluationInfo:
        """The latest evaluation of ``version`` of ``system``; a system no evaluation can be of
        (``my@sys``) is one line saying why."""
        if problem := name_problem(system, "system"):
            raise InputError(f"system {shown(system)} {problem}: no evaluation can be of it")
        hint = f"; an evaluation's id is written id:{version}" if version.isdigit() else ""
        condition = sa.and_(evaluations.c.system == system, evaluations.c.version == version)
        return self._latest(condition, f"{system}@{version}", hint)

    def has_version(self, system: str, version: str) -> bool:
        query = sa.select(evaluations.c.id).where(
            evaluations.c.system == system, evaluations.c.version == version
        )
        with self._read() as conn:
            return conn.execute(query.limit(1)).first() is not None

    def _latest(self, condition: Any, ref: str, hint: str = "") -> EvaluationInfo:
        query = (
            sa.select(*INFO_COLUMNS)
            .where(condition)
            .order_by(evaluations.c.created_at.desc(), evaluations.c.id.desc())
            .limit(1)
        )
        with self._read() as conn:
            row = conn.execute(query).first()
        if row is None:
            raise InputError(f"store {self.name}: no evaluation {ref}; {self._some()}{hint}")
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
        named = ", ".join(f"{id_ref(r.id)} ({r.system}@{r.version})" for r in rows[:shown])
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
        recorded without them."""
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
            raise InputError(
                f"store {self.name}: no evaluation {id_ref(evaluation_id)}; {self._some()}"
            )
        return value

    def close(self) -> None:
        self.engine.dispose()
