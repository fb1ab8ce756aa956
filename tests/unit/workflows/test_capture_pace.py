"""Capture, pure, for issue 41's replays and flushes: the model of a replay's lanes under a slower
target (what a replay stores for ``analyze.pace``), the flushes over time the capture report charts,
and the fitted job's target (``filename=${TARGET}``) and its check's two columns. The same on real
devices: tests/integration/test_capture_replay.py."""

from __future__ import annotations

import numpy as np
import pytest

from iolab.fio import jobfile
from iolab.workflows.capture import fingerprint as fp_mod
from iolab.workflows.capture import fit
from iolab.workflows.capture import replay as replay_mod
from iolab.workflows.capture import trace as trace_mod
from iolab.workflows.capture.summary import TIME_BINS
from iolab.workflows.capture.trace import FLUSH, PREFLUSH, WRITE


def test_a_slower_target_delays_a_lane_by_what_its_gaps_do_not_absorb() -> None:
    """Five writes 1 ms apart, 100 µs each, one lane: 5× slower (500 µs) the gaps absorb it and only the
    last write ends 0.4 ms late; 20× slower (2 ms) each of the 4 gaps loses 1 ms, which fio never makes
    up, and the last write ends 1.9 ms after its traced end: 5.9 ms. Stretched ×2 (replay_time_scale=50)
    the gaps are 2 ms: 20× slower loses nothing in them, and the last write ends at 10 ms, 1.8 ms after
    the stretched trace (8.2 ms, as the pace sets the replay against)."""
    trace = trace_mod.from_rows([(i * 1_000_000, i * 1_000_000 + 100_000, 8 * i, 4096, WRITE, 0, 1) for i in range(5)])
    jobs, _ = replay_mod.replay_jobs(trace)
    assert list(jobs) == ["bs-4k"]
    assert replay_mod.slowdown_lags(trace, jobs, factors=(5.0, 20.0)) == {"bs-4k": {"5": 0.4, "20": 5.9}}
    stretched = replay_mod.slowdown_lags(trace, jobs, rate_pct=50, factors=(20.0,))
    assert stretched == {"bs-4k": {"20": pytest.approx(1.8)}}


def test_a_class_lags_by_its_latest_lane_and_its_service_is_summed() -> None:
    """Two overlapping writes make two lanes; the class's lag is the later one's, and its traced
    service times (flushes too) are summed for the pace's slowdown."""
    rows = [(0, 3_000_000, 0, 4096, WRITE, 0, 1), (1_000_000, 1_100_000, 8, 4096, WRITE, 0, 1),
            (5_000_000, 5_200_000, 0, 0, FLUSH, PREFLUSH, 1)]
    trace = trace_mod.from_rows(rows)
    jobs, _ = replay_mod.replay_jobs(trace)
    assert len(jobs) == 2
    # 10x: the first lane's 30 ms write delays its flush (issued 5 ms in) to 30 ms, which takes 2 ms: 32 ms
    # against the trace's 5.2 ms end
    assert replay_mod.slowdown_lags(trace, jobs, factors=(10.0,)) == {"bs-4k": {"10": pytest.approx(26.8)}}
    assert replay_mod.class_service(trace) == {"bs-4k": {"requests": 3, "service_ms": pytest.approx(3.3)}}


def test_the_fingerprint_keeps_flushes_and_their_service_time_per_time_bin() -> None:
    """60 commits over 6 s (a write, then a flush of 300 µs, or 900 µs in the last second): the capture
    report's flush chart reads the counts and means per bin, not the trace."""
    rows = []
    for i in range(60):
        t = i * 100_000_000
        rows.append((t, t + 50_000, 8 * i, 4096, WRITE, 0, 1))
        rows.append((t + 60_000, t + 60_000 + (900_000 if i >= 50 else 300_000), 0, 0, FLUSH, PREFLUSH, 1))
    fp = fp_mod.fingerprint(trace_mod.from_rows(rows))
    assert len(fp.flushes_over_time) == TIME_BINS and sum(fp.flushes_over_time) == 60
    known = [m for m in fp.flush_service_over_time if m is not None]
    assert known[0] == pytest.approx(300.0) and known[-1] == pytest.approx(900.0)
    assert np.count_nonzero(fp.flushes_over_time) == len(known)
    quiet = fp_mod.fingerprint(trace_mod.from_rows([r for r in rows if r[4] == WRITE]))
    assert quiet.flushes_over_time == () and quiet.flush_service_over_time == ()


def test_a_fitted_job_names_its_target_from_the_environment_with_a_comment() -> None:
    """``filename=${TARGET}`` in [global] (fio: no file laid out in the current directory without it),
    the comment saying how to set it; the workload's options are the [fitted] job's as before."""
    job = fit.FittedJob((("rw", "randwrite"), ("bs", "4k"), ("runtime", "1s")), True, "closed loop")
    text = job.text(["fitted by iolab to capture 1"], "oltp.fio")
    sections = jobfile.parse(text)
    assert [s.name for s in sections] == ["global", "fitted"]
    assert sections[0].options == (("filename", "${TARGET}"),)
    assert ";   TARGET=/dev/sdX fio oltp.fio" in text.splitlines()
    assert ";   iolab run oltp.fio --target NAME=/dev/sdX --destroy /dev/sdX" in text.splitlines()
    assert jobfile.workload_params(sections) == {"bs": "4k", "runtime": "1s", "rw": "randwrite"}


def test_the_fits_closeness_sets_fit_error_against_the_replay_and_device_difference_apart() -> None:
    """With a replay on the check device, each metric's fit error is the fitted job against that replay
    and its device difference the replay against the original: a device twice as slow shows in the
    device difference, not in the fit error."""
    def trace(service_ns: int, bs: int = 4096) -> trace_mod.Trace:
        return trace_mod.from_rows([(i * 1_000_000, i * 1_000_000 + service_ns, 8 * i, bs, WRITE, 0, 1)
                                    for i in range(100)])
    original, replayed, fitted = (fp_mod.fingerprint(trace(s)) for s in (100_000, 200_000, 210_000))
    rows = {r.metric: r for r in fit.closeness(original, fitted, replayed)}
    p99 = rows["service time write p99"]
    assert p99.relative == pytest.approx(0.05) and p99.device_relative == pytest.approx(1.0)
    alone = {r.metric: r for r in fit.closeness(original, fitted)}["service time write p99"]
    assert alone.relative == pytest.approx(1.1) and alone.device is None
