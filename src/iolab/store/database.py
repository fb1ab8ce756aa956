"""The results database: SQLAlchemy Core over SQLite (default) or PostgreSQL.

Where: ``--db URL``, else ``$IOLAB_DB`` (a URL or a file path), else
``$XDG_DATA_HOME/iolab/iolab.db`` (``~/.local/share/iolab/iolab.db``). The schema is created and
upgraded by Alembic migrations (``store/migrations``) when the store is opened; the table
definitions (``store.schema``) mirror them for queries (a test checks they agree). What goes in and
comes out is ``store.records``'s, how it is encoded ``store.codecs``'s.

Every write is its own transaction, committed before the call returns: a result is durable
the moment its job ends, so a killed run loses at most the job in flight. Every call goes through
``Store.guard`` (``store.faults.Guard``): a database that is away (restarting, locked, full) is waited for,
up to a bound, and its errors become one-line ``StoreError``s without SQL text.
"""

from __future__ import annotations

import functools
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .. import outputs
from ..errors import StoreError, UsageError
from ..facts.owner import effective_status
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
from . import captures, curation, selectors
from . import faults as dbfaults
from . import history as stored_history
from .codecs import JSONText, decode_series, json_serializer, utc
from .history import History
from .records import DuplicateSource, FinishedRun, PendingResult, UnreadableRun, finished_row, series_rows
from .rows import ROW_ERRORS, column, unreadable
from .schema import (
    MIGRATIONS,
    alembic_version,
    head_revision,
    host_samples,
    imported_files,
    metadata,
    result_figures,
    results,
    run_tags,
    runs,
    stored_revision,
    time_series,
)

T = TypeVar("T")

