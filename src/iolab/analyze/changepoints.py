"""Change points of one series of run values: where its level moved, and how surely. Pure.

Two steps, the shape of MongoDB's and Apache Otava's change-point detection (a search, then a
significance test on what it found), with a least-squares search:

1. **Candidates** (`ruptures <https://centre-borelli.github.io/ruptures-docs/>`_, BSD): ``KernelCPD``
   with the linear kernel, the exact penalised least-squares segmentation of the mean (PELT, in C),
   on the natural logs of the values (a change is a ratio: 5 % slower is the same step at 100 or
   100,000 IOPS) standardised by a robust noise estimate, the median absolute difference of
   successive values / (0.6745 √2), which a step does not inflate. Penalty ``2 ln n`` per change
   (BIC-like); every segment at least ``MIN_SEGMENT`` runs.
2. **Significance** (``scipy.stats.permutation_test``): each candidate is tested on the values
   between its neighbours (at most ``WINDOW`` runs each side) with the order of those values
   permuted ``PERMUTATIONS`` times. The statistic is the largest F of a split anywhere in the
   window (between-part sum of squares over the within-part mean square, F(1, m−2)), so the search
   is part of the statistic and the p-value accounts for having looked for the best split (a t-test
   at the found split would not). The candidate with the largest p-value above ``ALPHA`` is dropped
   and its neighbours are tested again, until every one left is significant. A first stage of
   ``SCREEN`` resamples ends the test of a candidate that is plainly not significant.

Accuracy (``benchmarks/history.py``, series made by importing scaled real fio outputs, 3 % noise):
a 5 % step is found within 5 runs of where it happened in >= 95 % of series with 20 runs or more
on each side, and <= 1 % of flat 30-run series get any change point. The p-values are exact for
the permutation test, up to the resampling's resolution (1 / (PERMUTATIONS + 1)).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Fewest runs in a segment (the search's ``min_size``).
MIN_SEGMENT = 3
#: A change point is kept when its permutation p-value is at most this.
ALPHA = 0.005
#: Resamples of the permutation test (p-values in steps of 1/1000).
PERMUTATIONS = 999
#: Runs on each side of a candidate its test looks at (a bound on the test's cost for long series).
WINDOW = 50
#: The test first draws ``SCREEN`` resamples and stops when their p-value is above ``SCREEN_P``: a
#: candidate that ordinary orderings match often is not significant, and most candidates of a flat
#: series are such. Rejecting only when both stages do keeps the test's level.
SCREEN, SCREEN_P = 99, 0.1
#: The permutations are drawn from this seed: the same series gives the same p-values every time.
SEED = 20260
#: ``max_f`` of a split that explains every difference (no variation within the parts).
PERFECT = 1e300
METHOD = (f"ruptures KernelCPD (linear kernel, penalty 2 ln n, segments >= {MIN_SEGMENT} runs) on log values; "
          f"each change kept when a permutation test ({PERMUTATIONS} resamples of the max-F split statistic "
          f"between its neighbours) gives p <= {ALPHA}")


#: Part of every ``key``: raised when what a stored detection holds changes meaning.
KEY_FORMAT = 1


@dataclass(frozen=True)
class ChangePoint:
    """The first index of a new level and the permutation test's p-value for the change there."""

    index: int
    p_value: float


def detect(values: Sequence[float], alpha: float = ALPHA) -> list[ChangePoint]:
    """The change points of ``values`` (in time order), earliest first; none for fewer than
    ``2 * MIN_SEGMENT`` values or a constant series. Values <= 0 make the search run on the values
    themselves instead of their logs. Raises nothing for finite input."""
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
    return _significant(z, candidates, alpha)


def key(values: Sequence[float], alpha: float = ALPHA) -> str:
    """What ``detect(values, alpha)`` finds depends on, as 64 hex digits (sha256): the values (as
    little-endian float64), ``alpha``, every parameter above, ``KEY_FORMAT`` and the versions of
    ruptures and scipy. Equal keys, equal detections: a key names a stored detection
    (``store.history.ChangePointCache``). Raises nothing."""
    import hashlib
    import struct

    params = (KEY_FORMAT, METHOD, MIN_SEGMENT, alpha, PERMUTATIONS, WINDOW, SCREEN, SCREEN_P, SEED, _versions())
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


def _significant(z: Any, candidates: list[int], alpha: float) -> list[ChangePoint]:
    """The candidates left after dropping, one at a time, the least significant above ``alpha``."""
    import numpy as np

    z = np.asarray(z, dtype=float)
    cache: dict[tuple[int, int], float] = {}

    def p_of(i: int) -> float:
        lo = candidates[i - 1] if i else 0
        hi = candidates[i + 1] if i + 1 < len(candidates) else len(z)
        window = (max(lo, candidates[i] - WINDOW), min(hi, candidates[i] + WINDOW))
        if window not in cache:
            cache[window] = permutation_p(z[window[0]:window[1]])
        return cache[window]

    while candidates:
        p_values = [p_of(i) for i in range(len(candidates))]
        worst = max(range(len(candidates)), key=lambda i: p_values[i])
        if p_values[worst] <= alpha:
            return [ChangePoint(k, p) for k, p in zip(candidates, p_values, strict=True)]
        del candidates[worst]
    return []


def permutation_p(window: Any) -> float:
    """The permutation p-value of the best split of ``window`` (``max_f``): the share of orderings of
    its values, among ``PERMUTATIONS`` random ones and the observed one, whose best split is at least
    as strong. 1.0 for a window too short to split."""
    import numpy as np
    from scipy import stats as sps

    w = np.asarray(window, dtype=float)
    if len(w) < 2 * MIN_SEGMENT:
        return 1.0
    p = 1.0
    for resamples in (SCREEN, PERMUTATIONS):
        p = float(sps.permutation_test((w,), max_f, permutation_type="pairings", vectorized=True,
                                       n_resamples=resamples, alternative="greater",
                                       rng=np.random.default_rng(SEED)).pvalue)
        if p > SCREEN_P:
            break
    return p


def max_f(w: Any, axis: int = -1) -> Any:
    """The largest F statistic of splitting ``w`` in two (each part at least ``MIN_SEGMENT`` long):
    ``F(s) = G(s) (m - 2) / (SS - G(s))`` with ``G(s) = s (m - s) / m · (mean₁ - mean₂)²`` the sum of
    squares the split explains and ``SS`` the total (the least-squares criterion ruptures minimises,
    as a one-way ANOVA F). Vectorised over the other axes; ``PERFECT`` for a split that explains all
    (finite: scipy's permutation test subtracts a tolerance from the observed value, and inf - inf is nan)."""
    import numpy as np

    w = np.moveaxis(np.asarray(w, dtype=float), axis, -1)
    m = w.shape[-1]
    w = w - w.mean(axis=-1, keepdims=True)  # G and SS do not change; cumulative sums stay small
    cumulative = np.cumsum(w, axis=-1)[..., :-1]
    s = np.arange(1, m)
    gain = cumulative**2 * m / (s * (m - s))  # = s (m-s)/m (mean₁ - mean₂)² with the total mean 0
    gain = gain[..., MIN_SEGMENT - 1:m - MIN_SEGMENT]
    total = (w**2).sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(total - gain > total * 1e-12, gain * (m - 2) / (total - gain), PERFECT)
    return f.max(axis=-1)
