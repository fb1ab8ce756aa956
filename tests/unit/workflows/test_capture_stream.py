"""The streaming parser (``capture.stream.Parser``) against the reference (``trace.parse_lines``):
the same requests from the same tracefs text, however the text is cut into pieces."""

from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iolab.workflows.capture import fingerprint as fp_mod
from iolab.workflows.capture import replay, stream, summary
from iolab.workflows.capture import trace as trace_mod

TASKS = ("fio", "kworker/0:1H", "jbd2/loop1p1-8", "blkid", "my app")


def _lines(events: list[tuple[int, int, int, int, int, bool]]) -> str:
    """tracefs lines for requests ``(gap_us, latency_us, sector, kind, task, complete_first)``:
    kind 0 read, 1 write, 2 flush, 3 write-zeroes; a completion may be printed a µs before its
    issue (another CPU) or be missing (still in flight); the first completion has no issue."""
    out: list[tuple[int, str]] = [(0, "          <idle>-0       [001] d.h1.   100.000000: block_rq_complete: "
                                      "7,0 R () 999 + 8 be,0,4 [0]")]
    t = 1_000
    for gap, latency, sector, kind, task, early in events:
        t += gap
        name = TASKS[task]
        rwbs, nr, start, done_at = (("R", 8, sector, sector), ("WS", 16, sector, sector), ("FF", 0, 0, 2**64 - 1),
                                    ("NS", 2048, sector, sector))[kind]
        issue_line = (f"{name:>16}-{100 + task:<7} [000] .....   {100 + t / 1e6:.6f}: block_rq_issue: 7,0 {rwbs} "
                      f"{nr * 512} () {start} + {nr} be,0,4 [{name}]")
        out.append((t, issue_line))
        if latency:
            c = t - 1 if early else t + latency
            out.append((c, f"     ksoftirqd/1-22      [001] ..s..   {100 + c / 1e6:.6f}: block_rq_complete: 7,0 "
                           f"{rwbs} () {done_at} + {nr} be,0,4 [0]"))
    out.sort(key=lambda pair: pair[0])
    return "\n".join(line for _, line in out) + "\n"


events = st.lists(st.tuples(st.integers(0, 30), st.integers(0, 400), st.sampled_from([0, 8, 16, 64]),
                            st.integers(0, 3), st.integers(0, len(TASKS) - 1), st.booleans()), max_size=80)


@settings(max_examples=200, deadline=None)
@given(events, st.lists(st.integers(1, 4000), max_size=6))
def test_the_streaming_parser_finds_what_the_reference_finds(requests: list, cuts: list[int]) -> None:
    text = _lines(requests)
    reference = trace_mod.parse_lines(text.splitlines())
    parser = stream.Parser()
    data, at = text.encode(), 0
    for cut in sorted(cuts):
        parser.feed(data[at:cut])
        at = max(at, cut)
    parser.feed(data[at:])
    parsed = parser.trace()
    assert not parser.spool.exists()
    for mine, theirs in zip(parsed.columns(), reference.columns(), strict=True):
        assert np.array_equal(mine, theirs)
    assert parsed.comms == reference.comms and parsed.left_out == reference.left_out
    assert parsed.duration_ns == reference.duration_ns


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 400), st.lists(st.tuples(st.integers(0, 999), st.integers(1, 5)), max_size=300),
       st.integers(1, 64))
