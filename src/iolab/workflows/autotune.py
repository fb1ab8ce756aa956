"""Auto-tuning: the host and fio settings with the most IOPS under a latency SLO, within a time budget.

The axes are the settings iolab already applies and restores (``run.tuning``: ``scheduler``,
``rq_affinity``, ``nomerges``, ``read_ahead_kb``; ``cpu_dma_latency`` 0, a CPU latency request held
for the probe, where this machine's idle CPUs may enter states with exit latencies and iolab may
hold one), CPU pinning (``pin: mq``, fio on the CPUs of the device's blk-mq queues) and two fio
options (``ioengine``; ``numjobs`` at the same number of outstanding I/Os). A configuration names the
values it changes; what it does not name stays as the host and the workload have it.

**The search** (``Descent``) is coordinate descent: from the configuration as it is, each axis in turn
tries its other values with the rest at the best so far, and keeps the best (the most IOPS among the
configurations that meet the SLO; without an SLO, the most IOPS). One pass of short probes costs
``1 + sum(len(values))`` runs where the full grid costs their product; interactions between axes are
what it can miss, which the benchmark (benchmarks/saturation.py) measures against the grid. Then the
best few and the configuration as it is are repeated at full length, interleaved so that drift spreads
over all, and ranked with 95 % intervals (``rank``); the best is judged against as it is
(``against_as_is``): when their intervals overlap, it is not distinguishable from leaving the host
alone. ``autotune_run`` runs it with real fio, through a ``workflows.prober.Prober``; the rest is pure.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import yaml

from .. import stats, units
from ..analyze.saturation import Point, Search, Slo, feasible, point_of
from ..describe.spec import Target
from ..describe.tune import label as tuning_label
from ..facts import idle
from ..model import BlockDeviceFacts
from ..run import tuning
from .prober import Prober
from .saturate import Saturation, probe_name, saturate

#: Axes in the order the descent tries them: what changes IOPS most first.
ORDER = ("ioengine", "numjobs", "cpu_dma_latency", "scheduler", "nomerges", "rq_affinity", "pin", "read_ahead_kb")
#: Host settings of the target's block device (tried only on a block device).
HOST = ("scheduler", "nomerges", "rq_affinity", "read_ahead_kb")
#: Every axis that is a ``run.tuning`` setting.
TUNED = (*HOST, "cpu_dma_latency")
#: Axes that set this machine (its block queues, its CPUs): not tried on a target on remote hosts.
HERE = (*TUNED, "pin")
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
         device: BlockDeviceFacts | None, sysfs: str = tuning.SYSFS, pm_qos: str | None = None) -> list[Axis]:
    """The axes to try, each with its values other than the one in force: host settings of a block
    device (the scheduler's from the kernel's list; ``read_ahead_kb`` only for buffered or sequential
    I/O, where it acts), ``cpu_dma_latency`` (0, when this machine's idle CPUs may enter a state with
    an exit latency, ``facts.idle``, and ``pm_qos`` is writable: ``latency_axis``), ``pin`` (mq),
    ``ioengine`` (libaio, io_uring) and ``numjobs`` (powers of two up to ``cpus``). Unknown names
    raise ``ValueError``."""
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
        "cpu_dma_latency": ("0",) if latency_axis(in_force, os.path.dirname(sysfs.rstrip("/")) or "/", pm_qos) else (),
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


def latency_axis(in_force: Mapping[str, str], root: str = "/", pm_qos: str | None = None) -> bool:
    """Whether holding the CPU latency limit at 0 can change anything here: an idle CPU may enter a state
    with an exit latency under the limit in force (``in_force["cpu_dma_latency"]``), and iolab may hold
    a request (``pm_qos``, default ``tuning.PM_QOS``, is writable)."""
    limit = in_force.get("cpu_dma_latency")
    return bool(idle.exits(idle.states(root), int(limit) if limit is not None else None)) and \
        os.access(pm_qos or tuning.PM_QOS, os.W_OK)


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


@dataclass(frozen=True)
class AgainstAsIs:
    """The best configuration against the configuration as it is, both ranked over their repetitions:
    ``distinguishable`` when their IOPS intervals do not overlap (or one meets the SLO and the other does
    not); otherwise ``rounds`` is how many repetitions each would need for intervals as wide as these
    to separate, if the difference holds (None: not within ``MAX_ROUNDS``, or no difference at all)."""

    best: Ranked
    as_is: Ranked
    distinguishable: bool
    rounds: int | None = None


#: The most repetitions ``AgainstAsIs.rounds`` offers.
MAX_ROUNDS = 100


def against_as_is(ranking: Sequence[Ranked]) -> AgainstAsIs | None:
    """The best of ``ranking`` judged against the configuration as it is (``()``); None when the best
    is as it is, or as it is was not ranked. The rounds needed come from each interval's own spread
    (the log-scale sample deviation its t interval implies) and Student's t at the new count."""
    as_is = next((r for r in ranking if not r.config), None)
    if not ranking or as_is is None or ranking[0] is as_is:
        return None
    best = ranking[0]
    if best.feasible != as_is.feasible:
        return AgainstAsIs(best, as_is, True)
    if best.interval is None or as_is.interval is None:
        return AgainstAsIs(best, as_is, False)
    if best.interval[0] > as_is.interval[1] or as_is.interval[0] > best.interval[1]:
        return AgainstAsIs(best, as_is, True)
    spreads = [_log_sd(r) for r in (best, as_is)]
    gap = abs(math.log(best.interval[0] * best.interval[1]) - math.log(as_is.interval[0] * as_is.interval[1])) / 2
    rounds = next((n for n in range(max(best.iops.n, as_is.iops.n) + 1, MAX_ROUNDS + 1)
                   if stats.t_quantile(0.975, n - 1) * sum(spreads) / math.sqrt(n) < gap), None) if gap else None
    return AgainstAsIs(best, as_is, False, rounds)


