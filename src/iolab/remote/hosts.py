"""fio host specs: where a fio server listens.

fio's own spellings (``fio_server_parse_string()`` in server.c, HOWTO "Client/Server") are
accepted as they are: ``ip:HOST[,PORT]``, ``ip4:…``, ``ip6:HOST[,PORT]``, ``HOST[,PORT]`` and
``sock:/path``. iolab also reads the spellings people type, which fio itself would reject:
``HOST:PORT`` and ``[IPV6]:PORT``, and a bare IPv6 address. The default port is fio's, 8765.

``ssh://[USER@]HOST[:PORT]`` is iolab's own: a host reached with the system ssh client, where iolab
starts a fio server on a Unix socket for the run (``remote.sshhost``); no port of fio's is opened.
Its port is ssh's (None: whatever the ssh configuration says, 22 by default).

A hosts file (fio's ``--client=FILE``) holds specs separated by white space; iolab also allows
``#`` comments.
"""

from __future__ import annotations

import ipaddress
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ..errors import HostError

#: fio's default server port (``fio_net_port``, server.c).
DEFAULT_PORT = 8765

_HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")


@dataclass(frozen=True)
class HostSpec:
    """A fio server address: ``kind`` is ``ip`` (IPv4 or a host name), ``ip6``, ``sock`` or ``ssh``.

    ``host`` is the address, name or (for ``sock``) the socket path; ``port`` is None for a
    socket, and for an ``ssh`` host is ssh's port (None: the ssh configuration's); ``user`` is the
    ssh user (``ssh`` only; None: the configuration's). ``label`` is how iolab names the host
    everywhere (``10.0.0.11:8765``, ``[fd00::13]:8765``, ``sock:/run/fio.sock``,
    ``ssh://lab@10.0.0.11``); ``fio_arg`` is fio's own spelling, and for an ``ssh`` host its label
    (fio never sees it: its client reaches the host through ssh's forwarded socket).
    """

    kind: str
    host: str
    port: int | None = DEFAULT_PORT
    user: str | None = None

    @property
    def label(self) -> str:
        if self.kind == "sock":
            return f"sock:{self.host}"
        if self.kind == "ssh":
            host = f"[{self.host}]" if ":" in self.host else self.host
            return f"ssh://{self.user + '@' if self.user else ''}{host}{f':{self.port}' if self.port else ''}"
        return f"[{self.host}]:{self.port}" if self.kind == "ip6" else f"{self.host}:{self.port}"

    @property
    def fio_arg(self) -> str:
        if self.kind in ("sock", "ssh"):
            return self.label
        return f"{self.kind}:{self.host},{self.port}"

    @property
    def ssh_destination(self) -> list[str]:
        """ssh's arguments naming this host (``[-p PORT] [USER@]HOST``); for a TCP host its address."""
        if self.kind != "ssh":
            return [self.host]
        return [*(["-p", str(self.port)] if self.port else []), f"{self.user + '@' if self.user else ''}{self.host}"]

    def __str__(self) -> str:
        return self.label


def parse(text: str) -> HostSpec:
    """One host spec (see the module docstring). Raises ``ValueError`` saying what is wrong."""
    spec = text.strip()
    if not spec or any(c.isspace() for c in spec):
        raise ValueError(f"expected a host such as 10.0.0.11, 10.0.0.12:8765 or ip6:fd00::13,8765, got {text!r}")
    if spec.startswith("ssh://"):
        return _parse_ssh(spec, text)
    if spec.startswith("sock:"):
        path = spec[5:]
        if not path.startswith("/"):
            raise ValueError(f"{text!r}: a unix socket needs an absolute path (sock:/run/fio.sock)")
        return HostSpec("sock", path, None)
    kind = None
    for prefix, name in (("ip:", "ip"), ("ip4:", "ip"), ("ip6:", "ip6")):
        if spec.startswith(prefix):
            kind, spec = name, spec[len(prefix):]
    host, port = _split_port(spec, text)
    host = host.removeprefix("[").removesuffix("]")
    if kind is None:
        kind = "ip6" if ":" in host else "ip"
    _check_host(host, kind, text)
    return HostSpec(kind, host, port)


_SSH_USER = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]{0,31}")


