"""Method helpers around a measured job: preconditioning with steady-state detection, dropping
the page cache, and reading fio's own steady-state block. The suite's settings they apply
(``Method``, ``Precondition``) are ``describe.method``'s.

**Steady state** (SNIA SSS PTS, as in docs/design.md, section 4): over a window of the last 5 rounds, the range
(max − min) of the tracked variable is at most 20 % of the window's average, and the excursion
of the least-squares line over the window (slope × 4 rounds) is at most 10 % of the average.
Rounds stop as soon as the window satisfies both, or after ``rounds``. fio's own
``steadystate=`` option is a different, per-second criterion (FIO_NOTES §5); it passes through
to fio unchanged and ``fio_steady_state`` reads its JSON block.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .. import units
from ..describe.method import TRACKS, WINDOW, Precondition
from ..errors import IolabError
from ..facts.sysfs import meminfo_bytes
from ..fio import jobfile
from ..fio.merge import summarize
from ..model import FioReport

RANGE_LIMIT = 0.20
EXCURSION_LIMIT = 0.10
DROP_CACHES = "/proc/sys/vm/drop_caches"


# --- steady state (pure) ------------------------------------------------------------------------


@dataclass(frozen=True)
class SteadyState:
    """The PTS verdict on a series of per-round values (see the module docstring).

    ``round`` is the last round of the first window that satisfied the rule (1-based), or
    ``None``. ``window_end`` is the last round of the window the figures describe: that
    window, or the last one when never attained; ``None`` (and no figures) with fewer than
    ``WINDOW`` values.
    """

    attained: bool
    round: int | None
    window_end: int | None = None
    average: float | None = None
    range_pct: float | None = None
    excursion_pct: float | None = None
    slope: float | None = None

    def describe(self) -> str:
        """``attained at round 8 (rounds 4-8: range 3.0 % (limit 20 %), excursion 1.2 % (limit 10 %))``."""
        if self.window_end is None:
            return f"not judged (fewer than {WINDOW} rounds)"
        figures = (f"rounds {self.window_end - WINDOW + 1}-{self.window_end}: range {self.range_pct:.1f} % "
                   f"(limit {RANGE_LIMIT * 100:.0f} %), excursion {self.excursion_pct:.1f} % "
                   f"(limit {EXCURSION_LIMIT * 100:.0f} %)")
        if self.attained:
            return f"attained at round {self.round} ({figures})"
        return f"not attained in {self.window_end} rounds ({figures})"


def window_verdict(values: Sequence[float]) -> SteadyState:
    """Judge one window of exactly ``WINDOW`` values (rounds x = 0..4); ``window_end`` is None."""
    n = len(values)
    if n != WINDOW:
        raise ValueError(f"a window has {WINDOW} values, got {n}")
    average = sum(values) / n
    x_mean = (n - 1) / 2
    sxx = sum((x - x_mean) ** 2 for x in range(n))
    slope = sum((x - x_mean) * (y - average) for x, y in enumerate(values)) / sxx
    excursion = abs(slope) * (n - 1)
    spread = max(values) - min(values)
    ok = average > 0 and spread <= RANGE_LIMIT * average and excursion <= EXCURSION_LIMIT * average
    scale = 100 / average if average else float("inf")
    return SteadyState(attained=ok, round=None, average=average, range_pct=spread * scale,
                       excursion_pct=excursion * scale, slope=slope)


def steady_state(values: Sequence[float]) -> SteadyState:
    """The first window of ``values`` (in round order) that is steady, else the last window's
    figures with ``attained=False``. Source: SNIA SSS PTS steady-state definition (docs/design.md, section 4)."""
    verdict = SteadyState(False, None)
    for end in range(WINDOW, len(values) + 1):
        verdict = replace(window_verdict(values[end - WINDOW:end]), window_end=end)
        if verdict.attained:
            return replace(verdict, round=end)
    return verdict


def tracked_value(report: FioReport, track: str) -> float | None:
    """The round's value: IOPS or bytes/s summed over jobs and directions, or the I/O-weighted
    mean completion latency in ns (``lat_mean``)."""
    merged = summarize(report.jobs)
    directions = [d for name, d in merged.items() if name != "sync"]
    if track == "iops":
        values = [d.iops for d in directions if d.iops is not None]
        return sum(values) if values else None
    if track == "bw":
        values = [d.bw_bytes_s for d in directions if d.bw_bytes_s is not None]
        return sum(values) if values else None
    weighted = [(d.clat.mean_ns, d.total_ios) for d in directions
                if d.clat is not None and d.clat.mean_ns is not None and d.total_ios]
    total = sum(n for _, n in weighted)
    return sum(m * n for m, n in weighted) / total if total else None


def format_tracked(value: float | None, track: str) -> str:
    """A round's value for people: ``71,315 IOPS``, ``132.6 MiB/s``, ``225.7 us``."""
    if value is None:
        return "–"
    if track == "iops":
        return f"{units.format_iops(value)} IOPS"
    if track == "bw":
        return f"{units.format_rate(value)} MiB/s"
    return units.format_ns(value)


