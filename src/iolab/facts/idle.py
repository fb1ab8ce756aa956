"""CPU idle states and the CPU latency limit: what cpuidle lets an idle CPU do, and what is asked of it.

An idle CPU enters one of its driver's idle states; leaving a deeper one takes longer (its exit
latency). A process that waits for I/O sleeps, its CPU goes idle, and the completion's interrupt
first has to wake that CPU: at small blocks and high rates the exits become much of each I/O's
latency (on a 2-CPU KVM guest with the haltpoll driver, 4k random reads at QD8 on a tmpfs-backed
loop device ran at ~110 k IOPS as they were and ~255 k with the limit held at 0; benchmarks/RESULTS.md).

The limit is the CPU latency QoS: every process that holds ``/dev/cpu_dma_latency`` open with a
value written into it asks the governor to pick no state whose exit latency is above that many
µs; the kernel keeps the least of all requests and drops a request when its file is closed, which
happens when the process ends however it ends (``run.tuning`` holds one for ``tune:
{cpu_dma_latency: N}``). Reading the file gives that least value as a native 32-bit integer;
``2000000000`` (2,000 s, ``PM_QOS_CPU_LATENCY_DEFAULT_VALUE``) means nobody asks for anything.
Opening the file to read it adds a request at that default, which lowers nothing, and closing it
removes it again. Only root may open it.

Every probe is best effort, as in ``facts.host``: a missing or unreadable file is None. Paths are
read under ``root`` (``facts.host``'s fixture trees). This module is sent to remote hosts with
``facts.host`` (``remote.ssh``, ``remote.sshagent``), so it uses the standard library only and
Python 3.9's.

Sources: ``Documentation/admin-guide/pm/cpuidle.rst`` ("Representation of Idle States": the
``cpuidle/stateN/{name,latency,residency,disable}`` files, ``current_driver``,
``current_governor_ro``; "Power Management Quality of Service for CPUs"),
``Documentation/power/pm_qos_interface.rst`` (the user-mode interface of ``/dev/cpu_dma_latency``),
``kernel/power/qos.c`` (``cpu_latency_qos_read``/``_write``).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Sequence

from iolab.facts import sysfs
from iolab.model import IdleState

#: Where the CPU latency QoS requests are made, under a host's root.
PM_QOS = "dev/cpu_dma_latency"
#: The limit when no request is held (``PM_QOS_CPU_LATENCY_DEFAULT_VALUE``, include/linux/pm_qos.h): 2,000 s.
NO_LIMIT_US = 2_000_000_000
#: The largest value a request can hold (a signed 32-bit integer).
MAX_LIMIT_US = 2**31 - 1

_CPUIDLE = "sys/devices/system/cpu/cpuidle"


def driver(root: str = "/") -> str | None:
    """The cpuidle driver (``cpuidle/current_driver``: ``intel_idle``, ``acpi_idle``, ``haltpoll`` …);
    None without cpuidle (``none`` is what the kernel shows when no driver registered)."""
    return sysfs.read_attr(os.path.join(root, _CPUIDLE), "current_driver")


def governor(root: str = "/") -> str | None:
    """The cpuidle governor (``menu``, ``teo``, ``ladder``, ``haltpoll``): ``current_governor_ro``,
    else ``current_governor`` (which kernels show when switching governors is allowed)."""
    base = os.path.join(root, _CPUIDLE)
    return sysfs.read_attr(base, "current_governor_ro") or sysfs.read_attr(base, "current_governor")


def states(root: str = "/", cpu: int = 0) -> tuple[IdleState, ...] | None:
    """The idle states of ``cpu`` in the kernel's order (state0 first: the shallowest); None when the
    CPU has no ``cpuidle`` directory (no cpuidle, or the CPU is not there)."""
    base = os.path.join(root, "sys/devices/system/cpu", f"cpu{cpu}", "cpuidle")
    if not os.path.isdir(base):
        return None
    names = [n for n in sysfs.listdir(base) if re.fullmatch(r"state\d+", n)]
    out = []
    for name in sorted(names, key=lambda n: int(n[5:])):
        directory = os.path.join(base, name)
        out.append(IdleState(name=sysfs.read_attr(directory, "name") or name,
                             exit_latency_us=sysfs.read_int(directory, "latency"),
                             residency_us=sysfs.read_int(directory, "residency"),
                             disabled=sysfs.read_int(directory, "disable") == 1))
    return tuple(out)


def latency_limit_us(root: str = "/", path: str | None = None) -> int | None:
    """The CPU latency limit in force (µs): ``/dev/cpu_dma_latency`` under ``root`` (or ``path``) read
    as the kernel writes it, a native signed 32-bit integer. None when it cannot be read (not root, no
    such file, a short read)."""
    try:
        with open(path or os.path.join(root, PM_QOS), "rb", buffering=0) as f:
            data = f.read(4)
    except OSError:
        return None
    return struct.unpack("=i", data)[0] if len(data) == 4 else None


def exits(found: Sequence[IdleState] | None, limit_us: int | None) -> tuple[IdleState, ...]:
    """The states an idle CPU may still enter under ``limit_us`` (None: no limit) whose exit takes time:
    enabled, with an exit latency above 0 and not above the limit (the governors' rule: a state
    whose exit latency exceeds the limit is skipped, ``drivers/cpuidle/governors/menu.c``)."""
    limit = NO_LIMIT_US if limit_us is None else limit_us
    return tuple(s for s in found or () if not s.disabled and (s.exit_latency_us or 0) > 0
                 and (s.exit_latency_us or 0) <= limit)


def describe_states(found: Sequence[IdleState] | None) -> str | None:
    """``POLL (exit 0 µs, residency 0 µs), C1 (exit 2 µs, residency 2 µs, disabled)``; None when unknown,
    ``none`` when cpuidle lists no state."""
    if found is None:
        return None
    parts = []
    for s in found:
        numbers = [f"exit {_us(s.exit_latency_us)}", f"residency {_us(s.residency_us)}"]
        parts.append(f"{s.name} ({', '.join(numbers + (['disabled'] if s.disabled else []))})")
    return ", ".join(parts) or "none"


def describe_limit(limit_us: int | None) -> str | None:
    """``0 µs``, or ``none held (2000000000 µs)`` for the kernel's default; None when unknown."""
    if limit_us is None:
        return None
    return f"none held ({limit_us} µs)" if limit_us == NO_LIMIT_US else f"{limit_us} µs"


def _us(value: int | None) -> str:
    return "?" if value is None else f"{value} µs"