#: PostgreSQL advisory lock key held while the schema is created or upgraded ("iolab" in ASCII).
SCHEMA_LOCK = 0x696F6C6162


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
    not exist (``outputs.OutputError`` when something else is there: a device, a directory, a FIFO):
    commands that only read must not create a database (or its directory) from a typo. A server URL
    (PostgreSQL) is left to the connection to judge."""
    url = _normalise_url(url or default_url())
    path = Path(url.removeprefix("sqlite:///"))
    if url.startswith("sqlite:///") and str(path) != ":memory:" and not path.is_file():
        if os.path.lexists(path):
            outputs.database(path, create=False)
        raise UsageError(f"no results database at {path}",
                         hint="`iolab run` and `iolab import` create one; check --db / $IOLAB_DB")


P = ParamSpec("P")
R = TypeVar("R")


def _guarded(what: str) -> Callable[[Callable[Concatenate[Store, P], R]], Callable[Concatenate[Store, P], R]]:
    """A Store method that runs through ``Store.guard``: transient faults are waited out, others
    become one-line ``StoreError``s saying that it could not ``what`` (``store.faults``)."""
    def wrap(method: Callable[Concatenate[Store, P], R]) -> Callable[Concatenate[Store, P], R]:
        @functools.wraps(method)
        def guarded(self: Store, *args: P.args, **kwargs: P.kwargs) -> R:
            return self.guard.call(what, lambda: method(self, *args, **kwargs))
        return guarded
    return wrap


class Store:
    """The results database. Open with ``Store(url)``; every method commits before returning.

    Raises ``StoreError`` when the database cannot be opened or migrated.
    """

    def __init__(self, url: str | None = None, wait_s: float = dbfaults.DEFAULT_WAIT_S) -> None:
        self.url = _normalise_url(url or default_url())
        path = dbfaults.sqlite_path(self.url)
        if path is not None:  # never onto a device, a FIFO or another file: created (where it can be) or checked
            outputs.database(path, create=dbfaults.sqlite_read_only(path) is None)
            dbfaults.make_sqlite_dir(path, self.display_url)
        #: Why this process cannot write the database (a read-only SQLite file, directory or mount), or None:
        #: it is then opened read-only, so that reading commands work (``check_writable`` refuses a run).
        self.read_only = dbfaults.sqlite_read_only(path) if path is not None else None
        #: Every call goes through it: transient faults are waited out for ``wait_s`` s (``store.faults.Guard``).
        self.guard = dbfaults.Guard(self.display_url, wait_s)
        connect_url = self.url
        if path is not None and self.read_only and path.exists():
            # SQLite cannot read a WAL database without creating its -shm file, unless told that nobody
            # writes it (immutable), which holds where this process cannot write it either.
            connect_url = f"sqlite:///file:{path}?mode=ro&immutable=1&uri=true"
        try:
            # pre_ping: a pooled connection is tested before use, so one the server dropped (a restart)
            # is replaced instead of failing the next write.
            self.engine: Engine = sa.create_engine(connect_url, json_serializer=json_serializer,
                                                   pool_pre_ping=True)
            if self.engine.dialect.name == "sqlite":
                sa.event.listen(self.engine, "connect", self._sqlite_pragmas)
            self._migrate()
        except sa.exc.SQLAlchemyError as exc:
            reason = dbfaults.describe(exc)
            hint = (path is not None and "unable to open" in reason and dbfaults.sqlite_open_hint(path)) or None
            raise StoreError(f"cannot open the results database {self.display_url}: {reason}",
                             hint=hint or dbfaults.hint_for(reason)) from exc

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
        (``store.faults.check_sqlite_room``). Raises ``StoreError``."""
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
            if self.engine.dialect.name == "postgresql" and (not tables or stored_revision(conn) != head):
                # Machines opening a new (or older) team database at once: one creates or upgrades it while
                # the others wait, then see its tables (concurrent CREATE TABLEs collide in pg_type).
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
                tables = set(sa.inspect(conn).get_table_names())
            if not tables:
                # A new database: the tables as defined here, stamped with the head revision (Alembic's
                # cookbook, "Building an Up to Date Database from Scratch"), without Alembic's import
                # and its migrations one by one; a test holds these definitions equal to the migrations.
                metadata.create_all(conn)
                alembic_version.create(conn)
                conn.execute(alembic_version.insert().values(version_num=head))
                tables = set(metadata.tables)
            elif stored_revision(conn) != head:
                from alembic import command
                from alembic.config import Config

                config = Config()
                config.set_main_option("script_location", str(MIGRATIONS))
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
                                          [finished_row(run_id, r) for run_id, r in stored]).scalars().all()
                sample_rows = [row for result_id, (_, r) in zip(result_ids, stored, strict=True)
                               for row in series_rows(result_id, r.series)]
                if sample_rows:
                    conn.execute(time_series.insert(), sample_rows)
                figure_rows = [stored_history.figures_of(r.report).row(result_id)
                               for result_id, (_, r) in zip(result_ids, stored, strict=True)
                               if r.status == "ok" and r.report is not None]
                if figure_rows:
                    conn.execute(result_figures.insert(), figure_rows)
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
        the same transaction, as do history's figures of ``report`` (``store.history.Figures``)."""
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
            conn.execute(result_figures.delete().where(result_figures.c.result_id == result_id))
            if status == "ok" and report is not None:
                conn.execute(result_figures.insert().values(stored_history.figures_of(report).row(result_id)))
            if series is not None:
                self._replace_series(conn, result_id, series)
            if observations is not None:
                conn.execute(host_samples.delete().where(host_samples.c.result_id == result_id))
                if observations:
                    conn.execute(host_samples.insert(), [{"result_id": result_id, "host": o.host,
                                                          "samples": JSONText(to_json_text(o))} for o in observations])

    @_guarded("store a trace")
    def save_trace(self, result_id: int, requests: int, meta: Mapping[str, Any],
                   chunks: Iterable[tuple[int, bytes | bytearray]]) -> None:
        """Store a capture's trace (``captures.insert``), in one transaction."""
        with self.engine.begin() as conn:
            captures.insert(conn, result_id, requests, meta, chunks)

    def trace_blobs(self, result_id: int) -> tuple[Mapping[str, Any], Iterator[bytes]] | None:
        """A stored trace's meta and blobs (``captures.blobs``), or None when the result has none."""
        return captures.blobs(self.engine, result_id)

    @_guarded("store fio's logs")
    def save_time_series(self, result_id: int, series: Sequence[TimeSeries]) -> None:
        """Store fio's logs of a result (``fio.logs.read_logs``), replacing any stored before."""
        with self.engine.begin() as conn:
            self._replace_series(conn, result_id, series)

    @staticmethod
    def _replace_series(conn: Connection, result_id: int, series: Sequence[TimeSeries]) -> None:
        conn.execute(time_series.delete().where(time_series.c.result_id == result_id))
        if series:
            conn.execute(time_series.insert(), series_rows(result_id, series))

    @_guarded("update the run")
    def update_run(self, run_id: int, **values: Any) -> None:
        """Set columns of a run (``status``, ``finished_at``, ``warnings`` ...)."""
        if "host" in values and isinstance(values["host"], HostFacts):
            values["host"] = to_jsonable(values["host"])
        with self.engine.begin() as conn:
            conn.execute(runs.update().where(runs.c.id == run_id).values(**values))

    def finish_run(self, run_id: int, status: str) -> None:
        self.update_run(run_id, status=status, finished_at=datetime.now(UTC))

    @_guarded("label or tag the runs")
    def retag(self, run_ids: Sequence[int], tags: Mapping[str, str] | None = None, remove: Sequence[str] = (), *,
              label: str | None = None, unlabel: bool = False) -> None:
        """Set and remove the runs' tags, give them ``label`` or (``unlabel``) none. Raises ``UsageError``."""
        with self.engine.begin() as conn:
            if label is not None or unlabel:
                curation.relabel(conn, run_ids, label)
            if tags or remove:
                curation.retag(conn, run_ids, tags or {}, remove)

    @_guarded("delete the runs")
    def delete_runs(self, run_ids: Sequence[int], confirm: bool = True) -> list[curation.Deleted]:
        """Delete the runs and all that is theirs (``curation.delete``); without ``confirm`` only say what
        would go. Raises ``UsageError`` when one is in progress."""
        with self.engine.connect() as conn, conn.begin() as transaction:
            deleted = curation.delete(conn, run_ids)
            if not confirm:
                transaction.rollback()
            return deleted

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
            except ROW_ERRORS:  # a JSON column that does not decode: one query per run finds which
                ids = conn.execute(query.with_only_columns(runs.c.id)).scalars().all()
                return [self._info_or_unreadable(conn, run_id) for run_id in ids]
            tags = self._tags(conn, [r["id"] for r in rows])
        return [self._loaded(r["id"], lambda r=r: self._info(r, tags.get(r["id"], {}))) for r in rows]

    def _info_or_unreadable(self, conn: Connection, run_id: int) -> RunInfo | UnreadableRun:
        try:
            row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().one()
        except ROW_ERRORS as exc:
            return unreadable(run_id, exc)
        return self._loaded(run_id, lambda: self._info(row, self._tags(conn, [run_id]).get(run_id, {})))

    @staticmethod
    def _loaded(run_id: int, load: Any) -> Any:
        """``load()``, or the ``UnreadableRun`` saying why it failed."""
        try:
            return load()
        except ROW_ERRORS as exc:
            return unreadable(run_id, exc)

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
            except ROW_ERRORS as exc:
                raise unreadable(run_id, exc) from exc
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
        """Run ids for a selector: an id (``12``), ``latest``, a range ``3-7``, a list ``3,5,9``, a label,
        or a tag ``key=value`` (``store.selectors``). Raises ``UsageError`` when nothing matches."""
        with self.engine.connect() as conn:
            return selectors.resolve(conn, selector)

    @_guarded("read the history")
    def history(self, run_ids: Sequence[int] | None = None, since: datetime | None = None,
                targets: Sequence[str] = (), workloads: Sequence[str] = (), figures: bool = False) -> History:
        """Every ``ok`` result with a report, for ``analyze.history``: of the runs ``run_ids`` (default
        all), ending at or after ``since`` (a result's ``ended_at``, else its run's start), on ``targets``
        and of ``workloads`` (a stored workload name, or a fio job name its job text has a section
        for; empty: any), in run and plan order, and their runs. With ``figures``, each result's stored
        figures (``HistoryResult.figures``, ``store.history.FIGURES``) instead of its report where stored.

        Faster than ``get_run`` by an order of magnitude: reports are decoded (orjson) but neither
        validated nor turned into model objects (``HistoryResult.report``), and equal target facts are
        read once; figures faster again. A row that does not load makes its run an ``UnreadableRun``
        in ``History.unreadable``.
        """
        with self.engine.connect() as conn:
            found, bad = stored_history.results_of(
                conn, stored_history.query(run_ids, since, targets, workloads, figures), figures)
            ids = sorted({r.run_id for r in found} - set(bad))
            rows = conn.execute(sa.select(runs).where(runs.c.id.in_(ids)).order_by(runs.c.id)).mappings().all()
            tags = self._tags(conn, ids)
        infos = [self._loaded(r["id"], lambda r=r: self._info(r, tags.get(r["id"], {}))) for r in rows]
        bad.update({i.run_id: i for i in infos if isinstance(i, UnreadableRun)})
        return History(tuple(i for i in infos if not isinstance(i, UnreadableRun)),
                       tuple(r for r in found if r.run_id not in bad), tuple(bad.values()))

    def change_points(self) -> stored_history.ChangePointCache:
        """The change points history found before (``store.history.ChangePointCache``)."""
        return stored_history.ChangePointCache(self.engine, self.guard, not self.read_only)

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
        for r in conn.execute(sa.select(run_tags).where(run_tags.c.run_id.in_(run_ids)).order_by(run_tags.c.key)):
            out.setdefault(r.run_id, {})[r.key] = r.value
        return out

    @staticmethod
    def _info(row: Any, tags: Mapping[str, str]) -> RunInfo:
        return RunInfo(
            id=row["id"], created_at=utc(row["created_at"]),  # type: ignore[arg-type]
            finished_at=utc(row["finished_at"]), status=effective_status(row["status"], row["options"]),
            origin=row["origin"], suite_name=row["suite_name"], suite_text=row["suite_text"], label=row["label"],
            tags=dict(tags),
            fio_version=row["fio_version"], host=column("host", HostFacts, row["host"]) if row["host"] else None,
            warnings=tuple(row["warnings"] or ()), source=row["source"], options=row["options"] or {},
        )

    @staticmethod
    def _result(row: Any) -> ResultRecord:
        return ResultRecord(
            id=row["id"], run_id=row["run_id"], seq=row["seq"], target=row["target"],
            target_path=row["target_path"], workload=row["workload"], repeat=row["repeat"],
            status=row["status"], job_text=row["job_text"], job_hash=row["job_hash"], params=row["params"] or {},
            command=row["command"], started_at=utc(row["started_at"]), ended_at=utc(row["ended_at"]),
            error=row["error"], report=column("report", FioReport, row["report"]) if row["report"] else None,
            target_facts=column("target_facts", TargetFacts, row["target_facts"]) if row["target_facts"] else None,
            extra=row["extra"] or {},
        )

