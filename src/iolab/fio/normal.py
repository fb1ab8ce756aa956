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
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache

from ..errors import ParseError
from ..model import DISK_AGGREGATE_KEYS, DirectionStats, DiskUtil, FioReport, JobResult, Latency, SampleStats, pct_key
from ..units import format_size_fio
from . import validate
from .json import ALL_CLIENTS
from .num2str import bs_candidates, decode, io_size_fits, io_size_match, iops_display_warning
from .validate import Violation

_JOB = re.compile(
    r"^(?P<name>.*?): \(groupid=(?P<g>\d+), jobs=(?P<n>\d+)\): err=\s*(?P<err>-?\d+)"
    r"(?: \((?P<verror>.*)\))?: pid=(?P<pid>\d+)"
)
_HEADER = re.compile(
    r"^(?P<name>.*?): \(g=(?P<g>\d+)\): rw=(?P<rw>\w+), (?P<bs>bs.*?), ioengine=(?P<engine>[^,\s]+)"
    r"(?:, iodepth=(?P<depth>\d+))?"
)
_LAYOUT = re.compile(r"^(?P<name>.*?): Laying out IO files?(?:\(s\))? \((?P<n>\d+) files?(?:\(s\))? / (?:total )?"
                     r"(?P<mib>\d+)Mi?B\)$")
_LATENCY_DEPTH = re.compile(r"^latency\s*: target=(\d+), window=\d+, percentile=[^,]+, depth=(\d+)$")
_BS3 = re.compile(r"bs=\(R\) (\S+)-(\S+), \(W\) (\S+)-(\S+), (?:\(T\) (\S+)-(\S+)|(bs_is_seq_rand))$")
_BS2 = re.compile(r"bs(\(seq/rand\))?=([^-/]+)-([^/]+)/([^-/]+)-([^/,]+)(?:/([^-/]+)-([^/,]+))?$")
_DIR3 = re.compile(
    r"^(read|write|trim|mixed)\s*: IOPS=([^,]+), BW=([^(]*?) ?\(([^)]*)\)\(([^/]+)/(\d+)msec\)(.*)$"
)
_BW_PREFIX = re.compile(r"[kKMGTPE](i?)(?:B|bit)")
_DIR2 = re.compile(r"^(read|write|trim|mixed)\s*: io=([^,]+), bw=([^,]+), iops=([^,]+), runt=\s*(\d+)msec$")
_LAT = re.compile(
    r"^(slat|clat|lat|sync) \((nsec|usec|msec)\): min=\s*([^,]+), max=\s*([^,]+), "
    r"avg=\s*([^,]+), stdev=\s*(\S+)$"
)
_PCT_HEAD = re.compile(r"^(slat|clat|lat|sync) percentiles \((nsec|usec|msec)\):$")
_PCT_ITEM = re.compile(r"(\d+(?:\.\d+)?)th=\[\s*(\d+)\]")
_LAT_DIST = re.compile(r"^lat \((nsec|usec|msec)\)\s*: (.*)$")
_BUCKET = re.compile(r"(>=)?(\d+)=(\d+(?:\.\d+)?)%")
_BW = re.compile(
    r"^bw \(\s*(\w+)\s*/s\): min=\s*(\d+), max=\s*(\d+), per=\s*[^,]+%, avg=\s*([^,]+), "
    r"stdev=\s*([^,]+?)(?:, samples=\s*(\d+))?$"
)
_IOPS = re.compile(r"^iops\s*: min=\s*(\d+), max=\s*(\d+), avg=\s*([^,]+), stdev=\s*([^,]+), samples=\s*(\d+)$")
_CPU = re.compile(r"^cpu\s*: usr=([^%]+)%, sys=([^%]+)%, ctx=(\d+), majf=(\d+), minf=(\d+)$")
_DEPTHS = re.compile(r"^IO depths\s*: (.*)$")
_TRIPLE = r"(?:r=)?(\d+)[,/](?:w=)?(\d+)[,/](?:d=)?(\d+)"
_ISSUED = re.compile(rf"total={_TRIPLE}(?:,(\d+))?")
_SHORT = re.compile(rf"short={_TRIPLE}")
_DROPPED = re.compile(rf"drop(?:ped)?={_TRIPLE}")
_ERRORS = re.compile(r"^errors\s*: total=(\d+), first_error=(-?\d+)/<(.*)>$")
_STEADY = re.compile(r"^steadystate\s*: attained=(yes|no), bw=(.*?), iops=(.*), ([a-z]+(?: [a-z]+)*)=([^,=]+)$")
_DESC = re.compile(r"^Description\s*: \[(.*)\]$")
_DISK = re.compile(
    r"^(\S+): ios=(\d+)/(\d+), (?:sectors=\d+/\d+, )?merge=(\d+)/(\d+), ticks=(\d+)/(\d+), "
    r"in_queue=(\d+), util=(\d+(?:\.\d+)?)%(.*)$"
)
_AGGR = re.compile(
    r"^, aggrios=(\d+)/(\d+), (?:aggsectors=\d+/\d+, )?aggrmerge=(\d+)/(\d+), aggrticks=(\d+)/(\d+), "
    r"aggrin_queue=(\d+), aggrutil=(\d+(?:\.\d+)?)%$"
)
_PROBE_VERSION = re.compile(r"\bfio=fio-([^,\s]+)")
_UNIT_NS = {"nsec": 1.0, "usec": 1e3, "msec": 1e6}
_UNIT_KEY = {"nsec": "ns", "usec": "us", "msec": "ms"}
_DIR_INDEX = {"read": 0, "write": 1, "trim": 2}


