"""Change points of one series of run values: where its level moved, and how surely. Pure.

Two steps, the shape of MongoDB's and Apache Otava's change-point detection (a search, then a
significance test on what it found), with a least-squares search:

1. **Candidates** (`ruptures <https://centre-borelli.github.io/ruptures-docs/>`_, BSD): ``KernelCPD``
   with the linear kernel, the exact penalised least-squares segmentation of the mean (PELT, in C),
   on the natural logs of the values (a change is a ratio: 5 % slower is the same step at 100 or
   100,000 IOPS) standardised by a robust noise estimate, the median absolute difference of
   successive values / (0.6745 √2), which a step does not inflate. Penalty ``2 ln n`` per change
   (BIC-like); every segment at least ``MIN_SEGMENT`` runs.
2. **Significance**: each candidate is tested on the values between its neighbours (at most
   ``WINDOW`` runs each side) by a permutation test: every ordering of those values is equally likely
   when nothing changed. The statistic is the largest F of a split anywhere in the window
   (between-part sum of squares over the within-part mean square, F(1, m−2)), so the search is part
   of the statistic and the p-value accounts for having looked for the best split (a t-test at the
   found split would not). A window of at most ``EXACT_RUNS`` runs has every ordering enumerated
   (``EXACT_RUNS``! of them: an exact p-value); a longer one ``PERMUTATIONS`` random orderings
   (``scipy.stats.permutation_test``), after a first stage of ``SCREEN`` that ends the test of a
   candidate that is plainly not significant, and ``REFINE`` when the p-value is near ``ALPHA``. The
   within-part sums of squares are summed part by part (not the total less the explained part, which
   cancels when a split explains nearly all), so orderings that are ties are counted as ties. The
   candidate with the largest p-value above ``ALPHA`` is dropped and its neighbours are tested again,
   until every one left is significant.
3. **Unconfirmed**: a few runs after a step cannot make it significant, however clean it is: with
   ``a`` runs before it and ``b`` after, no ordering is more extreme than the two that put one part
   wholly before the other, so the p-value is at least ``2 / C(a + b, b)`` (5 + 3 runs: 2/56 = 0.036).
   The last candidate of a series, dropped with a p-value as small as its window allows and above
   ``ALPHA`` only for that reason, is kept as an unconfirmed change (``ChangePoint.confirmed`` False)
   with the number of further runs at its new level that would let the test reach ``ALPHA``
   (``runs_needed``, from ``2 / C(a + b + r, a)``), when its split is strong on its own: an F at
   least the F(1, m − 2) distribution's upper ``ALPHA`` point (noise that happens to fall apart in
   a few runs seldom is: 2 of 300 flat 6-run series and 4 of 300 8-run ones, seeded, where 7 % and 3 %
   fell apart without this).
4. **Large enough to matter**: a candidate whose level moves by less than ``MIN_CHANGE`` (the mean of
   the runs after it over the mean of those before it, between its neighbours) is dropped before any
   test, the smallest first, confirmed or not. A series whose runs agree to a few tenths of a percent (a
   throttled device: 303.1, 302.8, 301.3 IOPS) makes a step of 0.5 % as clean as a real one, and its
   test cannot tell them apart; no one gates on it. ``compare``'s and the gate's default bound is 5 %.

Accuracy (``benchmarks/history.py``, series made by importing scaled real fio outputs, 3 % noise):
a 5 % step is found within 5 runs of where it happened in >= 95 % of series with 20 runs or more
on each side, and <= 1 % of flat 30-run series get any change point. The p-values are exact for
the permutation test: exactly for windows of up to ``EXACT_RUNS`` runs, up to the resampling's
resolution (1 / (PERMUTATIONS + 1)) beyond.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: A change point moves the level by at least this (relative, 0.02 = 2 %): see the module docstring, step 4.
MIN_CHANGE = 0.02
#: Fewest runs in a segment (the search's ``min_size``).
MIN_SEGMENT = 3
#: A change point is kept when its permutation p-value is at most this.
ALPHA = 0.005
#: Resamples of the permutation test (p-values in steps of 1/1000).
PERMUTATIONS = 999
#: Runs on each side of a candidate its test looks at (a bound on the test's cost for long series).
WINDOW = 50
#: Windows of up to this many runs have every ordering enumerated (8! = 40,320): an exact p-value.
EXACT_RUNS = 8
#: A random test whose p-value comes out within a factor ``REFINE_NEAR`` of ``ALPHA`` is drawn again with
#: ``REFINE`` resamples (resolution 1e-5), so that a verdict this close is not the resampling's noise.
REFINE, REFINE_NEAR = 99_999, 3.0
#: The test first draws ``SCREEN`` resamples and stops when their p-value is above ``SCREEN_P``: a
#: candidate that ordinary orderings match often is not significant, and most candidates of a flat
#: series are such. Rejecting only when both stages do keeps the test's level.
SCREEN, SCREEN_P = 99, 0.1
#: The permutations are drawn from this seed: the same series gives the same p-values every time.
SEED = 20260
#: ``max_f`` of a split that explains every difference (no variation within the parts).
PERFECT = 1e300
METHOD = (f"ruptures KernelCPD (linear kernel, penalty 2 ln n, segments >= {MIN_SEGMENT} runs) on log values; "
          f"each change kept when a permutation test of the max-F split statistic between its neighbours (every "
          f"ordering up to {EXACT_RUNS} runs, else {PERMUTATIONS} random ones) gives p <= {ALPHA}; a last step too "
          f"short to reach that is shown unconfirmed; steps under {MIN_CHANGE * 100:g} % are not changes")


#: Part of every ``key``: raised when what a stored detection holds changes meaning.
KEY_FORMAT = 3


@dataclass(frozen=True)
class ChangePoint:
    """The first index of a new level and the permutation test's p-value for the change there.
    ``confirmed`` False: the series' last step, as clean as its few runs after it can show but not
    significant for want of runs (see the module docstring); ``runs_needed`` more runs at its new level
    would let it reach ``ALPHA``."""

    index: int
    p_value: float
    confirmed: bool = True
    runs_needed: int = 0


def detect(values: Sequence[float], alpha: float = ALPHA) -> list[ChangePoint]:
    """The change points of ``values`` (in time order), earliest first, the last one possibly
    unconfirmed (``ChangePoint.confirmed``); none for fewer than ``2 * MIN_SEGMENT`` values or a
    constant series. Values <= 0 make the search run on the values themselves instead of their logs.
    Raises nothing for finite input."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 2 * MIN_SEGMENT or not np.isfinite(x).all():
        return []
    z = np.log(x) if (x > 0).all() else x
    noise = 1.482602 * float(np.median(np.abs(np.diff(z)))) / math.sqrt(2)
    if noise == 0:
        noise = float(z.std())
    if noise == 0:
        return []
    candidates = _candidates((z - np.median(z)) / noise)
    return _significant(z, x, candidates, alpha)


