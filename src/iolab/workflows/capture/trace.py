"""A captured block trace: one row per request, as numpy columns, and its compact stored form.

Rows come from tracefs text lines (``parse_lines``): a ``block_rq_issue`` event opens a request,
the next ``block_rq_complete`` of the same start sector (and kind: data or flush) closes it. A
request issued before the capture began has no issue event and is left out; one still in flight
when it ended has ``complete_ns == -1``.

Times are ns since the first issue (tracefs prints µs, so they are multiples of 1000); sectors
are 512-byte units, as the block layer counts them (``include/linux/blk_types.h``), from the start
of the captured device (for a partition, ``tracefs.record`` subtracts its start on the disk).
"""

from __future__ import annotations

import dataclasses
import re
import struct
import zlib
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ...errors import StoreError
from ...store.codecs import raw_codec

SECTOR_BYTES = 512
#: Requests per chunk where a trace is read a chunk at a time (``Requests.chunks``): a chunk's
#: temporaries are a few dozen bytes times this.
CHUNK_ROWS = 1 << 16
#: Completions printed up to this long before their issue are taken as ties (tracefs prints µs).
_TIE_NS = 2_000

#: Request kinds (``op`` column), from the operation letter of the kernel's ``rwbs`` string.
READ, WRITE, DISCARD, FLUSH, OTHER = 0, 1, 2, 3, 4
OP_NAMES = ("read", "write", "discard", "flush", "other")
#: ``flags`` bits, from ``blk_fill_rwbs`` (``kernel/trace/blktrace.c``): a leading ``F`` is
#: REQ_PREFLUSH, an ``F`` after the operation REQ_FUA, then ``A`` readahead, ``S`` sync, ``M`` meta.
#: ``ZEROES`` marks a write-zeroes request (REQ_OP_WRITE_ZEROES: ext4's lazy init, ``blkdiscard -z``):
#: ``blk_fill_rwbs`` has no letter for it and prints ``N`` (seen on 6.18: ``NS … 0 + 2048``), as for
#: every other operation it does not name; an ``N`` request with sectors is taken as one (driver
#: pass-through commands, also ``N``, have none: ``blk_rq_trace_nr_sectors``). It is a write
#: (``op`` WRITE), as ``/sys/block/*/stat`` counts it (``Documentation/block/stat.rst``).
PREFLUSH, FUA, SYNC, META, RAHEAD, ZEROES = 1, 2, 4, 8, 16, 32

_LINE = re.compile(
    r"^\s*(?P<task>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[\d+\]\s+(?:\S+\s+)?(?P<ts>\d+)\.(?P<us>\d+):\s+"
    r"block_rq_(?P<event>issue|complete):\s+(?P<maj>\d+),(?P<min>\d+)\s+(?P<rwbs>[A-Z]+)\s+(?:\d+\s+)?"
    r"\((?P<cmd>[^)]*)\)\s+(?P<sector>\d+)\s+\+\s+(?P<nr>\d+)")


def parse_rwbs(rwbs: str, sectors: int = 0) -> tuple[int, int]:
    """``(op, flags)`` of a kernel ``rwbs`` string such as ``WS``, ``FWFS``, ``RA``, ``F``, ``D``;
    ``N`` with ``sectors`` > 0 is a write-zeroes request: ``(WRITE, ZEROES | …)``."""
    flags, rest = 0, rwbs
    if len(rest) > 1 and rest[0] == "F" and rest[1] in "WRDFN":
        flags, rest = PREFLUSH, rest[1:]
    op = {"R": READ, "W": WRITE, "D": DISCARD, "F": FLUSH}.get(rest[:1], OTHER)
    rest = rest[1:]
    if rest.startswith("E"):  # secure erase: "DE"
        rest = rest[1:]
    if rest.startswith("F"):
        flags, rest = flags | FUA, rest[1:]
    for letter, bit in (("A", RAHEAD), ("S", SYNC), ("M", META)):
        if letter in rest:
            flags |= bit
    if op == OTHER and rwbs.lstrip("F").startswith("N") and sectors > 0:
        op, flags = WRITE, flags | ZEROES
    return op, flags


