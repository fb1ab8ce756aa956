"""The fio side of a crash test's phases: what one fio invocation needs around it, and what it left.

A crash test (``workflows.crashtest``) runs each cut as stored results of one run, through
``run.execute`` like any job. What makes a phase special is stored with its pending result under
``extra["crash"]`` (``Phase``) and applied here, around fio, by ``CrashPhase``, which wraps the job's
runner (``run.runners``: fio here, or fio's client driving servers):

* **write**: fio's trigger options go on its command line (``--trigger-timeout``/``--trigger-file``,
  ``--trigger``, ``--trigger-remote``). iolab adds ``touch <marker>`` before the local ``--trigger``
  command (run once the verify state is saved, on this machine) so that it knows the cut happened:
  a job that finishes writing before the trigger fires saves its state too (``backend.c``). The
  verify state files fio saved (``fio.verify``) are kept, by host: locally from ``--aux-path`` (the
  job's work directory), through fio's client from the files it names after each server's address.
  A host lost right after its state arrived is what a cut looks like, so then the phase is ``ok``;
  fio's own words are kept in the record.
* **verify**: the kept states are put back where fio looks for them, and fio's verify failures are
  read from its messages (stderr locally, the client's output for servers). fio ends a job that
  found bad blocks with errno 84 (EILSEQ); that is the verify phase doing its work, so the phase is
  ``ok`` when every failing job failed that way and the failures were read.
"""

from __future__ import annotations

import base64
import errno
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ParseError
from ..fio import verify
from ..model import FioReport
from ..runner import local as local_runner
from ..runner.outcome import Outcome

if TYPE_CHECKING:
    from .runners import JobRunner, Tell

#: The phases of a cut, in order.
WIPE, WRITE, VERIFY = "wipe", "write", "verify"
#: The file the local trigger command touches in the job's work directory when fio fires it.
MARKER = "iolab-cut-fired"
#: At most this many failures are stored per verify phase (their count is always stored).
MAX_FAILURES = 100_000


@dataclass(frozen=True)
class Phase:
    """A crash test's fio invocation: ``cut`` (1-based), ``phase`` (``WIPE``, ``WRITE``, ``VERIFY``),
    the fio options of the cut for a write phase (``trigger_args``: the timeout or file option and
    ``--trigger-remote``; ``trigger`` the user's local command, if any), and for a verify phase
    the states to load, by host label (``local`` for this machine) then ``<job>-<index>``."""

    cut: int
    phase: str
    trigger_args: tuple[str, ...] = ()
    trigger: str | None = None
    states: Mapping[str, Mapping[str, bytes]] = field(default_factory=dict)

    def extra(self) -> dict[str, Any]:
        """The pending result's ``extra["crash"]`` (``from_extra`` reads it back)."""
        return {"cut": self.cut, "phase": self.phase, "trigger_args": list(self.trigger_args),
                "trigger": self.trigger, "states": encode_states(self.states)}


def from_extra(extra: Mapping[str, Any] | None) -> Phase | None:
    """The phase a stored result runs, or None for an ordinary job."""
    stored = (extra or {}).get("crash")
    if not stored or stored.get("phase") not in (WIPE, WRITE, VERIFY):
        return None
    return Phase(stored["cut"], stored["phase"], tuple(stored.get("trigger_args") or ()), stored.get("trigger"),
                 decode_states(stored.get("states") or {}))


def encode_states(states: Mapping[str, Mapping[str, bytes]]) -> dict[str, dict[str, str]]:
    return {host: {k: base64.b64encode(v).decode() for k, v in files.items()} for host, files in states.items()}


def decode_states(stored: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, bytes]]:
    return {host: {k: base64.b64decode(v) for k, v in files.items()} for host, files in stored.items()}


def fio_args(phase: Phase | None, workdir: Path, local: bool) -> tuple[str, ...]:
    """fio's command-line options for the phase: trigger options for a write phase, with the marker
    before the local trigger command; ``--aux-path`` (where a local fio saves and loads states)."""
    if phase is None or phase.phase == WIPE:
        return ()
    args: tuple[str, ...] = (f"--aux-path={workdir}",) if local else ()
    if phase.phase == WRITE:
        marker = f"touch {shlex.quote(str(workdir / MARKER))}"
        command = f"{marker} && {phase.trigger}" if phase.trigger else marker
        args += (*phase.trigger_args, f"--trigger={command}")
    return args


def place_states(phase: Phase | None, workdir: Path, prefixes: Mapping[str, str]) -> None:
    """Write a verify phase's states into ``workdir`` as fio will look for them: ``prefixes`` maps a
    host label to the prefix fio uses for it (``local``, or the address fio's client connects to)."""
    if phase is None or phase.phase != VERIFY:
        return
    for host, files in phase.states.items():
        if host in prefixes:
            for suffix, data in files.items():
                job, _, index = suffix.rpartition("-")
                with local_runner.fresh(workdir / verify.state_file_name(prefixes[host], job, int(index)), "wb") as f:
                    f.write(data)  # a new file: a link left in the work directory is replaced, not followed


def collect_states(workdir: Path, prefixes: Mapping[str, str]) -> dict[str, dict[str, bytes]]:
    """The state files fio left in ``workdir``, by host label (``prefixes`` as for ``place_states``)
    then ``<job>-<index>``."""
    out: dict[str, dict[str, bytes]] = {}
    for host, prefix in prefixes.items():
        for path in sorted(workdir.glob(f"{prefix}-*-verify.state")):
            found = verify.split_state_file_name(path.name, prefix)
            if found is not None:
                out.setdefault(host, {})[f"{found[0]}-{found[1]}"] = path.read_bytes()
    return out