# ---------------------------------------------------------------------------------------------
# Parsing: a scan for the structure (str.find, C speed), then a line parser for kept job blocks


@dataclass(slots=True)
class _Dir:
    """One direction block as printed (``read``, ``write``, ``trim``, ``mixed``, ``sync``)."""

    name: str
    iops_shown: str | None = None
    io_shown: str | None = None
    runtime_ms: int | None = None
    bw_shown: str | None = None
    stats: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)
    pcts: dict[str, dict[str, float]] = field(default_factory=dict)
    bw: SampleStats | None = None
    iops: SampleStats | None = None


@dataclass(slots=True)
class _Job:
    """One job block: where it is, its job line, and (once read) what it prints."""

    name: str
    groupid: int
    members: int
    error: int
    verror: str | None
    body: int  # offset of the line after the job line
    end: int  # offset where the block ends
    lineno: int  # line number of the job line
    dirs: dict[str, _Dir] = field(default_factory=dict)
    kb_base: int = 1024
    cpu: tuple[float, float, int, int, int] | None = None
    depths: dict[str, float] = field(default_factory=dict)
    latdist: dict[str, float] = field(default_factory=dict)
    issued: tuple[int, ...] | None = None
    short: tuple[int, ...] | None = None
    dropped: tuple[int, ...] | None = None
    description: str | None = None
    steadystate: dict[str, object] | None = None
    errors: tuple[int, int, str] | None = None
    latency_depth: int | None = None


@dataclass(frozen=True, slots=True)
class _Header:
    """A job header line: ``name: (g=0): rw=randrw, bs=(R) 4096B-4096B, …`` (fixed sizes only)."""

    name: str
    groupid: int
    rw: str
    bs: tuple[tuple[str, str | None], ...]
    ioengine: str | None = None
    iodepth: str | None = None
    ranges: tuple[tuple[str, str], ...] = ()  # (min, max) printed for read, write, trim

    def size(self, direction: str) -> str | None:
        return dict(self.bs)[direction]

    def does(self, direction: str) -> bool:
        """Whether ``rw=`` (fio's ``ddir_str()``: read, randrw, trimwrite, …) issues this direction."""
        return direction in self.rw or (direction != "trim" and self.rw in ("rw", "randrw"))


#: Header lines by group id, deduplicated (concatenated reports repeat them).
_HeaderIndex = dict[int, dict[_Header, None]]


@dataclass(slots=True)
class _Block:
    """A job block found by the scan: its job line and extent. It is read only if kept."""

    start: int  # offset of the job line
    body: int  # offset of the line after it
    end: int
    match: re.Match[str]
    report: int
    superseded: bool = False


def _positions(text: str, needle: str) -> list[int]:
    """Offsets of every ``needle`` in ``text``: one C-level split, where a ``find()`` per hit
    costs microseconds each on a long text."""
    out, pos, step = [], -len(needle), len(needle)
    for chunk in text.split(needle)[:-1]:
        pos += len(chunk) + step
        out.append(pos)
    return out