@dataclass(frozen=True, eq=False)
class Trace:
    """Requests of one device in issue order. Columns (numpy, equal length): ``issue_ns``,
    ``complete_ns`` (-1: not completed in the window), ``sector``, ``nbytes``, ``op``
    (``OP_NAMES`` index), ``flags`` (``PREFLUSH``…), ``pid`` (the issuing task).

    ``comms`` maps pid -> task name; ``lost_events`` counts events the kernel dropped (ring buffer
    overrun: then the trace is incomplete and says so); ``duration_ns`` is the capture's length;
    ``left_out`` counts the requests left out by task name (``PROBE_TASKS``, ``of_processes``);
    ``kthreads`` holds the pids that were kernel threads (``is_kernel_thread``)."""

    issue_ns: np.ndarray
    complete_ns: np.ndarray
    sector: np.ndarray
    nbytes: np.ndarray
    op: np.ndarray
    flags: np.ndarray
    pid: np.ndarray
    comms: Mapping[int, str] = field(default_factory=dict)
    lost_events: int = 0
    duration_ns: int = 0
    left_out: Mapping[str, int] = field(default_factory=dict)
    kthreads: frozenset[int] = frozenset()

    def __len__(self) -> int:
        return int(self.issue_ns.shape[0])

    @property
    def span_ns(self) -> int:
        """From the first issue (0) to the last issue or completion, ns (0 without requests)."""
        return max(int(self.issue_ns.max(initial=0)), int(self.complete_ns.max(initial=0)))

    @property
    def latency_ns(self) -> np.ndarray:
        """complete - issue per request; -1 where not completed."""
        return np.where(self.complete_ns >= 0, self.complete_ns - self.issue_ns, -1)

    def select(self, mask: np.ndarray) -> Trace:
        """The requests where ``mask`` holds, times unchanged."""
        return dataclasses.replace(_of([c[mask] for c in self.columns()], self.comms, self.lost_events,
                                       self.duration_ns), left_out=self.left_out, kthreads=self.kthreads)

    def task(self, pid: int) -> str:
        """The name of the task ``pid`` (its pid as text when unknown)."""
        return self.comms.get(pid, str(pid))

    def columns(self) -> tuple[np.ndarray, ...]:
        return (self.issue_ns, self.complete_ns, self.sector, self.nbytes, self.op, self.flags, self.pid)

    def load(self) -> Trace:
        """``Requests.load``: this trace."""
        return self

    def chunks(self, rows: int = CHUNK_ROWS) -> Iterator[Trace]:
        """The requests about ``rows`` at a time, in issue order, as Traces of views (no copy) with
        this trace's comms, lost events, duration and left-out counts: ``Requests.chunks``."""
        for a, b in chunk_bounds(self.issue_ns, rows):
            yield dataclasses.replace(self, issue_ns=self.issue_ns[a:b], complete_ns=self.complete_ns[a:b],
                                      sector=self.sector[a:b], nbytes=self.nbytes[a:b], op=self.op[a:b],
                                      flags=self.flags[a:b], pid=self.pid[a:b])


class Requests(Protocol):
    """A trace as its consumers read it: its figures, and its requests a chunk at a time, so that
    a capture of any length is read in the memory of a chunk. ``Trace`` is one (its chunks are
    views); ``stream.Spooled`` is another (its chunks are read from the spool files).

    ``span_ns`` is the time from the first issue to the last issue or completion (ns);
    ``chunks(rows)`` yields Traces of consecutive requests in issue order, times counted from the
    trace's first issue, each of about ``rows`` requests and never ending inside an instant (the
    next chunk's first issue is later than this chunk's last), with the trace's ``comms``,
    ``lost_events``, ``duration_ns``, ``left_out`` and ``kthreads``."""

    @property
    def comms(self) -> Mapping[int, str]: ...
    @property
    def lost_events(self) -> int: ...
    @property
    def duration_ns(self) -> int: ...
    @property
    def left_out(self) -> Mapping[str, int]: ...
    @property
    def kthreads(self) -> frozenset[int]: ...

    def __len__(self) -> int: ...

    @property
    def span_ns(self) -> int: ...

    def chunks(self, rows: int = CHUNK_ROWS) -> Iterator[Trace]: ...

    def load(self) -> Trace:
        """The whole trace in memory (for a replay, which deals every request to a lane)."""
        ...


