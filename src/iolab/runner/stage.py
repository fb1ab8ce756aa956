"""The files fio writes are the ones the guard checked: staged in a directory of iolab's own, reserved
by name, bound by descriptor.

fio lays a file out by unlinking it and creating it anew (``filesetup.c`` ``extend_file``), so it must be
able to create names in the file's directory; but where a name can be created it can also be replaced:
a hard link to someone's file placed at a planned name between the guard's check and fio's ``open``
is the file fio then writes. So each directory fio creates or lays out files in is a *view*: iolab
makes a directory of its own inside it (``.iolab-stage-…``, mode 0700, on the same file system) and
the fence binds that over the directory (``runner.fence``, ``--bind-fd``). fio sees there only the
planned files, creates and lays them out in iolab's directory, and no other entry of the real
directory exists for it — however many it holds. Before fio starts (``prepare``):

* each new name the plan gives is *reserved* in the real directory: created by iolab with
  ``O_EXCL | O_NOFOLLOW`` (a directory, for a planned path whose directories are missing too).
  Anything already there — a link placed since the check — makes the job refuse with nothing
  written; while fio runs the name holds iolab's empty reservation, so nothing else appears there;
* an existing file fio may write in a view is exchanged (``renameat2`` ``RENAME_EXCHANGE``) with an
  empty reservation made in iolab's directory: the name must hold the file the guard checked (device,
  inode, link count, status change time) and what came over the same inode, or it is put back and the
  job refused;
* an existing file outside any view is opened by iolab (``O_NOFOLLOW``), checked the same way and
  bound writable by that descriptor: the fence holds the inode checked, whatever the name means later;
* each of them carries a ``writing`` mark for the run (``runner.marks``).

After fio (``Staging.finish``) each staged file is exchanged back over its reservation — only if the
reservation is still there: a name replaced while fio ran keeps what is there, and iolab's file is
dropped — marked as it is now through a descriptor iolab holds, and iolab's directory removed. What is
staged is journalled before it is done, in ``$XDG_STATE_HOME/iolab/staging``, locked by its live owner:
``sweep`` undoes what a killed iolab left (its reservations removed, exchanged files put back, its
directories removed). Without a fence (``--no-fence``) the reservations and checks are made in place,
and fio writes the real directory itself.

Source: rename(2) ``RENAME_EXCHANGE``; open(2) ``O_EXCL``, ``O_NOFOLLOW``; bubblewrap(1) ``--bind-fd``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import secrets
import shutil
import stat
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FioError, SafetyError
from . import marks
from .fence import is_device

PREFIX = ".iolab-stage-"
#: Where nothing is ever staged (kernel and device trees); a RAM disk in /dev/shm is.
_NEVER = ("/dev", "/proc", "/sys", "/run")
_SHM = "/dev/shm"
_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2
#: errnos of a file system that cannot exchange names (``renameat2`` flags unsupported).
_NO_EXCHANGE = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP})
_DIR = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_RESERVE = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC

#: A file's identity as the guard checked it: device, inode, link count, status change time (an inode
#: number reused by a file made since, or a link added, is another identity).
Identity = tuple[int, int, int, int]


def identity(st: os.stat_result) -> Identity:
    """``st`` as an ``Identity``."""
    return st.st_dev, st.st_ino, st.st_nlink, st.st_ctime_ns


def state_dir() -> Path:
    """``$XDG_STATE_HOME/iolab/staging`` (default ``~/.local/state/iolab/staging``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "iolab" / "staging"


@dataclass(frozen=True)
class Layout:
    """Where each planned path fio may write goes (``layout``): ``views`` directory -> the planned paths
    in it (real paths), ``bound`` existing files written in place (as the job names them), ``reads``
    planned files a job only reads that lie in a view (bound read-only there)."""

    views: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    bound: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def layout(writable: Mapping[str, str], relaid: Collection[str], trees: Collection[str], read: Sequence[str],
           workdir: Path, identities: Collection[str] = ()) -> Layout:
    """Sort the paths fio may write (``writable``, as the guard decided) into views and files bound in
    place: a new path (one the guard found missing: not in ``identities``, whatever is there now) goes
    to the view of its nearest existing directory; an existing file to the view
    of its directory when fio lays it out anew (``relaid``: smaller than the job's size) or when that
    directory is a view anyway, else it is bound in place. Devices, directories (their planned files
    are planned themselves), ``opendir`` trees (bound whole), paths in iolab's work directory and under
    /dev (but /dev/shm), /proc, /sys and /run are left out."""
    skip = [str(workdir), *trees]
    views: dict[str, list[str]] = {}
    bound: list[str] = []
    for path in dict.fromkeys(os.path.abspath(p) for p in writable):
        if any(_under(path, s) for s in skip) or is_device(path):
            continue
        if path not in identities and not os.path.isdir(path):
            existing = os.path.dirname(path)
            while not os.path.lexists(existing) and existing != "/":
                existing = os.path.dirname(existing)
            real = os.path.realpath(existing)
            kernel = any(_under(real, d) for d in _NEVER) and not _under(real, _SHM)
            if existing != "/" and os.path.isdir(real) and not kernel:
                views.setdefault(real, []).append(os.path.join(real, os.path.relpath(path, existing)))
        elif os.path.isfile(path) and not os.path.isdir(path):
            (views.setdefault(os.path.dirname(os.path.realpath(path)), []) if path in relaid else bound).append(path)
    placed = [p for p in bound if os.path.dirname(os.path.realpath(p)) in views]
    for path in placed:
        views[os.path.dirname(os.path.realpath(path))].append(os.path.realpath(path))
    reads = tuple(p for p in dict.fromkeys(os.path.abspath(r) for r in read)
                  if os.path.isfile(p) and any(_under(os.path.realpath(p), v) for v in views))
    return Layout({v: tuple(dict.fromkeys(os.path.realpath(p) if p in identities else p for p in ps))
                   for v, ps in views.items()}, tuple(p for p in bound if p not in placed), reads)


@dataclass
class _Entry:
    """A name in a view's directory: ``new`` (reserved by iolab; a ``directory`` when planned paths lie
    beneath it) or an existing file exchanged in; ``planned`` the planned paths it holds."""

    name: str
    new: bool
    directory: bool
    planned: tuple[str, ...]
    reserved: tuple[int, int] | None = None
    swapped: bool = False
    created: bool = False


@dataclass
class _View:
    directory: str
    fd: int
    stage: str | None = None
    stage_fd: int | None = None
    entries: list[_Entry] = field(default_factory=list)


class Staging:
    """What ``prepare`` set up for one fio invocation, and ``finish`` undoes after it."""

    def __init__(self, run: str | None, owner: Mapping[str, Any], fenced: bool) -> None:
        self.run, self.owner, self.fenced = run, dict(owner), fenced
        self.views: list[_View] = []
        self.bound: list[tuple[str, int, bool]] = []  # path, descriptor, created by this run
        self.reads: tuple[str, ...] = ()
        self.notes: list[str] = []
        directory = state_dir()
        directory.mkdir(parents=True, exist_ok=True)
        self.journal = directory / f"stage-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
        self._journal_fd = os.open(self.journal, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC,
                                   0o600)
        fcntl.flock(self._journal_fd, fcntl.LOCK_EX)  # held while this process lives: ``sweep`` leaves it
        self._note({"owner": {"pid": os.getpid(), "argv": sys.argv}})

    def _note(self, record: Mapping[str, Any], sync: bool = False) -> None:
        os.write(self._journal_fd, (json.dumps(record) + "\n").encode())
        if sync:
            os.fsync(self._journal_fd)

    @property
    def fd_binds(self) -> tuple[tuple[int, str], ...]:
        """What the fence binds writable by descriptor: each view's own directory over the directory,
        each file written in place at its name."""
        return (*((v.stage_fd, v.directory) for v in self.views if v.stage_fd is not None),
                *((fd, path) for path, fd, _ in self.bound))

    @property
    def directories(self) -> tuple[str, ...]:
        """The directories fio sees as iolab's own (views)."""
        return tuple(v.directory for v in self.views if v.stage_fd is not None)

    # --- before fio ---------------------------------------------------------------------------

    def view(self, directory: str, planned: Sequence[str], identities: Mapping[str, Identity]) -> None:
        """Stage ``directory`` (see the module docstring): reserve the new names of ``planned``,
        exchange its existing files in. Raises ``SafetyError`` when a name is not what was checked."""
        view = _View(directory, os.open(directory, _DIR))
        self.views.append(view)
        groups: dict[str, list[str]] = {}
        for path in planned:
            groups.setdefault(os.path.relpath(path, directory).split("/")[0], []).append(path)
        for name, paths in groups.items():
            beneath = any(p != os.path.join(directory, name) for p in paths)
            # a file the guard found missing is new whatever is there now: its reservation then fails
            new = _lstat(name, view.fd) is None if beneath else paths[0] not in identities
            view.entries.append(_Entry(name, new, beneath, tuple(paths)))
        if self.fenced:
            view.stage = f"{PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
            self._note({"stage": view.stage, "dir": directory}, sync=True)
            os.mkdir(view.stage, 0o700, dir_fd=view.fd)
            view.stage_fd = os.open(view.stage, _DIR | os.O_NOFOLLOW, dir_fd=view.fd)
        for entry in list(view.entries):
            if entry.new:
                self._reserve(view, entry)
            elif view.stage_fd is not None:
                self._exchange_in(view, entry, identities)
            else:
                self._check_in_place(view, entry, identities)
        os.fsync(self._journal_fd)

    def _reserve(self, view: _View, entry: _Entry) -> None:
        path = os.path.join(view.directory, entry.name)
        if not self.fenced and entry.directory:
            return  # fio creates the directories itself, in place
        try:
            if entry.directory:
                os.mkdir(entry.name, 0o755, dir_fd=view.fd)
                st = os.lstat(entry.name, dir_fd=view.fd)
            else:
                fd = os.open(entry.name, _RESERVE, 0o644, dir_fd=view.fd)
                try:
                    st = os.fstat(fd)
                    marks.mark(fd, writing=True, run=self.run, created=True, owner=self.owner)
                finally:
                    os.close(fd)
        except FileExistsError:
            raise SafetyError(f"refusing to run the job: {path} appeared after the guard checked it (it did not "
                              "exist then); iolab creates the files a job names itself, so nothing was written "
                              "there", hint="find out what put it there, then run again") from None
        entry.reserved = (st.st_dev, st.st_ino)
        self._note({"reserved": entry.name, "dir": view.directory, "directory": entry.directory,
                    "dev": st.st_dev, "ino": st.st_ino})

    def _exchange_in(self, view: _View, entry: _Entry, identities: Mapping[str, Identity]) -> None:
        assert view.stage_fd is not None
        path = entry.planned[0]
        now = _lstat(entry.name, view.fd)
        if now is None or identity(now) != identities.get(path):
            raise _changed(path)
        fd = os.open(entry.name, _RESERVE, 0o600, dir_fd=view.stage_fd)
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        entry.reserved = (st.st_dev, st.st_ino)
        self._note({"moved": entry.name, "dir": view.directory, "stage": view.stage, "dev": st.st_dev,
                    "ino": st.st_ino}, sync=True)
        try:
            _rename2(view.stage_fd, entry.name, view.fd, entry.name, _RENAME_EXCHANGE)
        except OSError as exc:
            if exc.errno not in _NO_EXCHANGE:
                raise
            os.unlink(entry.name, dir_fd=view.stage_fd)  # this file system cannot: write it in place
            view.entries.remove(entry)
            self._bind(path, identities)
            return
        entry.swapped = True
        with marks.opened(entry.name, dir_fd=view.stage_fd) as held:
            came = os.fstat(held) if held is not None else None  # the exchange changed its ctime: the rest
            if came is None or identity(came)[:3] != (identities.get(path) or ())[:3]:
                raise _changed(path)
            entry.created = _created(held, self.run)

    def _check_in_place(self, view: _View, entry: _Entry, identities: Mapping[str, Identity]) -> None:
        with marks.opened(entry.planned[0]) as held:
            st = os.fstat(held) if held is not None else None
            if st is None or identity(st) != identities.get(entry.planned[0]):
                raise _changed(entry.planned[0])
            entry.created = _created(held, self.run)

    def bind(self, paths: Sequence[str], identities: Mapping[str, Identity]) -> None:
        """Open each existing file fio writes in place (``Layout.bound``) and check it is the inode the
        guard checked; raises ``SafetyError`` otherwise."""
        for path in paths:
            self._bind(path, identities)

    def _bind(self, path: str, identities: Mapping[str, Identity]) -> None:
        try:
            fd = os.open(os.path.realpath(path), marks.OPEN_FLAGS)
        except OSError:
            raise _changed(path) from None
        st = os.fstat(fd)
        if identity(st) != identities.get(path):
            os.close(fd)
            raise _changed(path)
        self.bound.append((path, fd, _created(fd, self.run)))

    def mark_writing(self) -> None:
        """Every existing file fio may write marked as being written by this run (``runner.marks``),
        once all of them passed their checks (a refused job leaves every mark as it was)."""
        for view in self.views:
            for entry in view.entries:
                if not entry.new:
                    directory = view.stage_fd if view.stage_fd is not None else view.fd
                    with marks.opened(entry.name, dir_fd=directory) as held:
                        if held is not None:
                            marks.mark(held, writing=True, run=self.run, created=entry.created, owner=self.owner)
        for _, fd, created in self.bound:
            marks.mark(fd, writing=True, run=self.run, created=created, owner=self.owner)

    # --- after fio ----------------------------------------------------------------------------

    def finish(self, ran: bool = True) -> list[str]:
        """Put every staged file back over its reservation and, when fio ``ran``, mark what it left
        (``runner.marks``, through descriptors); remove iolab's directories and the journal. Returns
        what could not be done as planned (a name replaced while fio ran), for people."""
        for view in self.views:
            for entry in view.entries:
                with contextlib.suppress(OSError):
                    self._finish_entry(view, entry, ran)
            if view.stage is not None:
                with contextlib.suppress(OSError):
                    shutil.rmtree(view.stage, dir_fd=view.fd)
            for fd in (view.stage_fd, view.fd):
                if fd is not None:
                    os.close(fd)
        for path, fd, created in self.bound:
            if ran:  # fenced, fio wrote the inode bound; unfenced it may have laid the name out anew
                marks.mark(fd if self.fenced else path, run=self.run, created=created)
            os.close(fd)
        self.views, self.bound = [], []
        self.journal.unlink(missing_ok=True)
        os.close(self._journal_fd)
        return self.notes

    def _finish_entry(self, view: _View, entry: _Entry, ran: bool) -> None:
        if view.stage_fd is None:  # no fence: fio wrote the real directory; mark what it left there
            if not ran and entry.new and entry.reserved is not None:
                _remove_if(view.fd, entry.name, entry.reserved, entry.directory)
            for path in entry.planned if ran else ():
                marks.mark(path, run=self.run, created=entry.created or entry.new)
            return
        if entry.reserved is None or (not entry.new and not entry.swapped):
            return
        st = _lstat(entry.name, view.stage_fd)
        if st is None or (entry.new and not (stat.S_ISDIR if entry.directory else stat.S_ISREG)(st.st_mode)):
            # fio removed it (unlink=1), never made it, or something else than planned is there: dropped
            _remove_if(view.fd, entry.name, entry.reserved, entry.directory)
            return
        with marks.opened(entry.name, dir_fd=view.stage_fd) as held:
            if not self._put_back(view, entry):
                return
            if held is not None and ran:
                marks.mark(held, run=self.run, created=entry.created or entry.new)
        for path in entry.planned if entry.directory and ran else ():
            marks.mark(path, run=self.run, created=True)

    def _put_back(self, view: _View, entry: _Entry) -> bool:
        """Exchange the staged ``entry`` with its reservation in the real directory and remove the
        reservation; False (iolab's file dropped with its directory) when the reservation was
        replaced while fio ran."""
        assert view.stage_fd is not None and entry.reserved is not None
        path = os.path.join(view.directory, entry.name)
        try:
            _rename2(view.stage_fd, entry.name, view.fd, entry.name, _RENAME_EXCHANGE)
        except OSError as exc:
            if exc.errno not in _NO_EXCHANGE:
                raise
            return self._put_back_without_exchange(view, entry, path)
        came = _lstat(entry.name, view.stage_fd)
        if came is None or (came.st_dev, came.st_ino) != entry.reserved:
            _rename2(view.stage_fd, entry.name, view.fd, entry.name, _RENAME_EXCHANGE)
            self.notes.append(f"{path} was replaced while fio ran; iolab left what is there as it is and removed "
                              "its own file")
            return False
        _remove_if(view.stage_fd, entry.name, entry.reserved, entry.directory)
        return True

    def _put_back_without_exchange(self, view: _View, entry: _Entry, path: str) -> bool:
        """The same on a file system that cannot exchange names: the reservation removed if it is still
        iolab's, then the staged entry linked (or, a directory, renamed) to a name that must be free."""
        assert view.stage_fd is not None and entry.reserved is not None
        if not _remove_if(view.fd, entry.name, entry.reserved, entry.directory):
            self.notes.append(f"{path} was replaced while fio ran; iolab left what is there as it is and removed "
                              "its own file")
            return False
        try:
            if entry.directory:
                _rename2(view.stage_fd, entry.name, view.fd, entry.name, _RENAME_NOREPLACE)
            else:
                os.link(entry.name, entry.name, src_dir_fd=view.stage_fd, dst_dir_fd=view.fd,
                        follow_symlinks=False)
        except FileExistsError:
            self.notes.append(f"{path} appeared while fio ran; iolab left it as it is and removed its own file")
            return False
        return True


def _created(fd: int | None, run: str | None) -> bool:
    """Whether the file open as ``fd`` was created by the run ``run`` (its mark says so)."""
    found = marks.read(fd) if fd is not None else None
    return found is not None and run is not None and found[0].get("run") == run and bool(found[0].get("created"))


def _changed(path: str) -> SafetyError:
    return SafetyError(f"refusing to run the job: {path} is not the file the guard checked any more (it was replaced "
                       "or linked to since); nothing was written", hint="find out what changed it, then run again")


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None


def _remove_if(dir_fd: int, name: str, reserved: tuple[int, int], directory: bool) -> bool:
    """Remove ``name`` when it is still the reservation ``reserved`` (an empty directory, or a file);
    whether it was (a name that is something else now is left)."""
    st = _lstat(name, dir_fd)
    if st is None or (st.st_dev, st.st_ino) != reserved:
        return st is None
    try:
        (os.rmdir if directory else os.unlink)(name, dir_fd=dir_fd)
    except OSError:
        return False
    return True


def _rename2(src_fd: int, src: str, dst_fd: int, dst: str, flags: int) -> None:
    """``renameat2(2)``; raises ``OSError`` (``ENOSYS`` where the C library has no ``renameat2``)."""
    libc = ctypes.CDLL(None, use_errno=True)
    call = getattr(libc, "renameat2", None)
    if call is None:
        raise OSError(errno.ENOSYS, "renameat2")
    if call(ctypes.c_int(src_fd), os.fsencode(src), ctypes.c_int(dst_fd), os.fsencode(dst),
            ctypes.c_uint(flags)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), src)


