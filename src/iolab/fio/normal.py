"""Read fio's normal (human-readable) output, fio 2.0 to 3.42, into a FioReport.

The format prints numbers rounded for people; this parser keeps only what is exact and says so
when fio's display disagrees. Sources: ``show_thread_status_normal()``, ``show_ddir_status()``,
``display_lat()``, ``show_clat_percentiles()``, ``print_disk_util()`` in ``stat.c`` and
``lib/num2str.c`` at tags fio-2.2.8 … 3.42 (FIO_NOTES §2).

* **IOPS** is fio's own formula, ``issued_total[dir] * 1000 / runtime_ms[dir]`` (stat.c), with the
  totals from ``issued rwts: total=R,W,T,S`` (2.x ``issued : total=r=…/w=…/d=…``) and the runtime
  from the direction line (``(…/3001msec)``, 2.x ``runt=``). The printed ``IOPS=71.3k`` is only
  checked: when it is further from the exact value than one unit of its last digit, a warning says
  what was printed, what is exact and why (fio 2.20–3.25 drop num2str's carry: 10999 prints as
  ``10.0k``; fio before 2.20 print the remainder's leading digits as decimals).
* **Bytes** are known only as ``total × bs`` when the job header line (``bs=(R) 4096B-4096B``,
  2.x ``bs=4K-4K/…``) gives one fixed block size for the direction, no I/O was short, and the
  printed io size agrees; otherwise ``io_bytes`` and ``bw_bytes_s`` are None (the printed sizes are
  rounded to 3–4 figures). A block size fio abbreviated (``64.0KiB``, ``128KiB``) is taken to be a
  multiple of 512 bytes and must be the only such size that reproduces both printed values. These
  are the bytes of the counted I/Os: with ``ramp_time`` fio's own io_bytes also holds the ≤ iodepth
  I/Os in flight when the ramp ended, which total_io_u does not (8 of 476318 blocks in a sample).
* **Latencies** are converted to ns from each line's unit (2.x prints µs). fio truncates min/max to
  that unit and rounds avg/stdev to 2 decimals. Percentiles are histogram bucket values that fio
  rounds *up* to the printed unit (``(v + 999) / 1000``), so they lie within one unit above fio's
  value. ``samples`` is None: normal output does not print N.
* **bw samples** are KiB/s inside fio whatever the label; converted to bytes/s (``MiB`` lines are
  scaled by kb_base, bit lines divided by 8). kb_base is read from the direction line (IEC first =
  1024); fio 2.x does not show it, and 1024 (the default) is assumed.
* **--status-interval**: a job block repeated (same name, group and pid) after a ``Run status``
  section replaces the earlier one, so the last report is the result; a warning counts them.
  Superseded blocks are located with ``str.find`` and never read line by line, which keeps long
  status streams cheap. (Client mode with two servers whose jobs share name *and* pid would be
  taken for snapshots; the normal format names no host.)
* ``steadystate`` becomes ``{"attained": 0|1, "criterion": "2.590%", "metric": "iops mean dev",
  "bw_display": …, "iops_display": …}``; the display values are fio's rounded text.
* Not in the text, so not in the result: job options (except ``description``), timestamps (the
  job line shows local time without a zone), host names in client mode. The client-mode
  ``All clients`` block is dropped as in json.py; fio's verror text and ``continue_on_error``
  counts become warnings.

Errors: ``ParseError`` naming the input and line, for a line of a reported job that starts like a
known field but cannot be read (e.g. a truncated last line), or when no job report is found.
The scan for job blocks and the line parser are ``fio.normalscan``'s; this module turns what they
read into exact records.
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import ParseError
from ..model import DirectionStats, FioReport, JobResult, Latency
from ..units import format_size_fio
from . import validate
from .json import ALL_CLIENTS
from .normalscan import (
    DIR_INDEX,
    LAYOUT,
    Block,
    BlockParser,
    DirBlock,
    Header,
    HeaderIndex,
    JobBlock,
    Scan,
    positions,
    printed_version,
    unprefixed,
)
from .num2str import bs_candidates, decode, io_size_fits, io_size_match, iops_display_warning
from .validate import Violation

# ---------------------------------------------------------------------------------------------
# From what was printed to exact records


def _pick(values: tuple[int, ...] | None, direction: str) -> int | None:
    """The issued/short/dropped count of a direction; ``mixed`` is the sum (stat.c sums into [0])."""
    if values is None:
        return None
    if direction == "mixed":
        return sum(values[:3])
    index = DIR_INDEX[direction]
    return values[index] if index < len(values) else None


def _job_headers(headers: HeaderIndex, job: JobBlock) -> list[Header]:
    """The header lines of the jobs behind a report block: its group's, or its own name's."""
    group = list(headers.get(job.groupid, ()))
    return [h for h in group if h.name == job.name] if job.members == 1 else group


def _bs_texts(group: list[Header], direction: str) -> set[str | None]:
    """The printed block sizes of the jobs behind a report block (``group``, their header lines) for
    ``direction`` (None = not fixed)."""
    if not group:
        return {None}
    dirs = ("read", "write", "trim") if direction == "mixed" else (direction,)
    relevant = [h for h in group if any(h.does(d) for d in dirs)] or group
    return {h.size(d) for h in relevant for d in dirs if h.does(d) or not any(h.does(x) for x in dirs)}


def _direction_bytes(
    group: list[Header], job: JobBlock, d: DirBlock, total: int | None, short: int | None, version: str | None
) -> tuple[int | None, str | None]:
    """Exact bytes (``total × bs``) and a warning when the header and the printed size disagree."""
    if total is None or short or d.io_shown is None:
        return None, None
    texts = _bs_texts(group, d.name)
    if len(texts) != 1 or None in texts:
        return None, None
    text = next(iter(texts))
    assert text is not None
    sizes = bs_candidates(text, version)
    if len(sizes) == 1 and io_size_fits(d.io_shown, sizes[0] * total, version):
        return sizes[0] * total, None  # the one candidate fits (exactly or near): as below, sooner
    fits = {size: io_size_match(d.io_shown, size * total, version) for size in sizes}
    exact = [size for size, fit in fits.items() if fit == 2]
    near = [size for size, fit in fits.items() if fit]
    if len(exact) == 1 or len(near) == 1:
        return (exact or near)[0] * total, None
    if near:
        return None, None  # several block sizes fit the rounded displays: unknown
    return None, (f"job {job.name!r} {d.name}: {total} I/Os of the header's bs={text} do not match "
                  f"the printed io={d.io_shown}; bytes and bandwidth are left unknown")


def _block_size(text: str, version: str | None) -> int | None:
    """The block size a header prints as ``text``; when an abbreviation (``1024KiB``) fits several
    multiples of 512, the roundest (most factors of two) is taken, as job files use such sizes."""
    sizes = bs_candidates(text, version)
    return max(sizes, key=lambda size: (size & -size, -size)) if sizes else None


@lru_cache(maxsize=256)
def _bs_option(header: Header, version: str | None) -> str | None:
    """``bs`` as a job file spells it (``4k``, or ``4k,64k,64k`` per direction) from a header line.

    None for a range (``4096B-65536B``): the header cannot tell ``bsrange`` from ``bssplit``."""
    if not header.ranges or any(lo != hi for lo, hi in header.ranges):
        return None
    sizes = [_block_size(lo, version) for lo, _ in header.ranges]
    if None in sizes:
        return None
    spelled = [format_size_fio(size) for size in sizes if size is not None]
    return spelled[0] if len(set(spelled)) == 1 else ",".join(spelled)


def _shown_options(job: JobBlock, group: list[Header], layouts: dict[str, set[int]],
                   version: str | None) -> dict[str, str]:
    """The options the text shows for ``job`` (see ``JobResult.shown_options``); an option the
    jobs behind a group block disagree on is left out."""
    options: dict[str, str] = {}
    for key, values in (("rw", {h.rw for h in group}), ("ioengine", {h.ioengine for h in group}),
                        ("iodepth", {h.iodepth for h in group})):
        if len(values) == 1 and None not in values:
            options[key] = values.pop()  # type: ignore[assignment]
    bs = {_bs_option(h, version) for h in group}
    if len(bs) == 1 and None not in bs:
        options["bs"] = bs.pop()  # type: ignore[assignment]
    if "iodepth" not in options and job.latency_depth is not None:
        options["iodepth"] = str(job.latency_depth)
    sizes = layouts.get(job.name, set())
    if len(sizes) == 1:
        options["size"] = f"{sizes.pop()}m"
    return options


def _layouts(text: str) -> dict[str, set[int]]:
    """MiB per job name from ``NAME: Laying out IO file (1 file / 2048MiB)`` lines (2.x: ``file(s)``,
    ``MB``). fio prints the files it must create or extend, their total shifted right by 20 bits
    (``filesetup.c``), so the size is known to the MiB and only when the files were laid out."""
    found: dict[str, set[int]] = {}
    for pos in positions(text, ": Laying out IO file"):
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        match = LAYOUT.match(unprefixed(text[start:len(text) if end < 0 else end]))
        if match and int(match["mib"]):
            found.setdefault(match["name"].strip(), set()).add(int(match["mib"]))
    return found


def _latency(d: DirBlock, kind: str) -> Latency | None:
    stats, pcts = d.stats.get(kind), d.pcts.get(kind)
    if stats is None and not pcts:
        return None
    lo, hi, mean, dev = stats if stats is not None else (None, None, None, None)
    return Latency(min_ns=lo, max_ns=hi, mean_ns=mean, stddev_ns=dev, percentiles_ns=pcts or {})


def _finish_direction(
    job: JobBlock, d: DirBlock, group: list[Header], version: str | None, warnings: list[str]
) -> DirectionStats:
    if d.name == "sync":
        total_sync = job.issued[3] if job.issued is not None and len(job.issued) > 3 else None
        return DirectionStats(direction="sync", total_ios=total_sync, lat=_latency(d, "sync"))
    total, runtime = _pick(job.issued, d.name), d.runtime_ms
    iops = None
    if total is not None and runtime:
        iops = 1000 * total / runtime  # stat.c: iops = 1000 * total_io_u / runtime
        try:
            warning = iops_display_warning(d.iops_shown or "", total, runtime, version)
        except ValueError as exc:
            raise Violation((d.name, "iops"), d.iops_shown, str(exc)) from None
        if warning:
            warnings.append(f"job {job.name!r} {d.name}: {warning}")
    elif d.iops_shown is not None:
        warnings.append(f"job {job.name!r} {d.name}: no 'issued' totals in the text (truncated?); IOPS is the "
                        f"printed IOPS={d.iops_shown}, rounded (shown with ≈)")
    short = _pick(job.short, d.name)
    nbytes, warning = _direction_bytes(group, job, d, total, short, version)
    if warning:
        warnings.append(warning)
    bw = 1000 * nbytes / runtime if nbytes is not None and runtime else None
    return DirectionStats(
        direction=d.name, total_ios=total, io_bytes=nbytes, runtime_ms=runtime, iops=iops, bw_bytes_s=bw,
        bw_bytes_s_shown=_bw_shown(job, d, warnings) if bw is None else None,
        iops_shown=_iops_shown(d.iops_shown) if iops is None else None,
        slat=_latency(d, "slat"), clat=_latency(d, "clat"), lat=_latency(d, "lat"),
        short_ios=short, drop_ios=_pick(job.dropped, d.name), bw_samples=d.bw, iops_samples=d.iops,
    )


def _bw_shown(job: JobBlock, d: DirBlock, warnings: list[str]) -> float | None:
    """fio's printed bandwidth in B/s, rounded as printed: the first of its two displays
    (``BW=18.8MiB/s (19.7MB/s)``: IEC then SI with kb_base=1024, fio 2.17+), unless they disagree
    beyond their rounding. fio 2.20-3.25 num2str() drops the carry, which only ever lowers a display
    (33505000 B/s prints as ``31.0MiB/s (33.5MB/s)``, 31.95 MiB/s; FIO_NOTES §2.3): then the larger is
    taken and a warning says so. None for bits (``unit_base=1``) or what cannot be read."""
    first, other = _bw_decoded(d.bw_shown), _bw_decoded(d.bw_other)
    if first is None or other is None or abs(first[0] - other[0]) <= first[1] + other[1]:
        return first[0] if first is not None else None
    larger, lower = (d.bw_shown, d.bw_other) if first[0] > other[0] else (d.bw_other, d.bw_shown)
    warnings.append(f"job {job.name!r} {d.name}: the printed bandwidths {d.bw_shown} and {d.bw_other} disagree "
                    f"beyond their rounding: fio 2.20-3.25 num2str() drops the carry when the decimals round up to "
                    f"1, which lowers a display (FIO_NOTES §2.3); {larger} is used, not {lower}")
    return max(first[0], other[0])


def _bw_decoded(text: str | None) -> tuple[float, float] | None:
    """A printed bandwidth (``18.8MiB/s``, ``98.6MB/s``, ``500B/s``) in B/s and its last digit's
    step; None for bits (``unit_base=1``) or what cannot be read."""
    if not text or not text.endswith("B/s"):
        return None
    return decode(text.removesuffix("B/s"))


def _iops_shown(text: str | None) -> float | None:
    """fio's printed IOPS (``4801``, ``25.0k``), rounded as printed; None when it cannot be read."""
    found = decode(text) if text else None
    return found[0] if found else None


