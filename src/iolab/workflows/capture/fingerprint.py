"""A workload's fingerprint: what a block trace says about its I/O, as a pure function of the trace.

Definitions (each a statement about the requests the device saw, after the page cache and the
I/O scheduler's merging):

- **mix**: reads, writes, discards and flushes by requests and bytes; ``read_pct`` is reads over
  reads + writes (fio's ``rwmixread``), by requests and by bytes. Write-zeroes requests (ext4's lazy
  init, ``blkdiscard -z``) are writes, as ``/sys/block/*/stat`` counts them, and are counted again
  apart (``zeroes_ios``, ``zeroes_bytes``).
- **rate**: IOPS and bandwidth of the data requests over the *active span* (``active_s``), from the
  first issue to the last issue or completion: the capture's window (``duration_s``) also holds the
  time before the workload's first request (an application starting, a tool's preparations), which
  would dilute the rate by however long that took.
- **block sizes**: requests per exact size and kind (fio's ``bssplit`` is this, as percentages).
- **sequential share**: a data request is sequential when it starts where the previous request of
  the same *stream* ended; a stream is one issuing task and one direction, as fio keeps one last
  position per file and direction (``io_u.c``, ``get_next_seq_offset``). ``random_pct`` is the rest
  (fio's ``percentage_random``).
- **depth**: requests in flight (issued, not completed) over time, from the issue and complete
  events; its time-weighted distribution over the whole capture and its mean while busy.
- **inter-arrival**: gaps between consecutive issues; their coefficient of variation (stddev/mean)
  is 1 for a Poisson (open-loop) stream and small for a closed loop at a fixed depth.
- **skew**: accesses per 4 KiB block (granule): a request accesses every block it covers (a 64 KiB
  request, 16), so a 64k sequential write over 4 MiB touches 1,024 blocks; ``hot1_pct``/``hot10_pct``
  are the shares of the accesses that went to the hottest 1 % and 10 % of the blocks touched
  (``granules_by`` = ``"covered"``; fingerprints stored before counted only the block where each
  request starts: ``"start"``).
- **latency**: device service time, complete - issue, of each completed request.
- **flushes**: requests that are a flush or carry REQ_PREFLUSH, REQ_FUA, REQ_SYNC; the flush
  requests themselves (what a replay's fio ``sync`` actions are) per time bin, and their mean service
  time per bin, for the capture's chart.
- **left out**: requests of tasks the trace left out (``trace.PROBE_TASKS``: iolab's own signature
  probes; the tasks outside ``--process``), by task name; no other figure counts them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .summary import GRANULE_BYTES, LBA_BINS, TIME_BINS, Dist, Fingerprint
from .trace import CHUNK_ROWS, FLUSH, FUA, OP_NAMES, PREFLUSH, READ, SYNC, WRITE, ZEROES, Requests, Trace


def _pct(part: float, whole: float) -> float | None:
    return 100.0 * part / whole if whole else None


def _dist(values: np.ndarray) -> Dist:
    if values.size == 0:
        return Dist()
    p50, p99 = np.percentile(values, [50, 99])
    return Dist(float(values.mean()), float(p50), float(p99), float(values.max()), int(values.size))


def sequential_mask(trace: Trace) -> np.ndarray:
    """Per request: starts where the previous request of its stream (pid, kind) ended. Non-data
    requests are False. Vectorized: the requests sorted by stream (stable, so in issue order
    within one), each compared with the one before it in its stream."""
    data = np.flatnonzero((trace.op == READ) | (trace.op == WRITE))
    seq = np.zeros(len(trace), dtype=bool)
    if data.size < 2:
        return seq
    stream = trace.pid[data].astype(np.int64)
    stream *= 8
    stream += trace.op[data]
    order = np.argsort(stream, kind="stable")
    stream = stream[order]
    same = stream[1:] == stream[:-1]
    del stream
    rows = data[order]
    del data, order
    ends = trace.nbytes[rows] // 512
    ends += trace.sector[rows]
    same &= trace.sector[rows[1:]] == ends[:-1]
    del ends
    seq[rows[1:]] = same
    return seq


def depth_steps(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """``(t_ns, depth)``: the in-flight count after each issue or completion, in time order (an
    issue before a completion at the same instant, so the count never goes below zero); requests
    not completed stay in flight."""
    done = trace.complete_ns >= 0
    times = np.concatenate([trace.issue_ns, trace.complete_ns[done]])
    steps = np.concatenate([np.ones(len(trace), dtype=np.int64), -np.ones(int(done.sum()), dtype=np.int64)])
    order = np.lexsort((-steps, times))
    return times[order], np.cumsum(steps[order])


#: Requests per chunk of the fingerprint's passes (the depth sweep's issues, the counts, the skew's
#: coverage, the distributions' tallies): its temporaries are a few dozen bytes times this, not the
#: trace's length.
CHUNK = CHUNK_ROWS


class _Depth:
    """Depth figures from the steps ``depth_steps`` describes, swept a chunk of issues at a time
    (``add``, in order; chunks never end inside an instant) with the completions between the
    chunk's first issue and the next chunk's (completions are carried, sorted, from chunk to chunk
    until their turn: no sorted copy of the whole column), the depth and the area under it carried
    too; the distributions kept as histograms of depths. A chunk waits for the next one's first
    issue (``result`` sweeps the last)."""

    def __init__(self, end_ns: int) -> None:
        self.end = end_ns
        self.edges = np.linspace(0, end_ns, TIME_BINS + 1)
        self.at_edges = np.zeros(self.edges.size)
        self.weights = np.zeros(1)
        self.at_issue = np.zeros(1, dtype=np.int64)
        self.depth0, self.area0, self.busy, self.deepest, self.deepest_any = 0, 0.0, 0.0, 0, 0
        self.swept = self.rows = 0  # completions swept, issues swept
        self.pending = np.zeros(0, dtype=np.int64)  # completions not swept yet, sorted
        self.held: Trace | None = None

    def add(self, part: Trace) -> None:
        if self.held is not None:
            self._sweep(self.held, int(part.issue_ns[0]))
        self.held = part

    def _sweep(self, part: Trace, t_next: int | None) -> None:
        issue = part.issue_ns
        mine_done = part.complete_ns
        pool = np.concatenate([self.pending, mine_done[mine_done >= 0]])
        pool.sort()
        cut = pool.size if t_next is None else int(np.searchsorted(pool, t_next, side="left"))
        now, self.pending = pool[:cut], pool[cut:]
        times = np.concatenate([issue, now])
        steps = np.concatenate([np.ones(issue.size, dtype=np.int64), -np.ones(now.size, dtype=np.int64)])
        order = np.lexsort((-steps, times))
        times, depth = times[order], self.depth0 + np.cumsum(steps[order])
        del order, steps
        next_t = t_next if t_next is not None else self.end  # every later completion is at or after t_next
        spans = np.diff(np.append(times, next_t)).astype(np.float64)
        if self.weights.size <= int(depth.max()):
            self.weights = np.pad(self.weights, (0, int(depth.max()) + 1 - self.weights.size))
        self.weights += np.bincount(depth, weights=spans, minlength=self.weights.size)
        self.busy += float(spans[depth > 0].sum())
        self.deepest = max(self.deepest, int(depth[spans > 0].max(initial=0)))
        self.deepest_any = max(self.deepest_any, int(depth.max()))
        area = self.area0 + np.concatenate([[0.0], np.cumsum(spans * depth)])
        inside = (self.edges >= times[0]) & (self.edges <= next_t)
        self.at_edges[inside] = np.interp(self.edges[inside], np.append(times, next_t), area)
        self.area0 = float(area[-1])
        self.depth0 = int(depth[-1])
        del times, depth, spans, area
        # the depth at the end of each issue's instant: issues then completions up to and at it (the
        # completions before the chunk were swept; those after it come after its last instant)
        counts = (self.rows + np.searchsorted(issue, issue, side="right") - self.swept
                  - np.searchsorted(now, issue, side="right"))
        if self.at_issue.size <= int(counts.max()):
            self.at_issue = np.pad(self.at_issue, (0, int(counts.max()) + 1 - self.at_issue.size))
        self.at_issue += np.bincount(counts, minlength=self.at_issue.size)
        self.swept += now.size
        self.rows += issue.size

    def result(self) -> dict[str, object]:
        if self.held is None:
            return {"depth_mean": 0.0, "depth_mean_busy": None, "depth_max": 0, "depth_time_pct": {},
                    "busy_pct": 0.0, "depth_over_time": (), "depth_at_issue": Dist()}
        self._sweep(self.held, None)
        self.held = None
        total = max(float(self.end), 1.0)
        per_bin = np.diff(self.at_edges) / np.diff(self.edges) if self.end > 0 else np.zeros(TIME_BINS)
        return {
            "depth_mean": self.area0 / total,
            "depth_mean_busy": self.area0 / self.busy if self.busy else None,
            "depth_max": self.deepest or self.deepest_any,  # not a same-instant tie
            "depth_time_pct": {d: 100.0 * float(w) / total for d, w in enumerate(self.weights) if w > 0},
            "busy_pct": 100.0 * self.busy / total,
            "depth_over_time": tuple(round(float(x), 3) for x in per_bin),
            "depth_at_issue": _dist_of_counts(self.at_issue),
        }


def _depth(trace: Requests, duration_ns: int, chunk: int = CHUNK) -> dict[str, object]:
    """``_Depth``'s figures of ``trace`` over ``max(duration_ns, its span)``."""
    sweep = _Depth(max(duration_ns, trace.span_ns))
    for part in trace.chunks(chunk):
        sweep.add(part)
    return sweep.result()