def key(values: Sequence[float], alpha: float = ALPHA) -> str:
    """What ``detect(values, alpha)`` finds depends on, as 64 hex digits (sha256): the values (as
    little-endian float64), ``alpha``, every parameter above, ``KEY_FORMAT`` and the versions of
    ruptures and scipy. Equal keys, equal detections: a key names a stored detection
    (``store.history.ChangePointCache``). Raises nothing."""
    import hashlib
    import struct

    params = (KEY_FORMAT, METHOD, MIN_SEGMENT, MIN_CHANGE, alpha, PERMUTATIONS, WINDOW, SCREEN, SCREEN_P, SEED,
              _versions())
    digest = hashlib.sha256(repr(params).encode())
    digest.update(struct.pack(f"<{len(values)}d", *values))
    return digest.hexdigest()


@functools.cache
def _versions() -> tuple[str, str]:
    from importlib import metadata

    return metadata.version("ruptures"), metadata.version("scipy")


def _candidates(z: Any) -> list[int]:
    """Where ruptures' penalised least-squares segmentation puts the changes of standardised ``z``."""
    import numpy as np
    import ruptures

    signal = np.asarray(z, dtype=float).reshape(-1, 1)
    found = ruptures.KernelCPD(kernel="linear", min_size=MIN_SEGMENT).fit(signal).predict(pen=2 * math.log(len(z)))
    return [int(b) for b in found[:-1]]


