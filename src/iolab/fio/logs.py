"""fio's bandwidth, IOPS and latency logs: ask for them, find them, read them into TimeSeries.

File names (``init.c``, ``gen_log_name()``, fio 3.33): ``write_bw_log=P`` writes ``P_bw.N.log``,
``write_iops_log=P`` ``P_iops.N.log``, ``write_lat_log=P`` three files ``P_slat``, ``P_clat``,
``P_lat``. ``N`` is the job's thread number (1-based, numjobs clones numbered one after another
in job-file order, across all sections of the job file) and is left out with ``per_job_logs=0``.
Logs a ``fio --client`` run brings back carry the server's connect-string host as a suffix:
``P_iops.1.log.127.0.0.1``.

Rows (HOWTO "Log File Formats"): ``time_ms, value, ddir, bs[, offset][, prio]``. Values: bw in
KiB/s, IOPS as a rate, latency in ns (µs before fio 2.99, which moved latencies to ns). With
``log_avg_msec=M`` each row is the average over a window of M ms and ``bs`` is 0; without it
every I/O has a row (``bs`` > 0). Time is ms since the job's ``epoch``, which fio resets when
``ramp_time`` ends, so the ramp is not in the logs.

Reading is vectorised (``read_log``): a file's rows become numpy columns in one C pass
(``numpy.fromstring``), 2-3x as fast as ``numpy.loadtxt`` and 20x as fast as a Python loop over
rows; a sweep of thousands of logs reads in a fraction of a second (benchmarks/import_logs.py),
and an import reads them together (``read_log_files``: one parse for all of fio's usual files).
numpy is already a dependency; pyarrow or polars would read faster still but add 30-100 MB for
files that are small. Only a file the fast path cannot read whole is read again line by line, to
name the bad line. numpy is imported by the functions that read: asking for logs and finding them
needs none, so a run's planning does not wait for it (``runner.local.warm_up``).

Quirks handled (FIO_NOTES §6.1): the final partial window may be missing, or flushed a second
time at the same timestamp (``finalize_logs()`` in stat.c writes what completed after the last
window, often a few draining I/Os); duplicate timestamps are known (fio issues 739, 947). A row
less than half a window after the previous row of its direction is such a remnant and is
dropped, keeping the full window.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ParseError
from ..model import TimeSeries
from . import jobfile

if TYPE_CHECKING:
    import numpy as np

#: The averaging window iolab asks for: cheap (one row per second per direction and log,
#: FIO_NOTES §6.2) and fine enough to see a cache filling or a device throttling.
INTERVAL_MS = 1000

#: Options that mean the job file does its own logging; iolab then adds none (its own
#: ``log_avg_msec`` would change the user's logs, and per-I/O logs of its own would be costly).
OWN_LOGGING = frozenset({"write_bw_log", "write_iops_log", "write_lat_log", "log_avg_msec"})

#: fio's log kind (file-name infix) -> iolab's metric name.
METRICS = {"iops": "iops", "bw": "bw_bytes_s", "clat": "clat_ns", "lat": "lat_ns", "slat": "slat_ns"}
#: The log kinds each ``write_*_log`` option makes fio write.
KINDS_OF_OPTION = {"write_bw_log": ("bw",), "write_iops_log": ("iops",), "write_lat_log": ("lat", "clat", "slat")}
DDIR = {0: "read", 1: "write", 2: "trim"}
LATENCY_KINDS = frozenset({"clat", "lat", "slat"})
_NAME_RE = re.compile(r"^(?P<prefix>.+)_(?P<kind>iops|bw|clat|slat|lat)(?:\.(?P<index>\d+))?\.log"
                      r"(?:\.(?P<host>.+))?$")


def command_options(prefix: Path, interval_ms: int = INTERVAL_MS) -> tuple[str, ...]:
    """fio command-line options that write averaged bw, IOPS and latency logs to ``prefix_*``.

    Given on the command line before the job file they are defaults for every job, which a job
    file's own setting overrides (FIO_NOTES §8), and they leave the job file, and so its
    comparability hash, unchanged (the log options are in ``jobfile.NOT_WORKLOAD`` anyway).
    """
    return (f"--write_bw_log={prefix}", f"--write_iops_log={prefix}", f"--write_lat_log={prefix}",
            f"--log_avg_msec={interval_ms}")


def global_section(prefix: str, interval_ms: int = INTERVAL_MS) -> str:
    """A ``[global]`` section asking for the logs of ``command_options``, to put before a job
    file that fio's client sends to its servers.

    In client/server mode job options on fio's command line stay with the client (``parse_cmd_line``
    in init.c applies them to local jobs only), so they must travel in the job file. A global
    section at the top is a default every job may override, like the command-line options. The
    logs come back to the client's working directory as ``prefix_iops.N.log.HOST`` (HOST: the
    connect string's host, FIO_NOTES §4.1); use a relative ``prefix`` (the servers never write it).
    """
    return (f"; added by iolab: 1-second logs (fio's command-line options do not reach its servers)\n"
            f"[global]\nwrite_bw_log={prefix}\nwrite_iops_log={prefix}\nwrite_lat_log={prefix}\n"
            f"log_avg_msec={interval_ms}\n\n")


@dataclass(frozen=True)
class LogName:
    """What a log file's name says: ``prefix_kind.index.log.host`` (``index`` 0 with
    ``per_job_logs=0``; ``host`` for logs a ``fio --client`` run brought back)."""

    prefix: str
    kind: str
    index: int
    host: str | None


def log_name(path: Path | str) -> LogName | None:
    """The parts of a fio bw/IOPS/latency log's file name (a path, or a file name as a directory
    listing gives it: a walk of thousands of files need not make a Path of each); None for any other
    file (histogram logs ``_clat_hist``, fio's compressed ``.fz`` logs, outputs)."""
    name = path if isinstance(path, str) else path.name
    match = _NAME_RE.match(name)
    if match is None or name.endswith(".fz"):
        return None
    return LogName(match["prefix"], match["kind"], int(match["index"] or 0), match["host"])


def host_of(path: Path) -> str | None:
    """The host a ``fio --client`` run named a log it brought back after (``P_iops.1.log.HOST``),
    or None for a log written locally."""
    name = log_name(path)
    return name.host if name else None


def sets_own_logging(job_text: str) -> bool:
    """Whether any job of ``job_text`` sets its own logs or averaging (see ``OWN_LOGGING``)."""
    return any(OWN_LOGGING & set(options) for _, options in jobfile.effective_jobs(jobfile.parse(job_text)))


def thread_names(job_text: str) -> list[str]:
    """Job name of each fio thread number, in order: ``names[N - 1]`` ran as thread N.

    Each job section counts ``numjobs`` times (``add_job()`` in init.c numbers clones right
    after their job). A ``numjobs`` fio would reject counts once.
    """
    return names_of_threads(jobfile.effective_jobs(jobfile.parse(job_text)))


def names_of_threads(jobs: Iterable[tuple[str, Mapping[str, str | None]]]) -> list[str]:
    """``thread_names`` of a job file already parsed (``jobfile.effective_jobs``)."""
    names = []
    for name, options in jobs:
        numjobs = options.get("numjobs") or "1"
        names += [name] * (int(numjobs) if numjobs.isdigit() and int(numjobs) > 0 else 1)
    return names


def find_logs(directory: Path, prefix: str | None = None) -> list[Path]:
    """fio bw/IOPS/latency log files in ``directory`` (optionally only ``prefix_*``), sorted."""
    found = []
    for path in sorted(directory.iterdir()) if directory.is_dir() else []:
        name = log_name(path)
        if name is not None and (prefix is None or name.prefix == prefix) and path.is_file():
            found.append(path)
    return found


@dataclass(frozen=True, eq=False)
class Log:
    """One fio log file, read: its name's parts and its rows as numpy columns (file order).

    ``t_ms`` int64, ``value`` float64 (the file's unit: KiB/s, IOPS, ns or µs), ``ddir`` int64
    (0 read, 1 write, 2 trim), ``bs`` int64 (0 in averaged logs).
    """

    path: Path
    name: LogName
    t_ms: np.ndarray
    value: np.ndarray
    ddir: np.ndarray
    bs: np.ndarray

    # Computed once per log (an import judges each log against every result that names it): the
    # columns are not changed after reading.
    @cached_property
    def directions(self) -> frozenset[str]:
        """The data directions its rows hold (``read``, ``write``, ``trim``)."""
        import numpy as np
        return frozenset(DDIR[d] for d in np.bincount(self.ddir, minlength=len(DDIR)).nonzero()[0].tolist())

    @cached_property
    def per_io(self) -> bool:
        """Whether every I/O has a row (no ``log_avg_msec``): block sizes are given."""
        return bool(self.bs.size) and bool(self.bs.any())

    @cached_property
    def end_ms(self) -> int | None:
        """The last time stamp: the end of the logged period (ms after the ramp)."""
        return int(self.t_ms.max()) if self.t_ms.size else None

    def mean(self, direction: str, period_ms: int | None = None, interval_ms: int | None = None) -> float | None:
        """The average of ``direction`` over the logged period, None when it has no rows.

        Latency: the mean of the rows. IOPS and bandwidth: a rate over ``period_ms`` (default: up to
        the last row), in the log's unit (IOPS, KiB/s): the I/Os or KiB of a per-I/O log, the
        windows' rates times ``interval_ms`` (default: inferred) for an averaged log. fio writes no
        row for a window in which nothing completed, so the mean of an averaged log's rows
        overstates a slow job's rate (an HDD at 4 IOPS per thread logs a row every few seconds).
        """
        rows = self.ddir == _ddir_number(direction)
        if not rows.any():
            return None
        if self.name.kind in LATENCY_KINDS:
            return float(self.value[rows].mean())
        seconds = max(period_ms or int(self.t_ms[rows].max()), 1) / 1000
        if self.per_io:
            done = float(rows.sum()) if self.name.kind == "iops" else float(self.bs[rows].sum()) / 1024
        else:
            done = float(self.value[rows].sum()) * (interval_ms or infer_interval(self.t_ms[rows])) / 1000
        return done / seconds


def _ddir_number(direction: str) -> int:
    return next(k for k, v in DDIR.items() if v == direction)


def parse_log(text: str, source: str = "<log>") -> list[tuple[int, float, int, int]]:
    """Rows ``(time_ms, value, ddir, bs)`` of one log file, in file order, read line by line.

    Raises ``ParseError`` naming ``source`` and the line for a row that is not
    ``time, value, ddir, bs, ...`` numbers.
    """
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        try:
            if len(fields) < 3:
                raise ValueError
            bs = int(fields[3]) if len(fields) > 3 else 0
            rows.append((int(fields[0]), float(fields[1]), int(fields[2]), bs))
        except ValueError:
            raise ParseError(f"{source}:{lineno}: expected 'time, value, ddir, bs, ...' numbers, got {line[:80]!r}",
                             hint="give fio's own bw/iops/lat log files (write_*_log)") from None
    return rows


def read_log(path: Path) -> Log:
    """A fio log file as columns (``Log``). Raises ``ParseError`` naming the file and line for a
    row that is not ``time, value, ddir, bs, …`` numbers, or that fio cannot have written (a
    negative or non-finite number, a data direction other than 0-2), and for a file that cannot be
    read or is not named like a log."""
    import numpy as np
    name = log_name(path)
    if name is None:
        raise ParseError(f"{path}: not a fio log name (PREFIX_iops|bw|lat|clat|slat[.N].log)")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ParseError(f"cannot read {path}: {exc.strerror or exc}") from exc
    table = _fast_table(data)
    if table is not None and table.dtype == np.int64 and (not table.size or (
            table[:, :4].min() >= 0 and table[:, 2].max() <= max(DDIR))):
        # fio's usual file: integers only (finite and whole by construction), none negative, ddir 0-2;
        # the checks below would only confirm it, at a dozen numpy calls per file
        return Log(path, name, table[:, 0], table[:, 1].astype(np.float64), table[:, 2], table[:, 3])
    columns = table[:, :4].T.astype(np.float64) if table is not None else None
    if columns is None:  # ragged or malformed: the exact reader keeps or names every line
        rows = parse_log(data.decode(errors="replace"), str(path))
        columns = np.array(rows, dtype=np.float64).reshape(-1, 4).T if rows else np.zeros((4, 0))
    t, value, ddir, bs = columns[0], columns[1], columns[2], columns[3]
    bad = ~(np.isfinite(columns).all(axis=0) & (t >= 0) & (value >= 0) & (bs >= 0)
            & np.isin(ddir, tuple(DDIR)) & (t == np.round(t)))
    if bad.any():
        row = int(np.argmax(bad))
        raise ParseError(f"{path}:{row + 1}: row {row + 1} is not a fio log row (time >= 0 ms, a finite value >= 0, "
                         f"ddir 0-2, bs >= 0): {columns[:, row].tolist()}",
                         hint="give fio's own bw/iops/lat log files (write_*_log)")
    return Log(path, name, t.astype(np.int64), value, ddir.astype(np.int64), bs.astype(np.int64))


def read_log_files(paths: Iterable[Path]) -> dict[Path, Log | ParseError]:
    """``read_log`` of each path, its ``ParseError`` in place of a ``Log`` where it raises.

    fio's usual files (integers only, rows of one width, nothing negative, ddir 0-2: what
    ``read_log``'s first test takes as it is) are parsed together, in one ``numpy.fromstring`` per
    row width: most of ``read_log``'s cost on a file of 60 rows is numpy's cost per call (the
    2,240 logs of a bench-fio directory: 0.11-0.16 s one by one, 0.07-0.11 s together). Each file's rows are
    counted by their separators first, so a file the parse together accepts is one ``read_log``
    accepts, with the same numbers; when a group's parse or checks fail, each of its files is read
    alone, and its error, if any, is ``read_log``'s."""
    import numpy as np
    found: dict[Path, Log | ParseError] = {}
    groups: dict[int, list[tuple[Path, LogName, int, bytes]]] = {}  # width -> (path, name, rows, joined fields)
    for path in paths:
        name = log_name(path)
        try:
            data = path.read_bytes().strip() if name is not None else b""
        except OSError:
            data = b""
        width = data.split(b"\n", 1)[0].count(b",") + 1
        rows = data.count(b"\n") + 1
        flat = data.replace(b"\n", b",")
        if name is None or width < 3 or flat.count(b",") + 1 != rows * width:
            found[path] = _read_or_error(path)  # read alone: the error, a ragged or empty file, a float
            continue
        groups.setdefault(width, []).append((path, name, rows, flat))
    for width, files in groups.items():
        values = _parse(b",".join(flat for *_, flat in files), np.int64)
        table = values.reshape(-1, width) if values is not None and values.size == sum(
            rows for _, _, rows, _ in files) * width and not (values == _INT64_MAX).any() else None
        if table is None or not (table[:, :4].min() >= 0 and table[:, 2].max() <= max(DDIR)):
            found.update((path, _read_or_error(path)) for path, *_ in files)
            continue
        value = table[:, 1].astype(np.float64)
        bs = table[:, 3] if width > 3 else np.zeros(len(table), dtype=np.int64)
        start = 0
        for path, name, rows, _ in files:
            end = start + rows
            found[path] = Log(path, name, table[start:end, 0], value[start:end], table[start:end, 2], bs[start:end])
            start = end
    return found


def _read_or_error(path: Path) -> Log | ParseError:
    try:
        return read_log(path)
    except ParseError as exc:
        return exc


def _fast_table(data: bytes) -> np.ndarray | None:
    """The rows of a log whose rows all have the same number of fields, parsed in C, as a table of at
    least four columns (a missing ``bs`` is 0): int64 when every number is an integer, else float64;
    None when the fast path cannot read it whole (then ``parse_log`` reads it).

    fio writes integers (``iolog.c``: ``%lu``/``%llu``), which numpy parses several times as fast as
    floats; a value that is not one (or overflows, which numpy clamps silently) is read as a float."""
    import numpy as np
    data = data.strip()
    if not data:
        return np.zeros((0, 4), dtype=np.int64)
    first = data.split(b"\n", 1)[0]
    width = first.count(b",") + 1
    rows = data.count(b"\n") + 1
    if width < 3:
        return None
    flat = data.replace(b"\n", b",")
    values = _parse(flat, np.int64)
    if values is None or values.size != rows * width or (values == _INT64_MAX).any():
        values = _parse(flat, np.float64)
    if values is None or values.size != rows * width:
        return None
    table = values.reshape(rows, width)
    if width == 3:
        table = np.hstack([table, np.zeros((rows, 1), dtype=table.dtype)])
    return table


#: numpy's int64 parse clamps a number beyond it to it (``_fast_table``).
_INT64_MAX = 2**63 - 1


def _parse(text: bytes, dtype: type) -> np.ndarray | None:
    import numpy as np
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # numpy < 2.3 warns on a bad number instead
        try:
            return np.fromstring(text, dtype=dtype, sep=",")
        except (ValueError, DeprecationWarning):
            return None


def to_series(log: Log, job: str, interval_ms: int | None = None, latency_scale: float = 1.0) -> list[TimeSeries]:
    """The log's TimeSeries, one per direction, named after the fio job ``job``.

    ``interval_ms`` is the ``log_avg_msec`` used; when None it is inferred from the time stamps
    (the median step). Per-I/O logs are averaged into windows of ``interval_ms`` (default 1000):
    IOPS counted, bandwidth summed from the block sizes, latency averaged. Bandwidth becomes
    bytes/s; latencies are multiplied by ``latency_scale`` (1000 for fio before 2.99, which logged
    µs).
    """
    import numpy as np
    out = []
    kind = log.name.kind
    # fio's usual log: one direction, rows in time order; its columns are then taken as they are
    # (selecting and sorting them would give the same arrays, at five numpy calls per file)
    as_is = len(log.directions) == 1 and bool((log.t_ms[1:] >= log.t_ms[:-1]).all())
    for number, direction in DDIR.items():
        if direction not in log.directions:
            continue
        if as_is:
            t, value, bs = log.t_ms, log.value, log.bs
        else:
            rows = log.ddir == number
            order = np.argsort(log.t_ms[rows], kind="stable")
            t, value, bs = log.t_ms[rows][order], log.value[rows][order], log.bs[rows][order]
        if log.per_io:
            width = interval_ms or INTERVAL_MS
            t, value = _bin_per_io(t, value, bs, kind, width)
        else:
            width = interval_ms or infer_interval(t)
            keep = np.concatenate(([True], np.diff(t) >= width / 2))  # a remnant after a full window goes
            t, value = t[keep], value[keep]
            if kind == "bw":
                value = value * 1024  # KiB/s -> bytes/s
        if kind in LATENCY_KINDS and latency_scale != 1:
            value = value * latency_scale
        out.append(TimeSeries(job=job, job_index=log.name.index, direction=direction, metric=METRICS[kind],
                              t_ms=tuple(t.tolist()), values=tuple(value.tolist()), interval_ms=width,
                              hostname=log.name.host))
    return out


def read_logs(paths: Iterable[Path], job_names: Sequence[str] = (),
              interval_ms: int | None = None) -> tuple[TimeSeries, ...]:
    """Every log file in ``paths`` as TimeSeries, one per file and direction (see ``to_series``).

    ``job_names`` maps thread numbers to job names (``thread_names``, or the job names of a
    report without group_reporting, in order); a log whose number has no name is named by its
    file prefix. Files not named like fio logs are left out. Raises ``ParseError`` for a
    malformed file (see ``read_log``).
    """
    series: list[TimeSeries] = []
    for path in paths:
        name = log_name(path)
        if name is None:
            continue
        job = job_names[name.index - 1] if 0 < name.index <= len(job_names) else name.prefix
        series += to_series(read_log(path), job, interval_ms)
    return tuple(series)


def infer_interval(t: np.ndarray) -> int:
    """The averaging window of a log from its time stamps (ms): the median step between them."""
    import numpy as np
    steps = np.diff(np.sort(t))
    steps = steps[steps > 0]
    if steps.size:
        return max(1, round(float(np.median(steps))))
    return max(1, int(t[0])) if t.size else INTERVAL_MS


def _bin_per_io(t: np.ndarray, value: np.ndarray, bs: np.ndarray, kind: str,
                width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-I/O rows averaged into windows ending at ``width``, ``2 × width`` ...; a final
    partial window is divided by its own length."""
    import numpy as np
    window = t // width
    keys, counts = np.unique(window, return_counts=True)
    slot = np.searchsorted(keys, window)
    ends = (keys + 1) * width
    seconds = (np.minimum(ends, t[-1]) - keys * width) / 1000
    seconds[seconds <= 0] = width / 1000
    if kind == "iops":
        values = counts / seconds
    elif kind == "bw":
        values = np.bincount(slot, weights=bs) / seconds
    else:
        values = np.bincount(slot, weights=value) / counts
    return ends, values
