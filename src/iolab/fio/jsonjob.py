"""One job of fio's JSON output as a ``JobResult``, whatever fio version wrote it (the schema
differences are ``fio.json``'s module docstring's): its directions, latencies with their json+
histograms, sample statistics, and the disk stats beside it; every value read with its type
checked, so a wrong one is a ``validate.Violation`` naming fio's key.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from ..histogram import MAX_COUNT, Histogram
from ..model import (
    DIRECTIONS,
    DirectionStats,
    DiskUtil,
    JobResult,
    Latency,
    SampleStats,
    pct_key,
)
from .validate import Violation


def options_of(obj: Mapping[str, Any], key: str) -> dict[str, str]:
    value = obj.get(key)
    if isinstance(value, list):  # fio 3.39+ client mode: one object per server, with its address
        value = {k: v for k, v in (value[0] if value and isinstance(value[0], Mapping) else {}).items()
                 if k not in ("hostname", "port")}
    if value is not None and not isinstance(value, Mapping):
        raise Violation((key,), value, "must be an object of option names and values")
    options = {}
    for name, text in (value or {}).items():
        if type(text) not in (str, int, float):
            raise Violation((key, name), text, "an option's value is text")
        options[name] = str(text)
    return options


def job_result(entry: Mapping[str, Any], index: int) -> JobResult:
    directions = {}
    for name in DIRECTIONS:
        if name in entry and isinstance(entry[name], Mapping):
            try:
                stats = _direction(name, entry[name])
            except Violation as violation:
                raise violation.inside(name) from None
            if stats is not None:
                directions[name] = stats
    dist: dict[str, float] = {}
    for unit in ("ns", "us", "ms"):
        buckets = _floats(entry, f"latency_{unit}")
        dist.update(zip([f"{key}{unit}" for key in buckets], buckets.values(), strict=True))
    levels = _floats(entry, "iodepth_level")
    return JobResult(
        name=str(entry.get("jobname", "")),
        index=index,
        groupid=int_value(entry, "groupid") or 0,
        error=int_value(entry, "error") or 0,
        directions=directions,
        usr_cpu_pct=_float(entry, "usr_cpu"),
        sys_cpu_pct=_float(entry, "sys_cpu"),
        ctx=int_value(entry, "ctx"),
        majf=int_value(entry, "majf"),
        minf=int_value(entry, "minf"),
        job_runtime_ms=int_value(entry, "job_runtime"),
        iodepth_level_pct=levels,
        latency_dist_pct=dist,
        job_options=options_of(entry, "job options"),
        hostname=text_value(entry, "hostname"),
        port=int_value(entry, "port"),
        steadystate=_object(entry, "steadystate") or None,
    )


def _direction(name: str, d: Mapping[str, Any]) -> DirectionStats | None:
    """One direction object; fio's printed ``iops`` and ``bw_bytes`` (or ``bw``) are checked against the
    totals this parser computes them from, since they are what a damaged total or runtime contradicts."""
    total_ios = int_value(d, "total_ios")
    if name == "sync":
        lat = _latency(d, "lat")
        if not total_ios:
            return None
        return DirectionStats(direction=name, total_ios=total_ios, lat=lat)
    io_bytes = int_value(d, "io_bytes")
    if io_bytes is not None and "io_kbytes" not in d:
        io_bytes *= 1024  # fio < 2.21 printed KiB under the name io_bytes
    if not total_ios and not io_bytes:
        return None
    runtime_ms = int_value(d, "runtime")
    iops: float | None = None
    bw: float | None = None
    if runtime_ms == 0:
        pass  # no time measured: fio prints 0, but the rate is unknown
    elif total_ios is not None and runtime_ms:
        iops = 1000.0 * total_ios / runtime_ms  # stat.c's own formula, unrounded
        if total_ios >= 0 and runtime_ms > 0:  # else validate names the negative number
            _check_printed(d, "iops", iops, 1.0, f"1000 × total_ios ({total_ios}) / runtime ({runtime_ms} ms)")
    else:
        iops = _float(d, "iops")
    if runtime_ms == 0:
        pass
    elif io_bytes is not None and runtime_ms:
        bw = 1000.0 * io_bytes / runtime_ms
        why = f"1000 × io_bytes ({io_bytes}) / runtime ({runtime_ms} ms)"
        if io_bytes < 0 or runtime_ms < 0:
            pass  # validate names the negative number
        elif "bw_bytes" in d:
            _check_printed(d, "bw_bytes", bw, 1.0, why)
        elif d.get("bw") is not None and not _close(_float(d, "bw") or 0.0, bw / 1000, 2 + 1000 / runtime_ms):
            # KiB/s (kB/s with kb_base=1000), from io_bytes in KiB before fio 2.21
            _check_printed(d, "bw", bw / 1024, 2 + 1000 / runtime_ms, why + " / 1024")
    elif "bw_bytes" in d:
        bw = _float(d, "bw_bytes")
    else:
        bw = _kib(d, "bw")
    return DirectionStats(
        direction=name,
        total_ios=total_ios,
        io_bytes=io_bytes,
        runtime_ms=runtime_ms,
        iops=iops,
        bw_bytes_s=bw,
        slat=_latency(d, "slat"),
        clat=_latency(d, "clat"),
        lat=_latency(d, "lat"),
        short_ios=int_value(d, "short_ios"),
        drop_ios=int_value(d, "drop_ios"),
        bw_samples=_samples(d, ("bw_min", "bw_max", "bw_mean", "bw_dev", "bw_samples"), 1024.0),
        iops_samples=_samples(d, ("iops_min", "iops_max", "iops_mean", "iops_stddev", "iops_samples"), 1.0),
    )


def _close(value: float, exact: float, slack: float) -> bool:
    return abs(value - exact) <= slack + 1e-6 * abs(exact)


def _check_printed(d: Mapping[str, Any], key: str, exact: float, slack: float, why: str) -> None:
    """fio's printed rate ``d[key]`` must be ``exact`` within ``slack`` (its rounding) and a millionth."""
    printed = _float(d, key)
    if printed is not None and not _close(printed, exact, slack):
        raise Violation((key,), printed, f"fio computes it as {why} = {exact:.6f}; the file contradicts itself "
                                         f"(a damaged total or runtime?)")

