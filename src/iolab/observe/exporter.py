"""Reading one node_exporter: scrape ``/metrics``, keep the series iolab uses, read host facts.

The text exposition format is parsed by ``prometheus_client.parser`` (the Prometheus project's
own Python parser). Each scrape asks only for the collectors iolab needs (node_exporter's
``collect[]`` URL parameter, since 0.17), which keeps a scrape to a few milliseconds of the
exporter's CPU; an exporter that refuses the filter (a collector disabled on its command line
answers 400) is scraped whole and filtered here.

Series kept (node_exporter 1.x names; units in the names, from ``/proc/stat``, ``/proc/diskstats``,
``/proc/net/dev`` and ``/sys/class/net``):

* ``node_cpu_seconds_total{mode}``: summed over the ``cpu`` label (seconds of all CPUs per mode);
* ``node_network_{receive,transmit}_bytes_total{device}``, ``node_network_speed_bytes{device}``;
* ``node_disk_{reads,writes,discards}_completed_total{device}``, ``node_disk_read_bytes_total``,
  ``node_disk_written_bytes_total``, ``node_disk_io_time_seconds_total``,
  ``node_disk_io_time_weighted_seconds_total`` (per device);
* every ``node_bcache_*`` series, with its labels (bcache collector: cache hits, misses, bypassed
  bytes … per backing device and cache set).

node_exporter excludes loop, ram and partition devices from diskstats by default
(``--collector.diskstats.device-exclude``); start it with another pattern to watch them.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from ..errors import HostError
from ..model import BlockDeviceFacts, HostFacts

#: The collectors sampled during jobs, and those read once for facts.
SAMPLE_COLLECTORS = ("cpu", "diskstats", "netdev", "netclass", "bcache")
FACT_COLLECTORS = ("uname", "os", "meminfo", "cpu", "cpufreq", "diskstats")

CPU = "node_cpu_seconds_total"
PER_DEVICE = (
    "node_network_receive_bytes_total", "node_network_transmit_bytes_total", "node_network_speed_bytes",
    "node_disk_reads_completed_total", "node_disk_writes_completed_total", "node_disk_discards_completed_total",
    "node_disk_read_bytes_total", "node_disk_written_bytes_total", "node_disk_io_time_seconds_total",
    "node_disk_io_time_weighted_seconds_total",
)
BCACHE_PREFIX = "node_bcache_"

#: A series as kept: metric name and its labels as sorted (name, value) pairs.
Key = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class Scrape:
    """One scrape, reduced: the kept series' values, and how many CPUs the exporter listed."""

    values: Mapping[Key, float]
    cpu_count: int | None = None


@dataclass(frozen=True)
class NodeFacts:
    """A host's facts as node_exporter shows them; ``devices`` are the block devices of
    ``node_disk_info`` (name, model and serial when the exporter can read udev's data)."""

    host: HostFacts
    devices: tuple[BlockDeviceFacts, ...] = field(default_factory=tuple)


def metrics_url(address: str, collectors: Sequence[str] = ()) -> str:
    """``http://ADDRESS/metrics`` with a ``collect[]`` parameter per collector. ``address`` is
    ``host:port`` or ``[v6]:port``."""
    query = "&".join(f"collect[]={c}" for c in collectors)
    return f"http://{address}/metrics" + (f"?{query}" if query else "")


