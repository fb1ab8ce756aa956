"""Whom to observe, as a suite and the command line say it: the suite's ``observe:`` key and
``--observe``, ``--no-observe``, ``--prometheus``.

Suite key (all optional)::

    observe:
      port: 9100                    # node_exporter's port on this host and on every fio server
      local: 127.0.0.1:9100         # this host's exporter (default: none; iolab reads /proc itself)
      hosts:                        # hosts only watched, e.g. a storage target running no fio job
        nvmet: 10.0.0.5:9100        #   (a list of HOST:PORT names each host by its address)
      prometheus: http://prom:9090  # read the series afterwards from this Prometheus server
                                    #   instead of scraping the exporters while jobs run
    observe: false                  # observe nothing

Validated here; ``observe.config`` turns the settings into endpoints and probes them before a run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..remote.hosts import HostSpec
from ..remote.hosts import parse as parse_host

#: node_exporter's default port.
DEFAULT_PORT = 9100


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
