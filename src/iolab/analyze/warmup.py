"""Warm-up curves: a workload run as N passes over the same region, pass by pass. Pure.

A cache in front of a slow device (dm-cache, bcache, an array's cache, the page cache) is judged by
how its figures change over successive passes: the first pass finds it cold, later passes find
what the earlier ones left. A suite's ``passes: N`` (``iolab run --passes N``) stores each pass as a
result of its own (``extra["pass"]``); ``curves`` reads them back as a curve per workload, fio job
and direction: IOPS, p99 completion latency and, with tiers named, the hit ratio (``tiers``) per
pass, repetitions of the whole sequence pooled pass by pass.

**Warm** (``warm_pass``): the first pass k ≥ 3 that ends a *stable window* of ``WINDOW`` (3) passes
k−2 … k, shown by repeated evidence rather than by three single numbers looking alike. Over the
window, every repetition's IOPS is one point (pass, IOPS) and a least-squares line is fitted; the
window is stable when (1) the 95 % Student-t interval of the line's change over the window (slope ×
(WINDOW − 1), t with n − 2 degrees of freedom) lies entirely within ±``THRESHOLD`` (5 %, ``iolab
compare``'s default) of the window's mean, and (2) every pass's mean IOPS is within ±``THRESHOLD`` of
it. This is an equivalence test (two one-sided tests, Schuirmann 1987, J. Pharmacokinet. Biopharm.
15: a change is shown to be small when its whole interval is), in the shape of the SNIA PTS
steady-state rule (range and least-squares excursion over a window; PTS v2.0.2 §3.1.1) with an
interval instead of the fit alone. A window of three single repetitions has one degree of freedom
(t = 12.7), so only passes that agree closely (a rate-capped pass, a pass served from memory) are
warm without ``--repeat``; noise such as 124k → 311k → 204k IOPS never is. A curve without a stable
window is "not warm after N passes", with the last window's interval. The **warm values** are the
means over the plateau — the window and every later pass — so no pass before the window is averaged
in.

This is not the SNIA PTS steady state (``method``: five rounds within 20 % and a flat fit), which
judges a device's own state under a long workload; a cache's warm-up is shorter and steeper.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .. import stats
from ..describe import tiers as tier_specs
from ..fio import jobfile
from ..fio.merge import by_job
from ..model import DirectionStats, Run
from . import tiers as tiers_mod

#: A window's change and every pass's mean must lie within this fraction of its mean (see the module
#: docstring).
THRESHOLD = 0.05
#: Passes in the window a plateau is judged over.
WINDOW = 3


@dataclass(frozen=True)
class PassPoint:
    """One pass of a curve over its repetitions: IOPS, p99 completion latency (ns), hit ratio and
    I/Os that reached the origin, one entry per repetition (None where unknown); ``sample_se`` is the
    standard error of the IOPS of a single repetition from fio's per-interval samples (None without
    samples)."""

    pass_index: int
    iops_values: tuple[float | None, ...]
    p99_values: tuple[float | None, ...] = ()
    hit_values: tuple[float | None, ...] = ()
    origin_values: tuple[float | None, ...] = ()
    issued_values: tuple[float | None, ...] = ()
    sample_se: float | None = None
    hit_problems: tuple[str, ...] = ()

    @property
    def iops(self) -> float | None:
        return stats.describe(self.iops_values).mean

    @property
    def p99_ns(self) -> float | None:
        return stats.describe(self.p99_values).mean

    @property
    def hit_ratio(self) -> float | None:
        """The mean hit ratio; None when a repetition's counts do not match (``hit_problems``)."""
        return None if self.hit_problems else stats.describe(self.hit_values).mean

    @property
    def standard_error(self) -> float:
        """The standard error of the pass's mean IOPS (see the module docstring)."""
        s = stats.describe(self.iops_values)
        if s.stdev is not None:
            return s.stdev / math.sqrt(s.n)
        return self.sample_se or 0.0


@dataclass(frozen=True)
class Trend:
    """The least-squares line of IOPS over a window of passes (``trend``): ``first``/``last`` pass,
    ``n`` repetitions in all, the window's mean IOPS, the line's change over the window relative to
    that mean with its 95 % t-interval (None with fewer than 3 values), and the largest distance of
    a pass's mean from the window's mean, relative."""

    first: int
    last: int
    n: int
    mean: float
    change: float
    change_ci: tuple[float, float] | None
    spread: float

    def stable(self, threshold: float = THRESHOLD) -> bool:
        """Whether the window shows a plateau (see the module docstring)."""
        return (self.change_ci is not None and -threshold <= self.change_ci[0] and self.change_ci[1] <= threshold
                and self.spread <= threshold)


@dataclass(frozen=True)
class Warm:
    """Where a curve became warm: the pass, the first pass of its plateau (the window's first), the
    means over the plateau (None where unknown) and the window's ``Trend``."""

    pass_index: int
    plateau_from: int
    iops: float | None
    p99_ns: float | None
    hit_ratio: float | None
    trend: Trend | None = None


@dataclass(frozen=True)
class Curve:
    """One workload, fio job and direction over its passes, in pass order; ``warm`` is None when no
    pass is warm (``warm_pass``)."""

    target: str
    workload: str
    job: str
    direction: str
    points: tuple[PassPoint, ...]
    warm: Warm | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def last_trend(self) -> Trend | None:
        """The trend of the last window (what a curve that is not warm shows)."""
        return trend(self.points[-WINDOW:]) if len(self.points) >= WINDOW else None

    @property
    def name(self) -> str:
        return self.workload if self.job == self.workload else f"{self.workload} · {self.job}"


