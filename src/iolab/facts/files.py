"""Facts about a file that decide whether writing it destroys data in use (``check.safety.check_file_write``):
the loop devices it backs and the processes that hold it open for writing or locked.

Sources, all read-only: ``/sys/block/loop*/loop/backing_file`` (``Documentation/ABI/testing/sysfs-block-loop``),
``/proc/PID/fd``, ``/proc/PID/fdinfo`` and ``/proc/locks`` (``proc(5)``). The roots are keyword parameters so
tests can point them at fixture trees.
"""

from __future__ import annotations

import os
import re

from .sysfs import listdir as _listdir
from .sysfs import read_attr as _read_attr
from .targets import SYSFS


def loop_devices_of(path: str, *, sysfs: str = SYSFS) -> tuple[str, ...]:
    """The loop devices backed by the file ``path`` (``/dev/loopN``): a write to the file is a write to
    each of them and to whatever they carry. Read from ``/sys/block/loop*/loop/backing_file``, matched
    by device and inode (the recorded name may be stale, ``... (deleted)``) or by real path."""
    try:
        st = os.stat(path)
    except OSError:
        return ()
    real = os.path.realpath(path)
    found = []
    for name in sorted(_listdir(os.path.join(sysfs, "block"))):
        backing = _read_attr(os.path.join(sysfs, "block", name), "loop/backing_file")
        if not backing:
            continue
        try:
            same = os.path.samestat(os.stat(backing), st)
        except OSError:
            same = False
        if same or backing == real:
            found.append(f"/dev/{name}")
    return tuple(found)


def writers_of(path: str, *, proc: str = "/proc") -> tuple[str, ...]:
    """Other processes that hold the file ``path`` open for writing or hold a lock on it, each as
    ``"pid 812 (postgres) has it open for writing"`` / ``"pid 9 (sqlite3) holds a POSIX WRITE lock on it"``.
    Read from ``/proc/PID/fd`` and ``fdinfo`` (``flags`` in octal: ``O_WRONLY``/``O_RDWR``) and
    ``/proc/locks`` (``MAJ:MIN:INODE``, major and minor in hex); ``proc(5)``. Processes this user
    cannot see are not listed."""
    try:
        st = os.stat(path)
    except OSError:
        return ()
    found: list[str] = []
    for pid in (p for p in _listdir(proc) if p.isdigit() and int(p) != os.getpid()):
        fd_dir = os.path.join(proc, pid, "fd")
        for fd in _listdir(fd_dir):
            try:
                if not os.path.samestat(os.stat(os.path.join(fd_dir, fd)), st):
                    continue
                info = _read_attr(os.path.join(proc, pid, "fdinfo"), fd) or ""
            except OSError:
                continue
            flags = re.search(r"^flags:\s*([0-7]+)", info, re.MULTILINE)
            if flags and int(flags.group(1), 8) & 0o3:
                found.append(f"pid {pid} ({_comm(proc, pid)}) has it open for writing")
                break
    try:
        with open(os.path.join(proc, "locks"), encoding="ascii", errors="replace") as f:
            locks = f.read().splitlines()
    except OSError:
        locks = []
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in locks:
        fields = line.split()
        if len(fields) >= 6 and "->" not in fields and fields[5] == wanted and int(fields[4] or 0) != os.getpid():
            found.append(f"pid {fields[4]} ({_comm(proc, fields[4])}) holds a {fields[1]} {fields[3]} lock on it")
    return tuple(dict.fromkeys(found))


def _comm(proc: str, pid: str) -> str:
    return _read_attr(os.path.join(proc, pid), "comm") or "?"
