"""Network namespaces as remote hosts for client/server tests; everything is removed afterwards.

Usage::

    from netns import lab, requires_netns

    @requires_netns
    def test_something(tmp_path):
        with lab(3) as hosts:
            for h in hosts:
                h.start_fio_server()
            ...  # h.spec() is "10.R.i.2:8765", h.address6 an IPv6 address of the same host

Each host is a namespace ``iolab-<tag>-h<i>`` joined to this machine by a veth pair: this end
``il<tag>h<i>`` has 10.R.i.1/24 and fdXX:…:i::1/64, the namespace end ``eth0`` has 10.R.i.2 and
fdXX:…:i::2. ``R`` and the IPv6 prefix are random and checked against the machine's routes, so
they are used only inside the namespaces the test made, and two test runs never collide. Traffic
from a test goes only to these addresses or to loopback.

On exit, in this order and by id: every process running in each namespace (all started by the
test: servers, listeners, sshd) is killed by its pid, the namespace is deleted (which deletes its
veth end and so the pair), and a veth end that survived is deleted by name. A failing test
cleans up the same way (``try``/``finally``).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest


def netns_unavailable_reason() -> str | None:
    """Why namespace tests cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "ip (iproute2) is not installed"
    if shutil.which("fio") is None:
        return "fio is not installed"
    return None


#: Marks a test as needing root and iproute2; skips it with the reason when unavailable.
requires_netns = pytest.mark.skipif(netns_unavailable_reason() is not None, reason=netns_unavailable_reason() or "")

#: Debian's node_exporter (package prometheus-node-exporter).
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"
#: Marks a test as needing node_exporter.
requires_node_exporter = pytest.mark.skipif(not os.access(NODE_EXPORTER, os.X_OK),
                                            reason="node_exporter is not installed (Debian prometheus-node-exporter)")


def node_exporter_argv(address: str, port: int) -> list[str]:
    """node_exporter on ``address:port`` with loop devices in its diskstats (excluded by
    default) and the CPU model (``--collector.cpu.info``)."""
    bind = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    return [NODE_EXPORTER, f"--web.listen-address={bind}", r"--collector.diskstats.device-exclude=^(ram|fd)\d+$",
            "--collector.cpu.info"]


