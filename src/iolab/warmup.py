"""Warm-up curves: a workload run as N passes over the same region, pass by pass. Pure.

A cache in front of a slow device (dm-cache, bcache, an array's cache, the page cache) is judged by
how its figures change over successive passes: the first pass finds it cold, later passes find
what the earlier ones left. A suite's ``passes: N`` (``iolab run --passes N``) stores each pass as a
result of its own (``extra["pass"]``); ``curves`` reads them back as a curve per workload, fio job
and direction: IOPS, p99 completion latency and, with tiers named, the hit ratio (``tiers``) per
pass, repetitions of the whole sequence pooled pass by pass.

**Warm** (``warm_pass``): the first pass k ≥ 3 whose IOPS is within the noise of both passes k−1
and k−2 ("a pass within the noise of the previous two is warm", iolab issue 14). Two passes are
within the noise when their IOPS differ by at most the larger of ``THRESHOLD`` (5 %, ``iolab
compare``'s default threshold) of the larger one and twice the standard error of the difference
(about a 95 % band, normal approximation): the standard error of a pass's mean IOPS is the sample
standard deviation of its repetitions over √n with two or more, else that of fio's per-interval
IOPS samples (``iops_samples``, every ``iopsavgtime`` ms) over √samples, else 0. Per-interval samples
are autocorrelated, so that error is a lower bound, and the 5 % floor keeps a long, steady pass from
calling 1 % apart "different". The **warm values** are the means over the plateau: the two passes
the warm one agrees with, the warm one and every pass after it; a curve that never becomes warm has
none.

This is not the SNIA PTS steady state (``method``: five rounds within 20 % and a flat fit), which
judges a device's own state under a long workload; a cache's warm-up is shorter and steeper.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from . import jobfile, stats
from . import tiers as tiers_mod
from .fio.merge import by_job
from .model import DirectionStats, Run

#: Passes whose IOPS differ by at most this fraction are within the noise (see the module docstring).
THRESHOLD = 0.05
#: Standard errors of the difference that count as noise (about 95 %).
Z = 2.0


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

    @property
    def iops(self) -> float | None:
        return stats.describe(self.iops_values).mean

    @property
    def p99_ns(self) -> float | None:
        return stats.describe(self.p99_values).mean

    @property
    def hit_ratio(self) -> float | None:
        return stats.describe(self.hit_values).mean

    @property
    def standard_error(self) -> float:
        """The standard error of the pass's mean IOPS (see the module docstring)."""
        s = stats.describe(self.iops_values)
        if s.stdev is not None:
            return s.stdev / math.sqrt(s.n)
        return self.sample_se or 0.0


@dataclass(frozen=True)
class Warm:
    """Where a curve became warm: the pass, the first pass of its plateau (two before it), and the
    means over the plateau (None where unknown)."""

    pass_index: int
    plateau_from: int
    iops: float | None
    p99_ns: float | None
    hit_ratio: float | None


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
    def name(self) -> str:
        return self.workload if self.job == self.workload else f"{self.workload} · {self.job}"


def within_noise(a: PassPoint, b: PassPoint, threshold: float = THRESHOLD) -> bool:
    """Whether the IOPS of two passes differ by no more than the noise (see the module docstring)."""
    if a.iops is None or b.iops is None:
        return False
    band = max(threshold * max(a.iops, b.iops), Z * math.hypot(a.standard_error, b.standard_error))
    return abs(a.iops - b.iops) <= band


def warm_pass(points: Sequence[PassPoint], threshold: float = THRESHOLD) -> Warm | None:
    """The first pass within the noise of the two before it, with the plateau's means; None when
    there is none (fewer than three passes, or still changing)."""
    for k in range(2, len(points)):
        if within_noise(points[k], points[k - 1], threshold) and within_noise(points[k], points[k - 2], threshold):
            plateau = points[k - 2:]
            means = (stats.describe([getattr(p, f) for p in plateau]).mean for f in ("iops", "p99_ns", "hit_ratio"))
            return Warm(points[k].pass_index, plateau[0].pass_index, *means)
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
        tiers = tiers_mod.from_options(run.info.options)
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
    origins = [next((t.ios(direction) for t in acc.tiers if t.tier == tiers_mod.ORIGIN), None) if acc else None
               for _, acc in seen]
    ses = [s for d, _ in seen if (s := _sample_se(d)) is not None]
    return PassPoint(number, tuple(d.iops for d, _ in seen), tuple(_p99(d) for d, _ in seen),
                     tuple(acc.hit_ratio.get(direction) if acc else None for _, acc in seen), tuple(origins),
                     tuple(acc.issued.get(direction) if acc else None for _, acc in seen),
                     stats.describe(ses).mean if ses else None)


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
