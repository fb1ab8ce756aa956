"""Whether a replay kept the recorded pace and what held it back (``analyze.pace``), on replay results
built here with the figures a test chooses: the pace per class, and each of the limit's rules.

The figures follow the issue's SQLite replay (2026-12-02): a capture whose 4k writes and 2,063
flushes took 757 ms, replayed in 1,832 ms (2.4×) on a host whose CPUs were busy. A real replay's pace
and limit: tests/integration/test_capture_replay.py; under a blkio cap: tests/system/test_capture_throttled.py."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from iolab.analyze import pace
from iolab.model import (
    BlockDeviceFacts,
    DirectionStats,
    DiskUsage,
    FioReport,
    HostUsage,
    JobResult,
    Latency,
    ResultRecord,
    TargetFacts,
    to_jsonable,
)

RECORDED_MS, REPLAYED_MS = 757.0, 1832
WRITES, FLUSHES = 3078, 2063
#: Σ of the traced service times of the class's requests (ms): 80 µs a write, 265.6 µs a flush.
TRACED_MS = (WRITES * 80_000 + FLUSHES * 265_600) / 1e6
#: How late the class would end were the target that many times slower (the plan's model).
LAGS = {"1.5": 0.0, "2": 4.0, "3": 30.0, "5": 200.0, "10": 900.0}


def _replay(*, runtime_ms: int = REPLAYED_MS, write_lat_ns: float = 120_000.0, sync_lat_ns: float = 400_000.0,
            observed: list[HostUsage] | None = None, plan: dict[str, Any] | None = None,
            iolab_cpu_s: float | None = 0.3) -> ResultRecord:
    """A timed replay's result: class bs-4k, its writes and syncs, fio's CPU 15 % of its jobs' runtime."""
    write = DirectionStats(direction="write", total_ios=WRITES, io_bytes=WRITES * 4096, runtime_ms=runtime_ms,
                           iops=1000 * WRITES / runtime_ms, lat=Latency(mean_ns=write_lat_ns, samples=WRITES))
    sync = DirectionStats(direction="sync", total_ios=FLUSHES, lat=Latency(mean_ns=sync_lat_ns, samples=FLUSHES))
    job = JobResult(name="bs-4k", directions={"write": write, "sync": sync}, usr_cpu_pct=5.0, sys_cpu_pct=10.0,
                    job_runtime_ms=3 * runtime_ms)
    planned = plan or {"capture": 1, "recorded_ms": RECORDED_MS, "rate_pct": 100, "as_fast_as_possible": False,
                       "classes": {"bs-4k": {"requests": WRITES + FLUSHES, "service_ms": TRACED_MS, "lag_ms": LAGS}}}
    extra: dict[str, Any] = {"replay": planned, **({"iolab_cpu_s": iolab_cpu_s} if iolab_cpu_s is not None else {})}
    if observed is not None:
        extra["observed"] = to_jsonable(observed)
    facts = TargetFacts(path="/dev/loop3", kind="block", device=BlockDeviceFacts(name="loop3", path="/dev/loop3",
                                                                                 nr_requests=128))
    return ResultRecord(id=2, run_id=2, seq=0, target="fast", workload="replay", repeat=0, status="ok", job_text="",
                        job_hash="h", target_path="/dev/loop3", report=FioReport("json", (job,)),
                        target_facts=facts, extra=extra)


def _host(cpu_busy: float, disk_busy: float, in_flight: float = 1.0, window_s: float = 1.9) -> HostUsage:
    """This host over the replay: ``cpu_busy`` of its 2 CPUs, loop3 busy ``disk_busy`` of the window
    with ``in_flight`` requests on average."""
    total = window_s * 2
    return HostUsage(host="local", role="local", source="local /proc and /sys (iolab)", window_s=window_s,
                     cpu_count=2, cpu_seconds={"user": total * cpu_busy * 0.6, "system": total * cpu_busy * 0.4,
                                               "idle": total * (1 - cpu_busy)},
                     disks={"loop3": DiskUsage(reads=0, writes=WRITES, read_bytes=0, write_bytes=WRITES * 4096,
                                               busy_s=window_s * disk_busy, weighted_s=window_s * in_flight)})


def _only(result: ResultRecord) -> pace.ClassPace:
    (found,) = pace.result_pace(result)
    return found


