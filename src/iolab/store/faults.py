"""Faults of the results database: which ones pass, how long to wait them out, and what to tell the user.

A run stores each result the moment its job ends (``run.job``); when the database is away at that
moment (PostgreSQL restarting, SQLite locked by another writer or on a full file system) the write
is retried with back-off for a bounded time (``Guard``, default ``DEFAULT_WAIT_S``) instead of
losing the result. Faults that do not pass by waiting (a read-only database, a wrong password, a
missing table) are raised at once. Either way the user reads one line naming the database (password
hidden), what failed and what to do: never SQL text or parameters (``describe``).

The checks before a run (``check_sqlite_writable``, ``check_sqlite_room``) name a read-only file,
directory or mount as such, and refuse a file system without room for the run's results.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..errors import StoreError
from ..units import format_bytes, format_duration

if TYPE_CHECKING:  # imported where a database is used: a run's planning does not wait for it
    import sqlalchemy as sa

T = TypeVar("T")

#: How long a write waits for the database to come back, by default (``--db-wait``): a PostgreSQL
#: restart or fail-over takes seconds to a minute; a backup holding an SQLite lock, about as long.
DEFAULT_WAIT_S = 180.0
#: SQLite's own lock wait per attempt (``PRAGMA busy_timeout``), at most a quarter of the bound: short
#: so that the run can say it is waiting; the attempts together stay within the bound.
SQLITE_BUSY_MS = 2000
#: Back-off between attempts: first, factor, most.
BACKOFF_S = (0.25, 2.0, 5.0)
#: Room a result may take in SQLite: a json+ report of one job with fio's 1 s logs was measured at 10-20 KiB
#: (report JSON, compressed output, series), written twice (WAL, then the database) in whole 4 KiB pages;
#: 192 KiB leaves room for reports holding many jobs (numjobs without group_reporting).
RESULT_BYTES = 192 * 1024
#: Room kept free beyond the results: the WAL's growth until a checkpoint and the file system's own.
ROOM_MARGIN_BYTES = 16 * 1024 * 1024

#: SQLite's messages for faults that pass (sqlite3.OperationalError has no code before Python 3.11's
#: ``sqlite_errorcode``, and SQLAlchemy wraps it anyway): a lock, a full disk, an I/O error on it.
_SQLITE_TRANSIENT = ("database is locked", "database table is locked", "database or disk is full",
                     "disk i/o error", "unable to open database file")
#: PostgreSQL (psycopg) operational errors that waiting does not fix.
_PG_PERMANENT = ("authentication failed", "does not exist", "no password supplied", "permission denied")


class DatabaseUnavailable(StoreError):
    """The database stayed away for the whole bound (``Guard.wait_s``); ``reason`` says what it last said."""

    def __init__(self, message: str, hint: str | None, reason: str) -> None:
        super().__init__(message, hint)
        self.reason = reason


@dataclass(frozen=True)
class Wait:
    """The database is away: ``reason`` (one line, as the driver says it), seconds ``waited_s`` of ``bound_s``.
    ``back`` is True once it answers again (``waited_s`` is then the whole wait)."""

    what: str
    reason: str
    waited_s: float
    bound_s: float
    back: bool = False


def describe(exc: BaseException) -> str:
    """One line on what the driver said: the DBAPI error's first line, without the SQL statement
    and parameters SQLAlchemy appends (``[SQL: …]``), nor psycopg's multi-line detail."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    first = text.splitlines()[0].strip() if text else type(orig or exc).__name__
    if first.startswith("(") and ") " in first:  # "(sqlite3.OperationalError) database is locked"
        first = first.split(") ", 1)[1]
    return first.split(" [SQL:", 1)[0]


def transient(exc: BaseException) -> bool:
    """Whether waiting may fix ``exc``: a lost or refused connection, a lock, a full disk."""
    import sqlalchemy as sa
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    if not isinstance(exc, sa.exc.OperationalError):
        return False
    text = describe(exc).lower()
    module = type(getattr(exc, "orig", None)).__module__ or ""
    if module.startswith("sqlite3"):
        return any(s in text for s in _SQLITE_TRANSIENT)
    return not any(s in text for s in _PG_PERMANENT)


def hint_for(reason: str) -> str:
    """What to do about a fault the driver described as ``reason``."""
    text = reason.lower()
    if "readonly" in text or "read-only" in text or "read only" in text:
        return ("give a writable database with --db or $IOLAB_DB (reading commands such as runs, show, report "
                "and compare work on this one)")
    if "disk is full" in text or "no space" in text:
        return "free space on the file system that holds it, or give another database with --db"
    if "locked" in text:
        return "another program holds a write lock on it (a backup, a sqlite3 shell in a transaction); end it"
    if "authentication" in text or "password" in text:
        return "check the user and password in --db / $IOLAB_DB"
    return "check that the database server is running and reachable (--db / $IOLAB_DB)"


