"""Warm-up passes: the plateau rule and how a curve is described. A real warm-up curve (the page cache in
front of a throttled loop device) is tests/system/test_warmup_page_cache.py's; a tier that is the
target itself tests/integration/test_warmup_tier.py's; the suite keys tests/cli/test_warmup.py's."""

from __future__ import annotations

import pytest

from iolab.analyze import warmup
from iolab.report import warmup as warmup_report


def point(n: int, *iops: float) -> warmup.PassPoint:
    return warmup.PassPoint(n, tuple(iops))


def test_warm_is_the_end_of_the_first_window_shown_flat_and_averages_only_the_plateau():
    curve = [point(1, 250), point(2, 19_990), point(3, 20_010), point(4, 20_000), point(5, 20_005)]
    warm = warmup.warm_pass(curve)
    assert warm is not None and (warm.pass_index, warm.plateau_from) == (4, 2)
    assert warm.iops == pytest.approx((19_990 + 20_010 + 20_000 + 20_005) / 4)  # pass 1 never averaged in
    assert warm.trend is not None and warm.trend.change_ci is not None
    assert -0.05 <= warm.trend.change_ci[0] <= warm.trend.change_ci[1] <= 0.05
    assert warmup.warm_pass(curve[:3]) is None  # the window 1–3 holds the cold pass
    climbing = [point(i, 1000 * 1.2**i) for i in range(1, 7)]  # +20 % a pass: never flat
    assert warmup.warm_pass(climbing) is None


def test_noise_is_not_a_plateau():
    """The issue's passes, one repetition each: 124,723 → 311,675 → 204,321 IOPS is not warm (before,
    pass 3 was 'within the noise' of the two before it by fio's per-interval samples)."""
    noisy = [point(1, 124_723), point(2, 311_675), point(3, 204_321)]
    assert warmup.warm_pass(noisy) is None
    curve = warmup.Curve("dev", "w", "w", "read", tuple(noisy))
    assert "not warm after 3 pass(es): passes 1–3 change by" in warmup_report.describe_warm(curve)
    # three single passes 2 % apart: plausible, but one degree of freedom cannot show it flat
    close = [point(1, 100_000), point(2, 102_000), point(3, 100_500)]
    assert warmup.warm_pass(close) is None
    assert "--repeat 3 narrows it" in warmup_report.describe_warm(warmup.Curve("d", "w", "w", "read", tuple(close)))
    # the same passes with three repetitions each, as steady as that: warm
    repeated = [point(1, 100_000, 101_000, 99_500), point(2, 100_800, 99_900, 100_200),
                point(3, 100_300, 99_800, 100_600)]
    assert warmup.warm_pass(repeated) is not None
    # a V (down then back up) with tight repetitions: no trend, but pass 2 is 10 % off: not flat
    vee = [point(1, 100, 100.5, 99.5), point(2, 90, 90.5, 89.5), point(3, 100, 100.5, 99.5)]
    assert warmup.warm_pass(vee) is None


def test_a_capped_device_after_a_cold_pass_is_warm_only_from_its_plateau():
    """The issue's rate-capped passes: a cold pass, then 2,000 IOPS (fio's rate_iops) three times. Warm
    at pass 4 over passes 2–4; the warm p99 is the plateau's (~6 µs), not pulled up by the cold pass."""
    cold = warmup.PassPoint(1, (255.0,), (92_300_000.0,))
    capped = [warmup.PassPoint(n, (2000.0 - n / 10,), (6_000.0,)) for n in (2, 3, 4)]
    warm = warmup.warm_pass([cold, *capped])
    assert warm is not None and (warm.pass_index, warm.plateau_from) == (4, 2)
    assert warm.p99_ns == pytest.approx(6_000) and warm.iops == pytest.approx(1999.7, rel=1e-3)
    single = warmup.warm_pass([warmup.PassPoint(1, (2000.0,))])
    assert single is None and warmup.trend([warmup.PassPoint(1, (2000.0,))]) is None
