"""fio's bandwidth, IOPS and latency logs: ask for them, find them, read them into TimeSeries.

File names (``init.c``, ``gen_log_name()``, fio 3.33): ``write_bw_log=P`` writes ``P_bw.N.log``,
``write_iops_log=P`` ``P_iops.N.log``, ``write_lat_log=P`` three files ``P_slat``, ``P_clat``,
``P_lat``. ``N`` is the job's thread number (1-based, numjobs clones numbered one after another
in job-file order) and is left out with ``per_job_logs=0``. Logs a ``fio --client`` run brings
back carry the server's connect-string host as a suffix: ``P_iops.1.log.127.0.0.1``.

Rows (HOWTO "Log File Formats"): ``time_ms, value, ddir, bs[, offset][, prio]``. Values: bw in
KiB/s, IOPS as a count, latency in ns. With ``log_avg_msec=M`` each row is the average over a
window of M ms and ``bs`` is 0; without it every I/O has a row (``bs`` > 0). Time is ms since the
job's ``epoch``, which fio resets when ``ramp_time`` ends, so the ramp is not in the logs.

Quirks handled (FIO_NOTES §6.1): the final partial window may be missing, or flushed a second
time at the same timestamp (``finalize_logs()`` in stat.c writes what completed after the last
window, often a few draining I/Os); duplicate timestamps are known (fio issues 739, 947). A row
less than half a window after the previous one of its direction is such a remnant and is
dropped, keeping the full window.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path

from .. import jobfile
from ..errors import ParseError
from ..model import TimeSeries

#: The averaging window iolab asks for: cheap (one row per second per direction and log,
#: FIO_NOTES §6.2) and fine enough to see a cache filling or a device throttling.
INTERVAL_MS = 1000

#: Options that mean the job file does its own logging; iolab then adds none (its own
#: ``log_avg_msec`` would change the user's logs, and per-I/O logs of its own would be costly).
OWN_LOGGING = frozenset({"write_bw_log", "write_iops_log", "write_lat_log", "log_avg_msec"})

#: fio's log kind (file-name infix) -> iolab's metric name.
METRICS = {"iops": "iops", "bw": "bw_bytes_s", "clat": "clat_ns", "lat": "lat_ns", "slat": "slat_ns"}
_DDIR = {0: "read", 1: "write", 2: "trim"}
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


def host_of(path: Path) -> str | None:
    """The host a ``fio --client`` run named a log it brought back after (``P_iops.1.log.HOST``),
    or None for a log written locally."""
    match = _NAME_RE.match(path.name)
    return match.group("host") if match else None


def sets_own_logging(job_text: str) -> bool:
    """Whether any job of ``job_text`` sets its own logs or averaging (see ``OWN_LOGGING``)."""
    return any(OWN_LOGGING & set(options) for _, options in jobfile.effective_jobs(jobfile.parse(job_text)))


def thread_names(job_text: str) -> list[str]:
    """Job name of each fio thread number, in order: ``names[N - 1]`` ran as thread N.

    Each job section counts ``numjobs`` times (``add_job()`` in init.c numbers clones right
    after their job). A ``numjobs`` fio would reject counts once.
    """
    names = []
    for name, options in jobfile.effective_jobs(jobfile.parse(job_text)):
        numjobs = options.get("numjobs") or "1"
        names += [name] * (int(numjobs) if numjobs.isdigit() and int(numjobs) > 0 else 1)
    return names


def find_logs(directory: Path, prefix: str | None = None) -> list[Path]:
    """fio bw/IOPS/latency log files in ``directory`` (optionally only ``prefix_*``), sorted.

    Histogram logs (``_clat_hist``) and compressed logs (``.fz``) are not read.
    """
    found = []
    for path in sorted(directory.iterdir()) if directory.is_dir() else []:
        match = _NAME_RE.match(path.name)
        if match and path.is_file() and (prefix is None or match.group("prefix") == prefix) \
                and not path.name.endswith(".fz"):  # log_store_compressed: fio's own format
            found.append(path)
    return found


def read_beside(output: Path, job_names: Sequence[str] = (), prefix: str | None = None) -> tuple[TimeSeries, ...]:
    """The logs lying in the same directory as a fio output file, for ``iolab import``.

    ``job_names`` as for ``read_logs``: ``thread_names(job_text)`` when the job file is known,
    else the report's job names in order when fio ran without group_reporting (one report entry
    per thread); otherwise leave it empty and logs are named by their file prefix. ``prefix``
    restricts to one ``write_*_log`` name. Raises ``ParseError`` for a malformed log.
    """
    return read_logs(find_logs(output.parent, prefix), job_names)


def parse_log(text: str, source: str = "<log>") -> list[tuple[int, float, int, int]]:
    """Rows ``(time_ms, value, ddir, bs)`` of one log file, in file order.

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


