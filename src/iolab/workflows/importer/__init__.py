"""Import existing fio output as stored runs (origin ``imported``): a file, or a directory of them.

**A file is a run; a directory is a run.** A file holds one fio output, or several when it is a
pasted text (a field report: outputs one after another with prose between them,
``fio.parse_outputs``): each output is a result of its own, never summed with the others, and the
parts of the text that are no output are noted with the run. ``iolab import a.json b.txt`` stores each file as its
own run (a label or tag groups them, and ``analyze.compare`` pools runs of one label as repetitions).
``iolab import DIR`` stores everything below ``DIR`` as *one* run whose results are all the jobs
found: a sweep (bench-fio's flat ``randread-16-8.json`` layout, its nested ``<device>/<bs>/…``
layout, repeated ``run-N`` directories, fio client/server outputs) is one run, named, laid out and
charted by the options it varies (``importer.plan``, ``analyze.sweep``). Each result keeps its file's path,
sha256 and format (``extra["source"]``); the file's text is stored once, compressed, with its first
result.

**Provenance and duplicates.** Every stored file is listed by sha256 (``store.schema.imported_files``); a
file already imported is skipped with a note naming its run, so importing a directory again
imports only what is new. In a directory, files that are not fio outputs (job files, images,
notes) are passed over and counted; a file that is fio output but cannot be read is reported by
name, and the rest is imported.

**Logs.** fio's bw/IOPS/latency logs named by a result's ``write_*_log`` options are attached only
where they belong (``importer.logs``: name, thread, direction, time span, values) and stored once
each, as compact arrays; the import says per result why logs named like its own were not
attached.

Files are stored in batches of one transaction each (``BATCH_FILES``/``BATCH_BYTES``): a commit per
file costs more than reading a typical output (benchmarks/import.py). A directory is one
transaction.
"""

from __future__ import annotations

import gc
import hashlib
import multiprocessing
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import IolabError, ParseError, UsageError
from ...fio import clean_pasted, detect_format, jobfile, parse_outputs
from ...fio import logs as fio_logs
from ...fio.json import looks_like_json
from ...model import FioReport
from ...store.codecs import compress_raw
from ...store.records import EncodedSeries, FinishedResult, FinishedRun, ImportedFile
from . import logs as attribution
from .plan import ALL_UNKNOWN, BARE_FLAGS, LOCAL, PlannedResult, assemble, plan_results

if TYPE_CHECKING:  # the database's code (SQLAlchemy) is imported by whoever opens it: see import_sources
    from ...store.database import Store

__all__ = ["ALL_UNKNOWN", "BARE_FLAGS", "LOCAL", "FileNote", "Outcome", "Source", "discover", "import_sources",
           "plan_results", "read_source"]

#: Files in a directory that are never fio outputs, by extension: passed over without reading.
NOT_OUTPUTS = frozenset({".fio", ".ini", ".job", ".png", ".svg", ".jpg", ".jpeg", ".gif", ".html", ".htm", ".csv",
                         ".md", ".rst", ".py", ".sh", ".yaml", ".yml", ".state", ".gz", ".xz", ".bz2", ".zst",
                         ".tar", ".zip", ".pdf", ".fz", ".db", ".sqlite"})
#: Larger files in a directory are not read (a test file fio left there, not an output).
MAX_OUTPUT_BYTES = 1 << 30
#: Files stored per transaction: a commit (an fsync) per file would cost more than reading a
#: typical output. An interrupted import keeps the batches committed; importing the same files
#: again stores the rest (the stored ones are skipped).
BATCH_FILES = 64
BATCH_BYTES = 32 << 20


@dataclass(frozen=True)
class Source:
    """What one command-line argument names: a file, or a directory and the candidate fio outputs
    below it (sorted), the number of fio log files in it, and of files passed over (job files,
    images, fio's histogram logs …). ``label`` is the run's own label, over the import's."""

    path: Path
    directory: bool
    outputs: tuple[Path, ...]
    logs: int = 0
    passed_over: int = 0
    label: str | None = None


#: How ``discover`` labels a run per file: by its name without the extension.
LABEL_FROM = ("name",)


def discover(paths: Sequence[Path], label_from: str | None = None) -> list[Source]:
    """The sources the paths name. A directory is walked recursively (hidden entries are passed
    over); a path that is not a directory is taken as a file (reading it may fail later). With
    ``label_from`` (``LABEL_FROM``), every file is a source of its own, labelled by its name without
    the extension (``directpath.txt`` is run ``directpath``); fio's logs then stay unattached."""
    sources = []
    for path in paths:
        if not path.is_dir():
            sources.append(Source(path, False, (path,), label=path.stem if label_from else None))
            continue
        outputs, logs, passed = [], 0, 0
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if fio_logs.log_name(name) is not None:
                    logs += 1
                elif name.startswith(".") or os.path.splitext(name)[1].lower() in NOT_OUTPUTS or "_clat_hist." in name:
                    passed += 1
                else:
                    outputs.append(Path(root, name))
        if label_from:
            sources += [Source(p, False, (p,), label=p.stem) for p in outputs]
        else:
            sources.append(Source(path, True, tuple(outputs), logs, passed))
    return sources