def prepare(writable: Mapping[str, str], identities: Mapping[str, Identity], *, relaid: Collection[str] = (),
            trees: Collection[str] = (), read: Sequence[str] = (), workdir: Path, run: str | None,
            owner: Mapping[str, Any], fenced: bool = True) -> Staging:
    """Stage a job's files right before fio starts (see the module docstring): ``writable`` and
    ``identities`` (path -> ``Identity`` of each existing file, as checked) from the
    guard, ``relaid`` the existing files fio will lay out anew; ``fenced`` False (``--no-fence``):
    reservations and checks in place only. Undoes what it did and raises ``SafetyError`` when a name
    is not what the guard checked; ``OSError`` when iolab cannot create in a directory."""
    identities = {**identities, **{os.path.realpath(p): v for p, v in identities.items()}}
    found = layout(writable, relaid, trees, read, workdir, identities)
    staging = Staging(run, owner, fenced)
    try:
        for directory, planned in found.views.items():
            try:
                staging.view(directory, planned, identities)
            except OSError as exc:
                raise FioError(f"cannot prepare {directory} for fio's files: {exc.strerror or exc}",
                               hint="fio creates its files there: the directory must be writable") from None
        staging.bind(found.bound, identities)
    except BaseException:
        staging.finish(ran=False)
        raise
    staging.mark_writing()
    staging.reads = found.reads
    return staging


