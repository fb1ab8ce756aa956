"""The relay between fio's client and one host (``remote.relay``), its bookkeeping seen on a recorded
conversation (``tests/data/remote``): in-process stand-ins replay what fio's client sent and what its
server answered, over loopback and a Unix socket. Real fio through relays:
``tests/integration/test_remote_protocol.py`` and the remote system tests."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import fiowire
from iolab.remote import protocol, relay
from iolab.remote.hosts import HostSpec

SESSION = fiowire.load()
MESSAGES = fiowire.split(SESSION.client)
#: What fio's client sends before it waits for anything: probe, job, RUN.
UP_TO_RUN = b"".join(raw for _, raw in MESSAGES[:[m.opcode for m, _ in MESSAGES].index(relay.CMD_RUN) + 1])


@dataclass
class Server:
    """A stand-in for a fio server on a Unix socket: it records what reached it (and when it was
    connected), answers with ``answer`` once it has read ``expect`` bytes, then closes."""

    path: Path
    answer: bytes
    expect: int
    got: bytes = b""
    accepted_at: float | None = None
    thread: threading.Thread | None = None
    _listener: socket.socket = field(default_factory=lambda: socket.socket(socket.AF_UNIX))

    @property
    def spec(self) -> HostSpec:
        return HostSpec("sock", str(self.path), None)

    def start(self) -> Server:
        self._listener.bind(str(self.path))
        self._listener.listen()
        self._listener.settimeout(10)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        return self

    def _serve(self) -> None:
        with self._listener:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
        self.accepted_at = time.monotonic()
        with conn:
            conn.settimeout(10)
            while len(self.got) < self.expect:
                data = conn.recv(65536)
                if not data:
                    return
                self.got += data
            for i in range(0, len(self.answer), 4096):  # as a server's messages come, in pieces
                conn.sendall(self.answer[i:i + 4096])


def client(port: int, address: str, first: bytes, rest: bytes = b"", pause_s: float = 0.0) -> tuple[bytes, float]:
    """fio's client's part: connect to the relay, send ``first``, wait ``pause_s``, send ``rest``, read
    until the relay closes. Returns what came back, and when ``first`` began to be sent (the relay may
    connect on as soon as its last byte is in)."""
    with socket.create_connection((address, port), timeout=10) as sock:
        sent_at = time.monotonic()
        sock.sendall(first)
        time.sleep(pause_s)
        if rest:
            sock.sendall(rest)
        back = b""
        while True:
            data = sock.recv(65536)
            if not data:
                return back, sent_at
            back += data


def test_a_relayed_run_arrives_whole_and_is_read_on_the_way_back(tmp_path):
    """The relay connects only when probe, job and RUN are there and sends them as the first bytes;
    it copies both ways unchanged, and on the way back reads the probe reply, every progress report
    and STOP: a run that ended on the server, nothing lost."""
    server = Server(tmp_path / "fio.sock", SESSION.server, len(SESSION.client)).start()
    (r,) = relay.open_relays([server.spec], timeout_s=5)
    try:
        assert r.fio_arg == f"ip:{r.address},{r.port}" and r.address in ("127.0.0.2", "127.0.0.1")
        back, sent_at = client(r.port, r.address, SESSION.client)
    finally:
        r.close()
    assert server.got == SESSION.client and back == SESSION.server
    assert server.accepted_at is not None and server.accepted_at >= sent_at  # connected once RUN was there
    assert r.probe == protocol.decode_probe_reply(SESSION.messages("server")[0])
    etas = [e for e in map(protocol.decode_eta, SESSION.messages("server")) if e is not None]
    assert r.eta_seq == len(etas) and r.last_eta == etas[-1]
    assert r.stopped and r.lost is None and r.error is None


def test_the_relay_holds_the_clients_messages_until_run(tmp_path):
    """fio's client sends RUN some milliseconds after its job: nothing reaches the server before RUN,
    then everything at once."""
    server = Server(tmp_path / "fio.sock", SESSION.server, len(UP_TO_RUN)).start()
    (r,) = relay.open_relays([server.spec], timeout_s=5)
    probe_and_job = b"".join(raw for _, raw in MESSAGES[:2])
    try:
        _, sent_at = client(r.port, r.address, probe_and_job, UP_TO_RUN[len(probe_and_job):], pause_s=0.3)
    finally:
        r.close()
    assert server.got == UP_TO_RUN
    assert server.accepted_at is not None and server.accepted_at - sent_at >= 0.3


def test_without_run_the_relay_forwards_what_it_has_after_hold_s(tmp_path):
    first = MESSAGES[0][1]  # the probe alone
    server = Server(tmp_path / "fio.sock", fiowire.split(SESSION.server)[0][1], len(first)).start()
    (r,) = relay.open_relays([server.spec], timeout_s=5)
    try:
        connecting = time.monotonic()  # the relay's wait starts after this
        with socket.create_connection((r.address, r.port), timeout=10) as sock:
            sock.sendall(first)
            back = sock.recv(65536)
    finally:
        r.close()
    assert server.got == first and back.startswith(fiowire.split(SESSION.server)[0][1][:24])
    assert server.accepted_at is not None
    assert relay.HOLD_S <= server.accepted_at - connecting < relay.HOLD_S + 5
    assert r.probe is not None and not r.stopped


def test_a_server_that_closes_before_stop_is_lost_with_the_time(tmp_path):
    """The server's side closes mid-run (before STOP): the relay says so, and when."""
    raws = fiowire.split(SESSION.server)
    stop = next(i for i, (m, _) in enumerate(raws) if m.opcode == relay.CMD_STOP)
    cut = b"".join(raw for _, raw in raws[:stop - 3])
    server = Server(tmp_path / "fio.sock", cut, len(SESSION.client)).start()
    (r,) = relay.open_relays([server.spec], timeout_s=5)
    try:
        back, _ = client(r.port, r.address, SESSION.client)
    finally:
        r.close()
    assert back == cut and not r.stopped and r.probe is not None
    assert r.lost is not None and r.lost.startswith("the server closed the connection ")
    assert r.lost.endswith(" s after the start, before its run ended")


