"""Host tuning as part of the experiment: applied before a job, recorded, and always undone.

Settings (``tune:`` in a suite, ``--tune KEY=VALUE`` on ``iolab run``; checked by ``describe.tune``):

========================  =====================================================  =================
key                       sysfs file                                             values
========================  =====================================================  =================
``scheduler``             ``block/DEV/queue/scheduler``                          the device's list
``rq_affinity``           ``block/DEV/queue/rq_affinity``                        0, 1, 2
``nomerges``              ``block/DEV/queue/nomerges``                           0, 1, 2
``nr_requests``           ``block/DEV/queue/nr_requests``                        >= 1 (kernel may clamp)
``read_ahead_kb``         ``block/DEV/queue/read_ahead_kb``                      >= 0
``write_cache``           ``block/DEV/queue/write_cache`` (where writable)       write back, write through
``governor``              ``devices/system/cpu/cpuN/cpufreq/scaling_governor``   the CPU's list
``cpu_dma_latency``       ``/dev/cpu_dma_latency`` (a request held open)         µs, >= 0
========================  =====================================================  =================

Meanings: ``Documentation/ABI/stable/sysfs-block``, ``Documentation/admin-guide/pm/cpufreq.rst`` and,
for ``cpu_dma_latency``, ``Documentation/power/pm_qos_interface.rst`` (``facts.idle`` says what it
does to idle CPUs).
A partition is tuned through its disk (a partition has no queue of its own). Some writes
change other settings: switching the scheduler resets ``nr_requests`` (``blk_mq_init_sched``),
and on recent kernels writing ``write_cache`` re-applies the queue limits, which resets
``read_ahead_kb`` (observed on 6.18 loop devices). So those are journalled along with the
setting that disturbs them, applied after it, and restored after it.

**The restore journal.** Before a value changes, its previous value is appended to a journal
file and fsynced; only then is sysfs written. The journal lives in
``$XDG_STATE_HOME/iolab/tuning/`` (default ``~/.local/state/iolab/tuning/``) — host state,
not results, so it is found whatever ``--db`` says — one ``journal-*.jsonl`` per tuned job.
Its owner holds an exclusive ``flock`` on it while the job runs; the kernel drops the lock when
the owner dies, even by SIGKILL. A journal nobody holds is *left over*: ``restore_leftovers``
(run by every ``iolab`` command) writes its previous values back and deletes it. A live
owner's journal is never touched, and two live runs cannot tune the same setting.

**A held request, not a journal** (``cpu_dma_latency``). The CPU latency limit is not a value
iolab writes and later writes back: iolab opens ``/dev/cpu_dma_latency``, writes the number of µs
as a native 32-bit integer (the interface also takes its hex ASCII form, ``0x00000000``) and keeps
the file open while the job runs; closing it withdraws the request (``pm_qos_interface.rst``: the
request lasts as long as the device node is held open). The kernel closes every file of a process
that ends, by SIGKILL too, so the request cannot outlive iolab: there is no previous value to
journal, only a request that dies with its file descriptor. The file is opened close-on-exec, so
fio and anything else iolab starts do not inherit it. The limit in force is the least of every
process's requests: a job asking for 100 µs while another process holds 0 runs at 0, and
``snapshot`` records the value in force, not the one asked for.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import struct
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import outputs
from ..describe.tune import KEYS, QUEUE_KEYS
from ..errors import IolabError
from ..facts import idle, sysfs

if TYPE_CHECKING:  # only in annotations: a command that restores nothing stays light (cli.main)
    from ..model import BlockDeviceFacts

SYSFS = "/sys"
#: The CPU latency QoS device (``facts.idle``); tests name another file with ``pm_qos=``.
PM_QOS = "/dev/cpu_dma_latency"
#: Settings held as an open request for the job's duration rather than written and restored.
HELD = ("cpu_dma_latency",)

#: Writing the key resets these queue attributes (see the module docstring).
SIDE_EFFECTS = {"scheduler": ("nr_requests",), "write_cache": ("read_ahead_kb",)}


class TuningError(IolabError):
    """A setting cannot be applied or restored; the message names the sysfs file."""


class RestoreError(TuningError):
    """A previous value could not be written back; its journal is kept for ``iolab restore``."""


@dataclass(frozen=True)
class Knob:
    """One sysfs file iolab writes: ``key`` as in the suite, ``scope`` the device or CPU."""

    key: str
    path: str
    scope: str


@dataclass(frozen=True)
class Restored:
    """One value written back by ``restore``; ``error`` is set when that failed."""

    key: str
    scope: str
    path: str
    value: str
    was: str | None
    error: str | None = None


@dataclass(frozen=True)
class LeftOver:
    """A journal found without a live owner, and what restoring it did."""

    owner: Mapping[str, Any]
    restored: tuple[Restored, ...]
    kept: bool


# --- sysfs ------------------------------------------------------------------------------------


def _queue_dir(device: BlockDeviceFacts, sysfs: str) -> str:
    return os.path.join(sysfs, "class", "block", device.parent or device.name, "queue")


def _governor_paths(sysfs_root: str) -> list[tuple[str, str]]:
    """``(cpuN, scaling_governor path)`` of every online CPU that has cpufreq."""
    base = os.path.join(sysfs_root, "devices", "system", "cpu")
    cpus = sysfs.online_cpus(sysfs_root) or tuple(sorted(int(n[3:]) for n in sysfs.listdir(base)
                                                          if re.fullmatch(r"cpu\d+", n)))
    out = []
    for cpu in cpus:
        path = os.path.join(base, f"cpu{cpu}", "cpufreq", "scaling_governor")
        if os.path.exists(path):
            out.append((f"cpu{cpu}", path))
    return out


def read_value(path: str) -> str:
    """A sysfs value as iolab writes it: the bracketed choice of ``scheduler``. Raises ``OSError``."""
    with open(path, encoding="utf-8") as f:
        return sysfs.chosen(f.read())


def _choices(path: str, key: str) -> tuple[str, ...] | None:
    """The values the kernel offers: scheduler's word list, ``scaling_available_governors``."""
    try:
        if key == "scheduler":
            with open(path, encoding="utf-8") as f:
                return tuple(w.strip("[]") for w in f.read().split())
        if key == "governor":
            with open(os.path.join(os.path.dirname(path), "scaling_available_governors"), encoding="utf-8") as f:
                return tuple(f.read().split())
    except OSError:
        return None
    return None