def trend(window: Sequence[PassPoint]) -> Trend | None:
    """The least-squares line of every repetition's IOPS against its pass over ``window`` (see
    ``Trend``); None when a pass has no IOPS or the window's mean is not positive."""
    xy = [(p.pass_index, float(v)) for p in window for v in p.iops_values if v is not None]
    means = [p.iops for p in window]
    if not xy or any(m is None for m in means):
        return None
    n = len(xy)
    mx, my = sum(x for x, _ in xy) / n, sum(y for _, y in xy) / n
    sxx = sum((x - mx) ** 2 for x, _ in xy)
    if my <= 0 or sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in xy) / sxx
    span = window[-1].pass_index - window[0].pass_index
    spread = max(abs(m - my) for m in means if m is not None) / my
    interval = None
    if n >= 3:
        residual = sum((y - my - slope * (x - mx)) ** 2 for x, y in xy) / (n - 2)
        half = stats.t_quantile(0.975, n - 2) * math.sqrt(residual / sxx)
        interval = ((slope - half) * span / my, (slope + half) * span / my)
    return Trend(window[0].pass_index, window[-1].pass_index, n, my, slope * span / my, interval, spread)


def warm_pass(points: Sequence[PassPoint], threshold: float = THRESHOLD) -> Warm | None:
    """The last pass of the first stable window, with the plateau's means; None when there is none
    (fewer than ``WINDOW`` passes, or still changing, or too noisy to tell)."""
    for k in range(WINDOW - 1, len(points)):
        found = trend(points[k - WINDOW + 1:k + 1])
        if found is not None and found.stable(threshold):
            plateau = points[k - WINDOW + 1:]
            iops, p99, hit = (stats.describe([getattr(p, f) for p in plateau]).mean
                              for f in ("iops", "p99_ns", "hit_ratio"))
            return Warm(points[k].pass_index, plateau[0].pass_index, iops, p99, hit, found)
    return None


def drops_page_cache(job_text: str) -> bool:
    """Whether fio drops the page cache of its files before each pass: a buffered job (``direct``
    unset or 0) with ``invalidate`` at its default 1 (HOWTO ``invalidate``: "Invalidate the buffer/page
    cache parts of the files to be used prior to starting I/O"), so a warm-up of the page cache
    starts cold every pass."""
    jobs = jobfile.effective_jobs(jobfile.parse(job_text))
    return any((o.get("direct") or "0") in ("0", "false") and (o.get("invalidate") or "1") not in ("0", "false")
               for _, o in jobs)


def _p99(d: DirectionStats) -> float | None:
    lat = d.clat if d.clat is not None and d.clat.samples != 0 else d.lat
    return lat.percentile(99) if lat is not None else None


def _sample_se(d: DirectionStats) -> float | None:
    s = d.iops_samples
    if s is None or s.stddev is None or not s.samples or s.samples < 2:
        return None
    return s.stddev / math.sqrt(s.samples)


def curves(runs: Sequence[Run], threshold: float = THRESHOLD) -> list[Curve]:
    """The warm-up curves of ``runs`` (their results with a pass; runs pooled, as a side of a
    comparison is), in order of first appearance; empty when no result has a pass."""
    found: dict[tuple[str, str, str, str], dict[int, list[tuple[DirectionStats, tiers_mod.Accounting | None]]]] = {}
    notes: dict[tuple[str, str, str, str], set[str]] = {}
    for run in runs:
        tiers = tier_specs.from_options(run.info.options)
        for result in run.results:
            number = (result.extra or {}).get("pass")
            if not number or result.status != "ok":
                continue
            acc = tiers_mod.accounting(result, tiers)
            for (job, direction), d in by_job(result.report).items():
                key = (result.target, result.workload, job, direction)
                found.setdefault(key, {}).setdefault(int(number), []).append((d, acc))
                notes.setdefault(key, set()).update(acc.notes if acc else ())
    out = []
    for key, by_pass in found.items():
        points = tuple(_point(n, by_pass[n], key[3]) for n in sorted(by_pass))
        out.append(Curve(*key, points, warm_pass(points, threshold), tuple(sorted(notes[key]))))
    return out


def _point(number: int, seen: Sequence[tuple[DirectionStats, tiers_mod.Accounting | None]], direction: str
           ) -> PassPoint:
    origins = [next((t.ios(direction) for t in acc.tiers if t.tier == tier_specs.ORIGIN), None) if acc else None
               for _, acc in seen]
    ses = [s for d, _ in seen if (s := _sample_se(d)) is not None]
    problems = tuple(dict.fromkeys(p for _, acc in seen if acc and (p := acc.hit_problems.get(direction))))
    return PassPoint(number, tuple(d.iops for d, _ in seen), tuple(_p99(d) for d, _ in seen),
                     tuple(acc.hit_ratio.get(direction) if acc else None for _, acc in seen), tuple(origins),
                     tuple(acc.issued.get(direction) if acc else None for _, acc in seen),
                     stats.describe(ses).mean if ses else None, problems)


def pair_curves(a: Sequence[Curve], b: Sequence[Curve]) -> list[tuple[Curve, Curve]]:
    """Curves of two sides that show the same workload: the same workload, fio job and direction,
    on the same target when both sides have it (two cache configurations are often two targets)."""
    b_targets = {c.target for c in b}
    pairs = []
    for ca in a:
        same = [cb for cb in b if (cb.workload, cb.job, cb.direction) == (ca.workload, ca.job, ca.direction)]
        if ca.target in b_targets:
            same = [cb for cb in same if cb.target == ca.target]
        if same:
            pairs.append((ca, same[0]))
    return pairs


def by_pass(curve: Curve) -> Mapping[int, PassPoint]:
    return {p.pass_index: p for p in curve.points}
