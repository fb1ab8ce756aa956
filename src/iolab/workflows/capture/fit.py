"""A fio job that reproduces a fingerprint, and how close a run of it came.

The job (``fit_job``), from the fingerprint alone:

- ``rw`` randrw/rw (or one direction), ``rwmixread`` the read share by requests,
  ``percentage_random`` when the trace is neither all random nor all sequential;
- ``bssplit`` per direction (reads, writes) from the block-size histogram, the sizes covering 99 %
  of requests with integer percentages summing to 100 (largest remainder; fio requires 100);
- ``offset``/``size``: the traced LBA range;
- ``random_distribution``: ``zipf:θ`` or ``pareto:h`` with the parameter whose shares of block
  accesses to the hottest 1 % and 10 % of touched 4 KiB blocks (every block a request covers, its
  size drawn from the fingerprint's histogram: ``fingerprint.skew``) are as close to the trace's as one
  parameter allows (both shares grow with θ, so the bisection finds where their errors are equal
  and opposite: the smallest largest error), each share measured on as many requests as the trace
  holds (the touched set depends on the count) drawn with fio's own generator (``fio_picks``), or
  ``zoned:H1/1:H10-H1/9:rest/90`` (the hot shares put in contiguous zones), or uniform when the
  trace is no more skewed than uniform sampling would be;
- closed loop (depth kept up: mean depth while busy >= 1.5, or busy most of the time) ->
  ``iodepth``: the depth held longest (or the mean while busy, if larger); open loop ->
  ``rate_iops`` per direction (``rate`` in bytes/s where a direction has several block sizes:
  fio paces ``rate_iops`` by the smallest) and ``iodepth`` at the depth's 99th percentile. Not
  ``rate_process=poisson``, though bursty arrivals call for it: fio 3.33 died of SIGFPE with it in a
  write-only job (``got signal=8``), so the fitted arrivals are evenly spaced;
- ``norandommap`` for random I/O: an application reads and writes blocks again, and fio's random map
  would cut a request short where its blocks were done already (``io_u.c``, ``mark_random_map``),
  turning a ``bssplit`` of 4 sizes into 9 at the device;
- ``fsync=N`` when the trace flushes (one flush every N writes);
- ``runtime`` the capture's active span in whole seconds (``Fingerprint.active_s``, the span its
  IOPS are over; the rates above are over it too), ``time_based``, ``direct=1``, ``ioengine=libaio``;
- ``filename=${TARGET}`` in ``[global]`` with a comment saying how to set it (``TARGET_OPTION``).

fio's generators: ``zipf``/``pareto`` pick a rank from the distribution over the range's blocks
and scramble it (``lib/zipf.c``), so hot blocks are scattered like an application's. The zipf rank
comes from Gray's approximation, not the exact distribution, and the scrambling (multiplication by
a 64-bit constant, modulo the block count) maps several ranks to one block unless the count is a
power of two: modelled as ``numpy`` sampling of the exact distribution, a zipf:1.2 capture was
fitted at a θ whose fio run was 2-4 points more skewed than the trace; ``fio_picks`` follows fio.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import UsageError
from ...fio import jobfile
from .fingerprint import skew
from .summary import GRANULE_BYTES, Fingerprint

DISTRIBUTIONS = ("auto", "zipf", "pareto", "zoned", "random")
EMPTY_HINT = ("capture again while the application does I/O, on the device under its files "
              "(findmnt -no SOURCE PATH names it)")


def _percentages(counts: Mapping[int, int], cover: float = 0.99) -> list[tuple[int, int]]:
    total = sum(counts.values())
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    kept, running = [], 0
    for size, count in ranked:
        kept.append((size, count))
        running += count
        if running >= cover * total:
            break
    shares = [100 * c / running for _, c in kept]
    floors = [math.floor(s) for s in shares]
    for i in sorted(range(len(kept)), key=lambda i: floors[i] - shares[i])[:100 - sum(floors)]:
        floors[i] += 1
    return sorted(((size, p) for (size, _), p in zip(kept, floors, strict=True) if p > 0))


def _size(nbytes: int) -> str:
    for unit, shift in (("m", 20), ("k", 10)):
        if nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return str(nbytes)


def bssplit(fp: Fingerprint, reads: bool = True, writes: bool = True) -> str:
    """fio's ``bssplit`` for reads and writes: ``4k/60:64k/40,4k/50:8k/50`` (one list when they agree
    or only one direction is kept)."""
    parts = [":".join(f"{_size(s)}/{p}" for s, p in _percentages(fp.bs_counts[kind])) if kind in fp.bs_counts
             and keep else "" for kind, keep in (("read", reads), ("write", writes))]
    if parts[0] and parts[1] and parts[1] != parts[0]:
        return ",".join(parts)
    return parts[0] or parts[1]


#: fio's ``GOLDEN_RATIO_64`` (``hash.h``): ``__hash_u64(v)`` is ``v * GOLDEN_RATIO_64`` modulo 2**64.
GOLDEN_RATIO_64 = np.uint64(0x61C8864680B583EB)
#: fio sums at most this many terms of the zipf normaliser (``ZIPF_MAX_GEN``, ``lib/zipf.c``).
ZIPF_MAX_GEN = 10_000_000
_MAX_DRAWS = 4_000_000
_ZIPF_RANGE, _PARETO_RANGE = (0.05, 3.0), (0.01, 0.5)


def _zeta(n: int, theta: float) -> float:
    """sum(k ** -theta for k in 1..n): exact to 100,000 terms, beyond by Euler-Maclaurin (error < 1e-9)."""
    exact = min(n, 100_000)
    total = float(np.sum(np.arange(1, exact + 1, dtype=np.float64) ** -theta))
    if n > exact:
        a, b = float(exact), float(n)
        total += (b ** (1 - theta) - a ** (1 - theta)) / (1 - theta) + (b ** -theta - a ** -theta) / 2 \
            + theta * (a ** (-theta - 1) - b ** (-theta - 1)) / 12
    return total


def fio_picks(kind: str, param: float, uniform: np.ndarray, nranges: int) -> np.ndarray:
    """The block indices (0..nranges-1, uint64) fio's ``zipf_next`` (θ = ``param``, not 1) or
    ``pareto_next`` (h = ``param``) return for the uniform draws ``uniform`` in [0, 1), as fio 3.33's
    ``lib/zipf.c`` computes them, less the random offset fio adds to every pick (``rand_off``: a
    rotation, which leaves the shares as they are). Pure."""
    n = float(nranges)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if kind == "zipf":
            zetan, zeta2 = _zeta(min(nranges, ZIPF_MAX_GEN), param), 1.0 + 0.5 ** param
            alpha = 1.0 / (1.0 - param)
            eta = (1.0 - (2.0 / n) ** (1.0 - param)) / (1.0 - zeta2 / zetan)
            z = uniform * zetan
            tail = 1.0 + np.floor(np.nan_to_num(n * (eta * uniform - eta + 1.0) ** alpha, nan=0.0, posinf=n))
            rank = np.where(z < 1.0, 1.0, np.where(z < 1.0 + 0.5 ** param, 2.0, tail)) - 1.0
        else:
            rank = np.floor((n - 1.0) * uniform ** (math.log(param) / math.log(1.0 - param)))
    rank = np.clip(rank, 0.0, 2.0 ** 63).astype(np.uint64)
    return (rank * GOLDEN_RATIO_64) % np.uint64(nranges)


def _draws(fp: Fingerprint, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random(max(1, min(fp.data_ios, _MAX_DRAWS)))


def _fitted_range(fp: Fingerprint) -> tuple[int, int]:
    """fio's block count for the fitted job (``__init_rand_distribution`` in ``filesetup.c``: the
    job's size over the smallest block size) and that block size, bytes."""
    sizes = [s for counts in fp.bs_counts.values() for s in counts] or [GRANULE_BYTES]
    block = max(1, min(sizes))
    span = max(GRANULE_BYTES, (fp.lba_end_bytes or 0) - (fp.lba_first_bytes or 0) // GRANULE_BYTES * GRANULE_BYTES)
    return max(1, math.ceil(span / block)), block


def _lengths(fp: Fingerprint, count: int, seed: int) -> np.ndarray | None:
    """Request sizes (bytes) drawn from the fingerprint's block-size histogram (reads and writes),
    for the hot shares of a fitted job that count every block a request covers, as the
    fingerprint's do (``granules_by``); None for a fingerprint that counted start blocks."""
    if fp.granules_by != "covered":
        return None
    merged: dict[int, int] = {}
    for counts in fp.bs_counts.values():
        for size, n in counts.items():
            merged[int(size)] = merged.get(int(size), 0) + n
    if not merged:
        return None
    sizes = np.array(sorted(merged), dtype=np.int64)
    weights = np.array([merged[int(x)] for x in sizes], dtype=np.float64)
    return np.random.default_rng(seed + 1).choice(sizes, size=count, p=weights / weights.sum())


def _shares(picks: np.ndarray, block: int, lengths: np.ndarray | None = None) -> tuple[float, float]:
    hot1, hot10, _ = skew(picks.astype(np.int64) * block, lengths)
    return hot1 or 0.0, hot10 or 0.0


def fit_skew(fp: Fingerprint, kind: str, seed: int = 1) -> float:
    """The ``zipf`` θ (0.05..3, never 1: fio refuses it) or ``pareto`` h (0.01..0.5) whose hot-1 %
    and hot-10 % shares have equal and opposite errors against the fingerprint's (the smallest
    largest error: both shares grow with θ and fall as h grows to 0.5), by bisection on the sum of
    the two errors with the same draws at every step."""
    nranges, block = _fitted_range(fp)
    draws = _draws(fp, seed)
    lengths = _lengths(fp, draws.size, seed)
    targets = (fp.hot1_pct or 0.0) + (fp.hot10_pct or 0.0)
    lo, hi = _ZIPF_RANGE if kind == "zipf" else _PARETO_RANGE
    for _ in range(18):
        mid = (lo + hi) / 2
        if mid == 1.0:
            mid += 1e-3
        more = sum(_shares(fio_picks(kind, mid, draws, nranges), block, lengths)) < targets
        if more == (kind == "zipf"):
            lo = mid
        else:
            hi = mid
    fitted = round((lo + hi) / 2, 3)
    return 1.001 if fitted == 1.0 else fitted


def uniform_hot10(fp: Fingerprint, seed: int = 1) -> float:
    """The hot-10 % share uniform sampling gives for as many requests over the same range."""
    nranges, block = _fitted_range(fp)
    draws = _draws(fp, seed)
    return _shares(np.floor(draws * nranges).astype(np.uint64), block, _lengths(fp, draws.size, seed))[1]


def distribution(fp: Fingerprint, kind: str = "auto") -> str | None:
    """fio's ``random_distribution`` value for the fingerprint's skew; None for uniform."""
    if fp.hot10_pct is None or fp.hot1_pct is None or kind == "random":
        return None
    if kind == "auto":
        if fp.hot10_pct <= 1.2 * uniform_hot10(fp):
            return None
        kind = "zipf"
    if kind == "zoned":
        hot1, hot10 = round(fp.hot1_pct), round(fp.hot10_pct)
        return f"zoned:{hot1}/1:{hot10 - hot1}/9:{100 - hot10}/90"
    return f"{kind}:{fit_skew(fp, kind)}"


def _rate(iops: Mapping[str, float], fp: Fingerprint) -> tuple[str, str]:
    """The open-loop pacing for ``iops`` (read, then write; 0: none): ``rate_iops`` when every kept
    direction has one block size; else ``rate`` in bytes/s, the IOPS times the mean size of the
    fitted ``bssplit``, because fio paces ``rate_iops`` by the *smallest* block size of a range (HOWTO
    ``rate_iops``): a SQLite trace's 6,117 IOPS over 1k-9k requests ran at 1,323."""
    kept = {kind: rate for kind, rate in iops.items() if rate > 0}
    splits = {kind: _percentages(fp.bs_counts.get(kind, {})) for kind in kept}
    if all(len(split) <= 1 for split in splits.values()):
        values = {kind: str(max(1, round(rate))) for kind, rate in kept.items()}
        name = "rate_iops"
    else:
        values = {kind: str(max(1, round(rate * sum(size * pct for size, pct in splits[kind]) / 100)))
                  for kind, rate in kept.items()}
        name = "rate"
    return name, ",".join(values.values())  # read,write; one value (fio: for both) when one direction is kept


#: The environment variable a fitted job's ``filename`` names (``TARGET_OPTION``).
TARGET_VARIABLE = "TARGET"
#: The fitted job's target, in its ``[global]`` section: fio substitutes ``${VAR}`` in a job file from
#: its environment (HOWTO "Environment variables"; ``options.c``, ``option_dup_subs``), an unset one
#: by nothing, and refuses ``filename=`` with no name ("failed parsing filename=${TARGET}", fio
#: 3.33): so plain fio without the variable stops instead of laying out a file named after the job
#: in the current directory. iolab drops a job file's global ``filename`` for the target it is
#: given (``describe.render.job_sections``), so ``iolab run``/``fit --check`` need no variable.
TARGET_OPTION = ("filename", "${" + TARGET_VARIABLE + "}")


def target_note(name: str = "fitted.fio") -> tuple[str, ...]:
    """The comment over ``TARGET_OPTION`` for a job file called ``name``: how to set the target."""
    return (f"the target is ${{{TARGET_VARIABLE}}}, from the environment; this job WRITES there (its data is "
            "destroyed):",
            f"  {TARGET_VARIABLE}=/dev/sdX fio {name}",
            f"without {TARGET_VARIABLE} fio refuses the job rather than lay out a file in the current directory; "
            "iolab runs it on the target it is given:",
            f"  iolab run {name} --target NAME=/dev/sdX --destroy /dev/sdX")


@dataclass(frozen=True)
class FittedJob:
    """The fitted job's options (fio names, in order) and why the timing model was chosen."""

    options: tuple[tuple[str, str | None], ...]
    closed_loop: bool
    reason: str

    def text(self, header: Sequence[str] = (), name: str = "fitted.fio") -> str:
        """The job file ``name``: ``header`` and ``target_note`` as comments, a ``[global]`` section
        naming the target (``TARGET_OPTION``), then ``[fitted]`` with the options."""
        return jobfile.render((jobfile.Section("global", (TARGET_OPTION,)), jobfile.Section("fitted", self.options)),
                              (*header, *target_note(name)))


def fit_job(fp: Fingerprint, kind: str = "auto", what: str = "the capture") -> FittedJob:
    """The fio job reproducing ``fp`` (see the module docstring; ``what`` names it in errors). Pure.
    Raises UsageError when ``fp``
    holds no read or write request (``Fingerprint.empty``: fio would get ``bssplit=`` and rates
    that it refuses)."""
    if fp.empty or fp.lba_first_bytes is None or fp.lba_end_bytes is None:
        raise UsageError(f"{what} holds no read or write request ({fp.requests:,} requests in "
                         f"{fp.duration_s:.2f} s): there is nothing to fit",
                         hint=EMPTY_HINT)
    reads, writes = fp.ios.get("read", 0), fp.ios.get("write", 0)
    # a direction under 1 % of the requests (a filesystem's odd metadata read) is left out: fio paces a
    # mixed job by its slower direction, so rate_iops=1,N would stall the whole job
    reads, writes = (0 if reads < 0.01 * (reads + writes) else reads), (0 if writes < 0.01 * (reads + writes)
                                                                       else writes)
    random = (fp.random_pct or 0) >= 50
    rw = ("randrw" if random else "rw") if reads and writes else \
        (("randread" if random else "read") if reads else ("randwrite" if random else "write"))
    opts: list[tuple[str, str | None]] = [("ioengine", "libaio"), ("direct", "1"), ("rw", rw)]
    if reads and writes:
        opts.append(("rwmixread", str(round(fp.read_pct_ios or 0))))
    opts.append(("bssplit", bssplit(fp, reads > 0, writes > 0)))
    if 1 <= round(fp.random_pct or 0) <= 99:
        opts.append(("percentage_random", str(round(fp.random_pct or 0))))
    first = fp.lba_first_bytes // GRANULE_BYTES * GRANULE_BYTES
    opts += [("offset", str(first)), ("size", str(max(GRANULE_BYTES, fp.lba_end_bytes - first)))]
    dist = distribution(fp, kind)
    if dist and random:
        opts.append(("random_distribution", dist))
    if random:  # fio's random map shrinks a request to the blocks not yet done (io_u.c, mark_random_map)
        opts.append(("norandommap", None))
    busy_depth = fp.depth_mean_busy or 0.0
    closed = busy_depth >= 1.5 or fp.busy_pct >= 80
    if closed:
        # the depth held longest: a closed loop at iodepth N sits at N, dipping while completions are reaped
        held = max((d for d in fp.depth_time_pct if d > 0), key=lambda d: fp.depth_time_pct[d], default=1)
        opts.append(("iodepth", str(max(held, round(busy_depth)))))
        reason = (f"closed loop: mean depth while busy {busy_depth:.2f} (most often {held}), busy "
                  f"{fp.busy_pct:.0f} % of the time")
    else:
        duration = max(fp.active_s or fp.duration_s, 1e-3)
        opts += [("iodepth", str(max(1, round(fp.depth_at_issue.p99 or 1)))),
                 _rate({"read": reads / duration, "write": writes / duration}, fp)]
        reason = (f"open loop: mean depth while busy {busy_depth:.2f}, busy {fp.busy_pct:.0f} % of the time; "
                  f"arrivals at the traced rate, evenly spaced (the trace's inter-arrival CV: "
                  f"{fp.interarrival_cv or 0:.2f})")
    flushes = fp.ios.get("flush", 0)
    if flushes and writes:
        opts.append(("fsync", str(max(1, round(writes / flushes)))))
    opts += [("runtime", f"{max(1, round(fp.active_s or fp.duration_s))}s"), ("time_based", None)]
    return FittedJob(tuple(opts), closed, reason)


def _difference(base: float | None, other: float | None) -> tuple[float | None, float | None]:
    """``other - base`` and ``other / base - 1`` (None where unknown or ``base`` is 0)."""
    if base is None or other is None:
        return None, None
    return other - base, (other / base - 1 if base else None)


@dataclass(frozen=True)
class MetricRow:
    """One fingerprint metric: the original's, the fitted job's and, when ``fit --check`` replayed the
    capture on the check device, that replay's (``replayed``). ``error`` is the fit error, fitted -
    replayed (fitted - original without a replay), in the metric's unit (points for percentages),
    ``relative`` the ratio - 1 where it makes sense; ``device`` and ``device_relative`` the device
    difference, replayed - original (None without a replay)."""

    metric: str
    unit: str
    original: float | None
    fitted: float | None
    replayed: float | None = None
    with_replay: bool = False

    @property
    def reference(self) -> float | None:
        """What the fitted job is measured against: the replay on the check device, or the original."""
        return self.replayed if self.with_replay else self.original

    @property
    def error(self) -> float | None:
        return _difference(self.reference, self.fitted)[0]

    @property
    def relative(self) -> float | None:
        return _difference(self.reference, self.fitted)[1]

    @property
    def device(self) -> float | None:
        return _difference(self.original, self.replayed)[0] if self.with_replay else None

    @property
    def device_relative(self) -> float | None:
        return _difference(self.original, self.replayed)[1] if self.with_replay else None


def _bs_share(fp: Fingerprint, kind: str, size: int) -> float | None:
    counts = fp.bs_counts.get(kind)
    return 100.0 * counts.get(size, 0) / sum(counts.values()) if counts else None


def largest_sizes(counts: Mapping[int, int], n: int = 4) -> list[int]:
    """The ``n`` block sizes with the most requests, largest share first (ties: the smaller size first)."""
    return [size for size, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def closeness(original: Fingerprint, fitted: Fingerprint, replayed: Fingerprint | None = None) -> list[MetricRow]:
    """Metric by metric: the mix, the shares of the 4 block sizes with the most requests per
    direction (largest first), randomness, depth, rate, skew, flushes, service times; with
    ``replayed`` (the capture's replay on the check device, captured there) its figure beside each,
    which the fit error is then taken against (``MetricRow``)."""
    def of(fp: Fingerprint) -> list[float | None]:
        values: list[float | None] = [fp.read_pct_ios]
        values += [_bs_share(fp, kind, size) for kind in ("read", "write")
                   for size in largest_sizes(original.bs_counts.get(kind, {}))]
        values += [fp.random_pct, fp.depth_mean_busy, fp.iops, fp.hot1_pct, fp.hot10_pct, fp.flush_pct,
                   _flush_rate(fp), fp.interarrival_cv]
        values += [_p99(fp, kind) for kind in ("read", "write", "flush")]
        return values
    names = [("read share (rwmixread)", "%")]
    names += [(f"{kind} bs {_size(size)} share", "%") for kind in ("read", "write")
              for size in largest_sizes(original.bs_counts.get(kind, {}))]
    names += [("random", "%"), ("depth mean while busy", ""), ("IOPS (device)", "IOPS"), ("hottest 1 % share", "%"),
              ("hottest 10 % share", "%"), ("flush share", "%"), ("flushes/s", "/s"), ("inter-arrival CV", "")]
    names += [(f"service time {kind} p99", "µs") for kind in ("read", "write", "flush")]
    third = of(replayed) if replayed is not None else [None] * len(names)
    return [MetricRow(metric, unit, a, b, c, replayed is not None)
            for (metric, unit), a, b, c in zip(names, of(original), of(fitted), third, strict=True)]


def _flush_rate(fp: Fingerprint) -> float | None:
    """Flush requests per second over the active span; None without requests."""
    span = fp.active_s or fp.duration_s
    return fp.ios.get("flush", 0) / span if fp.requests and span else None


def _p99(fp: Fingerprint, kind: str) -> float | None:
    found = fp.latency_us.get(kind)
    return found.p99 if found else None