@dataclass(slots=True)
class _Scan:
    """The structure of a normal output: job blocks, header lines, report boundaries.

    A block repeated (same name, group and pid) after a ``Run status group`` line supersedes the
    earlier one. Superseded blocks are located but never read line by line, which keeps long
    ``--status-interval`` streams cheap.
    """

    blocks: list[_Block] = field(default_factory=list)
    headers: _HeaderIndex = field(default_factory=dict)
    marks: list[int] = field(default_factory=list)  # line starts of every job/group/header line
    report_starts: list[int] = field(default_factory=list)
    superseded: int = 0

    @classmethod
    def of(cls, text: str) -> _Scan:
        scan = cls()
        events = sorted([(p, 0) for p in _positions(text, ": (groupid=")]
                        + [(p, 1) for p in _positions(text, "Run status group")]
                        + [(p, 2) for p in _positions(text, ": (g=")])
        latest: dict[tuple[str, str, str], list[_Block]] = {}
        seen_headers: set[str] = set()  # concatenated reports repeat them
        after_jobs, report, open_block, last = False, 0, None, -1
        for pos, kind in events:
            start = text.rfind("\n", 0, pos) + 1
            if start == last:
                continue  # two needles on one line
            last = start
            scan.marks.append(start)
            if open_block is not None:
                open_block.end, open_block = start, None
            if kind == 1:
                after_jobs = True
                continue
            line_end = text.find("\n", start)
            line_end = len(text) if line_end < 0 else line_end
            line = text[start:line_end]
            if line[:1] == "<" or line[-1:] == "\r":
                line = _unprefixed(line)
            if kind == 2:
                if line not in seen_headers and (match := _HEADER.match(line)):
                    scan._header(match)
                seen_headers.add(line)
            elif match := _JOB.match(line):
                if after_jobs:
                    report, after_jobs = report + 1, False
                    scan.report_starts.append(start)
                open_block = _Block(start, line_end + 1, len(text), match, report)
                scan._add(open_block, latest)
        return scan

    def _add(self, block: _Block, latest: dict[tuple[str, str, str], list[_Block]]) -> None:
        key = (block.match["name"].strip(), block.match["g"], block.match["pid"])
        same = latest.get(key)
        if same and same[0].report < block.report:
            for earlier in same:  # --status-interval snapshots of the same job
                earlier.superseded = True
            self.superseded += len(same)
            same = None
        if same is None:
            latest[key] = [block]
        else:
            same.append(block)  # e.g. two servers' jobs with the same name and pid
        self.blocks.append(block)

    def _header(self, m: re.Match[str]) -> None:
        block_sizes = _block_sizes(m["bs"])
        if block_sizes is None:
            return
        sizes, ranges = block_sizes
        header = _Header(m["name"].strip(), int(m["g"]), m["rw"], sizes, m["engine"], m["depth"], ranges)
        self.headers.setdefault(header.groupid, {})[header] = None

    def disks(self, text: str, begin: int, first_report: int, name: str) -> tuple[DiskUtil, ...]:
        """The disk lines of the ``Disk stats`` sections after offset ``begin`` whose report is
        ``first_report`` or later (earlier ones belong to superseded snapshots)."""
        out: list[DiskUtil] = []
        pos, line, counted = text.find("Disk stats (read/write)", begin), 1, 0
        while pos >= 0:
            body = text.find("\n", pos) + 1 or len(text)
            nxt = bisect_right(self.marks, pos)
            if bisect_right(self.report_starts, pos) >= first_report:
                line, counted = line + text.count("\n", counted, body), body
                out += _disk_lines(text[body:self.marks[nxt] if nxt < len(self.marks) else len(text)], line, name)
            pos = text.find("Disk stats (read/write)", body)
        return tuple(out)


