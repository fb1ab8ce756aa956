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
- **flushes**: requests that are a flush or carry REQ_PREFLUSH, REQ_FUA, REQ_SYNC.
- **left out**: requests of tasks the trace left out (``trace.PROBE_TASKS``: iolab's own signature
  probes; the tasks outside ``--process``), by task name; no other figure counts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .trace import FLUSH, FUA, OP_NAMES, PREFLUSH, READ, SYNC, WRITE, ZEROES, Trace

GRANULE_BYTES = 4096
#: Bins of the charts' aggregates: depth and heat over time, heat over the LBA span.
TIME_BINS, LBA_BINS = 60, 32


@dataclass(frozen=True)
class Dist:
    """A distribution's summary, in the unit its name says (µs for times)."""

    mean: float | None = None
    p50: float | None = None
    p99: float | None = None
    max: float | None = None
    count: int = 0


@dataclass(frozen=True)
class Fingerprint:
    """See the module docstring. Percentages 0-100; None (JSON null, "–" in tables) where nothing
    was measured: without requests no rate, flush or FUA share, inter-arrival or depth at issue;
    without read or write requests no LBA range, mix, sizes or skew (``empty``). ``bs_counts`` maps
    kind -> {bytes: requests};
    ``depth_time_pct`` maps a depth to the share of the capture's time spent at it; ``active_s`` is the
    span IOPS and bandwidth are over (see the module docstring; 0 in fingerprints stored before it); ``depth_over_time``
    and ``heat`` are chart aggregates over ``TIME_BINS`` equal time bins (``bin_s`` each): the mean
    depth per bin, and data requests per time bin × LBA bin (``LBA_BINS`` equal bins from
    ``lba_first_bytes`` to ``lba_end_bytes``)."""

    requests: int
    duration_s: float
    lost_events: int
    ios: Mapping[str, int]
    bytes: Mapping[str, int]
    read_pct_ios: float | None
    read_pct_bytes: float | None
    iops: float | None
    bw_bytes_s: float | None
    bs_counts: Mapping[str, Mapping[int, int]]
    sequential_pct: float | None
    random_pct: float | None
    sequential_pct_by_kind: Mapping[str, float]
    depth_mean: float
    depth_mean_busy: float | None
    depth_max: int
    depth_at_issue: Dist
    depth_time_pct: Mapping[int, float]
    busy_pct: float
    interarrival_us: Dist
    interarrival_cv: float | None
    latency_us: Mapping[str, Dist]
    hot1_pct: float | None
    hot10_pct: float | None
    granules_touched: int
    lba_first_bytes: int | None
    lba_end_bytes: int | None
    flush_pct: float | None
    fua_pct: float | None
    sync_write_pct: float | None
    processes: Mapping[str, int]
    bin_s: float
    depth_over_time: tuple[float, ...]
    heat: tuple[tuple[int, ...], ...] = field(default_factory=tuple)
    active_s: float = 0.0
    zeroes_ios: int = 0
    zeroes_bytes: int = 0
    left_out: Mapping[str, int] = field(default_factory=dict)
    granules_by: str = "start"

    @property
    def data_ios(self) -> int:
        return self.ios.get("read", 0) + self.ios.get("write", 0)

    @property
    def empty(self) -> bool:
        """No read or write request was captured: nothing to replay, fit or rate."""
        return self.data_ios == 0


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


#: Issues per chunk of the depth sweep: its memory is a few dozen bytes times this, not the trace's.
DEPTH_CHUNK = 1 << 18