def _log_sd(r: Ranked) -> float:
    """The sample deviation of log IOPS that ``r``'s 95 % interval (a t interval of n values) implies."""
    assert r.interval is not None
    half = (math.log(r.interval[1]) - math.log(r.interval[0])) / 2
    return half * math.sqrt(r.iops.n) / stats.t_quantile(0.975, r.iops.n - 1)


def describe(config: Config) -> str:
    """``ioengine=io_uring, scheduler=none`` or ``as it is``."""
    return ", ".join(f"{k}={v}" for k, v in config) or "as it is"


@dataclass(frozen=True)
class Tuned:
    """What ``autotune`` found: the operating point's search, every configuration probed (in order),
    the best few and as it is ranked over their full-length repetitions, and whether the budget cut the
    descent."""

    operating: Saturation
    measured: tuple[Measured, ...]
    ranking: tuple[Ranked, ...]
    cut_by_budget: bool

    def record(self, slo: Slo | None, settings: Mapping[str, Any]) -> dict[str, Any]:
        """What the run stores under ``options["autotune"]``."""
        def config(c: Config) -> dict[str, str]:
            return dict(c)

        point = self.operating.chosen
        judged = against_as_is(self.ranking)
        return {"autotune": {
            "slo": None if slo is None else {"metric": slo.metric.name, "limit_ns": slo.limit_ns, "text": str(slo)},
            "settings": dict(settings), "cut_by_budget": self.cut_by_budget,
            "operating_point": None if point is None else {"iodepth": point.iodepth, "numjobs": point.numjobs},
            "probes": [{"config": config(m.config), "iops": m.point.iops, "slo_ns": m.point.slo_ns}
                       for m in self.measured],
            "ranking": [{"config": config(r.config), "iops": r.iops.mean, "ci95": r.interval, "n": r.iops.n,
                         "slo_ns": r.slo_ns, "feasible": r.feasible} for r in self.ranking],
            "against_as_is": None if judged is None else {"distinguishable": judged.distinguishable,
                                                          "rounds": judged.rounds}}}