@dataclass(frozen=True)
class FileNote:
    """A file of a source that was not stored: ``skipped`` (already imported, in run ``run_id``, or
    the same content as the file ``same_as`` of this import), ``failed`` (``error`` says why) or
    ``not fio`` (a directory's file that shows no sign of fio)."""

    path: str
    status: str
    run_id: int | None = None
    same_as: str | None = None
    error: IolabError | None = None


@dataclass(frozen=True)
class Outcome:
    """What importing one source did. ``run_id`` is None when nothing new was stored.

    ``files`` counts the stored files, ``outputs`` the fio outputs in them (a pasted text may hold
    several); ``logs_attached``/``logs_skipped`` the log files stored and
    those not stored (in a directory: every other fio log in it; else those named by a result's
    options); ``log_notes`` has one line per result that did not get logs named like its own, and
    why.
    """

    path: str
    directory: bool
    run_id: int | None = None
    files: int = 0
    outputs: int = 0
    results: int = 0
    formats: tuple[str, ...] = ()
    fio_versions: tuple[str, ...] = ()
    series: int = 0
    logs_attached: int = 0
    logs_skipped: int = 0
    log_notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    notes: tuple[FileNote, ...] = ()
    passed_over: int = 0


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
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return data.decode(), data, data
    except UnicodeDecodeError:
        text = data.decode("latin-1")
        return text, data, text.encode()