@contextlib.contextmanager
def local_node_exporter(port: int | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """node_exporter on 127.0.0.1 of this machine (a free port); yields ``(address, process)``
    and kills it by pid afterwards."""
    if port is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    proc = subprocess.Popen(node_exporter_argv("127.0.0.1", port), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_listening("127.0.0.1", port, proc)
        yield f"127.0.0.1:{port}", proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _ip(*args: str) -> str:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


@dataclass
class Host:
    """One namespace host. ``processes`` are what the test started in it (also killed by pid
    through the namespace listing on exit)."""

    index: int
    namespace: str
    veth: str
    address: str
    address6: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def spec(self, port: int = 8765, ipv6: bool = False) -> str:
        """A fio host spec for this host: ``10.R.i.2:8765`` or ``ip6:fd…::2,8765``."""
        return f"ip6:{self.address6},{port}" if ipv6 else f"{self.address}:{port}"

    def popen(self, *argv: str, log: Path | None = None) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside the namespace; stdout and stderr go to ``log`` (or nowhere)."""
        out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 (the child keeps it)
        proc = subprocess.Popen(["ip", "netns", "exec", self.namespace, *argv], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        if log:
            out.close()  # type: ignore[union-attr]
        self.processes.append(proc)
        return proc

    def start_fio_server(self, port: int = 8765, ipv6: bool = False,
                         log: Path | None = None) -> subprocess.Popen[bytes]:
        """``fio --server`` on this host's address; returns once it accepts connections."""
        bind = f"ip6:{self.address6},{port}" if ipv6 else f"ip:{self.address},{port}"
        proc = self.popen("fio", f"--server={bind}", log=log)
        wait_listening(self.address6 if ipv6 else self.address, port, proc)
        return proc

    def start_node_exporter(self, port: int = 9100, hostname: str | None = None,
                            log: Path | None = None) -> subprocess.Popen[bytes]:
        """node_exporter on this host's address; with ``hostname`` in its own UTS namespace
        under that name (so its facts show which host answered). Returns once it listens."""
        argv = node_exporter_argv(self.address, port)
        if hostname:
            argv = ["unshare", "--uts", "sh", "-c", f'hostname {hostname} && exec "$@"', "sh", *argv]
        proc = self.popen(*argv, log=log)
        wait_listening(self.address, port, proc)
        return proc

    def start_garbage_listener(self, port: int, lifetime_s: float = 30.0, reply: bytes | None = b"HTTP/1.0 400 "
                               b"Bad Request\r\n\r\nnot a fio server\r\n") -> subprocess.Popen[bytes]:
        """A TCP listener that accepts, writes ``reply`` (or nothing when None, and keeps the
        connection open) and exits after ``lifetime_s``."""
        code = (
            "import socket, sys, time\n"
            f"s = socket.create_server(({self.address!r}, {port}))\n"
            f"s.settimeout(0.2); end = time.monotonic() + {lifetime_s}; held = []\n"
            "while time.monotonic() < end:\n"
            "    try:\n"
            "        c, _ = s.accept()\n"
            "    except TimeoutError:\n"
            "        continue\n"
            f"    reply = {reply!r}\n"
            "    if reply is None:\n"
            "        held.append(c)\n"
            "    else:\n"
            "        c.sendall(reply); c.close()\n"
        )
        proc = self.popen(sys.executable, "-c", code)
        wait_listening(self.address, port, proc)
        return proc

    def kill_all(self) -> None:
        """SIGKILL every process in this namespace, by pid (the namespace is the test's own)."""
        for _ in range(20):
            pids = [int(p) for p in _ip("netns", "pids", self.namespace).split()]
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        for proc in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)


def wait_listening(address: str, port: int, proc: subprocess.Popen[bytes] | None = None, timeout_s: float = 10) -> None:
    """Return once something accepts TCP connections on ``address:port``."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited {proc.returncode} before listening on {address}:{port}")
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on {address}:{port} after {timeout_s} s") from None
            time.sleep(0.05)


def _free_prefixes() -> tuple[int, str]:
    """A second octet R with 10.R.0.0/16 unused here, and a random ULA /48 prefix."""
    routes = _ip("-4", "route", "show", "table", "all") + _ip("-4", "addr")
    used = {int(part.split(".")[1]) for part in routes.split() if part.startswith("10.") and part.count(".") >= 1
            and part.split(".")[1].isdigit()}
    octet = random.choice([r for r in range(64, 255) if r not in used])
    prefix = f"fd{random.randrange(256):02x}:{random.randrange(65536):04x}:{random.randrange(65536):04x}"
    return octet, prefix


@contextlib.contextmanager
def lab(count: int) -> Iterator[list[Host]]:
    """``count`` namespace hosts (see the module docstring), removed on exit."""
    tag = f"{random.randrange(16**6):06x}"
    octet, prefix6 = _free_prefixes()
    hosts: list[Host] = []
    try:
        for i in range(1, count + 1):
            host = Host(index=i, namespace=f"iolab-{tag}-h{i}", veth=f"il{tag}h{i}", address=f"10.{octet}.{i}.2",
                        address6=f"{prefix6}:{i}::2")
            _ip("netns", "add", host.namespace)
            hosts.append(host)
            _ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.namespace)
            _ip("addr", "add", f"10.{octet}.{i}.1/24", "dev", host.veth)
            _ip("-6", "addr", "add", f"{prefix6}:{i}::1/64", "dev", host.veth, "nodad")
            _ip("link", "set", host.veth, "up")
            _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
            _ip("-n", host.namespace, "-6", "addr", "add", f"{host.address6}/64", "dev", "eth0", "nodad")
            _ip("-n", host.namespace, "link", "set", "eth0", "up")
            _ip("-n", host.namespace, "link", "set", "lo", "up")
        yield hosts
    finally:
        for host in hosts:
            with contextlib.suppress(RuntimeError):
                host.kill_all()
            with contextlib.suppress(RuntimeError):
                _ip("netns", "del", host.namespace)
            with contextlib.suppress(RuntimeError):
                if host.veth in _ip("-o", "link", "show"):
                    _ip("link", "del", host.veth)


SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def start_sshd(host: Host, tmp_path: Path) -> dict[str, str]:
    """sshd in the host's namespace (port 2222), with keys made for the test; returns the env for
    iolab's ssh (``IOLAB_SSH``)."""
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / name)], check=True)
    (tmp_path / "authorized_keys").write_text((tmp_path / "client_key.pub").read_text())
    (tmp_path / "sshd_config").write_text(
        f"ListenAddress {host.address}:2222\nHostKey {tmp_path / 'host_key'}\n"
        f"AuthorizedKeysFile {tmp_path / 'authorized_keys'}\nPidFile {tmp_path / 'sshd.pid'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nStrictModes no\n")
    (tmp_path / "ssh_config").write_text(
        f"Host *\n  Port 2222\n  User root\n  IdentityFile {tmp_path / 'client_key'}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {tmp_path / 'known_hosts'}\n  StrictHostKeyChecking accept-new\n  LogLevel ERROR\n")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    wait_listening(host.address, 2222, host.popen(SSHD, "-D", "-e", "-f", str(tmp_path / "sshd_config"),
                                                  log=tmp_path / "sshd.log"))
    return {"IOLAB_SSH": f"ssh -F {tmp_path / 'ssh_config'}"}


