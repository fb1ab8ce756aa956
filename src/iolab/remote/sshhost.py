"""Hosts reached over ssh (``ssh://[USER@]HOST[:PORT]``): one ssh connection per host and run, a fenced
fio server on a Unix socket there, forwarded to a socket here. No TCP port is opened on any host.

Per host, once per process (a run), iolab starts the system OpenSSH client (the user's
``~/.ssh/config``, keys, agent, ``ProxyJump`` and ``known_hosts`` apply; ``BatchMode=yes``, so never a
prompt; ``$IOLAB_SSH`` replaces the ``ssh`` command, e.g. ``ssh -F lab_config``) as the *master* of a
``ControlMaster`` socket in iolab's own directory (``Connection.local_dir``, mode 0700), so that
every later step (facts, device checks, sampling, the forwarded socket) rides on that one
authenticated connection. The master's session runs a small Python program (``sshagent``, sent on
ssh's stdin: iolab need not be installed on the host, only ``python3``, ``fio`` and bubblewrap) that

1. creates a fresh directory only the ssh user can enter (``mkdtemp``: mode 0700) and says what the
   host has (``IOLAB-HELLO``: fio's version, whether bubblewrap can fence there, host name);
2. on request (``serve``) starts ``fio --server=sock:DIR/work/fio.sock`` inside the fence built by
   iolab's own ``runner.fence`` code (its sources travel with the program, as ``remote.ssh`` ships the
   facts modules): read-only root, fresh read-only ``/dev`` with only the planned devices, only the
   paths the plan names for that host and fio's work directory writable, no network (the Unix
   socket is a path, which a network namespace does not hide), Landlock where the kernel has it;
   a new ``serve`` with other paths restarts the server in a new fence;
3. stops the server and removes its directory when its stdin ends: when iolab closes it at the end
   of the run, when iolab dies, or when the connection
   drops (sshd closes the session). ``SIGTERM``/``SIGHUP`` and the death of its parent do the same.
   When iolab is killed, the kernel closes its end of ssh's stdin: ssh passes the EOF on.

The agent also relays connections to the server through ``DIR/relay.sock``: it connects to fio's
socket only once a connection's first bytes are there and hands them over together, because a fio
server looks at a new connection once and then sleeps up to 1 s (``remote.protocol``; through ssh's
forwarding the bytes arrive a round trip after the connect, and a probe came back 1.0 s late). It
also answers ``facts`` requests (``remote.ssh.gather``: the facts modules travel with it) and ``sample``
requests (``observe.sshsample``: /proc and /sys once a second), so neither the checks before each job nor
the observers need a new ssh session: one login per host and run, one run of its login shell's start-up
files (which ssh cannot skip: sshd runs every command through the user's shell, and Debian's bash reads
``~/.bashrc`` for a command over ssh). The agent runs on ``/usr/bin/python3`` when that is 3.9 or newer
(``sshagent.python_command``).

The relay's socket is forwarded to ``local_dir/fio.sock`` (``ssh -O forward -L``, OpenSSH ≥ 6.7);
``protocol.connect`` reaches an ``ssh`` host there, so fio's client, the relays and the probe work as
for a TCP server. fio creates its socket mode 0777 (FIO_NOTES §10): the 0700 directories on both ends
are what keep other users out.

A host whose ssh refuses the key, whose host key is unknown (``StrictHostKeyChecking``) or that has no
``python3`` fails with ssh's own last words. Source: ssh(1) ``-O``, ``-L``, ``-S``; ssh_config(5)
``ControlMaster``, ``ControlPersist``, ``BatchMode``, ``ServerAliveInterval``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import queue
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .. import outputs
from ..errors import HostError, SafetyError
from . import sshagent
from .hosts import HostSpec, on_each

#: Seconds to connect, log in and hear from the agent.
CONNECT_TIMEOUT_S = 15.0
#: Seconds the agent has to start a fio server (in its fence) that accepts connections.
SERVE_TIMEOUT_S = 15.0
@dataclass(frozen=True)
class Hello:
    """What the agent found on the host: ``fio_version`` (``fio-3.33``; None: no fio), ``fence`` the
    tool that fences there (``bubblewrap 0.8.0 + Landlock ABI 7``; None: ``fence_reason`` says why
    not), the host's own name, the 0700 ``directory`` iolab works in there, the CPU architecture
    (``platform.machine()``), CPUs, and ``connect_s``: seconds from starting ssh to this answer."""

    fio_version: str | None
    fence: str | None
    fence_reason: str | None
    hostname: str
    directory: str
    arch: str
    cpus: int
    os: str
    connect_s: float


@dataclass(frozen=True)
class Serving:
    """A fio server started on the host: the remote socket that reaches it (the agent's relay, see
    ``sshagent``), the command run there (bwrap's, or fio's alone without the fence), the places its
    jobs may write (``runner.fence.Fence.places``; None: unfenced) and fio's work directory there."""

    socket: str
    argv: tuple[str, ...]
    places: tuple[str, ...] | None
    work: str


