"""Progress of a run's jobs on stderr: a live bar per job on a terminal, lines for logs and CI.

Without a terminal (output redirected to a file, a CI log) a bar would be drawn once, at the end;
``LineProgress`` writes instead one time-stamped line when each job starts and ends and one every
``LINE_INTERVAL_S`` with fio's current IOPS and bandwidth (from its once-a-second status), so a log
shows what a run is doing while it runs. ``--quiet`` shows neither (``QuietProgress``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Protocol

from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from ..run import execute
from ..runner.status import Status
from ..units import format_duration, format_iops, format_rate
from . import err

#: Seconds between two status lines of one job (and host) without a terminal.
LINE_INTERVAL_S = 10.0


class JobProgress(Protocol):
    """What the commands feed execute's events to; a context manager. ``stage`` says what the jobs are
    for, in place of ``[i/n]`` (a workflow's ``probe 3 · …``; ``{index}`` and ``{total}`` stand for the
    job's number and count)."""

    stage: str | None

    def __enter__(self) -> JobProgress: ...

    def __exit__(self, *exc: Any) -> None: ...

    def __call__(self, event: execute.JobEvent) -> None: ...

    def note(self, text: str) -> None:
        """A line about what happens between jobs (a crash test's wait)."""


def job_progress(quiet: bool = False) -> JobProgress:
    """The progress display for this stderr: nothing when ``quiet``, bars on a terminal, else lines."""
    if quiet:
        return QuietProgress()
    return LiveProgress() if err.is_terminal else LineProgress()


class QuietProgress:
    """No progress at all (``--quiet``); failures still show in the results and the exit code."""

    stage: str | None = None

    def __enter__(self) -> QuietProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __call__(self, event: execute.JobEvent) -> None:
        return None

    def note(self, text: str) -> None:
        return None


def _title(event: execute.JobEvent, stage: str | None) -> str:
    where = stage.format(index=event.index + 1, total=event.total) if stage else f"{event.index + 1}/{event.total}"
    return f"[{where}] {event.target} · {event.workload}" + (f" #{event.repeat + 1}" if event.repeat else "")


class LineProgress:
    """Plain lines for logs (see the module docstring), each starting with the UTC time."""

    def __init__(self, interval_s: float = LINE_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.stage: str | None = None
        self.started = 0.0
        self.last: dict[str | None, float] = {}

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def note(self, text: str) -> None:
        self._say(text)

    def _say(self, text: str) -> None:
        err.print(f"{datetime.now(UTC):%H:%M:%S} {text}", markup=False, highlight=False, soft_wrap=True)

    def __call__(self, event: execute.JobEvent) -> None:
        title = _title(event, self.stage) + (f" @ {event.host}" if event.host else "")
        now = time.monotonic()
        if event.kind == "start":
            self.started, self.last = now, {}
            expected = f", about {format_duration(event.expected_s)}" if event.expected_s else ""
            self._say(f"{title}: started{expected}")
        elif event.kind == "status" and event.status is None and event.note is not None:
            self._say(f"{title}: lost: {event.note}")
        elif event.kind == "status" and event.status is not None:
            if now - self.last.get(event.host, self.started) >= self.interval_s:
                self.last[event.host] = now
                self._say(f"{title}: {format_duration(event.status.elapsed_s)} elapsed, {_status_text(event.status)}")
        elif event.kind in ("note", "db") and event.detail:
            self._say(f"{title}: {event.detail}")
        elif event.kind == "db" and event.note:
            self._say(f"{title}: {event.note}")
        elif event.kind == "end":
            took = format_duration(now - self.started) if self.started else "–"
            error = f": {event.error.splitlines()[0]}" if event.error and event.outcome != "ok" else ""
            self._say(f"{title}: {event.outcome} after {took}{error}")


class LiveProgress:
    """A rich progress bar per job, fed by execute's events (on a terminal)."""

    def __init__(self) -> None:
        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=24),
            TimeElapsedColumn(), TextColumn("{task.fields[detail]}"), console=err, transient=False,
        )
        self.task: TaskID | None = None
        self.hosts: dict[str, TaskID] = {}
        self.stage: str | None = None

    def __enter__(self) -> LiveProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def note(self, text: str) -> None:
        self.progress.console.print(f"    {text}", style="cyan", markup=False)

    def __call__(self, event: execute.JobEvent) -> None:
        title = escape(_title(event, self.stage))
        if event.kind == "start":
            self.task = self.progress.add_task(title, total=event.expected_s, detail="starting fio")
            self.hosts = {}
        elif event.kind == "status" and event.host is not None:
            self._host(event)
        elif event.kind == "status" and self.task is not None and event.status is not None:
            s = event.status
            self.progress.update(self.task, completed=s.elapsed_s, detail=_status_text(s))
        elif event.kind == "db" and event.note:
            self.progress.console.print(f"    {event.note}", style="cyan", markup=False, highlight=False)
        elif event.kind == "db" and self.task is not None and event.detail:
            self.progress.update(self.task, detail=f"[yellow]{escape(event.detail)}[/]")
        elif event.kind == "note" and event.detail:
            self.progress.console.print(f"    {event.detail}", style="cyan", markup=False, highlight=False)
        elif event.kind == "end" and self.task is not None:
            ok = event.outcome == "ok"
            mark = "[green]✓[/]" if ok else f"[red]✗ {event.outcome}[/]"
            self.progress.update(self.task, completed=event.expected_s or 1, total=event.expected_s or 1,
                                 detail=mark)
            for host_task in self.hosts.values():
                self.progress.stop_task(host_task)
            if not ok and event.error:
                self.progress.console.print(f"    {event.error.splitlines()[0]}", style="red", markup=False)

    def _host(self, event: execute.JobEvent) -> None:
        """One row per host of a remote target, under its job's row."""
        assert event.host is not None
        if event.host not in self.hosts:
            self.hosts[event.host] = self.progress.add_task(f"    {escape(event.host)}", total=event.expected_s,
                                                            detail="connecting")
        task = self.hosts[event.host]
        s = event.status
        if s is None and event.note is not None:
            self.progress.update(task, detail=f"[red]✗ lost: {escape(event.note)}[/]")
            self.progress.stop_task(task)
        if s is None:
            return
        self.progress.update(task, completed=s.elapsed_s, detail=_status_text(s))


def _status_text(s: Status) -> str:
    detail = f"{format_iops(s.iops)} IOPS  {format_rate(s.bw_bytes_s)} MiB/s" if s.iops is not None \
        else "ramping / laying out"
    if s.eta_s is not None:
        detail += f"  ETA {format_duration(s.eta_s)}"
    return detail
