"""Cache tiers: which I/Os reached each device under a cache, and the cache's own counters.

A suite (or ``--tier NAME=DEVICE``) names the devices under a cached target (``describe.tiers``).

**Hit ratio** (per direction) = 1 − I/Os that reached the origin / I/Os fio issued (``total_ios``
of the direction, all jobs and hosts). It needs nothing from the cache, so it works for any cache
(dm-cache, lvmcache, bcache, ZFS L2ARC, an array's cache, the page cache in front of a device).
It is given only where both counts cover the same window, so it lies in [0, 1]; otherwise it is
None and ``Accounting.hit_problems`` says why (``RAMP``: device counts read before and after fio
include its ``ramp_time``, which fio's ``total_ios`` leaves out, so the two windows differ;
``MORE``: the origin completed more I/Os than fio issued — read-ahead, write-back of earlier
writes, another process — so the share of fio's I/Os it served cannot be told).
Device counts are diskstats (``Documentation/admin-guide/iostats.rst``, ``/sys/block/DEV/stat``):
completed reads and writes, not bytes, so merged or split requests shift the ratio (bytes are
stored too).

**Where the counts come from.** A device on this machine (a local target's tiers, or
``@local``) is read from ``/sys/class/block/DEV/stat`` just before fio starts and just after it
ends (``snapshot``), exactly, but over fio's whole run: ``ramp_time`` and file layout included,
which fio's ``total_ios`` is not. Any other device (``@HOST``, or the fio servers' devices of a
remote target) comes from the observers' node_exporter diskstats over fio's measured phase
(``observe.usage``; a run with passes much shorter than the 1 s scrapes is blurred).

**Cache counters.** When a tier or the target's device is a dm-cache/lvmcache device (a
device-mapper device whose table has a ``cache`` target) its ``dmsetup status`` line is kept; for
a bcache device its ``bcache/stats_total`` files and ``dirty_data``. Both are stored as the text the
kernel gave and parsed when shown (``parse_dmcache_status``, ``parse_bcache``). A device that is
neither, or that cannot be read (no dmsetup, no permission), records nothing; nothing fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import units
from ..describe.tiers import ORIGIN, Tier
from ..facts.sysfs import read_text
from ..fio import jobfile
from ..fio.merge import IO_DIRECTIONS
from ..model import ResultRecord
from ..observe import usage

#: Where the dm-cache status format is documented.
DMCACHE_SOURCE = "Documentation/admin-guide/device-mapper/cache.rst, 'Status' (dmsetup status)"
#: Where bcache's statistics are documented.
BCACHE_SOURCE = "Documentation/admin-guide/bcache.rst, 'Statistics' and 'Sysfs - backing device'"
#: bcache's running-total counters (``stats_total/``), and the sizes it prints with units.
BCACHE_COUNTERS = ("cache_hits", "cache_misses", "cache_bypass_hits", "cache_bypass_misses",
                   "cache_miss_collisions", "cache_readaheads")
BCACHE_SIZES = ("bypassed",)
SECTOR_BYTES = 512


# --- parsers (pure) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DiskCounters:
    """Completed I/Os and sectors (512 B) of a block device, the first fields of
    ``/sys/block/DEV/stat`` (``Documentation/block/stat.rst``): reads 1 and 3, writes 5 and 7,
    discards 12 and 14 (kernels before 4.18 have no discard fields: 0)."""

    reads: int
    read_sectors: int
    writes: int
    write_sectors: int
    discards: int = 0
    discard_sectors: int = 0

    def minus(self, before: DiskCounters) -> DiskCounters:
        return DiskCounters(*(a - b for a, b in zip(self._values(), before._values(), strict=True)))

    def _values(self) -> tuple[int, ...]:
        return (self.reads, self.read_sectors, self.writes, self.write_sectors, self.discards, self.discard_sectors)


def parse_block_stat(text: str) -> DiskCounters:
    """A ``/sys/block/DEV/stat`` line. Raises ``ValueError`` for fewer than 11 numbers."""
    fields = [int(x) for x in text.split()]
    if len(fields) < 11:
        raise ValueError(f"a block stat line has at least 11 fields, got {len(fields)}: {text.strip()!r}")
    discards = (fields[11], fields[13]) if len(fields) >= 15 else (0, 0)
    return DiskCounters(fields[0], fields[2], fields[4], fields[6], *discards)


@dataclass(frozen=True)
class DmCacheStatus:
    """One ``cache`` target's status line (``DMCACHE_SOURCE``). Block sizes in 512 B sectors;
    ``used_blocks``/``total_blocks`` count cache blocks; ``dirty`` is cache blocks that differ from
    the origin. The hit, miss, promotion and demotion counters are the kernel's 32-bit counters
    since the table was loaded (``cache_status()`` in ``drivers/md/dm-cache-target.c``: they wrap).
    ``metadata_mode`` is ``rw``/``ro`` (None on kernels before 4.2, which do not print it),
    ``needs_check`` True when the metadata must be checked. ``failed``: the status is ``Fail``."""

    metadata_block_sectors: int = 0
    metadata_used: int = 0
    metadata_total: int = 0
    block_sectors: int = 0
    used_blocks: int = 0
    total_blocks: int = 0
    read_hits: int = 0
    read_misses: int = 0
    write_hits: int = 0
    write_misses: int = 0
    demotions: int = 0
    promotions: int = 0
    dirty: int = 0
    features: tuple[str, ...] = ()
    core_args: Mapping[str, str] = field(default_factory=dict)
    policy: str | None = None
    policy_args: Mapping[str, str] = field(default_factory=dict)
    metadata_mode: str | None = None
    needs_check: bool = False
    failed: bool = False


#: The counters of ``DmCacheStatus`` that only grow (and wrap at 2**32).
DMCACHE_COUNTERS = ("read_hits", "read_misses", "write_hits", "write_misses", "promotions", "demotions")


def _pairs(words: Sequence[str]) -> dict[str, str]:
    return dict(zip(words[0::2], words[1::2], strict=False))


def parse_dmcache_line(params: str) -> DmCacheStatus:
    """The status of one cache target: the words after ``<start> <length> cache`` (see
    ``DMCACHE_SOURCE``). Raises ``ValueError`` for anything else."""
    words = params.split()
    if words == ["Fail"]:
        return DmCacheStatus(failed=True)
    try:
        meta_used, meta_total = words[1].split("/")
        used, total = words[3].split("/")
        rh, rm, wh, wm, demotions, promotions, dirty = (int(w) for w in words[4:11])
        i = 11
        features = tuple(words[i + 1:i + 1 + int(words[i])])
        i += 1 + len(features)
        core = words[i + 1:i + 1 + int(words[i])]
        i += 1 + len(core)
        policy = words[i]
        policy_args = words[i + 2:i + 2 + int(words[i + 1])]
        i += 2 + len(policy_args)
        rest = words[i:]
        return DmCacheStatus(int(words[0]), int(meta_used), int(meta_total), int(words[2]), int(used), int(total),
                             rh, rm, wh, wm, demotions, promotions, dirty, features=features, core_args=_pairs(core),
                             policy=policy, policy_args=_pairs(policy_args), metadata_mode=rest[0] if rest else None,
                             needs_check=len(rest) > 1 and rest[1] == "needs_check")
    except (IndexError, ValueError) as exc:
        raise ValueError(f"not a dm-cache status ({DMCACHE_SOURCE}): {params.strip()!r}") from exc


def parse_dmcache_status(text: str) -> list[tuple[str | None, DmCacheStatus]]:
    """Every cache target in ``dmsetup status [NAME]`` output, with the device name when the lines
    carry one (``dmsetup status`` of all devices prints ``name: 0 41943040 cache …``). Lines of other
    targets are skipped. Raises ``ValueError`` for a cache line that does not parse."""
    out = []
    for line in text.splitlines():
        match = re.match(r"^\s*(?:(?P<name>\S+): )?(?P<start>\d+) (?P<length>\d+) (?P<target>\S+)\s?(?P<rest>.*)$",
                         line)
        if match and match["target"] == "cache":
            out.append((match["name"], parse_dmcache_line(match["rest"])))
    return out


_HPRINT = re.compile(r"^\s*(-?\d+)(?:\.(\d))?([kMGTPEZY])?\s*$")
_UNITS = "kMGTPEZY"


def parse_hprint(text: str) -> int:
    """A size bcache prints with ``bch_hprint()`` (``1.5G``, ``11.1M``, ``0.5k``, ``512``) in bytes:
    powers of 1024, one decimal that is tenths of the unit rounded down (so the value is within a
    tenth of a unit). Raises ``ValueError``."""
    match = _HPRINT.match(text)
    if not match:
        raise ValueError(f"not a bcache size: {text!r}")
    whole, tenth, unit = int(match[1]), int(match[2] or 0), match[3]
    scale = 1024 ** (_UNITS.index(unit) + 1) if unit else 1
    return whole * scale + tenth * scale // 10 * (1 if whole >= 0 else -1)


@dataclass(frozen=True)
class BcacheStats:
    """A bcache device's running totals (``BCACHE_SOURCE``): hits and misses counted per I/O as
    bcache sees them (a partial hit is a miss), bypass hits and misses (I/O meant to skip the cache),
    miss collisions, readaheads (None on kernels without the file), ``bypassed`` and ``dirty_data``
    in bytes (printed with units, so approximate)."""

    counters: Mapping[str, int]
    bypassed_bytes: int | None = None
    dirty_bytes: int | None = None


def parse_bcache(files: Mapping[str, str]) -> BcacheStats:
    """bcache's files as read: ``stats_total/<counter>`` by counter name, ``bypassed``, ``dirty_data``.
    Files that are missing or unreadable are left out. Raises nothing."""
    counters = {}
    for name in BCACHE_COUNTERS:
        text = (files.get(name) or "").strip()
        if text.isdigit():
            counters[name] = int(text)

    def size(name: str) -> int | None:
        try:
            return parse_hprint(files[name]) if files.get(name) else None
        except ValueError:
            return None

    return BcacheStats(counters, size("bypassed"), size("dirty_data"))


# --- reading this machine ----------------------------------------------------------------------


def _sys_block(name: str) -> str:
    return os.path.join("/sys/class/block", name)


def snapshot(devices: Iterable[str], dmsetup: str = "dmsetup") -> dict[str, Any]:
    """Counters of these kernel devices now, as the text the kernel gave: ``{"stat": {dev: line},
    "dm_cache": {dev: dmsetup status text}, "bcache": {dev: {file: text}}}``. A device that does
    not exist or cannot be read is left out; dm-cache and bcache only where the device is one."""
    out: dict[str, Any] = {"stat": {}, "dm_cache": {}, "bcache": {}}
    for dev in dict.fromkeys(devices):
        stat = read_text(os.path.join(_sys_block(dev), "stat"))
        if stat is not None:
            out["stat"][dev] = stat.strip()
        dm_name = read_text(os.path.join(_sys_block(dev), "dm", "name"))
        if dm_name is not None:
            status = _dmsetup_status(dm_name.strip(), dmsetup)
            if status is not None:
                out["dm_cache"][dev] = status
        bcache = os.path.join(_sys_block(dev), "bcache")
        if os.path.isdir(os.path.join(bcache, "stats_total")):
            files = {name: read_text(os.path.join(bcache, "stats_total", name)) for name in (*BCACHE_COUNTERS,
                                                                                             *BCACHE_SIZES)}
            files["dirty_data"] = read_text(os.path.join(bcache, "dirty_data"))
            out["bcache"][dev] = {k: v.strip() for k, v in files.items() if v is not None}
    return out


def _dmsetup_status(name: str, dmsetup: str) -> str | None:
    """``dmsetup status NAME`` when its table has a cache target; None otherwise or when it fails."""
    path = shutil.which(dmsetup)
    if path is None:
        return None
    try:
        proc = subprocess.run([path, "status", name], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    try:
        return proc.stdout.strip() if parse_dmcache_status(proc.stdout) else None
    except ValueError:
        return proc.stdout.strip()  # kept as the kernel gave it; shown as unreadable


# --- accounting (pure, over stored results) ----------------------------------------------------


@dataclass(frozen=True)
class TierIO:
    """I/Os that reached one tier's device during one fio invocation. ``source``: ``sysfs`` (read
    here before and after fio, its whole run) or ``node_exporter`` (the observers, fio's measured
    phase); bytes from sectors or node_exporter's byte counters."""

    tier: str
    device: str
    host: str
    source: str
    reads: float
    writes: float
    read_bytes: float
    write_bytes: float
    discards: float = 0.0

    def ios(self, direction: str) -> float:
        return {"read": self.reads, "write": self.writes, "trim": self.discards}.get(
            direction, self.reads + self.writes + self.discards)


