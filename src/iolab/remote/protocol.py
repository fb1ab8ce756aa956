"""Just enough of fio's client/server wire protocol to probe a server and read its progress.

Every message is a 24-byte header followed by a payload (``struct fio_net_cmd``, server.h):
``version u16, opcode u16, flags u32, tag u64, pdu_len u32, cmd_crc16 u16, pdu_crc16 u16``,
little-endian. ``cmd_crc16`` covers the first 20 bytes, ``pdu_crc16`` the payload; both are
CRC-16/ARC (``fio_crc16()``, crc/crc16.c). Payloads over 1 KiB are split into fragments flagged
``FIO_NET_CMD_F_MORE``.

``version`` is ``FIO_SERVER_VER``, which changes with almost every fio release; a server
drops a connection whose first message carries another version (``verify_convert_cmd()``,
server.c), so client and server must be the same fio. iolab learns the local fio's protocol
version from fio itself (``local_protocol_version``: fio connects to a one-shot loopback
listener and its first message is read), so no table of versions is needed.

A fio server's per-connection process looks at its socket without waiting (``poll(…, 0)``) and
then sleeps up to 1 s (100 ms while a job runs) on a semaphore that only its own outgoing
messages post (``handle_connection()``, server.c@fio-3.33, unchanged in 3.42). A message that
arrives while it sleeps waits for the rest of that second: a probe sent a few milliseconds
after the connect (a busy machine, a thread waiting for the GIL) came back exactly 1.00 s late.
So ``connect`` holds back the last packet of TCP's handshake until iolab's first message can
ride on it (``TCP_DEFER_ACCEPT`` on a connecting socket delays that ACK for up to 200 ms,
``tcp_rcv_synsent_state_process()``, net/ipv4/tcp_input.c): the server accepts the connection
only when the message is already there, and answers at its first look.

``probe`` sends ``FIO_NET_CMD_PROBE`` (``struct cmd_client_probe_pdu``) and reads the reply
(``struct cmd_probe_reply_pdu``: server host name, fio version, OS, architecture, CPUs), the
same exchange fio's client starts every connection with. ``decode_eta`` reads the progress
report (``struct jobs_eta``, stat.h) servers send about once a second.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from ..errors import HostError
from ..runner.once import once
from . import sshhost
from .hosts import HostSpec, on_each

HEADER = struct.Struct("<HHIQIHH")
_CRC_BYTES = 20  # FIO_NET_CMD_CRC_SZ: the header without its two CRCs
MAX_FRAGMENT = 1024  # FIO_SERVER_MAX_FRAGMENT_PDU
F_MORE = 1

CMD_TEXT = 5
CMD_ETA = 9
CMD_PROBE = 10
OPCODES = {1: "QUIT", 2: "EXIT", 3: "JOB", 4: "JOBLINE", 5: "TEXT", 6: "TS", 7: "GS", 8: "SEND_ETA", 9: "ETA",
           10: "PROBE", 11: "START", 12: "STOP", 13: "DU", 14: "SERVER_START", 15: "ADD_JOB", 16: "RUN",
           17: "IOLOG", 18: "UPDATE_JOB", 19: "LOAD_FILE", 20: "VTRIGGER", 21: "SENDFILE", 22: "JOB_OPT"}

_PROBE_PDU = struct.Struct("<Q128s")  # cmd_client_probe_pdu: flags, server name
_PROBE_REPLY = struct.Struct("<64sB32sBBBIQ")  # cmd_probe_reply_pdu
_OS = {1: "Linux", 2: "AIX", 3: "FreeBSD", 4: "HP-UX", 5: "OSX", 6: "NetBSD", 7: "OpenBSD", 8: "Solaris",
       9: "Windows", 10: "Android", 11: "DragonFly"}  # os/os.h
_ARCH = {1: "x86-64", 2: "x86", 3: "ppc", 4: "ia64", 5: "s390", 6: "alpha", 7: "sparc", 8: "sparc64",
         9: "arm", 10: "sh", 11: "hppa", 12: "mips", 13: "aarch64"}  # arch/arch.h

#: ``struct jobs_eta`` has had one layout from fio-3.16 (protocol 80) to at least fio-3.42.
ETA_LAYOUT_SINCE = 80
_ETA = struct.Struct("<4I3Q3Q3Q3I3I3IIQQ4III")
_INT_MAX = 2**31 - 1


def crc16(data: bytes) -> int:
    """CRC-16/ARC (polynomial 0x8005 reflected, initial value 0), as ``fio_crc16()``."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def encode(version: int, opcode: int, payload: bytes = b"", tag: int = 0) -> bytes:
    """One message (payloads up to ``MAX_FRAGMENT`` bytes; iolab sends nothing larger)."""
    if len(payload) > MAX_FRAGMENT:
        raise ValueError("payload larger than one fragment")
    head = HEADER.pack(version, opcode, 0, tag, len(payload), 0, 0)[:_CRC_BYTES]
    return head + struct.pack("<HH", crc16(head), crc16(payload)) + payload


