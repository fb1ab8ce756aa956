"""Whom to observe: the endpoints of a run's ``observe:`` settings (``describe.observe``) and
its fio servers, and the probe before a run.

Without the key, iolab observes the local host (from /proc and /sys, ``observe.local``: no
exporter needed) and every fio server whose exporter answers before the run (``probe``), and says
which do not; an ``ssh://`` host is read over its ssh connection (``sshsample``: no exporter
either). With the key (or ``--observe``) every endpoint is observed even when it does not answer
yet, so a missing observer is a recorded gap. A watched host whose address is this machine
(``is_this_host``) is this host: its exporter becomes the local row's source, not a second row.
"""

from __future__ import annotations

import concurrent.futures
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..describe.observe import Observe
from ..errors import HostError
from ..remote.hosts import HostSpec
from . import exporter, sshsample
from . import local as local_reader
from .exporter import NodeFacts
from .sampler import Endpoint

#: Seconds an exporter has to answer the probe before a run.
PROBE_TIMEOUT_S = 3.0


def local_address(observe: Observe) -> str:
    """Where this host's figures come from: the exporter named ``local``, else this host's
    /proc and /sys read directly (``local.SELF``)."""
    return observe.local or local_reader.SELF


def server_address(spec: HostSpec, port: int) -> str | None:
    """The exporter of a fio server's host: its address with the exporter's port; None for a
    ``sock:`` server, which is this host; an ``ssh://`` host is its own address (sampled over its
    connection, ``sshsample``: no exporter needed)."""
    if spec.kind == "ssh":
        return spec.label
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
    local_addr = local_address(observe)
    watched = {}
    for name, addr in observe.hosts.items():
        if not is_this_host(addr):
            watched[name] = addr
        elif observe.local is None and local_addr == local_reader.SELF:
            local_addr = addr  # an exporter on this machine, named: this host's source, not a second row
    out: list[tuple[Endpoint, str | None]] = [(Endpoint("local", "local", local_addr), None)]
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
            if sshsample.is_ssh(endpoint.address):
                return Probed(endpoint, target, facts=sshsample.facts(endpoint.address, max(timeout_s, 5.0)))
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