def chunk_bounds(issue_ns: np.ndarray, rows: int) -> Iterator[tuple[int, int]]:
    """``[a, b)`` row ranges of about ``rows`` requests of the sorted ``issue_ns`` that never split
    an instant (``issue_ns[b] > issue_ns[b - 1]``)."""
    n, a = issue_ns.size, 0
    while a < n:
        b = min(n, a + rows)
        if b < n:
            b = int(np.searchsorted(issue_ns, issue_ns[b - 1], side="right"))
        yield a, b
        a = b


def _of(cols: Sequence[np.ndarray], comms: Mapping[int, str], lost_events: int, duration_ns: int) -> Trace:
    issue, complete, sector, nbytes, op, flags, pid = cols
    return Trace(issue, complete, sector, nbytes, op, flags, pid, comms=dict(comms), lost_events=lost_events,
                 duration_ns=duration_ns)


_COLUMN_TYPES = ("<i8", "<i8", "<i8", "<i8", "u1", "u1", "<i4")


def from_rows(rows: Iterable[tuple[int, int, int, int, int, int, int]], comms: Mapping[int, str] | None = None,
              lost_events: int = 0, duration_ns: int | None = None) -> Trace:
    """A Trace from ``(issue_ns, complete_ns, sector, nbytes, op, flags, pid)`` rows, sorted by issue
    time (stable: requests issued in the same µs keep the order they came in, the kernel's) and
    shifted so the first issue is at 0 (completions keep -1)."""
    data = sorted(rows, key=lambda row: row[0])
    cols = [np.asarray([r[i] for r in data], dtype=t) for i, t in enumerate(_COLUMN_TYPES)]
    if data:
        t0 = cols[0][0]
        cols[0] = cols[0] - t0
        cols[1] = np.where(cols[1] >= 0, cols[1] - t0, -1)
    end = int(max(cols[0].max(initial=0), cols[1].max(initial=0)))
    return _of(cols, comms or {}, lost_events, end if duration_ns is None else max(duration_ns, end))


#: Tasks whose requests a capture leaves out: the signature probes iolab runs on a device before it
#: writes it (``facts.targets.probe_signatures``: ``blkid -p``, ``wipefs -n``, ~290 reads of a loop
#: device), also when the captured COMMAND is itself iolab, or a ``fit --check`` captures its job.
#: Their requests are counted in ``Trace.left_out``, by task name.
PROBE_TASKS = frozenset({"blkid", "wipefs"})


def parse_lines(lines: Iterable[str], lost_events: int = 0, duration_ns: int | None = None,
                leave_out: Collection[str] = PROBE_TASKS) -> Trace:
    """A Trace from tracefs text lines (``trace``/``trace_pipe`` of the two block events; others and
    comment lines are skipped). Matches each completion to the oldest open issue of its start
    sector and kind. Requests issued by a task named in ``leave_out`` are matched (so their
    completions close nothing else) but left out, counted in ``left_out``; times count from the
    first request kept. Pure."""
    open_: dict[tuple[int, bool], deque[list[int]]] = {}
    orphans: dict[tuple[int, bool], deque[int]] = {}
    rows: list[list[int]] = []
    comms: dict[int, str] = {}
    left_out: dict[str, int] = {}
    for line in lines:
        m = _LINE.match(line)
        if m is None:
            continue
        t_ns = int(m["ts"]) * 1_000_000_000 + int(m["us"].ljust(9, "0")[:9])
        op, flags = parse_rwbs(m["rwbs"], int(m["nr"]))
        sector = int(m["sector"])
        # a flush has no sector: issued at 0, completed at (sector_t)-1 (seen on 6.18)
        key = (-1, True) if op == FLUSH else (sector, False)
        if m["event"] == "issue":
            pid = int(m["pid"])
            task = m["task"].strip()
            row = [t_ns, -1, sector, int(m["nr"]) * SECTOR_BYTES, op, flags, pid]
            if task in leave_out:
                left_out[task] = left_out.get(task, 0) + 1
            else:
                comms.setdefault(pid, task)
                rows.append(row)
            early = orphans.get(key)
            if early and early[0] >= t_ns - _TIE_NS:
                row[1] = max(early.popleft(), t_ns)
            else:
                open_.setdefault(key, deque()).append(row)
        elif (waiting := open_.get(key)):
            waiting.popleft()[1] = t_ns
        else:
            # Events of different CPUs in the same µs may come out of order: a completion printed
            # before its issue waits for it (else that request would look in flight forever).
            waiting_for = orphans.setdefault(key, deque())
            waiting_for.append(t_ns)
            while waiting_for and waiting_for[0] < t_ns - _TIE_NS:
                waiting_for.popleft()
    trace = from_rows((tuple(r) for r in rows), comms, lost_events, duration_ns)  # type: ignore[misc]
    return dataclasses.replace(trace, left_out=left_out) if left_out else trace


