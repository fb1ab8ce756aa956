"""Captures without tracefs, for the fast tier: traces built in a test (``trace.from_rows``) or real
ones recorded once and committed (``tests/data/captures``, whose README says how), stored as
``iolab capture`` stores them (``record.save``), or handed to an in-process ``iolab capture`` in place
of the kernel's; and a stand-in for the block device a replay writes.

A replay's iologs go to ``$XDG_CACHE_HOME/iolab/replay/<hash of the database's URL>-capture-<id>`` and
its job text names them, so that a recording of the replay (``fakefio``) is found again the database's
URL must not change from run to run: ``in_lab`` works in ``tmp_path`` with the relative URL ``DB``
and the cache in ``tmp_path``.
"""

from __future__ import annotations

import json
import lzma
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from iolab.facts import targets
from iolab.model import BlockDeviceFacts, TargetFacts
from iolab.store.database import Store
from iolab.workflows.capture import plan as plan_mod
from iolab.workflows.capture import record
from iolab.workflows.capture import trace as trace_mod
from paths import DATA

CAPTURES = DATA / "captures"
MiB = 1024**2
#: The results database of a test ``in_lab``: relative to ``tmp_path``, so its URL, and the replay
#: directory named after it, are the same in every run.
DB = "sqlite:///iolab.db"
_COLUMNS = ("issue_ns", "complete_ns", "sector", "nbytes", "op", "flags", "pid")


def in_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Work in ``tmp_path`` (where ``DB`` is) with the replay files in ``tmp_path/cache``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def committed(name: str) -> tuple[trace_mod.Trace, dict[str, Any]]:
    """A real trace from ``tests/data/captures/<name>.json.xz`` and what the file says of it (``made``,
    ``device``, ``device_bytes``)."""
    doc = json.loads(lzma.decompress((CAPTURES / f"{name}.json.xz").read_bytes()))
    cols = doc["columns"]
    trace = trace_mod.from_rows(zip(*(cols[c] for c in _COLUMNS), strict=True),
                                comms={int(k): v for k, v in doc["comms"].items()}, lost_events=doc["lost_events"],
                                duration_ns=doc["duration_ns"])
    trace = trace_mod.dataclasses.replace(trace, left_out=doc["left_out"], kthreads=frozenset(doc["kthreads"]))
    return trace, {k: v for k, v in doc.items() if k != "columns"}


def device(path: str = "/dev/loop9", size_bytes: int = 64 * MiB) -> TargetFacts:
    """The facts of a blank traced block device (what ``targets.inspect`` says of an unused loop device)."""
    name = os.path.basename(path)
    return TargetFacts(path=path, kind="block", size_bytes=size_bytes,
                       device=BlockDeviceFacts(name=name, path=path, size_bytes=size_bytes))


def capture_of(trace: trace_mod.Trace, *, path: str = "/dev/loop9", size_bytes: int = 64 * MiB,
               command: Sequence[str] = (), returncode: int | None = None,
               interrupted: str | None = None) -> record.Capture:
    """What ``record.capture`` returns for ``trace`` recorded on ``path``."""
    return record.Capture(trace=trace, device=device(path, size_bytes), started_at=datetime.now(UTC),
                          how=f"{record.HOW} (a test's trace)", command=tuple(command), returncode=returncode,
                          interrupted=interrupted)


def stored(db: str | Path, capture: record.Capture, label: str | None = None,
           tags: dict[str, str] | None = None) -> int:
    """``capture`` stored in ``db`` as ``iolab capture`` stores it; its run id."""
    store = Store(str(db))
    try:
        return record.save(store, capture, label=label, tags=tags)
    finally:
        store.engine.dispose()


def captured_by_the_kernel(monkeypatch: pytest.MonkeyPatch, capture: record.Capture) -> list[tuple[Any, ...]]:
    """An in-process ``iolab capture`` gets ``capture`` in place of what tracefs would record; the list
    collects the arguments it was called with (device, duration, command)."""
    calls: list[tuple[Any, ...]] = []

    def fake(device: str, duration_s: float | None = None, command: Sequence[str] = ()) -> record.Capture:
        calls.append((device, duration_s, tuple(command)))
        return capture
    monkeypatch.setattr(record, "capture", fake)
    return calls


def block_stand_in(monkeypatch: pytest.MonkeyPatch, path: Path, size_bytes: int = 64 * MiB) -> Path:
    """A sparse file of ``size_bytes`` that the replay planner (``capture.plan``, which replays onto
    block devices only) takes for a blank block device of that size; the rest of iolab sees the file
    it is (the guard lets fio write it when it is named with ``--destroy``)."""
    with open(path, "wb") as f:
        f.truncate(size_bytes)
    real = targets.inspect

    def inspect(target: str, **kwargs: Any) -> TargetFacts:
        if os.path.abspath(target) == str(path):
            return TargetFacts(path=str(path), kind="block", size_bytes=size_bytes)
        return real(target, **kwargs)
    monkeypatch.setattr(plan_mod, "targets", SimpleNamespace(inspect=inspect))
    return path


def rows(*spec: tuple[int, int, int, int, int, int]) -> list[tuple[int, int, int, int, int, int, int]]:
    """Rows of ``count`` requests ``(count, first sector, sectors apart, bytes, op, pid)`` each, one
    every ms (100 µs of service), the groups one after another: a small trace written plainly."""
    out, t = [], 0
    for count, first, step, nbytes, op, pid in spec:
        for i in range(count):
            out.append((t, t + 100_000, first + i * step, nbytes, op, 0, pid))
            t += 1_000_000
    return out


def data_ios(document: dict[str, Any]) -> int:
    """Reads and writes fio did over all jobs of a replay's result (its JSON document)."""
    return sum(d["total_ios"] for job in document["results"][0]["jobs"] for name, d in job["directions"].items()
               if name in ("read", "write"))

