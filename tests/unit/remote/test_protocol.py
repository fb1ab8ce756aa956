"""fio's wire protocol (``remote.protocol``): CRC and framing, the progress report's layout, a real
conversation read back (``tests/data/remote``, recorded by ``tests/support/fiowire.py``), and the probe's
answers and errors against in-process stand-ins for a fio server on a Unix socket. Real fio servers:
``tests/integration/test_remote_protocol.py``, ``tests/system/test_remote_hosts.py``."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import fiowire
from iolab.errors import HostError
from iolab.remote import protocol
from iolab.remote.hosts import HostSpec

SESSION = fiowire.load()
VERSION = int(SESSION.meta["protocol"])


def test_crc16_and_message_framing():
    assert protocol.crc16(b"123456789") == 0xBB3D  # CRC-16/ARC check value
    one = protocol.encode(97, protocol.CMD_PROBE, b"x" * 10, tag=7)
    # a payload over 1 KiB arrives in fragments flagged F_MORE (fio_net_send_cmd, server.c)
    big = b"".join(
        protocol.HEADER.pack(97, 6, protocol.F_MORE if last is False else 0, 9, len(part), 0, 0)[:20]
        + struct.pack("<HH", protocol.crc16(protocol.HEADER.pack(97, 6, protocol.F_MORE if last is False else 0, 9,
                                                                 len(part), 0, 0)[:20]), protocol.crc16(part))
        + part
        for part, last in ((b"a" * 1024, False), (b"b" * 100, True))
    )
    reader = protocol.MessageReader()
    stream = one + big
    messages = [m for i in range(0, len(stream), 7) for m in reader.feed(stream[i:i + 7])]
    assert [(m.opcode, m.tag, len(m.payload)) for m in messages] == [(10, 7, 10), (6, 9, 1124)]
    with pytest.raises(protocol.NotFio):
        protocol.MessageReader().feed(b"HTTP/1.0 400 Bad Request\r\n\r\n")


def test_eta_layout():
    values = [2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 100, 50, 0, 0, 0, 0, 0, 0, 0, 25, 12, 0, 0, 7, 3, 1, 0, 3, 0, 2, 0]
    payload = struct.pack("<4I3Q3Q3Q3I3I3IIQQ4III", *values) + b"RR"
    eta = protocol.decode_eta(protocol.Message(97, protocol.CMD_ETA, 0, payload))
    assert eta == protocol.Eta(running=2, ramping=0, pending=0, setting_up=0, iops=37.0, bw_bytes_s=150 * 1024,
                               elapsed_s=7.0, eta_s=3.0)
    assert protocol.decode_eta(protocol.Message(79, protocol.CMD_ETA, 0, payload)) is None  # before fio-3.16
    assert protocol.decode_eta(protocol.Message(97, protocol.CMD_TEXT, 0, payload)) is None


def test_our_framing_matches_what_fio_sends():
    """The first message of the recorded fio client, read with iolab's header layout and CRCs; iolab's
    own probe is the same message but for the server name. (Against the fio installed here:
    ``tests/integration/test_remote_protocol.py``.)"""
    data = SESSION.client
    version, opcode, _flags, tag, length, cmd_crc, pdu_crc = protocol.HEADER.unpack_from(data)
    assert version == VERSION and opcode == protocol.CMD_PROBE
    assert protocol.crc16(data[:20]) == cmd_crc and protocol.crc16(data[24:24 + length]) == pdu_crc
    (message, _), *_ = fiowire.split(data)
    assert message.payload[8:].split(b"\0")[0] == b"127.0.0.1"  # cmd_client_probe_pdu.server
    ours = protocol.probe_message(VERSION, "127.0.0.1")  # fio's tag is a pointer of its own; iolab's is 1
    assert ours[24:] == data[24:24 + length] and protocol.HEADER.unpack_from(ours)[:3] == (version, opcode, _flags)
    assert tag != 0 and protocol.HEADER.unpack_from(ours)[6] == pdu_crc


def test_a_recorded_conversation_reads_message_by_message_in_any_chunking():
    """Every byte either side sent is whole messages with good CRCs, however the stream is cut; the
    client says probe, job, RUN; the server answers the probe first, reports progress, ends with STOP."""
    for side, stream in (("client", SESSION.client), ("server", SESSION.server)):
        whole = SESSION.messages(side)
        for step in ((1, 7, len(stream)) if side == "client" else (97, 1000, len(stream))):
            reader = protocol.MessageReader()
            assert [m for i in range(0, len(stream), step) for m in reader.feed(stream[i:i + step])] == whole
        assert {m.version for m in whole} == {VERSION}
    client = [protocol.OPCODES[m.opcode] for m in SESSION.messages("client")]
    assert client[:3] == ["PROBE", "JOB", "RUN"]
    server = [protocol.OPCODES[m.opcode] for m in SESSION.messages("server")]
    assert server[0] == "PROBE" and "ETA" in server and "TS" in server and "STOP" in server
    assert server.index("STOP") > server.index("TS")
    big = [m for m in SESSION.messages("server") if len(m.payload) > protocol.MAX_FRAGMENT]
    assert big and len(fiowire.split(SESSION.server)) > len(SESSION.messages("server"))  # F_MORE fragments joined


def test_the_recorded_probe_reply_and_progress_reports():
    reply = protocol.decode_probe_reply(SESSION.messages("server")[0])
    assert reply.fio_version == SESSION.meta["fio_version"] and reply.protocol == VERSION
    assert reply.os == "Linux" and reply.cpus >= 1 and reply.bits in (32, 64) and reply.hostname
    with pytest.raises(protocol.NotFio, match="expected a probe reply, got JOB"):
        protocol.decode_probe_reply(SESSION.messages("client")[1])
    etas = [e for e in map(protocol.decode_eta, SESSION.messages("server")) if e is not None]
    assert etas and len(etas) == sum(m.opcode == protocol.CMD_ETA for m in SESSION.messages("server"))
    assert any(e.running == 1 and e.iops > 0 and e.bw_bytes_s == pytest.approx(e.iops * 4096, rel=0.5) for e in etas)
    assert [e.elapsed_s for e in etas] == sorted(e.elapsed_s for e in etas)
    assert all(e.elapsed_s <= 4 for e in etas)  # a 2 s job


@contextmanager
def fake_server(path: Path, answer: Callable[[socket.socket], None]) -> Iterator[HostSpec]:
    """A Unix-socket listener at ``path`` that hands each connection to ``answer`` (in a thread)."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    conns: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conns.append(conn)
            answer(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield HostSpec("sock", str(path), None)
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        listener.close()
        for conn in conns:
            conn.close()
        thread.join(5)


def _read_probe(conn: socket.socket) -> bytes:
    data = b""
    while len(data) < 24 or len(data) < 24 + struct.unpack_from("<I", data, 16)[0]:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def test_probe_a_server_that_answers_as_the_recorded_one(tmp_path):
    """Text lines before the reply are skipped; the reply says who the server is."""
    got: list[bytes] = []
    text = protocol.encode(VERSION, protocol.CMD_TEXT, b"hello\0")
    reply = fiowire.split(SESSION.server)[0][1]

    def answer(conn: socket.socket) -> None:
        got.append(_read_probe(conn))
        conn.sendall(text + reply[:10])
        conn.sendall(reply[10:])

    with fake_server(tmp_path / "fio.sock", answer) as spec:
        found = protocol.probe(spec, VERSION, timeout_s=5)
    assert found == protocol.decode_probe_reply(SESSION.messages("server")[0])
    assert got == [protocol.probe_message(VERSION, "localhost")]  # a Unix socket's server is "localhost"


@pytest.mark.parametrize(("behaviour", "said"), [
    ("garbage", "the listener does not speak fio's protocol"),
    ("silent", "connected, but no fio reply within 0.5 s"),
    ("close", "closed the connection without answering iolab's probe; a fio server of another version"),
    ("reset", "closed the connection without answering"),
])
def test_the_probe_names_what_is_wrong_with_the_listener(tmp_path, behaviour, said):
    """What a listener that is not a fio server does, or a server of another protocol version (it
    drops the connection: ``verify_convert_cmd()``), named with the host; bounded by the timeout."""
    def answer(conn: socket.socket) -> None:
        _read_probe(conn)
        if behaviour == "garbage":
            conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\nnot a fio server\r\n")
        elif behaviour == "close":
            conn.close()
        elif behaviour == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    with fake_server(tmp_path / "fio.sock", answer) as spec, pytest.raises(HostError) as info:
        protocol.probe(spec, VERSION, timeout_s=0.5)
    assert info.value.message.startswith(f"{spec}: ") and said in info.value.message, info.value.message
    if behaviour in ("close", "reset"):
        assert f"local fio speaks protocol {VERSION}" in info.value.message


def test_nothing_listening_is_named(tmp_path):
    with pytest.raises(HostError, match=r"nothing listens|No such file") as info:
        protocol.probe(HostSpec("sock", str(tmp_path / "missing.sock"), None), VERSION, timeout_s=1)
    assert info.value.hint and "iolab server start" in info.value.hint
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]  # closed again: refused on loopback
    with pytest.raises(HostError, match=r"cannot connect: nothing listens there \(connection refused\)"):
        protocol.probe(HostSpec("ip", "127.0.0.1", port), VERSION, timeout_s=1)
    results = protocol.probe_all([HostSpec("sock", str(tmp_path / "a.sock"), None)], VERSION, 1)
    assert isinstance(next(iter(results.values())), HostError)