def read_logs(paths: Iterable[Path], job_names: Sequence[str] = (),
              interval_ms: int | None = None) -> tuple[TimeSeries, ...]:
    """Every log file in ``paths`` as TimeSeries, one per file and direction.

    ``job_names`` maps thread numbers to job names (``thread_names``, or the job names of a
    report without group_reporting, in order); a log whose number has no name is named by its
    file prefix. ``interval_ms`` is the ``log_avg_msec`` used; when None it is inferred from the
    timestamps (the median step). Per-I/O logs are averaged into windows of ``interval_ms``
    (default 1000): IOPS counted, bandwidth summed from the block sizes, latency averaged.
    Raises ``ParseError`` for a malformed file (see ``parse_log``).
    """
    series = []
    for path in paths:
        match = _NAME_RE.match(path.name)
        if match is None:
            continue
        index = int(match.group("index") or 0)
        name = job_names[index - 1] if 0 < index <= len(job_names) else match.group("prefix")
        kind = match.group("kind")
        rows = parse_log(path.read_text(errors="replace"), str(path))
        for ddir, direction in _DDIR.items():
            mine = sorted(((t, v, bs) for t, v, d, bs in rows if d == ddir), key=lambda r: r[0])
            if not mine:
                continue
            if any(bs for _, _, bs in mine):
                width = interval_ms or INTERVAL_MS
                times, values = _bin_per_io(mine, kind, width)
            else:
                width = interval_ms or _infer_interval([t for t, _, _ in mine])
                times, values = _drop_remnants([(t, v) for t, v, _ in mine], width)
            if kind == "bw" and not any(bs for _, _, bs in mine):
                values = [v * 1024 for v in values]  # KiB/s -> bytes/s
            series.append(TimeSeries(job=name, job_index=index, direction=direction, metric=METRICS[kind],
                                     t_ms=tuple(times), values=tuple(values), interval_ms=width,
                                     hostname=match.group("host")))
    return tuple(series)


def _infer_interval(times: Sequence[int]) -> int:
    steps = [b - a for a, b in itertools.pairwise(times) if b > a]
    if steps:
        return max(1, round(statistics.median(steps)))
    return max(1, times[0]) if times else INTERVAL_MS


def _drop_remnants(rows: Sequence[tuple[int, float]], interval_ms: int) -> tuple[list[int], list[float]]:
    """Keep one row per window: see the module docstring for why later close rows go."""
    times: list[int] = []
    values: list[float] = []
    for t, v in rows:
        previous = times[-1] if times else 0
        if times and t - previous < interval_ms / 2:
            continue
        times.append(t)
        values.append(v)
    return times, values


def _bin_per_io(rows: Sequence[tuple[int, float, int]], kind: str,
                width: int) -> tuple[list[int], list[float]]:
    """Per-I/O rows averaged into windows ending at ``width``, ``2 × width`` ...; a final
    partial window is divided by its own length."""
    windows: dict[int, list[tuple[float, int]]] = {}
    for t, v, bs in rows:
        windows.setdefault(t // width, []).append((v, bs))
    last_t = rows[-1][0]
    times, values = [], []
    for k in sorted(windows):
        end = (k + 1) * width
        seconds = (min(end, last_t) - k * width) / 1000 or width / 1000
        members = windows[k]
        if kind == "iops":
            value = len(members) / seconds
        elif kind == "bw":
            value = sum(bs for _, bs in members) / seconds
        else:
            value = sum(v for v, _ in members) / len(members)
        times.append(end)
        values.append(value)
    return times, values