@dataclass(frozen=True)
class CacheCounters:
    """A cache device's own counters over one fio invocation: ``kind`` ``dm-cache`` or ``bcache``,
    ``increases`` of its counters (hits, misses, promotions, demotions …), ``gauges`` after it (dirty
    blocks or bytes, cache blocks used), ``source`` the documentation of the format; ``problem`` when
    the stored text could not be read."""

    kind: str
    device: str
    increases: Mapping[str, int] = field(default_factory=dict)
    gauges: Mapping[str, int] = field(default_factory=dict)
    source: str = ""
    problem: str | None = None


#: Why a hit ratio is not given (``Accounting.hit_problems``; see the module docstring).
RAMP = "ramp_time counted by the device, not by fio"
MORE = "origin did more I/Os than fio"


@dataclass(frozen=True)
class Accounting:
    """Tier accounting of one fio invocation: fio's issued I/Os per direction, each tier's I/Os, the
    hit ratio per direction (in [0, 1]; None without an origin tier or I/Os, or where the counts do
    not cover the same window: ``hit_problems`` says why), cache counters, and notes."""

    issued: Mapping[str, int]
    tiers: tuple[TierIO, ...]
    hit_ratio: Mapping[str, float | None]
    caches: tuple[CacheCounters, ...] = ()
    notes: tuple[str, ...] = ()
    hit_problems: Mapping[str, str] = field(default_factory=dict)