def scheduler_choices(device: BlockDeviceFacts, sysfs: str = SYSFS) -> tuple[str, ...]:
    """The I/O schedulers the kernel offers for ``device`` (its queue's ``scheduler`` list)."""
    return _choices(os.path.join(_queue_dir(device, sysfs), "scheduler"), "scheduler") or ()


def knobs(tune: Mapping[str, str], device: BlockDeviceFacts | None, *, sysfs: str = SYSFS,
          pm_qos: str | None = None) -> list[tuple[Knob, str]]:
    """The files and values that apply ``tune`` to ``device``, in application order (``pm_qos``:
    the CPU latency device, default ``PM_QOS``).

    Checks, without writing: the file exists and is writable (sysfs shows read-only attributes,
    e.g. ``write_cache`` on many devices, without write bits; ``/dev/cpu_dma_latency`` is root's),
    the value is one the kernel offers (scheduler, governor). Raises ``TuningError`` naming the
    setting and the device.
    """
    out: list[tuple[Knob, str]] = []
    for key in sorted(tune, key=KEYS.index):
        value = tune[key]
        if key == "cpu_dma_latency":
            targets = [Knob(key, pm_qos or PM_QOS, "cpus")]
        elif key == "governor":
            found = _governor_paths(sysfs)
            if not found:
                raise TuningError("governor: this machine exposes no CPU frequency scaling (no cpufreq in "
                                  f"{sysfs}/devices/system/cpu); common in VMs, where the host decides",
                                  hint="remove governor from the tuning")
            targets = [Knob(key, path, cpu) for cpu, path in found]
        else:
            if device is None:
                raise TuningError(f"{key}: the target is not on a block device, so there is no queue to tune",
                                  hint="block-layer tuning needs a block-device target or a file on one")
            disk = device.parent or device.name
            targets = [Knob(key, os.path.join(_queue_dir(device, sysfs), key), disk)]
        for knob in targets:
            _check_writable(knob, value)
            out.append((knob, value))
    return out


