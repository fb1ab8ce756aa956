"""Auto-tuning: the host and fio settings with the most IOPS under a latency SLO, within a time budget.

The axes are the settings iolab already applies and restores (``tuning``: ``scheduler``,
``rq_affinity``, ``nomerges``, ``read_ahead_kb``), CPU pinning (``pin: mq``, fio on the CPUs of the
device's blk-mq queues) and two fio options (``ioengine``; ``numjobs`` at the same number of
outstanding I/Os). A configuration names the values it changes; what it does not name stays as the
host and the workload have it.

**The search** (``Descent``) is coordinate descent: from the configuration as it is, each axis in turn
tries its other values with the rest at the best so far, and keeps the best (the most IOPS among the
configurations that meet the SLO; without an SLO, the most IOPS). One pass of short probes costs
``1 + sum(len(values))`` runs where the full grid costs their product; interactions between axes are
what it can miss, which the benchmark (benchmarks/saturation.py) measures against the grid. Then the
best few are repeated at full length, interleaved so that drift spreads over all, and ranked with
95 % intervals (``rank``). Pure: the workflow that runs the probes is ``workflow.autotune``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .. import stats
from ..analyze.saturation import Point, Slo, feasible
from ..model import BlockDeviceFacts
from ..run import tuning

#: Axes in the order the descent tries them: what changes IOPS most first.
ORDER = ("ioengine", "numjobs", "scheduler", "nomerges", "rq_affinity", "pin", "read_ahead_kb")
HOST = ("scheduler", "nomerges", "rq_affinity", "read_ahead_kb")
ENGINES = ("libaio", "io_uring")

Config = tuple[tuple[str, str], ...]
"""A configuration: the (axis, value) pairs it changes, in ``ORDER``; ``()`` is everything as it is."""


@dataclass(frozen=True)
class Axis:
    """A setting to try and the values other than the one in force."""

    name: str
    values: tuple[str, ...]


def with_value(config: Config, axis: str, value: str) -> Config:
    """``config`` with ``axis`` set to ``value``, in ``ORDER``."""
    changed = dict(config) | {axis: value}
    return tuple((k, changed[k]) for k in ORDER if k in changed)


def axes(wanted: Sequence[str], in_force: Mapping[str, str], base: Mapping[str, str], cpus: int,
         device: BlockDeviceFacts | None, sysfs: str = tuning.SYSFS) -> list[Axis]:
    """The axes to try, each with its values other than the one in force: host settings of a block
    device (the scheduler's from the kernel's list; ``read_ahead_kb`` only for buffered or sequential
    I/O, where it acts), ``pin`` (mq), ``ioengine`` (libaio, io_uring) and ``numjobs`` (powers of two
    up to ``cpus``). Unknown names raise ``ValueError``."""
    unknown = [name for name in wanted if name not in ORDER]
    if unknown:
        raise ValueError(f"unknown axis {', '.join(unknown)}; axes: {', '.join(ORDER)}")
    sequential = base.get("rw", "read") in ("read", "write", "rw", "readwrite")
    buffered = base.get("direct", "0") in ("0", "false")
    choices: dict[str, tuple[str, ...]] = {
        "ioengine": ENGINES, "numjobs": tuple(str(1 << i) for i in range(int(math.log2(max(cpus, 1))) + 1)),
        "pin": ("mq",), "nomerges": ("0", "2"), "rq_affinity": ("1", "2"),
        "read_ahead_kb": ("128", "4096") if sequential or buffered else (),
        "scheduler": tuning.scheduler_choices(device, sysfs) if device is not None else (),
    }
    current = {**in_force, "ioengine": base.get("ioengine", "psync"), "numjobs": base.get("numjobs", "1"),
               "pin": "none"}
    out = []
    for name in ORDER:
        if name in wanted and (name not in HOST or device is not None):
            values = tuple(v for v in choices[name] if v != current.get(name))
            if values:
                out.append(Axis(name, values))
    return out


@dataclass(frozen=True)
class Measured:
    """A configuration's probe: its point (IOPS, latencies)."""

    config: Config
    point: Point


def _better(a: Measured, b: Measured, slo: Slo | None) -> bool:
    return (feasible(a.point, slo), a.point.iops) > (feasible(b.point, slo), b.point.iops)


@dataclass(frozen=True)
class Descent:
    """Coordinate descent over ``axes`` as a pure function of what was measured (module docstring)."""

    axes: tuple[Axis, ...]
    slo: Slo | None = None

    def next(self, measured: Sequence[Measured]) -> Config | None:
        """The next configuration to probe, or None when the pass is done."""
        seen = {m.config: m for m in measured}
        if () not in seen:
            return ()
        current = seen[()]
        for axis in self.axes:
            tried = [with_value(current.config, axis.name, v) for v in axis.values]
            for config in tried:
                if config not in seen:
                    return config
            for config in tried:
                if _better(seen[config], current, self.slo):
                    current = seen[config]
        return None

    def best(self, measured: Sequence[Measured], count: int = 1) -> list[Config]:
        """The ``count`` best configurations probed (feasible first, then by IOPS)."""
        ranked = sorted(measured, key=lambda m: (feasible(m.point, self.slo), m.point.iops), reverse=True)
        return list(dict.fromkeys(m.config for m in ranked))[:count]


@dataclass(frozen=True)
class Ranked:
    """A configuration over its full-length repetitions: IOPS (mean, 95 % interval on log IOPS),
    the SLO metric's mean (ns), and whether that mean meets the SLO."""

    config: Config
    iops: stats.Summary
    interval: tuple[float, float] | None
    slo_ns: float | None
    feasible: bool


def rank(repetitions: Mapping[Config, Sequence[Point]], slo: Slo | None) -> list[Ranked]:
    """The configurations by their repetitions: feasible first, then by mean IOPS."""
    out = []
    for config, points in repetitions.items():
        iops = stats.describe([p.iops for p in points])
        logs = stats.describe([math.log(p.iops) for p in points if p.iops > 0])
        interval = (math.exp(logs.ci95[0]), math.exp(logs.ci95[1])) if logs.ci95 else None
        slo_ns = stats.describe([p.slo_ns for p in points]).mean
        ok = slo is None or slo.met_by(slo_ns)
        out.append(Ranked(config, iops, interval, slo_ns, ok))
    return sorted(out, key=lambda r: (r.feasible, r.iops.mean or 0.0), reverse=True)


def describe(config: Config) -> str:
    """``ioengine=io_uring, scheduler=none`` or ``as it is``."""
    return ", ".join(f"{k}={v}" for k, v in config) or "as it is"