def issued_ios(result: ResultRecord) -> dict[str, int]:
    """I/Os fio completed per direction (``total_ios``), summed over every job and host."""
    out: dict[str, int] = {}
    for job in result.report.jobs if result.report else ():
        for name, d in job.directions.items():
            if name in IO_DIRECTIONS and d.total_ios:
                out[name] = out.get(name, 0) + d.total_ios
    return out


def _local_io(tier: Tier, stored_: Mapping[str, Any]) -> TierIO | None:
    dev = stored_.get("devices", {}).get(tier.name)
    before = stored_.get("before", {}).get("stat", {}).get(dev)
    after = stored_.get("after", {}).get("stat", {}).get(dev)
    if dev is None or before is None or after is None:
        return None
    d = parse_block_stat(after).minus(parse_block_stat(before))
    return TierIO(tier.name, dev, "local", "sysfs", d.reads, d.writes, d.read_sectors * SECTOR_BYTES,
                  d.write_sectors * SECTOR_BYTES, d.discards)


def _observed_io(tier: Tier, result: ResultRecord) -> TierIO | None:
    """A tier from the observers: the named host, or the result's target's hosts summed."""
    hosts = usage.select(result, tier.host or result.target)
    dev = tier.kernel_name
    found = [(u.host, u.disks[dev]) for u in hosts or () if dev in u.disks]
    if not found:
        return None
    total = [sum(getattr(d, f) for _, d in found) for f in ("reads", "writes", "read_bytes", "write_bytes", "discards")]
    return TierIO(tier.name, dev, " + ".join(h for h, _ in found), "node_exporter", *total)


