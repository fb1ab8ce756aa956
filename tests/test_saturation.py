"""The saturation search as a pure function of its probes (device models whose answer is known:
Little's law), the SLO syntax, and the knee's definition. The real-fio tests on a throttled loop
device are in test_cli_saturate.py."""

from __future__ import annotations

import math

import pytest

from iolab import saturation
from iolab.errors import UsageError
from iolab.saturation import Point, Search


def capped(cap: float, unloaded_ms: float, per_job_cpu_cap: float = math.inf):
    """A device with a hard IOPS ceiling ``cap`` and latency ``unloaded_ms`` when idle: IOPS =
    min(cap, jobs × per-job limit, N / unloaded latency), mean latency = N / IOPS (Little's law);
    p99 taken as twice the mean."""
    def probe(iodepth: int, numjobs: int) -> Point:
        n = iodepth * numjobs
        iops = min(cap, numjobs * per_job_cpu_cap, n / (unloaded_ms / 1000))
        mean_ns = n / iops * 1e9
        return Point(iodepth, numjobs, iops, mean_ns, 2 * mean_ns)
    return probe


def run(search: Search, probe) -> list[Point]:  # type: ignore[no-untyped-def]
    points: list[Point] = []
    while (step := search.next(points)) is not None:
        assert step not in {(p.iodepth, p.numjobs) for p in points}, "a point is never probed twice"
        points.append(probe(*step))
    return points


def test_knee_is_where_the_bandwidth_delay_product_fills_the_device():
    """cap 100k IOPS, 160 µs idle latency: the pipe is full at N = 100k × 160 µs = 16."""
    points = run(Search(256, 2), capped(100_000, 0.160))
    knee = saturation.knee(points)
    assert knee is not None and knee.concurrency == 16 and knee.iops == pytest.approx(100_000)
    assert len(points) <= 8  # the full grid is 9 iodepths x 2 numjobs = 18


def test_most_iops_under_an_slo_lies_on_the_frontier():
    slo = saturation.parse_slo("p99<=2ms")  # p99 = 2 x mean: mean <= 1 ms, so N <= 100 at the cap
    search = Search(256, 2, slo)
    points = run(search, capped(100_000, 0.160))
    best = search.chosen(points)
    assert best is not None and best.iops == pytest.approx(100_000) and best.slo_ns <= 2e6
    grid = [capped(100_000, 0.160)(q, j) for q in (1, 2, 4, 8, 16, 32, 64, 128, 256) for j in (1, 2)]
    assert best.iops >= 0.97 * saturation.best_under(grid, slo).iops  # type: ignore[union-attr]


def test_a_cpu_bound_job_gets_more_jobs():
    """One job can drive 40k IOPS of a 100k device: the search doubles numjobs."""
    search = Search(256, 4)
    points = run(search, capped(100_000, 0.05, per_job_cpu_cap=40_000))
    best = search.chosen(points)
    assert best is not None and best.numjobs >= 2 and best.iops > 60_000


def test_a_throttled_device_saturates_at_one_io_in_flight():
    """cap 500 IOPS, 70 µs idle: IOPS are capped at N = 1; the knee is N = 1, and with mean <= 5 ms
    every N <= 2.5 is feasible (mean = N / 500)."""
    slo = saturation.parse_slo("mean<=5ms")
    search = Search(256, 2, slo)
    points = run(search, capped(500, 0.07))
    assert saturation.knee(points).concurrency == 1  # type: ignore[union-attr]
    best = search.chosen(points)
    assert best is not None and best.concurrency <= 2 and best.iops == pytest.approx(500)
    assert len(points) <= 5


def test_no_probe_meets_an_impossible_slo():
    search = Search(256, 2, saturation.parse_slo("p99<=10us"))
    points = run(search, capped(100_000, 0.160))
    assert search.chosen(points) is None and len(points) == 1


@pytest.mark.parametrize("text, metric, limit_ns", [
    ("p99<=2ms", "clat_p99", 2e6), ("p99.9 <= 10ms", "clat_p99.9", 1e7), ("lat_mean<500us", "lat_mean", 5e5),
    ("mean<=1.5ms", "clat_mean", 1.5e6), ("clat_p50<=200us", "clat_p50", 2e5), ("p99<=2", "clat_p99", 2e6)])
def test_slo_syntax(text, metric, limit_ns):
    slo = saturation.parse_slo(text)
    assert (slo.metric.name, slo.limit_ns) == (metric, limit_ns)


@pytest.mark.parametrize("text", ["iops<=5", "p99>=2ms", "p99<=fast", "p99<=0ms", "p101<=1ms"])
def test_bad_slos_are_usage_errors(text):
    with pytest.raises(UsageError):
        saturation.parse_slo(text)