def _finish_job(
    job: JobBlock, index: int, headers: HeaderIndex, layouts: dict[str, set[int]], version: str | None,
    warnings: list[str],
) -> JobResult:
    group = _job_headers(headers, job)
    directions = {name: _finish_direction(job, d, group, version, warnings) for name, d in job.dirs.items()}
    if job.error:
        detail = f" ({job.verror})" if job.verror else ""
        warnings.append(f"job {job.name!r} (group {job.groupid}) ended with fio error {job.error}{detail}")
    if job.errors is not None and job.errors[0]:
        total_err, first, text = job.errors
        warnings.append(f"job {job.name!r}: continue_on_error ignored {total_err} errors, the first "
                        f"errno {first} <{text}>")
    usr, sys_, ctx, majf, minf = job.cpu if job.cpu is not None else (None,) * 5
    return JobResult(
        name=job.name, index=index, groupid=job.groupid, error=job.error, directions=directions,
        usr_cpu_pct=usr, sys_cpu_pct=sys_, ctx=ctx, majf=majf, minf=minf,
        iodepth_level_pct=job.depths, latency_dist_pct=job.latdist,
        job_options={"description": job.description} if job.description is not None else {},
        members=job.members, steadystate=job.steadystate,
        shown_options=_shown_options(job, group, layouts, version),
    )


