"""Saturation: the knee of the latency–IOPS curve and the most IOPS under a latency SLO. Pure.

The question behind most sweeps is one number: how many IOPS does this path deliver while p99
latency stays under the SLO, and where is the knee? ``Search`` answers it with few fio runs
(*probes*), each a point (iodepth, numjobs) → (IOPS, latency); the workflow that runs them is
``iolab.workflow``.

**The knee** is the probe with the highest *power*, IOPS / mean completion latency (L. Kleinrock,
"Power and deterministic rules of thumb for probabilistic problems in computer communications",
ICC 1979: the operating point that maximises throughput over delay). By Little's law (IOPS =
outstanding I/Os / latency) power is IOPS² / concurrency: it grows while more concurrency buys
proportionally more IOPS and falls once the device saturates and more I/Os only queue, so its
maximum is where the curve bends. It needs no smoothing or normalisation of a sampled curve
(Kneedle, Satopää et al. 2011, finds maximum curvature on a dense, normalised curve; a search has
a handful of points).

**The most IOPS under an SLO** is the probe with the highest IOPS whose SLO metric (p99 completion
latency, any percentile, or a mean) is below the limit (``<``) or at most the limit (``<=``, ``≤``), as
the SLO says. IOPS does not fall and latency does not
drop as concurrency grows, so the feasible probes end at a frontier and the best lies on it.

**The search** (``Search.next``) walks iodepth at one job in steps of ×4 (1, 4, 16, 64, 256) until
IOPS stops growing by ``GROWTH`` or the SLO breaks, probes the ×2 point between the last two, then
doubles numjobs at the best point while that adds ``GROWTH`` (up to the CPUs: more jobs than CPUs
measure the scheduler). Eight or nine probes cover what a 9 × log2(CPUs) grid does; the workflow
runs them short and repeats only the chosen point at full length.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .. import stats, units
from ..errors import UsageError
from ..fio.merge import by_job
from ..model import DirectionStats, ResultRecord
from . import compare

#: IOPS growth below this fraction is a plateau: more concurrency only adds queueing.
GROWTH = 0.10
#: iodepth steps of the coarse walk (×4) and of the refinement (×2), as powers of two.
COARSE_STEP, FINE_STEP = 2, 1


@dataclass(frozen=True)
class Slo:
    """A latency objective: ``metric`` (``compare.metric``: clat_p99, lat_mean …) below ``limit_ns``
    nanoseconds when ``strict`` (``p99<2ms``), else at most it (``p99<=2ms``)."""

    metric: compare.Metric
    limit_ns: float
    strict: bool = False

    def __str__(self) -> str:
        return f"{self.metric.title} {'<' if self.strict else '≤'} {units.format_ns(self.limit_ns)}"

    def value(self, d: DirectionStats) -> float | None:
        return self.metric.value(d)

    def met_by(self, value_ns: float | None) -> bool:
        """Whether a value of the SLO metric meets it (``<`` or ``≤`` as the SLO says); None does not."""
        if value_ns is None:
            return False
        return value_ns < self.limit_ns if self.strict else value_ns <= self.limit_ns


_SLO_RE = re.compile(r"^\s*(?P<metric>[a-z_]*p?[\d.]*|[a-z_]*mean)\s*(?P<op><=|≤|<)\s*(?P<limit>[\d.]+\s*[a-zµ]*)\s*$")


def parse_slo(text: str) -> Slo:
    """``p99<=2ms``, ``clat_p99.9<=10ms``, ``lat_mean<500us``, ``mean≤1ms`` as an ``Slo``; a bare
    ``pNN`` or ``mean`` is completion latency (clat). ``<`` is strict, ``<=`` and ``≤`` are not.
    Raises ``UsageError`` for anything else."""
    match = _SLO_RE.match(text)
    if not match:
        raise UsageError(f"--slo {text!r}: expected METRIC<=LIMIT or METRIC<LIMIT such as p99<=2ms or "
                         "lat_mean<500us")
    name = match["metric"]
    name = f"clat_{name}" if name.startswith("p") or name == "mean" else name
    metric = compare.metric(name)
    if metric.unit != "ns":
        raise UsageError(f"--slo {text!r}: an SLO is a latency (clat/lat/slat mean, max or percentile)")
    try:
        limit_ns = units.parse_duration_us(match["limit"].replace("µs", "us"), default_unit="ms") * 1000
    except ValueError as exc:
        raise UsageError(f"--slo {text!r}: {exc}") from None
    if limit_ns <= 0:
        raise UsageError(f"--slo {text!r}: the limit must be above zero")
    return Slo(metric, float(limit_ns), match["op"] == "<")


@dataclass(frozen=True)
class Point:
    """One probe's outcome: IOPS (all directions summed) and latencies in ns of the workload at
    ``iodepth`` × ``numjobs``; ``slo_ns`` is the SLO metric's value (the worst direction), ``cpu_pct``
    fio's user + system CPU of a job (% of one CPU), when known."""

    iodepth: int
    numjobs: int
    iops: float
    lat_mean_ns: float | None = None
    slo_ns: float | None = None
    cpu_pct: float | None = None

    @property
    def concurrency(self) -> int:
        """Outstanding I/Os: iodepth × numjobs."""
        return self.iodepth * self.numjobs

    @property
    def power(self) -> float | None:
        """IOPS / mean latency (Kleinrock's power), in IOPS per ms."""
        return self.iops / (self.lat_mean_ns / 1e6) if self.lat_mean_ns else None

    def label(self) -> str:
        return f"QD{self.iodepth} ×{self.numjobs}"