def _dist_of_counts(counts: np.ndarray) -> Dist:
    """``_dist`` of a sample given as a histogram (``counts[v]`` values equal to v)."""
    return Tally.of_histogram(counts).dist()[0]


def skew(offsets: np.ndarray, lengths: np.ndarray | None = None) -> tuple[float | None, float | None, int]:
    """The shares (%) of block accesses that went to the hottest 1 % and 10 % of the 4 KiB blocks
    touched, and how many blocks were touched, for requests at ``offsets`` (bytes) of ``lengths``
    bytes each (each accesses every block it covers; without ``lengths``, only the block it starts
    in); None, None, 0 without requests.

    Computed over runs of blocks, not block by block (a sweep over the requests' start and end
    blocks: runs with the same access count), so memory is O(requests) however much they cover."""
    if offsets.size == 0:
        return None, None, 0
    offsets = np.asarray(offsets, dtype=np.int64)
    first = offsets // GRANULE_BYTES
    if lengths is None:
        end = first + 1
    else:  # in place, a column at a time: (offset + max(length, 1) - 1) // 4096 + 1
        end = np.maximum(np.asarray(lengths, dtype=np.int64), 1)
        end -= 1
        end += offsets
        end //= GRANULE_BYTES
        end += 1
    return _skew_blocks(first, end)


