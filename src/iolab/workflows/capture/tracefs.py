"""Record one block device's requests from tracefs, in a private ftrace instance.

Why tracefs and not blktrace: under kernel lockdown (integrity mode) blktrace's relay files are
refused ("Operation not permitted"), while the block tracepoints in tracefs work there and on
ordinary kernels alike. The capture:

1. mounts tracefs at ``/sys/kernel/tracing`` when it is not mounted (left mounted: others may use it);
2. creates ``instances/iolab-<pid>-<start>-<pidns>-<n>`` (its own ring buffer, so other tracers are
   undisturbed), named after this process (``facts/ftrace.py``) so that the next iolab command (or
   ``iolab restore``) removes it when a SIGKILL left it behind;
3. filters ``block_rq_issue``/``block_rq_complete`` by the device's dev_t as the kernel encodes it in
   these events (``MKDEV``: major << 20 | minor, ``include/linux/kdev_t.h``) and, for a partition,
   its data requests by its sector range on the whole disk (the events name the disk); a flush has
   no sector (issued at 0, completed at (sector_t)-1, ``nr_sector`` 0), so flushes are kept by
   device alone: a partition's fsyncs reach the disk as flushes of the whole disk, and the kernel
   does not say which partition asked for one (another partition's flushes are kept too);
4. enables both events and reads each CPU's binary ring-buffer pages every ``DRAIN_S`` while the
   workload runs (``ringbuf``: the events merged in time order and handed to ``stream.Parser``,
   which pairs them and spools the requests to disk: memory bounded by a drain, not the capture),
   disables them, drains the rest, counts the lost events (``per_cpu/cpuN/stats`` and the pages'
   missed-events flags), and removes the instance, whatever happened.

When the binary pages cannot be read (a format ``ringbuf`` does not understand: it says which), the
capture reads ``trace_pipe`` text instead, as iolab did before: there the kernel formats every event
in the reader's time, which costs several times the CPU and loses events at a fast device's rate,
so it is drained only when a CPU's buffer holds ``DRAIN_KB``. ``Recording.how`` says which was used.

Only reads: the capture never writes to the device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import itertools
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...errors import UsageError
from ...facts import ftrace
from . import ringbuf, ringfmt, stream
from . import trace as trace_mod
from .ringfmt import CaptureError as CaptureError  # raised here and by ringbuf: one class

TRACEFS = ftrace.TRACEFS
EVENTS = ("block_rq_issue", "block_rq_complete")
#: Ring buffers, all CPUs together (at most 64 MiB per CPU, at least 4 MiB): at ~50 bytes an event,
#: 64 MiB holds ~1.3 M events. Reading ``trace_pipe`` makes the kernel format every event as text in
#: the reader's time, which competes with the workload for CPUs (a 2-CPU VM lost over half of a
#: fio 80k IOPS job's throughput while drained every 50 ms), so the buffer is drained only when a
#: CPU's buffer is half full, and at the end.
BUFFER_TOTAL_KB = 131072
#: A CPU's buffer is drained once it holds this much (KiB): often enough that the parsing keeps up
#: with the capture (a minute at 40k requests/s is ~500 MB of text), so little is left when the
#: window closes, rarely enough that the reads stay a small share of the CPUs.
DRAIN_KB = 4096
#: The parser takes the drained text in pieces of about this many bytes (its memory per piece is a
#: few times this).
FEED_BYTES = 4 << 20
#: At most this much text is drained and parsed between two looks at the clock (a few tenths of a
#: second of parsing), so a ``--duration`` window closes on time even when parsing falls behind.
STEP_BYTES = 4 << 20
POLL_S = 0.2
#: The binary reader drains every CPU this often (s): at ~630k events/s on 2 CPUs a drain holds ~4 MB
#: of pages, a small share of the 64 MiB buffers (no event lost however late the reader runs for a
#: second or two), and the pages of one drain are decoded in a few numpy batches.
DRAIN_S = 0.2
#: At most this much of one CPU's pages is read in one drain (bytes): the window closes on time
#: even when the reader falls behind.
STEP_PAGES_BYTES = 32 << 20
_counter = itertools.count()


@dataclass(frozen=True)
class DeviceRef:
    """What to filter on: the whole disk's dev_t, and for a partition its sectors [start, end)."""

    path: str
    disk_devt: int
    first_sector: int | None = None
    end_sector: int | None = None

    @property
    def filter(self) -> str:
        """The tracefs event filter (``Documentation/trace/events.rst``, "Event filtering"): the
        disk's dev_t and, for a sub-range, data requests inside ``[first_sector, end_sector)`` or
        requests without sectors (flushes: ``nr_sector == 0``; their sector is 0 at issue and
        (sector_t)-1 at completion, so a sector test would drop every one)."""
        text = f"dev == {self.disk_devt}"
        if self.first_sector is not None:
            text += f" && ((sector >= {self.first_sector} && sector < {self.end_sector}) || nr_sector == 0)"
        return text


