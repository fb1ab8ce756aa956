"""Import existing fio output files as stored runs (origin ``imported``).

One file becomes one run: provenance is per file (its sha256, fio version, warnings, format),
and a label or tag groups the runs of several files, which ``compare`` then pools as
repetitions when their workloads agree. Importing a file whose sha256 is already stored is
refused with the earlier run's id (``store.DuplicateSource``).

Each run holds one result per host: client/server output (``fio --client``) gives one result
per server (target ``host:port``); any other output one result with target ``local``. The
result's workload identity is derived from what the file tells, since there is no iolab suite:

* ``job_text`` is a job file rebuilt from the options the output reports, one section per fio
  job name, headed by a comment saying so. JSON lists ``global options`` and each job's ``job
  options``; normal output only shows ``rw``, ``bs``, ``ioengine``, ``iodepth`` (job header line),
  the laid-out ``size`` and ``jobs=N`` (``JobResult.shown_options``, ``members``); terse shows none.
* ``params``/``job_hash`` are ``jobfile.workload_params`` of that job file, as for iolab's runs.
* ``extra["unknown_options"]`` says which absent options are unknown rather than fio's default:
  ``["*"]`` (every option not in the job text) for normal and terse output and for JSON from fio
  before 2.3 (no option lists); for other JSON the options fio's JSON drops when they are given
  without a value (``BARE_FLAGS``: ``time_based``, ``norandommap`` …, FIO_NOTES §1.2), unless the
  output lists them.

The file's text is stored once, zlib-compressed, with the run's first result. fio's time-series
logs lying beside the output (``find_logs``) are read and stored with the result they belong to
(``attach_logs``), so reports draw them like those of iolab's own runs.

``import_files`` imports many files, a failing one not stopping the others, and stores them in
batches of one transaction each (``BATCH_FILES``): a commit per file costs more than reading a
typical output (benchmarks/import.py).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from . import jobfile
from .errors import IolabError, ParseError, SuiteError, UsageError
from .fio import logs as fio_logs
from .fio import parse_output
from .fio.num2str import version_tuple
from .model import FioReport, JobResult, TimeSeries
from .store import DuplicateSource, FinishedResult, FinishedRun, Store, compress_raw

#: fio options of type FIO_OPT_STR_SET (options.c@fio-3.33): the ones a job file may give without a
#: value. fio's JSON omits options given that way (json.c drops empty values), so their absence from
#: a JSON report does not mean fio's default.
BARE_FLAGS = ("bs_unaligned", "exitall", "exitall_on_error", "group_reporting", "new_group", "norandommap",
              "refill_buffers", "stonewall", "thread", "time_based", "verify_only", "zero_buffers")
#: ``unknown_options`` value meaning: every option not written in the job text is unknown.
ALL_UNKNOWN = "*"
LOCAL = "local"
_LOG_OPTIONS = {"write_bw_log": ("bw",), "write_iops_log": ("iops",), "write_lat_log": ("lat", "clat", "slat"),
                "write_hist_log": ("clat_hist",)}


@dataclass(frozen=True)
class PlannedResult:
    """One result an output file yields: a host's jobs with their derived workload identity."""

    target: str
    target_path: str | None
    workload: str
    job_text: str
    params: Mapping[str, str]
    unknown_options: tuple[str, ...]
    report: FioReport
    status: str = "ok"
    error: str | None = None


@dataclass(frozen=True)
class Imported:
    """What ``import_files`` stored for one file: the run id and what the file turned out to be."""

    path: str
    run_id: int
    source_format: str
    fio_version: str | None
    results: int
    warnings: tuple[str, ...]
    logs: tuple[str, ...] = ()
    series: int = 0


def read_source(path: Path) -> tuple[str, str, int]:
    """The text of a fio output file, the sha256 of its bytes and their number.

    Text that is not UTF-8 is read as Latin-1 (every byte is a character), so no file is refused
    for its encoding. Raises ``UsageError`` when the file cannot be read.
    """
    text, data, _ = _read(path)
    return text, hashlib.sha256(data).hexdigest(), len(data)


