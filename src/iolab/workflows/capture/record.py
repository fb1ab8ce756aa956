"""A capture as a stored run: origin ``capture``, one result holding the device facts, the trace
(table ``traces``, compact: ``trace.encode``) and the fingerprint (``extra["fingerprint"]``).

The result also carries a fio-shaped report of the trace (``capture_report``): per size class
(``replay.classes``) and direction, the requests, bytes, IOPS and the device's service time as
``clat``, and the flushes as the ``sync`` direction of the class the replay syncs in, so ``iolab
compare CAPTURE REPLAY`` pairs a replay's classes (its fio ``sync`` results with the flushes) with
the original's and ``iolab show`` lists them like any run's results. Its job text is the replay job for the traced
device, so the capture and its replays have the same workload options.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import UsageError
from ...facts import host, targets
from ...fio import jobfile
from ...model import DirectionStats, FioReport, JobResult, Latency, Run, TargetFacts, to_jsonable
from ...store.database import Store
from . import deal, replay, tracefs
from .fingerprint import Tally, active_ns, fingerprint
from .stream import Spooled
from .summary import ORIGIN
from .summary import stored_fingerprint as stored_fingerprint  # where it was: `record.stored_fingerprint`
from .trace import CHUNK_ROWS, FLUSH, OP_NAMES, READ, WRITE, Requests, Trace, decode_chunks, encode_chunks

WORKLOAD = "capture"

PERCENTILES = (1.0, 5.0, 10.0, 50.0, 90.0, 95.0, 99.0, 99.9)


@dataclass(frozen=True)
class Capture:
    """What ``iolab capture`` recorded: the trace (in memory, or in its spool until ``save`` stored
    it), where, and how (``how`` says the capture path).

    ``returncode`` is the command's exit status (None without a command; negative: the signal that
    ended it); ``interrupted`` names the signal (``SIGINT``, ``SIGTERM``) that ended the capture
    early, None when it ran its course."""

    trace: Requests
    device: TargetFacts
    started_at: datetime
    how: str
    command: Sequence[str] = ()
    returncode: int | None = None
    interrupted: str | None = None

    def close(self) -> None:
        """Remove the trace's spool, if it has one (``save`` does, once the trace is stored)."""
        if isinstance(self.trace, Spooled):
            self.trace.close()

    @property
    def status(self) -> str:
        """The stored run's status: ``interrupted``, ``failed`` (the command exited non-zero) or
        ``complete``. The trace is stored whole in every case."""
        if self.interrupted:
            return "interrupted"
        return "failed" if self.returncode else "complete"

    @property
    def warnings(self) -> list[str]:
        """What a reader of the stored run must know: dropped events, a failed command, an interruption."""
        out = []
        if self.trace.lost_events:
            out.append(f"the kernel dropped {self.trace.lost_events} trace events (ring buffer overrun): the trace "
                       "is incomplete")
        if self.interrupted:  # the command, if it was still running, was stopped by iolab: not its failure
            out.append(f"the capture was interrupted ({self.interrupted}) after {self.trace.duration_ns / 1e9:.2f} s: "
                       "the trace holds the requests until then")
        elif self.returncode:
            out.append(f"`{' '.join(self.command)}` exited with status {self.returncode}: the trace holds the I/O "
                       "of a failed run of it")
        return out


def _latency(tally: Tally) -> Latency | None:
    """fio's latency summary of the service times (ns) in ``tally``; None when it is empty."""
    if tally.total == 0:
        return None
    mean, std = tally.mean_std()
    return Latency(min_ns=float(tally.minimum), max_ns=float(tally.maximum), mean_ns=mean, stddev_ns=std,
                   samples=tally.total, percentiles_ns={f"{p:g}": tally.percentile(p) for p in PERCENTILES})