def _skew_blocks(first: np.ndarray, end: np.ndarray) -> tuple[float | None, float | None, int]:
    """``skew`` of requests covering blocks ``[first, end)`` (int64 block numbers; both arrays are
    used up: sorted or overwritten in place)."""
    if np.array_equal(end, first + 1):  # one block each (4k random I/O): counts per block, one sort
        del end
        first.sort()
        starts = np.flatnonzero(np.concatenate([[True], first[1:] != first[:-1]]))
        counts = np.diff(np.append(starts, first.size))
        return _shares_of_runs(np.ones(counts.size, dtype=np.int64), counts)
    edges = np.concatenate([first, end])
    steps = np.concatenate([np.ones(first.size, dtype=np.int64), -np.ones(end.size, dtype=np.int64)])
    order = np.argsort(edges, kind="stable")
    edges, level = edges[order], np.cumsum(steps[order])
    run_blocks, run_count = np.diff(edges), level[:-1]
    touched = run_blocks > 0
    run_blocks, run_count = run_blocks[touched & (run_count > 0)], run_count[touched & (run_count > 0)]
    return _shares_of_runs(run_blocks, run_count)


def _shares_of_runs(run_blocks: np.ndarray, run_count: np.ndarray) -> tuple[float, float, int]:
    """``skew``'s figures from runs of ``run_blocks`` blocks accessed ``run_count`` times each."""
    order = np.argsort(-run_count, kind="stable")
    run_blocks, run_count = run_blocks[order], run_count[order]
    blocks, accesses = np.cumsum(run_blocks), np.cumsum(run_blocks * run_count)
    total_blocks, total = int(blocks[-1]), float(accesses[-1])

    def share(fraction: float) -> float:
        n = max(1, round(fraction * total_blocks))
        i = int(np.searchsorted(blocks, n))  # the run holding the n-th hottest block
        before_blocks = int(blocks[i - 1]) if i else 0
        before = float(accesses[i - 1]) if i else 0.0
        return 100.0 * (before + (n - before_blocks) * float(run_count[i])) / total
    return share(0.01), share(0.10), total_blocks


