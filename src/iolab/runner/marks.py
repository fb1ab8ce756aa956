"""iolab's mark on the files its fio jobs wrote: what makes an existing file iolab's, not someone's data.

A file with bytes in it is data, exactly as a device with a signature is, and is written only when
the user names it with ``--destroy`` — unless iolab laid it out itself. That is told by a mark on
the file itself, never by its name: the extended attribute ``user.iolab`` holds the file's identity
as the job left it — ``{"dev", "ino", "size", "mtime_ns"}`` — with the run that laid it out
(``run``, ``run_key``) and whether that run created it (``created``: the scratch clean-up removes
only such files). The file is iolab's only while it is still that inode (a copy that kept the
attribute, ``cp -a``, is another inode), with that size and modification time: a file written
since by anything else is data again.

While a job writes a file the mark says ``{"writing": true, "dev", "ino", "run", "owner"}`` (the
process running the job): whether such a mark still makes the file iolab's is for the guard to
decide (``check.safety``: only for the run that set it, while that run is in progress), never for
anyone else. Marks are set and read through a file descriptor iolab opened itself (``O_NOFOLLOW``),
so the file marked is the file that was checked and written, whatever its name points at by then.

Where the file system has no user extended attributes (some FUSE and NFS mounts), the same mark
is kept in ``$XDG_STATE_HOME/iolab/marks.json`` (default ``~/.local/state/iolab``), keyed by the
file's device and inode. Source: xattr(7).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ATTR = "user.iolab"
#: errnos that mean "this file system keeps no user xattrs" (ENOTSUP is EOPNOTSUPP on Linux).
_NO_XATTRS = frozenset({errno.ENOTSUP, errno.EPERM, errno.EACCES})
#: How iolab opens a file to mark or read it: never through a symbolic link, never blocking on a FIFO.
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def run_key(database: str, run_id: int, created_at: object) -> str:
    """The key a run's marks carry: a hash of its database (as displayed, no password), its id and
    its creation time, so a run of another database with the same id is another run."""
    return hashlib.sha256(f"{database}\n{run_id}\n{created_at}".encode()).hexdigest()[:16]


def identity(st: os.stat_result) -> tuple[int, int]:
    """A file's identity: its device and inode numbers."""
    return st.st_dev, st.st_ino


@contextlib.contextmanager
def opened(target: str | int, *, dir_fd: int | None = None) -> Iterator[int | None]:
    """``target`` as a file descriptor: an open one as it is, a path (relative to the directory open as
    ``dir_fd``, when given) opened ``OPEN_FLAGS`` (None when it cannot be opened so: missing, a symbolic
    link, no permission)."""
    if isinstance(target, int):
        yield target
        return
    try:
        fd = os.open(target, OPEN_FLAGS, dir_fd=dir_fd)
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def mark(target: str | int, *, writing: bool = False, run: str | None = None, created: bool = False,
         owner: Mapping[str, Any] | None = None) -> None:
    """Mark the regular file ``target`` (a path, opened without following a link, or a descriptor
    iolab holds) as iolab's: as it is now, or (``writing``) as being written by ``owner`` for the run
    ``run``. ``created``: the run made the file (the scratch clean-up may remove it). Does nothing
    for anything but a regular file with one name. Best effort: a mark that cannot be kept only
    means the next run asks for ``--destroy``."""
    with opened(target) as fd:
        if fd is None:
            return
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return
        value: dict[str, Any] = {"dev": st.st_dev, "ino": st.st_ino, "run": run, "created": created}
        if writing:
            value.update(writing=True, owner=dict(owner or {}))
        else:
            value.update(size=st.st_size, mtime_ns=st.st_mtime_ns)
        try:
            os.setxattr(fd, ATTR, json.dumps(value).encode())
            return
        except OSError as exc:
            if exc.errno not in _NO_XATTRS:
                return
        with _record() as record:
            record[_key(st)] = value


def read(target: str | int) -> tuple[dict[str, Any], os.stat_result] | None:
    """The mark on the regular file ``target`` (a path, opened without following a link, or a
    descriptor) and the file's status, when the mark names this very inode; None otherwise (no mark,
    a mark copied from another file, not a regular file, cannot be opened)."""
    with opened(target) as fd:
        if fd is None:
            return None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        value = _stored(fd, st)
    if not isinstance(value, dict) or (value.get("dev"), value.get("ino")) != identity(st):
        return None
    return value, st


def complete(value: Mapping[str, Any], st: os.stat_result) -> bool:
    """Whether a mark ``read`` found says iolab finished laying out the file as it still is."""
    return not value.get("writing") and (value.get("size"), value.get("mtime_ns")) == (st.st_size, st.st_mtime_ns)


def is_iolab(target: str | int) -> bool:
    """Whether the regular file ``target`` carries iolab's finished mark and is as the mark says
    (a ``writing`` mark is the guard's to judge: ``check.safety``)."""
    found = read(target)
    return found is not None and complete(*found)


def created_by(target: str | int, run: str) -> bool:
    """Whether the run ``run`` created the regular file ``target`` and it is still as that run left
    it (or being written by it): what the scratch clean-up may remove."""
    found = read(target)
    if found is None:
        return False
    value, st = found
    return bool(value.get("created")) and value.get("run") == run and (bool(value.get("writing")) or
                                                                        complete(value, st))


def _key(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}"


def _stored(fd: int, st: os.stat_result) -> Any:
    try:
        return json.loads(os.getxattr(fd, ATTR))
    except OSError as exc:
        if exc.errno not in (*_NO_XATTRS, errno.ENODATA):
            return None
    except ValueError:
        return None
    with _record() as record:
        return record.get(_key(st))


@contextlib.contextmanager
def _record() -> Iterator[dict[str, Any]]:
    """The marks kept outside the files, read and written back under an exclusive lock."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    path = Path(base, "iolab", "marks.json")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_suffix(".lock"), "a")  # noqa: SIM115 (held for the block below)
    except OSError:
        yield {}
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            record = {}
        before = dict(record)
        yield record
        if record != before:
            with contextlib.suppress(OSError):
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(record))
                tmp.replace(path)