def sweep(directory: Path | None = None) -> list[str]:
    """Undo what killed iolab processes left staged (journals nobody holds): files they had exchanged
    in are put back at their names, their reservations removed (when still theirs), their directories
    removed. Returns the journals undone. Never raises for a single journal."""
    directory = directory or state_dir()
    done = []
    with contextlib.suppress(OSError):
        names = sorted(os.listdir(directory))
    for name in names if directory.is_dir() else ():
        if not (name.startswith("stage-") and name.endswith(".jsonl")):
            continue
        try:
            fd = os.open(directory / name, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its owner is alive
            if os.fstat(fd).st_nlink:
                with contextlib.suppress(OSError, ValueError):
                    _undo(_records(fd))
                (directory / name).unlink(missing_ok=True)
                done.append(name)
        finally:
            os.close(fd)
    return done


def _records(fd: int) -> list[dict[str, Any]]:
    with os.fdopen(os.dup(fd), encoding="utf-8") as f:
        out = []
        for line in f.read().splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return [r for r in out if isinstance(r, dict)]


def _undo(records: list[dict[str, Any]]) -> None:
    """Put back exchanged files, remove reservations, then remove iolab's directories."""
    def opened(path: str) -> int | None:
        try:
            return os.open(path, _DIR)
        except OSError:
            return None
    for r in records:
        if "moved" in r and (dfd := opened(r["dir"])) is not None:
            with contextlib.suppress(OSError):
                sfd = os.open(r["stage"], _DIR | os.O_NOFOLLOW, dir_fd=dfd)
                try:
                    st = _lstat(r["moved"], dfd)
                    if st is not None and (st.st_dev, st.st_ino) == (r["dev"], r["ino"]) and \
                            _lstat(r["moved"], sfd) is not None:
                        _rename2(sfd, r["moved"], dfd, r["moved"], _RENAME_EXCHANGE)
                finally:
                    os.close(sfd)
            os.close(dfd)
    for r in records:
        if "reserved" in r and (dfd := opened(r["dir"])) is not None:
            _remove_if(dfd, r["reserved"], (r["dev"], r["ino"]), bool(r.get("directory")))
            os.close(dfd)
    for r in records:
        if "stage" in r and "moved" not in r and (dfd := opened(r["dir"])) is not None:
            st = _lstat(r["stage"], dfd)
            if st is not None and stat.S_ISDIR(st.st_mode) and r["stage"].startswith(PREFIX):
                with contextlib.suppress(OSError):
                    shutil.rmtree(r["stage"], dir_fd=dfd)
            os.close(dfd)