def configured(base: Mapping[str, str], config: Config, point: Point
               ) -> tuple[dict[str, str], dict[str, str], str | None]:
    """A configuration as fio options, host tuning and pin mode, at ``point``'s outstanding I/Os
    (a numjobs axis value divides them among more jobs)."""
    values = dict(config)
    numjobs = int(values.get("numjobs", point.numjobs))
    options = {**base, "iodepth": str(max(1, point.concurrency // numjobs)), "numjobs": str(numjobs)}
    if "ioengine" in values:
        options["ioengine"] = values["ioengine"]
    return options, {k: values[k] for k in TUNED if k in values}, values.get("pin")


def config_name(base: Mapping[str, str], config: Config, options: Mapping[str, str]) -> str:
    """``randread-4k-qd16-j2-io_uring-sched_none``: the probe's workload name."""
    parts = [probe_name(base, int(options["iodepth"]), int(options["numjobs"]))]
    for key, value in config:
        if key in TUNED:
            parts.append(tuning_label(key, value))
        elif key == "pin":
            parts.append(f"pin_{value}")
        elif key == "ioengine":
            parts.append(value)
    return "-".join(parts)


def autotune_run(prober: Prober, base: Mapping[str, str], search: Search, axes: Sequence[Axis],
                 budget_s: float, probe_runtime: str, runtime: str, repeat: int, top: int = 3,
                 clock: Callable[[], float] = time.monotonic) -> Tuned:
    """Auto-tuning with real fio runs (``autotune``): the operating point by the saturation search
    (probes only), the coordinate descent of configurations at that point while the budget lasts
    (a probe's measured duration and the repetitions still to come are its estimate), then the best
    ``top`` configurations and as it is ``repeat`` times each at ``runtime``, in rounds."""
    start = clock()
    operating = saturate(prober, base, search, probe_runtime, runtime, repeat=0)
    point = operating.chosen
    if point is None:
        return Tuned(operating, (), (), False)
    at_point = [replace(a, values=tuple(v for v in a.values if (a.name, v) != ("numjobs", str(point.numjobs))))
                for a in axes]  # the point's own numjobs is "as it is"
    descent = Descent(tuple(a for a in at_point if a.values), search.slo)
    measured: list[Measured] = []
    spent: list[float] = []
    extra_s = (units.parse_duration_us(runtime) - units.parse_duration_us(probe_runtime)) / 1e6
    cut = False
    while (config := descent.next(measured)) is not None:
        probe_s = statistics.median(spent) if spent else 0.0
        if clock() - start + probe_s + (top + 1) * repeat * (probe_s + extra_s) > budget_s:
            cut = True
            break
        options, host, pin = configured(base, config, point)
        began = clock()
        (result,) = prober.run(config_name(base, config, options), {**options, "runtime": probe_runtime},
                               tune=host, pin=pin)
        spent.append(clock() - began)
        found = point_of(result, int(options["iodepth"]), int(options["numjobs"]), search.slo)
        measured.append(Measured(config, found or Point(point.iodepth, point.numjobs, 0.0)))
    finalists = descent.best(measured, top)
    if finalists and () not in finalists:
        finalists.append(())  # the best is judged against the host as it is
    points: dict[Config, list[Point]] = {c: [] for c in finalists}
    for round_ in range(repeat):  # rounds: every finalist once, then again, so drift spreads over all
        for config in finalists:
            options, host, pin = configured(base, config, point)
            (result,) = prober.run(config_name(base, config, options) + "-final", {**options, "runtime": runtime},
                                   tune=host, pin=pin, first_repeat=round_)
            found = point_of(result, int(options["iodepth"]), int(options["numjobs"]), search.slo)
            if found is not None:
                points[config].append(found)
    return Tuned(operating, tuple(measured), tuple(rank(points, search.slo)), cut)


def best_suite(target: Target, base: Mapping[str, str], config: Config, point: Point, runtime: str,
               comment: str) -> str:
    """The configuration as a suite file to run again (``iolab run FILE``), headed by ``comment``."""
    options, host, pin = configured(base, config, point)
    workload = {k: options[k] for k in ("rw", "bs", "iodepth", "numjobs") if k in options}
    defaults = {k: v for k, v in options.items() if k not in workload} | {"runtime": runtime}
    where: dict[str, Any] = {"path": target.path, "size": target.size} if target.size else {"path": target.path}
    if target.hosts:
        where["hosts"] = [str(h) for h in target.hosts]
        where |= {"ssh": True} if target.ssh and any(h.kind != "ssh" for h in target.hosts) else {}
    doc: dict[str, Any] = {"name": "autotuned", "targets": {target.name: where if len(where) > 1 else target.path}}
    if host:
        doc["tune"] = host
    if pin:
        doc["pin"] = pin
    doc |= {"defaults": defaults, "workloads": [workload]}
    return "".join(f"# {line}\n" for line in comment.splitlines()) + yaml.safe_dump(doc, sort_keys=False)