def parse_normal(text: str, name: str = "<input>") -> FioReport:
    """Parse fio's normal text output (one report, or a ``--status-interval`` series) exactly.

    See the module docstring for which numbers are exact and which are left unknown. ``name``
    labels the input in error messages. Raises ``ParseError`` (naming ``name`` and the line) when
    a known line of a reported job cannot be read or no job block is found. Superseded
    status snapshots are located but not read, so their lines are not checked.
    """
    scan = Scan.of(text)
    kept_blocks = [block for block in scan.blocks if not block.superseded]
    numbers = _line_numbers(text, [block.start for block in kept_blocks])
    kept = [_job_of(block, numbers[block.start]) for block in kept_blocks]
    kept = [job for job in kept if job.name != ALL_CLIENTS]
    if not kept:
        raise ParseError(
            f"{name}: no fio job report found (expected a line like "
            f"'job: (groupid=0, jobs=1): err= 0: pid=…' followed by 'read: IOPS=…')"
        )
    reader = BlockParser(name)
    for job in kept:
        reader.read(job, text)
        if not (job.dirs or job.cpu or job.depths or job.issued):
            raise _no_report_lines(job, text, name)
    version = printed_version(text)
    warnings: list[str] = []
    if scan.superseded:
        warnings.append(f"{scan.superseded} job report(s) were --status-interval snapshots superseded by a "
                        f"later report of the same job (name, group, pid); only the last is kept")
    layouts = _layouts(text)
    jobs = []
    for index, job in enumerate(kept):
        try:
            jobs.append(_finish_job(job, index, scan.headers, layouts, version, warnings))
        except Violation as violation:
            raise validate.located(violation.inside("jobs", index), name, lambda v: _locate(text, kept, v)) from None
    first_report, begin = (min(b.report for b in kept_blocks), kept_blocks[0].start) if scan.superseded else (0, 0)
    report = FioReport(source_format="normal", jobs=tuple(jobs), fio_version=version, warnings=tuple(warnings),
                       disk_util=scan.disks(text, begin, first_report, name))
    return validate.check(report, name, lambda violation: _locate(text, kept, violation))


