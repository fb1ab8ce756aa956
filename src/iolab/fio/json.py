"""Read fio's JSON output (``json``, ``json+``, client/server) of any version into a FioReport.

The schema is detected from key presence, not from the version string (FIO_NOTES §1.5):

* ``clat_ns`` (fio 2.99+) holds nanoseconds; ``clat`` (older) holds microseconds.
* ``io_kbytes`` present (fio 2.21+): ``io_bytes`` is bytes; absent: ``io_bytes`` is KiB.
* ``bw_bytes`` (3.2+) is bytes/s; otherwise ``bw`` is KiB/s.
* json+ ``bins`` keys are ns (3.x), us (2.20-2.99) or bucket indexes with ``FIO_IO_U_PLAT_*``
  keys (2.2.12-2.19); all are converted to ns bucket midpoints (``plat_idx_to_val``, stat.c).
* 2.x pads unused percentile slots with duplicate ``"0.00": 0`` keys; they are dropped.

Text before the JSON (fio issue 731, client/server ``<host>`` lines) is skipped, and several
concatenated documents (``--status-interval``) are read in order: the last one is the result. A
truncated last document (fio killed mid-write) leaves the previous complete one, with a warning.
Strings may hold raw control characters (fio escapes only ``\\`` and ``"``, FIO_NOTES §1.8).
A file holding one strict-JSON report is decoded by orjson (``_single_document``); everything else
(several documents, raw control characters, NaN) by the standard library's decoder.

Client/server output (FIO_NOTES §1.7, ``handle_ts()`` in ``client.c@fio-3.33``): with
``--status-interval`` given to the server, every interval's per-job objects are appended to the
one ``client_stats`` array, and ``disk_util`` and the options are repeated each time. Per host
(``hostname``, ``port``) the number of reports K is read from evidence that a single report never
shows: a disk listed K times, or job options printed 1, 2, … K times over (the client appends them
again each interval; an option set twice in a job file repeats equally in every entry). When
K > 1, the host's entries must form K repetitions of the same job sequence with runtimes and I/O
counts that never decrease; then only the last repetition is kept.
numjobs clones of a final report (same name, same host) carry neither sign and are all kept.
A direction with ``runtime`` 0 (a failed job, a ``verify_only`` write phase) has its I/O count but
no rate: ``iops`` and ``bw_bytes_s`` are None rather than fio's 0.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import orjson

from ..errors import ParseError
from ..model import (
    DIRECTIONS,
    DirectionStats,
    DiskUtil,
    FioReport,
    Histogram,
    JobResult,
    Latency,
    SampleStats,
    pct_key,
)

#: The aggregate entry of client/server output; iolab computes its own aggregate instead,
#: because fio's carries the host label of whichever server reported last (FIO_NOTES §1.7).
ALL_CLIENTS = "All clients"


class _Object(dict[str, Any]):
    """A JSON object that remembers the keys fio printed more than once."""

    duplicates: tuple[str, ...] = ()


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object(pairs)  # built in C; only a key printed twice needs the loop below
    if len(obj) == len(pairs):
        return obj
    obj = _Object()
    dups = []
    for key, value in pairs:
        if key in obj:
            dups.append(key)
            continue  # keep the first: later copies are padding or another server's options
        obj[key] = value
    if dups:
        obj.duplicates = tuple(dups)
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, strict=False)
#: Without a Python hook per object: about twice as fast. Duplicate keys only carry meaning in
#: client JSON (per-server and per-report copies); elsewhere they are the 2.x "0.00" padding (all
#: 0) or an option a job file sets twice, where the last one is the one fio uses.
_PLAIN = json.JSONDecoder(strict=False)


def iter_documents(text: str, name: str = "<input>", decoder: json.JSONDecoder = _DECODER) -> Iterator[dict[str, Any]]:
    """Yield each top-level JSON object in ``text``, skipping lines of other text between them.

    Raises ``ParseError`` (naming ``name`` and the line) when a document starts but is not valid
    JSON (e.g. truncated).
    """
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return
        if text[i] != "{":
            nl = text.find("\n", i)
            if nl < 0:
                return
            i = nl + 1
            continue
        try:
            obj, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise ParseError(f"{name}, line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}") from exc
        except RecursionError as exc:
            line = text.count("\n", 0, i) + 1
            raise ParseError(f"{name}, line {line}: JSON nested too deeply to be fio output") from exc
        yield obj


def looks_like_json(text: str) -> bool:
    """True when ``text`` has a line starting with ``{`` followed by a fio key."""
    start = text.find("\n{") + 1 if not text.lstrip().startswith("{") else text.find("{")
    return start >= 0 and text[start:start + 1] == "{" and '"fio version"' in text[start:start + 2000]


def parse_json(text: str, name: str = "<input>") -> FioReport:
    """Parse fio JSON/json+/client-json output; the last complete document is the report.

    ``name`` labels the input in error messages. Raises ``ParseError`` when there is no fio JSON
    document or it lacks the expected shape.
    """
    client = '"client_stats"' in text
    last = None if client else _single_document(text)
    truncated = None
    if last is None:
        try:
            for doc in iter_documents(text, name, _DECODER if client else _PLAIN):
                if isinstance(doc, dict) and ("jobs" in doc or "client_stats" in doc):
                    last = doc
        except ParseError as exc:
            if last is None:
                raise
            truncated = exc  # a --status-interval stream cut short: the previous report stands
    if last is None:
        raise ParseError(f"{name}: no fio JSON report found (expected an object with \"jobs\" or \"client_stats\")")
    try:
        report = _report(last)
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        raise ParseError(f"{name}: unexpected fio JSON shape: {type(exc).__name__}: {exc}") from exc
    if truncated is not None:
        warning = f"the last JSON document is incomplete ({truncated.message}); the report before it is used"
        report = replace(report, warnings=(*report.warnings, warning))
    return report


def _single_document(text: str) -> dict[str, Any] | None:
    """The report when ``text`` (not client output) is one strict-JSON document, maybe after lines of
    other text; else None (the caller reads it with ``iter_documents``).

    orjson decodes about three times as fast as the standard library, so the common case of one
    report per file costs little more than reading it (benchmarks/import.py). It refuses what the
    general path accepts (raw control characters, NaN, a second document), and then is not used;
    a key printed twice keeps its last value, as with ``_PLAIN``.
    """
    start = 0 if text.startswith("{") else text.find("\n{") + 1
    if start == 0 and not text.startswith("{"):
        return None
    try:
        doc = orjson.loads(text[start:])
    except orjson.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) and "jobs" in doc else None


def _report(doc: Mapping[str, Any]) -> FioReport:
    client = "client_stats" in doc
    entries = doc["client_stats"] if client else doc["jobs"]
    if not isinstance(entries, list):
        raise TypeError("jobs is not a list")
    disks = doc.get("disk_util") or []
    if not isinstance(disks, list):
        raise TypeError("disk_util is not a list")
    warnings: list[str] = []
    if client:
        entries = _final_client_entries(entries, disks, warnings)
    jobs = tuple(_job(entry, index) for index, entry in enumerate(entries))
    has_bins = any(
        d.clat is not None and d.clat.bins_ns is not None for j in jobs for d in j.directions.values()
    )
    timestamp_ms = doc.get("timestamp_ms")
    if timestamp_ms is None and doc.get("timestamp") is not None:
        timestamp_ms = int(doc["timestamp"]) * 1000
    if client and isinstance(doc.get("global options"), _Object) and doc["global options"].duplicates:
        warnings.append("client JSON repeats 'global options' once per server and status report "
                        "(fio issue 516); the first copy is kept")
    return FioReport(
        source_format="client-json" if client else ("json+" if has_bins else "json"),
        jobs=jobs,
        fio_version=_version(doc.get("fio version")),
        timestamp_ms=timestamp_ms,
        global_options=_options(doc.get("global options")),
        disk_util=_last_disks(disks),
        warnings=tuple(warnings),
    )


def _host(entry: Mapping[str, Any]) -> tuple[Any, Any]:
    return entry.get("hostname"), entry.get("port")


def _copies(options: Any) -> int:
    """How many times fio printed the same job options (the client appends them per report)."""
    dups = getattr(options, "duplicates", ())
    return 1 + max(Counter(dups).values()) if dups else 1


def _final_client_entries(entries: list[Any], disks: list[Any], warnings: list[str]) -> list[Any]:
    """The entries of each host's final report, "All clients" left out (see module docstring)."""
    by_host: dict[tuple[Any, Any], list[int]] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise TypeError(f"client_stats[{i}] is not an object")
        if entry.get("jobname") != ALL_CLIENTS:
            by_host.setdefault(_host(entry), []).append(i)
    disk_counts = Counter((_host(d), d.get("name")) for d in disks if isinstance(d, Mapping))
    keep: list[int] = []
    for host, idxs in by_host.items():
        copies = [_copies(entries[i].get("job options")) for i in idxs]
        reports = max(
            max((n for (h, _), n in disk_counts.items() if h == host), default=1),
            max(copies) // min(copies),  # grows 1, 2, … K; a key set twice in a job file stays constant
        )
        last = _last_report(entries, idxs, reports)
        where = f"{host[0]}:{host[1]}"
        if last is None:
            warnings.append(f"client JSON for {where} shows signs of {reports} --status-interval reports, but "
                            f"its {len(idxs)} entries do not repeat as reports do; all are kept (totals may "
                            f"count snapshots)")
            keep.extend(idxs)
        else:
            keep.extend(last)
            if len(last) < len(idxs):
                warnings.append(f"client JSON holds {reports} --status-interval reports for {where} (the option was "
                                f"given to the server); only the last is kept, {len(idxs) - len(last)} snapshot "
                                f"entries dropped")
    return [entries[i] for i in sorted(keep)]


def _last_report(entries: Sequence[Any], idxs: list[int], reports: int) -> list[int] | None:
    """The indexes of the last of ``reports`` repetitions, or None if they are not repetitions."""
    if reports <= 1:
        return idxs
    if len(idxs) % reports:
        return None
    size = len(idxs) // reports
    for k in range(size, len(idxs)):
        before, after = entries[idxs[k - size]], entries[idxs[k]]
        if (before.get("jobname"), before.get("groupid")) != (after.get("jobname"), after.get("groupid")):
            return None
        for ddir in ("read", "write", "trim"):
            b, a = before.get(ddir) or {}, after.get(ddir) or {}
            if any(int(a.get(key) or 0) < int(b.get(key) or 0) for key in ("runtime", "total_ios")):
                return None
    return idxs[-size:]


def _last_disks(disks: list[Any]) -> tuple[DiskUtil, ...]:
    """One entry per (host, port, disk): the last, since status reports repeat them."""
    last: dict[tuple[Any, Any, Any], Mapping[str, Any]] = {}
    for d in disks:
        if not isinstance(d, Mapping):
            raise TypeError("a disk_util entry is not an object")
        key = (*_host(d), d.get("name"))
        last.pop(key, None)
        last[key] = d
    return tuple(_disk(d) for d in last.values())


def _version(value: Any) -> str | None:
    return str(value).removeprefix("fio-") if value else None


def _options(value: Any) -> dict[str, str]:
    if isinstance(value, list):  # fio 3.39+ client mode: one object per server, with its address
        value = {k: v for k, v in (value[0] if value else {}).items() if k not in ("hostname", "port")}
    return {str(k): str(v) for k, v in (value or {}).items()}


def _job(entry: Mapping[str, Any], index: int) -> JobResult:
    directions = {}
    for name in DIRECTIONS:
        if name in entry and isinstance(entry[name], Mapping):
            stats = _direction(name, entry[name])
            if stats is not None:
                directions[name] = stats
    dist = {}
    for unit in ("ns", "us", "ms"):
        for key, value in (entry.get(f"latency_{unit}") or {}).items():
            dist[f"{key}{unit}"] = float(value)
    return JobResult(
        name=str(entry.get("jobname", "")),
        index=index,
        groupid=int(entry.get("groupid", 0)),
        error=int(entry.get("error", 0)),
        directions=directions,
        usr_cpu_pct=_float(entry.get("usr_cpu")),
        sys_cpu_pct=_float(entry.get("sys_cpu")),
        ctx=_int(entry.get("ctx")),
        majf=_int(entry.get("majf")),
        minf=_int(entry.get("minf")),
        job_runtime_ms=_int(entry.get("job_runtime")),
        iodepth_level_pct={str(k): float(v) for k, v in (entry.get("iodepth_level") or {}).items()},
        latency_dist_pct=dist,
        job_options=_options(entry.get("job options")),
        hostname=entry.get("hostname"),
        port=_int(entry.get("port")),
        steadystate=entry.get("steadystate"),
    )


def _direction(name: str, d: Mapping[str, Any]) -> DirectionStats | None:
    total_ios = _int(d.get("total_ios"))
    if name == "sync":
        lat = _latency(d, "lat")
        if not total_ios:
            return None
        return DirectionStats(direction=name, total_ios=total_ios, lat=lat)
    io_bytes = _int(d.get("io_bytes"))
    if io_bytes is not None and "io_kbytes" not in d:
        io_bytes *= 1024  # fio < 2.21 printed KiB under the name io_bytes
    if not total_ios and not io_bytes:
        return None
    runtime_ms = _int(d.get("runtime"))
    iops: float | None = None
    bw: float | None = None
    if runtime_ms == 0:
        pass  # no time measured: fio prints 0, but the rate is unknown
    elif total_ios is not None and runtime_ms:
        iops = 1000.0 * total_ios / runtime_ms  # stat.c's own formula, unrounded
    else:
        iops = _float(d.get("iops"))
    if runtime_ms == 0:
        pass
    elif io_bytes is not None and runtime_ms:
        bw = 1000.0 * io_bytes / runtime_ms
    elif "bw_bytes" in d:
        bw = _float(d["bw_bytes"])
    else:
        bw = _kib(d.get("bw"))
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
        short_ios=_int(d.get("short_ios")),
        drop_ios=_int(d.get("drop_ios")),
        bw_samples=_samples(d, "bw", ("bw_min", "bw_max", "bw_mean", "bw_dev", "bw_samples"), 1024.0),
        iops_samples=_samples(
            d, "iops", ("iops_min", "iops_max", "iops_mean", "iops_stddev", "iops_samples"), 1.0
        ),
    )


