"""Whether a replay kept the recorded pace, and what held it back when it did not. Pure.

A replay (``workflows.capture.plan``) issues each captured request at its recorded time, one fio
reporting group per size class, every class's jobs running until the trace's end: kept to pace, a
class takes as long as the trace did (its active span, ``fingerprint.active_ns``; stretched by
``--time-scale``). The plan stores that with each replay result (``extra["replay"]``)::

    {"capture": 1, "recorded_ms": 757.0, "rate_pct": 100, "as_fast_as_possible": false,
     "classes": {"bs-4k": {"requests": 5141, "service_ms": 1371.2,       # Σ the traced service times
                           "lag_ms": {"1.5": 0.0, "2": 3.1, …, "100": 1180.0}}, …}}
                           # how late the class would end were the target that many times slower
                           # (``workflows.capture.replay.slowdown_lags``)

**Pace** per class (``ClassPace``): its replayed duration is fio's runtime of the class's group (the
longest of its directions: fio takes a group's runtime as its longest member's), set against the
recorded one. A class more than ``TOLERANCE`` (5 %) behind *fell behind*: fio issued its requests later
than recorded, so its IOPS and bandwidth are the replay's pace, not the trace's. A replay as fast as
possible (``replay_no_stall``) has no pace to keep.

**The limit** of a class that fell behind (``Limit``), from the figures stored with its result — the
observers' (``observe.usage``: ``extra["observed"]``), fio's CPU (its report: ``fio.merge.jobs_cpu_s``)
and iolab's (``extra["iolab_cpu_s"]``, ``run.job.own_cpu_s``). Rules 1 and 3 are the target's signs,
rule 2 the replayer's; both found name both (``target and replayer``: a starved replayer also reaps
its completions late, which fio counts as latency), else the one found, else rule 4:

1. **the target**, when the device was busy ``BUSY_LIMIT`` (90 %) of the replay or more
   (``node_disk_io_time_seconds_total``), or its queue was full: its mean requests in flight
   (``node_disk_io_time_weighted_seconds_total`` over the window) at ``QUEUE_LIMIT`` (90 %) of its
   ``nr_requests`` or more; fio's own disk statistics (``disk_util``) stand in when the observers
   give none and fio counted the device's I/Os;
2. **the replayer**, when the host's CPUs were ``CPU_LIMIT`` (90 %) busy or more (fio, iolab and
   whatever else ran: their shares are named), or iolab kept one CPU that busy (its threads share
   one interpreter lock): fio could not issue on time;
3. **the target** (its latency), when the target's slowdown explains at least half the lag: the
   requests took ``s`` times as long as traced (fio's mean latency over the traced mean service
   time), and a target that much slower makes the class end ``lag_ms(s)`` late (the plan's model of
   its lanes, interpolated between the slowdowns it modelled): a lane at iodepth 1 issues its next
   request only once the last completed, and fio never makes up the delay. A cap before the device's
   queue (a cgroup's blkio throttle) shows here and not as busy time;
4. else **the replayer**: fio's replay lag. fio sleeps until each logged time since its previous
   issue and never makes up a sleep's overshoot (``iolog.c``, ``iolog_delay``), so a lane's lateness
   grows with its requests while neither the target nor the CPU is at its limit; its jobs start one
   after another, and each status report (``--status-interval=1``, iolab's progress) stalls them
   (``workflows.capture.replay``). Measured with fio 3.33 on a 2.68 s SQLite trace of 4 classes and
   ~140 jobs: its smallest class ended on time without status reports and 35-85 ms late with them.

Without observed figures (``--no-observe``, a window too short to measure) the limit is ``unknown``
unless fio's disk statistics or the latency rule decide it.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..fio.merge import by_job, jobs_cpu_s, latency_figure
from ..model import DirectionStats, ResultRecord
from ..observe import usage

TOLERANCE = 0.05
BUSY_LIMIT = 0.90
QUEUE_LIMIT = 0.90
CPU_LIMIT = 0.90
#: The directions whose requests a replay times (fio's ``sync`` is a replayed flush).
TIMED = ("read", "write", "sync")
#: The share of a lag the target's slowdown must explain to be named its limit (rule 3).
EXPLAINED = 0.5


@dataclass(frozen=True)
class Limit:
    """What held a replay back: ``by`` is ``target``, ``replayer``, ``target and replayer`` or
    ``unknown``; ``why`` says so with the figures it was read from."""

    by: str
    why: str


@dataclass(frozen=True)
class Figures:
    """What the attribution reads of one replay result (None: not known). Shares are 0..1; CPU in
    seconds over the job; ``queue`` the device's mean requests in flight, ``queue_limit`` its
    ``nr_requests``."""

    device: str | None = None
    busy: float | None = None
    queue: float | None = None
    queue_limit: int | None = None
    host_cpu: float | None = None
    host_cpu_s: float | None = None
    cpu_count: int | None = None
    fio_cpu_s: float | None = None
    iolab_cpu_s: float | None = None
    window_s: float | None = None
    why_unobserved: str | None = None


@dataclass(frozen=True)
class ClassPace:
    """One size class of one replay result: ``recorded_ms`` what the trace took at the replay's time
    scale, ``replayed_ms`` fio's runtime of the class (None when fio ran none of it); ``slowdown``
    how many times as long its requests took on the target as on the traced device (fio's latency
    over the traced service time, None when either is unknown) and ``explained_ms`` the lag a target
    that much slower causes (the plan's model: rule 3); ``limit`` only for a class that fell behind."""

    result_id: int
    job: str
    recorded_ms: float
    replayed_ms: float | None
    slowdown: float | None = None
    explained_ms: float | None = None
    limit: Limit | None = None

    @property
    def ratio(self) -> float | None:
        return self.replayed_ms / self.recorded_ms if self.replayed_ms is not None and self.recorded_ms else None

    @property
    def behind_ms(self) -> float | None:
        return None if self.replayed_ms is None else self.replayed_ms - self.recorded_ms

    @property
    def behind(self) -> bool:
        """More than ``TOLERANCE`` behind the recorded pace."""
        return self.ratio is not None and self.ratio > 1 + TOLERANCE


def planned(result: ResultRecord) -> Mapping[str, Any] | None:
    """What the replay's plan stored with ``result`` (see the module docstring); None for a result
    that is no timed replay (not a replay, or one as fast as possible)."""
    found = (result.extra or {}).get("replay")
    if not isinstance(found, Mapping) or found.get("as_fast_as_possible") or not found.get("recorded_ms"):
        return None
    return found


def result_pace(result: ResultRecord) -> tuple[ClassPace, ...]:
    """Every class of a timed replay's result, in the report's order; empty for any other result
    (``planned``) and for one fio did not finish."""
    plan = planned(result)
    if plan is None or result.status != "ok" or result.report is None:
        return ()
    recorded = float(plan["recorded_ms"]) * 100 / max(1, int(plan.get("rate_pct") or 100))
    jobs: dict[str, dict[str, DirectionStats]] = {}
    for (job, direction), d in by_job(result.report).items():
        jobs.setdefault(job, {})[direction] = d
    figures = result_figures(result)
    out = []
    for job, directions in jobs.items():
        runtimes = [d.runtime_ms for d in directions.values() if d.runtime_ms]
        replayed = float(max(runtimes)) if runtimes else None
        traced = (plan.get("classes") or {}).get(job) or {}
        slowdown = _slowdown(directions, traced.get("service_ms"))
        explained = _explained(traced.get("lag_ms"), slowdown)
        found = ClassPace(result.id, job, recorded, replayed, slowdown, explained)
        if found.behind:
            found = replace(found, limit=attribute(found, figures))
        out.append(found)
    return tuple(out)


def _slowdown(directions: Mapping[str, DirectionStats], traced_ms: float | None) -> float | None:
    """Σ over the class's timed requests of fio's latency (``lat``: issue to completion; a sync's
    call) over the traced device's service times (``traced_ms``, their sum)."""
    if not traced_ms:
        return None
    total = 0.0
    for name in TIMED:
        d = directions.get(name)
        if d is None or not d.total_ios:
            continue
        mean = latency_figure(d, "lat", "mean") or latency_figure(d, "clat", "mean")
        if mean is None:
            return None
        total += d.total_ios * mean / 1e6
    return total / float(traced_ms)


def _explained(lags: Mapping[str, float] | None, slowdown: float | None) -> float | None:
    """The modelled lag (ms) at ``slowdown``: linear in the slowdown between the modelled ones (and
    beyond the largest, along its last segment), none at 1 or below; None without a model."""
    if not lags or slowdown is None:
        return None
    points = sorted((float(f), float(v)) for f, v in lags.items())
    xs, ys = [1.0, *(f for f, _ in points)], [0.0, *(v for _, v in points)]
    if slowdown <= 1.0:
        return 0.0
    i = min(max(1, bisect.bisect_right(xs, slowdown)), len(xs) - 1)
    return ys[i - 1] + (ys[i] - ys[i - 1]) * (slowdown - xs[i - 1]) / (xs[i] - xs[i - 1])


def result_figures(result: ResultRecord) -> Figures:
    """The figures ``attribute`` reads of ``result`` (see the module docstring)."""
    base = Figures(fio_cpu_s=jobs_cpu_s(result.report), iolab_cpu_s=(result.extra or {}).get("iolab_cpu_s"))
    device = result.target_facts.device if result.target_facts else None
    names = [n for n in (device.name, device.parent) if n] if device else []
    local = [u for u in usage.usages(result) if u.role == "local"]
    host = local[0] if local else None
    if host is None or not host.window_s:
        why = host.error if host is not None and host.error else "not observed"
        return _fio_disk(result, replace(base, why_unobserved=why), names)
    window = host.window_s
    disk = next((host.disks[n] for n in names if n in host.disks), None)
    return _fio_disk(result, Figures(
        device=names[0] if names else None, busy=min(disk.busy_s / window, 1.0) if disk else None,
        queue=disk.weighted_s / window if disk is not None and disk.weighted_s is not None else None,
        queue_limit=device.nr_requests if device else None, host_cpu=usage.cpu_util(host),
        host_cpu_s=usage.busy_seconds(host), cpu_count=host.cpu_count, fio_cpu_s=base.fio_cpu_s,
        iolab_cpu_s=base.iolab_cpu_s, window_s=window), names)


def _fio_disk(result: ResultRecord, figures: Figures, names: Sequence[str]) -> Figures:
    """``figures`` with fio's disk statistics of the device where the observers gave none and fio
    counted its I/Os (inside iolab's fence fio may read none: then all zero)."""
    if figures.busy is not None or result.report is None:
        return figures
    disk = next((d for d in result.report.disk_util if d.name in names and (d.read_ios or d.write_ios)), None)
    if disk is None or disk.util_pct is None:
        return figures
    runtime = max((d.runtime_ms or 0 for _, d in by_job(result.report).items()), default=0)
    queue = disk.in_queue_ms / runtime if disk.in_queue_ms is not None and runtime else figures.queue
    return replace(figures, device=disk.name, busy=disk.util_pct / 100, queue=queue)


def attribute(pace: ClassPace, f: Figures) -> Limit:
    """The limit of a class that fell behind (the module docstring's rules): the target's signs (busy,
    queue full, its slowdown explaining the lag) and the replayer's (CPU) together name one, or both;
    with neither, fio's replay lag, or ``unknown`` without figures to tell."""
    target = [*_target_signs(f), *_latency_sign(pace)]
    replayer = _replayer_signs(f)
    if target and replayer:
        return Limit("target and replayer", "; ".join((*target, *replayer)))
    if target:
        return Limit("target", "; ".join(target))
    if replayer:
        return Limit("replayer", "; ".join(replayer))
    if f.busy is None and f.host_cpu is None:
        why = f.why_unobserved or "not observed"
        hint = " (replay again without --no-observe)" if why == "not observed" else ""
        return Limit("unknown", f"{why}: no device or CPU figures to tell the target from the replayer{hint}")
    seen = ", ".join(x for x in (_busy_text(f), _cpu_text(f) + _shares(f)) if x)
    return Limit("replayer", f"fio's replay lag: fio issued late while neither was at its limit ({seen}): its jobs' "
                             "start, its status reports (iolab's progress), sleeps it does not make up")


def _latency_sign(pace: ClassPace) -> list[str]:
    """Rule 3: the target's slowdown explains at least ``EXPLAINED`` of the lag (the plan's model)."""
    lag = pace.behind_ms or 0.0
    if pace.explained_ms is None or pace.slowdown is None or pace.explained_ms < EXPLAINED * lag:
        return []
    return [f"its requests took ×{pace.slowdown:.1f} their traced service time, which alone would make the class "
            f"about {pace.explained_ms:,.0f} ms late (it was {lag:,.0f} ms): each lane waits for its last request"]


def _target_signs(f: Figures) -> list[str]:
    out = []
    if f.busy is not None and f.busy >= BUSY_LIMIT:
        out.append(f"the target {f.device} was busy {f.busy:.0%} of the replay")
    if f.queue is not None and f.queue_limit and f.queue >= QUEUE_LIMIT * f.queue_limit:
        out.append(f"its queue was full: {f.queue:,.1f} requests in flight on average of nr_requests={f.queue_limit}")
    return out


def _replayer_signs(f: Figures) -> list[str]:
    out = []
    if f.host_cpu is not None and f.host_cpu >= CPU_LIMIT:
        own = (f.fio_cpu_s or 0.0) + (f.iolab_cpu_s or 0.0)
        others = f.host_cpu_s is not None and f.fio_cpu_s is not None and f.host_cpu_s - own > own
        # the replayer is still what fell behind (it waited for a CPU), but not by its own jobs' cost
        by = ", most of it neither fio's jobs nor iolab (other processes, or fio's main thread)" if others else ""
        out.append(f"the host's CPUs were {f.host_cpu:.0%} busy{_shares(f)}{by}")
    if f.iolab_cpu_s is not None and f.window_s and f.iolab_cpu_s >= CPU_LIMIT * f.window_s:
        out.append(f"iolab kept a CPU {f.iolab_cpu_s / f.window_s:.0%} busy")
    return out


def _shares(f: Figures) -> str:
    """`` (fio 0.40, iolab 1.10, the rest 16.90 of 18.4 CPU-s)``: whose CPU time it was, when known
    (the rest: every other process on the host, and fio's main thread, which no job's figure holds)."""
    if f.host_cpu_s is None or (f.fio_cpu_s is None and f.iolab_cpu_s is None):
        return ""
    parts = [f"{name} {value:,.2f}" for name, value in (("fio", f.fio_cpu_s), ("iolab", f.iolab_cpu_s))
             if value is not None]
    if f.fio_cpu_s is not None and f.iolab_cpu_s is not None:
        parts.append(f"the rest {max(0.0, f.host_cpu_s - f.fio_cpu_s - f.iolab_cpu_s):,.2f}")
    return f" ({', '.join(parts)} of {f.host_cpu_s:,.1f} CPU-s)"


def _busy_text(f: Figures) -> str:
    return f"the target {f.device} busy {f.busy:.0%}" if f.busy is not None else ""


def _cpu_text(f: Figures) -> str:
    return f"the host's CPUs {f.host_cpu:.0%} busy" if f.host_cpu is not None else "the host's CPUs not observed"


def slot_pace(results: Sequence[ResultRecord], job: str) -> ClassPace | None:
    """The class ``job`` of the repetitions ``results`` (a comparison's slot) that fell furthest
    behind, when one did; None when every one kept pace or none is a timed replay."""
    behind = [p for r in results for p in result_pace(r) if p.job == job and p.behind]
    return max(behind, key=lambda p: p.ratio or 0.0) if behind else None

