"""Facts about the machine a result comes from: kernel, CPU, memory, virtualisation, fio.

Every probe is best effort: a missing file, an unreadable file or a missing command makes that
one fact ``None`` ("unknown"), never an exception, so ``host_facts`` works in containers,
on non-x86 machines and without systemd.

The file probes read under ``root`` (default ``/``) so tests can point them at a fixture tree
with ``proc/``, ``sys/`` and ``etc/`` inside; hostname and kernel come from ``uname(2)``.

Sources: ``proc(5)`` (``/proc/cpuinfo``, ``/proc/meminfo``), ``os-release(5)``,
``Documentation/ABI/testing/sysfs-devices-system-cpu`` (``online``, ``cpufreq``),
``systemd-detect-virt(1)``; CPU idle states and the latency limit: ``facts.idle``.
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
from collections.abc import Sequence

from iolab.facts import idle, sysfs
from iolab.model import HostFacts

#: DMI strings (``sys_vendor`` / ``product_name``) of hypervisors, as systemd-detect-virt
#: names them (``src/basic/virt.c``, ``dmi_vendor_table``). Checked in order, case-sensitive.
_DMI_VENDORS: tuple[tuple[str, str], ...] = (
    ("KVM", "kvm"),
    ("OpenStack", "kvm"),
    ("KubeVirt", "kvm"),
    ("Amazon EC2", "amazon"),
    ("QEMU", "qemu"),
    ("VMware", "vmware"),
    ("VMW", "vmware"),
    ("innotek GmbH", "oracle"),
    ("VirtualBox", "oracle"),
    ("Oracle Corporation", "oracle"),
    ("Xen", "xen"),
    ("Bochs", "bochs"),
    ("Parallels", "parallels"),
    ("BHYVE", "bhyve"),
    ("Hyper-V", "microsoft"),
    ("Apple Virtualization", "apple"),
    ("Google Compute Engine", "google"),
)

#: Files whose presence marks a container, and the name systemd-detect-virt gives it.
_CONTAINER_MARKERS: tuple[tuple[str, str], ...] = (
    (".dockerenv", "docker"),
    ("run/.containerenv", "podman"),
)


def host_facts(fio_version: str | None = None, *, root: str = "/") -> HostFacts:
    """Describe this machine; ``fio_version`` is passed through (see ``fio_version()``).

    ``kernel`` is ``uname -r`` and ``uname -v`` joined by a space (the release alone does not
    say which build, e.g. Debian's ``6.1.0-13-amd64`` covers several 6.1.x kernels).
    ``cpu_count`` is the number of online CPUs (``/sys/devices/system/cpu/online``), not the
    process's affinity mask. ``memory_bytes`` is ``MemTotal``. ``virtualization`` is described
    in ``virtualization()``. ``cpu_governor`` is cpu0's cpufreq governor, ``None`` when the
    machine exposes no cpufreq (common in VMs). The CPU idle facts (cpuidle driver and governor,
    cpu0's idle states, the CPU latency limit in force, which only root can read) are
    ``facts.idle``'s. Never raises.
    """
    uname = os.uname()
    cpuinfo = _read(root, "proc/cpuinfo")
    return HostFacts(
        hostname=uname.nodename or None,
        kernel=f"{uname.release} {uname.version}".strip() or None,
        distribution=_distribution(root),
        cpu_model=_cpu_model(cpuinfo),
        cpu_count=_cpu_count(root, cpuinfo),
        memory_bytes=_memory_bytes(root),
        virtualization=virtualization(root=root),
        fio_version=fio_version,
        cpu_governor=_read_line(root, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        cpuidle_driver=idle.driver(root),
        cpuidle_governor=idle.governor(root),
        idle_states=idle.states(root),
        cpu_dma_latency_us=idle.latency_limit_us(root),
    )


def fio_version(fio: str = "fio") -> str | None:
    """Run ``fio --version`` and return ``"3.33"`` for ``fio-3.33``; ``None`` if fio cannot run.

    A version with a git suffix is kept whole (``fio-3.36-12-gdeadbee`` -> ``3.36-12-gdeadbee``).
    """
    out = _run([fio, "--version"])
    if not out:
        return None
    first = out.splitlines()[0].strip()
    return first.removeprefix("fio-") or None


@functools.cache  # the plan, then the local observer, describe this machine
def virtualization(*, root: str = "/", detect_virt: str = "systemd-detect-virt") -> str | None:
    """The virtualisation this machine runs under, in systemd-detect-virt's vocabulary.

    A VM alone gives its id (``kvm``, ``vmware``, ``microsoft`` ...), a container alone its id
    (``docker``, ``lxc``, ``podman`` ...), a container inside a VM ``"docker on kvm"``; bare
    metal gives ``"none"``. Without systemd-detect-virt: DMI ``sys_vendor``/``product_name``,
    then the cpuinfo ``hypervisor`` flag (``vm-other`` when the hypervisor has no name),
    container marker files. ``None`` when that is not enough to tell (e.g. no DMI and no
    cpuinfo flags, as on many ARM boards). Never raises.
    """
    vm = _detect_virt(detect_virt, "--vm")
    container = _detect_virt(detect_virt, "--container")
    if vm is None:
        vm = _vm_fallback(root)
    if container is None:
        container = _container_fallback(root)
    return _combine_virt(vm, container)


# --- probes -----------------------------------------------------------------------------------


def _read(root: str, rel: str) -> str | None:
    return sysfs.read_text(os.path.join(root, rel))


def _read_line(root: str, rel: str) -> str | None:
    return sysfs.read_attr(root, rel)


def _run(argv: Sequence[str], timeout_s: float = 10.0) -> str | None:
    """stdout of a command that exited 0, else ``None`` (missing, failed, hung)."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _distribution(root: str) -> str | None:
    """``PRETTY_NAME`` of os-release(5): ``/etc/os-release``, else ``/usr/lib/os-release``."""
    for rel in ("etc/os-release", "usr/lib/os-release"):
        text = _read(root, rel)
        if text is None:
            continue
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "PRETTY_NAME":
                try:
                    words = shlex.split(value)
                except ValueError:
                    words = [value.strip().strip("\"'")]
                return " ".join(words) or None
    return None


def _cpuinfo_fields(cpuinfo: str | None) -> dict[str, str]:
    """The first value of every key in /proc/cpuinfo (first processor's block wins)."""
    fields: dict[str, str] = {}
    for line in (cpuinfo or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _cpu_model(cpuinfo: str | None) -> str | None:
    """x86 ``model name``; ARM ``Model``/``Processor``; POWER ``cpu``; MIPS ``cpu model``."""
    fields = _cpuinfo_fields(cpuinfo)
    for key in ("model name", "Model", "cpu model", "cpu", "Processor"):
        if fields.get(key):
            return " ".join(fields[key].split())
    return None


def _cpu_count(root: str, cpuinfo: str | None) -> int | None:
    """Online CPUs: sysfs ``online`` list, else ``processor`` lines of cpuinfo."""
    online = sysfs.online_cpus(os.path.join(root, "sys"))
    if online:
        return len(online)
    count = sum(1 for line in (cpuinfo or "").splitlines() if line.split(":")[0].strip() == "processor")
    if count:
        return count
    return len(os.sched_getaffinity(0)) if root == "/" and hasattr(os, "sched_getaffinity") else None


def _memory_bytes(root: str) -> int | None:
    """``MemTotal`` of /proc/meminfo, which the kernel prints in KiB (labelled ``kB``)."""
    return sysfs.meminfo_bytes("MemTotal", os.path.join(root, "proc", "meminfo"))


def _detect_virt(command: str, flag: str) -> str | None:
    """systemd-detect-virt's answer (``none`` included; it exits 1 then), ``None`` if unavailable."""
    try:
        proc = subprocess.run([command, flag], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    answer = proc.stdout.strip()
    if proc.returncode == 0 and answer:
        return answer
    return "none" if answer == "none" else None


def _vm_fallback(root: str) -> str | None:
    """VM id from DMI, then /sys/hypervisor, then the cpuinfo flag; ``none`` only on clear x86 metal."""
    dmi = " ".join(
        filter(None, (_read_line(root, f"sys/class/dmi/id/{n}") for n in ("sys_vendor", "product_name")))
    )
    if "Microsoft Corporation" in dmi and "Virtual Machine" in dmi:
        return "microsoft"
    for needle, name in _DMI_VENDORS:
        if needle in dmi:
            return name
    if _read_line(root, "sys/hypervisor/type") == "xen":
        return "xen"
    flags = _cpuinfo_fields(_read(root, "proc/cpuinfo")).get("flags")
    if flags is None:
        return None
    return "vm-other" if "hypervisor" in flags.split() else "none"


def _container_fallback(root: str) -> str:
    """Container id from marker files (``/run/systemd/container`` first), else ``none``."""
    named = _read_line(root, "run/systemd/container")
    if named:
        return named
    for rel, name in _CONTAINER_MARKERS:
        if os.path.exists(os.path.join(root, rel)):
            return name
    return "none"


def _combine_virt(vm: str | None, container: str | None) -> str | None:
    vm_known = vm not in (None, "none")
    container_known = container not in (None, "none")
    if vm_known and container_known:
        return f"{container} on {vm}"
    if container_known:
        return container
    if vm_known:
        return vm
    return "none" if vm == "none" and container == "none" else None
