"""What goes into the results database and what comes out when it cannot be read: planned and
finished results, imported files and runs, and the error of a stored run that does not load
(reading a row back: ``store.rows``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..errors import StoreError, UsageError
from ..model import FioReport, TimeSeries, to_json_text
from .codecs import JSONText, compress_raw, encode_series, encode_series_many


@dataclass(frozen=True)
class PendingResult:
    """A planned fio invocation, stored before it runs so that ``--resume`` can finish it.
    ``planned`` is what the plan says about it beyond the job (its warm-up pass, a crash test's
    phase), stored in the result's ``extra`` (``run.job.PLANNED`` lists the keys)."""

    seq: int
    target: str
    target_path: str | None
    workload: str
    repeat: int
    job_text: str
    job_hash: str
    params: Mapping[str, str]
    planned: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FinishedResult(PendingResult):
    """A result complete when stored, such as one read from an imported fio output.

    ``raw_text`` is the fio output as read (stored zlib-compressed), or ``raw_gz`` the same already
    compressed by ``compress_raw`` (from the bytes read, without encoding the text again);
    ``ended_at`` is when fio printed the report, when the output says so; ``series`` are fio's logs found with it
    (``EncodedSeries`` when they were encoded ahead, in the process that read them).
    """

    status: str = "ok"
    report: FioReport | None = None
    raw_text: str | None = None
    error: str | None = None
    ended_at: datetime | None = None
    extra: Mapping[str, Any] | None = None
    series: Sequence[TimeSeries | EncodedSeries] = ()
    raw_gz: bytes | None = None


@dataclass(frozen=True)
class EncodedSeries:
    """A ``TimeSeries`` as the ``time_series`` table holds it: its names and ``encode_series`` of its
    samples. ``iolab import`` encodes in the worker process that read the logs (``workflows.importer._ahead``)."""

    job: str
    job_index: int
    direction: str
    metric: str
    interval_ms: int | None
    hostname: str | None
    samples: bytes

    @classmethod
    def of(cls, series: TimeSeries) -> EncodedSeries:
        return cls(series.job, series.job_index, series.direction, series.metric, series.interval_ms,
                   series.hostname, encode_series(series.t_ms, series.values))

    @classmethod
    def of_many(cls, series: Sequence[TimeSeries]) -> list[EncodedSeries]:
        """``of`` each, encoded together (``encode_series_many``: half the cost for thousands)."""
        blobs = encode_series_many([(s.t_ms, s.values) for s in series])
        return [cls(s.job, s.job_index, s.direction, s.metric, s.interval_ms, s.hostname, blob)
                for s, blob in zip(series, blobs, strict=True)]


@dataclass(frozen=True)
class ImportedFile:
    """A fio output file an import stored: its sha256 (the same file is stored only once), where it
    was read, its format (``json``, ``normal`` …) and size in bytes."""

    sha256: str
    path: str
    format: str | None = None
    size_bytes: int | None = None


@dataclass(frozen=True)
class FinishedRun:
    """A run complete when stored (imported fio output: one file, or a directory of them) and its
    results; ``files`` are the outputs it was read from."""

    suite_name: str
    origin: str
    source: Mapping[str, str]
    files: tuple[ImportedFile, ...]
    results: tuple[FinishedResult, ...]
    label: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    fio_version: str | None = None
    warnings: tuple[str, ...] = ()


class UnreadableRun(StoreError):
    """A stored run that does not load: written by an older or newer iolab, changed by hand, or holding a
    value that breaks a rule of ``fio.validate``. ``reason`` says what and where; the other runs are
    not affected."""

    def __init__(self, run_id: int, reason: str) -> None:
        super().__init__(f"run {run_id} cannot be read: {reason}",
                         hint="the other runs are not affected; if this iolab stored it, please report it with "
                              f"the output of: iolab --debug show {run_id}")
        self.run_id, self.reason = run_id, reason


class DuplicateSource(UsageError):
    """A fio output file (same sha256) is already stored, in run ``run_id``."""

    def __init__(self, message: str, run_id: int, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.run_id = run_id


def series_rows(result_id: int, series: Sequence[TimeSeries | EncodedSeries]) -> list[dict[str, Any]]:
    """The ``time_series`` rows of ``series``, of result ``result_id``."""
    return [{
        "result_id": result_id, "job": s.job, "job_index": s.job_index, "hostname": s.hostname,
        "direction": s.direction, "metric": s.metric, "interval_ms": s.interval_ms,
        "samples": s.samples if isinstance(s, EncodedSeries) else encode_series(s.t_ms, s.values),
    } for s in series]


def finished_row(run_id: int, r: FinishedResult) -> dict[str, Any]:
    """The ``results`` row of a finished result of run ``run_id``."""
    return {
        "run_id": run_id, "seq": r.seq, "target": r.target, "target_path": r.target_path, "workload": r.workload,
        "repeat": r.repeat, "status": r.status, "job_text": r.job_text, "job_hash": r.job_hash,
        "params": dict(r.params), "command": None, "started_at": None, "ended_at": r.ended_at, "error": r.error,
        "report": JSONText(to_json_text(r.report)) if r.report else None,
        "raw_gz": r.raw_gz if r.raw_gz is not None else compress_raw(r.raw_text.encode()) if r.raw_text else None,
        "target_facts": None, "extra": dict(r.extra or {}),
    }
