"""Read fio's JSON output (``json``, ``json+``, client/server) of any version into a FioReport.

The schema is detected from key presence, not from the version string (FIO_NOTES §1.5):

* ``clat_ns`` (fio 2.99+) holds nanoseconds; ``clat`` (older) holds microseconds.
* ``io_kbytes`` present (fio 2.21+): ``io_bytes`` is bytes; absent: ``io_bytes`` is KiB.
* ``bw_bytes`` (3.2+) is bytes/s; otherwise ``bw`` is KiB/s.
* json+ ``bins`` keys are ns (3.x), us (2.20-2.99) or bucket indexes with ``FIO_IO_U_PLAT_*``
  keys (2.2.12-2.19); all are converted to ns bucket midpoints (``jsonjob.plat_idx_to_val``, stat.c).
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
no rate: ``iops`` and ``bw_bytes_s`` are None rather than fio's 0. One job's entry is read by ``fio.jsonjob``.
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
    DiskUtil,
    FioReport,
)
from . import validate
from .jsonjob import PCT_KEYS, disk_util_of, int_value, job_result, options_of, text_value
from .validate import Violation

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
    document, it lacks the expected shape, or a value breaks a rule of ``validate`` (the message
    names fio's key, e.g. ``jobs[0].read.clat_ns.mean``, the value and the rule).
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
    except Violation as violation:
        raise violation.error(name) from None
    except _Shape as exc:
        raise ParseError(f"{name}: {exc.where}unexpected fio JSON shape: {type(exc.cause).__name__}: "
                         f"{exc.cause}") from exc.cause
    if truncated is not None:
        warning = f"the last JSON document is incomplete ({truncated.message}); the report before it is used"
        report = replace(report, warnings=(*report.warnings, warning))
    return validate.check(report, name, lambda violation: (None, *json_key(last, violation.place)))


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


class _Shape(Exception):
    """Internal: a conversion failed somewhere in ``where`` (``"jobs[2]: "``) for a reason ``validate``
    has no rule for (``cause``, e.g. a KeyError)."""

    def __init__(self, where: str, cause: Exception) -> None:
        super().__init__(where)
        self.where, self.cause = where, cause


_SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, ArithmeticError)


def _report(doc: Mapping[str, Any]) -> FioReport:
    """The report in ``doc``. Raises ``Violation`` (place in fio's keys) or ``_Shape``."""
    client = "client_stats" in doc
    key = "client_stats" if client else "jobs"
    entries = doc[key]
    if not isinstance(entries, list):
        raise Violation((key,), entries, "must be an array of job objects")
    disks = doc.get("disk_util") or []
    if not isinstance(disks, list):
        raise Violation(("disk_util",), disks, "must be an array of disk objects")
    warnings: list[str] = []
    try:
        kept = _final_client_entries(entries, disks, warnings) if client else entries
    except Violation:
        raise
    except _SHAPE_ERRORS as exc:
        raise _Shape("client_stats: ", exc) from exc
    raw = _raw_indexes(entries, kept)
    jobs = []
    for index, entry in enumerate(kept):
        try:
            if not isinstance(entry, Mapping):
                raise Violation((), entry, "must be a job object")
            jobs.append(job_result(entry, index))
        except Violation as violation:
            raise violation.inside(key, raw[index]) from None
        except _SHAPE_ERRORS as exc:
            raise _Shape(f"{key}[{raw[index]}]: ", exc) from exc
    has_bins = any(
        d.clat is not None and d.clat.bins_ns is not None for j in jobs for d in j.directions.values()
    )
    timestamp_ms = int_value(doc, "timestamp_ms")
    if timestamp_ms is None and doc.get("timestamp") is not None:
        timestamp_ms = int_value(doc, "timestamp") * 1000  # type: ignore[operator]
    if client and isinstance(doc.get("global options"), _Object) and doc["global options"].duplicates:
        warnings.append("client JSON repeats 'global options' once per server and status report "
                        "(fio issue 516); the first copy is kept")
    try:
        disk_util = _last_disks(disks)
    except Violation:
        raise
    except _SHAPE_ERRORS as exc:
        raise _Shape("disk_util: ", exc) from exc
    return FioReport(
        source_format="client-json" if client else ("json+" if has_bins else "json"),
        jobs=tuple(jobs),
        fio_version=_version(doc.get("fio version")),
        timestamp_ms=timestamp_ms,
        global_options=options_of(doc, "global options"),
        disk_util=disk_util,
        warnings=tuple(warnings),
    )


def _raw_indexes(entries: list[Any], kept: list[Any]) -> list[int]:
    """The position in ``entries`` of each of ``kept`` (the same objects, in order)."""
    if kept is entries:
        return list(range(len(entries)))
    positions = {id(entry): i for i, entry in enumerate(entries)}
    return [positions[id(entry)] for entry in kept]


def _host(entry: Mapping[str, Any], *outer: str | int) -> tuple[str | None, int | None]:
    return text_value(entry, "hostname", *outer), int_value(entry, "port", *outer)


def _copies(options: Any) -> int:
    """How many times fio printed the same job options (the client appends them per report)."""
    dups = getattr(options, "duplicates", ())
    return 1 + max(Counter(dups).values()) if dups else 1


def _final_client_entries(entries: list[Any], disks: list[Any], warnings: list[str]) -> list[Any]:
    """The entries of each host's final report, "All clients" left out (see module docstring)."""
    by_host: dict[tuple[Any, Any], list[int]] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise Violation(("client_stats", i), entry, "must be a job object")
        if entry.get("jobname") != ALL_CLIENTS:
            by_host.setdefault(_host(entry, "client_stats", i), []).append(i)
    disk_counts = Counter((_host(d, "disk_util", j), text_value(d, "name", "disk_util", j))
                          for j, d in enumerate(disks) if isinstance(d, Mapping))
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
            for key in ("runtime", "total_ios"):
                now = int_value(a, key, "client_stats", idxs[k], ddir) or 0
                if now < (int_value(b, key, "client_stats", idxs[k - size], ddir) or 0):
                    return None
    return idxs[-size:]


def _last_disks(disks: list[Any]) -> tuple[DiskUtil, ...]:
    """One entry per (host, port, disk): the last, since status reports repeat them."""
    last: dict[tuple[Any, Any, Any], tuple[int, Mapping[str, Any]]] = {}
    for i, d in enumerate(disks):
        if not isinstance(d, Mapping):
            raise Violation(("disk_util", i), d, "must be a disk object")
        key = (*_host(d, "disk_util", i), text_value(d, "name", "disk_util", i))
        last.pop(key, None)
        last[key] = (i, d)
    out = []
    for i, d in last.values():
        try:
            out.append(disk_util_of(d))
        except Violation as violation:
            raise violation.inside("disk_util", i) from None
    return tuple(out)


def _version(value: Any) -> str | None:
    return str(value).removeprefix("fio-") if value else None


# -- values, each named by its key when it is not what fio prints there -------------------------------------


# -- where a rule of ``validate`` was broken, in fio's keys ---------------------------------------------------

_KEYS = {
    "name": "jobname", "usr_cpu_pct": "usr_cpu", "sys_cpu_pct": "sys_cpu", "job_runtime_ms": "job_runtime",
    "iodepth_level_pct": "iodepth_level", "job_options": "job options", "runtime_ms": "runtime",
    "bw_bytes_s": "bw_bytes", "min_ns": "min", "max_ns": "max", "mean_ns": "mean", "stddev_ns": "stddev",
    "samples": "N", "percentiles_ns": "percentile", "bins_ns": "bins", "read_ticks_ms": "read_ticks",
    "write_ticks_ms": "write_ticks", "in_queue_ms": "in_queue", "util_pct": "util", "fio_version": "fio version",
    "global_options": "global options",
}
_SAMPLE_KEYS = {"bw_samples": ("bw", "dev"), "iops_samples": ("iops", "stddev")}


def json_key(doc: Mapping[str, Any], place: validate.Place) -> tuple[str, Any]:
    """fio's key path for a ``validate`` place, and the value there as the file holds it:
    ``("jobs", 0, "read", "clat", "mean_ns")`` -> ``("jobs[0].read.clat_ns.mean", -144298.9)``, the value
    ``validate.UNKNOWN`` when the path leads nowhere (a value the parser derived)."""
    parts: list[str | int] = []
    node: Any = doc
    rest = list(place)
    if rest[:1] == ["jobs"] and len(rest) > 1 and isinstance(index := rest[1], int):
        key = "client_stats" if "client_stats" in doc else "jobs"
        entries = doc[key]
        kept = _final_client_entries(entries, doc.get("disk_util") or [], []) if key == "client_stats" else entries
        parts, node, rest = [key, _raw_indexes(entries, kept)[index]], kept[index], rest[2:]
    if rest[:1] == ["latency_dist_pct"] and len(rest) > 1:  # "250us" -> latency_us."250"
        bucket = str(rest[1])
        rest = [f"latency_{bucket[-2:]}", bucket[:-2], *rest[2:]]
    while rest:
        part = rest.pop(0)
        if part in ("slat", "clat", "lat") and isinstance(node, Mapping) and f"{part}_ns" in node:
            part = f"{part}_ns"
        elif part in _SAMPLE_KEYS and rest:  # bw_samples.stddev -> bw_dev
            prefix, dev = _SAMPLE_KEYS[str(part)]
            field = rest.pop(0)
            part = f"{prefix}_{dev if field == 'stddev' else field}"
        elif parts and parts[-1] == "percentile" and isinstance(node, Mapping):
            part = next((k for k in node if PCT_KEYS.get(k) == part), part)  # "99.9" -> "99.900000"
        elif isinstance(part, str) and not (isinstance(node, Mapping) and part in node):
            part = _KEYS.get(part, part)
        parts.append(part)
        node = node.get(part, validate.UNKNOWN) if isinstance(node, Mapping) else \
            node[part] if isinstance(node, list) and isinstance(part, int) and part < len(node) else validate.UNKNOWN
    return validate.format_place(tuple(parts)), node
