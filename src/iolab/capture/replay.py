"""A capture replayed with fio: iologs (format v3) per I/O size class and lane, and the job file that runs them.

Each size class (the request size rounded up to a power of two: ``bs-4k``, ``bs-64k`` …) is one
fio reporting group replaying only its requests at their original times, all groups running at
once; a flush is fio's ``sync`` action (on a block device, a flush) in the class of the write
before it. So a replay's results come per class × direction (read/write), and ``iolab compare``
pairs the classes of two replays, or of a replay and the capture itself (``record.capture_report``
gives the capture the same shape).

Within a class the requests are dealt to **lanes** (``lanes``): a request joins a lane whose
previous request had completed in the trace when it was issued, so a lane holds one request at a
time and there are as many lanes as the class's requests ever overlapped. Each lane is a fio job
at ``iodepth=1`` (the class's lanes are one reporting group: ``group_reporting``, ``new_group``).
Why not one job at the trace's depth: fio 3.33 reaps completions only when a job's queue is full,
and sleeps between logged I/Os without reaping (``iolog_delay`` in ``iolog.c``; fixed in 3.36), so
an I/O completed during a sleep counted the sleep as latency — a 4k randrw trace whose clat p99
was 76 µs replayed at p99 2.1-2.9 ms. At depth 1 fio waits for each completion as it happens. It
also loses each sleep's overshoot (the next sleep is not shortened by it): per job, so spreading a
class over lanes spreads the loss (the same trace ran 5.32 s in one job at depth 1, 5.08-5.13 s in
four lanes, from 5.00 s). A request joins the lane free longest, so the lanes share the requests
evenly; packing them into the lowest free lane instead (14,335 of 15,001 in one) halved the clat
p99 on the shared 2-CPU VM (fewer threads waking at once) but ran 5.59-5.75 s.

iolog v3 timestamps are µs since the job's start (measured with fio 3.33: entries 2 000 000 apart
replay 2 s apart); they are the trace's issue times plus 1 µs, because fio does not wait before
the first I/O after an entry at time 0 (``delay_since_ttime`` treats a last time of 0 as "none").
fio sends every logged I/O to ``replay_redirect``. ``replay_no_stall`` drops the timing (as fast
as the depth allows), ``replay_time_scale`` stretches it (percent). A target smaller than the
traced range gets ``replay_scale`` (offsets divided by it) and ``replay_align=4096``. Source: fio
HOWTO "Trace file format v3", ``replay_*`` options; fio 3.33 ``iolog.c``, ``backend.c``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import jobfile
from .trace import FLUSH, READ, WRITE, Trace


def size_class(nbytes: int) -> str:
    """``bs-4k`` for 1..4096 bytes, ``bs-8k`` for 4097..8192 …, ``bs-1m``, ``bs-2m`` …"""
    top = 1 << max(12, math.ceil(math.log2(max(nbytes, 1))))
    return f"bs-{top >> 20}m" if top >= 1 << 20 else f"bs-{top >> 10}k"


def classes(trace: Trace) -> dict[str, np.ndarray]:
    """Job name -> sorted index array of its requests: data requests by size class, smallest class
    first; each flush joins the class of the last write before it (the write it makes durable; the
    first class when none), because fio refuses an iolog without reads or writes ("failed
    initializing iolog"). Discards and other requests are not replayed."""
    out: dict[str, list[int]] = {}
    last_write: str | None = None
    pending_flushes: list[int] = []
    for index, (op, nbytes) in enumerate(zip(trace.op.tolist(), trace.nbytes.tolist(), strict=True)):
        if op in (READ, WRITE):
            label = size_class(nbytes)
            out.setdefault(label, []).append(index)
            last_write = label if op == WRITE else last_write
        elif op == FLUSH:
            if last_write is None:
                pending_flushes.append(index)
            else:
                out[last_write].append(index)
    if out and pending_flushes:
        first = min(out, key=_class_bytes)
        out[first] = sorted(out[first] + pending_flushes)
    return {k: np.asarray(out[k], dtype=np.int64) for k in sorted(out, key=_class_bytes)}


def _class_bytes(label: str) -> int:
    number = int(label[3:-1])
    return number << (20 if label.endswith("m") else 10)


#: Issue times in the iologs are rounded down to this many µs (see ``iolog_text``); 1: as traced.
QUANTUM_US = 1


def lanes(trace: Trace, indices: np.ndarray) -> list[np.ndarray]:
    """``indices`` (issue order) dealt to lanes, each a sorted index array: a request joins the lane
    free longest (its last request completed in the trace at or before this issue), or a new lane
    when none is free; a request never completed keeps its lane forever. A lane of flushes only
    joins the first lane with data (fio refuses an iolog without reads or writes). Pure."""
    free_at: list[tuple[int, int]] = []  # a heap of (when the lane's last request completed, lane)
    out: list[list[int]] = []
    never = np.iinfo(np.int64).max
    for i, issued, done in zip(indices.tolist(), trace.issue_ns[indices].tolist(),
                               trace.complete_ns[indices].tolist(), strict=True):
        if free_at and free_at[0][0] <= issued:
            _, k = heapq.heappop(free_at)  # the lane free longest
        else:
            k = len(out)
            out.append([])
        heapq.heappush(free_at, (done if done >= 0 else never, k))
        out[k].append(i)
    data = [lane for lane in out if any(int(trace.op[i]) in (READ, WRITE) for i in lane)]
    for lane in out:
        if data and not any(int(trace.op[i]) in (READ, WRITE) for i in lane):
            data[0].extend(lane)
    return [np.asarray(sorted(lane), dtype=np.int64) for lane in data]


def replay_jobs(trace: Trace) -> dict[str, np.ndarray]:
    """fio job name -> its requests: the lanes (``lanes``) of each class (``classes``), named
    ``bs-4k``, ``bs-4k.2``, ``bs-4k.3`` … (the first lane names the class's reporting group)."""
    out: dict[str, np.ndarray] = {}
    for name, indices in classes(trace).items():
        for number, lane in enumerate(lanes(trace, indices), start=1):
            out[name if number == 1 else f"{name}.{number}"] = lane
    return out


def iolog_text(trace: Trace, indices: np.ndarray, device: str, quantum_us: int = QUANTUM_US) -> str:
    """An iolog v3 replaying ``indices`` of ``trace`` on ``device``: times in µs since the capture
    began (rounded down to ``quantum_us``), plus 1 (see the module docstring)."""
    actions = {READ: "read", WRITE: "write", FLUSH: "sync"}
    lines = ["fio version 3 iolog", f"1 {device} add", f"1 {device} open"]
    t_us = trace.issue_ns[indices] // 1000 // max(1, quantum_us) * max(1, quantum_us) + 1
    for t, op, sector, nbytes in zip(t_us.tolist(), trace.op[indices].tolist(), trace.sector[indices].tolist(),
                                     trace.nbytes[indices].tolist(), strict=True):
        # fio reads every I/O action with an offset and a length, a sync's being 0 0 (as write_iolog logs it)
        lines.append(f"{t} {device} {actions[op]} " + ("0 0" if op == FLUSH else f"{sector * 512} {nbytes}"))
    end = int(t_us[-1]) + 1 if t_us.size else 2
    lines.append(f"{end} {device} close")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ReplaySettings:
    """How to replay: ``as_fast_as_possible`` is ``replay_no_stall``; ``time_scale_pct`` is
    ``replay_time_scale`` (100: original timing, 200: half as fast); ``scale`` is ``replay_scale``."""

    as_fast_as_possible: bool = False
    time_scale_pct: int = 100
    scale: int = 1
    ioengine: str = "libaio"
    quantum_us: int = QUANTUM_US


def needed_scale(lba_end_bytes: int, target_bytes: int | None) -> int:
    """The ``replay_scale`` that fits the traced range into the target: 1 when it fits (or the size is unknown)."""
    if not target_bytes or lba_end_bytes <= target_bytes:
        return 1
    return math.ceil(lba_end_bytes / target_bytes)


def iolog_name(job: str, quantum_us: int = QUANTUM_US) -> str:
    """``bs-4k.iolog``, or ``bs-4k-q10000us.iolog`` for another quantum (so the job options differ)."""
    return f"{job}.iolog" if quantum_us == QUANTUM_US else f"{job}-q{quantum_us}us.iolog"


def write_iologs(trace: Trace, directory: Path, device: str, quantum_us: int = QUANTUM_US) -> dict[str, Path]:
    """One iolog per fio job (``replay_jobs``) in ``directory`` (created); job name -> path."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, indices in replay_jobs(trace).items():
        path = directory / iolog_name(name, quantum_us)
        path.write_text(iolog_text(trace, indices, device, quantum_us))
        paths[name] = path
    return paths


def job_text(iologs: Mapping[str, Path], settings: ReplaySettings, description: str) -> str:
    """The fio job file replaying ``iologs`` (job name -> path, as ``write_iologs`` names them): one
    job per lane at ``iodepth=1``, all started together (no ``stonewall``), the lanes of a class one
    reporting group named after the class (``group_reporting``; ``new_group`` at each class's first lane)."""
    common: list[tuple[str, str | None]] = [("ioengine", settings.ioengine), ("direct", "1"),
                                            ("thread", None), ("group_reporting", None)]
    if settings.as_fast_as_possible:
        common.append(("replay_no_stall", "1"))
    if settings.time_scale_pct != 100:
        common.append(("replay_time_scale", str(settings.time_scale_pct)))
    if settings.scale > 1:
        common += [("replay_scale", str(settings.scale)), ("replay_align", "4096")]
    sections = [jobfile.Section("global", tuple(common))]
    for name, path in iologs.items():
        first = "." not in name[3:]
        sections.append(jobfile.Section(name, (("read_iolog", str(path)), ("iodepth", "1"),
                                               *((("new_group", None),) if first else ()))))
    return jobfile.render(tuple(sections), [description])


def _mask(n: int, indices: np.ndarray) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[indices] = True
    return mask