def _check_writable(knob: Knob, value: str) -> None:
    try:
        mode = os.stat(knob.path).st_mode
    except OSError:
        raise TuningError(f"{knob.key}: {knob.scope} has no {knob.path}",
                          hint="this kernel or device does not offer the setting") from None
    if not mode & 0o222:
        raise TuningError(f"{knob.key}: {knob.path} is read-only on {knob.scope}",
                          hint="the device does not allow changing it")
    if not os.access(knob.path, os.W_OK):
        raise TuningError(f"{knob.key}: no permission to write {knob.path}", hint="tuning needs root")
    choices = _choices(knob.path, knob.key)
    if choices is not None and value not in choices:
        raise TuningError(f"{knob.key}={value} is not available on {knob.scope}; it offers {', '.join(choices)}",
                          hint=f"choose one of: {', '.join(choices)}")


def snapshot(device: BlockDeviceFacts | None, *, sysfs: str = SYSFS, pm_qos: str | None = None) -> dict[str, str]:
    """Every tunable value in force: the device's queue settings, the CPU governor (one value, or
    ``cpu0=…,cpu1=…`` when CPUs differ) and the CPU latency limit (``cpu_dma_latency``, µs: the
    least of every process's request; readable by root only). Settings that do not exist or
    cannot be read are left out."""
    values: dict[str, str] = {}
    if device is not None:
        queue = _queue_dir(device, sysfs)
        for key in QUEUE_KEYS:
            with contextlib.suppress(OSError):
                values[key] = read_value(os.path.join(queue, key))
    governors = {}
    for cpu, path in _governor_paths(sysfs):
        with contextlib.suppress(OSError):
            governors[cpu] = read_value(path)
    if governors:
        distinct = set(governors.values())
        mixed = ",".join(f"{c}={g}" for c, g in governors.items())
        values["governor"] = distinct.pop() if len(distinct) == 1 else mixed
    limit = idle.latency_limit_us(path=pm_qos or PM_QOS)
    if limit is not None:
        values["cpu_dma_latency"] = str(limit)
    return values


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(value)


# --- the journal ----------------------------------------------------------------------------------


