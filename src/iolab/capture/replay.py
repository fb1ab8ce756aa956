"""A capture replayed with fio: iologs (format v3) per I/O size class, and the job file that runs them.

Each size class (the request size rounded up to a power of two: ``bs-4k``, ``bs-64k`` …) becomes one
fio job replaying only its requests at their original times, all jobs running at once; a flush is
fio's ``sync`` action (on a block device, a flush) in the job of the write before it.
So a replay's results come per class × direction (read/write), and ``iolab compare`` pairs the
classes of two replays, or of a replay and the capture itself (``record.capture_report`` gives the
capture the same shape).

iolog v3 timestamps are µs since the job's start (measured with fio 3.33: entries 2 000 000 apart
replay 2 s apart), and fio sends every logged I/O to ``replay_redirect``. ``replay_no_stall``
drops the timing (as fast as the depth allows), ``replay_time_scale`` stretches it (percent).
A target smaller than the traced range gets ``replay_scale`` (offsets divided by it) and
``replay_align=4096``. Source: fio HOWTO "Trace file format v3", ``replay_*`` options.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import jobfile
from .trace import FLUSH, READ, WRITE, Trace

MAX_IODEPTH = 256


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


#: Issue times in the iologs are rounded down to this many µs (see ``iolog_text``).
QUANTUM_US = 1000


def iolog_text(trace: Trace, indices: np.ndarray, device: str, quantum_us: int = QUANTUM_US) -> str:
    """An iolog v3 replaying ``indices`` of ``trace`` on ``device`` (times in µs since the capture began,
    rounded down to ``quantum_us``).

    Why round: fio sleeps before every logged I/O for its gap to the one before, and when a sleep
    overruns the next gap it skips that sleep *and forgets the overrun* (``iolog_delay`` in
    ``iolog.c``), and when issuing took longer than a gap the excess is lost too: on a busy machine a
    trace of many short gaps replays ever later. Requests in one quantum share a time, so fio sleeps
    at most once a quantum. Measured on a shared 2-CPU VM, a 5.0 s trace of 3,000 IOPS (fio
    randrw, rate_iops) replayed in 6.3 s unrounded, 5.7 s with 1 ms, 5.45 s with 10 ms and 4.96 s
    with 100 ms quanta; larger quanta issue in bursts, which raises latency."""
    actions = {READ: "read", WRITE: "write", FLUSH: "sync"}
    lines = ["fio version 3 iolog", f"0 {device} add", f"0 {device} open"]
    t_us = trace.issue_ns[indices] // 1000 // max(1, quantum_us) * max(1, quantum_us)
    for t, op, sector, nbytes in zip(t_us.tolist(), trace.op[indices].tolist(), trace.sector[indices].tolist(),
                                     trace.nbytes[indices].tolist(), strict=True):
        # fio reads every I/O action with an offset and a length, a sync's being 0 0 (as write_iolog logs it)
        lines.append(f"{t} {device} {actions[op]} " + ("0 0" if op == FLUSH else f"{sector * 512} {nbytes}"))
    end = int(t_us[-1]) + 1 if t_us.size else 1
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
    """One iolog per class (``classes``) in ``directory`` (created); job name -> path."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, indices in classes(trace).items():
        path = directory / iolog_name(name, quantum_us)
        path.write_text(iolog_text(trace, indices, device, quantum_us))
        paths[name] = path
    return paths


def job_text(trace: Trace, iologs: Mapping[str, Path], settings: ReplaySettings, description: str) -> str:
    """The fio job file replaying ``iologs``: one job per class, all started together (no
    ``stonewall``); ``iodepth`` per job is the most requests of that class in flight at once in
    the trace (at least 1, at most ``MAX_IODEPTH``) so the replay can keep the original depth."""
    from .fingerprint import depth_steps
    groups = classes(trace)
    common: list[tuple[str, str | None]] = [("ioengine", settings.ioengine), ("direct", "1"),
                                            ("thread", None)]
    if settings.as_fast_as_possible:
        common.append(("replay_no_stall", "1"))
    if settings.time_scale_pct != 100:
        common.append(("replay_time_scale", str(settings.time_scale_pct)))
    if settings.scale > 1:
        common += [("replay_scale", str(settings.scale)), ("replay_align", "4096")]
    sections = [jobfile.Section("global", tuple(common))]
    for name, path in iologs.items():
        _, depth = depth_steps(trace.select(_mask(len(trace), groups[name])))
        iodepth = int(min(MAX_IODEPTH, max(1, depth.max(initial=1))))
        sections.append(jobfile.Section(name, (("read_iolog", str(path)), ("iodepth", str(iodepth)))))
    return jobfile.render(tuple(sections), [description])


def _mask(n: int, indices: np.ndarray) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[indices] = True
    return mask
