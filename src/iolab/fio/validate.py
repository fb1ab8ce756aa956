"""What a fio report can physically hold: every number finite and in its range, totals consistent.

Every parser (``parse_json``, ``parse_normal``, ``parse_terse``) applies ``check`` to the report it
returns, so imports and iolab's own runs alike never store an impossible value, and the store applies
it again to what it reads back (a run stored by an older iolab that breaks a rule is reported, not
shown). A report that breaks a rule is refused whole: the parsers raise ``ParseError`` naming the
input, the place (a line, or fio's JSON key), the value and the rule; nothing is clamped.

The rules, in model terms (``model.py``; fio's own formulas from ``stat.c@fio-3.33``, FIO_NOTES §1-2):

* **Finite, typed.** Every number is an ``int`` or ``float`` (never ``bool``), not NaN nor infinite;
  counts are ints that fit fio's unsigned 64-bit counters; an int where the model has a float is at
  most 2^53 (the store reads such a field back as a float, exactly).
* **Ranges.** Counts, bytes, runtimes, rates, latencies, sample statistics and shares (CPU, IO
  depths, latency buckets) are >= 0. Shares have no upper bound: fio counts fsyncs in the IO depths
  but divides by reads and writes only (106.25 % in ``fio-3.33_psync_fsync_all_percentiles.json``),
  and a process's helper threads can take more than 100 % CPU. A port is 0..65535; a timestamp lies
  in the years 1970-9999.
* **Order.** Latency ``min <= mean <= max`` and sample ``min <= mean <= max``, within the rounding of
  the source format (normal output truncates min/max to the line's unit, at most a tenth of max);
  percentiles never decrease as the percentile grows; percentile keys lie in (0, 100].
* **Rates need time.** IOPS or bandwidth known means ``runtime_ms > 0`` (every format prints the
  runtime beside the rates, so a rate without one comes from a damaged file); a runtime of 0 with I/O
  counted is possible (a failed job; a ``verify_only`` phase reports its planned writes, FIO_NOTES
  §5.3) and then the rates are unknown (None).
* **Totals.** ``iops == 1000 * total_ios / runtime_ms`` and ``bw_bytes_s == 1000 * io_bytes /
  runtime_ms`` where all are known (how every parser computes them). ``io_bytes == total_ios × bs``
  for a job of one fixed block size, within the I/Os in flight (``iodepth + 1`` blocks: with
  ``ramp_time`` fio's io_bytes holds those in flight when the ramp ended), 1 % (status snapshots
  count issued and completed I/Os at slightly different moments) and 1 KiB (fio < 2.21 printed KiB).
  It is checked only when the report shows the entry is one job (JSON ``job_runtime`` not above its
  runtime: a group's sums its members', whose block sizes may differ) and names one ``bs`` for every
  direction, with an engine whose I/O size is its block size.
* **Histograms** (json+ ``bins``) hold bucket values below 10^19 ns and counts > 0, at most 2^64-1
  in all (``histogram.Histogram`` refuses anything else when it is built).
* **Text** holds no NUL character and no lone surrogate (neither can be stored in PostgreSQL, nor
  the latter written as UTF-8).
* ``steadystate`` holds JSON values only (objects, arrays, text, finite numbers, booleans, null),
  nested at most ``MAX_DEPTH`` deep.

Parsers of formats that print more than the model keeps check that too (``json.py``: fio's printed
``iops``/``bw_bytes`` against the totals; ``normal.py``: the printed IOPS; ``terse.py``: the printed
bandwidth).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Collection, Mapping
from functools import lru_cache
from typing import Any

from ..errors import ParseError
from ..histogram import MAX_COUNT, Histogram
from ..model import DirectionStats, DiskUtil, FioReport, JobResult, Latency, SampleStats
from ..units import parse_size

#: ``timestamp_ms`` of 9999-12-31T23:59:59.999Z.
MAX_TIMESTAMP_MS = 253_402_300_799_999
#: Nesting allowed in ``steadystate`` (fio's is two deep: ``{"data": {"iops": [...]}}``).
MAX_DEPTH = 4
#: Engines whose every I/O moves ``bs`` bytes (or fewer, counted as short), so io_bytes ≈ total_ios × bs.
BLOCK_ENGINES = frozenset({
    "sync", "psync", "vsync", "pvsync", "pvsync2", "libaio", "io_uring", "io_uring_cmd", "posixaio",
    "solarisaio", "windowsaio", "mmap", "sg", "null", "rbd", "nbd", "xnvme", "spdk",
})
#: Options under which io_bytes need not be total_ios × bs: sizes that vary, ``4k`` read otherwise, I/O
#: that errors or is only planned.
_VARIABLE_BS = ("bsrange", "blocksize_range", "bssplit", "bs_unaligned", "blocksize_unaligned", "bs_is_seq_rand",
                "kb_base", "continue_on_error", "verify_only")

Place = tuple[str | int, ...]
#: What a locator returns for a value it cannot find in the source (the model's value is shown instead).
UNKNOWN = object()


class Violation(ValueError):
    """A value that breaks a rule: where it is (``place``, in model terms, e.g. ``("jobs", 0, "read",
    "clat", "mean_ns")``), the value itself and the rule it breaks."""

    def __init__(self, place: Place, value: object, rule: str) -> None:
        super().__init__(f"{format_place(place)} = {short_repr(value)}: {rule}")
        self.place, self.value, self.rule = place, value, rule

    def inside(self, *prefix: str | int) -> Violation:
        """The same violation, ``prefix`` prepended to its place."""
        return Violation((*prefix, *self.place), self.value, self.rule)

    def error(self, name: str, line: int | None = None, key: str | None = None, value: object = UNKNOWN
              ) -> ParseError:
        """A ``ParseError`` naming the input ``name``, the line or key (default: the place in model
        terms), the value (as the source holds it, default the model's) and the rule."""
        where = f"{name}, line {line}" if line else name
        shown = self.value if value is UNKNOWN else value
        return ParseError(f"{where}: {key or format_place(self.place)} = {short_repr(shown)}: {self.rule}",
                          hint="fio does not write such a value: the output is damaged or was edited")


def format_place(place: Place) -> str:
    """``("jobs", 0, "read", "clat", "mean_ns")`` -> ``jobs[0].read.clat.mean_ns``; a key from the input
    that is not short printable text is shown as its ``repr`` (no control character reaches a message)."""
    text = ""
    for part in place:
        if not isinstance(part, int):
            part = part if part.isprintable() and len(part) <= 40 else short_repr(part)
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def short_repr(value: object, limit: int = 40) -> str:
    """``repr(value)``, shortened in the middle when long (a 400-digit number stays readable)."""
    if type(value) is int and value.bit_length() > 128:
        digits = str(abs(value))
        return f"{'-' if value < 0 else ''}{digits[:12]}…({len(digits)} digits)"
    try:
        text = repr(value)
    except RecursionError:
        return f"<{type(value).__name__} nested too deeply to show>"
    return text if len(text) <= limit else f"{text[:limit // 2]}…{text[-limit // 2:]}"


#: A parser's way to name a violation's place in its source: (line, key, the value as written there).
Locate = Callable[[Violation], tuple[int | None, str | None, object]]


def check(report: FioReport, name: str = "<input>", locate: Locate | None = None) -> FioReport:
    """``report`` unchanged when it breaks no rule (module docstring); else ``ParseError``.

    ``locate`` turns a violation into the place in the source: a line number and/or fio's key for it and
    the value written there (each parser has its own); without it the place is named in model terms.
    """
    try:
        check_report(report)
    except Violation as violation:
        raise located(violation, name, locate) from None
    return report


def located(violation: Violation, name: str, locate: Locate | None) -> ParseError:
    """``violation`` as a ``ParseError`` naming the place ``locate`` finds in the source ``name``."""
    line, key, value = locate(violation) if locate is not None else (None, None, UNKNOWN)
    return violation.error(name, line, key, value)


def check_report(report: FioReport) -> None:
    """Raise ``Violation`` for the first value of ``report`` that breaks a rule."""
    _text(report.source_format, ("source_format",))
    if report.fio_version is not None:
        _text(report.fio_version, ("fio_version",))
    if report.timestamp_ms is not None:
        _count(report.timestamp_ms, ("timestamp_ms",), MAX_TIMESTAMP_MS, "a time in the years 1970-9999 (ms)")
    _text_map(report.global_options, ("global_options",))
    if not _clean_texts(report.warnings):
        for i, warning in enumerate(report.warnings):
            _text(warning, ("warnings", i))
    for i, job in enumerate(report.jobs):
        try:
            check_job(job, report.global_options, report.source_format)
        except Violation as violation:
            raise violation.inside("jobs", i) from None
    for i, disk in enumerate(report.disk_util):
        try:
            _disk(disk)
        except Violation as violation:
            raise violation.inside("disk_util", i) from None


def check_job(job: JobResult, global_options: Mapping[str, str], source_format: str) -> None:
    """Raise ``Violation`` (place relative to the job) for the first value of ``job`` that breaks a rule."""
    _text(job.name, ("name",))
    _int(job.error, ("error",), -(2**31), 2**31 - 1, "fio's error number (a C int)")
    numbers = not _numbers_fine(job)  # then each number is looked at, to name the first that breaks a rule
    if numbers:
        _fields(job, (), ("usr_cpu_pct", "sys_cpu_pct"), ("index", "groupid", "ctx", "majf", "minf",
                                                           "job_runtime_ms", "members"))
    _percentages(job.iodepth_level_pct, ("iodepth_level_pct",), numbers)
    _percentages(job.latency_dist_pct, ("latency_dist_pct",), numbers)
    _text_map(job.job_options, ("job_options",))
    _text_map(job.shown_options, ("shown_options",))
    if job.hostname is not None:
        _text(job.hostname, ("hostname",))
    if job.port is not None:
        _count(job.port, ("port",), 65535, "a TCP port (0-65535)")
    if job.steadystate is not None:
        if type(job.steadystate) is not dict:
            raise Violation(("steadystate",), job.steadystate, "must be a JSON object")
        _json_value(job.steadystate, ("steadystate",), 0)
    for direction, stats in job.directions.items():
        _text(direction, ("directions",))
        if stats.direction != direction:
            raise Violation((direction, "direction"), stats.direction, f"must name its own direction {direction!r}")
        _direction(stats, (direction,), source_format, numbers)
    options = {**global_options, **job.shown_options, **job.job_options}
    bs = fixed_block_size(options)
    if bs is not None and _single_job(job):
        depth = options.get("iodepth", "1")
        for direction, stats in job.directions.items():
            _bytes_match_ios(stats, bs, int(depth) if depth.isdigit() else 1, (direction,))


# -- pieces ------------------------------------------------------------------------------------------------


_JOB_FLOATS = operator.attrgetter("usr_cpu_pct", "sys_cpu_pct")
_JOB_COUNTS = operator.attrgetter("index", "groupid", "ctx", "majf", "minf", "job_runtime_ms", "members")
_DIRECTION_FLOATS = operator.attrgetter("iops", "bw_bytes_s")
_DIRECTION_COUNTS = operator.attrgetter("total_ios", "io_bytes", "runtime_ms", "short_ios", "drop_ios")
_LATENCY_FLOATS = operator.attrgetter("min_ns", "max_ns", "mean_ns", "stddev_ns")
_SAMPLE_FLOATS = operator.attrgetter("min", "max", "mean", "stddev")


def _numbers_fine(job: JobResult) -> bool:
    """Whether every number of ``job`` is a finite float >= 0 or a count where the model says so: all
    gathered into two lists and checked in C, since a report holds hundreds of them."""
    try:
        return _gathered_fine(job)
    except (AttributeError, TypeError):  # not the model's shape: the detailed checks say where
        return False


def _gathered_fine(job: JobResult) -> bool:
    floats = list(_JOB_FLOATS(job))  # each None (unknown) or a number
    mapped = [*job.iodepth_level_pct.values(), *job.latency_dist_pct.values()]  # each a number
    counts = list(_JOB_COUNTS(job))
    for d in job.directions.values():
        floats += _DIRECTION_FLOATS(d)
        counts += _DIRECTION_COUNTS(d)
        for lat in (d.slat, d.clat, d.lat):
            if lat is not None:
                floats += _LATENCY_FLOATS(lat)
                mapped += lat.percentiles_ns.values()
                counts.append(lat.samples)
        for samples in (d.bw_samples, d.iops_samples):
            if samples is not None:
                floats += _SAMPLE_FLOATS(samples)
                counts.append(samples.samples)
    return _all_fine(floats) and _all_fine(mapped, unknown=False) and _all_counts(counts)


def _direction(d: DirectionStats, at: Place, source_format: str, numbers: bool) -> None:
    if numbers:
        _fields(d, at, ("iops", "bw_bytes_s"), ("total_ios", "io_bytes", "runtime_ms", "short_ios", "drop_ios"))
    runtime = d.runtime_ms
    for key, value in (("iops", d.iops), ("bw_bytes_s", d.bw_bytes_s)):
        if value is not None and not runtime:
            why = "is missing" if runtime is None else "is 0"
            raise Violation((*at, key), value, f"a rate needs a runtime > 0, and the runtime {why}")
    if runtime:
        for rate, amount, what in (("iops", d.total_ios, "total_ios"), ("bw_bytes_s", d.io_bytes, "io_bytes")):
            value = getattr(d, rate)
            if value is not None and amount is not None and not _close(value, 1000 * amount / runtime, 1e-9, 1e-6):
                raise Violation((*at, rate), value, f"must be 1000 × {what} ({amount}) / runtime_ms ({runtime}) "
                                                    f"= {1000 * amount / runtime:.6f}")
    for kind, latency in (("slat", d.slat), ("clat", d.clat), ("lat", d.lat)):
        if latency is not None:
            _latency(latency, (*at, kind), source_format, numbers)
    for kind, samples in (("bw_samples", d.bw_samples), ("iops_samples", d.iops_samples)):
        if samples is not None:
            _samples(samples, (*at, kind), numbers)


def _latency(lat: Latency, at: Place, source_format: str, numbers: bool) -> None:
    if numbers:
        _fields(lat, at, ("min_ns", "max_ns", "mean_ns", "stddev_ns"), ("samples",))
    lo, hi, mean = lat.min_ns, lat.max_ns, lat.mean_ns
    if hi is not None:
        # normal output truncates min/max to the line's unit (at most a tenth of max) and rounds avg;
        # terse truncates min/max to whole µs; JSON prints them as fio holds them
        slack = hi / 10 + 1000 if source_format == "normal" else 1000 if source_format == "terse" else 1 + hi * 1e-9
        if lo is not None and lo > hi + slack:
            raise Violation((*at, "min_ns"), lo, f"the minimum cannot exceed the maximum ({hi})")
        if mean is not None and not (lo or 0) - slack <= mean <= hi + slack:
            raise Violation((*at, "mean_ns"), mean, f"the mean must lie between the minimum ({lo}) and the "
                                                     f"maximum ({hi})")
    _percentiles(lat.percentiles_ns, (*at, "percentiles_ns"), numbers)
    if lat.bins_ns is not None:
        _histogram(lat.bins_ns, (*at, "bins_ns"))


def _percentiles(percentiles: Mapping[str, float], at: Place, numbers: bool) -> None:
    """Keys numbers in (0, 100], values finite numbers >= 0 (looked at only with ``numbers``) that never
    decrease as the key grows; in C when fio's keys come in order and all is well, else key by key to
    name the first that is not."""
    if not isinstance(percentiles, Mapping):
        raise Violation(at, percentiles, "must be a mapping of percentile to value")
    if not percentiles:
        return
    try:
        keys = "".join(percentiles)
        pcts = list(map(float, percentiles))
    except (TypeError, ValueError):
        pcts = []
    values = list(percentiles.values())
    if pcts and keys.isascii() and "\x00" not in keys and pcts[0] > 0 and pcts[-1] <= 100 and pcts == sorted(pcts) \
            and (not numbers or _all_fine(values, unknown=False)) and values == sorted(values):
        return
    keyed = []
    for key, value in percentiles.items():
        try:
            pct = float(_text(key, at))
        except ValueError:
            pct = math.nan
        if not 0 < pct <= 100:
            raise Violation((*at, key), value, "a percentile key is a number in (0, 100]")
        keyed.append((pct, key, value))
    keyed.sort(key=lambda item: item[0])
    previous: tuple[str, float] | None = None
    for _, key, value in keyed:
        _number(value, (*at, key))
        if previous is not None and value < previous[1]:
            raise Violation((*at, key), value, f"percentiles cannot decrease: p{previous[0]} is {previous[1]}")
        previous = (key, value)


def _histogram(bins: Histogram, at: Place) -> None:
    """A ``Histogram``, which holds only what fio can print (bucket values below 10^19 ns, counts > 0,
    at most 2^64-1 in all: its constructors refuse anything else)."""
    if not isinstance(bins, Histogram):
        raise Violation(at, bins, "must be a histogram")


def _samples(s: SampleStats, at: Place, numbers: bool) -> None:
    if numbers:
        _fields(s, at, ("min", "max", "mean", "stddev"), ("samples",))
    if s.min is not None and s.max is not None:
        slack = 1 + s.max * 0.01  # normal output rounds avg to 2 decimals; fio's samples are ints
        if s.min > s.max + slack:
            raise Violation((*at, "min"), s.min, f"the minimum cannot exceed the maximum ({s.max})")
        if s.mean is not None and not s.min - slack <= s.mean <= s.max + slack:
            raise Violation((*at, "mean"), s.mean, f"the mean must lie between the minimum ({s.min}) and the "
                                                    f"maximum ({s.max})")


def _disk(d: DiskUtil) -> None:
    _text(d.name, ("name",))
    _fields(d, (), ("util_pct",), ("read_ios", "write_ios", "read_merges", "write_merges", "read_ticks_ms",
                                   "write_ticks_ms", "in_queue_ms"))
    if d.hostname is not None:
        _text(d.hostname, ("hostname",))
    if d.aggregate is not None:
        if not isinstance(d.aggregate, Mapping):
            raise Violation(("aggregate",), d.aggregate, "must be a mapping")
        for key, value in d.aggregate.items():
            _number(value, ("aggregate", _text(key, ("aggregate",))))


def fixed_block_size(options: Mapping[str, str]) -> int | None:
    """The one block size (bytes) of every direction of a job with these fio options, or None when
    they do not name exactly one (no ``bs``, per-direction sizes that differ, ranges, splits, an
    engine whose I/O is not ``bs`` bytes, ``kb_base`` changing what ``4k`` means)."""
    text = options.get("bs", options.get("blocksize"))
    engine = options.get("ioengine", "psync")
    if text is None or engine not in BLOCK_ENGINES or any(key in options for key in _VARIABLE_BS):
        return None
    try:
        sizes = {parse_size(part) for part in text.split(",")}  # read,write,trim; an empty part raises
    except (ValueError, ArithmeticError):
        return None
    return sizes.pop() if len(sizes) == 1 and min(sizes) > 0 else None


def _single_job(job: JobResult) -> bool:
    """Whether ``job`` is one fio job, not a group summing several (whose block sizes may differ)."""
    if job.members is not None:
        return job.members == 1
    runtimes = [d.runtime_ms for d in job.directions.values() if d.runtime_ms]
    # JSON: job_runtime sums the members' runtimes (fio 3.8+); a lone job's is its own runtime
    return job.job_runtime_ms is not None and bool(runtimes) and job.job_runtime_ms <= 1.5 * max(runtimes)


def _bytes_match_ios(d: DirectionStats, bs: int, depth: int, at: Place) -> None:
    if d.total_ios is None or d.io_bytes is None or d.short_ios or d.drop_ios or d.direction == "sync":
        return
    expected = d.total_ios * bs
    slack = bs * (depth + 1) + 1024 + expected // 100
    if abs(d.io_bytes - expected) > slack:
        raise Violation((*at, "io_bytes"), d.io_bytes, f"must be about total_ios × bs = {d.total_ios} × {bs} = "
                                                       f"{expected} (± {slack}: I/Os in flight, fio's rounding)")


# -- scalars -----------------------------------------------------------------------------------------------


def _fields(obj: Any, at: Place, floats: tuple[str, ...], counts: tuple[str, ...]) -> None:
    """The attributes ``floats`` of ``obj`` finite numbers >= 0 and ``counts`` counts (None: unknown,
    allowed). One check in C for the usual case, then field by field to name the first that breaks a
    rule (an int where a float is due passes if a float holds it exactly)."""
    values = _getter(floats)(obj)
    numbers = _getter(counts)(obj)
    if _all_fine(values if len(floats) > 1 else (values,)) and _all_counts(numbers if len(counts) > 1 else (numbers,)):
        return
    for key in floats:
        if (value := getattr(obj, key)) is not None:
            _number(value, (*at, key))
    for key in counts:
        if (value := getattr(obj, key)) is not None:
            _count(value, (*at, key))


@lru_cache(maxsize=64)
def _getter(names: tuple[str, ...]) -> Callable[[Any], Any]:
    return operator.attrgetter(*names)


def _all_fine(values: Collection[Any], unknown: bool = True) -> bool:
    """Whether each of ``values`` is a float, finite and >= 0, or None where ``unknown`` values are
    allowed (the sum of finite floats is finite unless it overflows; then the caller looks at each)."""
    present = [v for v in values if v is not None] if unknown else list(values)
    return not present or (set(map(type, present)) == {float} and min(present) >= 0 and math.isfinite(sum(present)))


def _all_counts(values: Collection[Any]) -> bool:
    """Whether each of ``values`` is None or an int in 0..2^64-1."""
    present = [v for v in values if v is not None]
    return not present or (set(map(type, present)) == {int} and min(present) >= 0 and max(present) <= MAX_COUNT)


def _close(a: float, b: float, rel: float, absolute: float) -> bool:
    return abs(a - b) <= absolute + rel * max(abs(a), abs(b))


def _count(value: Any, at: Place, high: int = MAX_COUNT, what: str = "a count (0 to 2^64-1)") -> int:
    if type(value) is not int:
        raise Violation(at, value, f"must be {what}, a whole number")
    if not 0 <= value <= high:
        raise Violation(at, value, f"must be {what}" if high != MAX_COUNT or value >= 0 else "cannot be negative")
    return value


def _int(value: Any, at: Place, low: int, high: int, what: str) -> None:
    if type(value) is not int or not low <= value <= high:
        raise Violation(at, value, f"must be {what}")


def _number(value: Any, at: Place) -> float:
    """A finite number >= 0 (an int only where a float holds it exactly, as the store reads it back)."""
    if type(value) is float:
        if not math.isfinite(value):
            raise Violation(at, value, "must be a finite number")
    elif type(value) is not int:
        raise Violation(at, value, "must be a number")
    elif abs(value) > 2**53:
        raise Violation(at, value, "must be a float: an int this large does not survive the store (2^53)")
    if value < 0:
        raise Violation(at, value, "cannot be negative")
    return value


def _percentages(values: Mapping[str, float], at: Place, numbers: bool = True) -> None:
    if not isinstance(values, Mapping):
        raise Violation(at, values, "must be a mapping")
    if (not numbers or _all_fine(values.values(), unknown=False)) and _clean_texts(values):
        return
    for key, value in values.items():
        _number(value, (*at, _text(key, at)))


def _text(value: Any, at: Place) -> str:
    if type(value) is not str:
        raise Violation(at, value, "must be text")
    if "\x00" in value:
        raise Violation(at, value, "text cannot hold a NUL character")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise Violation(at, value, "text cannot hold a lone surrogate (not Unicode)") from None
    return value


def _clean_texts(*texts: Any) -> bool:
    """Whether the iterables of strings ``texts`` hold only ASCII text without NUL (checked in C)."""
    try:
        joined = "".join("".join(t) for t in texts)
    except TypeError:
        return False
    return joined.isascii() and "\x00" not in joined


def _text_map(values: Mapping[str, str], at: Place) -> None:
    if not isinstance(values, Mapping):
        raise Violation(at, values, "must be a mapping of text to text")
    if _clean_texts(values, values.values()):
        return
    for key, value in values.items():
        _text(value, (*at, _text(key, at)))


def _json_value(value: Any, at: Place, depth: int) -> None:
    """A value as JSON writes and reads it back unchanged."""
    if depth > MAX_DEPTH:
        raise Violation(at, value, f"nested more than {MAX_DEPTH} deep")
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            _json_value(item, (*at, _text(key, at)), depth + 1)
    elif kind is list:
        for i, item in enumerate(value):
            _json_value(item, (*at, i), depth + 1)
    elif kind is str:
        _text(value, at)
    elif kind is float:
        if not math.isfinite(value):
            raise Violation(at, value, "must be a finite number")
    elif kind is int:
        if not -(2**63) <= value <= MAX_COUNT:
            raise Violation(at, value, "must fit in 64 bits")
    elif value is not None and kind is not bool:
        raise Violation(at, value, "must be a JSON value (object, array, text, number, true/false, null)")
