"""The results database: SQLAlchemy Core over SQLite (default) or PostgreSQL.

Where: ``--db URL``, else ``$IOLAB_DB`` (a URL or a file path), else
``$XDG_DATA_HOME/iolab/iolab.db`` (``~/.local/share/iolab/iolab.db``). The schema is created and
upgraded by Alembic migrations (``store/migrations``) when the store is opened; the table
definitions below mirror them for queries (a test checks they agree).

Every write is its own transaction, committed before the call returns: a result is durable
the moment its job ends, so a killed run loses at most the job in flight. Every call goes through
``Store.guard`` (``dbfaults.Guard``): a database that is away (restarting, locked, full) is waited for,
up to a bound, and its errors become one-line ``StoreError``s without SQL text.
"""

from __future__ import annotations

import functools
import json
import os
import struct
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import orjson
import pydantic
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..errors import StoreError, UsageError
from ..facts.owner import effective_status
from ..fio import validate
from ..model import (
    FioReport,
    HostFacts,
    HostSamples,
    ResultRecord,
    Run,
    RunInfo,
    TargetFacts,
    TimeSeries,
    from_jsonable,
    to_json_text,
    to_jsonable,
)
from . import faults as dbfaults

T = TypeVar("T")
metadata = sa.MetaData()

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("finished_at", sa.DateTime(timezone=True)),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("origin", sa.String(20), nullable=False),
    sa.Column("suite_name", sa.String(200), nullable=False),
    sa.Column("suite_text", sa.Text, nullable=False, server_default=""),
    sa.Column("label", sa.String(200), index=True),
    sa.Column("fio_version", sa.String(40)),
    sa.Column("host", sa.JSON),
    sa.Column("warnings", sa.JSON),
    sa.Column("source", sa.JSON),
    sa.Column("options", sa.JSON),
)

#: Every fio output file an import stored, by checksum: the same file is never stored twice.
imported_files = sa.Table(
    "imported_files", metadata,
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("format", sa.String(20)),
    sa.Column("size_bytes", sa.BigInteger),
)

run_tags = sa.Table(
    "run_tags", metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("value", sa.String(500), nullable=False),
)

results = sa.Table(
    "results", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("target", sa.String(200), nullable=False),
    sa.Column("target_path", sa.Text),
    sa.Column("workload", sa.String(300), nullable=False),
    sa.Column("repeat", sa.Integer, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("job_text", sa.Text, nullable=False),
    sa.Column("job_hash", sa.String(64), nullable=False, index=True),
    sa.Column("params", sa.JSON),
    sa.Column("command", sa.Text),
    sa.Column("started_at", sa.DateTime(timezone=True)),
    sa.Column("ended_at", sa.DateTime(timezone=True)),
    sa.Column("error", sa.Text),
    sa.Column("report", sa.JSON),
    sa.Column("raw_gz", sa.LargeBinary),
    sa.Column("target_facts", sa.JSON),
    sa.Column("extra", sa.JSON),
    sa.UniqueConstraint("run_id", "seq", name="uq_results_run_seq"),
)

time_series = sa.Table(
    "time_series", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("job", sa.String(300), nullable=False),
    sa.Column("job_index", sa.Integer, nullable=False),
    sa.Column("hostname", sa.String(300)),
    sa.Column("direction", sa.String(10), nullable=False),
    sa.Column("metric", sa.String(20), nullable=False),
    sa.Column("interval_ms", sa.Integer),
    sa.Column("samples", sa.LargeBinary, nullable=False),  # encode_series
)

host_samples = sa.Table(
    "host_samples", metadata,  # observers' node_exporter samples (0005_host_samples)
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("host", sa.String(300), nullable=False),
    sa.Column("samples", sa.JSON, nullable=False),
)

traces = sa.Table(
    "traces", metadata,  # captures' block traces (0006_traces; written by capture.record)
    sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("requests", sa.Integer, nullable=False),
    sa.Column("meta", sa.JSON, nullable=False),  # comms, lost_events, duration_ns
    sa.Column("data", sa.LargeBinary, nullable=False),  # capture.trace.encode
)


def default_url() -> str:
    """``$IOLAB_DB`` (URL or path) or the XDG data-dir SQLite file."""
    env = os.environ.get("IOLAB_DB")
    if env:
        return env if "://" in env else f"sqlite:///{Path(env).expanduser().resolve()}"
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return f"sqlite:///{base / 'iolab' / 'iolab.db'}"


def _normalise_url(url: str) -> str:
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]  # psycopg 3, not psycopg2
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser().resolve()}"
    return url


def require_existing(url: str | None = None) -> None:
    """Raise ``UsageError`` when ``url`` (default ``default_url()``) names an SQLite file that does
    not exist: commands that only read must not create a database (or its directory) from a typo.
    A server URL (PostgreSQL) is left to the connection to judge."""
    url = _normalise_url(url or default_url())
    if not url.startswith("sqlite:///"):
        return
    path = Path(url.removeprefix("sqlite:///"))
    if str(path) != ":memory:" and not path.is_file():
        raise UsageError(f"no results database at {path}",
                         hint="`iolab run` and `iolab import` create one; check --db / $IOLAB_DB")


