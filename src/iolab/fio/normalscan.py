"""fio's normal (human-readable) output cut into its parts: a scan for the structure (``str.find``,
C speed) finds every job block, header line and report; a line parser reads the kept job blocks.
``fio.normal`` turns what they found into a ``FioReport``.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache

from ..errors import ParseError
from ..model import DISK_AGGREGATE_KEYS, DiskUtil, SampleStats, pct_key
from . import validate
from .num2str import decode

#: A job's report line, ``name: (groupid=0, jobs=4): err= 0: pid=9048: <local time>`` (``err=95 (verror)``
#: when the job failed; stat.c ``show_thread_status_normal()``).
JOB_LINE = re.compile(
    r"^(?P<name>.*?): \(groupid=(?P<g>\d+), jobs=(?P<n>\d+)\): err=\s*(?P<err>-?\d+)"
    r"(?: \((?P<verror>.*)\))?: pid=(?P<pid>\d+)"
)

_HEADER = re.compile(
    r"^(?P<name>.*?): \(g=(?P<g>\d+)\): rw=(?P<rw>\w+), (?P<bs>bs.*?), ioengine=(?P<engine>[^,\s]+)"
    r"(?:, iodepth=(?P<depth>\d+))?"
)

LAYOUT = re.compile(r"^(?P<name>.*?): Laying out IO files?(?:\(s\))? \((?P<n>\d+) files?(?:\(s\))? / (?:total )?"
                     r"(?P<mib>\d+)Mi?B\)$")

_LATENCY_DEPTH = re.compile(r"^latency\s*: target=(\d+), window=\d+, percentile=[^,]+, depth=(\d+)$")

_BW_PREFIX = re.compile(r"[kKMGTPE](i?)(?:B|bit)")

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

DIR_INDEX = {"read": 0, "write": 1, "trim": 2}


@dataclass(slots=True)
class DirBlock:
    """One direction block as printed (``read``, ``write``, ``trim``, ``mixed``, ``sync``)."""

    name: str
    iops_shown: str | None = None
    io_shown: str | None = None
    runtime_ms: int | None = None
    bw_shown: str | None = None
    bw_other: str | None = None  # the display in parentheses: SI when bw_shown is IEC, and vice versa
    stats: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)
    pcts: dict[str, dict[str, float]] = field(default_factory=dict)
    bw: SampleStats | None = None
    iops: SampleStats | None = None


@dataclass(slots=True)
class JobBlock:
    """One job block: where it is, its job line, and (once read) what it prints."""

    name: str
    groupid: int
    members: int
    error: int
    verror: str | None
    body: int  # offset of the line after the job line
    end: int  # offset where the block ends
    lineno: int  # line number of the job line
    dirs: dict[str, DirBlock] = field(default_factory=dict)
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
class Header:
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
HeaderIndex = dict[int, dict[Header, None]]


@dataclass(slots=True)
class Block:
    """A job block found by the scan: its job line and extent. It is read only if kept."""

    start: int  # offset of the job line
    body: int  # offset of the line after it
    end: int
    match: re.Match[str]
    report: int
    superseded: bool = False


def positions(text: str, needle: str) -> list[int]:
    """Offsets of every ``needle`` in ``text``: one C-level split, where a ``find()`` per hit
    costs microseconds each on a long text."""
    out, pos, step = [], -len(needle), len(needle)
    for chunk in text.split(needle)[:-1]:
        pos += len(chunk) + step
        out.append(pos)
    return out


@dataclass(slots=True)
class Scan:
    """The structure of a normal output: job blocks, header lines, report boundaries.

    A block repeated (same name, group and pid) after a ``Run status group`` line supersedes the
    earlier one. Superseded blocks are located but never read line by line, which keeps long
    ``--status-interval`` streams cheap.
    """

    blocks: list[Block] = field(default_factory=list)
    headers: HeaderIndex = field(default_factory=dict)
    marks: list[int] = field(default_factory=list)  # line starts of every job/group/header line
    report_starts: list[int] = field(default_factory=list)
    superseded: int = 0

    @classmethod
    def of(cls, text: str) -> Scan:
        scan = cls()
        events = sorted([(p, 0) for p in positions(text, ": (groupid=")]
                        + [(p, 1) for p in positions(text, "Run status group")]
                        + [(p, 2) for p in positions(text, ": (g=")])
        latest: dict[tuple[str, str, str], list[Block]] = {}
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
                line = unprefixed(line)
            if kind == 2:
                if line not in seen_headers and (match := _HEADER.match(line)):
                    scan._header(match)
                seen_headers.add(line)
            elif match := JOB_LINE.match(line):
                if after_jobs:
                    report, after_jobs = report + 1, False
                    scan.report_starts.append(start)
                open_block = Block(start, line_end + 1, len(text), match, report)
                scan._add(open_block, latest)
        return scan

    def _add(self, block: Block, latest: dict[tuple[str, str, str], list[Block]]) -> None:
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
        header = Header(m["name"].strip(), int(m["g"]), m["rw"], sizes, m["engine"], m["depth"], ranges)
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
    """``Header.bs`` and ``Header.ranges`` from a header's ``bs=(R) 4096B-4096B, …`` (2.x ``bs=4K-4K/…``)."""
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


def unprefixed(line: str) -> str:
    """A line without the ``<host> `` prefix of text relayed by fio servers (client mode)."""
    line = line.strip()
    if line.startswith("<") and "> " in line:
        line = line[line.index("> ") + 2:].strip()
    return line


def printed_version(text: str) -> str | None:
    """The ``fio-3.33`` line (or the client's ``hostname=…, fio=fio-3.33`` probe line)."""
    pos = text.find("fio-")
    while pos >= 0:
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        line = unprefixed(text[start:len(text) if end < 0 else end])
        if line.startswith("fio-") and " " not in line and len(line) > 4:
            return line[4:]
        if line.startswith("hostname=") and (match := _PROBE_VERSION.search(line)):
            return match[1]
        pos = text.find("fio-", pos + 4)
    return None


class BlockParser:
    """Reads the lines of one job block; handlers are keyed by a line's first four characters."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lineno = 0
        self.job: JobBlock = None  # type: ignore[assignment]
        self.dir: DirBlock | None = None
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

    def read(self, job: JobBlock, text: str) -> None:
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
        other = None
        if m3 is not None:
            name, iops, bw, other, io, runt, _ = m3.groups()
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
        self.dir = job.dirs[name] = DirBlock(name, iops.strip(), io.strip(), _count(runt), bw.strip(),
                                             other.strip() if other else None)
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

    def _dir_for(self, kind: str, s: str) -> DirBlock:
        if kind == "sync":
            return self.job.dirs.setdefault("sync", DirBlock("sync"))
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
        s = unprefixed(raw)
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

_BS3 = re.compile(r"bs=\(R\) (\S+)-(\S+), \(W\) (\S+)-(\S+), (?:\(T\) (\S+)-(\S+)|(bs_is_seq_rand))$")

_BS2 = re.compile(r"bs(\(seq/rand\))?=([^-/]+)-([^/]+)/([^-/]+)-([^/,]+)(?:/([^-/]+)-([^/,]+))?$")

_DIR3 = re.compile(
    r"^(read|write|trim|mixed)\s*: IOPS=([^,]+), BW=([^(]*?) ?\(([^)]*)\)\(([^/]+)/(\d+)msec\)(.*)$"
)

_DIR2 = re.compile(r"^(read|write|trim|mixed)\s*: io=([^,]+), bw=([^,]+), iops=([^,]+), runt=\s*(\d+)msec$")

_PCT_KEYS: dict[str, str] = {}