def _parse_ssh(spec: str, text: str) -> HostSpec:
    """``ssh://[USER@]HOST[:PORT]``, HOST a name, an IPv4 address or ``[IPv6]``."""
    rest = spec[len("ssh://"):].rstrip("/")
    user = None
    if "@" in rest:
        user, rest = rest.rsplit("@", 1)
        if not _SSH_USER.fullmatch(user):
            raise ValueError(f"{text!r}: {user!r} is not a user name")
    port = None
    if rest.startswith("["):
        host, _, after = rest[1:].partition("]")
        if after and not after.startswith(":"):
            raise ValueError(f"{text!r}: expected ssh://[USER@]HOST[:PORT]")
        port_text = after[1:] if after else None
    else:
        host, _, port_text = rest.partition(":")
        port_text = port_text or None
    if port_text is not None:
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise ValueError(f"{text!r}: the ssh port must be a number 1..65535, got {port_text!r}")
        port = int(port_text)
    if not host:
        raise ValueError(f"{text!r}: no host; expected ssh://[USER@]HOST[:PORT]")
    _check_host(host, "ip6" if ":" in host else "ip", text)
    return HostSpec("ssh", host, port, user)


def _split_port(spec: str, text: str) -> tuple[str, int]:
    """``HOST,PORT`` (fio), ``HOST:PORT`` or ``[V6]:PORT`` (iolab); the port defaults to fio's."""
    port_text = None
    if "," in spec:
        spec, port_text = spec.rsplit(",", 1)
    elif spec.startswith("[") and "]:" in spec:
        spec, port_text = spec.rsplit(":", 1)
    elif spec.count(":") == 1:
        spec, port_text = spec.split(":")
    if port_text is None:
        return spec, DEFAULT_PORT
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r}: the port must be a number 1..65535, got {port_text!r}")
    return spec, int(port_text)


def _check_host(host: str, kind: str, text: str) -> None:
    if kind == "ip6":
        try:
            ipaddress.IPv6Address(host)
            return
        except ValueError:
            if _HOSTNAME.fullmatch(host):
                return
            raise ValueError(f"{text!r}: {host!r} is not an IPv6 address or host name") from None
    if ":" in host:
        raise ValueError(f"{text!r}: an IPv6 address needs ip6: (ip6:{host},{DEFAULT_PORT}) or brackets")
    if not _HOSTNAME.fullmatch(host):
        raise ValueError(f"{text!r}: {host!r} is not an IPv4 address or host name")


def read_file(path: Path) -> list[HostSpec]:
    """The hosts of a hosts file. Raises ``ValueError`` naming ``path:line`` for a bad spec or
    an empty file, ``OSError`` when it cannot be read."""
    hosts = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        for word in line.split("#", 1)[0].split():
            try:
                hosts.append(parse(word))
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: {exc}") from None
    if not hosts:
        raise ValueError(f"{path}: no hosts in the file")
    return hosts


def check_unique(hosts: list[HostSpec]) -> None:
    """Raises ``ValueError`` when a host is listed twice (it would run the job twice)."""
    seen: set[HostSpec] = set()
    for h in hosts:
        if h in seen:
            raise ValueError(f"{h.label} is listed twice")
        seen.add(h)


def label_of(hostname: str, port: int | None) -> str:
    """The label of the host a client-JSON entry names (``hostname``/``port`` as fio prints
    them): a socket is a path (fio prints its default port with it), an address with ``:`` is
    IPv6, an ssh host is named by its label (``remote.client`` writes it so)."""
    if hostname.startswith("ssh://"):
        return hostname
    if port is None or hostname.startswith("/"):
        return f"sock:{hostname}"
    return HostSpec("ip6" if ":" in hostname else "ip", hostname, port).label


T = TypeVar("T")


def on_each(hosts: Sequence[HostSpec], fn: Callable[[HostSpec], T], timeout_s: float,
            what: str) -> dict[HostSpec, T | HostError]:
    """``fn(host)`` for every host at once (one thread each): per host, in host order, what it
    returned or the ``HostError`` it raised. A call still running after ``timeout_s`` counts as a
    ``HostError`` saying that ``what`` did not end (its thread is a daemon and is left behind)."""
    results: dict[HostSpec, T | HostError] = {}

    def one(host: HostSpec) -> None:
        try:
            results[host] = fn(host)
        except HostError as exc:
            results[host] = exc

    threads = [threading.Thread(target=one, args=(h,), daemon=True) for h in hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    return {h: results.get(h, HostError(f"{h}: {what} did not end within {timeout_s:g} s")) for h in hosts}