def test_a_spool_read_late_is_put_in_order_as_a_stable_argsort_orders_it(seed: int, swaps: list, step: int) -> None:
    """1,000 rows in time order, some pairs swapped a few places apart (events a CPU gave late) or,
    with many swaps, well shuffled: every column of the spool ends as a stable argsort of the times
    orders it, sorted a window of steps at a time in place, and its chunks read it so."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(10, 5_000, 1000))  # ties: the stable order must keep them as they came
    for i, swap in swaps:
        j = min(999, i + swap)
        t[i], t[j] = t[j], t[i]
    cols = [t, t + rng.integers(0, 50, 1000), np.arange(1000), rng.integers(1, 9, 1000) * 512,
            rng.integers(0, 2, 1000), np.zeros(1000), np.arange(1000) % 7]
    order = np.argsort(t, kind="stable")
    with tempfile.TemporaryDirectory() as spool:
        for (name, dtype), column in zip(stream.COLUMNS, cols, strict=True):
            column.astype(dtype).tofile(Path(spool) / name)
        t0, end = stream._order(Path(spool), 1000, step)
        assert (t0, end) == (int(t.min()), int(cols[1].max()) - int(t.min()))
        got = stream.Spooled(Path(spool), 1000, t0, end)
        assert got.load().sector.tolist() == order.tolist()  # the original row numbers
        chunks = list(got.chunks(step))
        assert np.concatenate([c.sector for c in chunks]).tolist() == order.tolist()
        assert np.concatenate([c.issue_ns for c in chunks]).tolist() == (t[order] - t0).tolist()
        assert all(a.issue_ns[-1] < b.issue_ns[0] for a, b in itertools.pairwise(chunks))


def test_a_task_name_with_spaces_and_a_command_are_read_by_the_general_pattern() -> None:
    text = ("        my app 2-4242    [001] .....   10.000100: block_rq_issue: 7,0 R 4096 () 80 + 8 be,0,4 [my app 2]\n"
            "     ksoftirqd/1-22      [001] ..s..   10.000200: block_rq_complete: 7,0 R () 80 + 8 be,0,4 [0]\n"
            "            sg-77      [000] .....   10.000300: block_rq_issue: 7,0 N 0 (12 00 00) 0 + 0 be,0,4 [sg]\n")
    parser = stream.Parser()
    parser.feed(text.encode())
    parsed = parser.trace()
    assert parsed.comms == {4242: "my app 2", 77: "sg"} and parsed.complete_ns.tolist() == [100_000, -1]


# -- the vectorized steps against the loops they replaced -------------------------------------------

def _classes_loop(trace: trace_mod.Trace) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    last_write: str | None = None
    flushes: list[tuple[int, str | None]] = []  # each flush and the class of the write before it
    for index, (op, nbytes) in enumerate(zip(trace.op.tolist(), trace.nbytes.tolist(), strict=True)):
        if op in (trace_mod.READ, trace_mod.WRITE):
            label = replay.size_class(nbytes)
            out.setdefault(label, []).append(index)
            last_write = label if op == trace_mod.WRITE else last_write
        elif op == trace_mod.FLUSH:
            flushes.append((index, last_write))
    if out and flushes:
        first = min(out, key=replay._class_bytes)
        votes = collections.Counter(label or first for _, label in flushes)
        chosen = min(votes, key=lambda label: (-votes[label], replay._class_bytes(label)))  # a tie: the smaller
        out[chosen] = sorted(out[chosen] + [index for index, _ in flushes])
    return out


def _lanes_loop(trace: trace_mod.Trace, indices: np.ndarray) -> list[list[int]]:
    free: list[int] = []
    busy: list[tuple[int, int]] = []
    out: list[list[int]] = []
    typical = _typical_service_ns(trace, indices)
    for i in indices.tolist():
        issued, done = int(trace.issue_ns[i]), int(trace.complete_ns[i])
        while busy and busy[0][0] <= issued:
            heapq.heappush(free, heapq.heappop(busy)[1])
        k = heapq.heappop(free) if free else len(out)
        if k == len(out):
            out.append([])
        heapq.heappush(busy, (done if done >= 0 else issued + typical, k))
        out[k].append(i)
    data = [lane for lane in out if any(int(trace.op[i]) in (0, 1) for i in lane)] or out[:1]
    for lane in out:
        if lane is not data[0] and not any(int(trace.op[i]) in (0, 1) for i in lane):
            data[0].extend(lane)
    return [sorted(lane) for lane in data]


def _sequential_loop(trace: trace_mod.Trace) -> list[bool]:
    seq, last_end = [], {}
    for op, pid, start, nbytes in zip(trace.op.tolist(), trace.pid.tolist(), trace.sector.tolist(),
                                      trace.nbytes.tolist(), strict=True):
        if op not in (0, 1):
            seq.append(False)
            continue
        seq.append(last_end.get((pid, op)) == start)
        last_end[(pid, op)] = start + nbytes // 512
    return seq


rows = st.lists(st.tuples(st.integers(0, 50), st.integers(-1, 200), st.sampled_from([0, 8, 16, 24, 32]),
                          st.sampled_from([512, 4096, 8192, 65536, 0]), st.sampled_from([0, 1, 3, 2]),
                          st.integers(1, 3)), max_size=60)


def _trace(spec: list[tuple[int, int, int, int, int, int]]) -> trace_mod.Trace:
    t, out = 0, []
    for gap, latency, sector, nbytes, op, pid in spec:
        t += gap
        out.append((t, t + latency if latency >= 0 else -1, sector, 0 if op == 3 else nbytes or 4096, op, 0, pid))
    return trace_mod.from_rows(out)


@settings(max_examples=300, deadline=None)
@given(rows)
def test_vectorized_classes_lanes_and_sequential_share_equal_the_loops(spec: list) -> None:
    trace = _trace(spec)
    classes = replay.classes(trace)
    assert {k: v.tolist() for k, v in classes.items()} == _classes_loop(trace)
    assert list(classes) == sorted(classes, key=replay._class_bytes)
    for indices in classes.values():
        assert [lane.tolist() for lane in replay.lanes(trace, indices)] == _lanes_loop(trace, indices)
    assert fp_mod.sequential_mask(trace).tolist() == _sequential_loop(trace)
    decoded = trace_mod.decode(trace_mod.encode(trace), duration_ns=trace.duration_ns)
    assert all(np.array_equal(a, b) for a, b in zip(decoded.columns(), trace.columns(), strict=True))


def _depth_reference(trace: trace_mod.Trace, duration_ns: int) -> dict[str, object]:
    """The depth figures computed over all steps at once (the fingerprint before it was chunked)."""
    t, depth = fp_mod.depth_steps(trace)
    spans = np.diff(np.append(t, max(duration_ns, int(t[-1]))))
    total = max(int(spans.sum()), 1)
    weights = np.bincount(depth, weights=spans)
    busy = float(spans[depth > 0].sum())
    at_issue = depth[np.clip(np.searchsorted(t, trace.issue_ns, side="right") - 1, 0, depth.size - 1)]
    edges = np.linspace(0, int(t[-1] + spans[-1]), summary.TIME_BINS + 1)
    area = np.concatenate([[0.0], np.cumsum(spans * depth)])
    with np.errstate(invalid="ignore"):  # a zero-length trace: 0 / 0
        per_bin = np.diff(np.interp(edges, np.append(t, t[-1] + spans[-1]), area)) / np.diff(edges)
    return {"depth_mean": float((spans * depth).sum() / total),
            "depth_mean_busy": float((spans * depth).sum() / busy) if busy else None,
            "depth_max": int(depth[spans > 0].max(initial=0)) or int(depth.max()),
            "depth_time_pct": {d: 100.0 * float(w) / total for d, w in enumerate(weights) if w > 0},
            "busy_pct": 100.0 * busy / total, "depth_over_time": tuple(round(float(x), 3) for x in per_bin),
            "depth_at_issue": fp_mod._dist(at_issue.astype(np.float64))}


@settings(max_examples=150, deadline=None)
@given(rows, st.integers(1, 7), st.integers(0, 3000))
def test_the_chunked_depth_sweep_equals_the_whole_one(spec: list, chunk: int, extra_ns: int) -> None:
    trace = _trace(spec)
    if not len(trace):
        return
    duration = int(max(trace.issue_ns.max(), trace.complete_ns.max())) + extra_ns
    mine, theirs = fp_mod._depth(trace, duration, chunk=chunk), _depth_reference(trace, duration)
    for key, value in theirs.items():
        if key == "depth_time_pct":
            assert mine[key].keys() == value.keys() and list(mine[key].values()) == pytest.approx(list(value.values()))
        elif key == "depth_over_time":  # a zero-length trace: zeros (the whole sweep divided 0 by 0)
            assert mine[key] == (pytest.approx(value, abs=0.0011) if duration else (0.0,) * summary.TIME_BINS)
        elif key == "depth_at_issue":
            assert [getattr(mine[key], f) for f in ("mean", "p50", "p99", "max", "count")] == pytest.approx(
                [getattr(value, f) for f in ("mean", "p50", "p99", "max", "count")])
        else:
            assert mine[key] == pytest.approx(value), key


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(-1, 100)), min_size=1, max_size=120))
def test_lanes_by_chains_equal_a_heap_of_free_lanes(spec: list[tuple[int, int]]) -> None:
    """Lanes dealt by chains (vectorized) equal lanes dealt one request at a time, even when
    requests hold their lanes for good."""
    never = np.iinfo(np.int64).max
    issued = np.cumsum([gap for gap, _ in spec]).astype(np.int64)
    done = np.array([t + lat if lat >= 0 else never for t, (_, lat) in zip(issued, spec, strict=True)], dtype=np.int64)
    by_chains, by_heap = replay._lanes_by_chains(issued, done), _lanes_by_heap(issued, done)
    assert by_chains[1] == by_heap[1] and by_chains[0].tolist() == by_heap[0]


def _lanes_by_heap(issued_ns: np.ndarray, done_ns: np.ndarray) -> tuple[list[int], int]:
    """Each request's lane and the lane count: the lowest-numbered lane free at its issue, or a new one."""
    free: list[int] = []
    busy: list[tuple[int, int]] = []  # (when the lane's request completes, lane)
    lane_of, count = [], 0
    for issued, done in zip(issued_ns.tolist(), done_ns.tolist(), strict=True):
        while busy and busy[0][0] <= issued:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            k = heapq.heappop(free)
        else:
            k, count = count, count + 1
        heapq.heappush(busy, (done, k))
        lane_of.append(k)
    return lane_of, count


