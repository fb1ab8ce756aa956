"""Start, stop and inspect a fio server (``fio --server``) bound to one address.

fio's server has no authentication and no encryption: whoever can connect submits job files
that run as the server's user, and fio's options include running commands
(``exec_prerun``, ``ioengine=exec``, ``--trigger``; FIO_NOTES §4.4). So iolab binds it to the
address given, refuses the wildcard address unless told otherwise, and says so on start.

iolab starts fio in its own session, with its messages in a log file next to the pidfile,
rather than with fio's ``--daemonize=PIDFILE``: that returns 0 before the server binds, and a
server that then fails (``fio: bind: Cannot assign requested address``) only removes its
pidfile and tells syslog (``fio_start_server()``, server.c@fio-3.33; observed). iolab waits until
the server answers a probe and otherwise quotes its log. fio binds with ``SO_REUSEPORT``, so a
second server on the same address and port starts without complaint and the kernel splits the
connections between the two; iolab refuses to start one where something already listens.

The pidfile holds the pid on its first line (as pidfiles do) and iolab's record as JSON on the
second. Before signalling, iolab checks that the pid is still that fio server (command line and
start time in ``/proc``), so a reused pid is never killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from .. import outputs
from ..errors import HostError, UsageError
from ..runner import fence as fence_mod
from ..runner.local import find_fio
from .hosts import HostSpec
from .protocol import ProbeReply, connect, local_protocol_version, probe

WILDCARDS = ("0.0.0.0", "::", "")
PIDFILE = "the fio server's pidfile"
SECURITY_WARNING = (
    "fio's server has no authentication and no encryption: anyone who can connect to it can run job files as "
    "this user ({user}), which includes reading and writing any file and running commands (exec_prerun, "
    "ioengine=exec). Bind it only to a private interface, and stop it when the tests are done."
)
FENCED_WARNING = (
    "fio's server has no authentication and no encryption: anyone who can connect to it can run job files as "
    "this user ({user}): read any file and run commands (exec_prerun, ioengine=exec), which the fence limits to "
    "writing the --allow paths. Bind it only to a private interface, and stop it when the tests are done."
)


@dataclass(frozen=True)
class ServerRecord:
    """A server iolab started: ``spec`` is fio's ``--server`` argument, ``label`` the host
    label clients use, ``start_ticks`` the process start time (``/proc/PID/stat`` field 22)."""

    pid: int
    spec: str
    label: str
    fio: str
    log: str
    started_at: str
    start_ticks: int
    fence: list[str] | None = None


def state_dir() -> Path:
    """Where pidfiles and logs go: ``$XDG_RUNTIME_DIR/iolab``, else ``~/.local/state/iolab``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "iolab"
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "iolab"


def default_pidfile(bind: HostSpec) -> Path:
    return state_dir() / f"fio-server-{re.sub(r'[^A-Za-z0-9.-]+', '_', bind.label).strip('_')}.pid"


def server_fence(pidfile: Path, allow: Sequence[str], fenced: bool = True) -> fence_mod.Fence | None:
    """The fence a fio server runs in (``runner.fence``, as for local jobs): the ``allow`` paths
    (``--allow``: devices, files, directories a client's jobs may write) and the server's own work
    directory next to its pidfile (fio's working directory: logs, verify state) are writable,
    everything else read-only. None when ``fenced`` is False (``--no-fence``).

    Raises ``SafetyError`` when no fence can be set up; ``UsageError`` for an ``--allow`` path that
    does not exist, or is not absolute."""
    if not fenced:
        return None
    fence_mod.require()
    for path in allow:
        if not path.startswith("/") or not os.path.lexists(path):
            raise UsageError(f"--allow {path}: expected an existing absolute path (a device, file or directory)")
    workdir = outputs.directory(pidfile.with_suffix(".work"), "the fio server's work directory")
    return replace(fence_mod.build(dict.fromkeys(allow, fence_mod.ALLOW), workdir.resolve(), network=True),
                   die_with_parent=False)


