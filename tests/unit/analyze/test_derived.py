"""Adversarial inputs for the derived figures people paste (issue 20): the knee and the chosen point
under noise and with a single probe, CPU µs per I/O with no I/O or an unknown host, the Wilson loss
rate with no verified cut, and compare's verdicts with one repetition or a zero baseline. The warm
pass and the hit ratio have theirs in test_warmup.py and test_tiers.py (noise, a capped device, ramp,
a single repetition, a tier that is the target itself), the SLO check in test_saturation.py, and the
crash test without a trigger in test_crash_rules.py."""

from __future__ import annotations

import pytest

from iolab import stats
from iolab.analyze import compare, saturation
from iolab.analyze.metrics import metric
from iolab.model import HostUsage
from iolab.observe import usage
from iolab.workflows import crashtest
from iolab.workflows.crashtest import CutOutcome, CutVerdict

P = saturation.Point


def test_the_knee_of_noise_and_of_one_probe():
    # noisy probes: IOPS up and down as depth grows; power = IOPS / mean latency picks the real best,
    # the fewest outstanding I/Os on a tie, and never a probe without a latency
    noisy = [P(1, 1, 20_000, 50_000), P(4, 1, 80_000, 50_000), P(16, 1, 60_000, 270_000), P(8, 1, 80_000, 100_000),
             P(32, 1, 90_000, None)]
    knee = saturation.knee(noisy)
    assert knee is not None and (knee.iodepth, knee.numjobs) == (4, 1)
    assert saturation.knee([P(1, 1, 500, 2e6)]) == P(1, 1, 500, 2e6)  # one probe is its own knee
    assert saturation.knee([P(1, 1, 500, None)]) is None  # no latency: no power, no knee
    # a capped device (every load at the cap): the knee is one I/O in flight, by Little's law
    capped = [P(d, 1, 500, d / 500 * 1e9) for d in (1, 4, 16)]
    assert saturation.knee(capped) == capped[0]


def test_the_chosen_point_under_an_slo_with_noise_and_without_the_metric():
    slo = saturation.parse_slo("p99<1ms")
    points = [P(1, 1, 10_000, 1e5, 2e5), P(4, 1, 40_000, 1e5, 9e5), P(16, 1, 90_000, 1e5, 1.0e6),
              P(8, 1, 50_000, 1e5, None)]
    chosen = saturation.best_under(points, slo)
    assert chosen is not None and chosen.iodepth == 4  # 1.0 ms is not < 1 ms; no metric is not a pass
    assert saturation.best_under([P(1, 1, 100, 1e5, 2e6)], slo) is None  # the lightest load breaks it


def test_cpu_us_per_io_needs_io_and_every_host():
    busy = HostUsage("h", "local", "proc", 2.0, 2, {"user": 0.5, "system": 0.5, "idle": 3.0})
    assert usage.cpu_us_per_io([busy], 1000) == pytest.approx(1000.0)  # 1 busy s / 1000 I/Os
    assert usage.cpu_us_per_io([busy], 0) is None and usage.cpu_us_per_io([busy], None) is None
    unknown = HostUsage("g", "server", "node_exporter", None)  # the observer never reached the window
    assert usage.cpu_us_per_io([busy, unknown], 1000) is None  # never a share of the hosts as the whole
    assert usage.cpu_us_per_io([], 1000) is None


def test_the_wilson_loss_rate_counts_only_verified_cuts():
    outcomes = [CutOutcome(1, CutVerdict.NO_CUT), CutOutcome(2, CutVerdict.FAILED)]
    rate = crashtest.loss_rate(outcomes)
    assert (rate.verified, rate.with_loss, rate.rate, rate.ci95) == (0, 0, None, None)  # nothing verified: no rate
    one = crashtest.loss_rate([CutOutcome(1, CutVerdict.INTACT), *outcomes])
    assert (one.verified, one.rate) == (1, 0.0) and one.ci95 == pytest.approx((0.0, 0.7935), abs=1e-4)
    assert stats.wilson(0, 20) == pytest.approx((0.0, 0.1611), abs=1e-4)
    assert stats.wilson(20, 20)[1] == 1.0 and stats.wilson(20, 20)[0] > 0.83  # type: ignore[index]


def test_verdicts_with_one_repetition_a_zero_baseline_and_noise():
    iops = metric("iops")
    single = compare.compare_metric(iops, [1000.0], [2000.0], 0.05)
    assert (single.verdict, single.tested, compare.verdict_word(single)) == ("better", False, "better (untested)")
    zero = compare.compare_metric(iops, [0.0, 0.0], [10.0, 12.0], 0.05)
    assert zero.ratio is None and zero.relative_change is None  # no ratio of a zero baseline
    noisy = compare.compare_metric(iops, [100.0, 150.0], [170.0, 110.0], 0.05)
    assert noisy.verdict == compare.Verdict.INCONCLUSIVE == "inconclusive"
    assert noisy.ratio_ci95 is not None and noisy.ratio_ci95[0] < 1 < noisy.ratio_ci95[1]  # wider than the change
    # the row: one run against two whose interval is ±327.7 %: not 'better (untested)'
    lopsided = compare.compare_metric(iops, [2000.0], [600.0, 4613.4], 0.05)
    assert compare.verdict_word(lopsided) == "inconclusive" and not lopsided.tested
    tight = compare.compare_metric(iops, [2000.0], [2600.0, 2610.0], 0.05)
    assert compare.verdict_word(tight) == "better (untested)"  # its interval is narrower than the change
    steady = compare.compare_metric(iops, [1000.0, 1001.0, 999.0], [1200.0, 1201.0, 1199.0], 0.05)
    assert compare.verdict_word(steady) == "better" and steady.tested
