"""Read fio's terse output (``--minimal``, ``--output-format=terse``, terse versions 2-5).

One ``;``-separated line per job or reporting group (``show_thread_status_terse_all()`` in
``stat.c@fio-3.33``; HOWTO.rst "Terse output"; FIO_NOTES §2.4)::

    ver;fio_version;jobname;groupid;error        (v2: no fio_version)
    then per direction READ, WRITE, TRIM (v2/v4/v5 only; fio < 2.0.10 v2 had no TRIM):
      io_KiB;bw_KiB/s;iops;runtime_ms; slat min;max;mean;dev; clat min;max;mean;dev;
      20 percentile fields "P%=value" (unused slots "0%=0"); lat min;max;mean;dev;
      bw min;max;agg%;mean;dev  [v5: ;bw_samples; iops min;max;mean;dev;samples]
    cpu usr%;sys%;ctx;majf;minf; 7 IO depth %; 10 latency-µs %; 12 latency-ms %
    per disk (v3+): name;read_ios;write_ios;read_merges;write_merges;read_ticks;write_ticks;
      in_queue;util%  [;slaves;8 aggregate fields]
    [;total_err;first_error]  (continue_on_error)   [;description]  (v2: on the next line)

What the format carries, and so what this parser returns:

* Latencies are µs (``ns / 1000`` truncated for min/max/percentiles; ``%f`` means); converted
  to ns. Percentile values are therefore up to 1 µs *below* fio's bucket value. With
  ``lat_percentiles=1`` fio prints total-latency percentiles in these slots; the line does not
  say so, and they are stored as clat percentiles (fio's column name).
* ``io_KiB`` is ``io_bytes >> 10``: ``io_bytes`` = KiB × 1024, exact whenever the I/O sizes are
  whole KiB (otherwise up to 1023 bytes low). Bandwidth is recomputed from it and the runtime.
* There is no I/O count: ``total_ios`` is None and ``iops`` is fio's integer
  ``1000 * total / runtime``, *truncated* (up to 1 IOPS low; a warning says so below 1000 IOPS).
* The µs latency buckets include the 3.x ns buckets folded into the first (``stat_calc_lat_nu``),
  so ``latency_dist_pct["2us"]`` means "under 2 µs".
* ``unified_rw_reporting``: a line with one direction block is ``mixed``; with ``both`` the
  extra block after read/write(/trim) is ``mixed``. The layout is found by validating the CPU
  section's position, which also accepts fio 1.99's order (lat before percentiles).
* ``--status-interval``: every line of one report carries the same disk figures, snapshots carry
  different (growing) ones; when the lines split into runs by disk figures and every run lists the
  same jobs with growing runtimes, only the last run is kept (with a warning).

Errors: ``ParseError`` naming the input and line when a line starting ``2;``-``5;`` does not
have a terse layout, or when no terse line is found.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

from ..errors import ParseError
from ..model import DISK_AGGREGATE_KEYS, DirectionStats, DiskUtil, FioReport, JobResult, Latency, SampleStats, pct_key
from . import validate

_DEPTH_KEYS = ("1", "2", "4", "8", "16", "32", ">=64")
_LAT_KEYS = tuple(f"{b}us" for b in (2, 4, 10, 20, 50, 100, 250, 500, 750, 1000)) + tuple(
    f"{b}ms" for b in ("2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000")
)
#: Direction blocks per line: version -> (normal, mixed, both, [fio < 2.0.10 v2]).
_BLOCK_COUNTS = {2: (3, 1, 4, 2), 3: (2, 1, 3), 4: (3, 1, 4), 5: (3, 1, 4)}
_CPU_FIELDS = 34


@dataclass(slots=True)
class _Line:
    """One parsed terse job line, before snapshot selection."""

    job: JobResult
    lineno: int
    disks: tuple[DiskUtil, ...]
    disk_sig: tuple[str, ...] | None
    total_err: tuple[int, int] | None


class _TerseError(Exception):
    """Internal: this candidate layout does not fit; the caller tries the next or reports."""


def _int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise _TerseError(f"expected an integer, got {validate.short_repr(text)}") from None
    if abs(value) > validate.MAX_COUNT:
        raise _TerseError(f"{validate.short_repr(value)} is beyond fio's 64-bit counters")
    return value


def _float(text: str) -> float:
    try:
        value = float(text.removesuffix("%"))
    except ValueError:
        raise _TerseError(f"expected a number, got {validate.short_repr(text)}") from None
    if math.isnan(value) or math.isinf(value):
        raise _TerseError(f"expected a finite number, got {validate.short_repr(text)}")
    return value


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def _latency(f: list[str], at: int, pcts: dict[str, float] | None = None) -> Latency | None:
    """min;max;mean;dev in µs at ``f[at:at+4]``; all zero means fio measured nothing."""
    lo, hi, mean, dev = _int(f[at]), _int(f[at + 1]), _float(f[at + 2]), _float(f[at + 3])
    if hi == 0 and mean == 0.0:
        return Latency(percentiles_ns=pcts) if pcts else None
    return Latency(min_ns=lo * 1000.0, max_ns=hi * 1000.0, mean_ns=round(mean * 1000.0, 3),
                   stddev_ns=round(dev * 1000.0, 3), percentiles_ns=pcts or {})


def _percentiles(f: list[str], at: int) -> dict[str, float]:
    out = {}
    for item in f[at:at + 20]:
        pct, sep, value = item.partition("%=")
        if not sep:
            raise _TerseError(f"expected a percentile field like '99.000000%=123', got {item!r}")
        if _float(pct) > 0:  # unused slots are "0%=0"
            out[pct_key(pct)] = _int(value) * 1000.0
    return out


def _block_is_modern(f: list[str], at: int) -> bool:
    """fio >= 2.0 prints percentiles right after clat; 1.99.x printed lat first."""
    return "%=" in f[at + 12]


def _direction(name: str, f: list[str], at: int, version: int) -> DirectionStats | None:
    kib, bw_kib, iops, runtime = (_int(f[at + i]) for i in range(4))
    modern = _block_is_modern(f, at)
    pct_at, lat_at = (at + 12, at + 32) if modern else (at + 16, at + 12)
    pcts = _percentiles(f, pct_at)
    if kib == 0 and iops == 0 and runtime == 0:
        return None
    io_bytes = kib * 1024
    if runtime > 0:  # fio prints (1000 * io_bytes / runtime) / 1024 (kb_base 1000: / 1000); kib is io_bytes >> 10
        exact, slack = 1000 * io_bytes / runtime, 2 + 1000 / runtime
        if min(abs(bw_kib - exact / 1024), abs(bw_kib - exact / 1000)) > slack + 1e-6 * bw_kib:
            raise _TerseError(f"{name} bandwidth {bw_kib} KiB/s contradicts {kib} KiB in {runtime} ms "
                              f"({exact / 1024:.1f} KiB/s): a damaged size or runtime")
    bw_lo, bw_hi, _, bw_mean, bw_dev = f[at + 36:at + 41]
    bw_count = _int(f[at + 41]) if version == 5 else None
    bw = None
    if _float(bw_mean) != 0.0 and bw_count != 0:
        bw = SampleStats(min=_int(bw_lo) * 1024.0, max=_int(bw_hi) * 1024.0, mean=_float(bw_mean) * 1024.0,
                         stddev=_float(bw_dev) * 1024.0, samples=bw_count)
    iops_stats = None
    if version == 5 and _int(f[at + 46]) > 0:
        lo, hi, mean, dev, count = f[at + 42:at + 47]
        iops_stats = SampleStats(min=float(_int(lo)), max=float(_int(hi)), mean=_float(mean),
                                 stddev=_float(dev), samples=_int(count))
    return DirectionStats(
        direction=name, io_bytes=io_bytes, runtime_ms=runtime, iops=float(iops) if runtime else None,
        bw_bytes_s=1000.0 * io_bytes / runtime if runtime else None,
        slat=_latency(f, at + 4), clat=_latency(f, at + 8, pcts), lat=_latency(f, lat_at),
        bw_samples=bw, iops_samples=iops_stats,
    )


def _cpu_fits(f: list[str], at: int) -> bool:
    """Whether the 34 CPU/depth/latency fields start at ``f[at]``."""
    if len(f) < at + _CPU_FIELDS:
        return False
    cpu = f[at:at + _CPU_FIELDS]
    return (
        cpu[0].endswith("%") and cpu[1].endswith("%") and all(_is_int(x) for x in cpu[2:5])
        and all(x.endswith("%") and "=" not in x for x in cpu[5:])
    )


def _layout(f: list[str], version: int, start: int) -> tuple[int, int]:
    """Number of direction blocks and their length, by where the CPU section fits."""
    block = 47 if version == 5 else 41
    for count in _BLOCK_COUNTS[version]:
        at = start + count * block
        if _cpu_fits(f, at) and all("%=" in f[start + i * block + 12] or "%=" in f[start + i * block + 16]
                                    for i in range(count)):
            return count, block
    raise _TerseError(
        f"terse v{version} line with {len(f)} fields: no layout fits (expected read/write"
        f"{'' if version == 3 else '/trim'} blocks of {block} fields, then usr%;sys%;ctx;majf;minf)"
    )


def _disks(rest: list[str]) -> tuple[list[DiskUtil], list[str]]:
    """Disk groups of 9 fields (``name;…;util%`` and ``slaves;…`` aggregates); returns the rest."""
    disks: list[DiskUtil] = []
    while len(rest) >= 9 and all(_is_int(x) for x in rest[1:8]) and rest[8].endswith("%"):
        name, values = rest[0], rest[1:9]
        rest = rest[9:]
        if name == "slaves" and disks:
            aggregate = {k: _float(v) for k, v in zip(DISK_AGGREGATE_KEYS, values, strict=True)}
            last = disks[-1]
            disks[-1] = replace(last, aggregate=aggregate)
            continue
        rio, wio, rm, wm, rt, wt, queue = (int(v) for v in values[:7])
        disks.append(DiskUtil(name=name, read_ios=rio, write_ios=wio, read_merges=rm, write_merges=wm,
                              read_ticks_ms=rt, write_ticks_ms=wt, in_queue_ms=queue,
                              util_pct=_float(values[7])))
    return disks, rest


def _job_line(f: list[str], lineno: int, index: int) -> tuple[_Line, str | None]:
    version = _int(f[0])
    start, fio_version = (4, None) if version == 2 else (5, f[1].removeprefix("fio-"))
    name, groupid, error = f[start - 3], _int(f[start - 2]), _int(f[start - 1])
    count, block = _layout(f, version, start)
    base = ["read", "write"] if version == 3 else ["read", "write", "trim"]
    names = ["mixed"] if count == 1 else [*base, "mixed"] if count == len(base) + 1 else base[:count]
    directions = {}
    for i, dname in enumerate(names):
        stats = _direction(dname, f, start + i * block, version)
        if stats is not None:
            directions[dname] = stats
    cpu_at = start + count * block
    cpu = f[cpu_at:cpu_at + _CPU_FIELDS]
    disks, rest = _disks(f[cpu_at + _CPU_FIELDS:])
    total_err = None
    if len(rest) >= 2 and _is_int(rest[0]) and _is_int(rest[1]):
        total_err, rest = (int(rest[0]), int(rest[1])), rest[2:]
    job = JobResult(
        name=name, index=index, groupid=groupid, error=error, directions=directions,
        usr_cpu_pct=_float(cpu[0]), sys_cpu_pct=_float(cpu[1]), ctx=_int(cpu[2]), majf=_int(cpu[3]),
        minf=_int(cpu[4]), iodepth_level_pct=dict(zip(_DEPTH_KEYS, map(_float, cpu[5:12]), strict=True)),
        latency_dist_pct=dict(zip(_LAT_KEYS, map(_float, cpu[12:]), strict=True)),
        job_options={"description": ";".join(rest)} if rest else {},
    )
    sig = tuple(f[cpu_at + _CPU_FIELDS: cpu_at + _CPU_FIELDS + 9 * len(disks)]) if disks else None
    return _Line(job, lineno, tuple(disks), sig, total_err), fio_version


def _snapshots(lines: list[_Line]) -> tuple[list[_Line], int]:
    """The last report of a ``--status-interval`` series, and how many lines were dropped.

    Lines of one report carry identical disk figures; consecutive runs of equal figures are
    reports. They are collapsed only when every run lists the same jobs (name, group) and each
    job's runtimes grow from run to run; anything else is kept whole.
    """
    if len(lines) < 2 or any(line.disk_sig is None for line in lines):
        return lines, 0
    runs: list[list[_Line]] = [[lines[0]]]
    for line in lines[1:]:
        if line.disk_sig == runs[-1][-1].disk_sig:
            runs[-1].append(line)
        else:
            runs.append([line])
    if len(runs) < 2:
        return lines, 0
    keys = [[(x.job.name, x.job.groupid) for x in run] for run in runs]
    if any(k != keys[-1] for k in keys):
        return lines, 0
    for earlier, later in itertools.pairwise(runs):
        for a, b in zip(earlier, later, strict=True):
            for dname, d in a.job.directions.items():
                other = b.job.directions.get(dname)
                if other is None or (other.runtime_ms or 0) < (d.runtime_ms or 0):
                    return lines, 0
    return runs[-1], len(lines) - len(runs[-1])


def _warnings(lines: list[_Line], dropped: int) -> list[str]:
    warnings = []
    if dropped:
        warnings.append(f"{dropped} terse line(s) were --status-interval snapshots superseded by the "
                        f"last report (same jobs, growing runtimes, different disk figures); only the last is kept")
    for line in lines:
        job = line.job
        if job.error:
            warnings.append(f"job {job.name!r} (group {job.groupid}) ended with fio error {job.error}")
        if line.total_err is not None and line.total_err[0]:
            warnings.append(f"job {job.name!r}: continue_on_error ignored {line.total_err[0]} errors, "
                            f"the first errno {line.total_err[1]}")
        for d in job.directions.values():
            if d.iops is not None and 0 < d.iops < 1000:
                warnings.append(f"job {job.name!r} {d.direction}: terse IOPS={d.iops:.0f} is fio's integer, "
                                f"truncated (up to 1 IOPS, {100 / d.iops:.2g}% low); use JSON for exact IOPS")
    return warnings


def parse_terse(text: str, name: str = "<input>") -> FioReport:
    """Parse fio terse output (v2-v5, several jobs, client-mode disk lines) into a FioReport.

    See the module docstring for units and what is unknown. Raises ``ParseError`` naming ``name``
    and the line when a line that starts like terse (``3;``) cannot be read, or none is found.
    """
    lines: list[_Line] = []
    extra_disks: list[DiskUtil] = []
    version: str | None = None
    for lineno, raw in enumerate(text.split("\n"), 1):
        s = raw.strip()
        if len(s) > 2 and s[0] in "2345" and s[1] == ";":
            fields = s.split(";")
            try:
                line, line_version = _job_line(fields, lineno, len(lines))
            except IndexError as exc:
                raise ParseError(f"{name}, line {lineno}: cannot read this terse line: it ends after "
                                 f"{len(fields)} fields") from exc
            except (_TerseError, ValueError, ArithmeticError) as exc:
                raise ParseError(f"{name}, line {lineno}: cannot read this terse line: {exc}") from exc
            lines.append(line)
            version = version or line_version
        elif s.startswith(";") and len(s) > 1:
            _continuation(s, lines, extra_disks)
    if not lines:
        raise ParseError(f"{name}: no fio terse line found (expected lines like '3;fio-3.33;job;0;0;…')")
    kept, dropped = _snapshots(lines)
    jobs = tuple(replace(line.job, index=i) for i, line in enumerate(kept))
    disks = next((line.disks for line in reversed(kept) if line.disks), ()) + tuple(extra_disks)
    report = FioReport(source_format="terse", jobs=jobs, fio_version=version, disk_util=disks,
                       warnings=tuple(_warnings(kept, dropped)))
    return validate.check(report, name, lambda violation: _locate(kept, violation))


def _locate(kept: list[_Line], violation: validate.Violation) -> tuple[int | None, None, object]:
    """The line of the job a ``validate`` violation is in (for ``validate.check``)."""
    place = violation.place
    if place[:1] == ("jobs",) and len(place) > 1 and isinstance(place[1], int) and place[1] < len(kept):
        return kept[place[1]].lineno, None, validate.UNKNOWN
    return None, None, validate.UNKNOWN


def _continuation(s: str, lines: list[_Line], extra_disks: list[DiskUtil]) -> None:
    """A line starting with ``;``: client-mode disk figures, or a v2 description."""
    try:
        disks, rest = _disks(s[1:].split(";"))
    except _TerseError:
        disks, rest = [], [s[1:]]
    if disks and not rest:
        extra_disks.extend(disks)
    elif lines and not lines[-1].job.job_options:
        last = lines[-1]
        last.job = replace(last.job, job_options={"description": s[1:]})
