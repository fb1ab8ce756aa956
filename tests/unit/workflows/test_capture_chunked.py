"""The capture's report and its replay's job names computed from ``trace.Requests`` a chunk at a
time (issue 44 item 3: a capture's memory does not grow with its length) equal the in-memory
computations they replaced, kept here as references (built on ``replay.classes``, which
test_capture_stream.py checks against a per-request loop), and their memory stays that of a chunk."""

from __future__ import annotations

import dataclasses
import tracemalloc
from collections.abc import Iterator, Mapping

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from iolab.model import DirectionStats, FioReport, JobResult
from iolab.workflows.capture import deal, record, replay
from iolab.workflows.capture import fingerprint as fp_mod
from iolab.workflows.capture import trace as trace_mod
from iolab.workflows.capture.trace import DISCARD, FLUSH, READ, WRITE, Trace

CHUNKS = (1, 7, 64, 1 << 16)


def _report_in_memory(trace: Trace) -> FioReport:
    """``record.capture_report`` as it was before it read chunks: over ``replay.classes``' index arrays."""
    duration_ms = max(1, round(fp_mod.active_ns(trace) / 1e6))
    jobs = []
    for index, (name, indices) in enumerate(replay.classes(trace).items()):
        directions = {}
        for op, direction in ((READ, "read"), (WRITE, "write"), (FLUSH, "sync")):
            mine = indices[trace.op[indices] == op]
            if not mine.size:
                continue
            done = mine[trace.complete_ns[mine] >= 0]
            tally = fp_mod.Tally()
            tally.add(trace.complete_ns[done] - trace.issue_ns[done])
            latency = record._latency(tally)
            iops = 1000.0 * mine.size / duration_ms
            if op == FLUSH:
                directions[direction] = DirectionStats(direction=direction, total_ios=mine.size, runtime_ms=duration_ms,
                                                       iops=iops, lat=latency)
            else:
                nbytes = int(trace.nbytes[mine].sum())
                directions[direction] = DirectionStats(
                    direction=direction, total_ios=mine.size, io_bytes=nbytes, runtime_ms=duration_ms, iops=iops,
                    bw_bytes_s=1000.0 * nbytes / duration_ms, clat=latency, lat=latency)
        jobs.append(JobResult(name=name, index=index, directions=directions, job_runtime_ms=duration_ms))
    return FioReport(source_format="capture", jobs=tuple(jobs))


def _names_in_memory(trace: Trace) -> list[str]:
    """``replay.replay_job_names`` as it was before it read chunks: over ``replay.classes``' index arrays."""
    per_class = replay.classes(trace)
    length = replay.window_ns(trace, per_class)
    names: list[str] = []
    for name, indices in per_class.items():
        window = replay._windows(trace, indices, length)
        count = 0
        for part in np.split(indices, np.flatnonzero(window[1:] != window[:-1]) + 1):
            data_only = np.isin(trace.op[part], (READ, WRITE)).all()
            count += replay._most_in_flight(trace, part) if data_only else len(replay.lanes(trace, part))
        names += [name if k == 1 else f"{name}.{k}" for k in range(1, count + 1)]
    return names


# (gap µs: 0 is the same instant, latency µs: -1 none, size, kind); the sizes make four classes
requests = st.lists(st.tuples(st.sampled_from([0, 0, 1, 3, 40]), st.sampled_from([-1, 0, 1, 2, 5, 90]),
                              st.sampled_from([512, 4096, 8192, 65536]),
                              st.sampled_from([READ, WRITE, WRITE, FLUSH, FLUSH, DISCARD])), max_size=80)


def _trace(spec: list[tuple[int, int, int, int]]) -> Trace:
    t, rows = 0, []
    for i, (gap, latency, size, op) in enumerate(spec):
        t += gap * 1000
        rows.append((t, t + latency * 1000 if latency >= 0 else -1, 8 * i, 0 if op == FLUSH else size, op, 0, 1))
    return trace_mod.from_rows(rows)


@settings(max_examples=300, deadline=None)
@given(requests, st.sampled_from(CHUNKS), st.sampled_from([250_000_000, 20_000, 3_000]))
def test_the_chunked_report_and_job_names_equal_the_whole_traces(spec: list, rows: int, window_ns: int) -> None:
    """Flushes before any write, in several classes, requests without a completion, instants a chunk
    cannot end inside; windows of 0.25 s (one here) and of a few µs (many, some with flushes)."""
    trace = _trace(spec)
    assert record.capture_report(trace, chunk=rows) == _report_in_memory(trace)
    saved = replay.WINDOW_NS
    replay.WINDOW_NS = window_ns
    try:
        names = replay.replay_job_names(trace, rows=rows)
        assert names == _names_in_memory(trace) == list(replay.replay_jobs(trace)[0])
    finally:
        replay.WINDOW_NS = saved


def test_flushes_before_any_write_vote_for_the_smallest_class_once_it_is_known() -> None:
    """Two flushes before any write (the smallest class is only seen in the last chunk) outvote one
    after a 64k write: they join bs-4k, as ``replay.classes`` puts them, a request at a time too."""
    trace = _trace([(0, 1, 0, FLUSH), (1, 1, 0, FLUSH), (1, 2, 65536, WRITE), (1, 1, 0, FLUSH), (1, 3, 4096, READ)])
    for rows in CHUNKS:
        report = record.capture_report(trace, chunk=rows)
        assert [(job.name, sorted(job.directions)) for job in report.jobs] == [("bs-4k", ["read", "sync"]),
                                                                               ("bs-64k", ["write"])]
        assert report.jobs[0].directions["sync"].total_ios == 3 and report == _report_in_memory(trace)
        assert replay.replay_job_names(trace, rows=rows) == _names_in_memory(trace) == ["bs-4k", "bs-64k"]