def test_a_class_that_fell_behind_on_a_busy_host_was_held_by_the_replayer() -> None:
    """The issue's replay: 1,832 ms against 757 ms recorded is 2.42× behind; the host's CPUs were 96 %
    busy and the target 40 %: the replayer, with whose CPU it was (fio's jobs: 15 % of 3 × 1.832 s)."""
    found = _only(_replay(observed=[_host(cpu_busy=0.96, disk_busy=0.40)]))
    assert found.behind and found.ratio == pytest.approx(REPLAYED_MS / RECORDED_MS)
    assert found.behind_ms == pytest.approx(REPLAYED_MS - RECORDED_MS)
    assert found.limit is not None and found.limit.by == "replayer"
    assert ("the host's CPUs were 96% busy (fio 0.82, iolab 0.30, the rest 2.52 of 3.6 CPU-s), most of it neither "
            "fio's jobs nor iolab (other processes, or fio's main thread)") in found.limit.why
    own = _only(_replay(observed=[_host(cpu_busy=0.96, disk_busy=0.40)], iolab_cpu_s=2.5))  # iolab's own CPU
    assert own.limit is not None and own.limit.why.startswith("the host's CPUs were 96% busy (fio 0.82, iolab 2.50")
    assert "neither" not in own.limit.why


def test_a_target_busy_90_percent_or_with_a_full_queue_is_the_limit() -> None:
    busy = _only(_replay(observed=[_host(cpu_busy=0.30, disk_busy=0.95)]))
    assert busy.limit is not None and busy.limit.by == "target"
    assert "the target loop3 was busy 95% of the replay" in busy.limit.why
    full = _only(_replay(observed=[_host(cpu_busy=0.30, disk_busy=0.60, in_flight=120.0)]))
    assert full.limit is not None and full.limit.by == "target"
    assert "its queue was full: 120.0 requests in flight on average of nr_requests=128" in full.limit.why
    both = _only(_replay(observed=[_host(cpu_busy=0.95, disk_busy=0.95)]))
    assert both.limit is not None and both.limit.by == "target and replayer"


def test_a_target_whose_slowdown_explains_the_lag_is_the_limit_though_idle() -> None:
    """A cap before the device's queue (a blkio throttle) leaves the device idle: the requests took 10×
    their traced service time, and the plan's model says a target 10× slower makes the class 900 ms
    late, more than half the 1,075 ms lag."""
    found = _only(_replay(write_lat_ns=800_000.0, sync_lat_ns=2_656_000.0,
                          observed=[_host(cpu_busy=0.20, disk_busy=0.10)]))
    assert found.slowdown == pytest.approx(10.0, rel=1e-6) and found.explained_ms == pytest.approx(900.0)
    assert found.limit is not None and found.limit.by == "target"
    assert "took ×10.0 their traced service time" in found.limit.why and "900 ms late" in found.limit.why
    starved = _only(_replay(write_lat_ns=800_000.0, sync_lat_ns=2_656_000.0,
                            observed=[_host(cpu_busy=0.96, disk_busy=0.10)]))  # a starved fio reaps late too
    assert starved.limit is not None and starved.limit.by == "target and replayer"


def test_a_lag_that_neither_explains_is_fios_replay_lag() -> None:
    """Slowed 1.5× (the model: no lag), the target 40 % busy, the CPUs 30 %: fio's replay lag."""
    found = _only(_replay(write_lat_ns=120_000.0, sync_lat_ns=398_400.0,
                          observed=[_host(cpu_busy=0.30, disk_busy=0.40)]))
    assert found.limit is not None and found.limit.by == "replayer"
    assert found.limit.why.startswith("fio's replay lag: fio issued late while neither was at its limit (the "
                                      "target loop3 busy 40%, the host's CPUs 30% busy")


def test_without_observed_figures_the_limit_is_unknown_and_says_why() -> None:
    found = _only(_replay())
    assert found.limit is not None and found.limit.by == "unknown"
    assert "not observed" in found.limit.why and "--no-observe" in found.limit.why


def test_a_replay_within_five_percent_kept_pace_and_time_scale_stretches_the_recording() -> None:
    kept = _only(_replay(runtime_ms=790, observed=[_host(cpu_busy=0.96, disk_busy=0.40)]))
    assert not kept.behind and kept.limit is None
    plan = {"capture": 1, "recorded_ms": RECORDED_MS, "rate_pct": 50, "as_fast_as_possible": False, "classes": {}}
    stretched = _only(_replay(runtime_ms=1540, plan=plan))  # --time-scale 2: the trace's times doubled
    assert stretched.recorded_ms == pytest.approx(2 * RECORDED_MS) and not stretched.behind


def test_no_pace_for_a_replay_as_fast_as_possible_nor_for_other_results() -> None:
    fast = {"capture": 1, "recorded_ms": RECORDED_MS, "rate_pct": 100, "as_fast_as_possible": True, "classes": {}}
    assert pace.result_pace(_replay(plan=fast)) == ()
    plain = _replay()
    assert pace.result_pace(replace(plain, extra={})) == ()
    assert pace.result_pace(replace(plain, status="failed")) == ()


def test_a_slot_names_its_repetition_furthest_behind() -> None:
    results = [replace(_replay(runtime_ms=ms), id=i) for i, ms in enumerate((790, 1832, 1200))]
    found = pace.slot_pace(results, "bs-4k")
    assert found is not None and found.result_id == 1
    assert pace.slot_pace(results[:1], "bs-4k") is None
