"""What each host did during a job, and what it cost per I/O: pure functions over stored results.

``host_usage`` turns one host's samples into counter increases over the job's measured phase
(``model.HostUsage``, stored with the result in ``extra["observed"]``); the figures below are
computed from those and the job's fio report whenever they are shown or compared.

Formulas (node_exporter metric names; seconds and bytes as node_exporter reports them):

* A counter at the window's start: linear interpolation between the scrapes just before and just
  after it (during ``ramp_time`` the job runs as in the window), unless a scrape lies at most
  ``NEAR_START_MS`` before it (a job without ramp: the observers' first scrape, just before fio
  started, sees the counters as the job found them). At the window's end the job's I/O stops, so
  the first scrape at most ``NEAR_END_MS`` after it is taken (the observers scrape once more when
  fio exits), else interpolation. Scrapes are about 1 s apart; a gap in between does not matter,
  the counter bridges it.
* **busy CPU seconds** = Σ over CPUs and modes of ``node_cpu_seconds_total`` increases, less the
  ``idle``, ``iowait`` and ``steal`` modes (iowait is idle time with I/O outstanding; steal is time
  the hypervisor gave to others) — i.e. user + nice + system + irq + softirq.
* **CPU utilisation** = busy CPU seconds / (window seconds × CPUs).
* A window shorter than the sampling interval (a crash-test cut of a few ms) is **not measured**: its
  edges would stand on scrapes a second apart, and a 4 ms job would show 850 % CPU. Shares are at
  most 100 %: above, the edge scrapes a window longer than one interval stands on count a little of
  what came just before and after it.
* **CPU µs per I/O** = busy CPU seconds × 10⁶ / I/Os fio completed in the measured phase (Σ of
  ``total_ios`` of the read, write and trim directions of every fio job, all hosts of a remote
  target). Per host with that host's CPU; for the whole run with the CPU of every observed host.
  /proc/stat counts in USER_HZ ticks (10 ms): a short job on an idle host has a coarse figure.
* **NIC use** = max(receive, transmit) bytes / window seconds / ``node_network_speed_bytes``
  (links are full duplex); ``NIC_FLAG`` (90 %) and above is flagged.
* **device I/Os per fio I/O** = (reads + writes + discards completed by the device,
  ``node_disk_*_completed_total``) / fio's I/Os: 1.0 for a plain device under a direct-I/O job,
  below 1 for I/Os merged or served by a cache, above for read-ahead, RAID or journal writes.
  Device **busy** = ``node_disk_io_time_seconds_total`` increase / window seconds; its **mean queue**
  (requests in flight) = ``node_disk_io_time_weighted_seconds_total`` increase / window seconds
  (``Documentation/admin-guide/iostats.rst``, field 11: each I/O's time counted once per I/O in flight).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..fio.merge import job_ios
from ..model import DiskUsage, HostFacts, HostSamples, HostUsage, NicUsage, ResultRecord, from_jsonable

if TYPE_CHECKING:  # the exporter (prometheus_client's parser) is not needed to read stored figures
    from .exporter import NodeFacts

#: Modes that are not work done by the host (see the module docstring).
NOT_BUSY = ("idle", "iowait", "steal")
#: CPU modes shown by name, in node_exporter's spelling.
MODES = ("user", "nice", "system", "irq", "softirq", "iowait", "steal", "idle")
#: A link at or above this share of its speed is flagged.
NIC_FLAG = 0.9
#: How far outside the measured window a scrape may lie to stand for its edge (see the docstring).
NEAR_START_MS = 250
NEAR_END_MS = 500


def value_at(t_ms: Sequence[int], values: Sequence[float | None], at: float) -> float | None:
    """A counter's value at ``at`` ms, interpolated between the known samples around it; None
    when no known sample lies at or before ``at``, or none at or after it."""
    known = [(t, v) for t, v in zip(t_ms, values, strict=True) if v is not None]
    times = [t for t, _ in known]
    i = bisect.bisect_left(times, at)
    if i < len(known) and times[i] == at:
        return known[i][1]
    if i == 0 or i == len(known):
        return None
    (t0, v0), (t1, v1) = known[i - 1], known[i]
    return v0 + (v1 - v0) * (at - t0) / (t1 - t0)


def value_at_edge(t_ms: Sequence[int], values: Sequence[float | None], at: float, end: bool) -> float | None:
    """A counter at the window's start (``end`` False) or end: a known sample just outside the
    window when there is one near enough, else ``value_at`` (see the module docstring)."""
    known = [(t, v) for t, v in zip(t_ms, values, strict=True) if v is not None]
    if end:
        near = [v for t, v in known if at <= t <= at + NEAR_END_MS]
        return near[0] if near else value_at(t_ms, values, at)
    near = [v for t, v in known if at - NEAR_START_MS <= t <= at]
    return near[-1] if near else value_at(t_ms, values, at)


def _last(values: Sequence[float | None]) -> float | None:
    return next((v for v in reversed(values) if v is not None), None)


def host_usage(samples: HostSamples, facts: NodeFacts | None = None, error: str | None = None) -> HostUsage:
    """Counter increases of one host over the measured window (see the module docstring).

    ``window_s`` and the figures are absent when the window is unknown or the samples do not
    reach both of its ends. ``facts`` (the host's facts from its exporter) and ``error`` (why it
    never answered) are carried along.
    """
    base = HostUsage(host=samples.host, role=samples.role, source=samples.source, window_s=None,
                     cpu_count=samples.cpu_count, gaps=samples.gaps, error=error,
                     facts=facts.host if facts else None, devices=facts.devices if facts else ())
    if samples.window_ms is None:
        return base
    start, end = samples.window_ms
    interval = _interval_ms(samples.t_ms)
    if end - start < interval:
        shown = f"{end - start:.0f} ms" if end - start < 1000 else f"{(end - start) / 1000:.1f} s"
        return replace(base, error=f"not measured (window {shown} < {interval / 1000:g} s sampling)")
    deltas: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    gauges: dict[tuple[str, tuple[tuple[str, str], ...]], float | None] = {}
    for s in samples.series:
        key = (s.metric, tuple(sorted(s.labels.items())))
        if s.metric == "node_network_speed_bytes":
            gauges[key] = _last(s.values)
            continue
        a = value_at_edge(samples.t_ms, s.values, start, end=False)
        b = value_at_edge(samples.t_ms, s.values, end, end=True)
        if a is not None and b is not None:
            deltas[key] = b - a
    cpu = {dict(labels)["mode"]: v for (name, labels), v in deltas.items() if name == "node_cpu_seconds_total"}
    if not cpu:
        return base
    return replace(base, window_s=(end - start) / 1000, cpu_seconds=cpu, nics=_nics(deltas, gauges),
                   disks=_disks(deltas), bcache=_bcache(deltas))


def _interval_ms(t_ms: Sequence[int]) -> float:
    """The sampling interval: the sampler's (``sampler.INTERVAL_S``), or the median spacing of the
    scrapes when clearly longer (a Prometheus server's scrape interval); the extra scrapes when a job
    starts and ends make a short job's spacing shorter than the schedule, a loaded host's a little longer."""
    from .sampler import INTERVAL_S  # imported here: the sampler pulls in the ssh transport

    steps = sorted(b - a for a, b in itertools.pairwise(t_ms))
    median = float(steps[len(steps) // 2]) if steps else 0.0
    return median if median > 1.5 * INTERVAL_S * 1000 else INTERVAL_S * 1000


Counters = Mapping[tuple[str, tuple[tuple[str, str], ...]], float]


def _per_device(deltas: Counters, prefix: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for (name, labels), v in deltas.items():
        device = dict(labels).get("device")
        if name.startswith(prefix) and device is not None:
            out.setdefault(device, {})[name.removeprefix(prefix)] = v
    return out


def _nics(deltas: Counters,
          gauges: Mapping[tuple[str, tuple[tuple[str, str], ...]], float | None]) -> dict[str, NicUsage]:
    speeds = {dict(labels).get("device"): v for (_, labels), v in gauges.items()}
    out = {}
    for device, c in sorted(_per_device(deltas, "node_network_").items()):
        speed = speeds.get(device)
        out[device] = NicUsage(c.get("receive_bytes_total", 0.0), c.get("transmit_bytes_total", 0.0),
                               speed if speed is not None and speed > 0 else None)
    return out


def _disks(deltas: Counters) -> dict[str, DiskUsage]:
    out = {}
    for device, c in sorted(_per_device(deltas, "node_disk_").items()):
        out[device] = DiskUsage(reads=c.get("reads_completed_total", 0.0),
                                writes=c.get("writes_completed_total", 0.0),
                                read_bytes=c.get("read_bytes_total", 0.0),
                                write_bytes=c.get("written_bytes_total", 0.0),
                                busy_s=c.get("io_time_seconds_total", 0.0),
                                weighted_s=c.get("io_time_weighted_seconds_total"),
                                discards=c.get("discards_completed_total", 0.0))
    return out


def _bcache(deltas: Counters) -> dict[str, float]:
    """Increases of bcache's counters (``node_bcache_*_total``), keyed ``metric{label=value,…}``."""
    return {f"{name}{{{','.join(f'{k}={v}' for k, v in labels)}}}": v for (name, labels), v in deltas.items()
            if name.startswith("node_bcache_") and name.endswith("_total")}


# --- figures ------------------------------------------------------------------------------------


def busy_seconds(u: HostUsage) -> float | None:
    """CPU seconds the host worked during the window, all CPUs (see the module docstring)."""
    if u.window_s is None or not u.cpu_seconds:
        return None
    return sum(v for mode, v in u.cpu_seconds.items() if mode not in NOT_BUSY)


def cpu_util(u: HostUsage) -> float | None:
    """Busy share of all the host's CPUs during the window, 0..1 (see the module docstring)."""
    busy = busy_seconds(u)
    if busy is None or not u.window_s or not u.cpu_count:
        return None
    return _share(busy / (u.window_s * u.cpu_count))


def _share(fraction: float) -> float:
    """A share of a whole, at most 1 (see the module docstring)."""
    return min(fraction, 1.0)


def cpu_us_per_io(usages: Iterable[HostUsage], ios: int | None) -> float | None:
    """Busy CPU µs of ``usages`` together per I/O; None if any of them is unknown or no I/O."""
    busy = [busy_seconds(u) for u in usages]
    if not busy or any(b is None for b in busy) or not ios:
        return None
    return sum(b for b in busy if b is not None) * 1e6 / ios


def nic_use(n: NicUsage, window_s: float) -> float | None:
    """Share of the link's speed used in its busier direction, 0..1 (None without a speed)."""
    if n.speed_bytes_s is None or window_s <= 0:
        return None
    return _share(max(n.rx_bytes, n.tx_bytes) / window_s / n.speed_bytes_s)


def device_ios(d: DiskUsage) -> float:
    """I/Os the device completed: reads, writes and discards."""
    return d.reads + d.writes + d.discards


def usages(result: ResultRecord) -> tuple[HostUsage, ...]:
    """The stored per-host figures of a result (``extra["observed"]``); empty when unobserved."""
    return tuple(from_jsonable(HostUsage, u) for u in (result.extra or {}).get("observed", ()))


@dataclass(frozen=True)
class HostCost:
    """The figures of one host for one job as people read them (see the module docstring).
    Fractions are 0..1; ``nics`` map an interface to (bytes/s, use of its speed or None);
    ``disks`` a device to (I/Os per fio I/O or None, busy fraction)."""

    host: str
    role: str
    window_s: float | None
    cpu_util: float | None
    cpu_us_per_io: float | None
    cpu_by_mode: Mapping[str, float] = field(default_factory=dict)
    nics: Mapping[str, tuple[float, float | None]] = field(default_factory=dict)
    disks: Mapping[str, tuple[float | None, float]] = field(default_factory=dict)
    gaps: int = 0
    error: str | None = None


def host_costs(result: ResultRecord) -> tuple[HostCost, ...]:
    """``HostCost`` of every observed host of a result, in observation order."""
    ios = job_ios(result.report)
    out = []
    for u in usages(result):
        w = u.window_s
        nics = {name: ((n.rx_bytes + n.tx_bytes) / w, nic_use(n, w)) for name, n in u.nics.items()} if w else {}
        disks = {name: (device_ios(d) / ios if ios else None, _share(d.busy_s / w)) for name, d in u.disks.items()
                 if device_ios(d) > 0} if w else {}
        modes = {m: _share(u.cpu_seconds[m] / (w * u.cpu_count)) for m in MODES if m in u.cpu_seconds} \
            if w and u.cpu_count else {}
        out.append(HostCost(u.host, u.role, w, cpu_util(u), cpu_us_per_io([u], ios), modes, nics, disks,
                            sum(g.attempts for g in u.gaps), u.error))
    return tuple(out)


def other_hosts_facts(result: ResultRecord) -> dict[str, HostFacts]:
    """Facts of the result's other hosts by name: each fio server's (``extra["hosts"]``, from ssh
    or its exporter) and each observed host's other than this one (from its exporter)."""
    out: dict[str, HostFacts] = {}
    for record in (result.extra or {}).get("hosts", ()):
        if record.get("facts"):
            out[record["host"]] = from_jsonable(HostFacts, record["facts"])
    for u in usages(result):
        if u.role != "local" and u.facts is not None:
            out.setdefault(u.host, u.facts)
    return out


def select(result: ResultRecord, host: str | None) -> tuple[HostUsage, ...] | None:
    """The observed hosts a metric ``…@host`` means for ``result``: None/empty ``host`` every
    observed host (the whole run); ``local``, a fio server's label or a watched host's name that
    host; the name of the result's own target its hosts (a remote target's fio servers, the
    local host for a local target). None when the result has no such host observed."""
    found = usages(result)
    if not host:
        return found or None
    if host == result.target:
        role = "server" if (result.extra or {}).get("hosts") else "local"
        wanted = [u for u in found if u.role == role]
    else:
        wanted = [u for u in found if u.host == host]
    return tuple(wanted) or None