def test_a_class_busy_over_many_chunks_is_counted_as_in_one() -> None:
    """20,000 overlapping requests (depth up to 6, a tenth without a completion, flushes among them),
    then 600 served in 1 µs and 3,000 in 40 µs, every other of these without a completion: past the
    sample that gives the typical service time (its first requests: 1 µs, not the 40 µs of most),
    each part is counted as it passes."""
    rng = np.random.default_rng(44)
    n = 20_000
    issue = np.cumsum(rng.choice([0, 1000, 2000, 30_000], n)).astype(np.int64)
    complete = np.where(rng.random(n) < 0.1, -1, issue + rng.choice([0, 3000, 9000, 40_000], n))
    late = issue[-1] + 10**9 + 10_000 * np.arange(3600)
    late_complete = late + np.where(np.arange(3600) < 600, 1000, 40_000)
    late_complete[600::2] = -1
    trace = _generated_trace(np.concatenate([issue, late]), np.concatenate([complete, late_complete]),
                             np.concatenate([rng.choice([READ, WRITE, WRITE, FLUSH], n), np.full(3600, WRITE)]
                                            ).astype(np.uint8), np.concatenate([rng.choice([4096, 8192], n),
                                                                                np.full(3600, 65536)]))
    saved = deal.SAMPLE
    deal.SAMPLE = 500  # so that the typical service time is known long before a part ends
    try:
        for rows in (64, 1 << 16):
            assert replay.replay_job_names(trace, rows=rows) == _names_in_memory(trace)
            assert record.capture_report(trace, chunk=rows) == _report_in_memory(trace)
    finally:
        deal.SAMPLE = saved


def _generated_trace(issue: np.ndarray, complete: np.ndarray, op: np.ndarray, sizes: np.ndarray) -> Trace:
    n = issue.size
    return Trace(issue, complete.astype(np.int64), 8 * np.arange(n, dtype=np.int64),
                 np.where(op == FLUSH, 0, sizes).astype(np.int64), op, np.zeros(n, np.uint8), np.ones(n, np.int32),
                 duration_ns=int(issue[-1]) + 1)


@dataclasses.dataclass
class Generated:
    """``Requests`` whose chunks are made as they are read (seeded): a trace of any length in the
    memory of a chunk. 4k and 64k reads and writes at about 50,000 a second and depth 1-4, a flush
    after every 20th request, every 100th without a completion."""

    count: int
    seed: int = 1
    comms: Mapping[int, str] = dataclasses.field(default_factory=dict)
    lost_events: int = 0
    duration_ns: int = 0
    left_out: Mapping[str, int] = dataclasses.field(default_factory=dict)
    kthreads: frozenset[int] = frozenset()

    def __len__(self) -> int:
        return self.count

    def chunks(self, rows: int = trace_mod.CHUNK_ROWS) -> Iterator[Trace]:
        rng = np.random.default_rng(self.seed)
        t = 0
        for a in range(0, self.count, rows):
            n = min(rows, self.count - a)
            issue = t + np.cumsum(rng.choice([0, 10_000, 20_000, 30_000], n))
            issue[0] = t  # t is past the previous chunk's last issue: no instant spans two chunks
            t = int(issue[-1]) + 1000
            done = issue + rng.choice([5_000, 40_000, 80_000], n)
            done[rng.random(n) < 0.01] = -1
            op = rng.choice([READ, WRITE], n).astype(np.uint8)
            op[(a + np.arange(n)) % 20 == 19] = FLUSH
            yield _generated_trace(issue.astype(np.int64), done, op, rng.choice([4096, 65536], n))


def test_the_generated_requests_read_as_their_trace_does() -> None:
    """What the memory test reads chunk by chunk is the trace it stands for."""
    requests = Generated(200_000)
    whole = Trace(*(np.concatenate(column) for column in zip(*(c.columns() for c in requests.chunks()),
                                                              strict=True)))
    whole = dataclasses.replace(whole, duration_ns=int(whole.issue_ns[-1]) + 1)
    assert record.capture_report(requests) == _report_in_memory(whole)
    assert replay.replay_job_names(requests) == _names_in_memory(whole)


def test_the_report_and_job_names_of_millions_of_requests_take_the_memory_of_a_chunk() -> None:
    """2 million requests (84 MB as a Trace's columns), read a chunk at a time: the traced peak of
    computing both stays under a quarter of that (numpy reports its buffers to tracemalloc; measured:
    about 7 MiB for the report, 13 MiB for the names, as for 1 or 3 million)."""
    requests = Generated(2_000_000)
    trace_bytes = len(requests) * sum(np.dtype(t).itemsize for t in trace_mod._COLUMN_TYPES)
    tracemalloc.start()
    try:
        report = record.capture_report(requests)
        names = replay.replay_job_names(requests)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sum(d.total_ios for job in report.jobs for d in job.directions.values()) == len(requests)
    assert names[0] == "bs-4k" and any(name.startswith("bs-64k") for name in names)
    assert peak < trace_bytes / 4, f"{peak / 2**20:.1f} MiB at peak for a {trace_bytes / 2**20:.0f} MiB trace"
