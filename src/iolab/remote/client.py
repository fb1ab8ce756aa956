"""Run one fio job on many hosts at once through fio's client/server mode.

One ``fio --client`` process drives every host of the job, as fio is designed to (it sends the
job to all servers, then starts them together). Each host's connection goes through a loopback
relay (``remote.relay``) that shows that host's progress and how its connection ended.

fio writes json+ to a file. Its text lines (``<server> …`` relayed from the servers, and its
own ``client: host=… disconnected``) come first in that same file (FIO_NOTES §1.7); they are the
messages quoted when a host fails. fio's "All clients" entry is dropped by the parser; iolab
aggregates hosts itself (``fio.merge``).

A host that cannot be reached when the job starts, that disconnects, or whose server dies
mid-run is *lost*: the job goes on with the other hosts, whose results are kept, and the
outcome is ``partial``. Every job has a time bound; past it fio is stopped (it tells every
server to quit and writes what it has).

Time series: as for local runs (``runner.local``), fio is asked for 1-second averaged IOPS,
bandwidth and latency logs of every job, in a ``[global]`` section put before the job file
it sends (``fio.logs.global_section``: command-line job options do not reach the servers).
The servers send the logs back and fio's client writes them into ``workdir`` named after the
relay's address (``iolab_iops.1.log.127.0.0.3``); each is read and named after its real host.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import outputs
from ..errors import FioError, ParseError, SuiteError
from ..fio import logs
from ..fio.json import parse_json
from ..model import DiskUtil, FioReport, JobResult, to_jsonable
from ..runner.local import (
    JOB_FILE,
    LOG_PREFIX,
    STDERR,
    STDOUT,
    die_with_parent,
    error_text,
    exit_waiter,
    find_fio,
    stop,
    warm_up,
)
from ..runner.outcome import HostOutcome, Outcome
from ..runner.status import Status
from .hosts import HostSpec
from .relay import Relay, open_relays

OUTPUT_NAME = "fio-output.json"


@dataclass(frozen=True)
class HostStatus:
    """Live state of one host for the progress display: ``state`` is ``starting`` (connected,
    fio about to start), ``running`` (``status`` holds fio's current rates for that host) or
    ``lost`` (``message`` says why)."""

    host: str
    state: str
    status: Status | None = None
    message: str | None = None


def run(job_text: str, hosts: list[HostSpec], workdir: Path, on_status: Callable[[HostStatus], None] | None = None,
        fio: str = "fio", timeout_s: float | None = None, connect_timeout_s: float = 5.0,
        extra_args: Sequence[str] = (), before_start: Callable[[Mapping[str, str]], None] | None = None,
        unreachable: Mapping[HostSpec, str] | None = None) -> Outcome:
    """Run ``job_text`` on every host of ``hosts`` at once and return its Outcome: ``status`` ``ok``
    (every host ok), ``partial`` (some hosts ok), ``failed`` (none) or ``interrupted``; each host's part in
    ``Outcome.hosts``.

    ``workdir`` (created) holds the job file, fio's output and messages; fio's client runs there
    (so a file named like a host spec cannot be mistaken for a hosts list, init.c). Log files
    fio brings back from the servers land there too: unless the job file does its own logging,
    they are iolab's 1-second logs, read into
    ``Outcome.time_series``. ``on_status`` is called from this thread about once a second
    per host. On ``KeyboardInterrupt`` fio is stopped with SIGINT and the interrupt is
    re-raised. Raises ``FioNotFound``; ``FioError`` when fio cannot be started.

    ``extra_args`` are fio options for the client's command line (a crash test's trigger options);
    ``before_start`` is called with ``Outcome.prefixes`` once the relays are open, before fio
    starts (to put files fio's servers will ask the client for into ``workdir``). Hosts in
    ``unreachable`` (host -> why) are left out: lost before the start, with that cause.
    """
    workdir = outputs.directory(workdir, "fio's work directory").resolve()
    for old in logs.find_logs(workdir, LOG_PREFIX):
        old.unlink()
    with_logs = _wants_logs(job_text)
    outputs.write(workdir / "job.fio", JOB_FILE, (logs.global_section(LOG_PREFIX) if with_logs else "") + job_text,
                  how="fresh")
    output = workdir / OUTPUT_NAME
    output.unlink(missing_ok=True)
    started = datetime.now(UTC)
    relays = open_relays(hosts, connect_timeout_s, unreachable)
    try:
        live = [r for r in relays if r.error is None]
        for r in relays if on_status is not None else ():
            on_status(HostStatus(r.host.label, "starting") if r.error is None  # type: ignore[misc]
                      else HostStatus(r.host.label, "lost", message=r.error))
        command: tuple[str, ...] = (find_fio(fio), "--output-format=json+", f"--output={output}", *extra_args)
        for r in live:
            command += (f"--client={r.fio_arg}", "job.fio")
        if not live:
            return _finish(relays, command, started, None, workdir, unfinished=set())
        if before_start is not None:
            before_start(_prefixes(relays))
        with outputs.writing(workdir / "fio.stdout", STDOUT, how="fresh") as out, \
                outputs.writing(workdir / "fio.stderr", STDERR, how="fresh") as err:
            try:
                proc = subprocess.Popen(command, cwd=workdir, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                        start_new_session=True, preexec_fn=die_with_parent)
            except OSError as exc:
                raise FioError(f"cannot start fio: {exc}") from exc
            warm_up()
            unfinished = _follow(proc, live, on_status, timeout_s)
        outcome = _finish(relays, command, started, proc.returncode, workdir, unfinished)
        return _with_logs(outcome, relays, job_text, workdir) if with_logs else outcome
    finally:
        for r in relays:
            r.close()


def _wants_logs(job_text: str) -> bool:
    """Whether iolab asks for its logs: not when the job logs by itself or cannot be read here
    (fio will say what is wrong with it)."""
    try:
        return not logs.sets_own_logging(job_text)
    except SuiteError:
        return False


def _with_logs(outcome: Outcome, relays: list[Relay], job_text: str, workdir: Path) -> Outcome:
    """The outcome with the hosts' logs read and named after each host's label.

    A log names the relay's address; when relays had to share one address (a loopback without
    127/8 routes) their hosts' logs overwrote each other and none of theirs is kept. A log fio
    wrote badly drops the series and becomes a report warning, as for local runs.
    """
    addresses = [r.address for r in relays]
    label = {r.address: r.host.label for r in relays if addresses.count(r.address) == 1}
    try:
        series = logs.read_logs(logs.find_logs(workdir, LOG_PREFIX), logs.thread_names(job_text), logs.INTERVAL_MS)
    except ParseError as exc:
        problem = f"time series not stored: {exc.message}"
        series = ()
    else:
        problem = "" if len(label) == len(relays) else \
            "time series of hosts sharing the relay address 127.0.0.1 not stored (their logs have one name)"
    series = tuple(replace(s, hostname=label[s.hostname]) for s in series if s.hostname in label)
    if problem and outcome.report is not None:
        outcome = replace(outcome, report=replace(outcome.report, warnings=(*outcome.report.warnings, problem)))
    return replace(outcome, time_series=series)


def _follow(proc: subprocess.Popen[bytes], relays: list[Relay], on_status: Callable[[HostStatus], None] | None,
            timeout_s: float | None) -> set[HostSpec]:
    """Wait for fio, reporting each host's progress; returns the moment fio exits. When the time
    bound passes, fio is stopped and the hosts whose run had not ended by then are returned."""
    seen = {r.host: 0 for r in relays}
    lost: set[HostSpec] = set()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        with exit_waiter(proc) as wait_exit:
            while proc.poll() is None:
                wait_exit(0.25)
                for r in relays if on_status is not None else ():
                    if r.lost is not None and r.host not in lost:
                        lost.add(r.host)
                        on_status(HostStatus(r.host.label, "lost", message=r.lost))  # type: ignore[misc]
                    elif r.eta_seq != seen[r.host] and r.last_eta is not None:
                        seen[r.host] = r.eta_seq
                        e = r.last_eta
                        if e.running == 0 and e.setting_up == 0:
                            continue  # not started yet, or done: nothing to show
                        measuring = e.setting_up == 0
                        status = Status(elapsed_s=e.elapsed_s, eta_s=e.eta_s, iops=e.iops if measuring else None,
                                        bw_bytes_s=e.bw_bytes_s if measuring else None)
                        on_status(HostStatus(r.host.label, "running", status))  # type: ignore[misc]
                if deadline is not None and time.monotonic() > deadline:
                    unfinished = {r.host for r in relays if not r.stopped}
                    stop(proc)
                    return unfinished
    except BaseException:
        stop(proc)
        raise
    return set()


def _finish(relays: list[Relay], command: tuple[str, ...], started: datetime, returncode: int | None,
            workdir: Path, unfinished: set[HostSpec]) -> Outcome:
    text = (workdir / OUTPUT_NAME).read_text(errors="replace") if (workdir / OUTPUT_NAME).exists() else ""
    messages = "\n".join(p.read_text(errors="replace") for p in (workdir / "fio.stderr", workdir / "fio.stdout")
                         if p.exists())
    messages += "\n" + text[:_json_start(text)]
    report = None
    with contextlib.suppress(ParseError):
        report = _relabel(parse_json(text), relays) if text else None
    outcomes = tuple(_host_outcome(r, report, messages, r.host in unfinished) for r in relays)
    ok = [h for h in outcomes if h.status == "ok"]
    status = "ok" if len(ok) == len(outcomes) else ("partial" if ok else "failed")
    errors = [h.error for h in outcomes if h.error]
    if returncode not in (0, None) and not errors:
        errors.append(f"fio exited {returncode}: {error_text(messages)}")
        status = "failed"
    raw = text if text.strip() else None
    return Outcome(status=status, command=command, started_at=started, ended_at=datetime.now(UTC), hosts=outcomes,
                   report=report, raw_json=raw, error="\n".join(errors) or None, prefixes=_prefixes(relays),
                   messages=text)


def _prefixes(relays: list[Relay]) -> dict[str, str]:
    """Host label -> the address fio's client connects to for it, for the relays whose address is
    their own (relays sharing 127.0.0.1 cannot be told apart by fio's file names)."""
    addresses = [r.address for r in relays]
    return {r.host.label: r.address for r in relays if addresses.count(r.address) == 1}


def _json_start(text: str) -> int:
    match = re.search(r"^\{", text, re.M)
    return match.start() if match else len(text)


def _relabel(report: FioReport, relays: list[Relay]) -> FioReport:
    """Jobs and disk stats named after the real hosts instead of the relays' loopback addresses
    and ports; entries from no known relay are dropped (as are disk stats when the relays had to
    share one address: fio names their host by address only)."""
    by_port = {(r.address, r.port): r for r in relays}
    addresses = [r.address for r in relays]
    by_address = {r.address: r for r in relays if addresses.count(r.address) == 1}
    jobs: list[JobResult] = []
    for job in report.jobs:
        relay = by_port.get((job.hostname or "", job.port or 0))
        if relay is not None:
            hostname, port = _json_name(relay.host)
            jobs.append(replace(job, hostname=hostname, port=port))
    disks: list[DiskUtil] = []
    for disk in report.disk_util:
        relay = by_address.get(disk.hostname or "")
        if relay is not None:
            disks.append(replace(disk, hostname=_json_name(relay.host)[0]))
    return replace(report, jobs=tuple(jobs), disk_util=tuple(disks))


def _json_name(host: HostSpec) -> tuple[str, int | None]:
    """How a host is named in the stored report (``hostname``, ``port``, as fio names hosts): an
    ssh host by its label (``hosts.label_of`` reads it back), others by address and port."""
    return (host.label, None) if host.kind == "ssh" else (host.host, host.port)


def _host_outcome(relay: Relay, report: FioReport | None, messages: str, timed_out: bool) -> HostOutcome:
    label = relay.host.label
    if relay.error is not None:
        return HostOutcome(label, "lost", f"{label}: not reachable when the job started: {relay.error}")
    jobs = [j for j in report.jobs if (j.hostname, j.port) == _json_name(relay.host)] if report else []
    said = _fio_lines(messages, relay)
    if timed_out:
        return HostOutcome(label, "lost", f"{label}: did not finish within the job's time bound; fio was stopped"
                           + (" (its results so far are kept)" if jobs else ""), _server(relay))
    if jobs:
        failed = [j for j in jobs if j.error]
        if not failed:
            return HostOutcome(label, "ok", server=_server(relay))
        errnos = ", ".join(f"{j.name}: errno {j.error} ({os.strerror(j.error)})" for j in failed)
        return HostOutcome(label, "failed", f"{label}: {errnos}" + (f"\n{said}" if said else ""), _server(relay))
    cause = relay.lost or ("no results came back" + (" although the server ended its run" if relay.stopped else ""))
    return HostOutcome(label, "lost", f"{label}: {cause}" + (f"; fio said: {said}" if said else ""), _server(relay))


def _server(relay: Relay) -> dict[str, Any] | None:
    """What the host's fio server said about itself, as stored (``Outcome.hosts``)."""
    return to_jsonable(relay.probe) if relay.probe is not None else None


def _fio_lines(messages: str, relay: Relay) -> str:
    """fio's own lines about this host, with the relay's address replaced by the host's name."""
    if relay.address == "127.0.0.1":
        pattern = re.compile(rf"\b127\.0\.0\.1\b.*{relay.port}|{relay.port}.*\b127\.0\.0\.1\b")
    else:
        pattern = re.compile(rf"(?<![\d.]){re.escape(relay.address)}(?![\d])")
    lines = [line.strip() for line in messages.splitlines() if pattern.search(line) and not line.startswith("<")]
    text = "; ".join(dict.fromkeys(lines))
    return pattern.sub(lambda _m: relay.host.label, text) if relay.address != "127.0.0.1" else text