#: The line a model field is printed on: its start and a text it holds (within the direction's lines
#: for a direction's fields).
_FIELD_LINE = {"slat": ("slat (", "min="), "clat": ("clat (", "min="), "lat": ("lat (", "min="),
               "bw_samples": ("bw (", ""), "iops_samples": ("iops", ""), "total_ios": ("issued", ""),
               "short_ios": ("issued", ""), "drop_ios": ("issued", ""), "usr_cpu_pct": ("cpu", ""),
               "sys_cpu_pct": ("cpu", ""), "ctx": ("cpu", ""), "majf": ("cpu", ""), "minf": ("cpu", ""),
               "iodepth_level_pct": ("IO depths", ""), "latency_dist_pct": ("lat (", "%"),
               "steadystate": ("steadystate", ""), "job_options": ("Description", "")}


def _locate(text: str, kept: list[JobBlock], violation: Violation) -> tuple[int | None, None, object]:
    """The line printing a ``validate`` violation's place (``("jobs", 0, "read", "clat", "mean_ns")``),
    else its direction's or job's line; None outside the jobs (for ``validate.check``)."""
    place = violation.place
    if place[:1] != ("jobs",) or len(place) < 3 or not isinstance(place[1], int) or place[1] >= len(kept):
        return None, None, validate.UNKNOWN
    job, rest, start = kept[place[1]], place[2:], -1
    lines = [line.strip() for line in text[job.body:job.end].split("\n")]
    if rest[0] in job.dirs:
        label = "fsync/fdatasync" if rest[0] == "sync" else str(rest[0])
        start, rest = next((i for i, line in enumerate(lines) if line.startswith(label)), -1), rest[1:]
    prefix, holds = _FIELD_LINE.get(str(rest[0]), ("\0", "")) if rest else ("\0", "")
    if rest[1:2] == ("percentiles_ns",):
        prefix, holds = f"{rest[0]} percentiles", ""
    found = next((i for i in range(max(start, 0), len(lines)) if lines[i].startswith(prefix) and holds in lines[i]),
                 start)
    return job.lineno + 1 + found, None, validate.UNKNOWN


