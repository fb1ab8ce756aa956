"""Reading the kernel's text files: sysfs attributes, CPU lists and /proc/meminfo.

One place for what ``host``, ``targets``, ``tuning``, ``pinning`` and ``method`` read, with one
rule: a file that is missing or unreadable is "unknown" (None, or empty), never an exception.
This module is also sent to remote hosts with ``host`` and ``targets`` (``remote.facts``), so it
uses the standard library only.

Sources: ``Documentation/ABI/stable/sysfs-block``, ``Documentation/ABI/testing/
sysfs-devices-system-cpu`` (``online``, cpu lists), ``proc(5)`` (``/proc/meminfo``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable


def read_text(path: str) -> str | None:
    """A whole file, None when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def read_attr(directory: str, name: str) -> str | None:
    """A sysfs attribute without surrounding white space; None when missing, unreadable or empty."""
    text = read_text(os.path.join(directory, name))
    value = text.strip() if text is not None else ""
    return value or None


def read_int(directory: str, name: str) -> int | None:
    """A sysfs attribute as an int; None when it is not one."""
    value = read_attr(directory, name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def listdir(directory: str | os.PathLike[str]) -> list[str]:
    """The names in a directory, sorted; empty when it cannot be listed."""
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


def chosen(text: str) -> str:
    """The bracketed choice of a sysfs list (``"none [mq-deadline] kyber"`` -> ``mq-deadline``),
    or the text as it is when nothing is bracketed."""
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else text.strip()


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """CPU numbers of a kernel cpu list: ``"0-2,5"`` or ``"0, 1, 2"`` -> ``(0, 1, 2, 5)``.

    Accepts both the ``cpulist`` format (``/sys/devices/system/cpu/online``) and the
    comma-and-space list of blk-mq's ``mq/*/cpu_list``. Sorted, without duplicates.
    Raises ``ValueError`` on anything else.
    """
    cpus: set[int] = set()
    for part in text.replace(" ", "").replace("\n", "").split(","):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi) + 1) if sep else (int(lo),))
    return tuple(sorted(cpus))


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The kernel's compact cpulist spelling: ``[0, 1, 2, 5]`` -> ``"0-2,5"``; empty -> ``""``."""
    runs: list[list[int]] = []  # [first, last] of each run of consecutive CPUs
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def read_cpu_list(path: str) -> tuple[int, ...]:
    """The CPUs of a cpu-list file; empty when it cannot be read or parsed."""
    try:
        return parse_cpu_list(read_text(path) or "")
    except ValueError:
        return ()


def online_cpus(sysfs: str = "/sys") -> tuple[int, ...]:
    """The online CPUs (``devices/system/cpu/online``); empty when unknown."""
    return read_cpu_list(os.path.join(sysfs, "devices", "system", "cpu", "online"))


def meminfo_bytes(field: str, path: str = "/proc/meminfo") -> int | None:
    """A /proc/meminfo field in bytes (the kernel prints kB, meaning KiB); None when absent."""
    for line in (read_text(path) or "").splitlines():
        if line.startswith(field + ":"):
            try:
                return int(line.split()[1]) * 1024
            except (IndexError, ValueError):
                return None
    return None