def _caches(stored_: Mapping[str, Any]) -> tuple[CacheCounters, ...]:
    before, after = stored_.get("before", {}), stored_.get("after", {})
    out = []
    for dev, text in after.get("dm_cache", {}).items():
        out.append(dmcache_counters(dev, before.get("dm_cache", {}).get(dev), text))
    for dev, files in after.get("bcache", {}).items():
        out.append(bcache_counters(dev, before.get("bcache", {}).get(dev), files))
    return tuple(out)


def dmcache_counters(device: str, before: str | None, after: str) -> CacheCounters:
    """The increases of a dm-cache device's counters between two ``dmsetup status`` texts (modulo
    2**32: the kernel's counters are 32-bit) and its gauges after; several cache targets of one
    device are summed."""
    try:
        now = [s for _, s in parse_dmcache_status(after)]
        then = [s for _, s in parse_dmcache_status(before)] if before else []
    except ValueError as exc:
        return CacheCounters("dm-cache", device, source=DMCACHE_SOURCE, problem=str(exc))
    if any(s.failed for s in now):
        return CacheCounters("dm-cache", device, source=DMCACHE_SOURCE, problem="the cache reports 'Fail'")
    increases = {}
    if len(then) == len(now):
        increases = {c: sum((getattr(a, c) - getattr(b, c)) % 2**32 for a, b in zip(now, then, strict=True))
                     for c in DMCACHE_COUNTERS}
    gauges = {g: sum(getattr(s, g) for s in now) for g in ("dirty", "used_blocks", "total_blocks")}
    return CacheCounters("dm-cache", device, increases, gauges, DMCACHE_SOURCE,
                         "needs_check is set" if any(s.needs_check for s in now) else None)