PCT_KEYS: dict[str, str] = {}  # fio's "99.900000" -> "99.9"; "" for the 2.x "0.00" padding


def _latency(d: Mapping[str, Any], kind: str) -> Latency | None:
    if f"{kind}_ns" in d:
        key, scale = f"{kind}_ns", 1.0
    elif kind in d:
        key, scale = kind, 1000.0  # fio < 2.99: microseconds
    else:
        return None
    obj = d[key]
    if not isinstance(obj, Mapping):
        return None
    try:
        return _latency_object(obj, scale)
    except Violation as violation:
        raise violation.inside(key) from None


def _latency_object(obj: Mapping[str, Any], scale: float) -> Latency:
    samples = int_value(obj, "N")
    percentiles = {}
    values = _floats(obj, "percentile")
    for key, value in values.items():
        canonical = PCT_KEYS.get(key)
        if canonical is None:
            try:
                canonical = PCT_KEYS[key] = pct_key(key) if float(key) > 0 else ""
            except ValueError:
                raise Violation(("percentile", key), value, "a percentile key is a number") from None
        if canonical:  # 2.x pads unused slots with "0.00": 0
            percentiles[canonical] = value * scale
    if samples == 0:
        return Latency(samples=0)
    return Latency(
        min_ns=_scaled(obj, "min", scale),
        max_ns=_scaled(obj, "max", scale),
        mean_ns=_scaled(obj, "mean", scale),
        stddev_ns=_scaled(obj, "stddev", scale),
        samples=samples,
        percentiles_ns=percentiles,  # type: ignore[arg-type]
        bins_ns=_bins(obj.get("bins"), scale),
    )


def _bins(bins: Any, scale: float) -> Histogram | None:
    """json+ ``bins`` as a histogram of ns bucket midpoints; ``Violation`` when it is not one."""
    if not isinstance(bins, Mapping):
        return None
    if scale == 1 and (histogram := Histogram.from_text_keys(bins)) is not None:  # type: ignore[arg-type]
        return histogram  # fio 3.x: ns keys, kept as fio wrote them (see Histogram); no conversion per bucket
    try:
        return _converted_bins(bins, scale)
    except (ValueError, TypeError, OverflowError) as exc:
        raise Violation(("bins",), bins, f"must map bucket values to whole counts ({exc})") from None


def _converted_bins(bins: Mapping[str, Any], scale: float) -> Histogram:
    if "FIO_IO_U_PLAT_BITS" in bins:  # fio 2.2.12-2.19: bucket indexes, zeros included
        bits, val = int(bins["FIO_IO_U_PLAT_BITS"]), int(bins["FIO_IO_U_PLAT_VAL"])
        return Histogram({
            int(plat_idx_to_val(int(k), bits, val) * scale): int(v)
            for k, v in bins.items()
            if k.isdigit() and int(v) > 0
        })
    try:  # keys are integers (us in 2.20-2.99): map(int, …) runs in C, float() per key does not
        keys = map(int, bins) if scale == 1 else (int(k) * int(scale) for k in bins)
        out = dict(zip(keys, bins.values(), strict=True))
    except ValueError:
        out = {int(float(k) * scale): v for k, v in bins.items()}
    # a count that is not an int raises TypeError; zero counts are left out
    return Histogram({k: v for k, v in out.items() if v > 0})


