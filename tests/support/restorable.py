"""The host settings iolab writes and restores (``run.tuning``), as tests compare them before and after a run."""

from __future__ import annotations

from typing import Any

from iolab.run import tuning


def restorable(device: Any, **kwargs: Any) -> dict[str, str]:
    """``tuning.snapshot`` without ``cpu_dma_latency``: that is the least of every process's request on the
    machine, which other processes (another test's run, a colleague's benchmark) change at any time, and iolab
    never writes it back (its request is withdrawn with its file: tests/integration/test_cpu_latency.py)."""
    return {k: v for k, v in tuning.snapshot(device, **kwargs).items() if k != "cpu_dma_latency"}