def test_an_unreachable_host_is_lost_and_fios_client_sees_it_disconnect(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]  # closed again: nothing listens there
    refused = HostSpec("ip", "127.0.0.1", port)
    missing = HostSpec("sock", str(tmp_path / "missing.sock"), None)
    relays = relay.open_relays([refused, missing], timeout_s=2)
    try:
        for r in relays:
            back, _ = client(r.port, r.address, SESSION.client)
            assert back == b""
    finally:
        for r in relays:
            r.close()
    assert relays[0].error == relays[0].lost == "nothing listens there (connection refused)"
    assert relays[1].error is not None and relays[1].error.startswith("cannot connect: ")
    assert relays[1].lost == relays[1].error


def test_a_host_known_to_be_unreachable_gets_no_relay(tmp_path):
    spec = HostSpec("sock", str(tmp_path / "x.sock"), None)
    other = HostSpec("sock", str(tmp_path / "y.sock"), None)
    gone, kept = relay.open_relays([spec, other], timeout_s=1, unreachable={spec: "lost in an earlier job"})
    try:
        assert gone.error == "lost in an earlier job" and gone.port == 0 and not gone.open()
        assert kept.error is None and kept.port > 0
    finally:
        gone.close()
        kept.close()
    assert [relay.loopback_address(i) for i in range(3)] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


@pytest.mark.parametrize("garbage", [b"HTTP/1.0 400 Bad Request\r\n\r\nnot a fio server\r\n"])
def test_a_peer_that_is_not_fio_is_relayed_unjudged(tmp_path, garbage):
    """Bytes that are not fio's protocol are not for the relay to judge: forwarded both ways, fio's
    client decides."""
    server = Server(tmp_path / "fio.sock", garbage, len(garbage)).start()
    (r,) = relay.open_relays([server.spec], timeout_s=5)
    try:
        back, _ = client(r.port, r.address, garbage)
    finally:
        r.close()
    assert server.got == garbage and back == garbage and r.probe is None and r.eta_seq == 0