@dataclass(frozen=True)
class Message:
    version: int
    opcode: int
    tag: int
    payload: bytes


class NotFio(ValueError):
    """The bytes are not fio protocol messages."""


class MessageReader:
    """Feed it bytes as they arrive; it returns the complete messages (fragments joined).

    Raises ``NotFio`` when a header's CRC is wrong, i.e. the peer does not speak fio's protocol.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._partial: Message | None = None

    def feed(self, data: bytes) -> list[Message]:
        self._buffer += data
        out = []
        while len(self._buffer) >= HEADER.size:
            version, opcode, flags, tag, length, cmd_crc, _pdu_crc = HEADER.unpack_from(self._buffer)
            if crc16(self._buffer[:_CRC_BYTES]) != cmd_crc:
                raise NotFio(f"not a fio message: {self._buffer[:32]!r}")
            if len(self._buffer) < HEADER.size + length:
                break
            payload = self._buffer[HEADER.size:HEADER.size + length]
            self._buffer = self._buffer[HEADER.size + length:]
            if self._partial is not None:
                payload = self._partial.payload + payload
            message = Message(version, opcode, tag, payload)
            if flags & F_MORE:
                self._partial = message
                continue
            self._partial = None
            out.append(message)
        return out


@dataclass(frozen=True)
class ProbeReply:
    """What a fio server says about itself: its own host name (not the address iolab used),
    ``fio_version`` as ``fio --version`` prints it (``fio-3.33``), OS, architecture, word size in
    bits and CPU count."""

    hostname: str
    fio_version: str
    os: str
    arch: str
    bits: int
    cpus: int
    protocol: int


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def decode_probe_reply(message: Message) -> ProbeReply:
    """Raises ``NotFio`` when the payload is not a probe reply."""
    if message.opcode != CMD_PROBE or len(message.payload) < _PROBE_REPLY.size:
        raise NotFio(f"expected a probe reply, got {OPCODES.get(message.opcode, message.opcode)} "
                     f"with {len(message.payload)} bytes")
    hostname, _big_endian, version, os_code, arch, bpp, cpus, _flags = _PROBE_REPLY.unpack_from(message.payload)
    return ProbeReply(hostname=_cstr(hostname), fio_version=_cstr(version), os=_OS.get(os_code, f"os#{os_code}"),
                      arch=_ARCH.get(arch, f"arch#{arch}"), bits=bpp * 8, cpus=cpus, protocol=message.version)


@dataclass(frozen=True)
class Eta:
    """One progress report of a server: job counts by state, current rates summed over
    directions (fio computes them over the last ~second), ``elapsed_s`` since the server started
    the run, ``eta_s`` None while fio cannot estimate it."""

    running: int
    ramping: int
    pending: int
    setting_up: int
    iops: float
    bw_bytes_s: float
    elapsed_s: float
    eta_s: float | None


def decode_eta(message: Message) -> Eta | None:
    """The progress report in ``message``; None for another opcode or a layout iolab does not
    know (fio before 3.16), so a newer layout never shows wrong numbers."""
    if message.opcode != CMD_ETA or message.version < ETA_LAYOUT_SINCE or len(message.payload) < _ETA.size:
        return None
    v = _ETA.unpack_from(message.payload)
    running, ramp, pending, setting_up = v[0:4]
    rate_kib, iops = v[10:13], v[19:22]
    elapsed, eta = v[23], v[24]
    return Eta(running=running, ramping=ramp, pending=pending, setting_up=setting_up, iops=float(sum(iops)),
               bw_bytes_s=float(sum(rate_kib) * 1024), elapsed_s=float(elapsed),
               eta_s=None if eta >= _INT_MAX else float(eta))


@once  # asked early (``cli.run``) and by each host's preflight
def local_protocol_version(fio: str = "fio") -> int:
    """``FIO_SERVER_VER`` of the local fio, read from the first message it sends.

    fio is started as a client of a listener on 127.0.0.1 that iolab opened for this; fio
    connects, sends its probe (``probe_client()``, client.c) and gives up when the listener
    closes. Raises ``HostError`` when fio does not connect within 10 s.
    """
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(10)
        port = listener.getsockname()[1]
        proc = subprocess.Popen([fio, f"--client=ip:127.0.0.1,{port}"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(10)
                data = b""
                while len(data) < HEADER.size:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
        except OSError as exc:
            raise HostError(f"cannot learn the local fio's protocol version: {exc}") from exc
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if len(data) < HEADER.size:
        raise HostError("cannot learn the local fio's protocol version: fio sent nothing")
    return int(HEADER.unpack_from(data)[0])


def connect(host: HostSpec, timeout_s: float, first: bytes = b"") -> socket.socket:
    """A connected socket to ``host`` that has sent ``first``; raises ``OSError``
    (``TimeoutError`` past ``timeout_s``).

    Send the first message here, not afterwards: over TCP the handshake's last packet waits for
    it (see the module docstring), so a fio server finds it at once instead of up to 1 s later.
    A unix socket has no handshake to hold back; ``first`` goes out right after the connect. An
    ``ssh`` host is reached through the socket its ssh connection forwards (``sshhost.local_socket``).
    """
    if host.kind in ("sock", "ssh"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        address: Any = host.host if host.kind == "sock" else sshhost.local_socket(host)
    else:
        family = socket.AF_INET6 if host.kind == "ip6" else socket.AF_INET
        address = socket.getaddrinfo(host.host, host.port, family, socket.SOCK_STREAM)[0][4]
        sock = socket.socket(family, socket.SOCK_STREAM)
        with contextlib.suppress(OSError, AttributeError):  # Linux; elsewhere the plain handshake
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT, 1)
    sock.settimeout(timeout_s)
    try:
        sock.connect(address)
        if first:
            sock.sendall(first)
    except OSError:
        sock.close()
        raise
    return sock


def probe_message(version: int, name: str) -> bytes:
    """``FIO_NET_CMD_PROBE`` as fio's client sends it (``probe_client()``, client.c)."""
    return encode(version, CMD_PROBE, _PROBE_PDU.pack(1, name.encode()[:127]), tag=1)