def _read(path: Path) -> tuple[str, bytes, bytes]:
    """The text of a file, its bytes, and the UTF-8 bytes of the text (the same object when the file
    is UTF-8), which are what the store keeps."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {printable(path)}: {exc.strerror or exc}") from exc
    try:
        return data.decode(), data, data
    except UnicodeDecodeError:
        text = data.decode("latin-1")
        return text, data, text.encode()


def printable(path: Path) -> str:
    """``path`` as text that can be stored and printed: the bytes of a file name that are not UTF-8
    (which Python keeps as lone surrogates) become ``\\xff`` escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def plan_results(report: FioReport, name: str) -> list[PlannedResult]:
    """The results ``report`` (read from the file called ``name``) is stored as, one per host."""
    hosts: dict[tuple[str | None, int | None], list[JobResult]] = {}
    for job in report.jobs:
        hosts.setdefault((job.hostname, job.port), []).append(job)
    planned = []
    for (hostname, port), jobs in hosts.items():
        part = report if len(hosts) == 1 else replace(
            report, jobs=tuple(jobs), disk_util=tuple(d for d in report.disk_util if d.hostname == hostname))
        planned.append(_plan_one(part, name, f"{hostname}:{port}" if hostname and port else hostname or LOCAL))
    return planned


def _plan_one(report: FioReport, name: str, target: str) -> PlannedResult:
    sections = _sections(report)
    job_text = jobfile.render(sections, header=(
        f"iolab import of {name} ({report.source_format} output of fio {report.fio_version or '(version unknown)'})",
        "the options this output reports, not necessarily the whole job file",
    ))
    names = list(dict.fromkeys(s.name for s in sections))
    failed = [j for j in report.jobs if j.error]
    locations = {value for s in sections for key, value in s.options if key in ("filename", "directory")}
    return PlannedResult(
        target=target, target_path=locations.pop() if len(locations) == 1 else None,
        workload=names[0] if len(names) == 1 else Path(name).stem, job_text=job_text,
        params=jobfile.workload_params(sections), unknown_options=_unknown(report, sections), report=report,
        status="failed" if failed else "ok",
        error="; ".join(f"fio error {j.error} in job {j.name!r}" for j in failed) or None,
    )


def _sections(report: FioReport) -> tuple[jobfile.Section, ...]:
    """One job section per fio job name, with the options the report gives for it."""
    options: dict[str, dict[str, str]] = {}
    members: dict[str, int | None] = {}
    for job in report.jobs:
        mine = options.setdefault(job.name, {**report.global_options, **job.shown_options, **job.job_options})
        mine.pop("name", None)
        if job.members is not None:
            count = members.get(job.name, 0)
            members[job.name] = None if count is None else count + job.members
        elif report.source_format == "normal":
            members[job.name] = None
    for job_name, count in members.items():
        if count and "numjobs" not in options[job_name]:
            options[job_name]["numjobs"] = str(count)  # normal output: jobs=N of the blocks with this name
    return tuple(
        jobfile.Section(_section_name(job_name), tuple((k, _one_line(v)) for k, v in opts.items()))
        for job_name, opts in options.items()
    )


def _section_name(name: str) -> str:
    """A job name usable as a ``[section]`` header (fio's own names always are)."""
    cleaned = name.replace("]", ")").replace("\n", " ").strip()
    return cleaned or "job"


def _one_line(value: str) -> str:
    return value.replace("\r", " ").replace("\n", " ")


def _unknown(report: FioReport, sections: Sequence[jobfile.Section]) -> tuple[str, ...]:
    version = version_tuple(report.fio_version)
    if report.source_format not in ("json", "json+", "client-json") or (version is not None and version < (2, 3)):
        return (ALL_UNKNOWN,)
    given = {key for s in sections for key, _ in s.options}
    return tuple(flag for flag in BARE_FLAGS if flag not in given)


def find_logs(path: Path, report: FioReport) -> list[Path]:
    """fio time-series log files beside the output ``path`` that its jobs' options name.

    ``write_bw_log=NAME`` makes fio write ``NAME_bw.N.log`` (``NAME_bw.log`` with
    ``per_job_logs=0``; client mode appends ``.HOST``), likewise ``_iops``, ``_lat``/``_clat``/
    ``_slat`` and ``_clat_hist`` (HOWTO "Measurements and reporting", FIO_NOTES §6). A relative
    NAME is taken relative to the output's directory, where fio's working directory usually was.
    Normal and terse output list no options: for them the logs named after the output file are
    taken (``ssd_iops.1.log`` beside ``ssd.txt``).
    """
    patterns: dict[tuple[Path, str], None] = {}  # numjobs clones name the same logs: one glob each
    for job in report.jobs:
        options = {**report.global_options, **job.job_options}
        for option, kinds in _LOG_OPTIONS.items():
            if option in options:
                base = Path(options[option] or job.name)
                base = base if base.is_absolute() else path.parent / base
                patterns.update(((base, kind), None) for kind in kinds)
    found: dict[Path, None] = {}
    for base, kind in patterns:
        for log in sorted(base.parent.glob(f"{base.name}_{kind}.*log*")):
            if log.is_file():
                found[log] = None
    if not found and report.source_format in ("normal", "terse") and any(
            (path.parent / f"{path.stem}_{kind}{n}.log").is_file() for kind in fio_logs.METRICS for n in (".1", "")):
        found = dict.fromkeys(fio_logs.find_logs(path.parent, path.stem))  # a directory scan: only when worth it
    return list(found)