def capture_report(requests: Requests, chunk: int = CHUNK_ROWS) -> FioReport:
    """The trace as fio would report its replay: one job per size class, read/write directions with
    requests, bytes, IOPS and bandwidth over the active span (``fingerprint.active_ns``: from the
    first issue to the last completion, as a replay's fio runtime spans its requests) and the
    device's service time (complete - issue) as ``clat`` and ``lat``. The flushes are a ``sync``
    direction of the class the replay syncs in (``replay.classes``), as fio reports a replay's
    ``sync`` actions: their count, their rate over the active span (fio gives none for syncs;
    ``fio.merge.with_sync_rates`` gives a replay's the same way) and their service time as ``lat``
    only (fio times a sync call as a whole). Pure. One pass over the requests, ``chunk`` at a time
    (``Requests.chunks``): each class's service times are tallied (``fingerprint.Tally``), the
    flushes' apart until the pass has chosen their class (``deal.ClassRule``), so memory is a
    chunk's and the tallies' distinct values, however long the trace."""
    rule = deal.ClassRule()
    tallies: dict[int, _Directions] = {}
    flushes = _Directions()
    active = 1
    for part in requests.chunks(chunk):
        active = max(active, active_ns(part))
        klass = rule.of(part)
        for k in np.flatnonzero(np.bincount(klass, minlength=256)[:deal.FLUSH_ROW]).tolist():
            tallies.setdefault(k, _Directions()).add(part, klass == k)
        flushes.add(part, klass == deal.FLUSH_ROW)
    flush_class = rule.flush_class()
    duration_ms = max(1, round(active / 1e6))
    jobs = []
    for index, (k, tally) in enumerate(sorted(tallies.items())):
        directions = tally.directions(duration_ms)
        if k == flush_class:
            directions.update(flushes.directions(duration_ms))
        jobs.append(JobResult(name=deal.class_name(k), index=index, directions=directions,
                              job_runtime_ms=duration_ms))
    return FioReport(source_format="capture", jobs=tuple(jobs))


class _Directions:
    """Requests, bytes and a service-time tally per kind (read, write, flush) of some requests,
    added a chunk at a time, and the fio-shaped directions they make (``capture_report``)."""

    KINDS = (READ, WRITE, FLUSH)

    def __init__(self) -> None:
        self.ios = dict.fromkeys(self.KINDS, 0)
        self.nbytes = dict.fromkeys(self.KINDS, 0)
        self.service = {op: Tally() for op in self.KINDS}

    def add(self, chunk: Trace, rows: np.ndarray) -> None:
        """Count the requests of ``chunk`` where ``rows`` holds."""
        ops, done = chunk.op[rows], chunk.complete_ns[rows]
        issued, nbytes = chunk.issue_ns[rows], chunk.nbytes[rows]
        for op in self.KINDS:
            mine = ops == op
            self.ios[op] += int(np.count_nonzero(mine))
            self.nbytes[op] += int(nbytes[mine].sum())
            mine &= done >= 0
            self.service[op].add(done[mine] - issued[mine])

    def directions(self, duration_ms: int) -> dict[str, DirectionStats]:
        """``read``, ``write`` and ``sync`` (the flushes), for those with requests."""
        out = {}
        for op in (READ, WRITE):
            if self.ios[op]:
                latency = _latency(self.service[op])
                out[OP_NAMES[op]] = DirectionStats(
                    direction=OP_NAMES[op], total_ios=self.ios[op], io_bytes=self.nbytes[op], runtime_ms=duration_ms,
                    iops=1000.0 * self.ios[op] / duration_ms, bw_bytes_s=1000.0 * self.nbytes[op] / duration_ms,
                    clat=latency, lat=latency)
        if self.ios[FLUSH]:
            out["sync"] = DirectionStats(direction="sync", total_ios=self.ios[FLUSH], runtime_ms=duration_ms,
                                         iops=1000.0 * self.ios[FLUSH] / duration_ms,
                                         lat=_latency(self.service[FLUSH]))
        return out


