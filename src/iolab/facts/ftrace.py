"""iolab's ftrace instances on this host: named after the capture's process, so that one whose process
is gone is found and removed by the next iolab command (``sweep``, run at every command start as the
tuning journal's leftovers are restored) and by ``iolab restore``.

A capture (``workflows/capture/tracefs.py``) records in its own instance, ``instances/iolab-<pid>-
<start>-<pidns>-<n>`` in tracefs: the process's pid, its start time (clock ticks after boot, ``proc(5)``
``stat`` field 22: a reused pid has another), the inode of its pid namespace (tracefs is one for the
whole machine while pids are per namespace, so a capture in a container is judged by no one outside it)
and a counter. A capture ended by SIGKILL cannot remove its instance: the block events stay enabled and
the ring buffer allocated (64 MiB a CPU at most) until someone removes it.

Removing is ``rmdir`` alone: the kernel disables the instance's events and frees its buffers with it, and
refuses (EBUSY) while any process holds one of the instance's files open
(``kernel/trace/trace.c``, ``__remove_instance``), so a capture that still reads its instance cannot lose
it. Nothing else is written. Names of an earlier iolab (``iolab-<pid>-<n>``) are judged by their pid
alone. Tracefs is root's: for other users there is nothing to list, and ``sweep`` finds nothing.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path

from .owner import start_ticks
from .sysfs import read_text

TRACEFS = Path("/sys/kernel/tracing")
PREFIX = "iolab-"


def _pid_namespace(pid: int | str = "self") -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def owner() -> str:
    """This process as the names of what it leaves behind give it: ``<pid>-<start>-<pidns>`` (see
    the module): its ftrace instances, a capture's spool directory (``capture.stream``)."""
    return f"{os.getpid()}-{start_ticks('self') or 0}-{_pid_namespace() or 0}"


def owner_gone(name: str) -> bool:
    """Whether the process that ``name`` (``owner()``, then anything after a ``-``) names has
    ended; False for a process of another pid namespace, or a name that names none."""
    parts = name.split("-")[:3]
    if len(parts) < 3 or not all(p.isdigit() for p in parts):
        return False
    return _state(int(parts[0]), int(parts[1]) or None, int(parts[2]) or None) == "gone"


def instance_name(counter: int) -> str:
    """The name of this process's ``counter``-th instance (see the module)."""
    return f"{PREFIX}{owner()}-{counter}"


@dataclass(frozen=True)
class Instance:
    """One of iolab's instances: its name, the capturing process's pid, and ``state``: ``gone`` (the
    process ended: a leftover), ``running``, or ``elsewhere`` (made in another pid namespace)."""

    name: str
    pid: int
    state: str


def _parse(name: str) -> tuple[int, int | None, int | None] | None:
    """(pid, start ticks, pid namespace) from an instance's name; None when it is not iolab's."""
    parts = name.removeprefix(PREFIX).split("-") if name.startswith(PREFIX) else []
    if not all(p.isdigit() for p in parts) or len(parts) not in (2, 4):
        return None
    pid = int(parts[0])
    if len(parts) == 2:
        return pid, None, None
    return pid, int(parts[1]) or None, int(parts[2]) or None  # 0: not known when the instance was made


def _state(pid: int, ticks: int | None, namespace: int | None) -> str:
    if namespace is not None and namespace != _pid_namespace():
        return "elsewhere"
    started = start_ticks(pid)
    return "gone" if started is None or (ticks is not None and started != ticks) else "running"


def instances(root: Path | None = None) -> list[Instance]:
    """iolab's instances in tracefs at ``root`` (default ``TRACEFS``), by name. Raises ``OSError`` when
    its ``instances`` directory cannot be read (ENOENT: tracefs is not mounted there)."""
    root = root or TRACEFS
    found = []
    for name in sorted(os.listdir(root / "instances")):
        parsed = _parse(name)
        if parsed is not None:
            found.append(Instance(name, parsed[0], _state(*parsed)))
    return found


@dataclass(frozen=True)
class Removed:
    """A leftover instance and what removing it did: ``recording`` (its block events were on),
    ``buffer_kb`` (its ring buffers, all CPUs), ``error`` (why it is still there; None: removed)."""

    name: str
    pid: int
    recording: bool
    buffer_kb: int | None
    error: str | None = None


@dataclass(frozen=True)
class Sweep:
    """What ``sweep`` found: the leftovers (removed or not), the live instances it left alone, and why
    tracefs could not be read (None: it was, or it is not mounted)."""

    removed: list[Removed] = field(default_factory=list)
    kept: list[Instance] = field(default_factory=list)
    unreadable: str | None = None


def sweep(root: Path | None = None) -> Sweep:
    """Remove every instance of iolab's whose process is gone (see the module) from tracefs at ``root``
    (default ``TRACEFS``); never raises."""
    root = root or TRACEFS
    try:
        found = instances(root)
    except OSError as exc:
        gone = exc.errno in (errno.ENOENT, errno.ENOTDIR)
        return Sweep(unreadable=None if gone else f"{root / 'instances'}: {exc.strerror or exc}")
    done = Sweep(kept=[i for i in found if i.state != "gone"])
    for inst in found:
        if inst.state == "gone":
            removed = _remove(root / "instances" / inst.name, inst)
            if removed is not None:
                done.removed.append(removed)
    return done


def _remove(path: Path, inst: Instance) -> Removed | None:
    """rmdir of a leftover instance; None when it was gone already (another iolab removed it)."""
    enabled = read_text(str(path / "events" / "block" / "enable"))
    size = read_text(str(path / "buffer_total_size_kb"))
    recording = enabled is not None and enabled.strip() != "0"
    buffer_kb = int(size) if size is not None and size.strip().isdigit() else None
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        why = ("a process holds one of its files open" if exc.errno == errno.EBUSY else exc.strerror or str(exc))
        return Removed(inst.name, inst.pid, recording, buffer_kb, why)
    return Removed(inst.name, inst.pid, recording, buffer_kb)


def describe(removed: Removed) -> str:
    """One line saying what was (or could not be) removed."""
    what = ", ".join([*(["its block events were on"] if removed.recording else []),
                      *([f"{removed.buffer_kb // 1024} MiB of ring buffer"] if removed.buffer_kb else [])])
    left = f"the ftrace instance {removed.name} left by a capture whose process (pid {removed.pid}) is gone"
    if removed.error is not None:
        return f"Could not remove {left}: {removed.error}"
    return f"Removed {left}" + (f" ({what})" if what else "")
