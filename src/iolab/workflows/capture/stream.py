"""tracefs text parsed chunk by chunk into requests spooled to disk, in bounded memory.

A long capture at tens of thousands of requests a second holds millions of events: kept as text
lines and Python rows (``trace.parse_lines``, the reference) that took 1.15 GB for 1 M requests
and over a minute after the window closed. ``Parser`` instead takes the bytes ``trace_pipe``
gives, as they come: each chunk's lines are matched by one regular expression (``re.findall``,
in C) and converted to numpy columns at once, issues are paired with completions by vectorized
FIFO matching per start sector and kind (as ``parse_lines`` does one event at a time), and the
chunk's requests are appended to column files in a spool directory. Only requests still in flight
at a chunk's end are carried to the next (a late completion is appended as a patch: row, time).
Memory is bounded by the chunk, not the capture: ``finish`` leaves the requests in the spool
(``Spooled``), which its readers take a chunk at a time (``trace.Requests``).

Pairing, per key (start sector, or -1 for a flush: issued at sector 0, completed at (sector_t)-1):
events sorted by time, a completion counted ``trace._TIE_NS`` later (tracefs prints µs, and a
completion on another CPU in the same µs may come out before its issue); a completion with no
open issue before it (its request was issued before the capture began) is dropped, unless it
came within that tie of a chunk's end (then it waits for the next chunk's issues); the k-th
remaining completion of a key closes its k-th issue (FIFO).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...facts import ftrace
from .trace import (
    _TIE_NS,
    CHUNK_ROWS,
    FLUSH,
    FUA,
    META,
    OTHER,
    PREFLUSH,
    PROBE_TASKS,
    RAHEAD,
    SECTOR_BYTES,
    SYNC,
    WRITE,
    ZEROES,
    Trace,
    parse_rwbs,
)

#: One event line (``trace_pipe`` of ``block_rq_issue``/``block_rq_complete``): task, pid, seconds,
#: fraction, event (i/c), rwbs, sector, sectors. ``_FAST`` reads the usual layout (the task name
#: right-aligned in 16 columns, no command bytes) twice as fast; a chunk where it misses a line is
#: read again with ``_LINE``, which takes any spacing, a tgid column and command bytes.
_LINE = re.compile(
    rb"^ *(.*?)-(\d+) +(?:\( *[-\d]+\) +)?\[\d+\] +(?:\S+ +)?(\d+)\.(\d+): +"
    rb"block_rq_(i|c)\w*: +\d+,\d+ +([A-Z]+) +(?:\d+ +)?\([^)]*\) +(\d+) +\+ +(\d+)", re.M)
_FAST = re.compile(rb"^(.{16})-(\d+)[^:]* (\d+)\.(\d+): block_rq_(.)\w*: \S+ ([A-Z]+) (?:\d+ )?\(\) (\d+) \+ (\d+)",
                   re.M)

#: Spooled columns: name, dtype (the order of ``Trace.columns``).
COLUMNS = (("issue_ns", "<i8"), ("complete_ns", "<i8"), ("sector", "<i8"), ("nbytes", "<i8"), ("op", "u1"),
           ("flags", "u1"), ("pid", "<i4"))
_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Events:
    """A batch of ``block_rq_issue``/``block_rq_complete`` events as columns of equal length, in the
    order the kernel recorded them: ``t_ns`` (int64, the trace clock in ns), ``issue`` (bool: an
    issue, else a completion), ``pid`` (int64, the task the event ran in), ``task`` (bytes, that
    task's name: for an issue the event's ``comm``), ``rwbs`` (``S8``, the kernel's rwbs string),
    ``sector`` (uint64: a flush completes at (sector_t)-1) and ``nr_sectors`` (int64, 512-byte
    sectors). Both the text parser and the ring-buffer reader (``ringbuf``) produce them."""

    t_ns: np.ndarray
    issue: np.ndarray
    pid: np.ndarray
    task: np.ndarray
    rwbs: np.ndarray
    sector: np.ndarray
    nr_sectors: np.ndarray


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for a column of few distinct values (tasks, rwbs
    strings): the distinct ones by hashing, each value's index by a binary search among them, not
    by sorting the column (a third of the pairing's time at 200k requests/s)."""
    distinct = np.unique(values)
    return distinct, np.searchsorted(distinct, values)


#: rwbs letters by ``trace.OP_NAMES`` index (``rwbs_of``).
_RWBS = (b"R", b"W", b"D", b"F", b"N")


def rwbs_of(op: int, flags: int) -> bytes:
    """The kernel's rwbs string of a request (``blk_fill_rwbs``, ``kernel/trace/blktrace.c``): ``F``
    for a preflush, the operation (``N`` for write-zeroes), ``F`` for FUA, then ``A``, ``S``, ``M``;
    ``trace.parse_rwbs`` reads it back."""
    letters = [b"F" if flags & PREFLUSH else b"", b"N" if flags & ZEROES else _RWBS[op], b"F" if flags & FUA else b""]
    letters += [letter for letter, bit in ((b"A", RAHEAD), (b"S", SYNC), (b"M", META)) if flags & bit]
    return b"".join(letters)


def events_of(trace: Trace) -> Events:
    """The events the kernel recorded for ``trace``'s requests, in time order: an issue each (in the
    issuing task, its name as the event's comm) and a completion for each completed one (in no task),
    a flush completing at (sector_t)-1; rwbs from the kind and flags (``rwbs_of``). What a recording of the
    tracepoints gives ``Parser.add``, for tests and benchmarks that feed it a known trace. Pure."""
    done = trace.complete_ns >= 0
    n = len(trace)
    kinds, which = np.unique(trace.op.astype(np.int64) * 256 + trace.flags, return_inverse=True)
    rwbs = np.array([rwbs_of(k // 256, k % 256) for k in kinds.tolist()], dtype="S8")[which.reshape(-1)]
    sector = trace.sector.astype(np.uint64)
    order = np.argsort(np.concatenate([trace.issue_ns, trace.complete_ns[done]]), kind="stable")

    def both(issued: np.ndarray, completed: np.ndarray) -> np.ndarray:
        return np.concatenate([issued, completed[done]])[order]
    return Events(t_ns=both(trace.issue_ns, trace.complete_ns), issue=both(np.ones(n, bool), np.zeros(n, bool)),
                  pid=both(trace.pid.astype(np.int64), np.zeros(n, np.int64)),
                  task=both(np.array([trace.task(p).encode() for p in trace.pid.tolist()], dtype="S16"),
                            np.full(n, b"", dtype="S16")),
                  rwbs=both(rwbs, rwbs),
                  sector=both(sector, np.where(trace.op == FLUSH, np.uint64(2**64 - 1), sector)),
                  nr_sectors=both(trace.nbytes // SECTOR_BYTES, trace.nbytes // SECTOR_BYTES))


SPOOL_PREFIX = "iolab-capture-"


def _spool(base: Path) -> Path:
    """A new spool directory in ``base``, named after this process (``facts.ftrace.owner``), once
    the spools of captures whose process is gone (SIGKILL leaves its spool: ~38 bytes a request) are
    removed."""
    for old in base.glob(f"{SPOOL_PREFIX}*"):
        if ftrace.owner_gone(old.name.removeprefix(SPOOL_PREFIX)):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{SPOOL_PREFIX}{ftrace.owner()}-", dir=base))


class Parser:
    """Feed it ``trace_pipe`` bytes (``feed``) or event columns (``add``), then take the ``trace``
    (times from the first request kept). Requests of tasks in ``leave_out`` are paired (their
    completions close nothing else) but not kept: ``left_out`` counts them by task name. The spool
    directory is removed by ``trace`` (or ``close``)."""

    def __init__(self, leave_out: Collection[str] = PROBE_TASKS, directory: str | None = None) -> None:
        self.spool = _spool(Path(directory or tempfile.gettempdir()))
        self._files = {name: open(self.spool / name, "wb") for name, _ in COLUMNS}  # noqa: SIM115
        self._patches = open(self.spool / "patches", "wb")  # noqa: SIM115
        self._leave_out = {t.encode() for t in leave_out}
        self._rest = b""
        self._open_key, self._open_t, self._open_row = _EMPTY, _EMPTY, _EMPTY
        self._orphan_key, self._orphan_t = _EMPTY, _EMPTY
        self._rwbs: dict[int, tuple[int, int]] = {}
        self.rows = 0
        self.comms: dict[int, str] = {}
        self.left_out: dict[str, int] = {}

    def feed(self, data: bytes) -> None:
        """Parse the complete lines of ``data`` (a partial last line waits for the next call)."""
        data = self._rest + data
        cut = data.rfind(b"\n") + 1
        self._rest = data[cut:]
        if cut:
            self._chunk(data[:cut])

    def _chunk(self, text: bytes) -> None:
        found = _FAST.findall(text)
        if len(found) != text.count(b"block_rq_"):
            found = _LINE.findall(text)
        if not found:
            return
        cols = np.array(found, dtype="S32")
        del found
        self.add(Events(t_ns=cols[:, 2].astype(np.int64) * 1_000_000_000 + _fraction_ns(cols[:, 3]),
                        issue=cols[:, 4] == b"i", pid=cols[:, 1].astype(np.int64), task=cols[:, 0],
                        rwbs=cols[:, 5].astype("S8"), sector=cols[:, 6].astype(np.uint64),
                        nr_sectors=cols[:, 7].astype(np.int64)))

    def add(self, events: Events) -> None:
        """Pair and spool a batch of events, in the order the kernel recorded them (a batch may end
        inside an instant: the pairing's tie rule covers completions seen before their issue)."""
        t, issue = events.t_ns, events.issue
        if not t.size:
            return
        op, flags = self._ops(events.rwbs, events.nr_sectors)
        sector = events.sector
        key = np.where(op == FLUSH, -1, sector.astype(np.int64))  # a flush's sector (0 or -1) is no key
        pid = events.pid
        issues = np.flatnonzero(issue)  # a completion's task is whoever ran then: only issues name theirs
        pids, which = _distinct(pid[issues])
        first = np.empty(pids.size, dtype=np.int64)
        first[which[::-1]] = issues[::-1]  # the last assignment wins: each pid's first issue
        names = [task.decode(errors="replace").strip() for task in events.task[first].tolist()]
        left_out = [i for i, name in enumerate(names) if name.encode() in self._leave_out]
        kept = ~np.isin(which, left_out) if left_out else np.ones(issues.size, dtype=bool)
        for i, count in enumerate(np.bincount(which[~kept], minlength=pids.size).tolist()):
            if count:
                self.left_out[names[i]] = self.left_out.get(names[i], 0) + count
        for i in np.flatnonzero(np.bincount(which[kept], minlength=pids.size)).tolist():
            self.comms.setdefault(int(pids[i]), names[i])
        keep = np.zeros(t.size, dtype=bool)
        keep[issues[kept]] = True
        row = np.full(t.size, -1, dtype=np.int64)
        row[keep] = self.rows + np.arange(int(keep.sum()))
        complete = self._match(key, t, issue, row)
        chunk_rows = keep.nonzero()[0]
        values = (t[chunk_rows], complete[chunk_rows], sector[chunk_rows].astype(np.int64),
                  events.nr_sectors[chunk_rows] * SECTOR_BYTES, op[chunk_rows], flags[chunk_rows], pid[chunk_rows])
        for (name, dtype), column in zip(COLUMNS, values, strict=True):
            self._files[name].write(np.ascontiguousarray(column, dtype=dtype).tobytes())
        self.rows += chunk_rows.size

    def _ops(self, rwbs: np.ndarray, nr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(op, flags)`` columns (``trace.parse_rwbs`` once per distinct rwbs and sectorless-ness;
        an rwbs string has at most 8 letters: its bytes as one integer are its key)."""
        codes = np.ascontiguousarray(rwbs, dtype="S8").view(np.uint64) * np.uint64(2) + (nr > 0)
        distinct, inverse = _distinct(codes)
        table = []
        for code in distinct.tolist():
            known = self._rwbs.get(code)
            if known is None:
                text = np.array([code // 2], dtype=np.uint64).view("S8")[0].decode()
                known = self._rwbs[code] = parse_rwbs(text, code % 2)
            table.append(known)
        ops = np.asarray(table, dtype=np.uint8).reshape(-1, 2)[inverse]
        return ops[:, 0], ops[:, 1]

    def _match(self, key: np.ndarray, t: np.ndarray, issue: np.ndarray, row: np.ndarray) -> np.ndarray:
        """The completion time of each of the chunk's issues (-1: still open, carried); patches for
        the carried issues closed here."""
        n_open, n_orphans = self._open_key.size, self._orphan_key.size
        ev_key = np.concatenate([self._open_key, self._orphan_key, key])
        ev_t = np.concatenate([self._open_t, self._orphan_t, t])
        ev_issue = np.concatenate([np.ones(n_open, dtype=bool), np.zeros(n_orphans, dtype=bool), issue])
        ev_row = np.concatenate([self._open_row, np.full(n_orphans, -1, dtype=np.int64), row])
        ev_index = np.concatenate([np.full(n_open + n_orphans, -1, dtype=np.int64), np.arange(t.size)])
        order = np.lexsort((~ev_issue, np.where(ev_issue, ev_t, ev_t + _TIE_NS), ev_key))
        k, is_i = ev_key[order], ev_issue[order]
        starts = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))
        group = np.cumsum(np.concatenate([[False], k[1:] != k[:-1]]))
        step = np.where(is_i, 1, -1)
        total = np.cumsum(step)
        before = np.concatenate([[0], total])[starts][group]
        level = total - before  # open issues minus completions so far, within the key
        # orphans: completions that take the level to a new low below 0 (no open issue for them)
        width = 2 * level.size + 2
        low = -(np.maximum.accumulate(-level + group * width) - group * width)
        low = np.minimum(low, 0)
        prev_low = np.concatenate([[0], low[:-1]])
        prev_low[starts] = 0
        orphan = ~is_i & (low < prev_low)
        matched = ~is_i & ~orphan
        # the k-th matched completion of a key closes the k-th issue of that key
        issues_at = np.flatnonzero(is_i)
        first_issue = np.searchsorted(issues_at, starts)
        rank = np.cumsum(matched) - np.concatenate([[0], np.cumsum(matched)])[starts][group] - 1
        target = issues_at[first_issue[group[matched]] + rank[matched]]
        closed_t = np.maximum(ev_t[order][matched], ev_t[order][target])
        done = np.full(order.size, -1, dtype=np.int64)
        done[target] = closed_t
        complete = np.full(t.size, -1, dtype=np.int64)
        is_new = ev_index[order] >= 0
        complete[ev_index[order][is_i & is_new]] = done[is_i & is_new]
        late = is_i & ~is_new & (done >= 0)
        late_rows = ev_row[order][late]
        if late_rows.size:
            kept = late_rows >= 0
            self._patches.write(np.stack([late_rows[kept], done[late][kept]], axis=1).astype("<i8").tobytes())
        still = is_i & (done < 0)
        self._open_key, self._open_t, self._open_row = k[still], ev_t[order][still], ev_row[order][still]
        # an orphan printed just before the chunk's end may be the early completion of an issue in the next
        recent = orphan & (ev_t[order] >= int(t.max(initial=0)) - _TIE_NS)
        self._orphan_key, self._orphan_t = k[recent], ev_t[order][recent]
        return complete

    def finish(self, lost_events: int = 0, duration_ns: int | None = None) -> Spooled:
        """The requests parsed, left in the spool (``Spooled``: the caller closes it), put in issue
        order (``_order``). ``duration_ns`` defaults to the last issue or completion. A chunk of
        the spool at a time: memory is a chunk's, however long the capture."""
        if self._rest:
            self._chunk(self._rest + b"\n")
            self._rest = b""
        for f in (*self._files.values(), self._patches):
            f.close()
        try:
            _patch(self.spool, self.rows)
            t0, end = _order(self.spool, self.rows)
        except BaseException:
            self.close()
            raise
        return Spooled(self.spool, self.rows, t0, end, comms=dict(self.comms), lost_events=lost_events,
                       duration_ns=end if duration_ns is None else max(duration_ns, end), left_out=dict(self.left_out))

    def trace(self, lost_events: int = 0, duration_ns: int | None = None) -> Trace:
        """``finish``, loaded into memory (a Trace); removes the spool."""
        with self.finish(lost_events, duration_ns) as spooled:
            return spooled.load()

    def close(self) -> None:
        """Close and remove the spool (idempotent)."""
        for f in (*self._files.values(), self._patches):
            f.close()
        shutil.rmtree(self.spool, ignore_errors=True)


@dataclass(frozen=True, eq=False)
class Spooled:
    """A parsed trace in its spool directory, one file per column (``COLUMNS``), rows in issue
    order, times as the kernel's clock gave them: a ``trace.Requests`` whose chunks are read from
    the files (times counted from ``t0``, the first issue; a partition's data sectors from
    ``first_sector``); ``span_ns`` from the first issue to the last issue or completion. ``close``
    (or leaving a ``with`` block) removes the spool."""

    spool: Path
    rows: int
    t0: int
    span_ns: int = 0
    comms: Mapping[int, str] = field(default_factory=dict)
    lost_events: int = 0
    duration_ns: int = 0
    left_out: Mapping[str, int] = field(default_factory=dict)
    kthreads: frozenset[int] = frozenset()
    first_sector: int = 0

    def __len__(self) -> int:
        return self.rows

    def __enter__(self) -> Spooled:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chunks(self, rows: int = CHUNK_ROWS) -> Iterator[Trace]:
        """``Requests.chunks``: about ``rows`` requests at a time, read from the spool."""
        carry: list[np.ndarray] | None = None
        for a in range(0, self.rows, rows):
            cols = _read(self.spool, a, min(self.rows, a + rows))
            if carry is not None:
                cols = [np.concatenate([c, d]) for c, d in zip(carry, cols, strict=True)]
            last = a + rows >= self.rows
            cut = cols[0].size if last else int(np.searchsorted(cols[0], cols[0][-1], side="left"))
            carry = [c[cut:] for c in cols]  # the last instant waits for the rest of it
            if cut:
                yield self._trace([c[:cut] for c in cols])

    def load(self) -> Trace:
        """The whole trace in memory."""
        return self._trace(_read(self.spool, 0, self.rows))

    def _trace(self, cols: list[np.ndarray]) -> Trace:
        issue, complete, sector, nbytes, op, flags, pid = cols
        issue -= self.t0
        np.subtract(complete, self.t0, out=complete, where=complete >= 0)
        if self.first_sector:  # the events count a partition's sectors from the disk's start
            np.subtract(sector, self.first_sector, out=sector, where=op != FLUSH)
        return Trace(issue, complete, sector, nbytes, op, flags, pid, comms=self.comms, lost_events=self.lost_events,
                     duration_ns=self.duration_ns, left_out=self.left_out, kthreads=self.kthreads)

    def close(self) -> None:
        """Remove the spool (idempotent)."""
        shutil.rmtree(self.spool, ignore_errors=True)


#: Rows per step where the spool is patched, checked and put in order.
_STEP = 1 << 20


def _read(spool: Path, a: int, b: int) -> list[np.ndarray]:
    """Rows ``[a, b)`` of every column file."""
    return [np.fromfile(spool / name, dtype=dtype, count=b - a, offset=a * np.dtype(dtype).itemsize)
            for name, dtype in COLUMNS]


def _patch(spool: Path, rows: int) -> None:
    """Write the late completions (``patches``: row, time) into the completion column: the patches
    sorted by row, then each step of the column that has some read, patched and written back. (Not
    through a memory map: each patched page would stay in the process's memory, and a capture
    patches a few requests at every drain, all through the file: 337 MiB for an hour.)"""
    patches = np.fromfile(spool / "patches", dtype="<i8").reshape(-1, 2)  # 16 bytes per late completion
    if not patches.size or not rows:
        return
    patches = patches[np.argsort(patches[:, 0], kind="stable")]
    bounds = np.searchsorted(patches[:, 0], np.arange(0, rows + _STEP, _STEP))
    with open(spool / "complete_ns", "r+b") as f:
        for k in np.flatnonzero(np.diff(bounds)).tolist():
            a = k * _STEP
            column = np.fromfile(spool / "complete_ns", dtype="<i8", count=min(_STEP, rows - a), offset=a * 8)
            part = patches[bounds[k]:bounds[k + 1]]
            column[part[:, 0] - a] = part[:, 1]
            f.seek(a * 8)
            f.write(column.tobytes())


def _order(spool: Path, rows: int, step: int = _STEP) -> tuple[int, int]:
    """Put the spool's rows in issue order (stable) and return the first issue and the span to the
    last issue or completion (ns). Rows are out of order only where a CPU's events were read late,
    by a little: a first pass finds each step's smallest issue; if some row came before a smaller
    one, a second pass sorts a window at a time, in place, a row leaving the window once no later
    step holds a smaller issue (so the window holds only the rows that are out of place)."""
    if not rows:
        return 0, 0
    lows, highs, ordered, previous = [], [], True, np.iinfo(np.int64).min
    for a in range(0, rows, step):
        issue = np.fromfile(spool / "issue_ns", dtype="<i8", count=min(step, rows - a), offset=a * 8)
        complete = np.fromfile(spool / "complete_ns", dtype="<i8", count=issue.size, offset=a * 8)
        ordered = ordered and previous <= issue[0] and bool((issue[1:] >= issue[:-1]).all())
        previous = int(issue[-1])
        lows.append(int(issue.min()))
        highs.append(max(int(issue.max()), int(complete.max())))
    t0, end = min(lows), max(highs)
    if not ordered:
        later_low = np.minimum.accumulate(np.array(lows[::-1]))[::-1]
        files = {name: open(spool / name, "r+b") for name, _ in COLUMNS}  # noqa: SIM115
        try:
            window: list[np.ndarray] = [np.zeros(0, dtype=dtype) for _, dtype in COLUMNS]
            cursor = 0
            for k, a in enumerate(range(0, rows, step)):
                window = [np.concatenate([w, c]) for w, c in zip(window, _read(spool, a, min(rows, a + step)),
                                                                  strict=True)]
                order = np.argsort(window[0], kind="stable")
                window = [w[order] for w in window]
                cut = window[0].size if k + 1 == len(lows) else int(
                    np.searchsorted(window[0], later_low[k + 1], side="right"))
                for (name, dtype), column in zip(COLUMNS, window, strict=True):
                    files[name].seek(cursor * np.dtype(dtype).itemsize)
                    files[name].write(column[:cut].tobytes())
                cursor += cut
                window = [w[cut:] for w in window]
        finally:
            for f in files.values():
                f.close()
    return t0, end - t0


def _fraction_ns(fraction: np.ndarray) -> np.ndarray:
    """The digits after the seconds' point (tracefs prints 6) as ns."""
    width = np.char.str_len(fraction)
    return fraction.astype(np.int64) * 10 ** (9 - np.minimum(width, 9))


_ = (OTHER, WRITE, ZEROES)  # the op codes parse_rwbs yields, named here for readers
