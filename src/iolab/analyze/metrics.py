"""The figures a comparison weighs, each with its unit and its direction (IOPS and bandwidth higher
is better, latency and CPU cost lower): ``metric("clat_p99")``, the observers' costs
(``cost_metric``), and those compared by default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import UsageError
from ..fio.merge import job_ios, latency_figure
from ..model import DirectionStats, ResultRecord, pct_key
from ..observe import usage


@dataclass(frozen=True)
class Metric:
    """A figure compared between sides; ``unit`` is ``IOPS``, ``B/s``, ``ns``, ``µs`` or ``%``.

    ``of_result``, when set, takes the figure from the whole invocation rather than one direction
    (the observers' cost metrics, ``observe.usage``): every direction of a job shows the same value.
    ``of_ios`` is the same figure given the result's I/O count (``fio.merge.job_ios`` of its report)
    instead of reading it from ``result.report``, which may then be None (history's stored figures).
    ``rounded`` says of a direction whose value is fio's rounded display (``DirectionStats.iops_shown``).
    """

    name: str
    title: str
    unit: str
    higher_is_better: bool
    value: Callable[[DirectionStats], float | None] = field(compare=False, repr=False)
    of_result: Callable[[ResultRecord], float | None] | None = field(default=None, compare=False, repr=False)
    rounded: Callable[[DirectionStats], bool] | None = field(default=None, compare=False, repr=False)
    of_ios: Callable[[ResultRecord, int | None], float | None] | None = field(default=None, compare=False,
                                                                               repr=False)


def _latency_value(kind: str, stat: str) -> Callable[[DirectionStats], float | None]:
    return lambda d: latency_figure(d, kind, stat)


def metric(name: str) -> Metric:
    """The metric called ``name``: ``iops``, ``bw``, or ``{clat,lat,slat}_{mean,max,pNN}``
    (``clat_p99``, ``lat_p99.9``), or an observers' cost (``cost_metric``): ``cpu_us_per_io`` or
    ``cpu_util``, optionally ``@HOST``. Raises ``UsageError`` for any other name."""
    if name.partition("@")[0] in COST_METRICS:
        return cost_metric(name)
    if name == "iops":
        return Metric("iops", "IOPS", "IOPS", True, lambda d: d.iops_or_shown,
                      rounded=lambda d: d.iops is None and d.iops_shown is not None)
    if name == "bw":
        return Metric("bw", "bw MiB/s", "B/s", True, lambda d: d.bw_or_shown,
                      rounded=lambda d: d.bw_bytes_s is None and d.bw_bytes_s_shown is not None)
    kind, _, stat = name.partition("_")
    pct = stat[1:]
    valid_pct = stat.startswith("p") and pct.replace(".", "", 1).isdigit() and 0 < float(pct) <= 100
    if kind in ("clat", "lat", "slat") and (stat in ("mean", "max") or valid_pct):
        stat = f"p{pct_key(pct)}" if valid_pct else stat
        return Metric(f"{kind}_{stat}", f"{kind} {stat}", "ns", False, _latency_value(kind, stat))
    raise UsageError(f"unknown metric {name!r}", hint="metrics: iops, bw, {clat,lat,slat}_{mean,max,pNN} "
                     "such as clat_p99 or lat_p99.9, cpu_us_per_io[@HOST], cpu_util[@HOST]")

#: The observers' metrics (``observe.usage``): lower is better for both.
COST_METRICS = {"cpu_us_per_io": ("CPU µs/IO", "µs"), "cpu_util": ("CPU busy", "%")}


def cost_metric(name: str) -> Metric:
    """``cpu_us_per_io[@HOST]`` (busy CPU µs per I/O fio completed) or ``cpu_util[@HOST]`` (busy
    share of all CPUs, %), from the observers' figures stored with each result. Without
    ``@HOST`` every observed host counts (the whole run); ``HOST`` is ``local``, a fio server's
    label, a watched host's name, or a target's name (its fio servers, or the local host for a
    local target). Formulas: ``observe.usage``. Raises ``UsageError`` for an empty ``@``."""
    base, at, host = name.partition("@")
    if at and not host:
        raise UsageError(f"metric {name!r}: name a host after @ (local, a fio server, a watched host, a target)")
    title, unit = COST_METRICS[base]

    def of_ios(result: ResultRecord, ios: int | None) -> float | None:
        found = usage.select(result, host or None)
        if found is None:
            return None
        if base == "cpu_us_per_io":
            return usage.cpu_us_per_io(found, ios)
        utils = [usage.cpu_util(u) for u in found]
        return None if any(u is None for u in utils) else sum(u for u in utils if u is not None) / len(utils) * 100

    return Metric(name, f"{title}{' @' + host if host else ''}", unit, False, lambda d: None,
                  lambda result: of_ios(result, job_ios(result.report)), of_ios=of_ios)

#: Compared by default; a default metric neither side knows is left out.
DEFAULT_METRICS = ("iops", "bw", "clat_mean", "clat_p50", "clat_p99", "clat_p99.9", "lat_mean", "slat_mean")
