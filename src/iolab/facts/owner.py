"""Which process runs a stored run, and whether it is still there: a run whose process is gone
(killed with SIGKILL, a crash, a power cut) is ``interrupted``, not ``running``.

The process that executes a run records itself in the run's options (``owner_record``: pid, host
name, the kernel's boot id and the process's start time in clock ticks since boot, from
``/proc/self/stat`` field 22). Whoever reads the run later decides (``owner_gone``): on the same host,
the run's process is gone when the machine was rebooted since (another boot id), or no process
has that pid, or the process with that pid started at another time (the pid was reused). A run
recorded on another host cannot be checked from here and keeps its stored status. Nothing is
written when reading: ``iolab run --resume`` finishes such a run and stores its status.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .sysfs import read_text

BOOT_ID = "/proc/sys/kernel/random/boot_id"


def start_ticks(pid: int | str) -> int | None:
    """A process's start time (clock ticks after boot, ``proc(5)`` field 22); None when it is gone."""
    text = read_text(f"/proc/{pid}/stat")
    if text is None:
        return None
    fields = text.rpartition(")")[2].split()  # the name in parentheses may hold spaces
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


def owner_record() -> dict[str, Any]:
    """This process as the owner of a run: ``{"pid", "host", "boot_id", "start_ticks"}``."""
    boot = read_text(BOOT_ID)
    return {"pid": os.getpid(), "host": os.uname().nodename, "boot_id": boot.strip() if boot else None,
            "start_ticks": start_ticks("self")}


def owner_gone(record: Mapping[str, Any] | None) -> bool:
    """Whether the process ``record`` names has certainly ended (see the module docstring); False
    when it may still run or cannot be checked from this host."""
    if not record or record.get("host") != os.uname().nodename or not isinstance(record.get("pid"), int):
        return False
    boot = read_text(BOOT_ID)
    if boot and record.get("boot_id") and boot.strip() != record["boot_id"]:
        return True
    started = start_ticks(record["pid"])
    return started is None or (record.get("start_ticks") is not None and started != record["start_ticks"])


def effective_status(status: str, options: Mapping[str, Any] | None) -> str:
    """``interrupted`` for a ``running`` run whose process is gone, else ``status`` as stored."""
    if status == "running" and owner_gone((options or {}).get("owner")):
        return "interrupted"
    return status