def start(bind: HostSpec, pidfile: Path | None = None, fio: str = "fio", all_interfaces: bool = False,
          timeout_s: float = 10.0, allow: Sequence[str] = (), fenced: bool = True) -> ServerRecord:
    """Start ``fio --server`` on ``bind`` inside its fence (``server_fence``) and wait until it
    answers a probe.

    Raises ``UsageError`` for a wildcard address without ``all_interfaces``, when the pidfile
    names a live server or something already listens there; ``HostError`` when fio exits or does
    not answer within ``timeout_s`` (the message quotes fio's log); ``SafetyError`` when no fence
    can be set up and ``fenced``.
    """
    if bind.kind != "sock" and bind.host in WILDCARDS and not all_interfaces:
        raise UsageError(f"refusing to bind a fio server to {bind.host!r} (every interface): it has no authentication",
                         hint="bind it to a private address, or pass --all-interfaces if you really mean it")
    pidfile = pidfile or default_pidfile(bind)
    outputs.check(pidfile, PIDFILE)  # before anything starts: never onto a device, never through a link
    existing = read(pidfile)
    if existing is not None and alive(existing):
        raise UsageError(f"a fio server iolab started is already running for {pidfile} (pid {existing.pid}, "
                         f"{existing.label})", hint="stop it first: iolab server stop --pidfile " + str(pidfile))
    with contextlib.suppress(OSError), connect(bind, 1.0):
        raise UsageError(f"something already listens on {bind}; fio binds with SO_REUSEPORT, so a second server "
                         "there would share the port with it", hint="iolab server status --bind ADDRESS says if it "
                         "is iolab's; stop it, or choose another --port")
    # fio creates a unix socket where it binds: its directory must be writable
    socket_dir = [os.path.dirname(os.path.abspath(bind.host))] if bind.kind == "sock" else []
    fence = server_fence(pidfile, [*allow, *socket_dir], fenced)
    log = pidfile.with_suffix(".log")
    fio_path = find_fio(fio)
    command: tuple[str, ...] = (fio_path, f"--server={bind.fio_arg}")
    with outputs.writing(log, "the fio server's log") as out:  # in place once fio has it: it writes on
        proc = subprocess.Popen(fence.argv(command) if fence is not None else command, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=str(fence.workdir) if fence is not None else "/")
    record = ServerRecord(pid=proc.pid, spec=bind.fio_arg, label=bind.label, fio=fio_path, log=str(log),
                          started_at=datetime.now(UTC).isoformat(timespec="seconds"),
                          start_ticks=_start_ticks(proc.pid) or 0,
                          fence=fence.describe() if fence is not None else None)
    version = local_protocol_version(fio_path)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise HostError(f"the fio server for {bind} exited at once ({proc.returncode}): {_log_tail(log)}")
        try:
            probe(bind, version, timeout_s=1.0)
            break
        except HostError as exc:
            if time.monotonic() > deadline:
                _signal_group(record, signal.SIGKILL)
                raise HostError(f"the fio server for {bind} did not answer within {timeout_s:g} s: {exc.message}; "
                                f"its log: {_log_tail(log)}") from None
            time.sleep(0.1)
    outputs.write(pidfile, PIDFILE, f"{record.pid}\n{json.dumps(asdict(record))}\n")
    return record


def read(pidfile: Path) -> ServerRecord | None:
    """The record in ``pidfile``; None when there is none or it is not iolab's."""
    try:
        lines = pidfile.read_text().splitlines()
        return ServerRecord(**json.loads(lines[1]))
    except (OSError, IndexError, ValueError, TypeError):
        return None


def alive(record: ServerRecord) -> bool:
    """Whether ``record.pid`` is still that fio server (same command line and start time)."""
    try:
        cmdline = Path(f"/proc/{record.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"--server={record.spec}".encode() in cmdline and _start_ticks(record.pid) == record.start_ticks


def stop(pidfile: Path, timeout_s: float = 10.0) -> tuple[ServerRecord, bool]:
    """Stop the server of ``pidfile`` and every process of its session (the per-connection and
    per-job processes fio forks), SIGTERM then SIGKILL; remove the pidfile and a socket fio left
    behind. Returns the record and whether it was running. Raises ``UsageError`` when the
    pidfile holds no iolab record."""
    record = read(pidfile)
    if record is None:
        raise UsageError(f"no fio server record in {pidfile}", hint="iolab server status lists what it knows")
    running = alive(record)
    if running:
        _signal_group(record, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while alive(record) and time.monotonic() < deadline:
            time.sleep(0.05)
        _signal_group(record, signal.SIGKILL)  # what did not end in time, and job processes left behind
    pidfile.unlink(missing_ok=True)
    if record.spec.startswith("sock:"):
        Path(record.spec[5:]).unlink(missing_ok=True)  # fio removes it only on SIGINT (FIO_NOTES §4.2)
    return record, running


def status(pidfile: Path) -> tuple[ServerRecord | None, bool, ProbeReply | HostError | None]:
    """The record, whether its process runs, and what the server answers to a probe."""
    from .hosts import parse

    record = read(pidfile)
    if record is None or not alive(record):
        return record, False, None
    try:
        answer: ProbeReply | HostError = probe(parse(record.spec), local_protocol_version(record.fio), 5.0)
    except HostError as exc:
        answer = exc
    return record, True, answer


def _signal_group(record: ServerRecord, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(record.pid, sig)


def _start_ticks(pid: int) -> int | None:
    """Field 22 of ``/proc/PID/stat`` (start time in clock ticks since boot; proc(5))."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _log_tail(log: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
        if lines:
            return " / ".join(lines[-5:])
    return "(no messages)"