@dataclass(frozen=True)
class PendingResult:
    """A planned fio invocation, stored before it runs so that ``--resume`` can finish it.
    ``planned`` is what the plan says about it beyond the job (its warm-up pass, a crash test's
    phase), stored in the result's ``extra`` (``execute.PLANNED`` lists the keys)."""

    seq: int
    target: str
    target_path: str | None
    workload: str
    repeat: int
    job_text: str
    job_hash: str
    params: Mapping[str, str]
    planned: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FinishedResult(PendingResult):
    """A result complete when stored, such as one read from an imported fio output.

    ``raw_text`` is the fio output as read (stored zlib-compressed), or ``raw_gz`` the same already
    compressed by ``compress_raw`` (from the bytes read, without encoding the text again);
    ``ended_at`` is when fio printed the report, when the output says so; ``series`` are fio's logs found with it
    (``EncodedSeries`` when they were encoded ahead, in the process that read them).
    """

    status: str = "ok"
    report: FioReport | None = None
    raw_text: str | None = None
    error: str | None = None
    ended_at: datetime | None = None
    extra: Mapping[str, Any] | None = None
    series: Sequence[TimeSeries | EncodedSeries] = ()
    raw_gz: bytes | None = None


@dataclass(frozen=True)
class EncodedSeries:
    """A ``TimeSeries`` as the ``time_series`` table holds it: its names and ``encode_series`` of its
    samples. ``iolab import`` encodes in the worker process that read the logs (``importer._ahead``)."""

    job: str
    job_index: int
    direction: str
    metric: str
    interval_ms: int | None
    hostname: str | None
    samples: bytes

    @classmethod
    def of(cls, series: TimeSeries) -> EncodedSeries:
        return cls(series.job, series.job_index, series.direction, series.metric, series.interval_ms,
                   series.hostname, encode_series(series.t_ms, series.values))


@dataclass(frozen=True)
class ImportedFile:
    """A fio output file an import stored: its sha256 (the same file is stored only once), where it
    was read, its format (``json``, ``normal`` …) and size in bytes."""

    sha256: str
    path: str
    format: str | None = None
    size_bytes: int | None = None


@dataclass(frozen=True)
class FinishedRun:
    """A run complete when stored (imported fio output: one file, or a directory of them) and its
    results; ``files`` are the outputs it was read from."""

    suite_name: str
    origin: str
    source: Mapping[str, str]
    files: tuple[ImportedFile, ...]
    results: tuple[FinishedResult, ...]
    label: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    fio_version: str | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class HistoryResult:
    """A stored ``ok`` result as ``Store.history`` reads it: ``ended_at`` as in ``ResultRecord`` (for an
    import, the time fio's output gives), ``extra`` as stored, and ``report`` the stored JSON of its
    ``FioReport`` (``model.to_jsonable``'s form: field names as keys), decoded but not validated."""

    id: int
    run_id: int
    target: str
    workload: str
    job_text: str
    ended_at: datetime | None
    extra: Mapping[str, Any]
    target_facts: TargetFacts | None
    report: Mapping[str, Any]


@dataclass(frozen=True)
class History:
    """What ``Store.history`` found: the runs (ascending id) and their results; runs with a row that
    does not load are left out, each an ``UnreadableRun`` in ``unreadable``."""

    runs: tuple[RunInfo, ...]
    results: tuple[HistoryResult, ...]
    unreadable: tuple[UnreadableRun, ...] = ()


class JSONText(str):
    """A JSON document already serialised (``model.to_json_text``): the store writes it as it is
    instead of serialising it again, which for reports with json+ histograms halves the cost."""


def _json_serializer(value: Any) -> str:
    """JSON columns as text: orjson (several times as fast as the json module for the small documents
    a row holds), json for what orjson refuses (an int beyond 64 bits)."""
    if isinstance(value, JSONText):
        return str(value)
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value)


class UnreadableRun(StoreError):
    """A stored run that does not load: written by an older or newer iolab, changed by hand, or holding a
    value that breaks a rule of ``fio.validate``. ``reason`` says what and where; the other runs are
    not affected."""

    def __init__(self, run_id: int, reason: str) -> None:
        super().__init__(f"run {run_id} cannot be read: {reason}",
                         hint="the other runs are not affected; if this iolab stored it, please report it with "
                              f"the output of: iolab --debug show {run_id}")
        self.run_id, self.reason = run_id, reason


class _ColumnError(Exception):
    """A stored column that does not load: which one, and why (``cause``)."""

    def __init__(self, column: str, cause: Exception) -> None:
        super().__init__(column)
        self.column, self.cause = column, cause


#: What reading a stored row can raise when the row is not what this iolab writes.
_ROW_ERRORS = (_ColumnError, pydantic.ValidationError, ValueError, TypeError, KeyError, AttributeError,
               ArithmeticError)


def _column(name: str, cls: type[T], data: Any) -> T:
    """Stored JSON ``data`` of the column ``name`` as a ``cls``; ``_ColumnError`` when it does not load.
    A report must also pass ``fio.validate``, as a parser's does."""
    try:
        value = from_jsonable(cls, data)
        if isinstance(value, FioReport):
            validate.check_report(value)
    except (pydantic.ValidationError, validate.Violation) as exc:
        raise _ColumnError(name, exc) from exc
    return value


def _unreadable(run_id: int, exc: Exception) -> UnreadableRun:
    """The ``UnreadableRun`` for ``exc`` raised while reading run ``run_id`` (its cause, for --debug)."""
    unreadable = UnreadableRun(run_id, _reason(exc))
    unreadable.__cause__ = exc
    return unreadable