def knee(points: Sequence[Point]) -> Point | None:
    """The point of highest power (see the module docstring); None without latencies."""
    scored = [p for p in points if p.power is not None]
    return max(scored, key=lambda p: (p.power, -p.concurrency)) if scored else None


def feasible(point: Point, slo: Slo | None) -> bool:
    """Whether ``point`` meets ``slo`` (every point does without one; one without the metric does not)."""
    return slo is None or slo.met_by(point.slo_ns)


def best_under(points: Sequence[Point], slo: Slo | None) -> Point | None:
    """The most IOPS among the points that meet ``slo`` (the fewest outstanding I/Os on a tie); None
    when none does."""
    ok = [p for p in points if feasible(p, slo)]
    return max(ok, key=lambda p: (p.iops, -p.concurrency)) if ok else None


@dataclass(frozen=True)
class Search:
    """The adaptive search over iodepth (powers of two up to ``max_iodepth``) and numjobs (powers of
    two up to ``max_numjobs``), as a pure function of the probes so far (see the module docstring).

    ``next(points)`` gives the next (iodepth, numjobs) to probe, or None when done; then ``chosen``
    is the answer: the most IOPS under the SLO, or the knee without one.
    """

    max_iodepth: int
    max_numjobs: int
    slo: Slo | None = None

    def next(self, points: Sequence[Point]) -> tuple[int, int] | None:
        done = {(p.iodepth, p.numjobs) for p in points}
        walk = [p for p in points if p.numjobs == 1]
        step = self._walk(walk)
        if step is not None:
            return None if step in done else step
        refine = self._refine(walk, done)
        if refine is not None:
            return refine
        return self._jobs(points, done)

    def _walk(self, walk: Sequence[Point]) -> tuple[int, int] | None:
        """The coarse iodepth walk at one job: None once it has stopped."""
        if not walk:
            return (1, 1)
        last = max(walk, key=lambda p: p.iodepth)
        before = [p for p in walk if p.iodepth < last.iodepth]
        grew = not before or last.iops >= (1 + GROWTH) * max(p.iops for p in before)
        if not grew or not feasible(last, self.slo) or last.iodepth >= self.max_iodepth:
            return None
        return (min(self.max_iodepth, last.iodepth << COARSE_STEP), 1)

    def _refine(self, walk: Sequence[Point], done: set[tuple[int, int]]) -> tuple[int, int] | None:
        """The ×2 point between the walk's last two, where it stopped (plateau or SLO frontier)."""
        depths = sorted(p.iodepth for p in walk)
        if len(depths) < 2:
            return None
        middle = int(math.sqrt(depths[-2] * depths[-1]))  # 4 and 16 -> 8
        middle = 1 << (middle.bit_length() - 1)
        step = (middle, 1)
        return step if depths[-2] < middle < depths[-1] and step not in done else None

    def _jobs(self, points: Sequence[Point], done: set[tuple[int, int]]) -> tuple[int, int] | None:
        """Double numjobs at the best point's iodepth while that adds ``GROWTH`` (and meets the SLO)."""
        best = self.chosen(points)
        if best is None:
            return None
        line = sorted((p for p in points if p.iodepth == best.iodepth), key=lambda p: p.numjobs)
        last = line[-1]
        earlier = [p for p in line if p.numjobs < last.numjobs]
        if earlier and (last.iops < (1 + GROWTH) * max(p.iops for p in earlier) or not feasible(last, self.slo)):
            return None
        step = (best.iodepth, last.numjobs * 2)
        return step if step[1] <= self.max_numjobs and step not in done else None

    def chosen(self, points: Sequence[Point]) -> Point | None:
        """The answer so far: the most IOPS under the SLO, or the knee without one."""
        return best_under(points, self.slo) if self.slo is not None else knee(points)