def _significant(z: Any, x: Any, candidates: list[int], alpha: float) -> list[ChangePoint]:
    """The candidates left after dropping, one at a time, the smallest step under ``MIN_CHANGE`` (of the
    values ``x``), then the least significant above ``alpha`` (tested on ``z``, the values as searched);
    the last candidate, if dropped only for want of runs after it, as an unconfirmed change."""
    import numpy as np

    z = np.asarray(z, dtype=float)
    cache: dict[tuple[int, int], Test] = {}

    def window(i: int, kept: list[int]) -> tuple[int, int]:
        at = kept.index(i) if i in kept else len([k for k in kept if k < i])
        lo = kept[at - 1] if at else 0
        later = [k for k in kept if k > i]
        hi = later[0] if later else len(z)
        return max(lo, i - WINDOW), min(hi, i + WINDOW)

    def test(i: int, kept: list[int]) -> Test:
        bounds = window(i, kept)
        if bounds not in cache:
            cache[bounds] = permutation_test(z[bounds[0]:bounds[1]], i - bounds[0])
        return cache[bounds]

    def step(i: int, kept: list[int]) -> float:
        """The relative change of the mean at ``i`` between its neighbours (inf from a mean of 0)."""
        lo, hi = window(i, kept)
        before, after = float(x[lo:i].mean()), float(x[i:hi].mean())
        return abs(after - before) / abs(before) if before else math.inf

    last = candidates[-1] if candidates else None
    kept = list(candidates)
    while kept:
        smallest = min(kept, key=lambda k: step(k, kept))
        if step(smallest, kept) < MIN_CHANGE:
            kept.remove(smallest)
            continue
        tests = [test(k, kept) for k in kept]
        worst = max(range(len(kept)), key=lambda i: tests[i].p_value)
        if tests[worst].p_value <= alpha:
            break
        del kept[worst]
    found = [ChangePoint(k, test(k, kept).p_value) for k in kept]
    if last is not None and last not in kept:
        t = test(last, kept)
        needed = t.runs_needed(alpha)
        if t.as_extreme_as_possible and t.strong(alpha) and needed and step(last, kept) >= MIN_CHANGE:
            found.append(ChangePoint(last, t.p_value, confirmed=False, runs_needed=needed))
    return found


@dataclass(frozen=True)
class Test:
    """A permutation test of one window split at ``split``: its ``p_value``, and the smallest p-value any
    ordering of the window's values could give (``floor``: that of the window sorted, its parts wholly
    apart, which its own orderings reach as often as the observed one's)."""

    p_value: float
    floor: float
    runs: int
    split: int
    f: float = 0.0

    @property
    def as_extreme_as_possible(self) -> bool:
        """Whether the observed ordering is as extreme as any (its parts do not overlap): no ordering of
        these values could be more significant."""
        return self.p_value <= self.floor * (1 + 1e-9) + 1e-12

    def strong(self, alpha: float) -> bool:
        """Whether the split's F (``max_f``) would be significant at ``alpha`` on its own, as an F(1, m − 2)
        test at a split chosen in advance."""
        from scipy import stats as sps

        return self.f >= float(sps.f.isf(alpha, 1, self.runs - 2))

    def runs_needed(self, alpha: float) -> int:
        """Runs to add after the split, at the new level, before the floor ``2 / C(n, before)`` is at most
        ``alpha`` (0 when it is already; capped at ``WINDOW``)."""
        before = self.split
        for extra in range(WINDOW + 1):
            if 2 / math.comb(self.runs + extra, before) <= alpha:
                return extra
        return WINDOW