def _reason(exc: Exception) -> str:
    """One line on why a stored value does not load."""
    if isinstance(exc, _ColumnError):
        return f"{exc.column}: {_reason(exc.cause)}"
    if isinstance(exc, pydantic.ValidationError):
        errors = exc.errors()
        first = errors[0]
        where = ".".join(str(part) for part in first["loc"])
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return f"{where}: {first['msg']}, got {validate.short_repr(first.get('input'))}{more}"
    if isinstance(exc, validate.Violation):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class DuplicateSource(UsageError):
    """A fio output file (same sha256) is already stored, in run ``run_id``."""

    def __init__(self, message: str, run_id: int, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.run_id = run_id


#: Compression level for the stored text of imported fio outputs. With zlib, level 1 compresses about
#: 1.7x faster than the default 6 for 15-25 % more bytes; ISA-L's level 1 (of 0-3) is about 5x faster
#: than zlib's level 1 and a little smaller. The parsed report stored beside it (uncompressed JSON) is
#: larger than either; benchmarks/import.py measures them.
RAW_ZLIB_LEVEL = 1

try:  # ISA-L's deflate writes the same zlib stream as zlib (zlib.decompress reads it), several times faster
    from isal import isal_zlib as raw_codec
except ImportError:  # pragma: no cover - isal is installed where it has wheels (pyproject.toml)
    raw_codec = zlib  # type: ignore[misc]


def compress_raw(data: bytes) -> bytes:
    """Imported fio output as stored: a zlib stream (``zlib.decompress`` reads it) at ``RAW_ZLIB_LEVEL``."""
    return raw_codec.compress(data, RAW_ZLIB_LEVEL)


def _utc(value: datetime | None) -> datetime | None:
    """SQLite hands datetimes back naive; they were stored as UTC."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


P = ParamSpec("P")
R = TypeVar("R")


def _guarded(what: str) -> Callable[[Callable[Concatenate[Store, P], R]], Callable[Concatenate[Store, P], R]]:
    """A Store method that runs through ``Store.guard``: transient faults are waited out, others
    become one-line ``StoreError``s saying that it could not ``what`` (``dbfaults``)."""
    def wrap(method: Callable[Concatenate[Store, P], R]) -> Callable[Concatenate[Store, P], R]:
        @functools.wraps(method)
        def guarded(self: Store, *args: P.args, **kwargs: P.kwargs) -> R:
            return self.guard.call(what, lambda: method(self, *args, **kwargs))
        return guarded
    return wrap


_MIGRATIONS = resources.files("iolab.store") / "migrations"


def head_revision() -> str:
    """The newest schema revision: migrations are ``versions/NNNN_name.py`` with ``revision =
    "NNNN"``, one after another (a test holds this against Alembic's own head)."""
    return max(p.name.split("_", 1)[0] for p in (_MIGRATIONS / "versions").iterdir()
               if p.name.endswith(".py") and p.name[:4].isdigit())


#: Alembic's own bookkeeping table (``alembic.runtime.migration``), outside ``metadata``: written here
#: only when a new database is stamped.
_alembic_version = sa.Table("alembic_version", sa.MetaData(),
                            sa.Column("version_num", sa.String(32), nullable=False),
                            sa.PrimaryKeyConstraint("version_num", name="alembic_version_pkc"))


#: PostgreSQL advisory lock key held while the schema is created or upgraded ("iolab" in ASCII).
SCHEMA_LOCK = 0x696F6C6162


def _stored_revision(conn: Connection) -> str | None:
    """The revision in ``alembic_version``; None for a new database (no such table)."""
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


class Store:
    """The results database. Open with ``Store(url)``; every method commits before returning.

    Raises ``StoreError`` when the database cannot be opened or migrated.
    """

    def __init__(self, url: str | None = None, wait_s: float = dbfaults.DEFAULT_WAIT_S) -> None:
        self.url = _normalise_url(url or default_url())
        path = dbfaults.sqlite_path(self.url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        #: Why this process cannot write the database (a read-only SQLite file, directory or mount), or None:
        #: it is then opened read-only, so that reading commands work (``check_writable`` refuses a run).
        self.read_only = dbfaults.sqlite_read_only(path) if path is not None else None
        #: Every call goes through it: transient faults are waited out for ``wait_s`` s (``dbfaults.Guard``).
        self.guard = dbfaults.Guard(self.display_url, wait_s)
        connect_url = self.url
        if path is not None and self.read_only and path.exists():
            # SQLite cannot read a WAL database without creating its -shm file, unless told that nobody
            # writes it (immutable), which holds where this process cannot write it either.
            connect_url = f"sqlite:///file:{path}?mode=ro&immutable=1&uri=true"
        try:
            # pre_ping: a pooled connection is tested before use, so one the server dropped (a restart)
            # is replaced instead of failing the next write.
            self.engine: Engine = sa.create_engine(connect_url, json_serializer=_json_serializer,
                                                   pool_pre_ping=True)
            if self.engine.dialect.name == "sqlite":
                sa.event.listen(self.engine, "connect", self._sqlite_pragmas)
            self._migrate()
        except sa.exc.SQLAlchemyError as exc:
            reason = dbfaults.describe(exc)
            raise StoreError(f"cannot open the results database {self.display_url}: {reason}",
                             hint=dbfaults.hint_for(reason)) from exc

    def _sqlite_pragmas(self, dbapi_connection: Any, _record: Any) -> None:
        """Foreign keys, WAL (not on a read-only database: it is a write) and a lock wait that stays
        inside the guard's bound."""
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        if not self.read_only:
            cursor.execute("PRAGMA journal_mode=WAL")
        busy_ms = int(min(dbfaults.SQLITE_BUSY_MS, max(self.guard.wait_s, 0.0) * 250))  # a few tries in the bound
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        cursor.close()

    def check_writable(self, results: int) -> None:
        """Before a run: the database can be written (a read-only SQLite file, directory or mount is
        named as such; PostgreSQL in a read-only transaction or without the right is refused) and,
        for SQLite, its file system has room for ``results`` results with a margin
        (``dbfaults.check_sqlite_room``). Raises ``StoreError``."""
        if self.read_only:
            raise StoreError(f"the results database {self.display_url} {self.read_only}; results cannot be stored "
                             "there", hint="give a writable database with --db or $IOLAB_DB (reading commands "
                             "such as runs, show, report and compare work on this one)")
        path = dbfaults.sqlite_path(self.url)
        if path is not None:
            dbfaults.check_sqlite_room(path, results, self.display_url)
        self.guard.call("take a write (tried before any job runs)", lambda: dbfaults.probe_write(self.engine))

    @property
    def display_url(self) -> str:
        """The URL without a password."""
        return sa.engine.make_url(self.url).render_as_string(hide_password=True)

    def _migrate(self) -> None:
        """Bring the schema to ``head_revision()``: one read of ``alembic_version`` when it is there
        already (every command opens the store; Alembic's import and script scan cost ~0.15 s),
        Alembic's upgrade only when the revision differs. Raises ``StoreError`` for a database that
        claims the revision but lacks tables."""
        head = head_revision()
        with self.engine.begin() as conn:
            tables = set(sa.inspect(conn).get_table_names())
            if self.engine.dialect.name == "postgresql" and (not tables or _stored_revision(conn) != head):
                # Machines opening a new (or older) team database at once: one creates or upgrades it while
                # the others wait, then see its tables (concurrent CREATE TABLEs collide in pg_type).
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
                tables = set(sa.inspect(conn).get_table_names())
            if not tables:
                # A new database: the tables as defined here, stamped with the head revision (Alembic's
                # cookbook, "Building an Up to Date Database from Scratch"), without Alembic's import
                # and its migrations one by one; a test holds these definitions equal to the migrations.
                metadata.create_all(conn)
                _alembic_version.create(conn)
                conn.execute(_alembic_version.insert().values(version_num=head))
                tables = set(metadata.tables)
            elif _stored_revision(conn) != head:
                from alembic import command
                from alembic.config import Config

                config = Config()
                config.set_main_option("script_location", str(_MIGRATIONS))
                config.attributes["connection"] = conn
                command.upgrade(config, "head")
                tables = set(sa.inspect(conn).get_table_names())
            # A database stamped by a development build can claim a revision whose tables it lacks.
            missing = set(metadata.tables) - tables
        if missing:
            raise StoreError(f"the results database {self.display_url} says it is at schema {head} but lacks the "
                             f"table(s) {', '.join(sorted(missing))}",
                             hint="it was written by a development build of iolab; use another --db")

    def close(self) -> None:
        self.engine.dispose()

    # -- writing ---------------------------------------------------------------------------

    @_guarded("store the run")
    def create_run(self, *, suite_name: str, suite_text: str, origin: str = "run", label: str | None = None,
                   tags: Mapping[str, str] | None = None, host: HostFacts | None = None,
                   fio_version: str | None = None, warnings: Sequence[str] = (),
                   source: Mapping[str, str] | None = None, options: Mapping[str, Any] | None = None,
                   status: str = "running") -> int:
        """Insert a run; returns its id."""
        with self.engine.begin() as conn:
            return self._insert_run(
                conn, status=status, origin=origin, suite_name=suite_name, suite_text=suite_text, label=label,
                fio_version=fio_version, host=to_jsonable(host) if host else None, warnings=list(warnings),
                source=dict(source) if source else None, options=dict(options or {}), tags=tags or {},
            )

    @staticmethod
    def _insert_run(conn: Connection, tags: Mapping[str, str], **values: Any) -> int:
        key_row = conn.execute(runs.insert().values(created_at=datetime.now(UTC), **values)).inserted_primary_key
        assert key_row is not None
        run_id = key_row[0]
        for key, value in tags.items():
            conn.execute(run_tags.insert().values(run_id=run_id, key=key, value=value))
        return int(run_id)

    @_guarded("store the imported runs")
    def add_finished_runs(self, finished: Sequence[FinishedRun]) -> list[int]:
        """Store runs whose results are all known (imports) in one transaction; returns their ids.

        A run's status is ``failed`` when one of its results failed, else ``complete``. A file
        (sha256) already stored, or given twice, raises ``DuplicateSource`` naming the earlier run,
        and nothing is stored; the ``imported_files`` primary key enforces it, so concurrent imports
        cannot both succeed. (A file given twice in one call is the caller's mistake: IntegrityError.)
        """
        if not finished:
            return []
        # One statement per table for the whole batch: a statement per run costs SQLAlchemy about
        # a millisecond, more than parsing a typical fio output (benchmarks/import.py).
        rows = [{
            "created_at": datetime.now(UTC), "finished_at": datetime.now(UTC), "suite_text": "", "options": {},
            "status": "failed" if any(r.status != "ok" for r in run.results) else "complete", "origin": run.origin,
            "suite_name": run.suite_name, "label": run.label, "fio_version": run.fio_version,
            "warnings": list(run.warnings), "source": dict(run.source),
        } for run in finished]
        try:
            with self.engine.begin() as conn:
                inserted = conn.execute(runs.insert().returning(runs.c.id, sort_by_parameter_order=True), rows)
                ids = [int(run_id) for run_id in inserted.scalars()]
                conn.execute(imported_files.insert(), [
                    {"sha256": f.sha256, "run_id": run_id, "path": f.path, "format": f.format,
                     "size_bytes": f.size_bytes} for run_id, run in zip(ids, finished, strict=True) for f in run.files])
                tags = [{"run_id": run_id, "key": k, "value": v} for run_id, run in zip(ids, finished, strict=True)
                        for k, v in run.tags.items()]
                if tags:
                    conn.execute(run_tags.insert(), tags)
                stored = [(run_id, r) for run_id, run in zip(ids, finished, strict=True) for r in run.results]
                result_ids = conn.execute(results.insert().returning(results.c.id, sort_by_parameter_order=True),
                                          [_finished_row(run_id, r) for run_id, r in stored]).scalars()
                series_rows = [row for result_id, (_, r) in zip(result_ids, stored, strict=True)
                               for row in _series_rows(result_id, r.series)]
                if series_rows:
                    conn.execute(time_series.insert(), series_rows)
            return ids
        except sa.exc.IntegrityError:
            files = [f for run in finished for f in run.files]
            earlier = self.find_sources([f.sha256 for f in files])
            first = next((f for f in files if f.sha256 in earlier), None)
            if first is None:
                raise
        run_id = earlier[first.sha256]
        raise DuplicateSource(f"{first.path} is already stored in run {run_id} (same sha256 {first.sha256[:12]}…)",
                              run_id, hint=f"see it with: iolab show {run_id}")

    @_guarded("look up imported files")
    def find_sources(self, sha256s: Sequence[str]) -> dict[str, int]:
        """``sha256 -> run id`` for the imported files among ``sha256s`` that are stored."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(imported_files.c.sha256, imported_files.c.run_id)
                                .where(imported_files.c.sha256.in_(sha256s)))
            return {sha: int(run_id) for sha, run_id in rows}

    def find_source(self, sha256: str) -> int | None:
        """The id of the run holding the imported file with this sha256, if any."""
        return self.find_sources([sha256]).get(sha256)

    @_guarded("store the planned jobs")
    def add_pending(self, run_id: int, planned: Iterable[PendingResult]) -> list[int]:
        """Store planned invocations as ``pending``; returns their result ids in order."""
        ids = []
        with self.engine.begin() as conn:
            for p in planned:
                ids.append(int(conn.execute(results.insert().values(
                    run_id=run_id, seq=p.seq, target=p.target, target_path=p.target_path, workload=p.workload,
                    repeat=p.repeat, status="pending", job_text=p.job_text, job_hash=p.job_hash,
                    params=dict(p.params), extra=dict(p.planned),
                )).inserted_primary_key[0]))  # type: ignore[index]
        return ids

    @_guarded("store a result")
    def save_result(self, result_id: int, *, status: str, command: str | None = None,
                    started_at: datetime | None = None, ended_at: datetime | None = None,
                    error: str | None = None, report: FioReport | None = None, raw_json: str | None = None,
                    target_facts: TargetFacts | None = None, extra: Mapping[str, Any] | None = None,
                    series: Sequence[TimeSeries] | None = None,
                    observations: Sequence[HostSamples] | None = None) -> None:
        """Record how a planned invocation ended (``ok``, ``failed``, ``interrupted``); ``series``
        (fio's logs) and ``observations`` (the observers' samples) replace any stored before, in
        the same transaction."""
        values: dict[str, Any] = {
            "status": status, "command": command, "started_at": started_at, "ended_at": ended_at,
            "error": error, "report": to_jsonable(report) if report else None,
            "raw_gz": zlib.compress(raw_json.encode(), 6) if raw_json else None,
            "target_facts": to_jsonable(target_facts) if target_facts else None,
        }
        if extra is not None:
            values["extra"] = dict(extra)
        with self.engine.begin() as conn:
            conn.execute(results.update().where(results.c.id == result_id).values(**values))
            if series is not None:
                self._replace_series(conn, result_id, series)
            if observations is not None:
                conn.execute(host_samples.delete().where(host_samples.c.result_id == result_id))
                if observations:
                    conn.execute(host_samples.insert(), [{"result_id": result_id, "host": o.host,
                                                          "samples": JSONText(to_json_text(o))} for o in observations])

    @_guarded("store fio's logs")
    def save_time_series(self, result_id: int, series: Sequence[TimeSeries]) -> None:
        """Store fio's logs of a result (``fio.logs.read_logs``), replacing any stored before."""
        with self.engine.begin() as conn:
            self._replace_series(conn, result_id, series)

    @staticmethod
    def _replace_series(conn: Connection, result_id: int, series: Sequence[TimeSeries]) -> None:
        conn.execute(time_series.delete().where(time_series.c.result_id == result_id))
        if series:
            conn.execute(time_series.insert(), _series_rows(result_id, series))

    @_guarded("update the run")
    def update_run(self, run_id: int, **values: Any) -> None:
        """Set columns of a run (``status``, ``finished_at``, ``warnings`` ...)."""
        if "host" in values and isinstance(values["host"], HostFacts):
            values["host"] = to_jsonable(values["host"])
        with self.engine.begin() as conn:
            conn.execute(runs.update().where(runs.c.id == run_id).values(**values))

    def finish_run(self, run_id: int, status: str) -> None:
        self.update_run(run_id, status=status, finished_at=datetime.now(UTC))

    # -- reading ---------------------------------------------------------------------------

    @_guarded("list the runs")
    def list_runs(self, limit: int | None = None) -> list[RunInfo | UnreadableRun]:
        """Runs, newest first; a run whose row does not load is an ``UnreadableRun`` in its place."""
        query = sa.select(runs).order_by(runs.c.id.desc())
        if limit:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            try:
                rows = conn.execute(query).mappings().all()
            except _ROW_ERRORS:  # a JSON column that does not decode: one query per run finds which
                ids = conn.execute(query.with_only_columns(runs.c.id)).scalars().all()
                return [self._info_or_unreadable(conn, run_id) for run_id in ids]
            tags = self._tags(conn, [r["id"] for r in rows])
        return [self._loaded(r["id"], lambda r=r: self._info(r, tags.get(r["id"], {}))) for r in rows]

    def _info_or_unreadable(self, conn: Connection, run_id: int) -> RunInfo | UnreadableRun:
        try:
            row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().one()
        except _ROW_ERRORS as exc:
            return _unreadable(run_id, exc)
        return self._loaded(run_id, lambda: self._info(row, self._tags(conn, [run_id]).get(run_id, {})))

    @staticmethod
    def _loaded(run_id: int, load: Any) -> Any:
        """``load()``, or the ``UnreadableRun`` saying why it failed."""
        try:
            return load()
        except _ROW_ERRORS as exc:
            return _unreadable(run_id, exc)

    @_guarded("read a run")
    def get_run(self, run_id: int) -> Run:
        """A run with all results in plan order. Raises ``UsageError`` when there is no such run,
        ``UnreadableRun`` when it does not load (see there); its reports pass ``fio.validate``."""
        with self.engine.connect() as conn:
            try:
                row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().first()
                if row is None:
                    raise UsageError(f"no run {run_id} in {self.display_url}", hint="list them with: iolab runs")
                tags = self._tags(conn, [run_id]).get(run_id, {})
                rows = conn.execute(
                    sa.select(results).where(results.c.run_id == run_id).order_by(results.c.seq)
                ).mappings().all()
            except _ROW_ERRORS as exc:
                raise _unreadable(run_id, exc) from exc
        info = self._loaded(run_id, lambda: self._info(row, tags))
        if isinstance(info, UnreadableRun):
            raise info
        loaded = []
        for r in rows:
            result = self._loaded(run_id, lambda r=r: self._result(r))
            if isinstance(result, UnreadableRun):
                where = f"result {r['seq']} ({r['target']} / {r['workload']})"
                raise UnreadableRun(run_id, f"{where}: {result.reason}") from result.__cause__
            loaded.append(result)
        if info.status == "interrupted" and row["status"] == "running":  # its process is gone (owner.py)
            loaded = [replace(r, status="interrupted") if r.status == "running" else r for r in loaded]
        return Run(info=info, results=tuple(loaded))

    @_guarded("read a result")
    def raw_json(self, result_id: int) -> str | None:
        """The fio report text of a result, as fio wrote it."""
        with self.engine.connect() as conn:
            blob = conn.execute(sa.select(results.c.raw_gz).where(results.c.id == result_id)).scalar()
        return zlib.decompress(blob).decode() if blob else None

    @_guarded("read fio's logs")
    def time_series(self, run_id: int) -> dict[int, list[TimeSeries]]:
        """The stored fio logs of a run's results: result id -> series (in storage order)."""
        query = (sa.select(time_series).join(results, results.c.id == time_series.c.result_id)
                 .where(results.c.run_id == run_id).order_by(time_series.c.id))
        out: dict[int, list[TimeSeries]] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(query).mappings():
                t_ms, values = decode_series(row["samples"])
                out.setdefault(row["result_id"], []).append(TimeSeries(
                    job=row["job"], job_index=row["job_index"], direction=row["direction"], metric=row["metric"],
                    t_ms=t_ms, values=values, interval_ms=row["interval_ms"], hostname=row["hostname"],
                ))
        return out

    @_guarded("read the observers' samples")
    def host_samples(self, run_id: int) -> dict[int, list[HostSamples]]:
        """The observers' samples of a run's results: result id -> one per host, as stored."""
        query = (sa.select(host_samples.c.result_id, host_samples.c.samples)
                 .join(results, results.c.id == host_samples.c.result_id)
                 .where(results.c.run_id == run_id).order_by(host_samples.c.id))
        out: dict[int, list[HostSamples]] = {}
        with self.engine.connect() as conn:
            for result_id, data in conn.execute(query):
                out.setdefault(result_id, []).append(from_jsonable(HostSamples, data))
        return out

    @_guarded("find runs")
    def resolve(self, selector: str) -> list[int]:
        """Run ids for a selector: an id (``12``), ``latest``, a label, or a tag ``key=value``.

        A label or tag matches every run that carries it, newest last. Raises ``UsageError``
        when nothing matches.
        """
        with self.engine.connect() as conn:
            if selector.isdigit():
                found = conn.execute(sa.select(runs.c.id).where(runs.c.id == int(selector))).scalars().all()
            elif selector == "latest":
                found = conn.execute(sa.select(sa.func.max(runs.c.id))).scalars().all()
                found = [f for f in found if f is not None]
            elif "=" in selector:
                key, value = selector.split("=", 1)
                found = conn.execute(
                    sa.select(run_tags.c.run_id).where(run_tags.c.key == key, run_tags.c.value == value)
                    .order_by(run_tags.c.run_id)
                ).scalars().all()
            else:
                found = conn.execute(
                    sa.select(runs.c.id).where(runs.c.label == selector).order_by(runs.c.id)
                ).scalars().all()
        if not found:
            raise UsageError(f"no run matches {selector!r}", hint="give a run id, 'latest', a label or key=value tag; "
                             "list runs with: iolab runs")
        return [int(f) for f in found]

    @_guarded("read the history")
    def history(self, run_ids: Sequence[int] | None = None, since: datetime | None = None,
                targets: Sequence[str] = (), workloads: Sequence[str] = ()) -> History:
        """Every ``ok`` result with a report, for ``analyze.history``: of the runs ``run_ids`` (default
        all), ending at or after ``since`` (a result's ``ended_at``, else its run's start), on ``targets``
        and of ``workloads`` (a stored workload name, or a fio job name its job text has a section
        for; empty: any), in run and plan order, and their runs.

        Faster than ``get_run`` by an order of magnitude: reports are decoded (orjson) but neither
        validated nor turned into model objects (``HistoryResult.report``), and equal target facts are
        read once. A row that does not load makes its run an ``UnreadableRun`` in ``History.unreadable``.
        """
        query = (sa.select(results.c.id, results.c.run_id, results.c.target, results.c.workload, results.c.job_text,
                           results.c.ended_at, sa.cast(results.c.extra, sa.Text), sa.cast(results.c.target_facts,
                                                                                         sa.Text),
                           sa.cast(results.c.report, sa.Text))
                 .join(runs, runs.c.id == results.c.run_id)
                 .where(results.c.status == "ok", results.c.report.is_not(None)).order_by(results.c.run_id,
                                                                                          results.c.seq))
        if run_ids is not None:
            query = query.where(results.c.run_id.in_(list(run_ids)))
        if since is not None:
            query = query.where(sa.func.coalesce(results.c.ended_at, runs.c.created_at) >= since)
        if targets:
            query = query.where(results.c.target.in_(list(targets)))
        if workloads:  # a stored workload name, or a fio job name inside the job text (``[name]``)
            query = query.where(sa.or_(results.c.workload.in_(list(workloads)),
                                       *(results.c.job_text.contains(f"[{w}]", autoescape=True) for w in workloads)))
        found: list[HistoryResult] = []
        facts: dict[str | None, TargetFacts | None] = {None: None}
        bad: dict[int, UnreadableRun] = {}
        with self.engine.connect() as conn:
            for rid, run_id, target, workload, job_text, ended_at, extra, target_facts, report in conn.execute(query):
                try:  # a JSON column given None holds JSON's null
                    if target_facts not in facts:
                        data = orjson.loads(target_facts)
                        facts[target_facts] = _column("target_facts", TargetFacts, data) if data else None
                    decoded = orjson.loads(report)
                    if decoded:
                        found.append(HistoryResult(rid, run_id, target, workload, job_text, _utc(ended_at),
                                                   orjson.loads(extra or "null") or {}, facts[target_facts],
                                                   decoded))
                except (*_ROW_ERRORS, orjson.JSONDecodeError) as exc:
                    bad.setdefault(run_id, _unreadable(run_id, exc))
            ids = sorted({r.run_id for r in found} - set(bad))
            rows = conn.execute(sa.select(runs).where(runs.c.id.in_(ids)).order_by(runs.c.id)).mappings().all()
            tags = self._tags(conn, ids)
        infos = [self._loaded(r["id"], lambda r=r: self._info(r, tags.get(r["id"], {}))) for r in rows]
        bad.update({i.run_id: i for i in infos if isinstance(i, UnreadableRun)})
        return History(tuple(i for i in infos if not isinstance(i, UnreadableRun)),
                       tuple(r for r in found if r.run_id not in bad), tuple(bad.values()))

    @_guarded("check the database")
    def integrity_problems(self) -> list[str]:
        """Database-level consistency check: SQLite's ``integrity_check`` and foreign keys,
        plus iolab's own rule that no result is left ``running``. Empty when all is well."""
        problems = []
        with self.engine.connect() as conn:
            if self.engine.dialect.name == "sqlite":
                verdict = conn.exec_driver_sql("PRAGMA integrity_check").scalars().all()
                problems += [v for v in verdict if v != "ok"]
                problems += [str(tuple(r)) for r in conn.exec_driver_sql("PRAGMA foreign_key_check").all()]
            stuck = conn.execute(sa.select(sa.func.count()).where(results.c.status == "running")).scalar()
            if stuck:
                problems.append(f"{stuck} result(s) left in state 'running'")
        return problems

    @staticmethod
    def _tags(conn: Connection, run_ids: Sequence[int]) -> dict[int, dict[str, str]]:
        out: dict[int, dict[str, str]] = {}
        if not run_ids:
            return out
        for r in conn.execute(sa.select(run_tags).where(run_tags.c.run_id.in_(run_ids)).order_by(run_tags.c.key)):
            out.setdefault(r.run_id, {})[r.key] = r.value
        return out

    @staticmethod
    def _info(row: Any, tags: Mapping[str, str]) -> RunInfo:
        return RunInfo(
            id=row["id"], created_at=_utc(row["created_at"]),  # type: ignore[arg-type]
            finished_at=_utc(row["finished_at"]), status=effective_status(row["status"], row["options"]),
            origin=row["origin"],
            suite_name=row["suite_name"], suite_text=row["suite_text"], label=row["label"], tags=dict(tags),
            fio_version=row["fio_version"], host=_column("host", HostFacts, row["host"]) if row["host"] else None,
            warnings=tuple(row["warnings"] or ()), source=row["source"], options=row["options"] or {},
        )

    @staticmethod
    def _result(row: Any) -> ResultRecord:
        return ResultRecord(
            id=row["id"], run_id=row["run_id"], seq=row["seq"], target=row["target"],
            target_path=row["target_path"], workload=row["workload"], repeat=row["repeat"],
            status=row["status"], job_text=row["job_text"], job_hash=row["job_hash"], params=row["params"] or {},
            command=row["command"], started_at=_utc(row["started_at"]), ended_at=_utc(row["ended_at"]),
            error=row["error"], report=_column("report", FioReport, row["report"]) if row["report"] else None,
            target_facts=_column("target_facts", TargetFacts, row["target_facts"]) if row["target_facts"] else None,
            extra=row["extra"] or {},
        )


def _series_rows(result_id: int, series: Sequence[TimeSeries | EncodedSeries]) -> list[dict[str, Any]]:
    return [{
        "result_id": result_id, "job": s.job, "job_index": s.job_index, "hostname": s.hostname,
        "direction": s.direction, "metric": s.metric, "interval_ms": s.interval_ms,
        "samples": s.samples if isinstance(s, EncodedSeries) else encode_series(s.t_ms, s.values),
    } for s in series]


#: ``encode_series`` format: ``<BBI`` header (format, flags, sample count), then int64 time deltas
#: and the values (int64 deltas when every value is an integer, flag bit 0; else float64), all
#: little-endian and compressed as ``compress_raw`` does. Migration 0004 writes the same format.
SERIES_FORMAT = 1
_SERIES_HEADER = struct.Struct("<BBI")
_INTEGRAL = 1


def encode_series(t_ms: Sequence[int], values: Sequence[float]) -> bytes:
    """A time series as stored: a few bytes a sample instead of fio's ~20 characters a log row.

    Times are ms (integers), delta-encoded; values are kept exactly (float64, or int64 deltas when
    all are integers below 2**53, as fio's IOPS, KiB/s and ns logs mostly are). Raises ValueError
    when the two sequences differ in length.
    """
    import numpy as np  # here: reading run lists and reports needs no numpy
    t = np.asarray(t_ms, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    if t.shape != v.shape or t.ndim != 1:
        raise ValueError(f"a time series needs as many values as times, got {v.shape} and {t.shape}")
    integral = bool(np.isfinite(v).all() and (np.abs(v) < 2.0 ** 53).all() and (v == np.round(v)).all())
    body = np.diff(v.astype(np.int64), prepend=0) if integral else v
    data = (_SERIES_HEADER.pack(SERIES_FORMAT, _INTEGRAL if integral else 0, len(t))
            + np.diff(t, prepend=0).astype("<i8").tobytes() + body.astype("<i8" if integral else "<f8").tobytes())
    return compress_raw(data)


def decode_series(blob: bytes) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """``(t_ms, values)`` of a series stored by ``encode_series``. Raises StoreError for a blob
    in another format or cut short."""
    data = zlib.decompress(blob)
    version, flags, count = _SERIES_HEADER.unpack_from(data)
    if version != SERIES_FORMAT or len(data) != _SERIES_HEADER.size + 16 * count:
        raise StoreError(f"a stored time series is in format {version} with {len(data)} bytes for {count} samples; "
                         f"this iolab reads format {SERIES_FORMAT}", hint="upgrade iolab")
    import numpy as np
    arrays = np.frombuffer(data, dtype="<i8", offset=_SERIES_HEADER.size).reshape(2, count)
    values = (np.cumsum(arrays[1]).astype(np.float64) if flags & _INTEGRAL
              else np.frombuffer(data, dtype="<f8", offset=_SERIES_HEADER.size + 8 * count))
    return tuple(np.cumsum(arrays[0]).tolist()), tuple(values.tolist())


def _finished_row(run_id: int, r: FinishedResult) -> dict[str, Any]:
    return {
        "run_id": run_id, "seq": r.seq, "target": r.target, "target_path": r.target_path, "workload": r.workload,
        "repeat": r.repeat, "status": r.status, "job_text": r.job_text, "job_hash": r.job_hash,
        "params": dict(r.params), "command": None, "started_at": None, "ended_at": r.ended_at, "error": r.error,
        "report": JSONText(to_json_text(r.report)) if r.report else None,
        "raw_gz": r.raw_gz if r.raw_gz is not None else compress_raw(r.raw_text.encode()) if r.raw_text else None,
        "target_facts": None, "extra": dict(r.extra or {}),
    }
