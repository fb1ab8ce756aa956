"""iolab's mark on the files its fio jobs wrote: what makes an existing file iolab's, not someone's data.

A file with bytes in it is data, exactly as a device with a signature is, and is written only when
the user names it with ``--destroy`` — unless iolab laid it out itself. That is told by a mark,
never by the file's name: the extended attribute ``user.iolab`` holds ``{"mtime_ns": …, "size": …}``
as the job left the file (set after each job that may have written it), and the file is iolab's
only while its modification time and size are still those: a file written since by anything else
is data again. While a job writes a file the mark says ``{"writing": true}``, so a job killed
mid-way leaves a file that is still known as iolab's (a file fio created new and was killed before
it was marked is known to ``--resume`` from the run's record instead).

Where the file system has no user extended attributes (some FUSE and NFS mounts), the same mark
is kept in ``$XDG_STATE_HOME/iolab/marks.json`` (default ``~/.local/state/iolab``), keyed by the
file's real path and valid only for the same device and inode. Source: xattr(7).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ATTR = "user.iolab"
#: errnos that mean "this file system keeps no user xattrs" (ENOTSUP is EOPNOTSUPP on Linux).
_NO_XATTRS = frozenset({errno.ENOTSUP, errno.EPERM, errno.EACCES})


def mark(path: str, writing: bool = False) -> None:
    """Mark the regular file ``path`` as iolab's: as it is now, or (``writing``) as being written
    by a job. Does nothing for a path that is not a regular file. Best effort: a mark that cannot
    be kept only means the next run asks for ``--destroy``."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        return
    value = {"writing": True} if writing else {"mtime_ns": st.st_mtime_ns, "size": st.st_size}
    try:
        os.setxattr(path, ATTR, json.dumps(value).encode())
        return
    except OSError as exc:
        if exc.errno not in _NO_XATTRS:
            return
    with _record() as record:
        record[os.path.realpath(path)] = {**value, "dev": st.st_dev, "ino": st.st_ino}


def is_iolab(path: str) -> bool:
    """Whether the regular file ``path`` carries iolab's mark and is as the mark says."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    value = _read(path, st) if stat.S_ISREG(st.st_mode) else None
    if not value:
        return False
    return bool(value.get("writing")) or (value.get("mtime_ns") == st.st_mtime_ns and value.get("size") == st.st_size)


def _read(path: str, st: os.stat_result) -> dict[str, Any] | None:
    try:
        value = json.loads(os.getxattr(path, ATTR))
        return value if isinstance(value, dict) else None
    except OSError as exc:
        if exc.errno not in (*_NO_XATTRS, errno.ENODATA):
            return None
    except ValueError:
        return None
    with _record() as record:
        value = record.get(os.path.realpath(path))
    if not isinstance(value, dict) or (value.get("dev"), value.get("ino")) != (st.st_dev, st.st_ino):
        return None
    return value


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
