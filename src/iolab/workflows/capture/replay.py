"""A capture replayed with fio: iologs (format v3) per I/O size class and lane, and the job file that runs them.

Each size class (the request size rounded up to a power of two: ``bs-4k``, ``bs-64k`` …) is one
fio reporting group replaying only its requests at their original times, all groups running at
once; a flush is fio's ``sync`` action (on a block device, a flush), all of them in one class
(``classes``: the class of the writes they most often follow). So a replay's results come per
class × direction (read/write), and ``iolab compare`` pairs the classes of two replays, or of a
replay and the capture itself (``record.capture_report`` gives the capture the same shape).

The trace is cut into **windows** of equal length (about 0.25 s, ``WINDOW_NS``), and within a
window a class's requests are dealt to **lanes** (``lanes``): a request joins the lowest-numbered
lane whose previous request had completed in the trace when it was issued, so a lane holds one
request at a time and nearly all go to the first (as from the application's one issuing thread).
Each lane of each window is a fio job at ``iodepth=1`` (a class's jobs are one reporting group:
``group_reporting``, ``new_group``). Why, measured with fio 3.33 on a loop device replaying a 4k
randrw trace at 3,000 IOPS whose own run had clat p50 3 µs, p99 108-120 µs:

- not one job at the trace's depth: fio 3.33 reaps completions only when a job's queue is full,
  and sleeps between logged I/Os without reaping (``iolog_delay`` in ``iolog.c``; fixed in 3.36),
  so an I/O completed during a sleep counted the sleep as latency (clat p99 2.1-2.9 ms);
- not the requests spread evenly over the lanes: consecutive requests from different threads
  measured clat p50 38-41 µs, p99 150-180 µs; packed into the first lane, p50 1.7 µs, p99 115-120 µs;
- not one lane for the whole trace: fio sleeps until each logged time *since its previous issue*
  and never makes up a sleep's overshoot (``time_offset`` is only set when a sleep outlasts the
  whole gap), so a job's lateness grows with every request: the 5.00 s trace ran 5.28-5.33 s in
  one job (-5 % IOPS); in windows of 0.25 s, each job starting on time, 5.02 s (-0.4 %), clat
  p99 111-127 µs;
- not jobs that end with their window: fio's status report every second (``--status-interval``,
  iolab's live progress) holds fio's stat lock while it waits for each running job to note its
  CPU use, which a job sleeping until its next request does only when it wakes, and a job that
  ended meanwhile polls for that lock every millisecond (``backend.c``): with 58 such jobs, clat
  p50 11-13 µs instead of 2. So every job's iolog closes the file after the trace's last request.

The windows are made longer when their jobs would exceed ``MAX_JOBS`` (fio starts a thread per
job: 1,000 jobs cost 0.7 s and 270 MB).

iolog v3 timestamps are µs since the job's start (measured with fio 3.33: entries 2 000 000 apart
replay 2 s apart); they are the trace's issue times plus 1 µs, because fio does not wait before
the first I/O after an entry at time 0 (``delay_since_ttime`` treats a last time of 0 as "none").
fio sends every logged I/O to ``replay_redirect``. ``replay_no_stall`` drops the timing (as fast
as the depth allows), ``replay_time_scale`` scales its rate (percent). A target smaller than the
traced range gets ``replay_scale`` (offsets divided by it) and ``replay_align=4096``. Source: fio
HOWTO "Trace file format v3", ``replay_*`` options; fio 3.33 ``iolog.c``, ``backend.c``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ... import outputs
from ...fio import jobfile
from . import deal
from .deal import size_class as size_class  # where it was: `replay.size_class`
from .trace import CHUNK_ROWS, FLUSH, READ, WRITE, Requests, Trace


def classes(trace: Trace) -> dict[str, np.ndarray]:
    """Job name -> sorted index array of its requests: data requests by size class, smallest class
    first; the flushes all join one class, the one that most often holds the last write before a
    flush (the write it makes durable; the first class for a flush with none before it). Not a class
    of their own, because fio refuses an iolog without reads or writes ("failed initializing
    iolog"); not each the class of its own write, because the classes' jobs run at once and each
    syncs on its own, and the kernel serves syncs that overlap with one flush (``block/blk-flush.c``:
    flushes pending while one is in flight are done by the next). SQLite's 5,021 flushes (a commit
    each, never two in flight; 4k and 32k writes) reached the device as 4,498-4,908 when replayed
    from both classes, 4,876-5,021 from one (6 replays each, quiet; medians 0.96 and 0.99 of the
    original). Discards and other requests are not replayed. The rule is ``ClassRule``'s, taken a
    chunk at a time; beside the index arrays, a byte a request."""
    rule = deal.ClassRule()
    klass = np.empty(len(trace), dtype=np.uint8)
    done = 0
    for chunk in trace.chunks():
        klass[done:done + len(chunk)] = rule.of(chunk)
        done += len(chunk)
    flush_class = rule.flush_class()
    if flush_class is not None:
        klass[klass == deal.FLUSH_ROW] = flush_class
    present = np.flatnonzero(np.bincount(klass, minlength=256)[:deal.FLUSH_ROW]).tolist()
    return {deal.class_name(k): _rows_of(klass, k) for k in present}


def class_service(trace: Trace) -> dict[str, dict[str, Any]]:
    """Per class (``classes``): its requests (data and flushes) and the sum of their service times
    (complete - issue, ms; requests without a completion count none), what ``analyze.pace`` sets a
    replay's time spent on the target against. A chunk at a time."""
    out: dict[str, dict[str, Any]] = {}
    for name, indices in classes(trace).items():
        total = 0
        for a in range(0, indices.size, 1 << 16):
            rows = indices[a:a + (1 << 16)]
            done = trace.complete_ns[rows]
            total += int((done - trace.issue_ns[rows])[done >= 0].sum())
        out[name] = {"requests": int(indices.size), "service_ms": total / 1e6}
    return out