def fetch(address: str, collectors: Sequence[str], timeout_s: float) -> str:
    """The exposition text of one scrape. Raises ``HostError`` saying why none came (refused,
    timed out, not an exporter)."""
    try:
        try:
            return _get(metrics_url(address, collectors), timeout_s)
        except urllib.error.HTTPError as exc:
            if exc.code != 400 or not collectors:
                raise
            return _get(metrics_url(address), timeout_s)  # a collector is disabled: filter here
    except urllib.error.HTTPError as exc:
        raise HostError(f"node_exporter at {address}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise HostError(f"node_exporter at {address}: {getattr(reason, 'strerror', None) or reason}") from None


def _get(url: str, timeout_s: float) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return response.read().decode("utf-8", errors="replace")  # type: ignore[no-any-return]


def parse(text: str) -> Iterable[tuple[str, dict[str, str], float]]:
    """``(sample name, labels, value)`` of every sample. Raises ``HostError`` for text that is
    not the exposition format."""
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                yield sample.name, sample.labels, float(sample.value)
    except ValueError as exc:
        raise HostError(f"not node_exporter's text format: {exc}") from None


def reduce(samples: Iterable[tuple[str, dict[str, str], float]]) -> Scrape:
    """The kept series of a scrape (see the module docstring), CPU seconds summed per mode."""
    values: dict[Key, float] = {}
    cpus: set[str] = set()
    for name, labels, value in samples:
        if name == CPU:
            cpus.add(labels.get("cpu", ""))
            key: Key = (CPU, (("mode", labels.get("mode", "")),))
            values[key] = values.get(key, 0.0) + value
        elif name in PER_DEVICE or name.startswith(BCACHE_PREFIX):
            values[(name, tuple(sorted(labels.items())))] = value
    return Scrape(values, len(cpus) or None)


def scrape(address: str, timeout_s: float) -> Scrape:
    """One reduced scrape of the exporter at ``address``. Raises ``HostError``."""
    return reduce(parse(fetch(address, SAMPLE_COLLECTORS, timeout_s)))


def facts(address: str, timeout_s: float = 3.0) -> NodeFacts:
    """The host facts of the exporter at ``address`` (``node_facts``). Raises ``HostError``."""
    return node_facts(parse(fetch(address, FACT_COLLECTORS, timeout_s)))


def node_facts(samples: Iterable[tuple[str, dict[str, str], float]]) -> NodeFacts:
    """Host facts from node_exporter series, as ``iolab host`` reports them locally:

    * ``hostname``, ``kernel`` (release and version joined, as ``facts.host.host_facts``):
      ``node_uname_info{nodename, release, version}``;
    * ``distribution``: ``node_os_info{pretty_name}``;
    * ``cpu_count``: CPUs of ``node_cpu_seconds_total``; ``cpu_model``: ``node_cpu_info{model_name}``
      (only with ``--collector.cpu.info``); ``cpu_governor``: ``node_cpu_scaling_governor`` (not in
      node_exporter 1.5, so unknown there);
    * ``memory_bytes``: ``node_memory_MemTotal_bytes``;
    * ``devices``: ``node_disk_info{device, model, serial}``.

    Virtualisation and the fio version are not exported (None). Queue settings (scheduler,
    nr_requests …) are not exported by node_exporter either: with ``ssh: true`` iolab reads them.
    """
    host: dict[str, object] = {}
    cpus: set[str] = set()
    devices: dict[str, BlockDeviceFacts] = {}
    for name, labels, value in samples:
        if name == "node_uname_info":
            host["hostname"] = labels.get("nodename") or None
            host["kernel"] = f"{labels.get('release', '')} {labels.get('version', '')}".strip() or None
        elif name == "node_os_info":
            host["distribution"] = labels.get("pretty_name") or None
        elif name == CPU:
            cpus.add(labels.get("cpu", ""))
        elif name == "node_cpu_info" and labels.get("model_name"):
            host.setdefault("cpu_model", " ".join(labels["model_name"].split()))
        elif name == "node_cpu_scaling_governor" and value == 1 and labels.get("cpu") == "0":
            host["cpu_governor"] = labels.get("governor")
        elif name == "node_memory_MemTotal_bytes":
            host["memory_bytes"] = int(value)
        elif name == "node_disk_info" and labels.get("device"):
            dev = labels["device"]
            devices[dev] = BlockDeviceFacts(name=dev, path=f"/dev/{dev}", model=labels.get("model") or None,
                                            serial=labels.get("serial") or None)
    return NodeFacts(HostFacts(cpu_count=len(cpus) or None, **host),  # type: ignore[arg-type]
                     tuple(devices[d] for d in sorted(devices)))
