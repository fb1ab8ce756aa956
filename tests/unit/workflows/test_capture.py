"""Capture, pure: tracefs lines -> trace -> fingerprint, the stored form, the fio-shaped report of
a trace, the fitted job and the replay's classes, lanes and windows. The real thing (fio's I/O on a
loop device recorded from the kernel's block tracepoints) is in tests/integration/test_capture.py."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from iolab.workflows.capture import fingerprint as fp_mod
from iolab.workflows.capture import fit, record, tracefs
from iolab.workflows.capture import replay as replay_mod
from iolab.workflows.capture import trace as trace_mod
from iolab.workflows.capture.trace import FLUSH, FUA, PREFLUSH, READ, SYNC, WRITE

MiB = 1024**2

LINES = """\
# tracer: nop
             fio-7798    [000] .....   278.212658: block_rq_issue: 7,0 R 4096 () 1976 + 8 be,0,4 [fio]
     ksoftirqd/1-22      [001] ..s..   278.232115: block_rq_complete: 7,0 R () 1976 + 8 be,0,4 [0]
             fio-7798    [000] .....   278.240114: block_rq_issue: 7,0 WS 8192 () 1984 + 16 be,0,4 [fio]
             fio-7798    [000] .....   278.240124: block_rq_issue: 7,0 FWFS 4096 () 4000 + 8 be,0,4 [fio]
     kworker/0:1-40      [000] .....   278.240130: block_rq_issue: 7,0 FF 0 () 0 + 0 be,0,4 [kworker/0:1]
          <idle>-0       [001] d.h1.   278.244084: block_rq_complete: 7,0 WS () 1984 + 16 be,0,4 [0]
          <idle>-0       [001] d.h1.   278.244090: block_rq_complete: 7,0 FF () 18446744073709551615 + 0 be,0,4 [0]