@dataclass(frozen=True)
class Ended:
    """How a phase's fio invocation ended, as the runner saw it: status, error, report, fio's
    messages, the states left and whether the marker was touched."""

    status: str
    error: str | None
    report: FioReport | None
    messages: str
    states: Mapping[str, Mapping[str, bytes]]
    fired: bool
    hosts: Sequence[str]


@dataclass(frozen=True)
class Judged:
    """What is stored for a phase: status, error, fio's report and the record (``extra["crash"]``)."""

    status: str
    error: str | None
    report: FioReport | None
    record: Mapping[str, Any]


def judge(phase: Phase, ended: Ended) -> Judged:
    """The result's status, error and report, and the record stored under ``extra["crash"]`` (see
    the module docstring). A verify phase's report leaves out the writes fio's verify-only mode
    lists without doing them (FIO_NOTES §5.3: the whole planned region, runtime 0)."""
    record: dict[str, Any] = {"cut": phase.cut, "phase": phase.phase, "trigger_args": list(phase.trigger_args),
                              "trigger": phase.trigger, "fio_status": ended.status, "fio_error": ended.error}
    status, error = ended.status, ended.error
    if phase.phase == WRITE:
        record["fired"] = ended.fired
        record["states"] = encode_states(ended.states)
        record["state_summary"] = summarize_states(ended.states)
        missing = [h for h in ended.hosts if h not in ended.states]
        if ended.fired and missing:
            status, error = "failed", f"the cut fired but no verify state came back from {', '.join(missing)}" + \
                (f"; fio said: {ended.error}" if ended.error else "")
        elif ended.fired:
            status, error = "ok", None
    elif phase.phase == VERIFY:
        record["states"] = encode_states(phase.states)
        failures = verify.parse_failures(ended.messages)
        record["failures"] = [{"offset": f.offset, "length": f.length, "reason": f.reason, "server": f.server}
                              for f in failures[:MAX_FAILURES]]
        record["failure_count"] = len(failures)
        record["errors_by_job"] = _job_errors(ended.report)
        errors = {e for e in record["errors_by_job"].values() if e}
        if ended.status == "failed" and failures and errors == {errno.EILSEQ}:
            status, error = "ok", None
        return Judged(status, error, _without_phantom_writes(ended.report), record)
    return Judged(status, error, ended.report, record)


def _without_phantom_writes(report: FioReport | None) -> FioReport | None:
    """A verify-only report without its ``write`` directions of runtime 0 (see ``judge``)."""
    if report is None:
        return None
    jobs = tuple(replace(j, directions={k: d for k, d in j.directions.items()
                                        if not (k == "write" and not d.runtime_ms)}) for j in report.jobs)
    if jobs == report.jobs:
        return report
    note = "the verify-only phase's planned writes (fio reports the region with runtime 0) are left out"
    return replace(report, jobs=jobs, warnings=(*report.warnings, note))


def _job_errors(report: FioReport | None) -> dict[str, int]:
    """``host/job -> fio's errno`` of every job in the report."""
    return {f"{j.hostname + '/' if j.hostname else ''}{j.name}": j.error for j in report.jobs} if report else {}


def summarize_states(states: Mapping[str, Mapping[str, bytes]]) -> dict[str, dict[str, Any]]:
    """What each state says (``fio.verify.VerifyState``), by host and ``<job>-<index>``; a state that
    does not parse gives its problem instead."""
    out: dict[str, dict[str, Any]] = {}
    for host, files in states.items():
        for suffix, data in files.items():
            try:
                s = verify.parse_state(data, f"{host} {suffix}")
                entry: dict[str, Any] = {"name": s.name, "index": s.index, "numberio": s.numberio, "depth": s.depth,
                                         "nofiles": s.nofiles, "completions": [o for _, o in s.completions]}
            except ParseError as exc:
                entry = {"problem": str(exc)}
            out.setdefault(host, {})[suffix] = entry
    return out


class CrashPhase:
    """A crash test's phase around a job's runner (``run.runners.JobRunner``), itself a runner: its fio
    options on fio's command line, the states it verifies put where fio looks for them before fio
    starts, and fio's outcome judged (``judge``), its record in ``Outcome.extra["crash"]``."""

    def __init__(self, runner: JobRunner, phase: Phase) -> None:
        self.runner, self.phase = runner, phase
        self.here: bool = runner.here
        self.hosts: tuple[str, ...] = runner.hosts

    def run(self, job_text: str, workdir: Path, tell: Tell | None = None, *, extra_args: Sequence[str] = (),
            before_start: Callable[[Mapping[str, str]], None] | None = None) -> Outcome:
        def place(prefixes: Mapping[str, str]) -> None:
            place_states(self.phase, workdir, prefixes)
            if before_start is not None:
                before_start(prefixes)

        done = self.runner.run(job_text, workdir, tell, before_start=place,
                               extra_args=(*extra_args, *fio_args(self.phase, workdir, local=self.here)))
        ended = Ended(done.status, done.error, done.report, done.messages, collect_states(workdir, done.prefixes),
                      (workdir / MARKER).exists(), self.hosts)
        judged = judge(self.phase, ended)
        return replace(done, status=judged.status, error=judged.error, report=judged.report,
                       extra={**done.extra, "crash": judged.record})