@settings(max_examples=100, deadline=None)
@given(rows, st.integers(1, 9))
def test_the_most_in_flight_is_the_number_of_lanes(spec: list, chunk: int) -> None:
    trace = _trace(spec)
    """The lanes a heap deals (before lanes of flushes alone are merged) are the most in flight."""
    for indices in replay.classes(trace).values():
        assert replay._most_in_flight(trace, indices, chunk=chunk) == _heap_lane_count(trace, indices)


def _heap_lane_count(trace: trace_mod.Trace, indices: np.ndarray) -> int:
    issued, done = trace.issue_ns[indices], trace.complete_ns[indices]
    return _lanes_by_heap(issued, np.where(done >= 0, done, issued + _typical_service_ns(trace, indices)))[1]


def _typical_service_ns(trace: trace_mod.Trace, indices: np.ndarray) -> int:
    """What a request without a completion holds its lane for: the median service time of its class's
    completed requests (at least 1 ns)."""
    issued, done = trace.issue_ns[indices].tolist(), trace.complete_ns[indices].tolist()
    services = [d - i for i, d in zip(issued, done, strict=True) if d >= 0]
    return max(1, int(np.median(services))) if services else 1


def test_completions_the_kernel_dropped_open_no_lanes() -> None:
    """A capture that lost events under load (the kernel's ring buffer overran) lacks completions of
    requests in the middle of the trace: 200,000 4k writes at depth 4, every other completion lost,
    are dealt to 4 lanes a window, not a lane for each request without a completion."""
    n = 200_000
    issue = np.arange(n, dtype=np.int64) * 25_000  # 40,000 IOPS
    complete = issue + 100_000  # 100 µs each: 4 in flight
    complete[::2] = -1
    trace = trace_mod.from_rows(zip(issue.tolist(), complete.tolist(), (8 * np.arange(n)).tolist(), [4096] * n,
                                    [trace_mod.WRITE] * n, [0] * n, [1] * n, strict=True))
    names = replay.replay_job_names(trace)
    assert len(names) <= 5 * 21 and names == list(replay.replay_jobs(trace)[0])  # 20 windows of 0.25 s