def _rows_of(klass: np.ndarray, k: int, step: int = 1 << 16) -> np.ndarray:
    """The rows where ``klass == k``, sorted: int32 when the trace's rows fit (4 bytes a request,
    not 8), gathered a chunk at a time into an array sized by their count."""
    out = np.empty(int(np.count_nonzero(klass == k)), dtype=np.int32 if klass.size < 2**31 else np.int64)
    filled = 0
    for a in range(0, klass.size, step):
        part = np.flatnonzero(klass[a:a + step] == k)
        part += a
        out[filled:filled + part.size] = part
        filled += part.size
    return out


def _class_bytes(label: str) -> int:
    number = int(label[3:-1])
    return number << (20 if label.endswith("m") else 10)


#: Issue times in the iologs are rounded down to this many µs (see ``iolog_text``); 1: as traced.
QUANTUM_US = 1


#: The windows' length (ns) when the job budget allows it, and the budget of fio jobs.
WINDOW_NS = 250_000_000
MAX_JOBS = 512


def lanes(trace: Trace, indices: np.ndarray) -> list[np.ndarray]:
    """``indices`` (issue order) dealt to lanes, each a sorted index array: a request joins the
    lowest-numbered free lane (its last request completed in the trace at or before this issue), or
    a new lane when none is free; a request without a completion holds its lane for the class's
    typical service time (``_typical_service_ns``). A lane of flushes only joins the first lane with
    data (fio refuses an iolog without reads or writes); without any, the flushes are one lane. Pure.
    Requests that never overlap are one lane at once (no per-request loop)."""
    issued_ns = trace.issue_ns[indices]
    done_ns = deal.held_until(issued_ns, trace.complete_ns[indices], _typical_service_ns(trace, indices))
    if indices.size < 2 or (issued_ns[1:] >= np.maximum.accumulate(done_ns[:-1])).all():
        return [np.asarray(indices, dtype=np.int64)] if indices.size else []
    lane_of, count = _lanes_by_chains(issued_ns, done_ns)
    has_data = np.zeros(count, dtype=bool)
    has_data[lane_of[np.isin(trace.op[indices], (READ, WRITE))]] = True
    first = int(np.argmax(has_data)) if has_data.any() else 0
    lane = np.where(has_data[lane_of], lane_of, first)
    order = np.argsort(lane, kind="stable")  # by lane, each in issue order
    split = np.split(np.asarray(indices, dtype=np.int64)[order], np.cumsum(np.bincount(lane, minlength=count))[:-1])
    return [split[k] for k in range(count) if k == first or has_data[k]]