@lru_cache(maxsize=256)  # the jobs of one output usually print the same block sizes
def _block_sizes(bs: str) -> tuple[tuple[tuple[str, str | None], ...], tuple[tuple[str, str], ...]] | None:
    """``_Header.bs`` and ``_Header.ranges`` from a header's ``bs=(R) 4096B-4096B, …`` (2.x ``bs=4K-4K/…``)."""
    bs3 = _BS3.match(bs)
    if bs3:
        r1, r2, w1, w2, t1, t2, seq_rand = bs3.groups()
    elif bs2 := _BS2.match(bs):
        seq_rand, r1, r2, w1, w2, t1, t2 = bs2.groups()
    else:
        return None
    pairs = {"read": (r1, r2), "write": (w1, w2), "trim": (t1, t2)}
    if seq_rand:  # the two pairs are sequential/random sizes, not read/write
        same = r1 if len({r1, r2, w1, w2}) == 1 else None
        sizes: dict[str, str | None] = dict.fromkeys(pairs, same)
    else:
        sizes = {d: (lo if lo is not None and lo == hi else None) for d, (lo, hi) in pairs.items()}
    ranges = () if seq_rand or None in (t1, t2) else ((r1, r2), (w1, w2), (t1, t2))
    return tuple(sizes.items()), ranges


def _unprefixed(line: str) -> str:
    """A line without the ``<host> `` prefix of text relayed by fio servers (client mode)."""
    line = line.strip()
    if line.startswith("<") and "> " in line:
        line = line[line.index("> ") + 2:].strip()
    return line


def _version(text: str) -> str | None:
    """The ``fio-3.33`` line (or the client's ``hostname=…, fio=fio-3.33`` probe line)."""
    pos = text.find("fio-")
    while pos >= 0:
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        line = _unprefixed(text[start:len(text) if end < 0 else end])
        if line.startswith("fio-") and " " not in line and len(line) > 4:
            return line[4:]
        if line.startswith("hostname=") and (match := _PROBE_VERSION.search(line)):
            return match[1]
        pos = text.find("fio-", pos + 4)
    return None


_PCT_KEYS: dict[str, str] = {}