class Tally:
    """A sample of integers (ns, depths) kept as its distinct values and their counts, a chunk at a
    time, with its exact size, minimum and maximum beside. Memory grows with the distinct values up
    to ``DISTINCT``; past that, values are kept to ``SIGNIFICANT_BITS`` significant bits (rounded
    down: one under 2**14 stays exact, a larger one ends within 2**-13, 0.012 %, below), so a
    capture with ns times (the ring buffer's), whose gaps and service times are nearly all
    distinct, keeps a few thousand values per octave, not one per request; its mean and variance
    are then carried exactly beside (Chan, Golub and LeVeque's pairwise update). Its figures are
    numpy's on the whole sample (``percentile``: linear interpolation between order statistics,
    ``np.percentile``'s default): exact while every value is kept (and then the same however the
    sample was cut into chunks), the percentiles within the rounding after."""

    DISTINCT = 1 << 16
    SIGNIFICANT_BITS = 14

    def __init__(self) -> None:
        self.values = np.zeros(0, dtype=np.int64)
        self.counts = np.zeros(0, dtype=np.int64)
        self.total = 0
        self.minimum = self.maximum = 0
        self.rounded = False  # values kept to SIGNIFICANT_BITS, the moments carried in _mean, _m2
        self._mean = self._m2 = 0.0

    @classmethod
    def of_histogram(cls, counts: np.ndarray) -> Tally:
        """The sample ``counts`` describes: ``counts[v]`` values equal to v."""
        tally = cls()
        values = np.flatnonzero(counts)
        tally._merge(values, np.asarray(counts, dtype=np.int64)[values])
        if values.size:
            tally.total, tally.minimum, tally.maximum = int(tally.counts.sum()), int(values[0]), int(values[-1])
        return tally

    def add(self, sample: np.ndarray) -> None:
        if not sample.size:
            return
        low, high = int(sample.min()), int(sample.max())
        if self.rounded:  # the moments of the sample as it is, then its values rounded
            total = self.total + sample.size
            mean = float(np.mean(sample))
            delta = mean - self._mean
            self._m2 += float(np.var(sample)) * sample.size + delta * delta * self.total * sample.size / total
            self._mean += delta * sample.size / total
            sample = _rounded(sample, self.SIGNIFICANT_BITS)
        self.minimum, self.maximum = (min(self.minimum, low), max(self.maximum, high)) if self.total else (low, high)
        self.total += sample.size
        self._merge(*np.unique(sample, return_counts=True))

    def _merge(self, values: np.ndarray, counts: np.ndarray) -> None:
        if self.values.size:
            values, counts = _summed(np.concatenate([self.values, values]), np.concatenate([self.counts, counts]))
        self.values, self.counts = values.astype(np.int64, copy=False), counts
        if self.values.size > self.DISTINCT and not self.rounded:
            self._mean, std = self.mean_std()
            self._m2 = std * std * float(self.counts.sum())
            self.rounded = True
            self.values, self.counts = _summed(_rounded(self.values, self.SIGNIFICANT_BITS), self.counts)

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0..100) of a sample that is not empty."""
        cum = np.cumsum(self.counts)

        def order_stat(k: int) -> float:  # the k-th smallest, from 0
            return float(self.values[np.searchsorted(cum, k, side="right")])
        pos = (int(cum[-1]) - 1) * q / 100.0
        lo = int(np.floor(pos))
        hi = min(lo + 1, int(cum[-1]) - 1)
        return order_stat(lo) + (order_stat(hi) - order_stat(lo)) * (pos - lo)

    def mean_std(self) -> tuple[float, float]:
        """Mean and standard deviation (population, as numpy's) of a sample that is not empty."""
        if self.rounded:
            return self._mean, float(np.sqrt(max(self._m2, 0.0) / self.total))
        total = int(self.counts.sum())
        mean = float((self.values.astype(np.float64) * self.counts).sum()) / total
        return mean, float(np.sqrt((self.counts * (self.values - mean) ** 2).sum() / total))

    def dist(self, scale: float = 1.0) -> tuple[Dist, float | None]:
        """``_dist`` of the sample divided by ``scale``, and its standard deviation."""
        if self.total == 0:
            return Dist(), None
        mean, std = self.mean_std()
        return (Dist(mean / scale, self.percentile(50) / scale, self.percentile(99) / scale,
                     float(self.maximum) / scale, self.total), std / scale)


def _summed(values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``values`` (sorted) and the sum of ``counts`` (int64) for each."""
    distinct, inverse = np.unique(values, return_inverse=True)
    return distinct, np.bincount(inverse.reshape(-1), weights=counts, minlength=distinct.size).astype(np.int64)


def _rounded(values: np.ndarray, bits: int) -> np.ndarray:
    """``values`` (int64) rounded down to ``bits`` significant bits; those under ``2**bits`` (and
    negative ones) as they are."""
    values = np.asarray(values, dtype=np.int64)
    shift = np.maximum(np.frexp(np.maximum(values, 1).astype(np.float64))[1] - bits, 0)  # frexp: the bit length
    shift += (values >> shift) >= (1 << bits)  # a float rounded up to the next power of two
    return (values >> shift) << shift


class _Coverage:
    """The blocks data requests cover, as a sparse step function (the block numbers where the access
    count changes, and by how much); ``skew`` reads its runs. Chunks' requests wait in ``pending``
    until they are as many as the steps (or a million), then are merged at once: each merge sorts the
    steps anew, so merging every chunk cost a sort of the whole function per chunk."""

    def __init__(self) -> None:
        self.edges = np.zeros(0, dtype=np.int64)
        self.steps = np.zeros(0, dtype=np.int64)
        self.pending: list[tuple[np.ndarray, np.ndarray]] = []
        self.waiting = 0

    def add(self, first: np.ndarray, end: np.ndarray) -> None:
        self.pending.append((first, end))
        self.waiting += first.size
        if self.waiting >= max(1 << 20, self.edges.size):
            self._merge()

    def _merge(self) -> None:
        if not self.pending:
            return
        starts, opened = np.unique(np.concatenate([f for f, _ in self.pending]), return_counts=True)
        ends, closed = np.unique(np.concatenate([e for _, e in self.pending]), return_counts=True)
        self.pending, self.waiting = [], 0
        edges, steps = _summed(np.concatenate([self.edges, starts, ends]),
                               np.concatenate([self.steps, opened, -closed]))
        keep = steps != 0  # a run that ends where the next with the same count starts: one run
        self.edges, self.steps = edges[keep], steps[keep]

    def skew(self) -> tuple[float | None, float | None, int]:
        self._merge()
        if not self.edges.size:
            return None, None, 0
        level = np.cumsum(self.steps)[:-1]
        blocks = np.diff(self.edges)
        return _shares_of_runs(blocks[level > 0], level[level > 0])


@dataclass
class _Counts:
    """What the first pass over the trace's chunks counts (``_count``)."""

    ios: np.ndarray
    nbytes: np.ndarray
    bs: dict[int, dict[int, int]]
    pids: dict[int, int]
    seq: np.ndarray
    flush: int = 0
    fua: int = 0
    sync_writes: int = 0
    zeroes_ios: int = 0
    zeroes_bytes: int = 0
    first: int | None = None
    end: int | None = None
    last_issue: int = 0


def _merge(into: dict[int, int], values: np.ndarray, counts: np.ndarray) -> None:
    for v, c in zip(values.tolist(), counts.tolist(), strict=True):
        into[v] = into.get(v, 0) + c


def _count(trace: Requests, coverage: _Coverage, interarrival: Tally, service: dict[int, Tally],
           chunk: int) -> _Counts:
    """One pass over ``trace`` a chunk at a time: the mix, sizes, tasks, flags, LBA range and
    sequential requests (``_Counts``), the blocks covered into ``coverage``, the gaps between issues
    and each kind's service times into the tallies."""
    out = _Counts(np.zeros(len(OP_NAMES), dtype=np.int64), np.zeros(len(OP_NAMES), dtype=np.int64),
                  {READ: {}, WRITE: {}}, {}, np.zeros(len(OP_NAMES), dtype=np.int64))
    last_end: dict[int, int] = {}  # a stream's (pid, kind) last data request's end sector
    last_issue: np.ndarray = np.zeros(0, dtype=np.int64)
    for part in trace.chunks(chunk):
        op, nbytes, flags, sector = part.op, part.nbytes, part.flags, part.sector
        out.ios += np.bincount(op, minlength=out.ios.size)[:out.ios.size]
        for k in np.unique(op).tolist():
            mine = op == k
            out.nbytes[k] += int(nbytes[mine].sum())
            if k in (READ, WRITE):
                _merge(out.bs[k], *np.unique(nbytes[mine], return_counts=True))
            done = part.complete_ns[mine]
            if k in service:
                lat = done - part.issue_ns[mine]
                service[k].add(lat[done >= 0])
        _merge(out.pids, *np.unique(part.pid, return_counts=True))
        out.flush += int(((op == FLUSH) | (flags & PREFLUSH > 0)).sum())
        out.fua += int((flags & FUA > 0).sum())
        writes = op == WRITE
        out.sync_writes += int((writes & (flags & SYNC > 0)).sum())
        zeroes = writes & (flags & ZEROES > 0)
        out.zeroes_ios += int(zeroes.sum())
        out.zeroes_bytes += int(nbytes[zeroes].sum())
        interarrival.add(np.diff(np.concatenate([last_issue, part.issue_ns])))
        last_issue = part.issue_ns[-1:]
        out.last_issue = int(last_issue[0])
        rows = np.flatnonzero((op == READ) | writes)
        if not rows.size:
            continue
        start = sector[rows]
        stop = nbytes[rows] // 512  # its end sector
        stop += start
        first = int(start.min()) * 512
        end = int((start * 512 + nbytes[rows]).max())
        out.first = first if out.first is None else min(out.first, first)
        out.end = end if out.end is None else max(out.end, end)
        _sequential_chunk(part.pid[rows], op[rows], start, stop, last_end, out.seq)
        blocks = np.maximum(nbytes[rows], 1)  # a request of no bytes still touches the block it names
        blocks -= 1
        blocks += start * 512
        blocks //= GRANULE_BYTES
        blocks += 1
        coverage.add(start // (GRANULE_BYTES // 512), blocks)
    return out


def _sequential_chunk(pid: np.ndarray, op: np.ndarray, start: np.ndarray, stop: np.ndarray,
                      last_end: dict[int, int], seq: np.ndarray) -> None:
    """``sequential_mask`` for a chunk's data requests (their pids, kinds, start and end sectors),
    each stream's last end carried in ``last_end`` from chunk to chunk; the sequential ones counted
    into ``seq`` by kind."""
    stream = pid.astype(np.int64)
    stream *= 8
    stream += op
    order = np.argsort(stream, kind="stable")
    stream, start, stop = stream[order], start[order], stop[order]
    firsts = np.flatnonzero(np.concatenate([[True], stream[1:] != stream[:-1]]))
    lasts = np.append(firsts[1:], stream.size) - 1
    before = np.empty_like(stop)
    before[1:] = stop[:-1]
    before[firsts] = [last_end.get(s, np.iinfo(np.int64).min) for s in stream[firsts].tolist()]
    last_end.update(zip(stream[lasts].tolist(), stop[lasts].tolist(), strict=True))
    hits = stream[start == before] % 8
    seq += np.bincount(hits, minlength=seq.size)[:seq.size]


class _Heat:
    """Data requests per time bin (``TIME_BINS`` over ``duration_ns``, by issue) and LBA bin
    (``LBA_BINS`` over ``[first, end)`` bytes), a chunk at a time."""

    def __init__(self, duration_ns: int, first: int, end: int) -> None:
        self.duration, self.first, self.end = max(duration_ns, 1), first, end
        self.grid = np.zeros(TIME_BINS * LBA_BINS, dtype=np.int64)

    def add(self, part: Trace) -> None:
        if self.end <= self.first:
            return
        rows = np.flatnonzero((part.op == READ) | (part.op == WRITE))
        t_bins = np.minimum((part.issue_ns[rows] * TIME_BINS) // self.duration, TIME_BINS - 1)
        l_bins = np.minimum(((part.sector[rows] * 512 - self.first) * LBA_BINS) // (self.end - self.first),
                            LBA_BINS - 1)
        self.grid += np.bincount(t_bins * LBA_BINS + l_bins, minlength=self.grid.size)

    def result(self) -> tuple[tuple[int, ...], ...]:
        if self.end <= self.first:
            return ()
        return tuple(tuple(int(x) for x in row) for row in self.grid.reshape(TIME_BINS, LBA_BINS))


class _Flushes:
    """Flush requests per time bin (``TIME_BINS`` over ``duration_ns``, by issue time) and their mean
    service time per bin in µs (None where none completed); empty without flushes."""

    def __init__(self, duration_ns: int) -> None:
        self.duration = max(duration_ns, 1)
        self.count = np.zeros(TIME_BINS, dtype=np.int64)
        self.done = np.zeros(TIME_BINS, dtype=np.int64)
        self.service = np.zeros(TIME_BINS, dtype=np.float64)

    def add(self, part: Trace) -> None:
        rows = np.flatnonzero(part.op == FLUSH)
        if not rows.size:
            return
        bins = np.minimum(part.issue_ns[rows] * TIME_BINS // self.duration, TIME_BINS - 1)
        self.count += np.bincount(bins, minlength=TIME_BINS)
        completed = part.complete_ns[rows] >= 0
        self.done += np.bincount(bins[completed], minlength=TIME_BINS)
        self.service += np.bincount(bins[completed], weights=(part.complete_ns[rows] - part.issue_ns[rows])[completed],
                                    minlength=TIME_BINS)

    def result(self) -> dict[str, tuple[float | None, ...]]:
        if not self.count.any():
            return {"flushes_over_time": (), "flush_service_over_time": ()}
        means = tuple(round(float(s) / int(n) / 1000, 1) if n else None
                      for s, n in zip(self.service, self.done, strict=True))
        return {"flushes_over_time": tuple(int(x) for x in self.count), "flush_service_over_time": means}


def active_ns(trace: Requests) -> int:
    """The active span: from the first issue (time 0) to the last issue or completion, ns (at least 1)."""
    return max(1, trace.span_ns)


def fingerprint(trace: Requests, chunk: int = CHUNK) -> Fingerprint:
    """The fingerprint of ``trace`` (see the module docstring). Pure and deterministic. Two passes
    over its chunks of ``chunk`` requests (``Requests.chunks``: read from the spool for a capture
    being saved): one for the counts, the skew's coverage and the distributions' tallies, one for
    the depth, the heat and the flushes over time, which need the LBA range and the duration. So
    its memory is a few dozen bytes times ``chunk``, plus the distinct gaps, service times and
    coverage edges (few for an application's trace; at most a few bytes a request), whatever the
    trace's length."""
    n = len(trace)
    coverage, gaps = _Coverage(), Tally()
    service = {k: Tally() for k in (READ, WRITE, FLUSH)}
    c = _count(trace, coverage, gaps, service, chunk)
    duration_ns = max(trace.duration_ns, c.last_issue, 1)  # the window, or to the last issue
    ios = {name: int(c.ios[i]) for i, name in enumerate(OP_NAMES) if c.ios[i]}
    nbytes = {name: int(c.nbytes[i]) for i, name in enumerate(OP_NAMES) if name in ios}
    reads, writes = ios.get("read", 0), ios.get("write", 0)
    sequential = int(c.seq[READ] + c.seq[WRITE])
    hot1, hot10, touched = coverage.skew()
    del coverage
    interarrival, std = gaps.dist(1000.0)
    cv = std / interarrival.mean if n > 2 and std is not None and interarrival.mean else None
    comms: dict[str, int] = {}
    for pid, count in sorted(c.pids.items()):
        name = trace.comms.get(int(pid), str(pid))
        comms[name] = comms.get(name, 0) + int(count)
    active = active_ns(trace)
    depth = _Depth(max(duration_ns, trace.span_ns))
    heat, flushes = _Heat(duration_ns, c.first or 0, c.end or 0), _Flushes(duration_ns)
    for part in trace.chunks(chunk):
        depth.add(part)
        heat.add(part)
        flushes.add(part)
    return Fingerprint(
        requests=n, duration_s=duration_ns / 1e9, lost_events=trace.lost_events, ios=ios, bytes=nbytes,
        read_pct_ios=_pct(reads, reads + writes),
        read_pct_bytes=_pct(nbytes.get("read", 0), nbytes.get("read", 0) + nbytes.get("write", 0)),
        iops=(reads + writes) * 1e9 / active if n else None,
        bw_bytes_s=float(nbytes.get("read", 0) + nbytes.get("write", 0)) * 1e9 / active if n else None,
        bs_counts={OP_NAMES[k]: dict(sorted(c.bs[k].items())) for k in (READ, WRITE) if c.bs[k]},
        sequential_pct=_pct(sequential, reads + writes),
        random_pct=_pct(reads + writes - sequential, reads + writes),
        sequential_pct_by_kind={OP_NAMES[k]: 100.0 * float(c.seq[k]) / float(c.ios[k]) for k in (READ, WRITE)
                                if c.ios[k]},
        **depth.result(),  # type: ignore[arg-type]
        interarrival_us=interarrival,
        interarrival_cv=cv,
        latency_us={OP_NAMES[k]: tally.dist(1000.0)[0] for k, tally in service.items() if c.ios[k]},
        hot1_pct=hot1, hot10_pct=hot10, granules_touched=touched, lba_first_bytes=c.first, lba_end_bytes=c.end,
        flush_pct=_pct(float(c.flush), n),
        fua_pct=_pct(float(c.fua), n),
        sync_write_pct=_pct(c.sync_writes, writes),
        processes=dict(sorted(comms.items(), key=lambda kv: -kv[1])[:8]),
        bin_s=duration_ns / 1e9 / TIME_BINS,
        heat=heat.result(), active_s=active / 1e9 if n else 0.0,
        zeroes_ios=c.zeroes_ios, zeroes_bytes=c.zeroes_bytes,
        left_out=dict(sorted(trace.left_out.items(), key=lambda kv: -kv[1])), granules_by="covered",
        **flushes.result(),  # type: ignore[arg-type]
    )
