"""Pure statistics over repeated measurements, each with its reference.

Every repeat's raw value is kept by the callers; nothing here drops outliers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    """Mean, sample standard deviation (n-1) and a two-sided 95 % Student-t interval of the mean.

    ``stdev``/``ci95`` are None with fewer than 2 values. Source: the t interval
    ``mean ± t(0.975, n-1) · s / sqrt(n)`` (e.g. NIST/SEMATECH e-Handbook §7.2.2.1).
    """

    n: int
    mean: float | None
    stdev: float | None
    minimum: float | None
    maximum: float | None
    ci95: tuple[float, float] | None

    @property
    def cv(self) -> float | None:
        """Coefficient of variation, stdev / mean (None when undefined)."""
        if self.stdev is None or not self.mean:
            return None
        return self.stdev / abs(self.mean)


def describe(values: Sequence[float | None]) -> Summary:
    """Summary of the known values (``None`` entries are unknown and skipped)."""
    known = [float(v) for v in values if v is not None and not math.isnan(v)]
    n = len(known)
    if n == 0:
        return Summary(0, None, None, None, None, None)
    mean = sum(known) / n
    if n < 2:
        return Summary(n, mean, None, known[0], known[0], None)
    stdev = math.sqrt(sum((v - mean) ** 2 for v in known) / (n - 1))
    half = t_quantile(0.975, n - 1) * stdev / math.sqrt(n)
    return Summary(n, mean, stdev, min(known), max(known), (mean - half, mean + half))


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (scipy.stats.t.ppf), imported on first use: scipy.stats costs about a
    second of start-up that commands without statistics should not pay."""
    from scipy import stats as sps

    return float(sps.t.ppf(p, df))