def attach_logs(logs: Sequence[Path], planned: Sequence[PlannedResult]
                ) -> tuple[list[tuple[TimeSeries, ...]], list[str]]:
    """The time series in ``logs`` for each planned result, and warnings about logs left out.

    A log a ``fio --client`` run brought back names its host (``….log.HOST``, the connect
    string's host as in the output's ``hostname``) and belongs to the result of that host; a log
    without a host to the result of a local output. Two servers on one host (different ports)
    write their logs under the same name, so theirs are left out, as are logs fio's own format
    compressed (``.fz``) and histogram logs. Job names come from the output: its entries in
    order when there is one per fio thread (no group_reporting), else the job sections
    expanded by numjobs (``fio.logs.thread_names``). The averaging window is the output's
    ``log_avg_msec`` when it lists one for every job (fio stamps windows 999, 1001 … ms apart,
    so two or three rows are no measure of it), else it is read from the logs; per-I/O logs are
    averaged into 1-second windows (``fio.logs.read_logs``). A log that is not fio's
    (``ParseError``) leaves that result without series and gives a warning.
    """
    if not logs:
        return [() for _ in planned], []  # the usual case: no parsing of the job text either
    hosts = [{j.hostname for j in p.report.jobs} for p in planned]
    out: list[tuple[TimeSeries, ...]] = []
    warnings: list[str] = []
    for p, mine in zip(planned, hosts, strict=True):
        shared = {h for h in mine if h is not None and sum(h in other for other in hosts) > 1}
        for host in sorted(shared):
            if any(fio_logs.host_of(log) == host for log in logs):
                warnings.append(f"time series of {p.target} not stored: servers sharing the host {host} write "
                                f"their logs under the same names")
        paths = [log for log in logs if fio_logs.host_of(log) in mine - shared and not log.name.endswith(".fz")]
        try:
            threads = fio_logs.thread_names(p.job_text)
        except SuiteError:
            threads = []
        names = [j.name for j in p.report.jobs] if len(p.report.jobs) >= len(threads) else threads
        try:
            out.append(fio_logs.read_logs(paths, names, _log_interval_ms(p.report)))
        except ParseError as exc:
            out.append(())
            warnings.append(f"time series of {p.target} not stored: {exc.message}")
    return out, warnings


def _log_interval_ms(report: FioReport) -> int | None:
    """The ``log_avg_msec`` all jobs of ``report`` list, if they do and it is one number."""
    values = {({**report.global_options, **j.job_options}).get("log_avg_msec") for j in report.jobs}
    value = values.pop() if len(values) == 1 else None
    return int(value) if value and value.isdigit() and int(value) > 0 else None


@dataclass(frozen=True)
class Failed:
    """A file that could not be imported, and why (the error names the file)."""

    path: str
    error: IolabError


#: Files stored per transaction: a commit (an fsync) per file would cost more than reading a
#: typical output. An interrupted import keeps the batches committed; importing the same files
#: again stores the rest (the stored ones are refused as duplicates).
BATCH_FILES = 64
BATCH_BYTES = 32 << 20