@settings(max_examples=150, deadline=None)
@given(rows, st.sampled_from([250_000_000, 300, 40]))
def test_the_capture_names_the_replay_jobs_as_the_replay_does(spec: list, window: int) -> None:
    """With windows of 250 ms (one here) and of a few hundred ns (many, some with flushes)."""
    trace = _trace(spec)
    saved = replay.WINDOW_NS
    replay.WINDOW_NS = window
    try:
        assert replay.replay_job_names(trace) == list(replay.replay_jobs(trace)[0])
    finally:
        replay.WINDOW_NS = saved


def _same(a: object, b: object, path: str = "") -> None:
    """Fingerprints equal field by field (floats to 1e-9: the sums run in another order)."""
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9), path
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), path
        for k in a:
            _same(a[k], b[k], f"{path}[{k}]")
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


@settings(max_examples=150, deadline=None)
@given(rows, st.integers(1, 9), st.integers(0, 10**6))
def test_the_chunked_fingerprint_equals_the_whole_one(spec: list, chunk: int, extra_ns: int) -> None:
    """Every figure, computed a few requests at a time, as in one chunk; and on random data."""
    trace = _trace(spec)
    trace = dataclasses.replace(trace, duration_ns=trace.duration_ns + extra_ns)
    _same(fp_mod.fingerprint(trace, chunk=chunk), fp_mod.fingerprint(trace, chunk=10**9))


