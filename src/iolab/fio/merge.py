"""Aggregate fio results over jobs (numjobs clones) and hosts, the way fio's numbers allow.

* IOPS and bandwidth: summed (the jobs ran at the same time).
* Latency mean: weighted by sample count; stddev: pooled (exact combination of the parts'
  sample variances).
* Percentiles: recomputed from the summed json+ histograms with fio's own rule
  (``calc_clat_percentiles()`` in stat.c). Averaging percentiles is wrong, so when the parts
  carry no histogram the merged percentiles are unknown (empty), unless there is one part.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

from ..histogram import Histogram
from ..model import DIRECTIONS, DirectionStats, FioReport, JobResult, Latency, pct_key


def percentiles_from_bins(bins: Mapping[int, int], percentiles: Iterable[str | float]) -> dict[str, float]:
    """fio's percentile of a histogram: the first bucket whose cumulative count reaches p% of N.

    ``bins`` maps a bucket midpoint (ns) to a count. Returns ``pct_key -> midpoint ns``; empty
    when the histogram is empty. Source: ``calc_clat_percentiles()``, stat.c (fio 3.33).
    """
    total = sum(bins.values())
    if total <= 0:
        return {}
    wanted = sorted((Fraction(pct_key(p)), pct_key(p)) for p in percentiles)
    out: dict[str, float] = {}
    cumulative, j = 0, 0
    for value in sorted(bins):
        cumulative += bins[value]
        while j < len(wanted) and cumulative * 100 >= wanted[j][0] * total:
            out[wanted[j][1]] = float(value)
            j += 1
        if j == len(wanted):
            break
    return out


def merge_latency(parts: Sequence[Latency | None]) -> Latency | None:
    """One latency over all I/Os of ``parts`` (None parts are skipped); see module docstring."""
    lats = [p for p in parts if p is not None and p.samples != 0]
    if not lats:
        return None
    if len(lats) == 1:
        return lats[0]
    mean = stddev = None
    n_total: int | None = None
    # (count, mean, stddev) of every part, when all are known
    moments = [(p.samples, p.mean_ns, p.stddev_ns) for p in lats]
    if all(c is not None and m is not None for c, m, _ in moments):
        n_total = sum(c for c, _, _ in moments if c is not None)
    if n_total:
        mean = sum(float(c) * m for c, m, _ in moments if c is not None and m is not None) / n_total
        if n_total > 1 and all(sd is not None for _, _, sd in moments):
            ss = sum((c - 1) * sd**2 + c * (m - mean) ** 2
                     for c, m, sd in moments if c is not None and m is not None and sd is not None)
            stddev = math.sqrt(ss / (n_total - 1))
    bins: Histogram | None = None
    percentiles: dict[str, float] = {}
    if all(p.bins_ns is not None for p in lats):
        merged: Counter[int] = Counter()
        for p in lats:
            merged.update(p.bins_ns or {})
        bins = Histogram(merged)
        wanted = {k for p in lats for k in p.percentiles_ns}
        percentiles = percentiles_from_bins(bins, wanted)
    return Latency(
        min_ns=_fold(min, [p.min_ns for p in lats]),
        max_ns=_fold(max, [p.max_ns for p in lats]),
        mean_ns=mean,
        stddev_ns=stddev,
        samples=n_total,
        percentiles_ns=percentiles,
        bins_ns=bins,
    )


def merge_directions(parts: Sequence[DirectionStats]) -> DirectionStats:
    """Sum one direction over jobs or hosts that ran at the same time.

    ``runtime_ms`` is the longest part's; fio's rounded displays add up where no part is exact.
    Raises ``ValueError`` when ``parts`` is empty or mixes directions.
    """
    if not parts:
        raise ValueError("nothing to merge")
    if len({p.direction for p in parts}) != 1:
        raise ValueError("cannot merge different directions")
    if len(parts) == 1:
        return parts[0]
    return DirectionStats(
        direction=parts[0].direction,
        total_ios=_sum([p.total_ios for p in parts]),
        io_bytes=_sum([p.io_bytes for p in parts]),
        runtime_ms=_fold(max, [p.runtime_ms for p in parts]),
        iops=_sum([p.iops for p in parts]),
        bw_bytes_s=_sum([p.bw_bytes_s for p in parts]),
        slat=merge_latency([p.slat for p in parts]),
        clat=merge_latency([p.clat for p in parts]),
        lat=merge_latency([p.lat for p in parts]),
        short_ios=_sum([p.short_ios for p in parts]),
        drop_ios=_sum([p.drop_ios for p in parts]),
        iops_shown=None if any(p.iops is not None for p in parts) else _sum([p.iops_or_shown for p in parts]),
        bw_bytes_s_shown=None if any(p.bw_bytes_s is not None for p in parts) else _sum(
            [p.bw_or_shown for p in parts]),
    )


def summarize(jobs: Iterable[JobResult]) -> dict[str, DirectionStats]:
    """Per direction, the merge of every job's stats: what a set of concurrent jobs achieved."""
    by_dir: dict[str, list[DirectionStats]] = {}
    for job in jobs:
        for name, stats in job.directions.items():
            by_dir.setdefault(name, []).append(stats)
    return {name: merge_directions(by_dir[name]) for name in DIRECTIONS if name in by_dir}