def point_of(result: ResultRecord, iodepth: int, numjobs: int, slo: Slo | None) -> Point | None:
    """A probe's outcome: IOPS summed over directions, mean completion latency over all I/Os, the SLO
    metric of the worst direction and the jobs' mean CPU; None for a probe that failed."""
    if result.status != "ok" or result.report is None:
        return None
    stats = list(by_job(result.report).values())
    iops = sum(d.iops or 0.0 for d in stats)
    weighted = [(d.iops, lat.mean_ns) for d in stats if d.iops for lat in (d.clat or d.lat,)
                if lat is not None and lat.mean_ns]
    mean = sum(w * m for w, m in weighted) / sum(w for w, _ in weighted) if weighted else None
    values = [v for d in stats if (v := slo.value(d)) is not None] if slo else []
    cpus = [j.usr_cpu_pct + j.sys_cpu_pct for j in result.report.jobs
            if j.usr_cpu_pct is not None and j.sys_cpu_pct is not None]
    return Point(iodepth, numjobs, iops, mean, max(values) if values else None,
                 sum(cpus) / len(cpus) if cpus else None)


@dataclass(frozen=True)
class Verdict:
    """Whether the chosen point meets the SLO over its full-length repetitions: ``outcome`` is
    ``meets`` (the 95 % interval of the SLO metric lies on the SLO's side of the limit), ``fails``
    (its geometric mean does not meet it), ``edge`` (the mean meets it but the interval crosses the
    limit) or ``untested`` (one repetition that met it: no interval). ``values_ns`` are the
    repetitions' SLO metric, ``mean_ns`` their geometric mean and ``ci95_ns`` its 95 % Student-t
    interval on log values (None with fewer than two): latencies are positive and vary by ratios,
    and an interval on their own scale would reach below zero with few, spread repetitions."""

    outcome: str
    values_ns: tuple[float, ...]
    mean_ns: float | None
    ci95_ns: tuple[float, float] | None


MEETS, FAILS, EDGE, UNTESTED = "meets", "fails", "edge", "untested"


def verdict(slo: Slo, values_ns: Sequence[float | None]) -> Verdict:
    """The chosen point's repetitions against ``slo`` (see ``Verdict``). Source of the interval: the
    Student-t interval of the mean (``stats.describe``); a repetition without the metric counts as
    not meeting it."""
    known = tuple(float(v) for v in values_ns if v is not None and v > 0)
    logs = stats.describe([math.log(v) for v in known])
    mean = math.exp(logs.mean) if logs.mean is not None else None
    ci = (math.exp(logs.ci95[0]), math.exp(logs.ci95[1])) if logs.ci95 else None
    if known and min(known) == max(known):  # exactly, not through exp(log(x)), which may round below a limit
        mean, ci = known[0], (known[0], known[0]) if ci else None
    if mean is None or len(known) < len(values_ns) or not slo.met_by(mean):
        return Verdict(FAILS, known, mean, ci)
    if ci is None:
        return Verdict(UNTESTED, known, mean, None)
    return Verdict(MEETS if slo.met_by(ci[1]) else EDGE, known, mean, ci)


def next_below(points: Sequence[Point], chosen: Point, slo: Slo | None) -> Point | None:
    """The probe with the most IOPS below ``chosen``'s that met ``slo`` in its probe, at fewer
    outstanding I/Os: what to offer when the chosen point does not hold the SLO over its repetitions."""
    lower = [p for p in points if p.concurrency < chosen.concurrency and feasible(p, slo)]
    return max(lower, key=lambda p: (p.iops, -p.concurrency)) if lower else None