def _typical_service_ns(trace: Trace, indices: np.ndarray) -> int:
    """The median service time in ns (at least 1) of the completed requests among the first
    ``SAMPLE`` of ``indices``: what a request whose completion the trace lacks is taken to have
    lasted. Such a request was either still in flight when the capture ended or its completion event
    was dropped by the kernel (a ring buffer overrun under load: then thousands of them); held for
    good, each would open a lane, and a replay of hundreds of thousands of jobs."""
    head = indices[:deal.SAMPLE]
    return deal.typical(trace.issue_ns[head], trace.complete_ns[head])


def _lanes_by_chains(issued_ns: np.ndarray, done_ns: np.ndarray) -> tuple[np.ndarray, int]:
    """Each request's lane (``Lanes``) and the lanes' count."""
    dealer = deal.Lanes()
    lane_of = dealer.deal(issued_ns, done_ns)
    return lane_of, len(dealer.free_at)


def window_ns(trace: Trace, per_class: Mapping[str, np.ndarray]) -> int:
    """The windows' length in ns: ``WINDOW_NS``, or longer so that the windows times the lanes the
    classes need over the whole trace stay within ``MAX_JOBS`` (``_window_length``)."""
    span = int(trace.issue_ns.max()) + 1 if len(trace) else 1
    return _window_length(span, sum(_most_in_flight(trace, indices) for indices in per_class.values()))


