"""An ``ssh://`` host observed without node_exporter: its /proc and /sys read over the run's ssh connection.

Per host and run, one more session rides on the host's ssh connection (``remote.sshhost``; no new
login): ``python3 -u -c PROGRAM`` (``_SAMPLER``: standard library only) that answers each line iolab
writes with one JSON line holding the host's ``/proc/stat``, ``/proc/diskstats``, ``/proc/net/dev``,
its interfaces' ``/sys/class/net/*/speed``, ``SC_CLK_TCK`` and ``uname``. iolab asks on the
observer's own schedule (``sampler``: once a second), so a sample's time is the middle of its
request, as for an exporter's scrape; the texts are reduced by the very function that reduces this
host's (``local.reduce``), so CPU µs per I/O, NIC and device columns mean the same for every host.

The program ends at its stdin's EOF: when iolab closes the session (before the connection closes,
``sshhost.Connection.on_close``), when iolab dies, or when the connection drops. A request that finds
the session gone starts it again (a new session on the same connection, or a gap while there is none).
"""

from __future__ import annotations

import contextlib
import json
import queue
import shlex
import subprocess
import threading
from typing import IO, Any

from ..errors import HostError
from ..model import HostFacts
from ..remote import hosts as host_specs
from ..remote import sshhost
from ..remote.hosts import HostSpec
from . import local
from .exporter import NodeFacts, Scrape

#: ``HostSamples.source`` of an ``ssh://`` host's samples.
SOURCE = "/proc and /sys over ssh (iolab)"

_SAMPLER = r'''
import json, os, platform, sys


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


while sys.stdin.readline():
    netdev = read("/proc/net/dev") or ""
    names = [line.partition(":")[0].strip() for line in netdev.splitlines()[2:] if ":" in line]
    sys.stdout.write(json.dumps({"stat": read("/proc/stat"), "diskstats": read("/proc/diskstats"), "netdev": netdev,
                                 "speeds": {n: read("/sys/class/net/%s/speed" % n) for n in names},
                                 "hz": os.sysconf("SC_CLK_TCK"), "host": platform.node(), "kernel": platform.release(),
                                 "cpus": os.cpu_count()}) + "\n")
    sys.stdout.flush()
'''


def is_ssh(address: str) -> bool:
    """Whether an endpoint's address is an ``ssh://`` host (sampled here, not scraped)."""
    return address.startswith("ssh://")


class _Session:
    """The sampling program on one host, over its connection."""

    def __init__(self, spec: HostSpec, conn: sshhost.Connection) -> None:
        argv = [*conn.ssh_args(), f"python3 -u -c {shlex.quote(_SAMPLER)}"]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.lock = threading.Lock()
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True,
                         name=f"iolab-sample-{spec}").start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line)
        self.lines.put(None)

    def ask(self, timeout_s: float) -> dict[str, Any] | None:
        """One answer; None when the session has ended. Raises ``queue.Empty`` past ``timeout_s``."""
        with self.lock:
            while not self.lines.empty():  # a late answer to an earlier request that timed out
                if self.lines.get_nowait() is None:
                    return None
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("\n")
                self.proc.stdin.flush()
            except OSError:
                return None
            line = self.lines.get(timeout=timeout_s)
            return None if line is None else dict(json.loads(line))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_lock = threading.Lock()
_sessions: dict[HostSpec, _Session] = {}


def _session(spec: HostSpec) -> _Session:
    conn = sshhost.connection(spec)
    if conn is None or not conn.alive:
        raise HostError(f"{spec}: no ssh connection to sample over" + (f" ({conn.lost})" if conn and conn.lost else ""))
    with _lock:
        found = _sessions.get(spec)
        if found is not None and found.proc.poll() is None:
            return found
        made = _sessions[spec] = _Session(spec, conn)
    conn.on_close(lambda: _close(spec))
    return made


def _close(spec: HostSpec) -> None:
    with _lock:
        found = _sessions.pop(spec, None)
    if found is not None:
        found.close()


def _answer(address: str, timeout_s: float) -> dict[str, Any]:
    spec = host_specs.parse(address)
    session = _session(spec)
    try:
        data = session.ask(timeout_s)
    except queue.Empty:
        raise HostError(f"{spec}: no sample over ssh within {timeout_s:g} s") from None
    if data is None:
        said = ""
        with contextlib.suppress(OSError, ValueError):
            session.proc.wait(timeout=1)
            said = (session.proc.stderr.read() if session.proc.stderr else "").strip()  # type: ignore[union-attr]
        _close(spec)
        raise HostError(f"{spec}: the sampling session over ssh ended" + (f": {said}" if said else ""))
    if data.get("stat") is None:
        raise HostError(f"{spec}: cannot read /proc/stat there")
    return data


def scrape(address: str, timeout_s: float) -> Scrape:
    """One reduced sample of the ``ssh://`` host ``address`` (see the module docstring). Raises
    ``HostError`` (no connection, no answer in time, the session ended)."""
    data = _answer(address, timeout_s)
    return local.reduce(data["stat"], data.get("diskstats") or "", data.get("netdev") or "",
                        dict(data.get("speeds") or {}), float(data["hz"]))


def facts(address: str, timeout_s: float) -> NodeFacts:
    """What a sample says of the host itself (name, kernel, CPUs), for the plan. Raises ``HostError``."""
    data = _answer(address, timeout_s)
    return NodeFacts(HostFacts(hostname=data.get("host"), kernel=data.get("kernel"), cpu_count=data.get("cpus")))
