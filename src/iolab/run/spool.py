"""The spool: each job's work directory, and its finished result, kept on disk until the database has it.

A job runs in ``$XDG_STATE_HOME/iolab/spool/<database>/run-<id>-<time>/result-<result id>/``
(``Spool.workdir``; default ``~/.local/state/iolab/spool``): fio's job file, output, messages and logs
go there. When the job ends, what is to be stored is written beside them as ``result.json``
(``Spool.seal``: written whole to a temporary file, fsynced, then renamed in place, through
``outputs.writing``) before the database is asked to store it,
and the directory is removed only once the database has committed it (``Spool.remove``). A result is
therefore never lost to the database: if the write fails (the database stayed away longer than
``--db-wait``, iolab was killed in the write), ``--resume`` stores what the spool holds first
(``execute``), and a directory without ``result.json`` is a job that never finished, removed then
(``Spool.sweep``). Storing a sealed result twice is harmless: it updates its own row by id.

``<database>`` is a hash of the database's URL (password hidden), since run ids are per database;
the run's directory is named after its id and creation time (``run-<id>-<created_at>``).

A work directory is writable by fio and whatever its job runs (``exec_prerun`` with ``--allow-exec``),
and iolab writes and reads there after them, outside the fence: so nothing there is opened by a name
that could have been planted. The sealed result goes to a temporary file of an unguessable name created
with ``O_EXCL | O_NOFOLLOW`` and is renamed over ``result.json`` (a link planted there is refused, never
followed); it is read back with ``O_NOFOLLOW`` and only when it is a regular file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .. import outputs
from ..errors import IolabError
from ..model import FioReport, HostSamples, TargetFacts, TimeSeries, from_jsonable, to_json_text
from ..units import format_bytes

if TYPE_CHECKING:
    from ..model import Run
    from ..store.database import Store

SEALED = "result.json"
#: Room the spool's file system must have before a run: fio's json+ output and 1 s logs of a job are
#: tens to hundreds of KiB; a job with its own per-I/O logs can write more.
MIN_FREE_BYTES = 16 * 1024 * 1024


def spool_root() -> Path:
    """``$XDG_STATE_HOME/iolab/spool`` (default ``~/.local/state/iolab/spool``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    # resolved: the fence binds it writable by its real path
    return (Path(base) / "iolab" / "spool").resolve()


def make(directory: Path | None = None) -> None:
    """Create ``directory`` in the spool (default: the spool itself), or raise ``IolabError`` saying where
    it could not be written (checked before a run)."""
    directory = directory or spool_root()
    hint = ("iolab keeps each job's fio output in $XDG_STATE_HOME/iolab/spool (default ~/.local/state/iolab/spool) "
            "until the database has it; make it writable, with room")
    try:
        outputs.directory(directory, "iolab's spool")
        free = shutil.disk_usage(directory).free
    except OSError as exc:
        raise IolabError(f"cannot write iolab's spool at {directory}: {exc.strerror or exc}", hint=hint) from None
    if free < MIN_FREE_BYTES:
        raise IolabError(f"iolab's spool at {directory} is on a file system with {format_bytes(free)} free; fio's "
                         f"output and logs need room there (at least {format_bytes(MIN_FREE_BYTES)})", hint=hint)


@dataclass(frozen=True)
class JobEnd:
    """How an invocation ended: the arguments of ``Store.save_result`` (see there), as sealed in the spool."""

    status: str
    command: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    error: str | None = None
    report: FioReport | None = None
    raw_json: str | None = None
    target_facts: TargetFacts | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    series: Sequence[TimeSeries] = ()
    observations: Sequence[HostSamples] = ()

    def saved(self) -> dict[str, Any]:
        """The keyword arguments of ``Store.save_result``."""
        return {f.name: getattr(self, f.name) for f in fields(self)} | {
            "extra": dict(self.extra), "series": tuple(self.series), "observations": tuple(self.observations)}


class Spool:
    """The spool of one run in one database (see the module). ``workdir`` raises ``IolabError`` when the
    state directory cannot be written; ``seal`` raises ``outputs.OutputError`` (the caller stores the
    result without the spool's copy)."""

    def __init__(self, display_url: str, run_id: int, created_at: datetime, root: Path | None = None) -> None:
        key = hashlib.sha256(display_url.encode()).hexdigest()[:16]
        self.base = (root or spool_root()) / key
        # The run's creation time too: a database made anew at the same place counts its runs from 1 again.
        self.path = self.base / f"run-{run_id}-{created_at.strftime('%Y%m%dT%H%M%S%f')}"
        self.display_url = display_url

    def workdir(self, name: str | int) -> Path:
        """A fresh, empty work directory for result ``name`` (an id, or ``precondition``): what was
        left there by an earlier attempt is removed."""
        directory = self.path / (f"result-{name}" if isinstance(name, int) else name)
        shutil.rmtree(directory, ignore_errors=True)
        self._make(directory)
        return directory

    def check(self) -> None:
        """Before a run: the spool can be written (raises ``IolabError`` saying where)."""
        self._make(self.path)

    def _make(self, directory: Path) -> None:
        make(directory)
        marker = self.base / "database"
        if not marker.exists():  # for whoever looks in the spool: which database these runs belong to
            outputs.write(marker, "the spool's note of its database", self.display_url + "\n")

    def seal(self, result_id: int, end: JobEnd) -> None:
        """Write ``end`` durably as result ``result_id``'s ``result.json`` (a temporary file fsynced, renamed,
        the directory fsynced: ``outputs.writing``). Raises ``outputs.OutputError`` (a link or another
        file put at ``result.json``, no room)."""
        outputs.write(self.path / f"result-{result_id}" / SEALED, "the spooled result", to_json_text(end),
                      durable=True, private=True)

    def remove(self, name: str | int) -> None:
        """Remove a result's (or another) work directory: the database has it, or it never finished."""
        shutil.rmtree(self.path / (f"result-{name}" if isinstance(name, int) else name), ignore_errors=True)

    def sealed(self) -> list[tuple[int, JobEnd | None]]:
        """The sealed results, by result id; ``None`` for one whose ``result.json`` does not load
        (written by another iolab version)."""
        out: list[tuple[int, JobEnd | None]] = []
        for directory in self._result_dirs():
            try:
                text = _read_sealed(directory / SEALED)
            except FileNotFoundError:
                continue
            try:
                end = from_jsonable(JobEnd, orjson.loads(text)) if text is not None else None
            except ValueError:
                end = None
            out.append((int(directory.name.removeprefix("result-")), end))
        return out

    def sweep(self) -> int:
        """Remove every work directory of this run that holds no sealed result (jobs that never finished,
        a precondition's); returns how many. Only for a run that is not running."""
        count = 0
        if not self.path.is_dir():
            return 0
        for entry in self.path.iterdir():
            if entry.is_dir() and not (entry / SEALED).exists():
                shutil.rmtree(entry, ignore_errors=True)
                count += 1
        if not any(self.path.iterdir()):
            self.path.rmdir()
        if {p.name for p in self.base.iterdir()} <= {"database"}:  # no run of this database has anything left
            (self.base / "database").unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # another run of this database made its directory meanwhile
                self.base.rmdir()
        return count

    def store_into(self, store: Store, run: Run) -> int:
        """Store the sealed results of ``run`` whose rows have not ended; returns how many. A result
        the database has already (iolab was killed between the commit and the removal) is only removed
        here. One that does not load stays, and the run's warnings say where."""
        open_ids = {r.id for r in run.results if r.status in ("pending", "running", "interrupted")}
        known = {r.id for r in run.results}
        stored = 0
        for result_id, end in self.sealed():
            if end is None:
                if result_id in open_ids:
                    store.update_run(run.info.id, warnings=[*run.info.warnings, f"a spooled result in {self.path} "
                                                            f"(result {result_id}) could not be read by this iolab"])
                continue
            if result_id in open_ids:
                store.save_result(result_id, **end.saved())
                stored += 1
            if result_id in known:
                self.remove(result_id)
        return stored

    def _result_dirs(self) -> list[Path]:
        """The run's ``result-<id>`` work directories (links are not directories here), by id."""
        if not self.path.is_dir():
            return []
        return sorted((d for d in self.path.iterdir() if d.name.startswith("result-")
                       and d.name.removeprefix("result-").isdigit() and not d.is_symlink() and d.is_dir()),
                      key=lambda d: int(d.name[7:]))


def _read_sealed(path: Path) -> bytes | None:
    """A sealed result's bytes, None when what is there is not a regular file or cannot be read; raises
    ``FileNotFoundError`` when there is none. Never follows a link, never waits on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError:  # ELOOP: a link
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(os.dup(fd), "rb") as file:
            return file.read()
    except OSError:
        return None
    finally:
        os.close(fd)
