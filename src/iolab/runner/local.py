"""Run one fio job file locally and collect its result.

fio writes json+ to a file (``--output``), never to stdout, because errors and warnings can
precede the JSON on stdout (fio issue 731); with ``--status-interval=1`` the same file carries a
report every second, which drives the live progress (``status.py``).

fio runs in its own session so that iolab decides how it stops: on Ctrl-C or SIGTERM iolab
sends SIGINT to fio, which ends its jobs cleanly, and waits for it. If iolab itself is killed
(kill -9), the kernel sends fio SIGTERM (``PR_SET_PDEATHSIG``), so no orphan keeps writing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from .. import outputs
from ..errors import FioError, FioNotFound, ParseError, SuiteError
from ..fio import logs
from ..fio.json import parse_json
from .fence import STOPPED_ERRNOS, Fence, ignore_interrupts, relayout_message, stopped_message
from .once import once
from .outcome import Outcome
from .status import Status, StatusStream

_PR_SET_PDEATHSIG = 1
OUTPUT_NAME = "fio-output.json"
LOG_PREFIX = "iolab"
#: iolab's own files in fio's work directory, which fio and what its job runs can write: made there with
#: ``O_EXCL | O_NOFOLLOW`` after whatever was at the name is removed (``outputs``, ``how="fresh"``).
JOB_FILE, STDOUT, STDERR = "fio's job file", "fio's output", "fio's messages"


def measured_start_ms(text: str) -> int | None:
    """When fio's measured phase began (ms since the epoch, after ``ramp_time``): the last
    ``--status-interval`` report's ``timestamp_ms`` less its longest direction ``runtime`` (both
    written at the same instant; not ``job_runtime``, which a reporting group sums over its members),
    or the final report's when that is earlier. The last interim report is exact unless a job has not
    noted its time since (a replay's job sleeping until its next logged I/O notes it when it wakes:
    measured with fio 3.33, a 2.76 s replay's last interim report said 890 ms 66 ms before its end,
    which put the start 1.8 s late); the final one is written after fio has reaped its jobs, up to
    ~0.1 s after they end, so it is never early. Earlier interim reports may fall in ``ramp_time``,
    whose runtimes count from the job's start (measured: 871 ms into a 1 s ramp), so they are not
    used. For jobs without I/O, the last interim report's ``job_runtime``. None when fio wrote no
    interim report with runtimes (a job shorter than a second)."""
    reports = text.split("\n{\n")
    last = _start_of(reports[:-1], "runtime") if len(reports) > 1 else None
    if last is None:
        return _start_of(reports[:-1], "job_runtime")  # a job without I/O
    final = _start_of(reports[-1:], "runtime")
    return min(last, final) if final is not None else last


def _start_of(reports: list[str], key: str) -> int | None:
    """The last of ``reports`` with a positive ``key`` runtime: its timestamp less the longest."""
    for report in reversed(reports):
        stamp = re.search(r'"timestamp_ms" : (\d+)', report)
        runtimes = [int(r) for r in re.findall(rf'"{key}" : (\d+)', report) if int(r)]
        if stamp and runtimes:
            return int(stamp.group(1)) - max(runtimes)
    return None


def find_fio(fio: str = "fio") -> str:
    """The fio executable's path. Raises ``FioNotFound`` naming the install command."""
    path = shutil.which(fio)
    if path is None:
        command = "apt-get install fio" if os.geteuid() == 0 else "sudo apt-get install fio"
        raise FioNotFound(f"fio is not installed (looked for {fio!r} on PATH)", hint=f"install it: {command}")
    return path


def fio_version(fio: str = "fio") -> str:
    """``fio --version`` without the ``fio-`` prefix, e.g. ``3.33``, asked once per process and fio
    binary (its path, size and modification time). Raises ``FioNotFound``."""
    path = find_fio(fio)
    return _version_of(path, *_identity(path))


def _identity(path: str) -> tuple[int, int]:
    """What tells one fio binary from another at the same path: its size and modification time (ns)."""
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


@once
def _version_of(path: str, size: int, mtime_ns: int) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip().removeprefix("fio-")