#: Marks a test as needing sshd and ssh (Debian openssh-server, openssh-client).
requires_sshd = pytest.mark.skipif(not Path(SSHD).exists() or shutil.which("ssh") is None,
                                   reason="openssh-server/client missing")


def start_sshds(hosts: list[Host], tmp_path: Path, *, strict: bool = False,
                hide: dict[int, str] | None = None) -> dict[str, str]:
    """sshd (port 2222) in each host's namespace, one host key each, one client key for all; returns
    the env for iolab's ssh (``IOLAB_SSH``: one ``ssh -F CONFIG`` naming every host by address).

    ``strict`` makes the client refuse unknown host keys (``StrictHostKeyChecking yes`` with an
    empty known_hosts) instead of accepting new ones. ``hide`` (host index -> program path) runs
    that host's sshd in a mount namespace of its own where the program is an empty, non-executable
    file: on that host the program is not installed (e.g. ``/usr/bin/bwrap``)."""
    key = tmp_path / "client_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    (tmp_path / "authorized_keys").write_text((tmp_path / "client_key.pub").read_text())
    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "absent").write_text("")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    config = []
    for host in hosts:
        d = tmp_path / f"h{host.index}"
        d.mkdir()
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key")], check=True)
        (d / "sshd_config").write_text(
            f"ListenAddress {host.address}:2222\nHostKey {d / 'host_key'}\n"
            f"AuthorizedKeysFile {tmp_path / 'authorized_keys'}\nPidFile {d / 'sshd.pid'}\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "UsePAM no\nStrictModes no\n")
        argv = [SSHD, "-D", "-e", "-f", str(d / "sshd_config")]
        hidden = (hide or {}).get(host.index)
        if hidden:
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    f'mount --bind {tmp_path / "absent"} {hidden} && exec "$@"', "sh", *argv]
        wait_listening(host.address, 2222, host.popen(*argv, log=d / "sshd.log"))
        config.append(f"Host {host.address}\n  Port 2222\n  User root\n  IdentityFile {key}\n  IdentitiesOnly yes\n"
                      f"  UserKnownHostsFile {tmp_path / 'known_hosts'}\n"
                      f"  StrictHostKeyChecking {'yes' if strict else 'accept-new'}\n  LogLevel ERROR\n")
    (tmp_path / "ssh_config").write_text("".join(config))
    return {"IOLAB_SSH": f"ssh -F {tmp_path / 'ssh_config'}"}


def listening_tcp(host: Host) -> list[str]:
    """``ss -ltnH`` in the host's namespace: one line per listening TCP socket (local address:port)."""
    out = subprocess.run(["ip", "netns", "exec", host.namespace, "ss", "-ltnH"], capture_output=True, text=True,
                         check=True).stdout
    return sorted(line.split()[3] for line in out.splitlines() if line.strip())