#: Kernel threads by name, for pids that exited before the capture could ask ``/proc``: the block
#: layer's and file systems' workers (``kworker/1:1H``, ``jbd2/sda1-8``, ``ksoftirqd/0``…), swapper.
_KTHREAD_NAME = re.compile(r"^(<idle>|swapper|kworker/|jbd2/|ksoftirqd/|kswapd|kcompactd|khugepaged|ext4|xfs|"
                           r"btrfs|kthreadd|irq/|rcu_)")
#: ``PF_KTHREAD`` in ``/proc/PID/stat``'s flags (``include/linux/sched.h``).
_PF_KTHREAD = 0x00200000


def is_kernel_thread(pid: int, name: str, proc: str = "/proc") -> bool:
    """Whether task ``pid`` (named ``name``) is a kernel thread: by its ``PF_KTHREAD`` flag while it
    lives, by its name (``_KTHREAD_NAME``) once it has exited; pid 0 (the idle task) is one."""
    if pid == 0:
        return True
    try:
        with open(f"{proc}/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return bool(int(fields[6]) & _PF_KTHREAD)  # field 9 of stat; 7th after the name
    except (OSError, IndexError, ValueError):
        return bool(_KTHREAD_NAME.match(name))


def of_processes(trace: Trace, names: Collection[str]) -> Trace:
    """The requests issued by the tasks named in ``names`` (a task name as the trace shows it, or a
    pid) and by kernel threads (``kthreads``, or by name: the journal thread and the block layer's
    workers write for the application); the rest are counted in ``left_out`` by task name, and
    times count from the first request kept. Raises nothing; an empty result is an empty trace."""
    wanted = set(names)
    keep_pid = {pid: (trace.task(pid) in wanted or str(pid) in wanted or pid in trace.kthreads
                      or (not trace.kthreads and bool(_KTHREAD_NAME.match(trace.task(pid)))))
                for pid in np.unique(trace.pid).tolist()}
    mask = np.fromiter((keep_pid[p] for p in trace.pid.tolist()), dtype=bool, count=len(trace))
    left = dict(trace.left_out)
    for pid, count in zip(*np.unique(trace.pid[~mask], return_counts=True), strict=True):
        left[trace.task(int(pid))] = left.get(trace.task(int(pid)), 0) + int(count)
    return rebased(dataclasses.replace(trace.select(mask), left_out=left))


def rebased(trace: Trace) -> Trace:
    """``trace`` with times counted from its first issue (completions keep -1)."""
    if not len(trace) or trace.issue_ns[0] == 0:
        return trace
    t0 = trace.issue_ns[0]
    return dataclasses.replace(trace, issue_ns=trace.issue_ns - t0,
                               complete_ns=np.where(trace.complete_ns >= 0, trace.complete_ns - t0, -1))


# -- stored form -------------------------------------------------------------------------------

#: ``encode`` format: ``<BI`` header (format, request count), then the columns in ``Trace.columns``
#: order (times delta-encoded), zlib-compressed. About 3-6 bytes a request for typical traces.
TRACE_FORMAT = 1
_HEADER = struct.Struct("<BI")


def encode(trace: Trace, chunk: int = 1 << 16) -> bytearray:
    """The trace's columns as a compact blob (``comms``, lost events and duration go elsewhere).
    Compressed column by column into one zlib stream by ISA-L's deflate (``store.codecs.raw_codec``,
    level 1: 5.7x zlib's level 1 and a little smaller, 588 against 103 MB/s on a 4k random trace's
    columns; zlib's level 1 was 2 s less for a million requests than its level 6, about a fifth
    larger), ``chunk`` rows at a time, so no copy of a whole column is made; appended to one
    buffer, so no second copy of the blob either (as joining its parts would make)."""
    packer = raw_codec.compressobj(1)
    blob = bytearray(packer.compress(_HEADER.pack(TRACE_FORMAT, len(trace))))

    def gaps(a: int, b: int) -> np.ndarray:
        return np.diff(trace.issue_ns[a - 1:b]) if a else np.diff(trace.issue_ns[:b], prepend=0)

    def latencies(a: int, b: int) -> np.ndarray:
        done = trace.complete_ns[a:b]
        return np.where(done >= 0, done - trace.issue_ns[a:b], -1)
    columns = (gaps, latencies, *((lambda a, b, c=c: c[a:b]) for c in trace.columns()[2:]))
    for column, dtype in zip(columns, _COLUMN_TYPES, strict=True):
        for a in range(0, len(trace), chunk):
            blob += packer.compress(np.ascontiguousarray(column(a, a + chunk), dtype=dtype).data)
    blob += packer.flush()
    return blob


#: Requests per stored chunk (``encode_chunks``): about 1.5 MB encoded, 10 MB as columns (a
#: million took 60 MB more at the peak of storing a capture, for no gain in size).
STORED_CHUNK_ROWS = 1 << 18


def encode_chunks(trace: Requests, rows: int = STORED_CHUNK_ROWS) -> Iterator[tuple[int, bytearray]]:
    """The trace as ``(requests, blob)`` pairs, each ``encode`` of about ``rows`` consecutive
    requests (times from the trace's first issue, so each blob decodes on its own), made one at a
    time as the caller takes them."""
    for part in trace.chunks(rows):
        yield len(part), encode(part)


def decode_chunks(blobs: Iterable[bytes], comms: Mapping[int, str] | None = None, lost_events: int = 0,
                  duration_ns: int = 0) -> Trace:
    """The Trace ``encode_chunks`` stored (or ``encode``: one blob), in memory. Raises StoreError
    as ``decode``."""
    parts = [decode(blob).columns() for blob in blobs]
    cols = [np.concatenate([part[i] for part in parts]) if parts else np.zeros(0, dtype=t)
            for i, t in enumerate(_COLUMN_TYPES)]
    return _of(cols, comms or {}, lost_events, duration_ns)


def decode(blob: bytes, comms: Mapping[int, str] | None = None, lost_events: int = 0,
           duration_ns: int = 0) -> Trace:
    """The Trace ``encode`` stored. Raises StoreError for another format or a blob cut short."""
    data = zlib.decompress(blob)
    version, count = _HEADER.unpack_from(data)
    sizes = [np.dtype(t).itemsize for t in _COLUMN_TYPES]
    if version != TRACE_FORMAT or len(data) != _HEADER.size + count * sum(sizes):
        raise StoreError(f"a stored trace is in format {version} with {len(data)} bytes for {count} requests; "
                         f"this iolab reads format {TRACE_FORMAT}", hint="upgrade iolab")
    cols, offset = [], _HEADER.size
    for t, size in zip(_COLUMN_TYPES, sizes, strict=True):
        cols.append(np.frombuffer(data, dtype=t, count=count, offset=offset).copy())
        offset += size * count
    cols[0] = np.cumsum(cols[0])
    cols[1] = np.where(cols[1] >= 0, cols[0] + cols[1], -1)
    return _of(cols, comms or {}, lost_events, duration_ns)