def _depth(trace: Trace, duration_ns: int, chunk: int = DEPTH_CHUNK) -> dict[str, object]:
    """Depth figures from the steps ``depth_steps`` describes, swept a chunk of issues at a time
    (with the completions between the chunk's first issue and the next chunk's), the depth and the
    area under it carried from chunk to chunk; the distributions kept as histograms of depths."""
    n = len(trace)
    if n == 0:
        return {"depth_mean": 0.0, "depth_mean_busy": None, "depth_max": 0, "depth_time_pct": {}, "busy_pct": 0.0,
                "depth_over_time": (), "depth_at_issue": Dist()}
    issue = trace.issue_ns
    comp = np.sort(trace.complete_ns[trace.complete_ns >= 0])
    last = max(int(issue[-1]), int(comp[-1]) if comp.size else 0)
    end = max(duration_ns, last)
    edges = np.linspace(0, end, TIME_BINS + 1)
    at_edges = np.zeros(edges.size)
    weights = np.zeros(1)
    at_issue = np.zeros(1, dtype=np.int64)
    depth0, area0, busy, deepest, deepest_any = 0, 0.0, 0.0, 0, 0
    c_from = 0
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        t_next = int(issue[b]) if b < n else None
        c_to = comp.size if t_next is None else int(np.searchsorted(comp, t_next, side="left"))
        times = np.concatenate([issue[a:b], comp[c_from:c_to]])
        steps = np.concatenate([np.ones(b - a, dtype=np.int64), -np.ones(c_to - c_from, dtype=np.int64)])
        order = np.lexsort((-steps, times))
        times, depth = times[order], depth0 + np.cumsum(steps[order])
        following = [int(issue[b])] if b < n else []
        if c_to < comp.size:
            following.append(int(comp[c_to]))
        next_t = min(following) if following else end
        spans = np.diff(np.append(times, next_t)).astype(np.float64)
        if weights.size <= int(depth.max()):
            weights = np.pad(weights, (0, int(depth.max()) + 1 - weights.size))
        weights += np.bincount(depth, weights=spans, minlength=weights.size)
        busy += float(spans[depth > 0].sum())
        deepest = max(deepest, int(depth[spans > 0].max(initial=0)))
        deepest_any = max(deepest_any, int(depth.max()))
        area = area0 + np.concatenate([[0.0], np.cumsum(spans * depth)])
        inside = (edges >= times[0]) & (edges <= next_t)
        at_edges[inside] = np.interp(edges[inside], np.append(times, next_t), area)
        area0 = float(area[-1])
        depth0 = int(depth[-1])
        c_from = c_to
        # the depth at the end of each issue's instant: issues then completions up to and at it
        mine = issue[a:b]
        counts = np.searchsorted(issue, mine, side="right") - np.searchsorted(comp, mine, side="right")
        if at_issue.size <= int(counts.max()):
            at_issue = np.pad(at_issue, (0, int(counts.max()) + 1 - at_issue.size))
        at_issue += np.bincount(counts, minlength=at_issue.size)
    total = max(float(end), 1.0)
    per_bin = np.diff(at_edges) / np.diff(edges) if end > 0 else np.zeros(TIME_BINS)
    return {
        "depth_mean": area0 / total,
        "depth_mean_busy": area0 / busy if busy else None,
        "depth_max": deepest or deepest_any,  # not a same-instant tie
        "depth_time_pct": {d: 100.0 * float(w) / total for d, w in enumerate(weights) if w > 0},
        "busy_pct": 100.0 * busy / total,
        "depth_over_time": tuple(round(float(x), 3) for x in per_bin),
        "depth_at_issue": _dist_of_counts(at_issue),
    }


def _dist_of_counts(counts: np.ndarray) -> Dist:
    """``_dist`` of a sample given as a histogram (``counts[v]`` values equal to v): the same mean,
    and the same percentiles (numpy's linear interpolation between order statistics)."""
    total = int(counts.sum())
    if total == 0:
        return Dist()
    cum = np.cumsum(counts)
    values = np.arange(counts.size, dtype=np.float64)

    def order_stat(k: int) -> float:  # the k-th smallest, from 0
        return float(np.searchsorted(cum, k, side="right"))

    def percentile(q: float) -> float:
        pos = (total - 1) * q / 100.0
        lo = int(np.floor(pos))
        hi = min(lo + 1, total - 1)
        return order_stat(lo) + (order_stat(hi) - order_stat(lo)) * (pos - lo)
    return Dist(float((values * counts).sum() / total), percentile(50), percentile(99),
                float(np.flatnonzero(counts)[-1]), total)


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