class Guard:
    """Runs one database call at a time, waiting out transient faults for at most ``wait_s`` seconds.

    ``on_wait`` hears each ``Wait`` while the database is away, and once more when it is back.
    Raises ``DatabaseUnavailable`` past the bound, ``StoreError`` (one line, with a hint) for a fault
    that does not pass; KeyboardInterrupt goes through (Ctrl-C ends the wait).
    """

    def __init__(self, display_url: str, wait_s: float = DEFAULT_WAIT_S,
                 on_wait: Callable[[Wait], None] | None = None) -> None:
        self.display_url, self.wait_s, self.on_wait = display_url, wait_s, on_wait

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()``, retried with back-off while it fails transiently; ``what`` says what it does
        ("store a result"), for messages."""
        import sqlalchemy as sa
        start, delay, reason = time.monotonic(), BACKOFF_S[0], None
        while True:
            try:
                value = fn()
            except sa.exc.SQLAlchemyError as exc:
                reason = describe(exc)
                waited = time.monotonic() - start
                if not transient(exc):
                    raise StoreError(f"the results database {self.display_url}: cannot {what}: {reason}",
                                     hint=hint_for(reason)) from exc
                if waited >= self.wait_s:
                    raise DatabaseUnavailable(
                        f"the results database {self.display_url} was away longer than the "
                        f"{format_duration(self.wait_s)} iolab waits (--db-wait): cannot {what}: {reason}",
                        hint_for(reason), reason) from exc
                self._tell(Wait(what, reason, waited, self.wait_s))
                time.sleep(max(0.0, min(delay, self.wait_s - waited)))
                delay = min(delay * BACKOFF_S[1], BACKOFF_S[2])
                continue
            if reason is not None:
                self._tell(Wait(what, reason, time.monotonic() - start, self.wait_s, back=True))
            return value

    def _tell(self, wait: Wait) -> None:
        if self.on_wait is not None:
            self.on_wait(wait)


def probe_write(engine: sa.Engine) -> None:
    """A write that changes nothing, rolled back: it fails as a real one would (a read-only transaction
    or server, no UPDATE right, SQLite's write lock held by another program)."""
    with engine.connect() as conn:
        transaction = conn.begin()
        try:
            conn.exec_driver_sql("UPDATE runs SET status = status WHERE id = (SELECT max(id) FROM runs)")
        finally:
            transaction.rollback()


@contextmanager
def waits_told(guard: Guard, on_wait: Callable[[Wait], None]) -> Iterator[None]:
    """``guard``'s waits go to ``on_wait`` inside the block (as they went before, after it)."""
    previous, guard.on_wait = guard.on_wait, on_wait
    try:
        yield
    finally:
        guard.on_wait = previous


def sqlite_path(url: str) -> Path | None:
    """The file of an SQLite URL (``sqlite:///path``), None for another database or an in-memory one."""
    if not url.startswith("sqlite:///"):
        return None
    path = url.removeprefix("sqlite:///").split("?", 1)[0]
    return Path(path.removeprefix("file:")) if path and path != ":memory:" else None


def _read_only_mount(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def sqlite_read_only(path: Path) -> str | None:
    """Why this process cannot write the SQLite database ``path`` (a read-only mount, file or
    directory, in words naming it), or None. SQLite in WAL mode writes ``-wal`` and ``-shm`` files
    beside the database, so the directory must be writable too."""
    directory = path.parent
    existing = path if path.exists() else directory
    if _read_only_mount(existing):
        return f"is on a read-only file system ({_mount_point(existing)})"
    if path.exists() and not os.access(path, os.W_OK):
        return "is a read-only file (no write permission for this user)"
    if directory.exists() and not os.access(directory, os.W_OK | os.X_OK):
        return (f"is in a read-only directory ({directory}: no write permission for this user, and SQLite "
                "writes its -wal and -shm files beside the database)")
    return None


def make_sqlite_dir(path: Path, display_url: str) -> None:
    """Make the directory of the SQLite database ``path``. Raises ``StoreError`` (``sqlite_open_hint``)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot open the results database {display_url}: cannot make its directory: "
                         f"{exc.strerror or exc}", hint=sqlite_open_hint(path)) from exc


def sqlite_open_hint(path: Path) -> str:
    """What to do when SQLite cannot open ``path`` ("unable to open database file"): the file is a
    directory, or its directory is missing, not a directory, or not writable; named with its mode and owner
    (a server's hint, ``hint_for``, would send an SQLite user looking for a server)."""
    directory = path.parent
    if path.is_dir():
        return f"{path} is a directory; give a file in it with --db (such as {path / 'iolab.db'})"
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory, so {path} cannot be created there; give another path with --db"
    if existing != directory:
        return (f"the directory {directory} does not exist and cannot be made in {existing} "
                f"({_permissions(existing)}); create it, or give another path with --db")
    return (f"SQLite needs to write {path} and its -wal and -shm files in {directory} ({_permissions(directory)}); "
            "make it writable for this user, or give another path with --db / $IOLAB_DB")


def _permissions(path: Path) -> str:
    """``mode drwxr-xr-x, owner root``, or what stat said."""
    import pwd
    import stat
    try:
        st = path.stat()
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    return f"mode {stat.filemode(st.st_mode)}, owner {owner}"


def _mount_point(path: Path) -> str:
    path = path.resolve()
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return str(path)


def check_sqlite_room(path: Path, results: int, display_url: str) -> None:
    """Refuse when the file system holding ``path`` lacks room for ``results`` results (``RESULT_BYTES``
    each) plus ``ROOM_MARGIN_BYTES``. Raises ``StoreError``."""
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        return
    needed = results * RESULT_BYTES + ROOM_MARGIN_BYTES
    if free < needed:
        raise StoreError(
            f"the results database {display_url} is on a file system with {format_bytes(free)} free; this run's "
            f"{results} result(s) need about {format_bytes(needed)} ({format_bytes(RESULT_BYTES)} each and "
            f"{format_bytes(ROOM_MARGIN_BYTES)} to spare)",
            hint=f"free space on {_mount_point(path.parent)}, or give another database with --db")
