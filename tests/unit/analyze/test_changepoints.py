"""Change points of short series: exact p-values, ties counted as ties, and steps too short to confirm."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iolab.analyze import changepoints


def step(seed: int, before: int = 5, after: int = 3) -> list[float]:
    """A clean −50 % step with 3 % noise: ``before`` runs at 3,000 IOPS, ``after`` at 1,500."""
    rng = np.random.default_rng(seed)
    return [*rng.normal(3000, 90, before), *rng.normal(1500, 45, after)]


@pytest.mark.parametrize("seed", [6, 29, 0, 1])
def test_five_runs_then_three_give_the_exact_p_value_of_their_arrangements(seed):
    """5 + 3 runs have C(8, 3) = 56 arrangements of which part is where, and no ordering is more extreme
    than the two that put one part wholly before the other: p = 2/56 whatever the noise. Seeds 6 and 29
    gave 0.004 and 0.002 before (the total less the explained part cancelled, so orderings that tie
    were counted as less extreme): a change "found" at a level the data cannot reach."""
    values = np.log(step(seed))
    assert changepoints.permutation_p(values) == pytest.approx(2 / math.comb(8, 3), rel=1e-12)


def test_a_step_with_too_few_runs_after_it_is_unconfirmed_and_says_how_many_would_confirm_it():
    (found,) = changepoints.detect(step(6))
    assert (found.index, found.confirmed) == (5, False)
    assert found.p_value == pytest.approx(2 / 56)
    # 2 / C(8 + r, 5) <= 0.005 first at r = 3 (C(11, 5) = 462)
    assert found.runs_needed == 3
    (four,) = changepoints.detect(step(6, after=4))
    assert not four.confirmed and four.runs_needed == 2
    assert four.p_value == pytest.approx(2 / math.comb(9, 4), abs=0.002)  # 9 runs: 999 random orderings
    (six,) = changepoints.detect(step(6, after=6))
    assert six.confirmed and six.index == 5 and six.p_value <= changepoints.ALPHA


def test_the_max_f_statistic_is_exact_where_a_split_explains_nearly_all():
    """Equal orderings give equal statistics to the last bits: a part's sum of squares is summed within it."""
    w = np.log(step(6))
    mirrored = np.concatenate([w[5:], w[:5]])  # the same split, parts swapped
    assert changepoints.max_f(w) == pytest.approx(changepoints.max_f(mirrored), rel=1e-12)


def test_flat_short_series_seldom_show_an_unconfirmed_change():
    """Noise that falls apart in a few runs is not called a step: a split must be strong on its own."""
    rng = np.random.default_rng(7)
    shown = sum(any(not c.confirmed for c in changepoints.detect(list(rng.normal(100, 3, n))))
                for n in (6, 8) for _ in range(150))
    assert shown <= 6  # 2 %; 7 % and 3 % of such series fall apart at the candidate split


def test_a_step_under_the_minimum_change_is_part_of_its_level_however_clean():
    """A throttled device's runs agree to a few tenths of a percent: its last three runs 0.5 % lower are as
    clean a step as a real one (the CI run that showed it as an unconfirmed change), but not a change."""
    before = [2992.0, 2966.1, 2980.2, 2992.0, 2986.1, 2983.0, 2986.1, 3001.0]  # recorded, tenfold throttled after
    after = [303.7, 303.1, 303.1, 302.8, 303.1]
    (only,) = changepoints.detect([*before, *after, 301.3, 301.5, 301.6])
    assert (only.index, only.confirmed) == (8, True)
    (_, late) = changepoints.detect([*before, *after, 296.3, 296.5, 296.6])  # 2.2 %: a change, still unconfirmed
    assert (late.index, late.confirmed, late.runs_needed) == (13, False, 3)