def check_job(job_text: str, workdir: Path, fio: str = "fio", fence: Fence | None = None) -> str | None:
    """fio's own verdict on a job file (``--parse-only``): None when valid, else fio's message.

    Catches misspelt options, bad values and engine options on the wrong engine; not unknown
    engines or ``time_based`` without ``runtime`` (FIO_NOTES §8). With ``fence`` (its work
    directory must be ``workdir``), fio parses inside it.
    """
    path = outputs.write(workdir / "check.fio", "the job file for fio's check", job_text, how="fresh")
    command: tuple[str, ...] = (find_fio(fio), "--parse-only", path.name)
    out = subprocess.run(fence.argv(command) if fence is not None else command, cwd=workdir,
                         capture_output=True, text=True, check=False, pass_fds=fence.fds if fence else ())
    path.unlink()
    if out.returncode == 0:
        return None
    return error_text(out.stdout + "\n" + out.stderr) or f"fio --parse-only exited {out.returncode}"


def die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def error_text(text: str, limit: int = 800) -> str:
    """fio's messages, shortened: value listings dropped, lines that differ only in numbers
    (one ``io_u error`` per failed I/O) folded into the first with a count."""
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(":") or line.startswith("valid values:"):
            continue
        key = re.sub(r"\d+", "N", line)
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, line)
    lines = [first[k] + (f" (x{counts[k]})" if counts[k] > 1 else "") for k in first]
    out = "\n".join(lines[:8])
    return out if len(out) <= limit else out[: limit - 3] + "..."


def run(
    job_text: str,
    workdir: Path,
    on_status: Callable[[Status], None] | None = None,
    fio: str = "fio",
    extra_args: Sequence[str] = (),
    timeout_s: float | None = None,
    cwd: Path | None = None,
    fence: Fence | None = None,
) -> Outcome:
    """Run ``job_text`` with fio and return its Outcome.

    The job file, fio's output and its messages live in ``workdir`` (created); fio itself runs
    in ``cwd`` (default ``workdir``), where relative file names in the job resolve.

    With ``fence`` (``runner.fence``; its work directory must be ``workdir``) fio runs inside it,
    in ``workdir``, and a job whose write the fence stopped is ``failed`` with a message naming
    the path, its report dropped: a stopped write is never a measurement.

    fio also writes 1-second averaged IOPS, bandwidth and latency logs into ``workdir``
    (command-line options, so the job file stays as given; none when the job file does its own
    logging), and they come back read in ``Outcome.time_series``.

    ``on_status`` is called from this thread about once a second while fio runs. On
    ``KeyboardInterrupt`` fio is stopped with SIGINT (then SIGKILL after 15 s) and the
    interrupt is re-raised. ``timeout_s`` bounds the run: past it fio is stopped and the
    outcome is ``failed``. Raises ``FioNotFound``; ``FioError`` when fio cannot be started.
    """
    workdir, command = prepare(job_text, workdir, find_fio(fio), extra_args)
    started = datetime.now(UTC)
    with outputs.writing(workdir / "fio.stdout", STDOUT, how="fresh") as out, \
            outputs.writing(workdir / "fio.stderr", STDERR, how="fresh") as err:
        try:
            proc = subprocess.Popen(
                fence.argv(command) if fence is not None else command,
                cwd=workdir if fence is not None else cwd or workdir, stdout=out, stderr=err,
                stdin=subprocess.DEVNULL, start_new_session=True, pass_fds=fence.fds if fence is not None else (),
                preexec_fn=_fenced_preexec if fence is not None else die_with_parent,
            )
        except OSError as exc:
            raise FioError(f"cannot start fio: {exc}") from exc
        warm_up()
        timed_out = _follow(proc, workdir / OUTPUT_NAME, on_status, timeout_s)
    return collect(job_text, workdir, command, proc.returncode, started, datetime.now(UTC), timed_out=timed_out,
                   fence=fence)


def prepare(job_text: str, workdir: Path, fio_path: str, extra_args: Sequence[str] = ()
            ) -> tuple[Path, tuple[str, ...]]:
    """``workdir`` (created, resolved) made ready for a run of ``job_text``: the job file written, an
    earlier run's output and logs removed; returns it and fio's command line (``fio_path`` first)."""
    workdir = outputs.directory(workdir, "fio's work directory").resolve()
    outputs.write(workdir / "job.fio", JOB_FILE, job_text, how="fresh")
    output = workdir / OUTPUT_NAME
    output.unlink(missing_ok=True)
    for old in logs.find_logs(workdir, LOG_PREFIX):
        old.unlink()
    command = (fio_path, "--output-format=json+", f"--output={output}", "--status-interval=1",
               *_log_args(job_text, workdir), *extra_args, str(workdir / "job.fio"))
    return workdir, command