def by_job(report: FioReport | None) -> dict[tuple[str, str], DirectionStats]:
    """``(fio job name, direction) -> merged stats`` of one fio invocation: a job's numjobs clones
    (and its hosts' parts) summed; empty without a report."""
    if report is None:
        return {}
    jobs: dict[str, list[JobResult]] = {}
    for job in report.jobs:
        jobs.setdefault(job.name, []).append(job)
    return {(name, direction): merged for name, parts in jobs.items()
            for direction, merged in summarize(parts).items()}


def with_sync_rates(merged: Mapping[tuple[str, str], DirectionStats]) -> dict[tuple[str, str], DirectionStats]:
    """``by_job``'s stats with each ``sync`` direction's rate where fio gave none: its calls over
    the job's runtime (the longest of its other directions': the time the syncs were issued in),
    as ``runtime_ms`` and ``iops``. fio reports a sync's count and latency only (``stat.c``,
    ``show_thread_status_json``: the ``sync`` object holds ``total_ios`` and ``lat_ns``); a replay's
    syncs are its flushes, and a
    capture's flushes have their rate (``workflows.capture.record.capture_report``): so the two compare."""
    runtimes: dict[str, int] = {}
    for (job, direction), d in merged.items():
        if direction != "sync" and d.runtime_ms:
            runtimes[job] = max(runtimes.get(job, 0), d.runtime_ms)
    out = dict(merged)
    for (job, direction), d in merged.items():
        if direction == "sync" and d.iops is None and d.total_ios is not None and runtimes.get(job):
            out[(job, direction)] = replace(d, runtime_ms=runtimes[job], iops=1000.0 * d.total_ios / runtimes[job])
    return out


def _sum(values: Sequence[Any]) -> Any:
    """The sum, or None (unknown) when any part is unknown."""
    return None if any(v is None for v in values) else sum(values)


def _fold(fn: Callable[[list[Any]], Any], values: Sequence[Any]) -> Any:
    """``fn`` (min or max) over the known values; None when none is known."""
    known = [v for v in values if v is not None]
    return fn(known) if known else None


#: fio directions whose I/Os count (``sync`` counts fsyncs; ``mixed`` is unified_rw_reporting).
IO_DIRECTIONS = ("read", "write", "trim", "mixed")


def job_ios(report: FioReport | None) -> int | None:
    """I/Os fio completed in the measured phase: ``total_ios`` of the ``IO_DIRECTIONS`` of every job and
    host summed; None without a report or when no count is known."""
    if report is None:
        return None
    counts = [d.total_ios for j in report.jobs for name, d in j.directions.items()
              if name in IO_DIRECTIONS and d.total_ios is not None]
    return sum(counts) if counts else None


def jobs_cpu_s(report: FioReport | None) -> float | None:
    """CPU seconds (user + system) of fio's job threads or processes: each job's ``usr_cpu`` and
    ``sys_cpu`` (percent of its runtime) times its ``job_runtime``, summed; a reporting group's
    shares are of its members' summed runtime, which ``job_runtime`` is (``stat.c``,
    ``sum_thread_stats``, ``show_thread_status_json``). fio's main thread is not a job: not counted.
    None without a report or when no job says."""
    if report is None:
        return None
    parts = [((j.usr_cpu_pct or 0.0) + (j.sys_cpu_pct or 0.0)) / 100 * j.job_runtime_ms / 1000 for j in report.jobs
             if j.job_runtime_ms is not None and (j.usr_cpu_pct is not None or j.sys_cpu_pct is not None)]
    return sum(parts) if parts else None


def latency_figure(d: DirectionStats, kind: str, stat: str) -> float | None:
    """One figure of a direction's latency in ns: ``kind`` ``clat``, ``lat`` or ``slat``, ``stat`` ``mean``,
    ``max`` or ``pNN`` (a ``pct_key``: ``p99``, ``p99.9``). A sync direction's ``clat`` is its ``lat``
    (fio times a sync call as a whole, "lat" only). None when fio did not measure it: it prints zeros
    for latencies it did not measure (``gtod_reduce``, psync's slat)."""
    lat: Latency | None = getattr(d, kind)
    if kind == "clat" and d.direction == "sync":
        lat = d.lat
    if lat is None or lat.samples == 0 or (lat.samples is None and not lat.max_ns and not lat.percentiles_ns):
        return None
    if stat == "mean":
        return lat.mean_ns
    if stat == "max":
        return lat.max_ns
    return lat.percentile(stat[1:])