def _heat(trace: Trace, data: np.ndarray, duration_ns: int, first: int, end: int) -> tuple[tuple[int, ...], ...]:
    if not data.any() or end <= first:
        return ()
    t_bins = np.minimum((trace.issue_ns[data] * TIME_BINS) // max(duration_ns, 1), TIME_BINS - 1)
    l_bins = np.minimum(((trace.sector[data] * 512 - first) * LBA_BINS) // (end - first), LBA_BINS - 1)
    grid = np.zeros((TIME_BINS, LBA_BINS), dtype=np.int64)
    np.add.at(grid, (t_bins, l_bins), 1)
    return tuple(tuple(int(x) for x in row) for row in grid)


def active_ns(trace: Trace) -> int:
    """The active span: from the first issue (time 0) to the last issue or completion, ns (at least 1)."""
    return max(1, int(trace.issue_ns.max(initial=0)), int(trace.complete_ns.max(initial=0)))


def _sequential(trace: Trace) -> tuple[int, dict[str, float]]:
    seq = sequential_mask(trace)
    return int(seq.sum()), {OP_NAMES[k]: 100.0 * float(seq[trace.op == k].mean())
                            for k in (READ, WRITE) if (trace.op == k).any()}


def _lba_and_skew(trace: Trace, data: np.ndarray) -> tuple[int | None, int | None, tuple[float | None, float | None,
                                                                                          int]]:
    """The data requests' LBA range (bytes) and ``skew``."""
    if not data.any():
        return None, None, (None, None, 0)
    sector = trace.sector[data]
    ends = trace.nbytes[data]  # becomes each request's end byte, then its end block, in place
    empty = ends == 0
    ends += sector * 512
    first, end = int(sector.min()) * 512, int(ends.max())
    ends += empty  # a request of no bytes still touches the block it names: max(length, 1)
    del empty
    ends -= 1
    ends //= GRANULE_BYTES
    ends += 1
    sector //= GRANULE_BYTES // 512  # its first block
    return first, end, _skew_blocks(sector, ends)


def _interarrival(trace: Trace) -> tuple[Dist, float | None]:
    gaps_us = np.diff(trace.issue_ns).astype(np.float64)
    gaps_us /= 1000.0
    cv = float(gaps_us.std() / gaps_us.mean()) if gaps_us.size > 1 and gaps_us.mean() > 0 else None
    return _dist(gaps_us), cv


def _service_times(trace: Trace) -> dict[str, Dist]:
    out = {}
    for k in (READ, WRITE, FLUSH):
        rows = np.flatnonzero(trace.op == k)
        if not rows.size:
            continue
        done = trace.complete_ns[rows]
        lat = (done - trace.issue_ns[rows])[done >= 0].astype(np.float64)
        del done, rows
        lat /= 1000.0
        out[OP_NAMES[k]] = _dist(lat)
    return out


def fingerprint(trace: Trace) -> Fingerprint:
    """The fingerprint of ``trace`` (see the module docstring). Pure and deterministic. Each figure
    is computed in its own step, whose temporaries are gone before the next (a few dozen bytes a
    request at most, beside the trace's own columns)."""
    n = len(trace)
    duration_ns = max(trace.duration_ns, int(trace.issue_ns.max(initial=0)), 1)
    ios = {name: int((trace.op == i).sum()) for i, name in enumerate(OP_NAMES) if (trace.op == i).any()}
    nbytes = {name: int(trace.nbytes[trace.op == i].sum()) for i, name in enumerate(OP_NAMES) if name in ios}
    data = (trace.op == READ) | (trace.op == WRITE)
    reads, writes = ios.get("read", 0), ios.get("write", 0)
    sequential, by_kind = _sequential(trace)
    first, end, (hot1, hot10, touched) = _lba_and_skew(trace, data)
    interarrival, cv = _interarrival(trace)
    comms: dict[str, int] = {}
    for pid, count in zip(*np.unique(trace.pid, return_counts=True), strict=True):
        name = trace.comms.get(int(pid), str(pid))
        comms[name] = comms.get(name, 0) + int(count)
    writes_mask = trace.op == WRITE
    zeroes = writes_mask & (trace.flags & ZEROES > 0)
    active = active_ns(trace)
    return Fingerprint(
        requests=n, duration_s=duration_ns / 1e9, lost_events=trace.lost_events, ios=ios, bytes=nbytes,
        read_pct_ios=_pct(reads, reads + writes),
        read_pct_bytes=_pct(nbytes.get("read", 0), nbytes.get("read", 0) + nbytes.get("write", 0)),
        iops=(reads + writes) * 1e9 / active if n else None,
        bw_bytes_s=float(nbytes.get("read", 0) + nbytes.get("write", 0)) * 1e9 / active if n else None,
        bs_counts={OP_NAMES[k]: {int(b): int(c) for b, c in zip(*np.unique(trace.nbytes[trace.op == k],
                                                                           return_counts=True), strict=True)}
                   for k in (READ, WRITE) if (trace.op == k).any()},
        sequential_pct=_pct(sequential, reads + writes),
        random_pct=_pct(reads + writes - sequential, reads + writes),
        sequential_pct_by_kind=by_kind,
        **_depth(trace, duration_ns),  # type: ignore[arg-type]
        interarrival_us=interarrival,
        interarrival_cv=cv,
        latency_us=_service_times(trace),
        hot1_pct=hot1, hot10_pct=hot10, granules_touched=touched, lba_first_bytes=first, lba_end_bytes=end,
        flush_pct=_pct(float(((trace.op == FLUSH) | (trace.flags & PREFLUSH > 0)).sum()), n),
        fua_pct=_pct(float((trace.flags & FUA > 0).sum()), n),
        sync_write_pct=_pct(int((writes_mask & (trace.flags & SYNC > 0)).sum()), writes),
        processes=dict(sorted(comms.items(), key=lambda kv: -kv[1])[:8]),
        bin_s=duration_ns / 1e9 / TIME_BINS,
        heat=_heat(trace, data, duration_ns, first or 0, end or 0), active_s=active / 1e9 if n else 0.0,
        zeroes_ios=int(zeroes.sum()), zeroes_bytes=int(trace.nbytes[zeroes].sum()),
        left_out=dict(sorted(trace.left_out.items(), key=lambda kv: -kv[1])), granules_by="covered",
    )