"""


def test_rwbs_as_the_kernel_writes_it() -> None:
    assert trace_mod.parse_rwbs("R") == (READ, 0)
    assert trace_mod.parse_rwbs("WS") == (WRITE, SYNC)
    assert trace_mod.parse_rwbs("FWFS") == (WRITE, PREFLUSH | FUA | SYNC)
    assert trace_mod.parse_rwbs("FF") == (FLUSH, PREFLUSH)
    assert trace_mod.parse_rwbs("RA")[0] == READ


def test_lines_become_requests_matched_to_their_completion() -> None:
    trace = trace_mod.parse_lines(LINES.splitlines())
    assert len(trace) == 4
    assert trace.issue_ns.tolist() == [0, 27_456_000, 27_466_000, 27_472_000]
    assert trace.latency_ns.tolist() == [19_457_000, 3_970_000, -1, 3_960_000]
    assert trace.nbytes.tolist() == [4096, 8192, 4096, 0]
    assert trace.op.tolist() == [READ, WRITE, WRITE, FLUSH]
    assert trace.comms[7798] == "fio" and trace.comms[40] == "kworker/0:1"
    fp = fp_mod.fingerprint(trace)
    assert fp.ios == {"read": 1, "write": 2, "flush": 1}
    assert fp.sequential_pct == 0.0  # the write at 1984 starts where the read ended: another stream (direction)
    assert fp.flush_pct == 50.0 and fp.fua_pct == 25.0


def test_a_completion_printed_before_its_issue_in_the_same_microsecond_still_closes_it() -> None:
    lines = ["  <idle>-0 [001] d.h1.  10.000005: block_rq_complete: 7,0 W () 64 + 8 be,0,4 [0]",
             "     fio-9 [000] .....  10.000005: block_rq_issue: 7,0 W 4096 () 64 + 8 be,0,4 [fio]",
             "     fio-9 [000] .....  10.000009: block_rq_issue: 7,0 W 4096 () 64 + 8 be,0,4 [fio]",
             "  <idle>-0 [001] d.h1.  10.000020: block_rq_complete: 7,0 W () 64 + 8 be,0,4 [0]"]
    trace = trace_mod.parse_lines(lines)
    assert trace.latency_ns.tolist() == [0, 11_000]
    assert fp_mod.fingerprint(trace).depth_max == 1


def _trace(rows: list[tuple[int, int, int, int, int, int, int]]) -> trace_mod.Trace:
    return trace_mod.from_rows(rows)


def test_sequential_share_is_per_stream_and_direction() -> None:
    # pid 1 reads 0,8,16 (sequential after the first); pid 2 reads 100, 200 (random); a write at 24 by pid 1
    rows = [(0, 10, 0, 4096, READ, 0, 1), (1, 11, 100, 4096, READ, 0, 2), (2, 12, 8, 4096, READ, 0, 1),
            (3, 13, 200, 4096, READ, 0, 2), (4, 14, 16, 4096, READ, 0, 1), (5, 15, 24, 4096, WRITE, 0, 1)]
    fp = fp_mod.fingerprint(_trace(rows))
    assert fp.sequential_pct == pytest.approx(200 / 6)
    assert fp.sequential_pct_by_kind == {"read": 40.0, "write": 0.0}


def test_depth_is_time_weighted_from_issue_and_complete() -> None:
    # two requests overlapping for 5 ns out of 20: depth 1 for 10 ns, 2 for 5, 0 for 5
    rows = [(0, 10, 0, 4096, READ, 0, 1), (5, 15, 64, 4096, READ, 0, 1)]
    trace = trace_mod.from_rows(rows, duration_ns=20)
    fp = fp_mod.fingerprint(trace)
    assert fp.depth_max == 2
    assert fp.depth_mean == pytest.approx((5 * 1 + 5 * 2 + 5 * 1) / 20)
    assert fp.depth_time_pct == {0: 25.0, 1: 50.0, 2: 25.0}
    assert fp.busy_pct == 75.0


def test_skew_counts_requests_to_the_hottest_granules() -> None:
    # 100 granules touched once, one granule 100 times: the hottest 1 % (1 granule) gets half the requests
    rows = [(i, i + 1, 8 * i, 4096, READ, 0, 1) for i in range(100)]
    rows += [(100 + i, 101 + i, 8 * 5000, 4096, READ, 0, 1) for i in range(100)]
    fp = fp_mod.fingerprint(_trace(rows))
    assert fp.granules_touched == 101
    assert fp.hot1_pct == pytest.approx(50.0)


columns = st.lists(st.tuples(st.integers(0, 10**12), st.integers(-1, 10**9), st.integers(0, 2**40),
                             st.integers(0, 2**24), st.sampled_from([0, 1, 2, 3, 4]), st.integers(0, 31),
                             st.integers(0, 2**22)), max_size=50)


@settings(deadline=None)  # a loaded machine (the suite runs in parallel) is no reason to fail
@given(columns)
def test_stored_form_round_trips(rows: list[tuple[int, int, int, int, int, int, int]]) -> None:
    trace = trace_mod.from_rows([(t, -1 if c < 0 else t + c, *rest) for t, c, *rest in rows],  # type: ignore[misc]
                                comms={1: "x"}, lost_events=3, duration_ns=77)
    back = trace_mod.decode(trace_mod.encode(trace), trace.comms, trace.lost_events, trace.duration_ns)
    for a, b in zip(trace.columns(), back.columns(), strict=True):
        assert a.tolist() == b.tolist()


def test_a_path_that_is_not_a_block_device_is_refused(tmp_path: Path) -> None:
    from iolab.errors import UsageError
    with pytest.raises(UsageError, match="not a block device"):
        tracefs.device_ref(str(tmp_path))


@settings(deadline=None)  # a loaded machine (the suite runs in parallel) is no reason to fail
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(-1, 5000), st.sampled_from([512, 4096, 12288]),
                          st.sampled_from([READ, WRITE, FLUSH])), min_size=1, max_size=60))
def test_the_capture_report_summarises_service_times_as_numpy_does(rows: list[tuple[int, int, int, int]]) -> None:
    """Each class's fio-shaped figures, tallied 7 requests at a time, are numpy's on the class's
    whole columns: counts, bytes, min/max/mean/stddev and the percentiles (linear interpolation); the
    flushes are the sync direction of their class (as a replay's fio reports them), rated over the
    active span, their service time fio's sync ``lat``."""
    trace = trace_mod.from_rows([(t, -1 if c < 0 else t + c, 8 * i, size if op != FLUSH else 0, op, 0, 1)
                                 for i, (t, c, size, op) in enumerate(rows)])
    report = record.capture_report(trace, chunk=7)
    per_class = replay_mod.classes(trace)
    assert [job.name for job in report.jobs] == list(per_class)
    duration_ms = max(1, round(fp_mod.active_ns(trace) / 1e6))
    for job, indices in zip(report.jobs, per_class.values(), strict=True):
        for op, name in ((READ, "read"), (WRITE, "write"), (FLUSH, "sync")):
            mine = indices[trace.op[indices] == op]
            if not mine.size:
                assert name not in job.directions
                continue
            stats = job.directions[name]
            assert stats.total_ios == mine.size and stats.iops == pytest.approx(1000 * mine.size / duration_ms)
            assert stats.io_bytes == (int(trace.nbytes[mine].sum()) if op != FLUSH else None)
            done = trace.complete_ns[mine] >= 0
            service = (trace.complete_ns[mine] - trace.issue_ns[mine])[done]
            latency = stats.clat if op != FLUSH else stats.lat
            if not service.size:
                assert latency is None
                continue
            assert latency is not None and latency.samples == service.size
            assert (latency.min_ns, latency.max_ns) == (service.min(), service.max())
            assert latency.mean_ns == pytest.approx(service.mean())
            assert latency.stddev_ns == pytest.approx(service.std(), abs=1e-6)
            for p, value in latency.percentiles_ns.items():
                assert value == pytest.approx(np.percentile(service, float(p))), p


def test_the_rate_is_over_the_active_span_and_an_open_loop_fit_keeps_it() -> None:
    """300 reads, one every 10 ms from 2 s into a 6 s capture window (the workload started late):
    100 IOPS over the active span (first issue to last completion, 2.99 s), not 50 over the window;
    the open-loop fit (depth 1, idle most of the time) paces rate_iops over the same span."""
    rows = [(2_000_000_000 + i * 10_000_000, 2_000_000_000 + i * 10_000_000 + 100_000, i * 8, 4096, READ, 0, 1)
            for i in range(300)]
    trace = trace_mod.from_rows(rows, duration_ns=6_000_000_000)
    fp = fp_mod.fingerprint(trace)
    assert fp.duration_s == pytest.approx(6.0) and fp.active_s == pytest.approx(2.9901)
    assert fp.iops == pytest.approx(300 / 2.9901)
    job = dict(fit.fit_job(fp).options)
    assert job["rate_iops"] == "100" and job["runtime"] == "3s" and job["iodepth"] == "1"


def test_an_open_loop_fit_of_several_sizes_paces_by_bytes() -> None:
    """fio paces rate_iops by the smallest size of a bssplit (HOWTO rate_iops): 1k and 9k writes at
    100 IOPS are fitted as rate= the IOPS times the split's mean size, in bytes/s."""
    rows = [(i * 10_000_000, i * 10_000_000 + 100_000, i * 64, 1024 if i % 2 else 9216, WRITE, 0, 1)
            for i in range(300)]
    job = dict(fit.fit_job(fp_mod.fingerprint(trace_mod.from_rows(rows))).options)
    assert job["bssplit"] == "1k/50:9k/50" and "rate_iops" not in job
    assert int(job["rate"] or 0) == pytest.approx(100 * 5120, rel=0.01)


def test_a_random_fit_of_several_sizes_turns_fios_random_map_off() -> None:
    """A random write trace of 4k, 8k, 24k and 36k requests over 16 MiB is fitted as randwrite with
    norandommap (fio's random map would cut requests short: tests/integration/test_capture.py runs
    the fitted job with fio and looks at the sizes it issues)."""
    rng = np.random.default_rng(3)
    sizes = rng.choice([4096, 8192, 24576, 36864], 4000, p=[0.3, 0.2, 0.2, 0.3])
    rows = [(i * 50_000, i * 50_000 + 40_000, int(rng.integers(0, 4000)) * 8, int(size), WRITE, 0, 1)
            for i, size in enumerate(sizes)]
    options = dict(fit.fit_job(fp_mod.fingerprint(trace_mod.from_rows(rows))).options)
    assert options["rw"] == "randwrite" and "norandommap" in options
    assert {part.split("/")[0] for part in (options["bssplit"] or "").split(":")} == {"4k", "8k", "24k", "36k"}


def test_fingerprint_is_a_pure_function() -> None:
    rng = np.random.default_rng(1)
    rows = [(int(t), int(t) + 50, int(s) * 8, 4096, int(o), 0, 1)
            for t, s, o in zip(np.cumsum(rng.integers(1, 100, 500)), rng.integers(0, 10_000, 500),
                               rng.integers(0, 2, 500), strict=True)]
    trace = trace_mod.from_rows(rows)
    assert fp_mod.fingerprint(trace) == fp_mod.fingerprint(trace_mod.decode(trace_mod.encode(trace),
                                                                            duration_ns=trace.duration_ns))


def test_iologs_per_size_class_with_every_flush_in_the_class_of_the_writes_they_follow() -> None:
    """The flushes are one class's, so that one lane at a time syncs: syncs of two jobs at once reach
    the device as one flush."""
    rows = [(0, 10, 0, 4096, WRITE, 0, 1), (1_500_000, 1_600_000, 64, 65536, WRITE, 0, 1),
            (1_700_000, 1_800_000, 0, 0, FLUSH, 0, 1), (2_100_000, 2_200_000, 800, 8192, READ, 0, 1)]
    trace = trace_mod.from_rows(rows)
    groups = replay_mod.classes(trace)
    assert {k: v.tolist() for k, v in groups.items()} == {"bs-4k": [0], "bs-8k": [3], "bs-64k": [1, 2]}
    more = trace_mod.from_rows([*rows, (2_300_000, 2_310_000, 8, 4096, WRITE, 0, 1),
                                (2_400_000, 2_500_000, 0, 0, FLUSH, 0, 1),
                                (2_600_000, 2_610_000, 16, 4096, WRITE, 0, 1),
                                (2_700_000, 2_800_000, 0, 0, FLUSH, 0, 1)])
    assert {k: v.tolist() for k, v in replay_mod.classes(more).items()} == {
        "bs-4k": [0, 2, 4, 5, 6, 7], "bs-8k": [3], "bs-64k": [1]}  # two flushes follow 4k writes, one a 64k
    # times as traced, in µs, plus 1: fio does not wait before the first I/O after an entry at time 0
    text = replay_mod.iolog_text(trace, groups["bs-64k"], "/dev/x")
    assert text.splitlines() == ["fio version 3 iolog", "1 /dev/x add", "1 /dev/x open",
                                 "1501 /dev/x write 32768 65536", "1701 /dev/x sync 0 0", "2102 /dev/x close"]
    assert replay_mod.iolog_text(trace, groups["bs-64k"], "/dev/x", 1000).splitlines()[3:5] == [
        "1001 /dev/x write 32768 65536", "1001 /dev/x sync 0 0"]


def test_requests_that_overlapped_in_the_trace_go_to_different_lanes() -> None:
    """Each lane holds one request at a time (fio replays it at iodepth=1); a request joins the
    lowest-numbered free lane; a lane of flushes alone joins the first lane with data."""
    rows = [(0, 100, 0, 4096, READ, 0, 1), (10, 50, 8, 4096, READ, 0, 1), (60, 70, 16, 4096, WRITE, 0, 1),
            (100, 200, 24, 4096, READ, 0, 1), (110, 120, 0, 0, FLUSH, 0, 1), (115, 250, 0, 0, FLUSH, 0, 1),
            (300, -1, 32, 4096, READ, 0, 1), (400, 410, 40, 4096, READ, 0, 1)]
    trace = trace_mod.from_rows(rows)
    lanes = replay_mod.lanes(trace, np.arange(len(trace)))
    # 1 overlaps 0: a second lane, free again for 2; 3 takes the first (free at 100); the flush 4
    # the second, 5 a third of flushes alone, merged into the first; 6 has no completion, so it holds
    # the first for the median service time (70), over before 7
    assert [lane.tolist() for lane in lanes] == [[0, 3, 5, 6, 7], [1, 2, 4]]
    jobs, _ = replay_mod.replay_jobs(trace)
    assert list(jobs) == ["bs-4k", "bs-4k.2"]
    text = replay_mod.job_text({name: Path(f"/x/{name}.iolog") for name in jobs}, replay_mod.ReplaySettings(), "d")
    assert "group_reporting" in text and text.count("new_group") == 1 and text.count("iodepth=1") == 2


def test_a_timed_replay_runs_each_window_in_its_own_jobs() -> None:
    """fio never makes up a sleep's overshoot, so a job's lateness grows with its requests: each
    window of the trace gets its own jobs, starting on time; a flush stays in the window of the
    write before it; without timing (replay_no_stall) the windows would all run at once: one."""
    w = replay_mod.WINDOW_NS
    rows = [(0, 10, 0, 4096, WRITE, 0, 1), (5, 20, 8, 4096, READ, 0, 1), (w + 100, w + 200, 16, 4096, WRITE, 0, 1),
            (2 * w + 5, 2 * w + 9, 0, 0, FLUSH, 0, 1), (4 * w - 1, 4 * w, 24, 4096, READ, 0, 1)]
    trace = trace_mod.from_rows(rows)
    jobs, length = replay_mod.replay_jobs(trace)
    assert length == w
    assert {k: v.tolist() for k, v in jobs.items()} == {"bs-4k": [0], "bs-4k.2": [1], "bs-4k.3": [2, 3],
                                                        "bs-4k.4": [4]}
    jobs, _ = replay_mod.replay_jobs(trace, windowed=False)
    assert {k: v.tolist() for k, v in jobs.items()} == {"bs-4k": [0, 2, 3, 4], "bs-4k.2": [1]}
    # the windows times the lanes the whole trace needs stay within the job budget
    deep = trace_mod.from_rows([(t * 100_000_000 + k, t * 100_000_000 + 90_000_000, k * 8, 4096, READ, 0, 1)
                                for t in range(20) for k in range(100)])  # 100 at a time for 2 s: 8 windows of 0.25 s
    jobs, length = replay_mod.replay_jobs(deep)
    assert len(jobs) == 500 and length == math.ceil((19 * 100_000_000 + 100) / 5)


def test_a_target_smaller_than_the_traced_range_is_replayed_with_replay_scale() -> None:
    assert replay_mod.needed_scale(100 * MiB, 32 * MiB) == 4
    assert replay_mod.needed_scale(32 * MiB, 32 * MiB) == 1 and replay_mod.needed_scale(5, None) == 1
    text = replay_mod.job_text({"bs-4k": Path("/x/bs-4k.iolog")}, replay_mod.ReplaySettings(scale=4), "d")
    assert "replay_scale=4\nreplay_align=4096" in text and "read_iolog=/x/bs-4k.iolog" in text




def test_a_trace_is_stored_in_chunks_and_one_stored_whole_before_still_loads(tmp_path: Path) -> None:
    """Chunks of 7 requests (``encode_chunks``) come back as the trace, every column equal; a trace
    stored as one blob in ``traces.data`` (before 0009_trace_chunks) loads as it did."""
    from iolab.store import schema
    from iolab.store.database import Store
    from iolab.store.records import PendingResult

    rng = np.random.default_rng(7)
    rows = [(int(t), int(t) + int(d), int(s) * 8, 4096 * int(k), int(o), 0, 1 + int(o))
            for t, d, s, k, o in zip(np.cumsum(rng.integers(0, 90, 100)), rng.integers(1, 500, 100),
                                     rng.integers(0, 10_000, 100), rng.integers(1, 4, 100), rng.integers(0, 2, 100),
                                     strict=True)]
    trace = trace_mod.from_rows(rows)
    store = Store(str(tmp_path / "iolab.db"))
    run = store.create_run(suite_name="s", suite_text="")
    ids = store.add_pending(run, [PendingResult(seq=i, target="t", target_path=None, workload="capture", repeat=0,
                                                job_text="", job_hash="", params={}) for i in range(2)])
    store.save_trace(ids[0], len(trace), {"duration_ns": 9}, trace_mod.encode_chunks(trace, rows=7))
    with store.engine.begin() as conn:
        conn.execute(schema.traces.insert().values(result_id=ids[1], requests=len(trace), meta={},
                                                   data=bytes(trace_mod.encode(trace))))
        chunks = conn.execute(sa.select(schema.trace_chunks.c.requests).order_by(schema.trace_chunks.c.seq)).all()
    assert [n for (n,) in chunks] == [len(part) for part in trace.chunks(7)] and len(chunks) > 10
    for result_id, meta in zip(ids, ({"duration_ns": 9}, {}), strict=True):
        stored = store.trace_blobs(result_id)
        assert stored is not None and stored[0] == meta
        loaded = trace_mod.decode_chunks(stored[1])
        assert all(a.tolist() == b.tolist() for a, b in zip(loaded.columns(), trace.columns(), strict=True))
    assert store.trace_blobs(999) is None


def test_a_tally_of_distinct_ns_times_keeps_few_values_and_numpys_figures() -> None:
    """300,000 service times in ns, nearly all distinct (as the ring buffer stamps them), tallied in
    chunks: past 65,536 distinct values they are kept to 14 significant bits, so at most a few
    thousand per octave; count, min, max, mean and standard deviation stay numpy's, the percentiles
    within the rounding (2**-13) below numpy's. A sample of whole µs stays exact."""
    rng = np.random.default_rng(3)
    sample = rng.lognormal(10, 1.2, 300_000).astype(np.int64)
    tally = fp_mod.Tally()
    for a in range(0, sample.size, 40_000):
        tally.add(sample[a:a + 40_000])
    assert tally.rounded and tally.values.size < 8192 * 20 and tally.values.size < np.unique(sample).size / 2
    assert (tally.total, tally.minimum, tally.maximum) == (sample.size, sample.min(), sample.max())
    mean, std = tally.mean_std()
    assert mean == pytest.approx(sample.mean(), rel=1e-12) and std == pytest.approx(sample.std(), rel=1e-9)
    for q in (1, 50, 90, 99, 99.9):
        assert tally.percentile(q) == pytest.approx(np.percentile(sample, q), rel=2**-13)
        assert tally.percentile(q) <= np.percentile(sample, q) + 1
    whole_us = (sample // 1000) * 1000
    exact = fp_mod.Tally()
    for a in range(0, sample.size, 40_000):
        exact.add(whole_us[a:a + 40_000])
    assert not exact.rounded and exact.percentile(99.9) == pytest.approx(np.percentile(whole_us, 99.9), rel=1e-12)