_PCT_KEYS: dict[str, str] = {}  # fio's "99.900000" -> "99.9"; "" for the 2.x "0.00" padding


def _latency(d: Mapping[str, Any], kind: str) -> Latency | None:
    if f"{kind}_ns" in d:
        obj, scale = d[f"{kind}_ns"], 1.0
    elif kind in d:
        obj, scale = d[kind], 1000.0  # fio < 2.99: microseconds
    else:
        return None
    if not isinstance(obj, Mapping):
        return None
    samples = _int(obj.get("N"))
    percentiles = {}
    for key, value in (obj.get("percentile") or {}).items():
        canonical = _PCT_KEYS.get(key)
        if canonical is None:
            canonical = _PCT_KEYS[key] = pct_key(key) if float(key) > 0 else ""
        if canonical:  # 2.x pads unused slots with "0.00": 0
            percentiles[canonical] = float(value) * scale
    if samples == 0:
        return Latency(samples=0)
    return Latency(
        min_ns=_scaled(obj.get("min"), scale),
        max_ns=_scaled(obj.get("max"), scale),
        mean_ns=_scaled(obj.get("mean"), scale),
        stddev_ns=_scaled(obj.get("stddev"), scale),
        samples=samples,
        percentiles_ns=percentiles,
        bins_ns=_bins(obj.get("bins"), scale),
    )