def state_dir() -> Path:
    """``$XDG_STATE_HOME/iolab/tuning`` (default ``~/.local/state/iolab/tuning``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "iolab" / "tuning"


class Journal:
    """An append-only, fsynced list of previous values, locked by its live owner.

    Line 1 describes the owner (pid, start time, command line); each further line is
    ``{"key", "scope", "path", "previous"}``. A torn last line (crash mid-write, before sysfs
    was touched) is ignored when read.
    """

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or state_dir()
        self.path = self.directory / f"journal-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
        # Made as iolab makes its files (outputs.writing: a temporary file renamed into place), and locked
        # before it becomes visible under its real name, so no restorer sees it unowned. The lock and
        # the file stay with this descriptor (a duplicate: one open file) after the temporary one is closed.
        self.fd = -1
        try:
            with outputs.writing(self.path, "the tuning restore journal", durable=True, private=True) as file:
                self.fd = os.dup(file.fileno())
                fcntl.fcntl(self.fd, fcntl.F_SETFL, fcntl.fcntl(self.fd, fcntl.F_GETFL) | os.O_APPEND)
                fcntl.flock(self.fd, fcntl.LOCK_EX)
                owner = {"pid": os.getpid(), "started_at": datetime.now(UTC).isoformat(), "argv": sys.argv}
                self._append({"owner": owner})
        except BaseException:
            if self.fd >= 0:
                os.close(self.fd)
            raise
        self.entries: dict[str, dict[str, str]] = {}

    def _append(self, record: Mapping[str, Any]) -> None:
        os.write(self.fd, (json.dumps(record) + "\n").encode())
        os.fsync(self.fd)

    def record(self, knob: Knob, previous: str) -> None:
        """Remember ``previous`` for ``knob`` (the first value recorded for a path wins)."""
        if knob.path in self.entries:
            return
        entry = {"key": knob.key, "scope": knob.scope, "path": knob.path, "previous": previous}
        self._append(entry)
        self.entries[knob.path] = entry

    def restore(self) -> list[Restored]:
        """Write every previous value back; on full success delete the journal and unlock."""
        results = _restore_entries(list(self.entries.values()))
        if not any(r.error for r in results):
            self.path.unlink(missing_ok=True)
        os.close(self.fd)
        return results


def _restore_order(entries: list[dict[str, str]]) -> list[dict[str, str]]:
    """Settings that reset others first (in application order), then the rest newest first."""
    first = sorted((e for e in entries if e["key"] in SIDE_EFFECTS), key=lambda e: KEYS.index(e["key"]))
    return first + [e for e in reversed(entries) if e["key"] not in SIDE_EFFECTS]


def _restore_entries(entries: list[dict[str, str]]) -> list[Restored]:
    results = []
    for e in _restore_order(entries):
        try:
            was = read_value(e["path"])
            if was != e["previous"]:
                _write(e["path"], e["previous"])
            results.append(Restored(e["key"], e["scope"], e["path"], e["previous"], was))
        except OSError as exc:
            gone = exc.errno in (errno.ENOENT, errno.ENODEV, errno.ENXIO)
            results.append(Restored(e["key"], e["scope"], e["path"], e["previous"], None,
                                    None if gone else f"{exc.strerror or exc}"))
    return results


def _read_journal(fd: int) -> tuple[dict[str, Any], list[dict[str, str]]]:
    with os.fdopen(os.dup(fd), encoding="utf-8") as f:
        f.seek(0)
        lines = f.read().splitlines()
    owner: dict[str, Any] = {}
    entries: dict[str, dict[str, str]] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn write: the value it describes was never changed
        if "owner" in record:
            owner = record["owner"]
        elif isinstance(record, dict) and {"key", "scope", "path", "previous"} <= set(record):
            entries.setdefault(record["path"], record)
    return owner, list(entries.values())


def live_paths(directory: Path | None = None) -> dict[str, int]:
    """sysfs paths held by journals whose owner is alive -> the owner's pid."""
    directory = directory or state_dir()
    held: dict[str, int] = {}
    for name in sysfs.listdir(directory):
        if not name.startswith("journal-"):
            continue
        try:
            fd = os.open(directory / name, os.O_RDONLY)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                continue  # nobody holds it: a leftover, not a live run
            except BlockingIOError:
                pass
            owner, entries = _read_journal(fd)
            held.update({e["path"]: int(owner.get("pid", 0)) for e in entries})
        finally:
            os.close(fd)
    return held


def restore_leftovers(directory: Path | None = None, *, discard: bool = False) -> list[LeftOver]:
    """Restore every journal whose owner is gone (killed, crashed); returns what was done.

    A journal whose values could not all be written back is kept for the next attempt, unless
    ``discard`` (``iolab restore --discard``) says to forget it. Never touches a journal whose
    owner is alive. Never raises for a single bad journal.
    """
    directory = directory or state_dir()
    done = []
    for name in sysfs.listdir(directory):
        if not (name.startswith("journal-") and name.endswith(".jsonl")):
            continue
        path = directory / name
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its owner is alive
            if os.fstat(fd).st_nlink == 0:
                continue  # the owner restored and removed it while we were opening it
            owner, entries = _read_journal(fd)
            restored = _restore_entries(entries)
            kept = any(r.error for r in restored) and not discard
            if not kept:
                path.unlink(missing_ok=True)
            done.append(LeftOver(owner, tuple(restored), kept))
        finally:
            os.close(fd)
    return done