class NoReportLines(ParseError):
    """A job line without any of the lines fio prints under it (see ``_no_report_lines``): in a
    pasted text, a job line quoted in prose rather than an output (``fio.pasted``)."""


def _no_report_lines(job: JobBlock, text: str, name: str) -> NoReportLines:
    """The error for a job line followed by none of the lines fio prints under it.

    fio prints a ``cpu`` and an ``IO depths`` line under every job line, whatever became of the job
    (``show_thread_status_normal()`` in stat.c, 2.x to 3.42), and a direction line for each
    direction that moved data. A job line without them was quoted, or cut off, or its lines carry
    a prefix fio does not print; reading it as a job would store a result without figures."""
    line = text[text.rfind("\n", 0, job.body - 1) + 1:job.body - 1].strip()
    return NoReportLines(
        f"{name}, line {job.lineno}: the job line {line[:80]!r} is followed by none of the lines fio prints "
        f"under it ('read: IOPS=…', 'cpu          : usr=…', 'IO depths    : …'): cut off, quoted, or its lines "
        f"carry a prefix fio does not print",
        hint="paste fio's output as fio printed it (line numbers counting 1, 2, 3 … from a block's first line "
             "are removed)")


def _job_of(block: Block, lineno: int) -> JobBlock:
    m = block.match
    return JobBlock(name=m["name"].strip(), groupid=int(m["g"]), members=int(m["n"]), error=int(m["err"]),
                verror=m["verror"], body=block.body, end=block.end, lineno=lineno)


def _line_numbers(text: str, offsets: list[int]) -> dict[int, int]:
    """The 1-based line number of each offset, counting newlines once in order."""
    numbers, line, counted = {}, 1, 0
    for offset in sorted(set(offsets)):
        line += text.count("\n", counted, offset)
        counted = offset
        numbers[offset] = line
    return numbers