@dataclass(frozen=True)
class _File:
    """One output file read and planned (nothing stored yet): its outputs (a pasted text may hold
    several, ``fio.parse_outputs``), the lines each spans, and notes on the parts of the text that
    are no output."""

    path: Path
    sha256: str
    size: int
    utf8: bytes
    reports: tuple[FioReport, ...]
    planned: tuple[PlannedResult, ...]
    lines: tuple[tuple[int, int], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def format(self) -> str:
        """The file's format, as stored with it: its outputs' formats (``normal``; ``json, normal``)."""
        return ", ".join(dict.fromkeys(r.source_format for r in self.reports))

    def warnings(self) -> list[str]:
        """Its outputs' warnings (``output 2 (lines 127–361): …`` in a text holding several), then its notes."""
        if len(self.reports) == 1:
            return [*self.reports[0].warnings, *self.notes]
        return [f"output {k} (lines {a}–{b}): {w}" for k, (r, (a, b)) in enumerate(zip(self.reports, self.lines,
                                                                                      strict=True), 1)
                for w in r.warnings] + list(self.notes)


def _parse(path: Path, in_directory: bool) -> _File | FileNote:
    shown = os.fsencode(path).decode("utf-8", "backslashreplace")
    if shown != str(path):  # bytes that are not UTF-8, which Python keeps as lone surrogates
        return FileNote(shown, "failed", error=UsageError(
            f"{shown}: the file's path is not UTF-8 text, which the results database stores",
            hint="rename it (or its directory) to import it"))
    try:
        if in_directory and path.stat().st_size > MAX_OUTPUT_BYTES:
            return FileNote(str(path), "not fio")
        text, data, utf8 = _read(path)
        if in_directory and not _looks_like_fio(text):
            return FileNote(str(path), "not fio")
        pasted = parse_outputs(text, str(path))
        several = len(pasted.outputs) > 1
        planned = tuple(p for k, o in enumerate(pasted.outputs, 1)
                        for p in plan_results(o.report, path.name, k if several else 0, str(path)))
    except IolabError as exc:
        return FileNote(str(path), "failed", error=exc)
    return _File(path, hashlib.sha256(data).hexdigest(), len(data), utf8, tuple(o.report for o in pasted.outputs),
                 planned, tuple((o.first_line, o.last_line) for o in pasted.outputs), pasted.notes)


def _looks_like_fio(text: str) -> bool:
    """Whether a directory's file is in one of fio's output formats (``fio.detect_format``), else it
    is passed over and counted: a README or notes.txt that mentions fio is not an output. A damaged
    output still in a format (a cut JSON document with its "fio version") is read, and its damage
    reported."""
    head = text[:65536]
    if not (looks_like_json(text) or "fio" in head or "groupid=" in head or ";fio-" in head):
        return False
    try:
        detect_format(clean_pasted(text))
    except ParseError:
        return False
    return True


def import_sources(store: Store | Callable[[], Store], sources: Sequence[Source], label: str | None = None,
                   tags: Mapping[str, str] | None = None,
                   progress: Callable[[Path], None] | None = None) -> Iterator[Outcome]:
    """Import the files and directories ``discover`` found (see the module docstring), one
    ``Outcome`` per source, in order.

    ``store`` may be a function that opens the database: it is called once the worker processes
    have started reading (``_ahead``), so that opening it, SQLAlchemy's import included (~0.25 s of
    CPU), overlaps their reading instead of coming before it. A database that cannot be opened then
    ends the import after the directories being read are read (``_ahead`` waits for its workers).

    ``progress`` is called with each file once it has been read. Failures do not stop the import:
    an ``Outcome`` lists its files that failed (``UsageError``: unreadable; ``ParseError``: not fio's
    or malformed, naming the line) and the ones skipped (already stored). Raises nothing else of
    its own; a store error (``StoreError``) ends the import, with the batches before it committed.
    """
    tags = dict(tags or {})
    batch: list[_Read] = []
    size = 0
    with _ahead(sources, label, tags) as prepared:
        opened = store() if callable(store) else store
        for i, source in enumerate(sources):
            read = prepared[i].result() if i in prepared else _read_source(source, label, tags, progress)
            if i in prepared and progress is not None:
                for path in source.outputs:
                    progress(path)
            batch.append(read)
            size += sum(f.size for f in read.files)
            if source.directory or len(batch) >= BATCH_FILES or size >= BATCH_BYTES:
                yield from _store(opened, batch, label, tags)
                batch, size = [], 0
        yield from _store(opened, batch, label, tags)


@dataclass(frozen=True)
class _Read:
    """A source's files read, and for a directory the run they make if none is stored yet."""

    source: Source
    files: list[_File]
    notes: list[FileNote]
    made: tuple[FinishedRun, Outcome] | None = None


def _read_source(source: Source, label: str | None, tags: dict[str, str],
                 progress: Callable[[Path], None] | None = None, ahead: bool = False) -> _Read:
    """A source's files read; ``ahead`` (in a worker, for a directory): with the run they make
    before the store says which files are new (mostly all are: else ``_store`` makes it again)."""
    files: list[_File] = []
    notes: list[FileNote] = []
    for path in source.outputs:
        parsed = _parse(path, source.directory)
        if isinstance(parsed, _File):
            files.append(parsed)
        else:
            notes.append(parsed)
        if progress is not None:
            progress(path)
    return _Read(source, files, notes, _run(source, files, label, tags) if ahead and files else None)


@contextmanager
def _ahead(sources: Sequence[Source], label: str | None,
           tags: dict[str, str]) -> Iterator[dict[int, Future[_Read]]]:
    """The directories among ``sources`` (by index) read and their runs made in worker processes,
    one per CPU, while this process stores the ones before: reading and attributing logs is
    CPU-bound Python, which threads would only take turns at. Only for two directories or more on
    more than one CPU. The workers are forked (they start with everything imported) and hand back
    plain dataclasses; they touch neither the database nor the terminal."""
    directories = [i for i, s in enumerate(sources) if s.directory]
    cpus = len(os.sched_getaffinity(0))
    if len(directories) < 2 or cpus < 2:
        yield {}
        return
    # Every worker reads logs with numpy: imported here once, before the fork, each starts with it
    # (imported in each worker, it cost a second import, 0.15-0.25 s of CPU on a 2-CPU machine).
    import numpy  # noqa: F401
    # The workers run without the garbage collector: each lives for this import, and what it makes is
    # handed back whole or freed by reference counts; collections only walked it (0.03-0.07 s of a
    # bench-fio directory's 0.4 s of CPU).
    pool = ProcessPoolExecutor(min(cpus, len(directories)), mp_context=multiprocessing.get_context("fork"),
                               initializer=gc.disable)
    try:
        yield {i: pool.submit(_read_source, sources[i], label, tags, ahead=True) for i in directories}
    finally:
        pool.shutdown(cancel_futures=True)  # a store error ends the import: the rest is not read


def _store(store: Store, batch: Sequence[_Read], label: str | None, tags: dict[str, str]) -> Iterator[Outcome]:
    """Skip what is stored already (or twice in the batch), then store each source's new files as
    its run, the whole batch in one transaction."""
    stored = store.find_sources([f.sha256 for read in batch for f in read.files])
    first: dict[str, str] = {}
    made: list[tuple[Source, list[FileNote], tuple[FinishedRun, Outcome] | None]] = []
    for read in batch:
        new, notes = [], list(read.notes)
        for f in read.files:
            if f.sha256 in stored:
                notes.append(FileNote(str(f.path), "skipped", stored[f.sha256]))
            elif f.sha256 in first:
                notes.append(FileNote(str(f.path), "skipped", same_as=first[f.sha256]))
            else:
                first[f.sha256] = str(f.path)
                new.append(f)
        run = read.made if read.made is not None and len(new) == len(read.files) else \
            _run(read.source, new, label, tags) if new else None
        made.append((read.source, notes, run))
    ids = iter(store.add_finished_runs([run for _, _, done in made if done is not None for run in done[:1]]))
    for source, notes, done in made:
        outcome = done[1] if done is not None else Outcome(str(source.path), source.directory)
        yield replace(outcome, run_id=next(ids) if done is not None else None, notes=tuple(notes),
                      passed_over=source.passed_over + sum(n.status == "not fio" for n in notes))


def _run(source: Source, files: Sequence[_File], label: str | None,
         tags: dict[str, str]) -> tuple[FinishedRun, Outcome]:
    """The run a source's new files make, and what to say about it."""
    planned = [(f, p) for f in files for p in f.planned]
    placed, placing = assemble([p for _, p in planned])
    requests = [attribution.request(_name(f, p, place.workload), f.path, p.report, p.job_text, _shared_hosts(f))
                for (f, p), place in zip(planned, placed, strict=True)]
    logs = attribution.attach(requests)
    encoded = iter(EncodedSeries.of_many([s for of_result in logs.series for s in of_result]))
    results, seen = [], set()
    for seq, ((f, p), place) in enumerate(zip(planned, placed, strict=True)):
        extra: dict[str, Any] = {
            "unknown_options": list(p.unknown_options),
            "source": {"path": os.path.abspath(f.path), "sha256": f.sha256, "format": p.report.source_format}}
        if p.output:  # one of several outputs in its text: which, and where
            extra["source"].update(output=p.output, lines=list(f.lines[p.output - 1]))
        if logs.files[seq]:
            extra["log_files"] = [str(path) for path in logs.files[seq]]
        if logs.notes[seq]:
            extra["logs_not_attached"] = logs.notes[seq]
        results.append(FinishedResult(
            seq=seq, target=place.target, target_path=p.target_path, workload=place.workload, repeat=place.repeat,
            job_text=p.job_text, job_hash=jobfile.params_hash(p.params), params=p.params, status=p.status,
            report=p.report, raw_gz=compress_raw(f.utf8) if f.path not in seen else None, error=p.error,
            ended_at=datetime.fromtimestamp(p.report.timestamp_ms / 1000, UTC) if p.report.timestamp_ms else None,
            extra=extra, series=tuple(next(encoded) for _ in logs.series[seq])))
        seen.add(f.path)
    warnings = (*placing, *(f"{f.path.relative_to(source.path)}: {w}" if source.directory else w
                            for f in files for w in f.warnings()))
    versions = tuple(dict.fromkeys(r.fio_version for f in files for r in f.reports if r.fio_version))
    formats = tuple(dict.fromkeys(r.source_format for f in files for r in f.reports))
    where = Path(os.path.abspath(source.path))  # not resolve(): a system call per path component, per file
    described = {"format": "directory", "files": str(len(files))} if source.directory else \
        {"format": formats[0], "sha256": files[0].sha256}
    run = FinishedRun(
        suite_name=where.name or str(where), origin="imported",
        source={"path": str(where), "name": where.name, **described, "size_bytes": str(sum(f.size for f in files))},
        files=tuple(ImportedFile(f.sha256, os.path.abspath(f.path), f.format, f.size) for f in files),
        results=tuple(results), label=source.label or label, tags=tags, fio_version=", ".join(versions) or None,
        warnings=warnings)
    outcome = Outcome(
        str(source.path), source.directory, files=len(files), outputs=sum(len(f.reports) for f in files),
        results=len(results), formats=formats,
        fio_versions=versions, series=sum(len(s) for s in logs.series), logs_attached=logs.attached,
        logs_skipped=source.logs - logs.attached if source.directory else logs.skipped,
        log_notes=tuple(n for n in logs.notes if n), warnings=warnings)
    return run, outcome


def _name(f: _File, p: PlannedResult, workload: str) -> str:
    """A result as the import's notes name it: its file, and its workload when the file's job name
    does not tell it (a sweep's) or the file holds several results."""
    return f"{f.path.name} ({workload})" if workload != p.workload or len(f.planned) > 1 else f.path.name


def _shared_hosts(f: _File) -> frozenset[str]:
    """Hosts with more than one fio server in the file (ports differ, log names do not)."""
    hosts = [next(iter({j.hostname for j in p.report.jobs}), None) for p in f.planned]
    return frozenset(h for h in hosts if h is not None and hosts.count(h) > 1)