def probe(host: HostSpec, version: int, timeout_s: float = 5.0) -> ProbeReply:
    """Ask the fio server at ``host`` who it is, speaking protocol ``version``.

    The whole exchange (name lookup, connect, reply) is bounded by ``timeout_s``. Raises
    ``HostError`` whose message names the host and the cause: nothing listens, no route, no
    answer in time, the peer does not speak fio's protocol, or it closed the connection without
    answering, which is what a fio server of another protocol version does.
    """
    deadline = time.monotonic() + timeout_s
    name = host.host if host.kind not in ("sock", "ssh") else "localhost"
    try:
        sock = connect(host, timeout_s, probe_message(version, name))
    except TimeoutError:
        raise HostError(f"{host}: no connection within {timeout_s:g} s (host down or traffic dropped)") from None
    except socket.gaierror as exc:
        raise HostError(f"{host}: cannot resolve {host.host!r}: {exc.strerror}") from None
    except OSError as exc:
        cause = "nothing listens there (connection refused)" if isinstance(exc, ConnectionRefusedError) \
            else (exc.strerror or str(exc))
        raise HostError(f"{host}: cannot connect: {cause}",
                        hint=f"start a fio server there: iolab server start --bind {host.host}") from None
    reader = MessageReader()
    with sock:
        try:
            while True:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                data = sock.recv(65536)
                if not data:
                    raise _closed(host, version)
                for message in reader.feed(data):
                    if message.opcode == CMD_TEXT:
                        continue  # log lines the server relays; not the answer
                    return decode_probe_reply(message)
        except TimeoutError:
            raise HostError(f"{host}: connected, but no fio reply within {timeout_s:g} s: "
                            "something else listens there, or the server is stuck") from None
        except ConnectionResetError:
            raise _closed(host, version) from None
        except NotFio as exc:
            raise HostError(f"{host}: the listener does not speak fio's protocol ({exc})",
                            hint="check the port: is a fio server (fio --server) listening there?") from None
        except OSError as exc:
            raise HostError(f"{host}: connection failed during the probe: {exc.strerror or exc}") from None


def _closed(host: HostSpec, version: int) -> HostError:
    return HostError(
        f"{host}: the server closed the connection without answering iolab's probe; a fio server of another "
        f"version does this (client and server must run the same fio: local fio speaks protocol {version}, "
        f"the server logs 'client/server version mismatch'), or the listener is not a fio server",
        hint="run the same fio version on every host (fio --version)",
    )


def probe_all(hosts: list[HostSpec], version: int, timeout_s: float) -> dict[HostSpec, ProbeReply | HostError]:
    """``probe`` every host at once; the answer or the error per host."""
    return on_each(hosts, lambda h: probe(h, version, timeout_s), timeout_s + 5, "the probe")
