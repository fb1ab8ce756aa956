"""CPU pinning: which CPUs fio's jobs run on, derived from the device under test.

Two modes, named in a suite (``pin: mq``) or on the command line (``--pin mq``):

* ``mq``: the CPUs of the device's blk-mq hardware queues, the union of
  ``/sys/block/DEV/mq/*/cpu_list`` (``Documentation/block/blk-mq.rst``). A submission from one
  of these CPUs goes straight to a hardware queue mapped to it; this is the placement cloud
  vendors recommend for million-IOPS NVMe disks.
* ``numa``: the CPUs of the device's NUMA node (``device/numa_node`` →
  ``/sys/devices/system/node/nodeN/cpulist``), so buffers and completions stay node-local.
  A device without NUMA affinity (``numa_node`` = -1, e.g. a loop device) on a machine with a
  single node uses that node; with several nodes it is an error.

Either way the set is narrowed to the online CPUs (``/sys/devices/system/cpu/online``) and to
the CPUs this process may use (``sched_getaffinity``), and fio gets ``cpus_allowed=SET`` with
``cpus_allowed_policy=split``: each job (numjobs clone) gets one CPU of the set, round-robin
when there are more jobs than CPUs (HOWTO ``cpus_allowed_policy``). Lint P6 flags that case.
"""

from __future__ import annotations

import os
from collections.abc import Collection

from ..errors import SuiteError
from ..fio.jobfile import Option
from ..model import BlockDeviceFacts
from .sysfs import format_cpu_list, listdir, online_cpus, parse_cpu_list, read_cpu_list

MODES = ("mq", "numa")


def check_mode(mode: str) -> str:
    """Validate a pin mode; raises ``ValueError`` naming the choices."""
    if mode not in MODES:
        raise ValueError(f"expected one of {', '.join(MODES)}, got {mode!r}")
    return mode


def cpus(mode: str, device: BlockDeviceFacts, *, sysfs: str = "/sys",
         allowed: Collection[int] | None = None) -> tuple[int, ...]:
    """The CPUs for ``mode`` on ``device``, sorted.

    ``allowed`` defaults to this process's affinity mask when ``sysfs`` is the real one (a
    fixture tree describes another machine, so then every CPU is allowed). Raises
    ``SuiteError`` when the device gives no CPUs for the mode (no blk-mq queues, no NUMA node
    on a multi-node machine) or none of them is online and allowed.
    """
    if mode == "mq":
        found: set[int] = set()
        for text in device.queues.values():
            found.update(parse_cpu_list(text))
        if not found:
            raise SuiteError(f"pin: mq: {device.name} has no blk-mq hardware queues in sysfs (mq/*/cpu_list)",
                             hint="use pin: numa, or no pinning")
    elif mode == "numa":
        found = set(_numa_cpus(device, sysfs))
    else:
        raise SuiteError(f"pin: unknown mode {mode!r}", hint=f"choose one of {', '.join(MODES)}")
    online = online_cpus(sysfs)
    if online:
        found &= set(online)
    if allowed is None and sysfs == "/sys" and hasattr(os, "sched_getaffinity"):
        allowed = os.sched_getaffinity(0)
    if allowed is not None:
        found &= set(allowed)
    if not found:
        raise SuiteError(f"pin: {mode}: none of {device.name}'s CPUs is online and usable by iolab",
                         hint="check taskset/cgroup cpusets, or run without pinning")
    return tuple(sorted(found))


def fio_options(cpu_set: Collection[int]) -> tuple[Option, ...]:
    """``cpus_allowed=<cpulist>`` and ``cpus_allowed_policy=split`` for fio (HOWTO)."""
    return (("cpus_allowed", format_cpu_list(cpu_set)), ("cpus_allowed_policy", "split"))


def numa_nodes(sysfs: str = "/sys") -> dict[int, tuple[int, ...]]:
    """NUMA node number -> its CPUs, from ``devices/system/node/node*/cpulist``; ``{}`` if none."""
    base = os.path.join(sysfs, "devices", "system", "node")
    nodes = {}
    for name in listdir(base):
        if name.startswith("node") and name[4:].isdigit():
            nodes[int(name[4:])] = read_cpu_list(os.path.join(base, name, "cpulist"))
    return dict(sorted(nodes.items()))


def _numa_cpus(device: BlockDeviceFacts, sysfs: str) -> tuple[int, ...]:
    nodes = numa_nodes(sysfs)
    node = device.numa_node
    if node is None:
        if len(nodes) == 1:
            return next(iter(nodes.values()))
        raise SuiteError(f"pin: numa: {device.name} has no NUMA affinity (numa_node is -1 or missing) and this "
                         f"machine has {len(nodes) or 'no'} NUMA nodes", hint="use pin: mq")
    if not nodes.get(node):
        raise SuiteError(f"pin: numa: {device.name} is on NUMA node {node}, which has no CPUs in "
                         f"{sysfs}/devices/system/node", hint="use pin: mq")
    return nodes[node]
