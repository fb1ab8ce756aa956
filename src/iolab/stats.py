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


@dataclass(frozen=True)
class Welch:
    """Welch's unequal-variance t-test of ``mean(b) - mean(a)``, two-sided.

    ``estimate``/``ci95`` are the difference of means and its 95 % interval; with ``log=True``
    the test ran on natural logs and both are exponentiated: the ratio of geometric means
    ``gm(b) / gm(a)`` and its interval. ``df`` is the Welch–Satterthwaite degrees of freedom
    (None when both variances are 0: then the p-value is 0 for different means, 1 for equal ones).
    Source: Welch (1947), Biometrika 34; NIST/SEMATECH e-Handbook §1.3.5.3. Agrees with
    ``scipy.stats.ttest_ind(a, b, equal_var=False)`` (tests check it).
    """

    estimate: float
    ci95: tuple[float, float]
    p_value: float
    df: float | None
    log: bool


def welch(a: Sequence[float], b: Sequence[float], log: bool = False) -> Welch:
    """Welch's t-test of two samples of at least 2 values each (positive values when ``log``).

    Raises ``ValueError`` for fewer than 2 values on a side or a non-positive value with ``log``.
    """
    if len(a) < 2 or len(b) < 2:
        raise ValueError("Welch's t-test needs at least 2 values per side")
    if log and any(v <= 0 for v in (*a, *b)):
        raise ValueError("a log-scale test needs positive values")
    xa = [math.log(v) for v in a] if log else [float(v) for v in a]
    xb = [math.log(v) for v in b] if log else [float(v) for v in b]
    sa, sb = describe(xa), describe(xb)
    assert sa.mean is not None and sb.mean is not None and sa.stdev is not None and sb.stdev is not None
    diff = sb.mean - sa.mean
    va, vb = sa.stdev**2 / sa.n, sb.stdev**2 / sb.n
    se = math.sqrt(va + vb)
    if se == 0:
        p, df, half = (1.0 if diff == 0 else 0.0), None, 0.0
    else:
        df = (va + vb) ** 2 / (va**2 / (sa.n - 1) + vb**2 / (sb.n - 1))
        from scipy import stats as sps

        p = float(2 * sps.t.sf(abs(diff) / se, df))
        half = t_quantile(0.975, df) * se
    lo, hi = diff - half, diff + half
    if log:
        return Welch(math.exp(diff), (math.exp(lo), math.exp(hi)), p, df, True)
    return Welch(diff, (lo, hi), p, df, False)


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion ``successes / n`` (95 % with the default ``z``);
    None for ``n == 0``. Unlike the normal (Wald) interval it stays within [0, 1] and does not
    collapse to a point at 0 or n successes: 0 losses in 20 trials give 0–16.1 %.

    Source: E. B. Wilson, "Probable inference, the law of succession, and statistical inference",
    JASA 22 (1927) 209–212; Brown, Cai & DasGupta, "Interval estimation for a binomial proportion",
    Statistical Science 16 (2001), which recommends it for small n.
    """
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be between 0 and n={n}, got {successes}")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