def save(store: Store, capture: Capture, label: str | None = None, tags: Mapping[str, str] | None = None) -> int:
    """Store ``capture`` as a run of origin ``capture`` with the status ``capture.status``
    (``complete``, ``failed``: the command exited non-zero, ``interrupted``), the trace kept in
    every case; returns the run id. Reads the trace a chunk at a time (``trace.Requests``): the
    fingerprint, the fio-shaped report, the replay's job names and the stored chunks each in a pass,
    so a capture of any length is stored in bounded memory; a spooled trace's spool is removed."""
    try:
        return _save(store, capture, label, tags)
    finally:
        capture.close()


def _save(store: Store, capture: Capture, label: str | None, tags: Mapping[str, str] | None) -> int:
    trace, facts = capture.trace, capture.device
    fp = fingerprint(trace)
    machine = host.host_facts(host.fio_version())
    warnings = capture.warnings
    options = {"device": facts.path, "how": capture.how, "command": list(capture.command),
               "returncode": capture.returncode, "interrupted": capture.interrupted}
    run_id = store.create_run(suite_name=f"capture {facts.path}", suite_text="", origin=ORIGIN, label=label,
                              tags=tags, host=machine, fio_version=machine.fio_version, warnings=warnings,
                              options=options, status="running")
    text = replay_job_for(trace, capture.device.path, replay_dir(store, run_id))
    params = jobfile.workload_params(jobfile.parse(text)) if not fp.empty else {}
    pending = replay_pending(facts, text, params)
    (result_id,) = store.add_pending(run_id, [pending])
    ended = capture.started_at + timedelta(microseconds=trace.duration_ns // 1000)
    store.save_result(result_id, status="ok", command=" ".join(capture.command) or None,
                      started_at=capture.started_at, ended_at=ended, report=capture_report(trace),
                      target_facts=facts, extra={"fingerprint": to_jsonable(fp), "capture": options})
    store.save_trace(result_id, len(trace), chunks=encode_chunks(trace), meta={
        "comms": {str(k): v for k, v in trace.comms.items()}, "lost_events": trace.lost_events,
        "duration_ns": trace.duration_ns, "left_out": dict(trace.left_out), "kthreads": sorted(trace.kthreads)})
    store.finish_run(run_id, capture.status)
    return run_id


def replay_dir(store: Store, run_id: int, processes: Sequence[str] = ()) -> Path:
    """Where a capture's replay files live: ``$XDG_CACHE_HOME/iolab/replay/<db>-capture-<id>`` (the
    same for every replay of a capture, so their job options are equal), with ``-p-<hash>`` for a
    replay of some processes only (``--process``: other iologs, so other job options)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    db = hashlib.sha256(store.display_url.encode()).hexdigest()[:8]
    only = f"-p-{hashlib.sha256(' '.join(sorted(processes)).encode()).hexdigest()[:8]}" if processes else ""
    return cache / "iolab" / "replay" / f"{db}-capture-{run_id}{only}"


def replay_pending(facts: TargetFacts, text: str, params: Mapping[str, str]) -> Any:
    from ...store.records import PendingResult
    name = facts.device.name if facts.device else facts.path
    return PendingResult(seq=0, target=name, target_path=facts.path, workload=WORKLOAD, repeat=0, job_text=text,
                         job_hash=jobfile.params_hash(params), params=params)


def replay_job_for(requests: Requests, device: str, directory: Path) -> str:
    """The default replay job (``replay.job_text``) with the iolog paths replays use, for the
    capture's own record: so a capture and its replays have equal job options. Two passes over the
    requests a chunk at a time (``replay.replay_job_names``)."""
    names = {name: directory / replay.iolog_name(name) for name in replay.replay_job_names(requests)}
    return replay.job_text(names, replay.ReplaySettings(), f"capture of {device}")


def is_capture(run: Run) -> bool:
    return run.info.origin == ORIGIN


def capture_result_id(run: Run) -> int:
    """The id of the capture's result. Raises UsageError when ``run`` is not a capture."""
    if not is_capture(run) or not run.results:
        raise UsageError(f"run {run.info.id} is not a capture (origin {run.info.origin})",
                         hint="list captures with: iolab runs (origin capture)")
    return run.results[0].id


def load_trace(store: Store, run: Run) -> Trace:
    """The stored trace of a capture run, in memory. Raises UsageError when ``run`` is not a capture."""
    stored = store.trace_blobs(capture_result_id(run))
    if stored is None:
        raise UsageError(f"run {run.info.id} has no stored trace")
    meta, blobs = stored
    trace = decode_chunks(blobs, {int(k): v for k, v in meta.get("comms", {}).items()}, meta.get("lost_events", 0),
                          meta.get("duration_ns", 0))
    return dataclasses.replace(trace, left_out=meta.get("left_out", {}), kthreads=frozenset(meta.get("kthreads", ())))


HOW = ("tracefs block tracepoints (block:block_rq_issue, block:block_rq_complete) in a private ftrace instance, "
       "filtered by dev_t")


def capture(device: str, duration_s: float | None = None, command: Sequence[str] = ()) -> Capture:
    """Record ``device``'s block I/O for ``duration_s`` seconds, or while ``command`` runs (then
    ``returncode`` is its exit status and the trace's ``duration_ns`` its wall time). Only reads.

    SIGINT (Ctrl-C) and SIGTERM, when called from the main thread, end the capture early instead of
    raising: the events are disabled, the ring buffer drained, the command (if still running)
    terminated, and the Capture returned with ``interrupted`` naming the signal; the caller stores
    it and exits as interrupted. Raises UsageError (not a block device, neither or both of duration
    and command), ``tracefs.CaptureError``."""
    if (duration_s is None) == (not command):
        raise UsageError("capture for a --duration, or while a command runs (-- COMMAND …), not both or neither")
    ref = tracefs.device_ref(device)
    facts = targets.inspect(device)
    started = datetime.now(UTC)
    runner = tracefs.Command(tuple(command)) if command else None
    until = runner if runner is not None else tracefs.for_duration(duration_s or 0.0)
    with _stopped_by_signals() as stopped:
        try:
            recording = tracefs.record(ref, lambda: bool(stopped) or until(),
                                       wait=runner.wait if runner is not None else time.sleep)
        finally:
            if runner is not None:
                runner.stop()
    trace = recording.trace
    if runner is not None and runner.runtime_ns is not None and not stopped:
        trace = dataclasses.replace(trace, duration_ns=max(runner.runtime_ns, active_ns(trace)))
    return Capture(trace=trace, device=facts, started_at=started, how=f"{HOW} ({ref.filter}), {recording.how}",
                   command=tuple(command), returncode=runner.returncode if runner else None,
                   interrupted=stopped[0] if stopped else None)


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[list[str]]:
    """SIGINT and SIGTERM append their name to the yielded list instead of raising (main thread
    only: elsewhere the list stays empty); the previous handlers are restored afterwards."""
    stopped: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield stopped
        return

    def note(signum: int, _frame: object) -> None:
        stopped.append(signal.Signals(signum).name)
    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stopped
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)




class Background:
    """A capture in a background thread, for a workload the main thread runs (``run.execute`` installs
    signal handlers, so it must stay in the main thread): ``with Background(device) as bg: …`` then
    ``bg.result()``."""

    def __init__(self, device: str) -> None:
        import threading
        self.device = device
        self._ref = tracefs.device_ref(device)
        self._facts = targets.inspect(device)
        self._stop = threading.Event()
        self._out: list[tracefs.Recording] = []
        self._error: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = datetime.now(UTC)

    def _run(self) -> None:
        try:
            self._out.append(tracefs.record(self._ref, self._stop.is_set))
        except BaseException as exc:  # handed to the main thread by result()
            self._error.append(exc)

    def __enter__(self) -> Background:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def result(self) -> Capture:
        """The capture, once the ``with`` block ended; re-raises what the capture raised."""
        if self._error:
            raise self._error[0]
        return Capture(trace=self._out[0].trace, device=self._facts, started_at=self._started,
                       how=f"{HOW} ({self._ref.filter}), {self._out[0].how}")