def device_ref(path: str, sysfs: str = "/sys") -> DeviceRef:
    """The block device ``path`` as a trace filter. Raises UsageError when it is not a block device."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UsageError(f"cannot capture {path}: {exc.strerror}", hint="name a block device, e.g. /dev/sdb") from None
    import stat as stat_mod
    if not stat_mod.S_ISBLK(st.st_mode):
        raise UsageError(f"cannot capture {path}: not a block device",
                         hint="capture the device under the filesystem (see `findmnt -no SOURCE PATH`)")
    major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
    sysdir = Path(sysfs) / "dev" / "block" / f"{major}:{minor}"
    if (sysdir / "partition").exists():
        start = int((sysdir / "start").read_text())
        size = int((sysdir / "size").read_text())
        disk = (sysdir.resolve().parent / "dev").read_text().strip()
        dmaj, dmin = (int(x) for x in disk.split(":"))
        return DeviceRef(path, dmaj << 20 | dmin, start, start + size)
    return DeviceRef(path, major << 20 | minor)


def ensure_tracefs(root: Path = TRACEFS) -> Path:
    """``root``, with tracefs mounted on it (mounted here when it is not). Raises CaptureError."""
    if (root / "events" / "block" / "block_rq_issue").is_dir():
        return root
    if not (root / "instances").is_dir():
        proc = subprocess.run(["mount", "-t", "tracefs", "nodev", str(root)], capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            raise CaptureError(f"tracefs is not mounted at {root} and mounting it failed: {proc.stderr.strip()}",
                               hint="run as root, or mount it: mount -t tracefs nodev /sys/kernel/tracing")
    if not (root / "events" / "block" / "block_rq_issue").is_dir():
        raise CaptureError(f"this kernel has no block tracepoints in {root}/events/block",
                           hint="a kernel built with CONFIG_BLK_DEV_IO_TRACE / tracepoints is needed")
    return root


@contextlib.contextmanager
def _instance(root: Path) -> Iterator[Path]:
    """A fresh ftrace instance, removed afterwards (events disabled first, so rmdir succeeds)."""
    inst = root / "instances" / ftrace.instance_name(next(_counter))
    try:
        inst.mkdir()
    except OSError as exc:
        raise CaptureError(f"cannot create the ftrace instance {inst}: {exc.strerror}",
                           hint="run iolab capture as root") from None
    try:
        yield inst
    finally:
        for event in EVENTS:
            with contextlib.suppress(OSError):
                (inst / "events" / "block" / event / "enable").write_text("0")
        for _ in range(50):  # rmdir is EBUSY while a reader still holds trace_pipe; it is closed by now
            try:
                inst.rmdir()
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    break
                time.sleep(0.05)


def _buffer_kb() -> int:
    return max(4096, min(65536, BUFFER_TOTAL_KB // max(1, os.cpu_count() or 1)))


def _fullest_kb(inst: Path) -> int:
    """The most bytes (KiB) waiting in one CPU's ring buffer (``per_cpu/cpuN/stats``: ``bytes:``)."""
    most = 0
    for stats in inst.glob("per_cpu/cpu*/stats"):
        for line in stats.read_text().splitlines():
            if line.startswith("bytes:"):
                most = max(most, int(line.split()[1]) // 1024)
    return most


def _lost(inst: Path, missed_by_cpu: dict[int, int] | None = None) -> int:
    """Events the ring buffer overwrote or dropped, summed over CPUs (``per_cpu/cpuN/stats``:
    ``overrun`` and ``dropped events``); with ``missed_by_cpu`` (the binary pages' missed-events
    flags, ``ringbuf.Reader.missed_by_cpu``), a CPU counts the larger of the two (the same losses)."""
    total = 0
    for stats in inst.glob("per_cpu/cpu*/stats"):
        counted = 0
        for line in stats.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("overrun", "dropped events"):
                counted += int(value.split()[0]) if value.split() else 0
        cpu = int(stats.parent.name.removeprefix("cpu"))
        total += max(counted, (missed_by_cpu or {}).get(cpu, 0))
    return total


class _Pipe:
    """``trace_pipe`` read without blocking, its bytes handed to a ``stream.Parser`` in pieces of
    about ``FEED_BYTES`` (the parser keeps a partial last line for the next piece)."""

    def __init__(self, path: Path, parser: stream.Parser) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.parser = parser
        self.read_bytes = 0

    def drain(self, limit: int | None = None) -> None:
        """Read what is waiting (at most about ``limit`` bytes), without select(): poll on
        trace_pipe may wait for the buffer to be ``buffer_percent`` full, and reports nothing ready
        before (seen on 6.18)."""
        pending: list[bytes] = []
        size = total = 0
        while limit is None or total < limit:
            try:
                chunk = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                break
            if not chunk:
                break
            pending.append(chunk)
            size += len(chunk)
            total += len(chunk)
            if size >= FEED_BYTES:
                self._feed(pending)
                pending, size = [], 0
        self._feed(pending)

    def _feed(self, pending: list[bytes]) -> None:
        if pending:
            data = b"".join(pending)
            self.read_bytes += len(data)
            self.parser.feed(data)

    def close(self) -> None:
        os.close(self.fd)


@dataclass(frozen=True)
class Recording:
    """What ``record`` recorded: the trace, and ``how`` it was read (the binary pages, or the text
    and why), as the stored capture's ``how`` says."""

    trace: stream.Spooled
    how: str


BINARY = "read as binary ring-buffer pages (per_cpu/cpuN/trace_pipe_raw)"


def record(device: DeviceRef, until_done: Callable[[], bool], root: Path = TRACEFS,
           wait: Callable[[float], object] = time.sleep) -> Recording:
    """Trace ``device`` until ``until_done()`` returns True, checked after each drain or ``wait``
    (``wait`` may return early: a command's exit ends the capture within milliseconds). The
    requests are left in a spool (the caller closes it); the trace's ``duration_ns`` is from
    enabling the events to disabling them. Reads the binary pages (``ringbuf``) or, when their
    format is not understood, ``trace_pipe`` text. Raises CaptureError."""
    root = ensure_tracefs(root)
    with _instance(root) as inst:
        (inst / "buffer_size_kb").write_text(str(_buffer_kb()))
        for event in EVENTS:
            (inst / "events" / "block" / event / "filter").write_text(device.filter)
        parser = stream.Parser()
        try:
            try:
                reader = ringbuf.Reader(inst, ringfmt.Layout.read(inst / "events"), _trace_clock(inst))
            except CaptureError as exc:
                how = f"read as trace_pipe text (the binary pages could not be read: {exc.message})"
                lost, elapsed = _record_text(inst, parser, until_done, wait)
            else:
                how = BINARY
                lost, elapsed = _record_binary(inst, reader, parser, until_done, wait)
        except BaseException:
            parser.close()
            raise
    spooled = parser.finish(lost_events=lost, duration_ns=elapsed)
    # the events count a partition's sectors from the disk's start
    return Recording(dataclasses.replace(spooled, first_sector=device.first_sector or 0, kthreads=frozenset(
        pid for pid, name in spooled.comms.items() if trace_mod.is_kernel_thread(pid, name))), how)


def _trace_clock(inst: Path) -> str:
    """The instance's trace clock (``trace_clock``: the one in brackets)."""
    text = (inst / "trace_clock").read_text()
    return text.split("[", 1)[1].split("]", 1)[0] if "[" in text else text.strip()


def _switch(inst: Path, on: bool) -> None:
    """Enable the completions before the issues, and disable the issues before the completions: every
    issue recorded then has its completion recorded too. The other way round, requests issued between
    the two writes (a millisecond: hundreds at full rate) had no completion, and pairing by sector gave
    each one's later completion to the next request of its sector, and so on to the window's end:
    service times of hundreds of ms and a depth above fio's (measured: 40 at iodepth 16 × 2 jobs)."""
    for event in (EVENTS[::-1] if on else EVENTS):  # EVENTS: the issue first
        (inst / "events" / "block" / event / "enable").write_text("1" if on else "0")


def _record_binary(inst: Path, reader: ringbuf.Reader, parser: stream.Parser, until_done: Callable[[], bool],
                   wait: Callable[[float], object]) -> tuple[int, int]:
    """Drain every CPU's pages every ``DRAIN_S`` into ``parser``; (lost events, ns recorded)."""
    try:
        started = time.monotonic_ns()
        _switch(inst, True)
        while not until_done():
            events, caught_up = reader.drain(STEP_PAGES_BYTES)
            parser.add(events)
            if caught_up:
                wait(DRAIN_S)
        _switch(inst, False)
        elapsed = time.monotonic_ns() - started
        parser.add(reader.finish())
        return _lost(inst, reader.missed_by_cpu()), elapsed
    finally:
        reader.close()


def _record_text(inst: Path, parser: stream.Parser, until_done: Callable[[], bool],
                 wait: Callable[[float], object]) -> tuple[int, int]:
    """Read ``trace_pipe`` into ``parser`` when a CPU's buffer holds ``DRAIN_KB``; (lost events, ns recorded)."""
    pipe = _Pipe(inst / "trace_pipe", parser)
    try:
        started = time.monotonic_ns()
        _switch(inst, True)
        while not until_done():
            if _fullest_kb(inst) > DRAIN_KB:
                pipe.drain(STEP_BYTES)  # a bounded step: the window closes on time however far behind
            else:
                wait(POLL_S)
        _switch(inst, False)
        elapsed = time.monotonic_ns() - started
        pipe.drain()
        return _lost(inst), elapsed
    finally:
        pipe.close()


def for_duration(duration_s: float) -> Callable[[], bool]:
    """A stop condition: ``duration_s`` seconds from the first call."""
    end: list[float] = []

    def done() -> bool:
        if not end:
            end.append(time.monotonic() + duration_s)
        return time.monotonic() >= end[0]
    return done


@dataclass
class Command:
    """An application run while the capture records: started on the first poll, done when it exits.

    ``returncode`` is its exit status (negative: the signal that ended it), ``runtime_ns`` the time
    from its start to the moment its exit was seen (within ``wait``'s few milliseconds)."""

    argv: Sequence[str]
    returncode: int | None = None
    _proc: subprocess.Popen[bytes] | None = None
    _started_ns: int = 0
    _ended_ns: int = 0

    def __call__(self) -> bool:
        if self._proc is None:
            self._started_ns = time.monotonic_ns()
            try:
                self._proc = subprocess.Popen(list(self.argv))
            except OSError as exc:
                raise UsageError(f"cannot start {self.argv[0]}: {exc.strerror}") from None
        if self.returncode is None:
            self.returncode = self._proc.poll()
            if self.returncode is not None:
                self._ended_ns = time.monotonic_ns()
        return self.returncode is not None

    def wait(self, timeout_s: float) -> None:
        """Sleep until the command exits or ``timeout_s`` passed (``record``'s ``wait``)."""
        if self._proc is None:
            time.sleep(timeout_s)
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout_s)

    @property
    def runtime_ns(self) -> int | None:
        """The command's wall time, ns; None before it exited."""
        return self._ended_ns - self._started_ns if self._ended_ns else None

    def stop(self) -> None:
        """Terminate the application if it still runs (capture interrupted)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
        if self._proc is not None:
            self()  # its status and runtime, if it has ended by now