def bcache_counters(device: str, before: Mapping[str, str] | None, after: Mapping[str, str]) -> CacheCounters:
    """The increases of a bcache device's running totals, and its dirty data (bytes) after."""
    now = parse_bcache(after)
    then = parse_bcache(before or {})
    increases = {k: v - then.counters[k] for k, v in now.counters.items() if k in then.counters}
    if now.bypassed_bytes is not None and then.bypassed_bytes is not None:
        increases["bypassed_bytes"] = now.bypassed_bytes - then.bypassed_bytes
    gauges = {"dirty_bytes": now.dirty_bytes} if now.dirty_bytes is not None else {}
    return CacheCounters("bcache", device, increases, gauges, BCACHE_SOURCE)


def accounting(result: ResultRecord, tiers: Sequence[Tier]) -> Accounting | None:
    """The tier accounting of a stored result (see the module docstring); None when it has no tier
    counts and no cache counters (no tiers named, or none could be read)."""
    stored_ = (result.extra or {}).get("tiers") or {}
    found = []
    for tier in tiers:
        io = _local_io(tier, stored_) or _observed_io(tier, result)
        if io is not None:
            found.append(io)
    caches = _caches(stored_)
    if not found and not caches:
        return None
    issued = issued_ios(result)
    origin = next((t for t in found if t.tier == ORIGIN), None)
    ratios: dict[str, float | None] = {}
    problems: dict[str, str] = {}
    ramp = _ramp(result)
    for d, n in issued.items():
        ratios[d] = None
        if origin is None or not n:
            continue
        if origin.source == "sysfs" and ramp:
            problems[d] = RAMP
        elif origin.ios(d) > n:
            problems[d] = MORE
        else:
            ratios[d] = 1 - origin.ios(d) / n
    notes = []
    if any(t.source == "sysfs" for t in found) and ramp:
        notes.append("device counts read before and after fio include its ramp_time; fio's I/Os do not, so no hit "
                     "ratio is given (run the passes with ramp_time=0: a warm-up needs none)")
    return Accounting(issued, tuple(found), ratios, caches, tuple(notes), problems)


def _ramp(result: ResultRecord) -> bool:
    """Whether a job of the result's job file has a ``ramp_time`` other than 0 (one fio substitutes,
    such as ``${RAMP}``, counts)."""
    for _, options in jobfile.effective_jobs(jobfile.parse(result.job_text)):
        try:
            if units.parse_duration_us(options.get("ramp_time") or "0") > 0:
                return True
        except ValueError:
            return True
    return False