# --- applying ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def applied(tune: Mapping[str, str], device: BlockDeviceFacts | None, *, sysfs: str = SYSFS,
            directory: Path | None = None, pm_qos: str | None = None) -> Iterator[dict[str, str]]:
    """Apply ``tune`` for the duration of the block; yields every value in force (``snapshot``).

    Each previous sysfs value is journalled before it is changed (see the module docstring); on
    leaving the block — normally, by an exception, Ctrl-C, or SIGTERM turned into
    ``KeyboardInterrupt`` by the caller — the values are written back. ``cpu_dma_latency`` is a
    request held open for the block (``hold_latency``) and withdrawn after it. Raises
    ``TuningError`` when a setting cannot be applied (the ones already applied are restored
    first), when another live iolab run holds a setting, or when restoring fails.
    """
    if not tune:
        yield snapshot(device, sysfs=sysfs, pm_qos=pm_qos)
        return
    plan = knobs(tune, device, sysfs=sysfs, pm_qos=pm_qos)
    with contextlib.ExitStack() as held:
        for knob, value in plan:
            if knob.key in HELD:
                held.enter_context(hold_latency(int(value), knob.path))
        with _journalled([(k, v) for k, v in plan if k.key not in HELD], directory):
            yield snapshot(device, sysfs=sysfs, pm_qos=pm_qos)


@contextlib.contextmanager
def hold_latency(limit_us: int, path: str | None = None) -> Iterator[None]:
    """Hold a CPU latency request of ``limit_us`` µs for the block: ``path`` (default ``PM_QOS``)
    opened close-on-exec, the value written as a native 32-bit integer, the file closed after the
    block, which withdraws the request (and the kernel closes it if this process dies first: the
    module docstring). Raises ``TuningError`` when the file cannot be opened or written."""
    where = path or PM_QOS
    try:
        fd = os.open(where, os.O_WRONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise TuningError(f"cpu_dma_latency: cannot open {where}: {exc.strerror or exc}",
                          hint="holding a CPU latency request needs root") from None
    try:
        try:
            os.write(fd, struct.pack("=i", limit_us))
        except OSError as exc:
            raise TuningError(f"cannot set cpu_dma_latency={limit_us}: {exc.strerror or exc}",
                              hint=f"the kernel refused the value ({where})") from None
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _journalled(plan: list[tuple[Knob, str]], directory: Path | None) -> Iterator[None]:
    """The sysfs part of ``applied``: each previous value journalled, then written; all restored after."""
    if not plan:
        yield
        return
    held = live_paths(directory)
    busy = [k for k, _ in plan if k.path in held]
    if busy:
        raise TuningError(f"{busy[0].key} of {busy[0].scope} is being tuned by another iolab run "
                          f"(pid {held[busy[0].path]})", hint="wait for that run to end")
    try:
        journal = Journal(directory)
    except (OSError, IolabError) as exc:
        why = exc.message if isinstance(exc, IolabError) else exc.strerror or str(exc)
        raise TuningError(f"cannot create the tuning restore journal in {directory or state_dir()}: {why}",
                          hint="check $XDG_STATE_HOME; nothing was changed") from None
    try:
        for knob, value in plan:
            journal.record(knob, read_value(knob.path))
            for key in SIDE_EFFECTS.get(knob.key, ()):
                side = Knob(key, os.path.join(os.path.dirname(knob.path), key), knob.scope)
                with contextlib.suppress(OSError):
                    journal.record(side, read_value(side.path))
            try:
                _write(knob.path, value)
            except OSError as exc:
                raise TuningError(f"cannot set {knob.key}={value} on {knob.scope}: {exc.strerror or exc}",
                                  hint=f"the kernel refused the value ({knob.path})") from None
        yield
    finally:
        problems = [r for r in journal.restore() if r.error]
        if problems and sys.exc_info()[0] is None:
            raise RestoreError("could not restore " + "; ".join(f"{r.key} of {r.scope} to {r.value!r}: {r.error}"
                                                              for r in problems),
                              hint="the journal is kept; retry with: iolab restore")