class _BlockParser:
    """Reads the lines of one job block; handlers are keyed by a line's first four characters."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lineno = 0
        self.job: _Job = None  # type: ignore[assignment]
        self.dir: _Dir | None = None
        self.pct: dict[str, float] | None = None
        self.pct_scale = 1.0
        self.handlers = {
            "read": self._direction, "writ": self._direction, "trim": self._direction,
            "mixe": self._direction, "slat": self._latency, "clat": self._latency,
            "lat ": self._latency, "sync": self._latency, "bw (": self._samples, "iops": self._samples,
            "cpu ": self._cpu, "IO d": self._depths, "issu": self._issued, "erro": self._errors,
            "fsyn": self._sync_section, "stea": self._steadystate, "Desc": self._description,
            "bloc": self._no_rows, "late": self._latency_target,
        }

    def error(self, message: str) -> ParseError:
        return ParseError(f"{self.name}, line {self.lineno}: {message}")

    def read(self, job: _Job, text: str) -> None:
        self.job, self.dir, self.pct = job, None, None
        handlers = self.handlers
        try:
            for lineno, raw in enumerate(text[job.body:job.end].split("\n"), job.lineno + 1):
                s = raw.strip()
                if not s:
                    continue
                self.lineno = lineno
                handler = handlers.get(s[:4])
                if handler is not None:
                    handler(s)
                elif s[0] == "|":
                    self._pct_row(s)
                elif "percentiles" in s:
                    self.pct = None  # e.g. "high prio (12.34%) clat percentiles": its rows are skipped
        except (ValueError, ArithmeticError) as exc:  # e.g. a number too long for int()
            raise self.error(f"cannot read this line ({exc}): {s[:100]!r}") from exc

    def _bad(self, s: str, what: str) -> ParseError:
        return self.error(f"cannot read this as fio's {what}: {s[:100]!r}")

    def _direction(self, s: str) -> None:
        m3 = _DIR3.match(s)
        m2 = None if m3 else _DIR2.match(s)
        job = self.job
        if m3 is not None:
            name, iops, bw, _, io, runt, _ = m3.groups()
            prefix = _BW_PREFIX.search(bw)  # "279MiB/s": kb_base 1024 prints IEC first
            if prefix is not None:
                job.kb_base = 1024 if prefix[1] else 1000
        elif m2 is not None:
            name, io, bw, iops, runt = m2.groups()
            bw = bw.replace("KB/s", "KiB/s").replace("MB/s", "MiB/s")  # fio 2.x: "KB" meant KiB
        else:
            raise self._bad(s, "direction line (read/write/trim/mixed)")
        if name in job.dirs:
            raise self.error(f"job {job.name!r} prints direction {name!r} twice")
        self.dir = job.dirs[name] = _Dir(name, iops.strip(), io.strip(), _count(runt), bw.strip())
        self.pct = None

    def _latency(self, s: str) -> None:
        if match := _LAT.match(s):
            kind, unit, lo, hi, mean, dev = match.groups()
            scale = _UNIT_NS[unit]
            lo_v, hi_v, mean_v, dev_v = _display_value(lo), _display_value(hi), _float(mean), _float(dev)
            if lo_v is None or hi_v is None or mean_v is None or dev_v is None:
                raise self.error(f"cannot read the numbers of this latency line: {s[:100]!r}")
            self._dir_for(kind, s).stats[kind] = (lo_v * scale, hi_v * scale, mean_v * scale, dev_v * scale)
        elif match := _PCT_HEAD.match(s):
            kind, unit = match.groups()
            self.pct = self._dir_for(kind, s).pcts.setdefault(kind, {})
            self.pct_scale = _UNIT_NS[unit]
        elif s.startswith("lat (") and (match := _LAT_DIST.match(s)):
            suffix = _UNIT_KEY[match[1]]
            for ge, bucket, pct in _BUCKET.findall(match[2]):
                self.job.latdist[f"{ge}{bucket}{suffix}"] = float(pct)
        elif " prio" in s[:12]:
            self.pct = None  # per-priority latencies (3.18+) have no place in the model
        else:
            raise self._bad(s, "latency line")

    def _dir_for(self, kind: str, s: str) -> _Dir:
        if kind == "sync":
            return self.job.dirs.setdefault("sync", _Dir("sync"))
        if self.dir is None or self.dir.name == "sync":
            raise self.error(f"{kind} line outside a read/write/trim block: {s[:80]!r}")
        return self.dir

    def _pct_row(self, s: str) -> None:
        target = self.pct
        if target is None:
            return
        items = _PCT_ITEM.findall(s)
        if not items or len(items) != s.count("th=") or s[-1] not in "],":
            raise self.error(f"cannot read this percentile row: {s[:100]!r}")
        scale = self.pct_scale
        for pct, value in items:
            key = _PCT_KEYS.get(pct)
            if key is None:
                key = _PCT_KEYS[pct] = pct_key(pct)
            target[key] = int(value) * scale

    def _no_rows(self, s: str) -> None:
        self.pct = None  # "block lifetime percentiles": rows without a latency

    def _samples(self, s: str) -> None:
        """``bw (  KiB/s): min=…`` or ``iops        : min=…`` (fio's periodic samples)."""
        match = (_BW if s[0] == "b" else _IOPS).match(s)
        if match is None:
            raise self._bad(s, "bandwidth/IOPS sample line")
        if s[0] == "b":
            unit, lo, hi, mean, dev, samples = match.groups()
            # fio samples bw in KiB/s; a "MiB" line was divided by kb_base, bit lines multiplied by 8
            scale = 1024.0 * (self.job.kb_base if unit[0] == "M" else 1) / (8 if "bit" in unit else 1)
            self._dir_for("bw", s).bw = _sample_stats(lo, hi, mean, dev, samples, scale)
        else:
            lo, hi, mean, dev, samples = match.groups()
            self._dir_for("iops", s).iops = _sample_stats(lo, hi, mean, dev, samples, 1.0)

    def _cpu(self, s: str) -> None:
        match = _CPU.match(s)
        usr = None if match is None else _float(match[1])
        sys_ = None if match is None else _float(match[2])
        if match is None or usr is None or sys_ is None:
            raise self._bad(s, "cpu line")
        self.job.cpu = (usr, sys_, int(match[3]), int(match[4]), int(match[5]))

    def _depths(self, s: str) -> None:
        match = _DEPTHS.match(s)
        if match is None:
            raise self._bad(s, "IO depths line")
        self.job.depths = {f"{ge}{b}": float(p) for ge, b, p in _BUCKET.findall(match[1])}

    def _issued(self, s: str) -> None:
        total = _ISSUED.search(s)
        if total is None:
            raise self._bad(s, "issued line")
        job = self.job
        job.issued = tuple(_count(v) for v in total.groups() if v is not None)
        short, dropped = _SHORT.search(s), _DROPPED.search(s)
        job.short = tuple(int(v) for v in short.groups()) if short else None
        job.dropped = tuple(int(v) for v in dropped.groups()) if dropped else None

    def _errors(self, s: str) -> None:
        if match := _ERRORS.match(s):
            self.job.errors = (int(match[1]), int(match[2]), match[3])

    def _sync_section(self, s: str) -> None:
        if s.startswith("fsync/fdatasync"):
            self.dir, self.pct = None, None

    def _steadystate(self, s: str) -> None:
        if match := _STEADY.match(s):
            attained, bw, iops, metric, value = match.groups()
            self.job.steadystate = {"attained": int(attained == "yes"), "criterion": value.strip(),
                                    "metric": metric, "bw_display": bw, "iops_display": iops.strip()}

    def _latency_target(self, s: str) -> None:
        """``latency : target=0, window=0, percentile=100.00%, depth=16``: without a latency target,
        depth is the job's iodepth (``td->latency_qd``, stat.c)."""
        if (match := _LATENCY_DEPTH.match(s)) and match[1] == "0":
            self.job.latency_depth = int(match[2])

    def _description(self, s: str) -> None:
        if match := _DESC.match(s):
            self.job.description = match[1]


def _disk_lines(section: str, lineno: int, name: str) -> list[DiskUtil]:
    """The ``vda: ios=…`` lines after a ``Disk stats`` line, up to the first other line."""
    disks = []
    for number, raw in enumerate(section.split("\n"), lineno):
        s = _unprefixed(raw)
        if not s:
            continue
        match = _DISK.match(s)
        if match is None:
            break
        dname, rio, wio, rm, wm, rt, wt, queue, util, rest = match.groups()
        aggregate = None
        if rest:
            aggr = _AGGR.match(rest)
            if aggr is None:
                raise ParseError(f"{name}, line {number}: cannot read the aggregate part of this disk "
                                 f"line: {rest[:100]!r}")
            aggregate = {k: float(v) for k, v in zip(DISK_AGGREGATE_KEYS, aggr.groups(), strict=True)}
        disks.append(DiskUtil(name=dname, read_ios=int(rio), write_ios=int(wio), read_merges=int(rm),
                              write_merges=int(wm), read_ticks_ms=int(rt), write_ticks_ms=int(wt),
                              in_queue_ms=int(queue), util_pct=float(util), aggregate=aggregate))
    return disks


def _count(text: str) -> int:
    """A count as fio prints it (a 64-bit counter); ValueError beyond (a line reader reports it)."""
    value = int(text)
    if value > validate.MAX_COUNT:
        raise ValueError(f"{validate.short_repr(value)} is beyond fio's 64-bit counters")
    return value


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _display_value(text: str) -> float | None:
    """A min/max printed by num2str(…, 6, …): ``4053``, or ``1234k`` for large values."""
    if text.isdigit():
        return float(text)
    decoded = decode(text.strip())
    return None if decoded is None else decoded[0]


def _sample_stats(lo: str, hi: str, mean: str, dev: str, samples: str | None, scale: float) -> SampleStats:
    mean_f, dev_f = _float(mean), _float(dev)
    return SampleStats(
        min=int(lo) * scale, max=int(hi) * scale,
        mean=None if mean_f is None else mean_f * scale, stddev=None if dev_f is None else dev_f * scale,
        samples=None if samples is None else int(samples),
    )


# ---------------------------------------------------------------------------------------------
# From what was printed to exact records


def _pick(values: tuple[int, ...] | None, direction: str) -> int | None:
    """The issued/short/dropped count of a direction; ``mixed`` is the sum (stat.c sums into [0])."""
    if values is None:
        return None
    if direction == "mixed":
        return sum(values[:3])
    index = _DIR_INDEX[direction]
    return values[index] if index < len(values) else None


def _job_headers(headers: _HeaderIndex, job: _Job) -> list[_Header]:
    """The header lines of the jobs behind a report block: its group's, or its own name's."""
    group = list(headers.get(job.groupid, ()))
    return [h for h in group if h.name == job.name] if job.members == 1 else group


def _bs_texts(group: list[_Header], direction: str) -> set[str | None]:
    """The printed block sizes of the jobs behind a report block (``group``, their header lines) for
    ``direction`` (None = not fixed)."""
    if not group:
        return {None}
    dirs = ("read", "write", "trim") if direction == "mixed" else (direction,)
    relevant = [h for h in group if any(h.does(d) for d in dirs)] or group
    return {h.size(d) for h in relevant for d in dirs if h.does(d) or not any(h.does(x) for x in dirs)}


def _direction_bytes(
    group: list[_Header], job: _Job, d: _Dir, total: int | None, short: int | None, version: str | None
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
def _bs_option(header: _Header, version: str | None) -> str | None:
    """``bs`` as a job file spells it (``4k``, or ``4k,64k,64k`` per direction) from a header line.

    None for a range (``4096B-65536B``): the header cannot tell ``bsrange`` from ``bssplit``."""
    if not header.ranges or any(lo != hi for lo, hi in header.ranges):
        return None
    sizes = [_block_size(lo, version) for lo, _ in header.ranges]
    if None in sizes:
        return None
    spelled = [format_size_fio(size) for size in sizes if size is not None]
    return spelled[0] if len(set(spelled)) == 1 else ",".join(spelled)


def _shown_options(job: _Job, group: list[_Header], layouts: dict[str, set[int]],
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
    for pos in _positions(text, ": Laying out IO file"):
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        match = _LAYOUT.match(_unprefixed(text[start:len(text) if end < 0 else end]))
        if match and int(match["mib"]):
            found.setdefault(match["name"].strip(), set()).add(int(match["mib"]))
    return found


def _latency(d: _Dir, kind: str) -> Latency | None:
    stats, pcts = d.stats.get(kind), d.pcts.get(kind)
    if stats is None and not pcts:
        return None
    lo, hi, mean, dev = stats if stats is not None else (None, None, None, None)
    return Latency(min_ns=lo, max_ns=hi, mean_ns=mean, stddev_ns=dev, percentiles_ns=pcts or {})


def _finish_direction(
    job: _Job, d: _Dir, group: list[_Header], version: str | None, warnings: list[str]
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
        bw_bytes_s_shown=_bw_shown(d.bw_shown) if bw is None else None,
        iops_shown=_iops_shown(d.iops_shown) if iops is None else None,
        slat=_latency(d, "slat"), clat=_latency(d, "clat"), lat=_latency(d, "lat"),
        short_ios=short, drop_ios=_pick(job.dropped, d.name), bw_samples=d.bw, iops_samples=d.iops,
    )


def _bw_shown(text: str | None) -> float | None:
    """fio's printed bandwidth in B/s (``18.8MiB/s``, ``98.6MB/s``, ``500B/s``), rounded as printed;
    None for bits (``unit_base=1``) or what cannot be read."""
    if not text or not text.endswith("B/s"):
        return None
    found = decode(text.removesuffix("B/s"))
    return found[0] if found else None


def _iops_shown(text: str | None) -> float | None:
    """fio's printed IOPS (``4801``, ``25.0k``), rounded as printed; None when it cannot be read."""
    found = decode(text) if text else None
    return found[0] if found else None


def _finish_job(
    job: _Job, index: int, headers: _HeaderIndex, layouts: dict[str, set[int]], version: str | None,
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
    scan = _Scan.of(text)
    kept_blocks = [block for block in scan.blocks if not block.superseded]
    numbers = _line_numbers(text, [block.start for block in kept_blocks])
    kept = [_job_of(block, numbers[block.start]) for block in kept_blocks]
    kept = [job for job in kept if job.name != ALL_CLIENTS]
    if not kept:
        raise ParseError(
            f"{name}: no fio job report found (expected a line like "
            f"'job: (groupid=0, jobs=1): err= 0: pid=…' followed by 'read: IOPS=…')"
        )
    reader = _BlockParser(name)
    for job in kept:
        reader.read(job, text)
    version = _version(text)
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


def _locate(text: str, kept: list[_Job], violation: Violation) -> tuple[int | None, None, object]:
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


def _job_of(block: _Block, lineno: int) -> _Job:
    m = block.match
    return _Job(name=m["name"].strip(), groupid=int(m["g"]), members=int(m["n"]), error=int(m["err"]),
                verror=m["verror"], body=block.body, end=block.end, lineno=lineno)


def _line_numbers(text: str, offsets: list[int]) -> dict[int, int]:
    """The 1-based line number of each offset, counting newlines once in order."""
    numbers, line, counted = {}, 1, 0
    for offset in sorted(set(offsets)):
        line += text.count("\n", counted, offset)
        counted = offset
        numbers[offset] = line
    return numbers