# --- fio's own steady state -------------------------------------------------------------------------


@dataclass(frozen=True)
class FioSteadyState:
    """fio's steady-state result: the ``steadystate`` JSON block (``stat.c``
    ``show_thread_status_json``) or the ``steadystate :`` line of normal output (``fio.normal``).

    ``metric`` is ``iops``, ``iops_slope``, ``bw`` or ``bw_slope``; ``criterion`` is what fio
    compared with ``limit`` (mean deviation or slope, in % when the limit is). ``limit``,
    ``duration_s`` and the samples are only in JSON; ``data_*`` are the last window's
    per-second samples (bandwidth in bytes/s there).
    """

    metric: str
    attained: bool
    criterion: str | None
    limit: str | None = None
    duration_s: int | None = None
    iops_mean: float | None = None
    bw_mean_bytes_s: float | None = None
    data_iops: tuple[float, ...] = ()
    data_bw_bytes_s: tuple[float, ...] = ()

    def describe(self) -> str:
        what, _, slope = self.metric.partition("_")
        setting = f" ({self.metric}:{self.limit} over {self.duration_s} s)" if self.limit else ""
        mean = f", mean {self.iops_mean:,.0f} IOPS" if self.iops_mean is not None else ""
        return (f"fio steady state{setting}: {'attained' if self.attained else 'not attained'}, "
                f"{what} {'slope' if slope else 'mean deviation'} {self.criterion}{mean}")


def fio_steady_state(block: Mapping[str, Any] | None) -> FioSteadyState | None:
    """Read fio's steady-state block: JSON ``{"ss": "iops:20.000000%", "attained": 1, …}`` or
    the normal-output mapping ``{"attained": 1, "metric": "iops mean dev", "criterion": …}``."""
    if not block or ("ss" not in block and "metric" not in block):
        return None
    if "ss" not in block:  # from normal output: "iops mean dev" / "bw slope"
        words = str(block["metric"]).split()
        metric = words[0] + ("_slope" if "slope" in words else "")
        return FioSteadyState(metric=metric, attained=bool(block.get("attained")), criterion=block.get("criterion"))
    metric, _, limit = str(block["ss"]).partition(":")
    limit = re.sub(r"\.?0+%$", "%", limit) if limit.endswith("%") else limit
    data = block.get("data") or {}

    def floats(key: str) -> tuple[float, ...]:
        return tuple(float(v) for v in data.get(key) or ())

    def num(value: Any) -> float | None:
        return float(value) if isinstance(value, int | float) else None

    return FioSteadyState(
        metric=metric, attained=bool(block.get("attained")), criterion=block.get("criterion"), limit=limit,
        duration_s=block.get("duration"), iops_mean=num(data.get("iops_mean")),
        bw_mean_bytes_s=num(data.get("bw_mean")), data_iops=floats("iops"), data_bw_bytes_s=floats("bw"),
    )


# --- preconditioning job texts ------------------------------------------------------------------------

#: Options a fill job keeps from the measured job: where the data lives and how big it is.
_LAYOUT = ("filename", "directory", "filename_format", "unique_filename", "size", "filesize", "offset", "nrfiles",
           "kb_base", "file_service_type")


def fill_job_text(job_text: str, precondition: Precondition, kind: str | None) -> str:
    """A fio job writing the measured job's region ``fill`` times sequentially with ``bs``
    (libaio, QD32, direct), as SNIA PTS workload-independent preconditioning prescribes.

    Only location and size options are kept, so the fill writes exactly the files or device
    region the workload uses. In a directory target each numjobs clone has its own file, so
    numjobs is kept; elsewhere clones share one file and one writer fills it.
    """
    sections = []
    for name, opts in jobfile.effective_jobs(jobfile.parse(job_text)):
        kept: list[jobfile.Option] = [(k, opts[k]) for k in _LAYOUT if k in opts]
        if kind == "directory" and "numjobs" in opts:
            kept.append(("numjobs", opts["numjobs"]))
        kept += [("rw", "write"), ("bs", precondition.bs), ("ioengine", "libaio"), ("iodepth", "32"),
                 ("direct", "1"), ("loops", str(precondition.fill))]
        sections.append(jobfile.Section(name, tuple(kept)))
    return jobfile.render(sections, [f"iolab: precondition fill {precondition.fill}x with bs={precondition.bs}"])


def round_job_text(job_text: str, round_time: str) -> str:
    """The measured job as one preconditioning round: time-based for ``round_time``, no ramp."""
    sections = tuple(
        s if s.is_global else jobfile.Section(s.name, (*s.options, ("time_based", "1"), ("runtime", round_time),
                                                       ("ramp_time", "0")))
        for s in jobfile.parse(job_text)
    )
    return jobfile.render(sections, [f"iolab: precondition round of {round_time}"])