def permutation_p(window: Any) -> float:
    """The permutation p-value of the best split of ``window`` (``max_f``): the share of its orderings
    (all of them up to ``EXACT_RUNS`` values, else the observed one and ``PERMUTATIONS`` random ones)
    whose best split is at least as strong. 1.0 for a window too short to split."""
    return permutation_test(window, None).p_value


def permutation_test(window: Any, split: int | None) -> Test:
    """``permutation_p`` of ``window`` with its floor (``Test``), for a candidate at index ``split``."""
    import numpy as np
    from scipy import stats as sps

    w = np.asarray(window, dtype=float)
    m = len(w)
    if m < 2 * MIN_SEGMENT:
        return Test(1.0, 1.0, m, split or 0)
    extreme = np.sort(w)
    if m <= EXACT_RUNS:
        null = max_f(w[_orderings(m)])
        observed, most = max_f(w), max_f(extreme)
        return Test(_share_at_least(null, observed), _share_at_least(null, most), m, split or 0, float(observed))
    for resamples in (SCREEN, PERMUTATIONS, REFINE):
        result = sps.permutation_test((w,), max_f, permutation_type="pairings", vectorized=True,
                                      n_resamples=resamples, alternative="greater", rng=np.random.default_rng(SEED))
        p = float(result.pvalue)
        if p > SCREEN_P or (resamples == PERMUTATIONS and not ALPHA / REFINE_NEAR < p < ALPHA * REFINE_NEAR):
            break
    floor = (_share_at_least(result.null_distribution, max_f(extreme)) * resamples + 1) / (resamples + 1)
    return Test(p, floor, m, split or 0, float(result.statistic))


@functools.cache
def _orderings(m: int) -> Any:
    """Every ordering of ``m`` indices, as an (m!, m) array."""
    import itertools

    import numpy as np

    return np.array(list(itertools.permutations(range(m))))


def _share_at_least(null: Any, observed: float) -> float:
    """The share of ``null`` at least ``observed``, values within a relative 1e-9 of it counted as equal
    (ties: the statistic is computed part by part, so equal orderings agree to far better than that)."""
    import numpy as np

    return float(np.mean(null >= observed * (1 - 1e-9)))


def max_f(w: Any, axis: int = -1) -> Any:
    """The largest F statistic of splitting ``w`` in two (each part at least ``MIN_SEGMENT`` long):
    ``F(s) = (SS − W(s)) (m − 2) / W(s)`` with ``W(s)`` the sum of squares within the two parts, each
    part's summed about its own mean, and ``SS`` the total (the least-squares criterion ruptures
    minimises, as a one-way ANOVA F). Summing within the parts, not ``SS`` less the explained part,
    keeps ``W`` exact to rounding when a split explains nearly all, so equal orderings give equal F.
    Vectorised over the other axes; ``PERFECT`` for a split that explains all (finite: scipy's
    permutation test subtracts a tolerance from the observed value, and inf − inf is nan)."""
    import numpy as np

    w = np.moveaxis(np.asarray(w, dtype=float), axis, -1)
    m = w.shape[-1]
    w = w - w.mean(axis=-1, keepdims=True)
    total = (w**2).sum(axis=-1)
    best = np.full(w.shape[:-1], -np.inf)
    for s in range(MIN_SEGMENT, m - MIN_SEGMENT + 1):
        within = _ss(w[..., :s]) + _ss(w[..., s:])
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(within > total * 1e-12, (total - within) * (m - 2) / within, PERFECT)
        best = np.maximum(best, f)
    return best


def _ss(part: Any) -> Any:
    """Sum of squares of ``part`` about its own mean, along the last axis."""
    return ((part - part.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)
