"""Which of fio's log files belong to which imported result: the attribution rules.

fio names a log after the job's ``write_*_log`` option and the thread number
(``PREFIX_iops.N.log``, ``fio.logs``), nothing else: no run id, no time of day. Sweep scripts
such as bench-fio's older versions name them by queue depth only, so every later run at that depth
overwrites the logs of the earlier ones, and a directory of 98 outputs holds logs that belong to
few of them. A log is attached to a result only when all of these hold (else it is not stored,
and the import says why, one line per result):

1. **name**: its prefix and kind are what one of the result's jobs asked for (``write_bw_log``,
   ``write_iops_log``, ``write_lat_log``; a bare option means the job's name; an absolute prefix
   from another machine is looked for beside the output), and, for a ``fio --client`` output, its
   host suffix is the result's host;
2. **thread**: its number is one of that job's threads (numjobs clones numbered across the job
   file's sections, fio's ``thread_number``);
3. **direction**: its rows hold only data directions that thread performed (a read job wrote no
   write samples);
4. **time span**: its last time stamp fits the job's runtime: at most ``max(2 windows, 10 %)``
   plus the ``ramp_time`` beyond it (fio starts the logs after the ramp), and not before half of it
   (``_check``);
5. **values**: the rates its threads' IOPS (or bandwidth) logs give over the run, summed, are
   within a factor ``MAX_RATIO`` of the result's own (``total_ios / runtime`` of those threads): a
   log written by a run with 64 jobs has a sixty-fourth of the IOPS per thread of the 1-job run
   that asked for the same name. This rule is iolab's own; it is what tells an overwritten log from
   the result it now sits beside. Latency logs are not held to it (a window average of a
   heavy-tailed latency can be several times the mean: an HDD's submission latency logged 45 ms
   against a 218 ms mean); they go with their thread's rate logs.

Logs that several results could take go to the one they fit best (``attach``). A log is stored
once.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ... import units
from ...errors import ParseError, SuiteError
from ...fio import jobfile
from ...fio import logs as fio_logs
from ...fio.num2str import version_tuple
from ...model import DirectionStats, FioReport, JobResult, TimeSeries

#: Rule 5: logs whose rate is more than this factor off the result's are not its.
MAX_RATIO = 3.0
#: Fits within this factor of the best are a tie: rates that close are noise, not evidence, and the
#: time the logs were written decides (then the number of threads they explain).
TIE_RATIO = 1.25
#: fio writes a job's logs when the job ends, just before its report: logs modified within this many
#: seconds of a report's time stamp were written by that run (when files keep their times: not after
#: a plain ``cp`` or a git checkout, which give every file the time of the copy).
SAME_RUN_S = 5.0


@dataclass(frozen=True)
class Thread:
    """One fio thread of an imported result, as its logs should look.

    ``logs`` maps a log kind (``iops``, ``bw``, ``lat``, ``clat``, ``slat``) to the places it may
    lie (directory path, file-name prefix); ``expected`` maps ``(kind, direction)`` to the thread's rate
    for its IOPS and bandwidth logs (IOPS, KiB/s).
    """

    number: int
    job: str
    logs: Mapping[str, tuple[tuple[str, str], ...]]
    directions: frozenset[str]
    runtime_ms: int | None
    ramp_ms: int
    interval_ms: int | None
    expected: Mapping[tuple[str, str], float] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    """What one imported result asks for: its threads, the hosts its logs may name (None:
    written locally) and when its report was written (ms since the epoch)."""

    name: str
    threads: tuple[Thread, ...]
    hosts: frozenset[str | None]
    timestamp_ms: int | None
    latency_scale: float = 1.0
    shared_hosts: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Attached:
    """The outcome for the results of a run, in their order: the series of each, the log files
    stored for each, and per result one line on the logs it did not get (None when none);
    ``skipped`` counts the log files named by some result that none got."""

    series: tuple[tuple[TimeSeries, ...], ...]
    files: tuple[tuple[Path, ...], ...]
    notes: tuple[str | None, ...]
    skipped: int = 0

    @property
    def attached(self) -> int:
        return sum(len(f) for f in self.files)


def request(name: str, output: Path, report: FioReport, job_text: str,
            shared_hosts: frozenset[str] = frozenset()) -> Request:
    """What the result ``name`` (a report read from ``output``, ``job_text`` rebuilt from it) asks
    for: see the module docstring. ``shared_hosts`` are hosts of a client output that ran several fio
    servers, whose logs have the same names."""
    version = version_tuple(report.fio_version)
    scale = 1000.0 if version is not None and version < (2, 99) else 1.0
    if not _may_have_logs(output, report):  # the usual case, decided without parsing the job text
        return Request(name, (), frozenset(), report.timestamp_ms, scale)
    try:
        jobs = jobfile.effective_jobs(jobfile.parse(job_text))
    except SuiteError:
        jobs = []
    asked = any(k in opts for _, opts in jobs for k in fio_logs.KINDS_OF_OPTION)
    fallback = report.source_format in ("normal", "terse") and not asked  # logs named after the output
    threads = []
    numbers = fio_logs.names_of_threads(jobs)  # the job text parsed once
    entries = _entries(report, numbers)
    options = dict(jobs)
    places_of: dict[str, dict[str, tuple[tuple[str, str], ...]]] = {}  # a job's clones log to the same places
    for number, (job, entry, share) in enumerate(entries, 1):
        opts = options.get(job, {})
        if job not in places_of:
            places_of[job] = _places(opts, job, output, fallback)
        places = places_of[job]
        if not places:
            continue
        directions = {d: s for d, s in (entry.directions.items() if entry else ()) if s.total_ios or s.iops}
        runtimes = [s.runtime_ms for s in directions.values() if s.runtime_ms]
        threads.append(Thread(
            number=number, job=job, logs=places, directions=frozenset(directions),
            runtime_ms=max(runtimes) if runtimes else None, ramp_ms=_ms(opts.get("ramp_time")),
            interval_ms=_interval(opts.get("log_avg_msec")), expected=_expected(directions, share)))
    hosts = [j.hostname for j in report.jobs]
    return Request(name, tuple(threads), frozenset(hosts), report.timestamp_ms, scale, shared_hosts)


def _may_have_logs(output: Path, report: FioReport) -> bool:
    """Whether a job of ``report`` names logs, or (normal and terse output, which list no options)
    a log is named after the output file (``ssd_iops.1.log`` beside ``ssd.txt``)."""
    if any(option in report.global_options or option in job.job_options
           for job in report.jobs for option in fio_logs.KINDS_OF_OPTION):
        return True
    return report.source_format in ("normal", "terse") and any(
        (output.parent / f"{output.stem}_{kind}{n}.log").is_file() for kind in fio_logs.METRICS for n in (".1", ""))


def _entries(report: FioReport, names: Sequence[str]) -> list[tuple[str, JobResult | None, float]]:
    """Per thread: its job name, the report entry that describes it and the thread's share of that
    entry (1 for a thread's own entry; 1/members for a ``group_reporting`` group)."""
    jobs = list(report.jobs)
    if [j.name for j in jobs] == list(names):
        return [(name, job, 1.0) for name, job in zip(names, jobs, strict=True)]
    count = Counter(names)
    by_name = {j.name: j for j in jobs}
    lone = jobs[0] if len(jobs) == 1 else None
    out: list[tuple[str, JobResult | None, float]] = []
    for name in names:
        if name in by_name and sum(j.name == name for j in jobs) == 1:
            out.append((name, by_name[name], 1 / count[name]))
        else:
            out.append((name, lone, 1 / len(names) if lone else 1.0))
    return out


def _places(opts: Mapping[str, str | None], job: str, output: Path,
            fallback: bool) -> dict[str, tuple[tuple[str, str], ...]]:
    places: dict[str, tuple[tuple[str, str], ...]] = {}
    if fallback:
        return {kind: ((str(output.parent), output.stem),) for kind in fio_logs.METRICS}
    for option, kinds in fio_logs.KINDS_OF_OPTION.items():
        if option not in opts:
            continue
        base = Path(opts[option] or job)
        found: tuple[tuple[str, str], ...]
        if base.is_absolute():  # where fio wrote it, or beside the output when the files were moved
            found = ((str(base.parent), base.name), (str(output.parent), base.name))
        else:
            found = ((str(output.parent / base.parent), base.name),)
        places.update(dict.fromkeys(kinds, found))
    return places


def _ms(duration: str | None) -> int:
    try:
        return units.parse_duration_us(duration) // 1000 if duration else 0
    except ValueError:
        return 0


def _interval(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() and int(value) > 0 else None


def _expected(directions: Mapping[str, DirectionStats], share: float) -> dict[tuple[str, str], float]:
    """What one thread's IOPS and bandwidth logs should average, per (kind, direction), in the logs'
    units (IOPS, KiB/s)."""
    out: dict[tuple[str, str], float] = {}
    for name, d in directions.items():
        if d.iops is not None:
            out[("iops", name)] = d.iops * share
        if d.bw_bytes_s is not None:
            out[("bw", name)] = d.bw_bytes_s / 1024 * share
    return out


@cache
def _directory(path: str) -> dict[tuple[str, str], dict[int, list[tuple[Path, fio_logs.LogName]]]]:
    """The fio logs in a directory: ``(prefix, kind) -> thread number -> [(path, name)]`` (one per
    host)."""
    found: dict[tuple[str, str], dict[int, list[tuple[Path, fio_logs.LogName]]]] = {}
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        name = fio_logs.log_name(entry.name)
        if name is not None and entry.is_file():
            found.setdefault((name.prefix, name.kind), {}).setdefault(name.index, []).append((Path(entry.path), name))
    return found


#: The logs of one prefix in one directory (and from one host): (directory, prefix, host). fio
#: writes all of a run's threads' logs under its prefix, so they are judged together.
_Family = tuple[str, str, str | None]
#: Per result, per thread number: the thread and its log files in a family.
_Claims = dict[int, dict[int, tuple[Thread | None, list[Path]]]]


class _Verdicts:
    """Why each result did not get logs named like its own: reason -> log files, and an example."""

    def __init__(self, count: int) -> None:
        self.counts: list[Counter[str]] = [Counter() for _ in range(count)]
        self.examples: list[dict[str, str]] = [{} for _ in range(count)]

    def refuse(self, result: int, reason: str, example: str, files: int) -> None:
        self.counts[result][reason] += files
        self.examples[result].setdefault(reason, example)

    def notes(self, requests: Sequence[Request]) -> tuple[str | None, ...]:
        return tuple(_note(req.name, count, ex) if count else None
                     for req, count, ex in zip(requests, self.counts, self.examples, strict=True))


def attach(requests: Sequence[Request]) -> Attached:
    """Apply the rules of the module docstring to the logs the ``requests`` name.

    Rules 1-4 are checked per thread. Rule 5 and the choice between results are made per family of
    logs (one prefix in one directory): the result whose threads' logs together best give its own
    totals takes them, then the next best takes what is left, and so on. Judged together, the
    threads' rates add up to the run's total however unevenly the threads shared the device (64
    jobs on an HDD: some threads an eighth of the others' rate), so a 64-job run's logs are not
    taken for a 32-job run's; and when a later run overwrote only some threads' logs, each part
    still goes to the run that wrote it.
    """
    _directory.cache_clear()  # the file system may have changed since an earlier import
    _mtime.cache_clear()
    families: dict[_Family, _Claims] = {}
    for i, req in enumerate(requests):
        for family, found in _named(req):
            numbers = families.setdefault(family, {}).setdefault(i, {})
            for number, thread, path in found:  # per result, thread and log: the loop of an import's thousands
                claim = numbers.get(number)
                if claim is None:
                    numbers[number] = (thread, [path])
                else:
                    claim[1].append(path)
    # every log a thread claims is read, once (together: fio_logs.read_log_files); logs numbered
    # beyond every claimant's threads are refused by their names alone
    read = fio_logs.read_log_files(dict.fromkeys(path for claims in families.values() for numbers in claims.values()
                                                 for thread, paths in numbers.values() if thread is not None
                                                 for path in paths))
    verdicts = _Verdicts(len(requests))
    series: list[list[TimeSeries]] = [[] for _ in requests]
    files: list[list[Path]] = [[] for _ in requests]
    for claims in families.values():
        passed = _rules_1_to_4(requests, claims, read, verdicts)
        for i, taken in _choose(requests, passed, read, verdicts):
            for thread, paths in taken.values():
                assert thread is not None
                for path in paths:
                    log = read[path]
                    assert not isinstance(log, ParseError)
                    series[i] += fio_logs.to_series(log, thread.job, thread.interval_ms, requests[i].latency_scale)
                files[i] += paths
    named = {path for claims in families.values() for numbers in claims.values()
             for _, paths in numbers.values() for path in paths}
    attached = sum(len(f) for f in files)
    return Attached(tuple(tuple(s) for s in series), tuple(tuple(f) for f in files), verdicts.notes(requests),
                    len(named) - attached)


def _rules_1_to_4(requests: Sequence[Request], claims: _Claims, read: dict[Path, fio_logs.Log | ParseError],
                  verdicts: _Verdicts) -> _Claims:
    """The claims whose thread's logs pass rules 1-4 (the others are refused, with the reason)."""
    passed: _Claims = {}
    for i, numbers in claims.items():
        for number, (thread, paths) in numbers.items():
            verdict = _judge(requests[i], thread, paths, read)
            if verdict is None:
                passed.setdefault(i, {})[number] = (thread, paths)
            else:
                verdicts.refuse(i, *verdict, files=len(paths))
    return passed


def _choose(requests: Sequence[Request], claims: _Claims, read: dict[Path, fio_logs.Log | ParseError],
            verdicts: _Verdicts) -> list[tuple[int, dict[int, tuple[Thread | None, list[Path]]]]]:
    """Rule 5 and the choice: repeatedly the result whose remaining threads' logs fit it best takes
    them. Best: the one result whose report was written when the logs were (``SAME_RUN_S``), else the
    smallest ``|log(ratio)|`` of their summed rates against its own, where fits within ``TIE_RATIO`` of
    each other are a tie decided by the report written closest to the logs, then by the most threads.
    Rates over a run of one or two windows are noisy (fio leaves the last window out, the first
    holds the start), so a file's time, when it was kept, is the better witness."""
    chosen = []
    left = dict(claims)
    taken_by: dict[int, int] = {}  # thread number -> the result that took its logs
    off: set[int] = set()  # results refused by rule 5
    while left:
        scored = []
        for i, numbers in list(left.items()):
            mine = {n: claim for n, claim in numbers.items() if n not in taken_by}
            if not mine:
                continue
            fit = _rate_fit(mine, read)
            if isinstance(fit, tuple):
                verdicts.refuse(i, *fit, files=sum(len(paths) for _, paths in mine.values()))
                off.add(i)
                del left[i]
                continue
            age = min(_age(p, requests[i].timestamp_ms) for _, paths in mine.values() for p in paths)
            scored.append((fit, age, i, mine))
        if not scored:
            break
        same_run = [s for s in scored if s[1] <= SAME_RUN_S]
        scored = same_run if len(same_run) == 1 else scored
        best_fit = min(fit for fit, *_ in scored)
        tied = [s for s in scored if s[0] <= best_fit + math.log(TIE_RATIO)]
        _, _, best, mine = min(tied, key=lambda s: (s[1], -len(s[3]), s[0]))
        chosen.append((best, mine))
        taken_by.update(dict.fromkeys(mine, best))
        del left[best]
    for i, numbers in claims.items():
        lost = [paths for n, (_, paths) in numbers.items() if taken_by.get(n, i) != i and i not in off]
        if lost:
            winner = requests[taken_by[next(n for n in numbers if taken_by.get(n, i) != i)]]
            verdicts.refuse(i, f"fitting {winner.name} better", lost[0][0].name, sum(len(p) for p in lost))
    return chosen


def _rate_fit(claims: Mapping[int, tuple[Thread | None, list[Path]]],
              read: Mapping[Path, fio_logs.Log | ParseError]) -> float | tuple[str, str]:
    """Rule 5 for some threads of one result: their IOPS logs' rates (else their bandwidth logs')
    summed, against the result's rates of those threads summed, per direction; the worst
    ``|log(ratio)|``, or why it is off by more than ``MAX_RATIO``. Without such logs, or without the
    result's figures, the rule cannot decide: a neutral ``log(MAX_RATIO) / 2``."""
    for kind in ("iops", "bw"):
        logged: dict[str, float] = {}
        expected: dict[str, float] = {}
        for thread, paths in claims.values():
            assert thread is not None
            for path in paths:
                log = read[path]
                if isinstance(log, ParseError) or log.name.kind != kind:
                    continue
                width = thread.interval_ms or (fio_logs.INTERVAL_MS if log.per_io else
                                               fio_logs.infer_interval(log.t_ms))
                for direction in log.directions:  # the rate over what the log covers: fio leaves out the last window
                    mean, want = log.mean(direction, None, width), thread.expected.get((kind, direction))
                    if mean is not None and want:
                        logged[direction] = logged.get(direction, 0.0) + mean
                        expected[direction] = expected.get(direction, 0.0) + want
        if not logged:
            continue
        worst = 0.0
        for direction, total in logged.items():
            off = abs(math.log(total / expected[direction])) if total > 0 else math.inf
            if off > math.log(MAX_RATIO):
                unit = "IOPS" if kind == "iops" else "KiB/s"
                return (f"averaging more than {MAX_RATIO:g}x off its rate", f"{len(claims)} thread(s) logged "
                        f"{total:,.1f} {unit} {direction}, it did {expected[direction]:,.1f}")
            worst = max(worst, off)
        return worst
    return math.log(MAX_RATIO) / 2


def _judge(req: Request, thread: Thread | None, paths: Sequence[Path],
           read: dict[Path, fio_logs.Log | ParseError]) -> tuple[str, str] | None:
    """Why one thread's logs do not belong to ``thread`` of ``req`` by rules 1-4 (``(reason,
    example)``), or None when they may."""
    if thread is None:
        count = len(req.threads)
        return f"numbered beyond its {count} thread{'s' if count != 1 else ''}", paths[0].name
    if req.shared_hosts and fio_logs.host_of(paths[0]) in req.shared_hosts:
        return "from fio servers that share a host and so the log names", paths[0].name
    for path in paths:
        log = read[path]
        if isinstance(log, ParseError):
            return "not readable as fio logs", log.message
        verdict = _check(log, thread)
        if verdict is not None:
            return verdict
    return None


def _named(req: Request) -> Iterable[tuple[_Family, list[tuple[int, Thread | None, Path]]]]:
    """Every log file named like one of the request's jobs asked for, by family, in the order of the
    directory's listing: its number, the thread whose number it carries (None: no thread that asked
    for these names has it) and its path."""
    owners: dict[tuple[str, tuple[tuple[str, str], ...]], dict[int, Thread]] = {}
    for thread in req.threads:
        for kind, places in thread.logs.items():
            owners.setdefault((kind, places), {})[thread.number] = thread
    for (kind, places), threads in owners.items():
        first = next(iter(threads.values()))
        for directory, prefix in places:
            by_number = _directory(directory).get((prefix, kind), {})
            by_host: dict[str | None, list[tuple[int, Thread | None, Path]]] = {}
            for number, found in by_number.items():
                owner = threads.get(number) if number else first  # 0: per_job_logs=0
                for path, name in found:
                    if name.host in req.hosts:
                        by_host.setdefault(name.host, []).append((number, owner, path))
            for host, logs in by_host.items():
                yield (directory, prefix, host), logs
            if by_number:
                break  # the first place that holds such logs is where they are


def _check(log: fio_logs.Log, thread: Thread) -> tuple[str, str] | None:
    """Why ``log`` does not belong to ``thread`` by rules 3 and 4 (``(reason, example)``), or None.

    The time span's lower bound is half the runtime (or less, by the same slack as above, for runs
    of a few windows, whose last window fio often leaves out): fio writes no row for a window in
    which nothing completed, so a thread starved at the end of a run (64 jobs on one HDD) logs its
    last row seconds early; a log of a run half as long is still told apart."""
    end = log.end_ms
    if end is None:
        return "empty", log.path.name
    extra = sorted(log.directions - thread.directions)
    if extra:
        did = " and ".join(sorted(thread.directions)) or "no I/O"
        return f"with {' and '.join(extra)} I/O while it did {did}", log.path.name
    if thread.runtime_ms:
        width = thread.interval_ms or (fio_logs.INTERVAL_MS if log.per_io else fio_logs.infer_interval(log.t_ms))
        runtime, slack = thread.runtime_ms, max(2 * width, 0.1 * thread.runtime_ms)
        if not min(runtime / 2, runtime - slack) <= end <= runtime + thread.ramp_ms + slack:
            return ("ending at a time that does not fit its runtime",
                    f"{log.path.name} ends at {end / 1000:g} s, it ran {runtime / 1000:g} s")
    return None


def _age(path: Path, timestamp_ms: int | None) -> float:
    """Seconds between the log's modification and the report's time (inf when unknown)."""
    if timestamp_ms is None:
        return math.inf
    mtime = _mtime(path)
    return math.inf if mtime is None else abs(mtime - timestamp_ms / 1000)


@cache
def _mtime(path: Path) -> float | None:
    """A log's modification time, read once per import (``attach`` clears it, as ``_directory``):
    each round of ``_choose`` asks again for every log of every result still choosing."""
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _note(name: str, count: Counter[str], examples: Mapping[str, str]) -> str:
    parts = [f"{n} {reason} ({examples[reason]})" for reason, n in count.most_common()]
    return f"{name}: {sum(count.values())} log file(s) named like its own not attached: {'; '.join(parts)}"