def precondition(job_text: str, kind: str | None, settings: Precondition, *, fill: bool,
                 run_fio: Callable[[str, str], FioReport], note: Callable[[str], None]) -> dict[str, Any]:
    """Run the fill (when ``fill``) and the rounds; returns the record stored with the result.

    ``run_fio(label, job_text)`` runs one fio job and returns its report (raising
    ``IolabError`` when fio fails). Record: ``{"fill": {...}, "rounds": [{round, iops,
    bw_bytes_s, lat_mean_ns}], "track": ..., "steady_state": {...}}``.
    """
    record: dict[str, Any] = {}
    if settings.fill and fill:
        note(f"precondition: writing the region {settings.fill}× sequentially (bs={settings.bs})")
        report = run_fio("fill", fill_job_text(job_text, settings, kind))
        merged = summarize(report.jobs).get("write")
        record["fill"] = {"times": settings.fill, "bs": settings.bs,
                          "io_bytes": merged.io_bytes if merged else None,
                          "bw_bytes_s": merged.bw_bytes_s if merged else None}
    elif settings.fill:
        record["fill"] = {"times": settings.fill, "bs": settings.bs, "skipped": "done earlier in this run"}
    if settings.rounds:
        rounds: list[dict[str, Any]] = []
        values: list[float] = []
        verdict = SteadyState(False, None)
        for number in range(1, settings.rounds + 1):
            report = run_fio(f"round {number}", round_job_text(job_text, settings.round_time))
            entry = {"round": number, **{t: tracked_value(report, t) for t in TRACKS}}
            rounds.append(entry)
            value = entry[settings.track]
            if value is None:
                raise IolabError(f"precondition round {number} produced no {settings.track} value",
                                 hint="check that the workload does I/O")
            values.append(value)
            verdict = steady_state(values)
            note(f"precondition round {number}/{settings.rounds}: {format_tracked(value, settings.track)}"
                 + (f" — steady state {verdict.describe()}" if verdict.attained else ""))
            if verdict.attained:
                break
        record.update(rounds=rounds, track=settings.track, steady_state={
            "attained": verdict.attained, "round": verdict.round, "average": verdict.average,
            "range_pct": verdict.range_pct, "excursion_pct": verdict.excursion_pct,
            "rule": f"SNIA PTS: window {WINDOW}, range <= {RANGE_LIMIT:.0%}, excursion <= {EXCURSION_LIMIT:.0%}",
            "verdict": verdict.describe()})
    return record


# --- dropping the page cache -------------------------------------------------------------------------------


def resident_bytes(path: str) -> int | None:
    """Bytes of a regular file in the page cache (``mincore(2)`` over a read-only mapping);
    ``None`` when the file cannot be mapped."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0
        page = mmap.PAGESIZE
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long)
        libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
        libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
        resident = 0
        chunk = 1 << 30
        for offset in range(0, size, chunk):
            length = min(chunk, size - offset)
            addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
            if addr in (None, ctypes.c_void_p(-1).value):
                return None
            try:
                vec = ctypes.create_string_buffer((length + page - 1) // page)
                if libc.mincore(addr, length, vec) != 0:
                    return None
                resident += sum(b & 1 for b in vec.raw) * page
            finally:
                libc.munmap(addr, length)
        return min(resident, size)
    finally:
        os.close(fd)


def check_drop_caches() -> None:
    """Raise ``IolabError`` when this process cannot write ``/proc/sys/vm/drop_caches``."""
    if not os.access(DROP_CACHES, os.W_OK):
        raise IolabError("drop_caches: cannot write /proc/sys/vm/drop_caches (needs root, and not a read-only /proc)",
                         hint="run as root, or remove drop_caches from the suite")


def drop_caches(files: Sequence[str] = ()) -> dict[str, Any]:
    """``sync``, write 3 to ``/proc/sys/vm/drop_caches`` (page cache, dentries and inodes;
    ``Documentation/admin-guide/sysctl/vm.rst``), then verify.

    Verification: ``Cached`` of /proc/meminfo before and after, and each regular file in
    ``files`` must have at most 1 % (and no more than 1 MiB) left in the page cache. Returns
    ``{"cached_before_bytes", "cached_after_bytes", "resident_bytes": {file: n}, "verified"}``.
    Raises ``IolabError`` when the write is refused.
    """
    before = meminfo_bytes("Cached")
    subprocess.run(["sync"], check=False)
    try:
        with open(DROP_CACHES, "w", encoding="ascii") as f:
            f.write("3\n")
    except OSError as exc:
        raise IolabError(f"drop_caches: writing {DROP_CACHES} failed: {exc.strerror}",
                         hint="run as root, or remove drop_caches from the suite") from exc
    after = meminfo_bytes("Cached")
    resident = {}
    verified = True
    for path in files:
        if not os.path.isfile(path):
            continue
        left = resident_bytes(path)
        resident[path] = left
        size = os.path.getsize(path)
        if left is not None and left > min(1 << 20, max(size // 100, mmap.PAGESIZE)):
            verified = False
    return {"cached_before_bytes": before, "cached_after_bytes": after, "resident_bytes": resident,
            "verified": verified}