def collect(job_text: str, workdir: Path, command: tuple[str, ...], returncode: int | None, started: datetime,
            ended: datetime, *, timed_out: bool = False, fence: Fence | None = None) -> Outcome:
    """The Outcome of a fio run of ``job_text`` (``command``, as ``prepare`` made it) read from what it
    left in ``workdir``: its output file, stdout and stderr, logs. ``returncode`` is fio's exit status
    (negative: the signal that ended it); ``timed_out`` that iolab stopped it past its time bound. A
    failure the ``fence`` caused is said so (see ``run``). Every run is read here, whoever ran fio."""
    outcome = _outcome(returncode, command, started, ended, workdir, timed_out)
    if fence is not None:
        outcome = _stopped(outcome, workdir, fence)
    return _with_logs(outcome, job_text, workdir) if _log_args(job_text, workdir) else outcome


def not_a_device(done: Outcome, landed: list[str]) -> Outcome:
    """A job whose writes landed in regular files it created where it named devices (``/dev/...``)
    failed: the files are removed and nothing is kept as a measurement."""
    if not landed:
        return done
    for path in landed:
        Path(path).unlink(missing_ok=True)
    return replace(done, status="failed", report=None, raw_json=None,
                   error=f"fio wrote a regular file at {', '.join(landed)} where the job named a device; that is not "
                         "a measurement of a device (the file is removed)")


def _fenced_preexec() -> None:
    die_with_parent()
    ignore_interrupts()


_STOPPED_TEXT = re.compile(r"Read-only file system|Permission denied|Operation not permitted")
_FUNC_PATH = re.compile(r"func=\w+\(([^)]*)\)|[\"'‘’`](/[^\s\"'‘’`]+)[\"'‘’`]"
                        r"|(?:open|unlink|create|file) ?(?:of )?(/[^\s\"',:]+)")


def _stopped(outcome: Outcome, workdir: Path, fence: Fence) -> Outcome:
    """A failure the fence caused (fio's errno or message says read-only / permission denied) —
    or a program fio ran (``exec_prerun``/``exec_postrun``, whose output fio keeps in
    ``JOB.prerun.txt``/``JOB.postrun.txt`` and whose failure it ignores) that the fence stopped —
    becomes ``stopped_message`` naming the paths fio named (its failing jobs' ``filename`` and
    ``directory``, or the path in its message); the report is dropped."""
    report = outcome.report
    failing = [j for j in report.jobs if j.error in STOPPED_ERRNOS] if report is not None else []
    execs = "".join(p.read_text(errors="replace") for p in sorted(workdir.glob("*.p*run.txt")))
    messages = (workdir / "fio.stderr").read_text(errors="replace") + (workdir / "fio.stdout").read_text(
        errors="replace") + (outcome.error or "") + execs
    stopped_exec = bool(_STOPPED_TEXT.search(execs))
    if not stopped_exec and (outcome.status != "failed" or (not failing and not _STOPPED_TEXT.search(messages))):
        return outcome
    paths: list[str] = []
    for job in failing:
        for key in ("filename", "directory"):
            value = job.job_options.get(key)
            if value:
                paths += [p.replace("\\:", ":") for p in re.split(r"(?<!\\):", value) if p]
    for match in _FUNC_PATH.finditer(messages):
        found = match.group(1) or match.group(2) or match.group(3)
        if found and found.startswith("/"):
            paths.append(found)
    outside = [p for p in dict.fromkeys(paths) if not fence.allows(p)]
    detail = error_text(messages)
    named = list(dict.fromkeys(paths))
    planned = [p for p in named if fence.allows(p) or fence.reads(p)]
    # fio unlinks a planned file only to lay it out anew (filesetup.c extend_file)
    why = relayout_message(named) if named and planned == named and "func=unlink" in messages else \
        stopped_message(outside or named, fence)
    return replace(outcome, status="failed", report=None, raw_json=None, error=f"{why}\nfio said: {detail}")


def _log_args(job_text: str, workdir: Path) -> tuple[str, ...]:
    """fio options for iolab's logs; none when the job logs by itself or cannot be read here
    (fio will say what is wrong with it)."""
    try:
        own = logs.sets_own_logging(job_text)
    except SuiteError:
        return ()
    return () if own else logs.command_options(workdir / LOG_PREFIX)


