"""A loopback relay per host, so that iolab sees each host's progress and how its connection ended.

fio's client prints no progress when its output is JSON (``client_display_thread_status()``,
client.c), sums the progress of all hosts when it does, and writes its JSON only at the end.
So iolab puts a relay between fio's client and each server: the client connects to
``127.0.0.N:PORT`` (one loopback address per host, so fio's own messages and JSON name each
host distinctly) and the relay copies bytes both ways unchanged. On the way back it reads the
server's messages: the probe reply (who the server is), the progress reports
(``protocol.decode_eta``) and ``STOP`` (the run ended on the server). When the server's side
closes or resets before ``STOP``, the relay records when and how.

The relay connects to the server only when fio's client has said everything that comes before
the run: its probe, the job file and ``RUN`` (``fio_clients_connect()``, ``fio_clients_send_ini()``,
``fio_start_all_clients()`` send them without waiting for an answer, client.c/fio.c@fio-3.33),
and sends them as the connection's first bytes. A fio server reads a connection's messages only
when it looks at the socket, and between looks it sleeps for up to 1 s (``protocol``): a relay
connected in advance met the probe with a sleeping server, and fio's client itself sends ``RUN``
some milliseconds after the job (it calibrates its clock in between), so a bare ``fio --client``
run starts about 1 s after its job reached the server. Sent together, the server reads all of it
at its first look and starts the job at once. Should fio's client ever wait for an answer before
``RUN``, the relay forwards what it has after ``HOLD_S``.

Only fio's control messages cross the relay (job file, progress about once a second, the
final statistics); the I/O itself happens on the hosts. All sockets stay on this machine's
loopback, except the connection to the host.
"""

from __future__ import annotations

import contextlib
import ipaddress
import selectors
import socket
import threading
import time
from collections.abc import Mapping

from .hosts import HostSpec
from .protocol import CMD_PROBE, Eta, MessageReader, NotFio, ProbeReply, connect, decode_eta, decode_probe_reply

CMD_STOP = 12
CMD_RUN = 16
_CHUNK = 65536
#: Seconds the relay waits for fio's client to send ``RUN`` before it forwards what it has.
HOLD_S = 1.0