def test_the_chunked_fingerprint_of_random_requests_equals_the_whole_one() -> None:
    rng = np.random.default_rng(33)
    n = 20_000
    issue = np.cumsum(rng.choice([0, 1000, 5000, 200_000], n)).astype(np.int64)
    latency = rng.choice([-1, 0, 2000, 80_000, 3_000_000], n)
    op = rng.choice([0, 1, 1, 3, 2], n).astype(np.uint8)
    trace = trace_mod.Trace(issue, np.where(latency >= 0, issue + latency, -1).astype(np.int64),
                            (rng.integers(0, 4096, n) * rng.choice([1, 8], n)).astype(np.int64),
                            np.where(op == 3, 0, rng.choice([0, 512, 4096, 65536, 1000], n)).astype(np.int64), op,
                            rng.integers(0, 64, n).astype(np.uint8), rng.integers(1, 5, n).astype(np.int32),
                            comms={1: "a", 2: "b"}, lost_events=0, duration_ns=int(issue[-1]) + 5_000_000)
    whole = fp_mod.fingerprint(trace, chunk=10**9)
    for chunk in (1000, 4097):
        _same(fp_mod.fingerprint(trace, chunk=chunk), whole)
    assert whole.hot1_pct is not None and whole.interarrival_cv is not None


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.integers(1, 400), min_size=1, max_size=8))
def test_the_events_of_a_trace_fed_in_batches_come_back_as_the_trace(seed: int, cuts: list[int]) -> None:
    """``events_of`` a trace (reads, writes, flushes, requests in flight at the end, ns times, issues
    in the same ns), fed to ``Parser.add`` in batches cut anywhere, come back from the spool as the
    trace: every column, the task names and the span, in chunks or loaded whole. (The requests of a
    start sector, and the flushes, complete in the order they were issued: the events name no
    request, so the pairing is first in, first out per sector, as the kernel's own block tracer's is.)"""
    rng = np.random.default_rng(seed)
    n = 300
    issue = np.cumsum(rng.integers(0, 5_000, n))
    done = issue + rng.integers(1, 40_000, n)
    op = rng.choice([trace_mod.READ, trace_mod.WRITE, trace_mod.FLUSH], n, p=[0.6, 0.3, 0.1])
    flushes = op == trace_mod.FLUSH
    done[flushes] = np.maximum.accumulate(done[flushes])  # first in, first out
    done[n - 5:] = -1
    nbytes = np.where(flushes, 0, rng.integers(1, 16, n) * 4096)
    rows = [(int(t), int(c), 0 if o == trace_mod.FLUSH else i * 128, int(b), int(o), 0, 100 + int(rng.integers(0, 3)))
            for i, (t, c, o, b) in enumerate(zip(issue, done, op, nbytes, strict=True))]
    trace = trace_mod.from_rows(rows, comms={100: "fio", 101: "dd", 102: "kworker/0:1H"})
    events = stream.events_of(trace)
    parser = stream.Parser()
    bounds = sorted({0, events.t_ns.size, *(c * events.t_ns.size // 400 for c in cuts)})
    for a, b in itertools.pairwise(bounds):
        parser.add(stream.Events(*(getattr(events, f.name)[a:b] for f in dataclasses.fields(events))))
    with parser.finish(duration_ns=trace.duration_ns) as spooled:
        assert spooled.span_ns == trace.span_ns and len(spooled) == len(trace)
        for got in (spooled.load(), trace_mod.Trace(*(np.concatenate(c) for c in zip(
                *(part.columns() for part in spooled.chunks(64)), strict=True)))):
            for mine, theirs in zip(got.columns(), trace.columns(), strict=True):
                assert mine.tolist() == theirs.tolist()
        assert spooled.comms == {p: trace.task(p) for p in set(trace.pid.tolist())}
    assert not spooled.spool.exists()


def test_a_new_spool_removes_the_spools_of_captures_whose_process_is_gone(tmp_path: Path) -> None:
    """SIGKILL leaves a capture's spool behind (~38 bytes a request): the next capture removes the
    spools named after a process that ended, and keeps those of live processes and what is not a
    spool of iolab's."""
    import subprocess
    ended = subprocess.Popen(["true"])  # a pid whose process has exited
    ended.wait()
    stale = tmp_path / f"{stream.SPOOL_PREFIX}{ended.pid}-1-0-abc"
    mine = tmp_path / f"{stream.SPOOL_PREFIX}{stream.ftrace.owner()}-def"
    other = tmp_path / f"{stream.SPOOL_PREFIX}notes"
    for directory in (stale, mine, other):
        directory.mkdir()
        (directory / "issue_ns").write_bytes(b"x" * 64)
    parser = stream.Parser(directory=str(tmp_path))
    try:
        assert not stale.exists() and mine.exists() and other.exists()
        assert parser.spool.name.startswith(f"{stream.SPOOL_PREFIX}{stream.ftrace.owner()}-")
    finally:
        parser.close()