def plat_idx_to_val(idx: int, bits: int = 6, val: int = 64) -> int:
    """The midpoint value of fio histogram bucket ``idx`` (``plat_idx_to_val()``, stat.c).

    ``bits``/``val`` are ``FIO_IO_U_PLAT_BITS``/``_VAL`` (6/64 in fio 3.x). The unit is the
    histogram's (ns in 3.x, us before).
    """
    if idx < (val << 1):
        return idx
    error_bits = (idx >> bits) - 1
    base = 1 << (error_bits + bits)
    k = idx % val
    return int(base + (k + 0.5) * (1 << error_bits))


def _samples(d: Mapping[str, Any], keys: tuple[str, ...], scale: float) -> SampleStats | None:
    lo, hi, mean, dev, count = keys
    if d.get(lo) is None and d.get(mean) is None:
        return None
    count_i = int_value(d, count)
    if count_i == 0 or (count_i is None and not d.get(mean)):
        return None  # no samples were taken; fio prints zeros
    return SampleStats(
        min=_scaled(d, lo, scale), max=_scaled(d, hi, scale), mean=_scaled(d, mean, scale),
        stddev=_scaled(d, dev, scale), samples=count_i,
    )


def disk_util_of(d: Mapping[str, Any]) -> DiskUtil:
    aggregate = {k: _float(d, k) for k in d if k.startswith("aggr_")} or None
    return DiskUtil(
        name=text_value(d, "name") or "",
        read_ios=int_value(d, "read_ios"),
        write_ios=int_value(d, "write_ios"),
        read_merges=int_value(d, "read_merges"),
        write_merges=int_value(d, "write_merges"),
        read_ticks_ms=int_value(d, "read_ticks"),
        write_ticks_ms=int_value(d, "write_ticks"),
        in_queue_ms=int_value(d, "in_queue"),
        util_pct=_float(d, "util"),
        hostname=text_value(d, "hostname"),
        aggregate=aggregate,  # type: ignore[arg-type]
    )


def int_value(obj: Mapping[str, Any], key: str, *outer: str | int) -> int | None:
    """``obj[key]`` as an int (None when absent): a JSON integer, a float or text that is one (fio's
    counters); anything else raises ``Violation`` naming ``(*outer, key)``."""
    value = obj.get(key)
    if type(value) is not int:
        if value is None:
            return None
        number = value
        if type(value) is float and value.is_integer():
            number = int(value)
        elif type(value) is str:
            with contextlib.suppress(ValueError):
                number = int(value)
        if type(number) is not int:
            raise Violation((*outer, key), value, "must be a whole number")
        value = number
    if not -MAX_COUNT <= value <= MAX_COUNT:  # fio's counters are 64-bit; a larger one would overflow floats
        raise Violation((*outer, key), value, "is beyond fio's 64-bit counters")
    return value


def _float(obj: Mapping[str, Any], key: str, *outer: str | int) -> float | None:
    """``obj[key]`` as a float (None when absent): a JSON number, or text that is one; anything else
    raises ``Violation``. NaN and infinities pass here and are refused by ``validate``."""
    value = obj.get(key)
    if value is None or type(value) is float:
        return value
    if type(value) is not bool:
        try:
            return float(value)
        except OverflowError:
            raise Violation((*outer, key), value, "is beyond any number fio prints (over 1e308)") from None
        except (ValueError, TypeError):
            pass
    raise Violation((*outer, key), value, "must be a number")


def _scaled(obj: Mapping[str, Any], key: str, scale: float, *outer: str | int) -> float | None:
    value = obj.get(key)
    if type(value) is float or (type(value) is int and -MAX_COUNT <= value <= MAX_COUNT):
        return value * scale  # the usual case, without a call
    value = _float(obj, key, *outer)
    return None if value is None else value * scale


def _kib(obj: Mapping[str, Any], key: str) -> float | None:
    return _scaled(obj, key, 1024.0)


def text_value(obj: Mapping[str, Any], key: str, *outer: str | int) -> str | None:
    value = obj.get(key)
    if value is None or type(value) is str:
        return value
    raise Violation((*outer, key), value, "must be text")


def _floats(obj: Mapping[str, Any], key: str) -> dict[str, float]:
    """``obj[key]``, a JSON object of numbers, as floats (empty when absent); ``Violation`` naming the
    first value that is not a number. In C for the usual case: every value a JSON number."""
    values = obj.get(key)
    if values is None:
        return {}
    if values and isinstance(values, Mapping) and set(map(type, values.values())) <= _NUMBERS:
        try:
            return dict(zip(values, map(float, values.values()), strict=True))
        except OverflowError:
            pass  # an int beyond floats: named below
    values = _object(obj, key)
    for name, value in values.items():
        if value is None:
            raise Violation((key, name), value, "must be a number")
    return {name: _float(values, name, key) for name in values}  # type: ignore[misc]

_NUMBERS = frozenset((int, float))


def _object(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``obj[key]``, a JSON object (empty when absent)."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise Violation((key,), value, "must be an object")
    return value