class Relay:
    """Carries one fio client connection to ``host``; see the module docstring.

    ``open()`` starts listening on ``address``; ``fio_arg`` is what to give fio's ``--client``.
    The connection to the host (bounded by ``timeout_s``) is made when fio's client has sent its
    job; when it fails, ``error`` and ``lost`` say why and fio's client sees the host disconnect.
    ``error`` set before ``open()`` (a host known to be unreachable) keeps the relay closed.
    After ``close()``: ``stopped`` (the server ended its run), ``lost`` (why the connection ended
    early, with the time since the relay started), ``probe``, ``last_eta``. ``eta_seq`` counts
    progress reports, for pollers.
    """

    def __init__(self, host: HostSpec, address: str, timeout_s: float) -> None:
        self.host = host
        self.address = address
        self.timeout_s = timeout_s
        self.error: str | None = None
        self.lost: str | None = None
        self.stopped = False
        self.probe: ProbeReply | None = None
        self.last_eta: Eta | None = None
        self.eta_seq = 0
        self.port = 0
        self._listener: socket.socket | None = None
        self._upstream: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._start = time.monotonic()

    @property
    def fio_arg(self) -> str:
        return f"ip:{self.address},{self.port}"

    def open(self) -> bool:
        """Listen for fio's client; False when ``error`` is already set (the host is left out)."""
        if self.error is not None:
            return False
        try:
            self._listener = socket.create_server((self.address, 0))
        except OSError:
            self.address = "127.0.0.1"  # a loopback without 127/8 routes: share the one address
            self._listener = socket.create_server((self.address, 0))
        self.port = self._listener.getsockname()[1]
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"iolab-relay-{self.host}", daemon=True)
        self._thread.start()
        return True

    def close(self) -> None:
        """Stop relaying and close every socket (idempotent)."""
        self._closing.set()
        if self._thread is not None:
            self._thread.join(5)
        for sock in (self._listener, self._upstream):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()

    def _since(self) -> str:
        return f"{time.monotonic() - self._start:.1f} s after the start"

    def _run(self) -> None:
        assert self._listener is not None
        self._listener.settimeout(0.2)
        client = None
        while client is None and not self._closing.is_set():
            with contextlib.suppress(TimeoutError):
                client, _ = self._listener.accept()
        if client is None:
            return
        with client:
            held = self._hold(client)
            if held is None:
                return
            self._upstream = self._connect(held)
            if self._upstream is None:
                return
            client.settimeout(None)
            self._upstream.settimeout(None)
            self._pump(client, self._upstream)

    def _hold(self, client: socket.socket) -> bytes | None:
        """What fio's client sends up to and including ``RUN`` (or within ``HOLD_S``); None when
        it closes first or the relay is closed."""
        held = b""
        reader: MessageReader | None = MessageReader()
        deadline = time.monotonic() + HOLD_S
        while not self._closing.is_set() and time.monotonic() < deadline:
            client.settimeout(max(0.001, min(0.2, deadline - time.monotonic())))
            try:
                data = client.recv(_CHUNK)
            except TimeoutError:
                continue
            except OSError:
                return None
            if not data:
                return None
            held += data
            try:
                if reader is not None and any(m.opcode == CMD_RUN for m in reader.feed(data)):
                    break
            except NotFio:
                break  # not for the relay to judge: forward it, fio's server will
        return None if self._closing.is_set() else held

    def _connect(self, first: bytes) -> socket.socket | None:
        """The connection to the host with ``first`` sent; None (``error``, ``lost`` set) when
        the host cannot be reached."""
        try:
            return connect(self.host, self.timeout_s, first)
        except TimeoutError:
            self.error = f"no connection within {self.timeout_s:g} s"
        except OSError as exc:
            self.error = "nothing listens there (connection refused)" if isinstance(exc, ConnectionRefusedError) \
                else f"cannot connect: {exc.strerror or exc}"
        self.lost = self.error
        return None

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        reader: MessageReader | None = MessageReader()
        with selectors.DefaultSelector() as sel:
            sel.register(client, selectors.EVENT_READ, upstream)
            sel.register(upstream, selectors.EVENT_READ, client)
            while not self._closing.is_set():
                for key, _ in sel.select(0.2):
                    source, sink = key.fileobj, key.data
                    try:
                        data = source.recv(_CHUNK)  # type: ignore[union-attr]
                    except OSError as exc:
                        data = b""
                        if source is upstream and not self.stopped:
                            self.lost = f"the connection failed {self._since()}: {exc.strerror or exc}"
                    if not data:
                        if source is upstream and not self.stopped and self.lost is None:
                            self.lost = f"the server closed the connection {self._since()}, before its run ended"
                        return
                    try:
                        sink.sendall(data)
                    except OSError:
                        return
                    if source is upstream and reader is not None:
                        try:
                            self._observe(reader, data)
                        except NotFio:
                            reader = None  # keep relaying; fio's client will judge

    def _observe(self, reader: MessageReader, data: bytes) -> None:
        for message in reader.feed(data):
            if message.opcode == CMD_STOP:
                self.stopped = True
            elif message.opcode == CMD_PROBE and self.probe is None:
                with contextlib.suppress(NotFio):
                    self.probe = decode_probe_reply(message)
            else:
                eta = decode_eta(message)
                if eta is not None:
                    self.last_eta = eta
                    self.eta_seq += 1


def loopback_address(index: int) -> str:
    """The loopback address of the ``index``-th relay: 127.0.0.2, 127.0.0.3 ..."""
    return str(ipaddress.IPv4Address("127.0.0.2") + index)


def open_relays(hosts: list[HostSpec], timeout_s: float, unreachable: Mapping[HostSpec, str] | None = None,
                ) -> list[Relay]:
    """One listening relay per host; a host in ``unreachable`` (host -> why) gets a relay with
    that ``error`` and is left out of the job."""
    relays = [Relay(h, loopback_address(i), timeout_s) for i, h in enumerate(hosts)]
    for relay in relays:
        relay.error = (unreachable or {}).get(relay.host)
        relay.open()
    return relays