def ssh_command() -> list[str]:
    """The ssh client command: ``$IOLAB_SSH`` split like a shell would, else ``ssh``."""
    return shlex.split(os.environ.get("IOLAB_SSH") or "ssh")


def base_dir() -> Path:
    """Where iolab keeps its ssh sockets: ``$XDG_RUNTIME_DIR/iolab/ssh``, else
    ``~/.local/state/iolab/ssh`` (as ``remote.server.state_dir``); short, because a Unix socket's
    path holds at most 107 bytes."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    root = Path(runtime) / "iolab" if runtime else \
        Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "iolab"
    return root / "ssh"


#: A directory of a connection older than this whose control socket answers no one is left from an
#: iolab that was killed (it could not remove it): removed.
_STALE_S = 600.0


@functools.cache  # once per process and directory, not per host
def _sweep(base: Path) -> None:
    now = time.time()
    for entry in base.glob("c*"):
        with contextlib.suppress(OSError):
            if now - entry.stat().st_mtime < _STALE_S:
                continue
            with socket.socket(socket.AF_UNIX) as probe:
                try:
                    probe.connect(str(entry / "ctl"))
                    continue  # a live master
                except OSError:
                    pass
            shutil.rmtree(entry, ignore_errors=True)


class Connection:
    """One host's ssh connection for the run (see the module docstring).

    ``open()`` connects and reads the agent's ``Hello``; ``serve()`` starts (or restarts, in another
    fence) the fio server and forwards its socket to ``local_socket``; ``ssh_args()`` are the options
    that make another ssh command ride on this connection; ``close()`` ends it all. ``lost`` says why
    the connection ended early (None while it lives, or after ``close()``).
    """

    def __init__(self, spec: HostSpec) -> None:
        self.spec = spec
        base = base_dir()
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        _sweep(base)
        self.local_dir = Path(tempfile.mkdtemp(prefix="c", dir=base))  # mode 0700
        self.control = self.local_dir / "ctl"
        self.local_socket = self.local_dir / "fio.sock"
        self.hello: Hello | None = None
        self.serving: Serving | None = None
        self._forwarded = False
        self._proc: subprocess.Popen[str] | None = None
        self._leaving: subprocess.Popen[str] | None = None
        self._seq = 0
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._on_close: list[Callable[[], None]] = []
        #: Set once ``open`` has ended, well or not (``error``, ``failed_at`` then say how).
        self.ready = threading.Event()
        self.error: HostError | None = None
        self.failed_at = 0.0

    def on_close(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` first when closing: other sessions on this connection end before it does (an ssh
        master waits for them)."""
        self._on_close.append(fn)

    def ssh_args(self) -> list[str]:
        """ssh's options and destination for a command over this connection (``ssh … CMD``)."""
        return [*ssh_command(), "-o", "BatchMode=yes", "-o", f"ControlPath={self.control}", "-o", "ControlMaster=no",
                *self.spec.ssh_destination]

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def lost(self) -> str | None:
        if self._closed or self._proc is None or self._proc.poll() is None:
            return None
        return f"the ssh connection ended (ssh exited {self._proc.returncode}): {self._ssh_said()}"

    def open(self, timeout_s: float = CONNECT_TIMEOUT_S) -> Hello:
        """Connect, log in and start the agent. Raises ``HostError`` with ssh's own reason (key
        refused, host key unknown or changed, no route, no ``python3``) or the agent's."""
        started = time.monotonic()
        argv = [*ssh_command(), "-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, int(timeout_s / 2))}",
                "-o", "ControlMaster=yes", "-o", f"ControlPath={self.control}", "-o", "ControlPersist=no",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o", "ExitOnForwardFailure=yes",
                "-T", *self.spec.ssh_destination, sshagent.python_command(f"-u -c {shlex.quote(sshagent.BOOT)}")]
        with outputs.writing(self.local_dir / "ssh.stderr", "ssh's messages", how="new") as stderr:  # ssh keeps it
            try:
                # No PR_SET_PDEATHSIG: it fires when the *thread* that started ssh ends (connect_all's). When
                # iolab dies, its end of ssh's stdin closes, and the agent on the host ends at that EOF.
                self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                              text=True, start_new_session=True)
            except OSError as exc:
                raise HostError(f"{self.spec}: cannot run ssh ({argv[0]}): {exc.strerror or exc}") from None
        threading.Thread(target=self._read, args=(self._proc.stdout,), daemon=True,
                         name=f"iolab-ssh-{self.spec}").start()
        self._send(sshagent.program())
        kind, data = self._answer(timeout_s, "connecting and logging in")
        if kind != "IOLAB-HELLO":
            raise HostError(f"{self.spec}: iolab's program on the host failed: {data.get('error')}")
        self.hello = Hello(fio_version=data["fio"], fence=data["fence"], fence_reason=data["fence_reason"],
                           hostname=data["hostname"], directory=data["directory"], arch=data["arch"],
                           cpus=int(data["cpus"] or 0), os=data["os"], connect_s=time.monotonic() - started)
        return self.hello

    def serve(self, writable: Mapping[str, str], read: Sequence[str], fenced: bool,
              timeout_s: float = SERVE_TIMEOUT_S) -> Serving:
        """The fio server, started in a fence where ``writable`` (path -> why, ``runner.fence``'s
        reasons) and fio's work directory are writable and ``read`` is bound to be read (devices);
        unfenced when not ``fenced``. A server already running with the same request is kept.
        Raises ``SafetyError`` when the fence refuses (too many entries to protect) and ``HostError``
        when the server does not start or ssh cannot forward its socket. Always asked of the agent,
        which alone knows whether its server still runs (a crash test's cut kills it)."""
        asked = {"op": "serve", "writable": dict(writable), "read": list(read), "fenced": fenced,
                 "timeout_s": timeout_s}
        with self._lock:
            kind, data = self._ask(asked, timeout_s + 5, "starting the fio server")
            if kind == "IOLAB-REFUSED":
                raise SafetyError(f"{self.spec}: {data['error']}", hint=data.get("hint"))
            if kind != "IOLAB-SERVING":
                raise HostError(f"{self.spec}: {data.get('error')}")
            self.serving = Serving(socket=data["socket"], argv=tuple(data["argv"]),
                                   places=tuple(data["places"]) if data["places"] is not None else None,
                                   work=data["work"])
            if not self._forwarded:
                self._forward(self.serving.socket)
            return self.serving

    def facts(self, path: str | None, timeout_s: float) -> dict[str, Any]:
        """What ``remote.ssh.gather`` gathers (host facts, the target's, a directory's listing) as JSON,
        asked of the agent: no new ssh session. Raises ``HostError``."""
        with self._lock:
            if not self.alive:
                raise HostError(f"{self.spec}: no ssh connection" + (f" ({self.lost})" if self.lost else ""))
            kind, data = self._ask({"op": "facts", "path": path}, timeout_s, "gathering facts")
        if kind != "IOLAB-FACTS":
            raise HostError(f"{self.spec}: gathering facts failed: {data.get('error')}")
        return data

    def sample(self, timeout_s: float) -> dict[str, Any]:
        """The host's ``/proc/stat``, ``/proc/diskstats``, ``/proc/net/dev``, its interfaces' speeds,
        ``SC_CLK_TCK``, name, kernel and CPUs (``observe.sshsample``), asked of the agent: no new ssh
        session. Raises ``HostError`` (no connection, no answer within ``timeout_s``)."""
        with self._lock:
            if not self.alive:
                raise HostError(f"{self.spec}: no ssh connection to sample over" + (f" ({self.lost})" if self.lost
                                                                                   else ""))
            kind, data = self._ask({"op": "sample"}, timeout_s, "sampling /proc and /sys")
        if kind != "IOLAB-SAMPLE":
            raise HostError(f"{self.spec}: sampling /proc and /sys failed: {data.get('error')}")
        return data

    def _forward(self, remote: str) -> None:
        argv = [*ssh_command(), "-o", f"ControlPath={self.control}", "-O", "forward",
                "-L", f"{self.local_socket}:{remote}", *self.spec.ssh_destination]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=CONNECT_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise HostError(f"{self.spec}: ssh cannot forward the fio server's socket: "
                            f"{done.stderr.strip() or f'ssh exited {done.returncode}'}")
        self._forwarded = True

    def close(self) -> None:
        """End the session: the agent stops the fio server and removes its directory (stdin ends);
        ssh is given 5 s to leave, then killed. Idempotent."""
        self.hang_up()
        self.wait_closed(time.monotonic() + 5)

    def hang_up(self) -> None:
        """``close``'s first half: the ``on_close`` hooks run, and the agent's stdin ends (it stops the
        server and leaves), without waiting for it. Idempotent."""
        with self._lock:
            self._closed = True
            proc, self._proc = self._proc, None
            hooks, self._on_close = self._on_close, []
            if proc is not None:
                self._leaving = proc
        for fn in hooks:
            with contextlib.suppress(Exception):  # closing must go on: the servers end with the run
                fn()
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # type: ignore[union-attr]

    def wait_closed(self, deadline: float) -> None:
        """``close``'s second half: ssh waited for until ``deadline`` (``time.monotonic``), then killed;
        iolab's directory for the connection removed."""
        proc, self._leaving = self._leaving, None
        if proc is not None:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.local_dir, ignore_errors=True)

    def _ask(self, request: Mapping[str, Any], timeout_s: float, what: str) -> tuple[str, dict[str, Any]]:
        """Send ``request`` to the agent and return its answer (``_answer``); the caller holds ``_lock``."""
        self._seq += 1
        self._send(json.dumps({**request, "seq": self._seq}))
        return self._answer(timeout_s, what, self._seq)

    def _send(self, line: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
        except OSError:
            pass  # ssh has gone: its reason comes with the answer that does not arrive

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)

    def _answer(self, timeout_s: float, what: str, seq: int | None = None) -> tuple[str, dict[str, Any]]:
        """The agent's next ``IOLAB-…`` line (with ``seq``, the answer to that request: a late answer to
        an earlier one that timed out is skipped). Raises ``HostError`` with ssh's reason when ssh ends
        first, or when nothing comes within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise HostError(f"{self.spec}: {what} over ssh took longer than {timeout_s:g} s"
                                + (f" ({self._ssh_said()})" if self._ssh_said() != "no message" else ""),
                                hint=HINT) from None
            if line is None:
                if self._proc is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self._proc.wait(timeout=5)
                code = self._proc.returncode if self._proc is not None else None
                raise HostError(f"{self.spec}: {what} over ssh failed: {self._ssh_said(code)}", hint=HINT)
            kind, _, rest = line.strip().partition(" ")
            if kind.startswith("IOLAB-"):
                data = json.loads(rest)
                if seq is None or data.get("seq") in (seq, None):  # None: the agent broke before reading it
                    return kind, data

    def _ssh_said(self, code: int | None = None) -> str:
        """ssh's last words (its stderr), e.g. ``Permission denied (publickey).`` or ``Host key
        verification failed.``"""
        with contextlib.suppress(OSError):
            lines = [x.strip() for x in (self.local_dir / "ssh.stderr").read_text(errors="replace").splitlines()
                     if x.strip()]
            if lines:
                return " / ".join(lines[-3:])
        return f"ssh exited {code}" if code is not None else "no message"


HINT = ("an ssh:// host needs ssh without a prompt (a key or agent, the host's key in known_hosts), python3, fio "
        "and bubblewrap there; set $IOLAB_SSH for ssh options (ssh -F CONFIG)")

_lock = threading.Lock()
_connections: dict[HostSpec, Connection] = {}


def connection(spec: HostSpec) -> Connection | None:
    """The open connection to ``spec`` in this process, if any."""
    with _lock:
        return _connections.get(spec)


#: Seconds a failed connection's error stands for: asked again within them (the plan's preflight
#: right after ``connect_soon``), the host is not tried a second time.
_FAILED_FOR_S = 30.0


def connect(spec: HostSpec, timeout_s: float = CONNECT_TIMEOUT_S, retry: bool = False) -> Connection:
    """The connection to ``spec``, opened once per process (again when it was lost; with ``retry``,
    also within ``_FAILED_FOR_S`` of a failed attempt); one being opened by another thread
    (``connect_soon``) is waited for. Raises ``HostError`` as ``Connection.open``."""
    with _lock:
        found = _connections.get(spec)
        opener = found is None or (found.ready.is_set() and not found.alive and (
            found.error is None or retry or time.monotonic() - found.failed_at > _FAILED_FOR_S))
        if opener:
            stale, found = found, Connection(spec)
            _connections[spec] = found
    assert found is not None
    if not opener:
        found.ready.wait(timeout_s + 10)
        if found.error is not None:
            raise HostError(found.error.message, hint=found.error.hint)
        if not found.ready.is_set():
            raise HostError(f"{spec}: connecting over ssh did not end within {timeout_s + 10:g} s", hint=HINT)
        return found
    if stale is not None:
        stale.close()
    try:
        found.open(timeout_s)
    except HostError as exc:
        found.error, found.failed_at = exc, time.monotonic()
        found.close()
        raise
    except BaseException:
        with _lock:
            _connections.pop(spec, None)
        found.close()
        raise
    finally:
        found.ready.set()
    return found


def answers(spec: HostSpec, timeout_s: float) -> bool:
    """Whether ``spec`` answers over ssh now: a connection (opened again when it was lost, as after
    a host's power cut) whose agent replies within ``timeout_s``."""
    try:
        connect(spec, retry=True).facts(None, timeout_s)
    except HostError:
        return False
    return True


def connect_soon(specs: Sequence[HostSpec]) -> None:
    """Start connecting to ``specs`` in the background (ssh's login overlaps the plan's local work);
    ``connect`` returns or raises what came of it."""
    def one(spec: HostSpec) -> None:
        with contextlib.suppress(HostError):
            connect(spec)

    for spec in dict.fromkeys(specs):
        threading.Thread(target=one, args=(spec,), daemon=True, name=f"iolab-ssh-connect-{spec}").start()


def connect_all(specs: Sequence[HostSpec], timeout_s: float = CONNECT_TIMEOUT_S
                ) -> dict[HostSpec, Connection | HostError]:
    """``connect`` to every host at once; the connection or the error per host, in host order."""
    return on_each(list(specs), lambda s: connect(s, timeout_s), timeout_s + 10, "connecting over ssh")


def serve_all(requests: Mapping[HostSpec, tuple[Mapping[str, str], Sequence[str]]], fenced: bool
              ) -> dict[HostSpec, Serving | HostError]:
    """``Connection.serve`` on every host at once (host -> (writable, read)); a host without a
    connection is an error. ``SafetyError`` (the fence refuses) is raised as it is."""
    refused: list[SafetyError] = []

    def one(spec: HostSpec) -> Serving:
        found = connection(spec)
        if found is None or not found.alive:
            raise HostError(f"{spec}: no ssh connection" + (f" ({found.lost})" if found and found.lost else ""))
        try:
            return found.serve(*requests[spec], fenced=fenced)
        except SafetyError as exc:
            refused.append(exc)
            raise HostError(exc.message) from None

    done = on_each(list(requests), one, SERVE_TIMEOUT_S + 15, "starting the fio server")
    if refused:
        raise refused[0]
    return done


def local_socket(spec: HostSpec) -> str:
    """Where fio's server on ``spec`` is reached on this machine. Raises ``ConnectionRefusedError``
    (an ``OSError``, as a TCP host that is down) when no connection serves it."""
    found = connection(spec)
    if found is None or found.serving is None or not found.alive:
        raise ConnectionRefusedError(f"{spec}: no ssh connection serves a fio server")
    return str(found.local_socket)


def close_all(timeout_s: float = 5.0) -> None:
    """Close every connection of this process at once (the end of a run; also at exit): each agent
    told to leave, then each ssh waited for, all within ``timeout_s``."""
    with _lock:
        found = list(_connections.values())
        _connections.clear()
    for c in found:
        c.hang_up()
    deadline = time.monotonic() + timeout_s
    for c in found:
        c.wait_closed(deadline)


atexit.register(close_all)