def _with_logs(outcome: Outcome, job_text: str, workdir: Path) -> Outcome:
    """The outcome with fio's logs read; a log fio wrote badly becomes a report warning."""
    try:
        series = logs.read_logs(logs.find_logs(workdir, LOG_PREFIX), logs.thread_names(job_text), logs.INTERVAL_MS)
    except ParseError as exc:
        if outcome.report is None:
            return outcome
        return replace(outcome, report=replace(outcome.report, warnings=(*outcome.report.warnings,
                                                                         f"time series not stored: {exc.message}")))
    return replace(outcome, time_series=series)


def _follow(proc: subprocess.Popen[bytes], output: Path, on_status: Callable[[Status], None] | None,
            timeout_s: float | None) -> bool:
    """Wait for fio, feeding status reports to ``on_status``; True when it had to be stopped."""
    stream = StatusStream()
    offset = 0
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        with exit_waiter(proc) as wait_exit:
            while proc.poll() is None:
                wait_exit(0.25)
                if on_status is not None and output.exists():
                    with open(output, encoding="utf-8", errors="replace") as f:
                        f.seek(offset)
                        chunk = f.read()
                        offset = f.tell()
                    for status in stream.feed(chunk):
                        on_status(status)
                if deadline is not None and time.monotonic() > deadline:
                    stop(proc)
                    return True
    except BaseException:
        stop(proc)
        raise
    return False


@contextlib.contextmanager
def exit_waiter(proc: subprocess.Popen[bytes]) -> Iterator[Callable[[float], None]]:
    """A function that waits up to a number of seconds for ``proc`` to exit and returns the moment it
    does, by polling a pidfd (Linux 5.3 and later). ``Popen.wait(timeout=…)`` sleeps in steps of up to
    50 ms instead, which the end of every job would wait out; it is the fallback without pidfds."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd_open (an old kernel or Python), or reaped already
        def wait(seconds: float) -> None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=seconds)
        yield wait
        return
    def wait_readable(seconds: float) -> None:
        select.select([fd], [], [], seconds)  # readable once the process has exited
    try:
        yield wait_readable
    finally:
        os.close(fd)


def warm_up() -> None:
    """Import, while fio runs, what reading its results takes and planning did not (numpy, for the
    logs: ~0.1 s, more on a loaded machine), so that the end of the first job does not wait for it."""
    import numpy  # noqa: F401


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT to fio's session (fio ends its jobs and writes what it has), SIGKILL if it hangs."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGINT, 15.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _outcome(returncode: int | None, command: tuple[str, ...], started: datetime, ended: datetime,
             workdir: Path, timed_out: bool) -> Outcome:
    text = (workdir / OUTPUT_NAME).read_text(errors="replace") if (workdir / OUTPUT_NAME).exists() else ""
    messages = (workdir / "fio.stderr").read_text(errors="replace") + "\n" + \
        (workdir / "fio.stdout").read_text(errors="replace")
    report = raw = None
    try:
        raw = text[text.rfind("\n{\n") + 1:] if "\n{\n" in text else text
        try:  # the final report alone: decoding every --status-interval report before it is wasted
            report = parse_json(raw)
        except ParseError:
            report = parse_json(text)  # e.g. a last report cut short: the one before it stands
    except ParseError as exc:
        raw = None
        parse_problem = str(exc)
    base = {"command": command, "started_at": started, "ended_at": ended, "report": report, "raw_json": raw,
            "measured_start_ms": measured_start_ms(text),
            "messages": (workdir / "fio.stderr").read_text(errors="replace")}
    if timed_out:
        return Outcome("failed", error=f"fio did not finish within its time bound; stopped. {error_text(messages)}",
                       **base)  # type: ignore[arg-type]
    failed_jobs = [j for j in report.jobs if j.error] if report else []
    if report is None or returncode != 0 or failed_jobs:
        detail = error_text(messages)
        if failed_jobs:
            errno_text = ", ".join(f"{j.name}: errno {j.error} ({os.strerror(j.error)})" for j in failed_jobs)
            detail = f"{errno_text}\n{detail}".strip()
        if report is None:  # no output, or one that breaks a rule of fio.validate: say which
            detail = f"no usable fio report ({parse_problem})\n{detail}".strip()
        return Outcome("failed", error=detail or f"fio exited {returncode}", **base)  # type: ignore[arg-type]
    return Outcome("ok", **base)  # type: ignore[arg-type]
