"""P15, CPU power states: the frequency governor and the idle states a job's I/O waits on.

Two findings share the id. **The governor**: at low queue depth, a governor other than
``performance`` lets the clock fall between I/Os, and each I/O waits for it to rise again.
**The idle states**: a process that waits for I/O sleeps and its CPU goes idle; the completion's
interrupt must first wake that CPU, and leaving an idle state with an exit latency (the deeper
C-states; in a VM, halting into the hypervisor) is paid by every I/O that finds its CPU idle. At
small blocks and high rates that is much of each I/O's latency: 4k random reads at QD8 on a
tmpfs-backed loop device on a 2-CPU KVM guest (cpuidle driver haltpoll) ran at ~110 k IOPS as
they were and ~255 k with the CPU latency limit held at 0 (benchmarks/RESULTS.md, benchmarks/idle_states.py);
any other CPU load in the run (an observer, a capture, a busy neighbour) keeps CPUs out of idle and
so "speeds up" fio too. The remedy holds a CPU latency request for the run (``tune:
{cpu_dma_latency: 0}``, ``run.tuning``), which keeps idle CPUs in states without exit latency.

Sources: AWS EBS documentation, processor state control; Linux
``Documentation/admin-guide/pm/cpuidle.rst`` and ``Documentation/power/pm_qos_interface.rst``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..facts import idle
from ..model import HostFacts
from .findings import WARNING, Finding

#: Blocks up to this size make a job "high-rate" for the idle-state finding (fio's default bs is 4k).
SMALL_BLOCK_BYTES = 16 * 1024


def p15(host: HostFacts, tune: Mapping[str, str], *, latency: bool, small_blocks: bool,
        polled: bool) -> list[Finding]:
    """P15 for one storage job: ``latency`` when it is latency-sensitive (iodepth 1, a latency target,
    a rate limit), ``small_blocks`` when its blocks are at most ``SMALL_BLOCK_BYTES``, ``polled``
    when it polls for completions (``hipri``: its CPU never idles waiting). ``tune`` is the job's
    tuning (``governor``, ``cpu_dma_latency``), which wins over the host's values.

    The device's ``rotational`` flag does not silence the idle-state finding: virtio disks and
    loop devices report 1 (this machine's do), and it is on such devices that the effect was measured."""
    out = []
    governor = tune.get("governor") or host.cpu_governor
    if latency and governor is not None and governor != "performance":
        out.append(Finding(
            "P15", WARNING, f"the CPU frequency governor is {governor!r}: at low queue depth, frequency ramp-up and "
            "deep C-state exits add to every I/O's latency.",
            "tune: {governor: performance} (and cpu_dma_latency: 0 to keep CPUs out of deep idle states) for "
            "latency tests.", "AWS EBS documentation, processor state control"))
    if (latency or small_blocks) and not polled:
        out += _idle_states(host, tune)
    return out


def _idle_states(host: HostFacts, tune: Mapping[str, str]) -> list[Finding]:
    """The idle-state finding, when an idle CPU may still enter a state with an exit latency under the
    limit the job runs with: the least of the one it asks for and the one in force on the host."""
    limits = [int(v) for v in (tune.get("cpu_dma_latency"),) if v is not None and str(v).isdigit()]
    if host.cpu_dma_latency_us is not None:
        limits.append(host.cpu_dma_latency_us)
    limit = min(limits) if limits else None
    slow = idle.exits(host.idle_states, limit)
    if not slow:
        return []
    states = ", ".join(f"{s.name} {s.exit_latency_us} µs" for s in slow)
    driver = f"; cpuidle driver {host.cpuidle_driver}" if host.cpuidle_driver else ""
    held = "no CPU latency limit is held" if limit in (None, idle.NO_LIMIT_US) else \
        f"the CPU latency limit ({limit} µs) still allows them"
    return [Finding(
        "P15", WARNING, f"idle CPUs may enter states with exit latencies ({states}{driver}) and {held}: an I/O "
        "whose CPU is idle waits for it to wake, much of its latency at small blocks and high rates (up to 2.3× "
        "the IOPS held at 0 on a 2-CPU VM), and other CPU load in the run changes the result.",
        "tune: {cpu_dma_latency: 0} (or --tune cpu_dma_latency=0) holds idle CPUs in states without exit latency "
        "for the run; compare runs only under the same setting.",
        "Linux Documentation/admin-guide/pm/cpuidle.rst and Documentation/power/pm_qos_interface.rst")]
