"""This host, observed without setup: the series iolab takes from node_exporter, read from /proc and sysfs.

No exporter has to run on the machine that runs fio: iolab reads the same kernel counters node_exporter
reads, once a second, in the observer thread that would otherwise scrape (``sampler``), and reduces them
to the same ``Scrape`` under node_exporter's metric names, so ``usage`` computes CPU µs per I/O, CPU busy
by mode, NIC share and device I/Os the same way for this host and for a remote one. node_exporter stays
the source for fio servers and for hosts only watched (``--observe``); naming an exporter on this machine
(``observe: {local: …}``, ``--observe``) makes it this host's source instead.

Sources and conversions (as node_exporter 1.x does them, ``collector/*_linux.go`` and the procfs library):

* ``node_cpu_seconds_total{mode}``: the ``cpuN`` lines of ``/proc/stat`` (user nice system idle iowait
  irq softirq steal), in USER_HZ ticks, divided by ``sysconf(SC_CLK_TCK)``; summed over CPUs as
  ``exporter.reduce`` sums them; the CPU count is the number of ``cpuN`` lines;
* ``node_disk_{reads,writes,discards}_completed_total``, ``node_disk_{read,written}_bytes_total``
  (sectors × 512), ``node_disk_io_time_seconds_total``, ``node_disk_io_time_weighted_seconds_total``
  (ms / 1000): ``/proc/diskstats`` fields 4, 6, 8, 10, 13, 14 and 15. node_exporter's default
  ``device-exclude`` leaves out partitions and ``ram``, ``zram`` and ``fd`` devices; so does this
  reader, but it keeps **loop devices**, which iolab's users test on;
* ``node_network_{receive,transmit}_bytes_total``: ``/proc/net/dev`` without ``lo`` (as node_exporter
  1.5); ``node_network_speed_bytes``: ``/sys/class/net/*/speed`` (Mbit/s × 125,000), left out where the
  kernel does not know the speed (``-1``, which node_exporter exports as -125000, or an error).

bcache counters are not read here (node_exporter's ``bcache`` collector is the source for them).
"""

from __future__ import annotations

import os
import re

from ..errors import HostError
from ..facts.sysfs import read_text
from .exporter import CPU, Key, Scrape

#: The address that stands for "this host, read directly" where an exporter's ``host:port`` would be.
SELF = "self"
#: ``HostSamples.source`` of samples read here.
SOURCE = "local /proc and /sys (iolab)"
#: /proc/stat's CPU columns in order, in node_exporter's mode names.
CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
#: Devices node_exporter leaves out by default, except loop devices (see the module docstring).
EXCLUDED_DEVICE = re.compile(r"^(z?ram|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p)\d+$")
#: Bytes per sector in /proc/diskstats, whatever the device's sector size (the kernel's unit).
SECTOR_BYTES = 512


def _cpu(text: str, ticks_per_s: float) -> tuple[dict[Key, float], int]:
    values: dict[Key, float] = {}
    cpus = 0
    for line in text.splitlines():
        if not (line.startswith("cpu") and line[3:4].isdigit()):
            continue
        cpus += 1
        for mode, ticks in zip(CPU_MODES, line.split()[1:], strict=False):
            key: Key = (CPU, (("mode", mode),))
            values[key] = values.get(key, 0.0) + int(ticks) / ticks_per_s
    return values, cpus


def _disks(text: str) -> dict[Key, float]:
    values: dict[Key, float] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 14 or EXCLUDED_DEVICE.match(f[2]):
            continue
        labels = (("device", f[2]),)
        values[("node_disk_reads_completed_total", labels)] = float(f[3])
        values[("node_disk_read_bytes_total", labels)] = float(f[5]) * SECTOR_BYTES
        values[("node_disk_writes_completed_total", labels)] = float(f[7])
        values[("node_disk_written_bytes_total", labels)] = float(f[9]) * SECTOR_BYTES
        values[("node_disk_io_time_seconds_total", labels)] = float(f[12]) / 1000
        values[("node_disk_io_time_weighted_seconds_total", labels)] = float(f[13]) / 1000
        if len(f) >= 18:  # discards: kernel 4.18 and later
            values[("node_disk_discards_completed_total", labels)] = float(f[14])
    return values


def _nics(text: str, speeds: dict[str, str | None]) -> dict[Key, float]:
    values: dict[Key, float] = {}
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        f = rest.split()
        if not sep or len(f) < 9:
            continue
        if name.strip() == "lo":
            continue  # node_exporter's netdev leaves the loopback out: it is no link
        labels = (("device", name.strip()),)
        values[("node_network_receive_bytes_total", labels)] = float(f[0])
        values[("node_network_transmit_bytes_total", labels)] = float(f[8])
        speed = speeds.get(name.strip())
        if speed is not None and speed.strip().lstrip("-").isdigit() and int(speed) >= 0:
            values[("node_network_speed_bytes", labels)] = int(speed) * 125_000.0
    return values


def interfaces(netdev: str) -> list[str]:
    """The interface names of a ``/proc/net/dev`` text (whose ``speed`` files are read)."""
    return [line.partition(":")[0].strip() for line in netdev.splitlines()[2:] if ":" in line]


def reduce(stat: str, diskstats: str, netdev: str, speeds: dict[str, str | None], ticks_per_s: float) -> Scrape:
    """The counters of a host's ``/proc/stat``, ``/proc/diskstats`` and ``/proc/net/dev`` texts and its
    interfaces' ``speed`` files (name -> text, None where unreadable), as ``scrape`` returns them
    (see the module docstring). ``ticks_per_s`` is that host's ``sysconf(SC_CLK_TCK)``. Pure: the
    texts may come from another host (``observe.sshsample``)."""
    cpu, count = _cpu(stat, ticks_per_s)
    values = {**cpu, **_disks(diskstats), **_nics(netdev, speeds)}
    return Scrape(values, count or None)


def scrape(proc: str = "/proc", sys_class_net: str = "/sys/class/net") -> Scrape:
    """This host's counters now, as ``exporter.scrape`` returns an exporter's (see the module
    docstring). Raises ``HostError`` when /proc cannot be read."""
    stat, diskstats, netdev = (read_text(os.path.join(proc, name)) for name in ("stat", "diskstats", "net/dev"))
    if stat is None:
        raise HostError(f"cannot read {proc}/stat")
    speeds = {name: read_text(os.path.join(sys_class_net, name, "speed")) for name in interfaces(netdev or "")}
    return reduce(stat, diskstats or "", netdev or "", speeds, float(os.sysconf("SC_CLK_TCK")))