def _prepare(path: Path, label: str | None, tags: Mapping[str, str]) -> tuple[FinishedRun, Imported]:
    """Read, checksum, parse and plan one file (nothing is stored)."""
    text, data, utf8 = _read(path)
    sha256, size = hashlib.sha256(data).hexdigest(), len(data)
    shown = Path(printable(path))  # the name stored and printed
    report = parse_output(text, str(shown))
    planned = plan_results(report, shown.name)
    logs = find_logs(path, report)
    series, log_warnings = attach_logs(logs, planned)
    ended_at = datetime.fromtimestamp(report.timestamp_ms / 1000, UTC) if report.timestamp_ms else None
    log_files = {"log_files": [str(p) for p in logs]} if logs else {}
    results = tuple(FinishedResult(
        seq=seq, target=p.target, target_path=p.target_path, workload=p.workload, repeat=0, job_text=p.job_text,
        job_hash=jobfile.params_hash(p.params), params=p.params, status=p.status, report=p.report,
        raw_gz=compress_raw(utf8) if seq == 0 else None, error=p.error, ended_at=ended_at,
        extra={"unknown_options": list(p.unknown_options), **log_files}, series=series[seq],
    ) for seq, p in enumerate(planned))
    source = {"path": printable(path.resolve()), "name": shown.name, "sha256": sha256, "format": report.source_format,
              "size_bytes": str(size)}
    warnings = (*report.warnings, *log_warnings)
    run = FinishedRun(suite_name=shown.name, origin="imported", source=source, sha256=sha256, results=results,
                      label=label, tags=dict(tags), fio_version=report.fio_version, warnings=warnings)
    done = Imported(path=str(shown), run_id=0, source_format=report.source_format, fio_version=report.fio_version,
                    results=len(results), warnings=warnings, logs=tuple(str(p) for p in logs),
                    series=sum(len(s) for s in series))
    return run, done


def import_files(store: Store, paths: Sequence[Path], label: str | None = None,
                 tags: Mapping[str, str] | None = None) -> Iterator[Imported | Failed]:
    """Import fio output files as runs (origin ``imported``), one outcome per file, in order.

    A file that fails does not stop the others: ``Failed`` carries a ``UsageError`` (unreadable),
    a ``ParseError`` (not a fio output; names the line) or a ``store.DuplicateSource`` (this
    content, by sha256, is already stored, or was given twice; names the run). Files are stored
    in batches (``BATCH_FILES``/``BATCH_BYTES``), each in one transaction.
    """
    batch: list[tuple[Path, tuple[FinishedRun, Imported] | IolabError]] = []
    size = 0
    for path in paths:
        try:
            prepared: tuple[FinishedRun, Imported] | IolabError = _prepare(path, label, tags or {})
        except IolabError as exc:
            prepared = exc
        batch.append((path, prepared))
        size += 0 if isinstance(prepared, IolabError) else int(prepared[0].source["size_bytes"])
        if len(batch) >= BATCH_FILES or size >= BATCH_BYTES:
            yield from _store_batch(store, batch)
            batch, size = [], 0
    yield from _store_batch(store, batch)


def _store_batch(store: Store, batch: Sequence[tuple[Path, tuple[FinishedRun, Imported] | IolabError]]
                 ) -> Iterator[Imported | Failed]:
    ready = {i: p for i, (_, p) in enumerate(batch) if not isinstance(p, IolabError)}
    stored = store.find_sources([run.sha256 for run, _ in ready.values()])
    first: dict[str, int] = {}  # sha256 -> the batch index that stores it
    for i, (run, _) in ready.items():
        if run.sha256 not in stored:
            first.setdefault(run.sha256, i)
    todo = list(first.values())
    run_ids: dict[int, int | DuplicateSource] = {}
    try:
        run_ids.update(zip(todo, store.add_finished_runs([ready[i][0] for i in todo]), strict=True))
    except DuplicateSource:  # another import stored one of them meanwhile: store them one by one
        for i in todo:
            try:
                run_ids[i] = store.add_finished_runs([ready[i][0]])[0]
            except DuplicateSource as exc:
                run_ids[i] = exc
    for i, (path, prepared) in enumerate(batch):
        if isinstance(prepared, IolabError):
            yield Failed(printable(path), prepared)
            continue
        run, done = prepared
        earlier = stored.get(run.sha256, run_ids.get(first.get(run.sha256, -1)))
        if isinstance(earlier, DuplicateSource):
            yield Failed(printable(path), earlier)
        elif run.sha256 in stored or first[run.sha256] != i:
            assert earlier is not None
            yield Failed(printable(path), DuplicateSource(
                f"{printable(path)} is already imported as run {earlier} (same sha256 {run.sha256[:12]}…)", earlier,
                hint=f"see it with: iolab show {earlier}"))
        else:
            yield replace(done, run_id=run_ids[i])  # type: ignore[arg-type]

