"""Whom to observe: the suite's ``observe:`` key, ``--observe``, and the probe before a run.

Suite key (all optional)::

    observe:
      port: 9100                    # node_exporter's port on this host and on every fio server
      local: 127.0.0.1:9100         # this host's exporter (default: none; iolab reads /proc itself)
      hosts:                        # hosts only watched, e.g. a storage target running no fio job
        nvmet: 10.0.0.5:9100        #   (a list of HOST:PORT names each host by its address)
      prometheus: http://prom:9090  # read the series afterwards from this Prometheus server
                                    #   instead of scraping the exporters while jobs run
    observe: false                  # observe nothing

Without the key, iolab observes the local host (from /proc and /sys, ``observe.local``: no
exporter needed) and every fio server whose exporter answers before the run (``probe``), and says
which do not. With the key (or ``--observe``) every endpoint is observed even when it does not
answer yet, so a missing observer is a recorded gap. A watched host whose address is this machine
(``is_this_host``) is this host: its exporter becomes the local row's source, not a second row.
"""

from __future__ import annotations

import concurrent.futures
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import HostError
from ..remote.hosts import HostSpec
from ..remote.hosts import parse as parse_host
from . import exporter
from . import local as local_reader
from .exporter import NodeFacts
from .sampler import Endpoint

#: node_exporter's default port.
DEFAULT_PORT = 9100
#: Seconds an exporter has to answer the probe before a run.
PROBE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Observe:
    """A suite's ``observe:`` settings (see the module docstring). ``asked`` is True when the
    suite or the command line named observers (then every endpoint is observed)."""

    enabled: bool = True
    port: int = DEFAULT_PORT
    local: str | None = None
    hosts: Mapping[str, str] = field(default_factory=dict)
    prometheus: str | None = None
    asked: bool = False

    @property
    def local_address(self) -> str:
        """Where this host's figures come from: the exporter named ``local``, else this host's
        /proc and /sys read directly (``local.SELF``)."""
        return self.local or local_reader.SELF


def address(text: str, default_port: int = DEFAULT_PORT) -> str:
    """An exporter address as ``host:port`` or ``[v6]:port`` from ``host``, ``host:port``,
    ``[v6]:port`` or ``ip6:v6,port``. Raises ``ValueError`` saying what is wrong."""
    spec = parse_host(text)
    if spec.kind == "sock":
        raise ValueError(f"{text!r}: node_exporter listens on TCP, not on a unix socket")
    bare = text.removeprefix("ip:").removeprefix("ip4:")
    explicit = "," in text or "]:" in text or (spec.kind == "ip" and ":" in bare)
    port = spec.port if explicit and spec.port else default_port
    return HostSpec(spec.kind, spec.host, port).label


def check_observe(raw: Any) -> Observe:
    """Validate a suite's ``observe:`` value. Raises ``ValueError`` naming the key."""
    if raw is False:
        return Observe(enabled=False, asked=True)
    if raw is True or raw is None:
        return Observe(asked=True)
    if not isinstance(raw, Mapping):
        raise ValueError("expected true, false or a mapping such as {port: 9100, hosts: {nvmet: 10.0.0.5:9100}}")
    unknown = set(raw) - {"port", "local", "hosts", "prometheus"}
    if unknown:
        raise ValueError(f"{sorted(unknown)[0]}: unknown key (use port, local, hosts, prometheus)")
    port = raw.get("port", DEFAULT_PORT)
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise ValueError(f"port: expected a TCP port 1..65535, got {port!r}")
    hosts_raw = raw.get("hosts") or {}
    if isinstance(hosts_raw, list):
        hosts_raw = {str(h): h for h in hosts_raw}
    if not isinstance(hosts_raw, Mapping):
        raise ValueError("hosts: expected a mapping NAME: HOST:PORT or a list of HOST:PORT")
    hosts = {}
    for name, value in hosts_raw.items():
        try:
            hosts[str(name)] = address(str(value), port)
        except ValueError as exc:
            raise ValueError(f"hosts.{name}: {exc}") from None
    local = raw.get("local")
    try:
        local = address(str(local), port) if local is not None else None
    except ValueError as exc:
        raise ValueError(f"local: {exc}") from None
    prometheus = raw.get("prometheus")
    if prometheus is not None and not str(prometheus).startswith(("http://", "https://")):
        raise ValueError(f"prometheus: expected an http:// or https:// URL, got {prometheus!r}")
    return Observe(port=port, local=local, hosts=hosts, prometheus=prometheus, asked=True)