def _bins(bins: Any, scale: float) -> Histogram | None:
    if not isinstance(bins, Mapping):
        return None
    if scale == 1 and (histogram := Histogram.from_text_keys(bins)) is not None:  # type: ignore[arg-type]
        return histogram  # fio 3.x: ns keys, kept as fio wrote them (see Histogram); no conversion per bucket
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
    # a count that is not an int raises TypeError (reported as a ParseError); zero counts are left out
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


def _samples(d: Mapping[str, Any], kind: str, keys: tuple[str, ...], scale: float) -> SampleStats | None:
    lo, hi, mean, dev, count = (d.get(k) for k in keys)
    if lo is None and mean is None:
        return None
    count_i = _int(count)
    if count_i == 0 or (count is None and not mean):
        return None  # no samples were taken; fio prints zeros
    return SampleStats(
        min=_scaled(lo, scale), max=_scaled(hi, scale), mean=_scaled(mean, scale),
        stddev=_scaled(dev, scale), samples=count_i,
    )


def _disk(d: Mapping[str, Any]) -> DiskUtil:
    aggregate = {k: float(v) for k, v in d.items() if k.startswith("aggr_")} or None
    return DiskUtil(
        name=str(d.get("name", "")),
        read_ios=_int(d.get("read_ios")),
        write_ios=_int(d.get("write_ios")),
        read_merges=_int(d.get("read_merges")),
        write_merges=_int(d.get("write_merges")),
        read_ticks_ms=_int(d.get("read_ticks")),
        write_ticks_ms=_int(d.get("write_ticks")),
        in_queue_ms=_int(d.get("in_queue")),
        util_pct=_float(d.get("util")),
        hostname=d.get("hostname"),
        aggregate=aggregate,
    )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _scaled(value: Any, scale: float) -> float | None:
    return None if value is None else float(value) * scale


def _kib(value: Any) -> float | None:
    return None if value is None else float(value) * 1024.0