def _window_length(span_ns: int, needed: int) -> int:
    """The windows' length in ns for a trace issuing over ``span_ns`` whose classes need ``needed``
    lanes at most (the sum of their ``_most_in_flight``)."""
    count = max(1, min(math.ceil(span_ns / WINDOW_NS), MAX_JOBS // max(1, needed)))
    return math.ceil(span_ns / count)


def _most_in_flight(trace: Trace, indices: np.ndarray, chunk: int = 1 << 16) -> int:
    """The lanes ``lanes`` deals ``indices`` to, before it merges lanes of flushes alone
    (``InFlight``), ``chunk`` requests at a time."""
    if indices.size == 0:
        return 0
    sweep = deal.InFlight(_typical_service_ns(trace, indices))
    for a in range(0, indices.size, chunk):
        rows = indices[a:a + chunk]
        sweep.add(trace.issue_ns[rows], trace.complete_ns[rows])
    return sweep.most


def _windows(trace: Trace, indices: np.ndarray, length_ns: int) -> np.ndarray:
    """Each request's window (issue time // length); a flush takes the window of the class's data
    request before it (the first one's, when none is), so no window holds flushes alone."""
    window = np.empty(indices.size, dtype=np.int64 if len(trace) and trace.issue_ns[-1] // length_ns >= 2**31
                      else np.int32)
    step = 1 << 16
    for a in range(0, indices.size, step):  # a chunk at a time: no int64 copy of the issue times
        window[a:a + step] = trace.issue_ns[indices[a:a + step]] // length_ns
    data = trace.op[indices]
    data = data <= WRITE  # READ or WRITE (0, 1)
    if data.all() or not data.any():
        return window
    before = np.maximum.accumulate(np.where(data, np.arange(indices.size), -1))
    return window[np.where(before >= 0, before, int(np.argmax(data)))]


def replay_jobs(trace: Trace, windowed: bool = True) -> tuple[dict[str, np.ndarray], int]:
    """fio job name -> its requests, and the windows' length in ns: each window's (``window_ns``)
    lanes (``lanes``) of each class (``classes``), named ``bs-4k``, ``bs-4k.2``, ``bs-4k.3`` … in
    time order (the first names the class's reporting group). ``windowed=False``: one window, for a
    replay without timing (``replay_no_stall``), where the windows' jobs would all run at once."""
    per_class = classes(trace)
    length = window_ns(trace, per_class) if windowed else int(trace.issue_ns.max(initial=0)) + 1
    out: dict[str, np.ndarray] = {}
    for name, indices in per_class.items():
        window = _windows(trace, indices, length)
        number = 0
        # windows never decrease along a class (a flush takes the window of the data before it):
        # each window's requests are a slice
        for part in np.split(indices, np.flatnonzero(window[1:] != window[:-1]) + 1):
            for lane in lanes(trace, part):
                number += 1
                out[name if number == 1 else f"{name}.{number}"] = lane
    return out, length


def replay_job_names(requests: Requests, rows: int = CHUNK_ROWS) -> list[str]:
    """The names ``replay_jobs`` gives its jobs (windowed), for the capture's own job text, which
    names the replay's iologs. From the requests ``rows`` at a time (``Requests.chunks``), in two
    passes: the first finds the flushes' class, each class's most requests in flight and the span
    (what ``window_ns`` needs, ``_needed_lanes``), the second cuts each class into windows and counts
    a window's lanes as its requests pass (``_ClassWindows``), without dealing them where that is
    not needed: a window of data requests only has as many lanes as it has requests in flight at
    most; one with flushes as many as ``lanes`` gives it. Memory: a chunk's, and up to ``SAMPLE``
    requests a class held until their typical service time is known."""
    flush_class, needed, span = _needed_lanes(requests, rows)
    length = _window_length(span, needed)
    windows: dict[int, _ClassWindows] = {}
    rule = deal.ClassRule()
    for chunk in requests.chunks(rows):
        klass = rule.of(chunk)
        if flush_class is not None:
            klass[klass == deal.FLUSH_ROW] = flush_class
        by_class = _rows_by_class(klass)
        by_class.pop(deal.FLUSH_ROW, None)  # flushes without data requests: none replayed
        for k, rows_of_k in by_class.items():
            windows.setdefault(k, _ClassWindows(dealt=k == flush_class)).add(*_class_rows(chunk, rows_of_k), length)
    names: list[str] = []
    for k, counter in sorted(windows.items()):
        name = deal.class_name(k)
        names += [name if j == 1 else f"{name}.{j}" for j in range(1, counter.total() + 1)]
    return names


def _needed_lanes(requests: Requests, rows: int) -> tuple[int | None, int, int]:
    """The flushes' class (``ClassRule.flush_class``), the lanes the classes need over the whole trace
    (the sum of their ``_most_in_flight``) and the span (the last issue + 1 ns, at least 1), in one
    pass. Which class the flushes join is known only at its end, so once a flush has passed, each class
    is counted twice, alone and with every flush (``joined``: from a copy of its count when the first
    flush came, or of the flushes' own count when the class came after it)."""
    rule = deal.ClassRule()
    alone: dict[int, deal.LaneCount] = {}
    joined: dict[int, deal.LaneCount] = {}
    flushes = deal.LaneCount(dealt=False)  # every flush so far
    flushed, span = False, 1
    for chunk in requests.chunks(rows):
        klass = rule.of(chunk)
        span = max(span, int(chunk.issue_ns[-1]) + 1) if len(chunk) else span
        by_class = _rows_by_class(klass)
        flush = by_class.pop(deal.FLUSH_ROW, None)
        if flush is not None and not flushed:
            joined = {k: copy.deepcopy(count) for k, count in alone.items()}
        for k in by_class:
            if k not in alone:
                alone[k] = deal.LaneCount(dealt=False)
                if flushed or flush is not None:
                    joined[k] = copy.deepcopy(flushes)
        flushed |= flush is not None
        for k, count in alone.items():
            mine = by_class.get(k)
            if mine is not None:
                count.add(*_class_rows(chunk, mine))
            both = flush if mine is None else mine if flush is None else np.union1d(mine, flush)
            if k in joined and both is not None:
                joined[k].add(*_class_rows(chunk, both))
        if flush is not None:
            flushes.add(*_class_rows(chunk, flush))
    flush_class = rule.flush_class()
    needed = sum((joined[k] if k == flush_class else count).total() for k, count in alone.items())
    return flush_class, needed, span


def _rows_by_class(klass: np.ndarray) -> dict[int, np.ndarray]:
    """The rows (sorted) of each size class ``klass`` (``ClassRule.of``) holds, smallest first, and
    of the flushes (``FLUSH_ROW``) if any."""
    order = np.argsort(klass, kind="stable")
    counts = np.bincount(klass, minlength=256)
    ends = np.cumsum(counts).tolist()
    return {k: order[ends[k] - count:ends[k]] for k, count in enumerate(counts[:deal.FLUSH_ROW + 1].tolist()) if count}


def _class_rows(chunk: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Issue times, completions and whether each is a read or write, of a chunk's ``rows`` (copies)."""
    return chunk.issue_ns[rows], chunk.complete_ns[rows], chunk.op[rows] <= WRITE


class _ClassWindows:
    """One class's requests cut into windows as ``_windows`` cuts them (a flush takes the window of
    the class's data request before it, the first one's when none is), fed in issue order a chunk at
    a time, and the lanes of each window's part (``LaneCount``) summed: ``total``."""

    def __init__(self, dealt: bool) -> None:
        self.dealt = dealt
        self.lanes = 0
        self._window = -1  # the window of the class's last data request so far
        self._part = deal.LaneCount(dealt)

    def add(self, issued: np.ndarray, completes: np.ndarray, data: np.ndarray, length_ns: int) -> None:
        # data requests' windows never decrease: the running maximum gives a flush the window before it
        window = np.maximum.accumulate(np.where(data, issued // length_ns, -1))
        np.maximum(window, self._window, out=window)
        before = np.concatenate([[self._window], window[:-1]])
        start = 0
        for cut in np.flatnonzero((window != before) & (before >= 0)).tolist():  # a new window's first request
            if cut > start:
                self._part.add(issued[start:cut], completes[start:cut], data[start:cut])
            self.lanes += self._part.total()
            self._part, start = deal.LaneCount(self.dealt), cut
        self._part.add(issued[start:], completes[start:], data[start:])
        self._window = int(window[-1])

    def total(self) -> int:
        """The lanes of every window, once every request was added."""
        return self.lanes + self._part.total()


def iolog_text(trace: Trace, indices: np.ndarray, device: str, quantum_us: int = QUANTUM_US) -> str:
    """An iolog v3 replaying ``indices`` of ``trace`` on ``device``: times in µs since the capture
    began (rounded down to ``quantum_us``), plus 1 (see the module docstring). The file is closed
    after the trace's last request, whichever job it is in, so all jobs end together (see the
    module docstring)."""
    actions = {READ: "read", WRITE: "write", FLUSH: "sync"}
    lines = ["fio version 3 iolog", f"1 {device} add", f"1 {device} open"]
    quantum = max(1, quantum_us)
    t_us = trace.issue_ns[indices] // 1000 // quantum * quantum + 1
    for t, op, sector, nbytes in zip(t_us.tolist(), trace.op[indices].tolist(), trace.sector[indices].tolist(),
                                     trace.nbytes[indices].tolist(), strict=True):
        # fio reads every I/O action with an offset and a length, a sync's being 0 0 (as write_iolog logs it)
        lines.append(f"{t} {device} {actions[op]} " + ("0 0" if op == FLUSH else f"{sector * 512} {nbytes}"))
    end = int(trace.issue_ns.max(initial=0)) // 1000 // quantum * quantum + 2
    lines.append(f"{end} {device} close")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ReplaySettings:
    """How to replay: ``as_fast_as_possible`` is ``replay_no_stall``; ``rate_pct`` is
    ``replay_time_scale``, the replay's I/O rate in % of the trace's (fio's HOWTO: 50 runs at half
    the original rate; fio divides the gaps between logged I/Os by it, ``delay_since_ttime``);
    ``scale`` is ``replay_scale``."""

    as_fast_as_possible: bool = False
    rate_pct: int = 100
    scale: int = 1
    ioengine: str = "libaio"
    quantum_us: int = QUANTUM_US


def needed_scale(lba_end_bytes: int, target_bytes: int | None) -> int:
    """The ``replay_scale`` that fits the traced range into the target: 1 when it fits (or the size is unknown)."""
    if not target_bytes or lba_end_bytes <= target_bytes:
        return 1
    return math.ceil(lba_end_bytes / target_bytes)


def iolog_name(job: str, settings: ReplaySettings = ReplaySettings()) -> str:
    """``bs-4k.iolog``; ``bs-4k-q10000us.iolog`` for another quantum, ``bs-4k-no-stall.iolog`` for a
    replay as fast as possible (its jobs are not windowed): so the job options differ."""
    if settings.as_fast_as_possible:
        return f"{job}-no-stall.iolog"
    return f"{job}.iolog" if settings.quantum_us == QUANTUM_US else f"{job}-q{settings.quantum_us}us.iolog"


#: How many times slower than traced a target's service is modelled (``slowdown_lags``).
SLOWDOWNS = (1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0)


def slowdown_lags(trace: Trace, jobs: Mapping[str, np.ndarray], rate_pct: int = 100,
                  factors: Sequence[float] = SLOWDOWNS) -> dict[str, dict[str, float]]:
    """Per class, for each slowdown ``f`` (``"2"``: twice the traced service time): how late (ms) its
    replay would end if each of its requests took ``f`` times as long as traced and fio issued on
    time otherwise, what ``analyze.pace`` sets a class that fell behind against (the target's share
    of the lag).

    Each fio job (a lane at iodepth 1, ``jobs`` as ``replay_jobs`` deals them) issues a request when
    the previous one has completed and the logged gap since the previous issue has passed, and never
    makes up lost time (``iolog.c``, ``iolog_delay``: the delay is taken since the last issue): request
    k is issued ``max(gap_k, f × service_{k-1})`` after request k-1, so the lane ends ``Σ max(0,
    f × service_{k-1} - gap_k)`` later than traced, plus its last request's ``f × service``. Issue
    times are stretched as ``replay_time_scale=rate_pct`` stretches them; a request without a
    completion takes none. A class's lag is its latest lane's end past the trace's end (its active
    span, stretched as the times are: what ``analyze.pace`` sets the replay against; 0 when no lane
    passes it). Pure; vectorized per lane."""
    stretch = 100 / max(1, rate_pct)
    end = float(max(trace.issue_ns.max(initial=0), trace.complete_ns.max(initial=0))) * stretch  # as analyze.pace
    latest: dict[str, np.ndarray] = {}
    for name, rows in jobs.items():
        if not rows.size:
            continue
        t = trace.issue_ns[rows].astype(np.float64) * stretch
        done = trace.complete_ns[rows]
        service = np.where(done >= 0, done - trace.issue_ns[rows], 0).astype(np.float64)
        gaps = np.diff(t)
        ends = [float(t[-1] + np.maximum(0.0, f * service[:-1] - gaps).sum() + f * service[-1]) for f in factors]
        klass = name.partition(".")[0]
        latest[klass] = np.maximum(latest.get(klass, np.zeros(len(factors))), ends)
    return {klass: {f"{f:g}": round(max(0.0, float(e) - end) / 1e6, 3) for f, e in zip(factors, ends.tolist(),
                                                                                       strict=True)}
            for klass, ends in latest.items()}


def write_iologs(trace: Trace, directory: Path, device: str, settings: ReplaySettings,
                 dealt: tuple[dict[str, np.ndarray], int] | None = None) -> tuple[dict[str, Path], int]:
    """One iolog per fio job (``replay_jobs``, or ``dealt`` when the caller has them) in ``directory``
    (created): job name -> path, and the windows' length in ns. Written through ``outputs``; raises its
    ``OutputError``."""
    paths = {}
    jobs, length = dealt or replay_jobs(trace, windowed=not settings.as_fast_as_possible)
    for name, indices in jobs.items():
        path = outputs.write(directory / iolog_name(name, settings), "a replay iolog",
                             iolog_text(trace, indices, device, settings.quantum_us))
        paths[name] = path
    return paths, length


def job_text(iologs: Mapping[str, Path], settings: ReplaySettings, description: str) -> str:
    """The fio job file replaying ``iologs`` (job name -> path, as ``write_iologs`` names them): one
    job per lane at ``iodepth=1``, all started together (no ``stonewall``), a class's jobs one
    reporting group named after the class (``group_reporting``; ``new_group`` at each class's first lane)."""
    common: list[tuple[str, str | None]] = [("ioengine", settings.ioengine), ("direct", "1"),
                                            ("thread", None), ("group_reporting", None)]
    if settings.as_fast_as_possible:
        common.append(("replay_no_stall", "1"))
    if settings.rate_pct != 100:
        common.append(("replay_time_scale", str(settings.rate_pct)))
    if settings.scale > 1:
        common += [("replay_scale", str(settings.scale)), ("replay_align", "4096")]
    sections = [jobfile.Section("global", tuple(common))]
    for name, path in iologs.items():
        first = "." not in name[3:]
        sections.append(jobfile.Section(name, (("read_iolog", str(path)), ("iodepth", "1"),
                                               *((("new_group", None),) if first else ()))))
    return jobfile.render(tuple(sections), [description])


def _mask(n: int, indices: np.ndarray) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[indices] = True
    return mask