def with_args(observe: Observe, args: Sequence[str], off: bool = False, prometheus: str | None = None) -> Observe:
    """``observe`` with the command line's ``--observe [NAME=]HOST:PORT`` (added; ``NAME`` ``local``
    moves the local exporter), ``--no-observe`` and ``--prometheus URL``. Raises ``ValueError``."""
    if off:
        return Observe(enabled=False, asked=True)
    hosts, local = dict(observe.hosts), observe.local
    for arg in args:
        name, sep, text = arg.partition("=")
        if not sep:
            name, text = arg, arg
        try:
            addr = address(text, observe.port)
        except ValueError as exc:
            raise ValueError(f"--observe {arg!r}: {exc}") from None
        if name == "local":
            local = addr
        else:
            hosts[name] = addr
    if prometheus is not None and not prometheus.startswith(("http://", "https://")):
        raise ValueError(f"--prometheus {prometheus!r}: expected an http:// or https:// URL")
    asked = observe.asked or bool(args) or prometheus is not None
    return Observe(observe.enabled, observe.port, local, hosts, prometheus or observe.prometheus, asked)


def server_address(spec: HostSpec, port: int) -> str | None:
    """The exporter of a fio server's host: its address with the exporter's port; None for a
    ``sock:`` server, which is this host."""
    return None if spec.kind == "sock" else HostSpec(spec.kind, spec.host, port).label


@dataclass(frozen=True)
class Probed:
    """An endpoint and what its probe found: facts, or why there were none."""

    endpoint: Endpoint
    target: str | None
    facts: NodeFacts | None = None
    error: str | None = None


def endpoints(observe: Observe, remote_hosts: Mapping[str, Sequence[HostSpec]]) -> list[tuple[Endpoint, str | None]]:
    """Every exporter to observe, each with the target whose jobs it watches (None: all jobs):
    the local host, the fio servers of each remote target, the watched hosts."""
    if not observe.enabled:
        return []
    local_address = observe.local_address
    watched = {}
    for name, addr in observe.hosts.items():
        if not is_this_host(addr):
            watched[name] = addr
        elif observe.local is None and local_address == local_reader.SELF:
            local_address = addr  # an exporter on this machine, named: this host's source, not a second row
    out: list[tuple[Endpoint, str | None]] = [(Endpoint("local", "local", local_address), None)]
    for target, specs in remote_hosts.items():
        for spec in specs:
            server = server_address(spec, observe.port)
            if server is not None:
                out.append((Endpoint(spec.label, "server", server), target))
    out += [(Endpoint(name, "observed", addr), None) for name, addr in watched.items()]
    return out


def is_this_host(address: str) -> bool:
    """Whether an exporter's ``host:port`` (or ``[v6]:port``) is on this machine: its host resolves
    to an address that a socket here can bind (loopback, or one of this network namespace's
    interfaces). A name that does not resolve is not this host."""
    host = address.rsplit(":", 1)[0].strip("[]")
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    for family, _, _, _, sockaddr in infos:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((sockaddr[0], 0, *sockaddr[2:]))
                return True
        except OSError:
            continue
    return False


def probe(found: Sequence[tuple[Endpoint, str | None]], timeout_s: float = PROBE_TIMEOUT_S) -> list[Probed]:
    """Read every endpoint's facts at once (``exporter.facts``), in order."""
    def one(item: tuple[Endpoint, str | None]) -> Probed:
        endpoint, target = item
        if endpoint.address == local_reader.SELF:
            from ..facts.host import host_facts
            return Probed(endpoint, target, facts=NodeFacts(host_facts()))
        try:
            return Probed(endpoint, target, facts=exporter.facts(endpoint.address, timeout_s))
        except HostError as exc:
            return Probed(endpoint, target, error=exc.message)

    if not found:
        return []
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(found))) as pool:
        return list(pool.map(one, found))


def chosen(observe: Observe, probed: Sequence[Probed]) -> list[Probed]:
    """The endpoints a run observes: all when asked for (see the module docstring), else those
    that answered."""
    return list(probed) if observe.asked else [p for p in probed if p.error is None]
