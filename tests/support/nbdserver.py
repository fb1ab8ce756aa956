"""A small NBD server over a Unix socket, serving one file, for tests of storage reached by address.

It speaks the fixed newstyle handshake and simple replies of the NBD protocol
(https://github.com/NetworkBlockDevice/nbd/blob/master/doc/proto.md): ``NBD_OPT_GO``/``NBD_OPT_INFO``
answered with the export's size, every other option "unsupported" (so libnbd, fio's nbd engine, falls
back to simple replies), then READ, WRITE, FLUSH, TRIM, WRITE_ZEROES and DISC. ``writes`` counts the
write requests it served, so a test can tell that a client wrote.

Usage::

    with serve(image_path, socket_path) as server:
        uri = server.uri            # nbd+unix:///?socket=...
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

_OPTS_MAGIC = 0x49484156454F5054  # "IHAVEOPT"
_REPLY_MAGIC = 0x3E889045565A9
_REQUEST_MAGIC, _SIMPLE_REPLY_MAGIC = 0x25609513, 0x67446698
_OPT_ABORT, _OPT_INFO, _OPT_GO = 2, 6, 7
_REP_ACK, _REP_INFO, _REP_ERR_UNSUP = 1, 3, (1 << 31) + 1
_CMD_READ, _CMD_WRITE, _CMD_DISC, _CMD_FLUSH, _CMD_TRIM, _CMD_WRITE_ZEROES = 0, 1, 2, 3, 4, 6
_FLAG_HAS_FLAGS, _FLAG_SEND_FLUSH, _FLAG_SEND_TRIM, _FLAG_SEND_WRITE_ZEROES = 1, 4, 32, 64


class Server:
    """One export (``image``) on ``socket_path``; each connection is served in a thread."""

    def __init__(self, image: Path, socket_path: Path) -> None:
        self.image, self.socket_path = image, socket_path
        self.writes = 0
        self.uri = f"nbd+unix:///?socket={socket_path}"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(socket_path))
        self._listener.listen(8)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._listener.close()
        with contextlib.suppress(OSError):
            os.unlink(self.socket_path)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, open(self.image, "r+b") as image:
            try:
                if self._handshake(conn, os.fstat(image.fileno()).st_size):
                    self._transmit(conn, image)
            except (OSError, ConnectionError, struct.error):
                return

    def _handshake(self, conn: socket.socket, size: int) -> bool:
        conn.sendall(b"NBDMAGIC" + struct.pack(">QH", _OPTS_MAGIC, 1 | 2))  # FIXED_NEWSTYLE | NO_ZEROES
        _recv(conn, 4)  # client flags
        while True:
            magic, option, length = struct.unpack(">QII", _recv(conn, 16))
            assert magic == _OPTS_MAGIC
            _recv(conn, length)
            if option == _OPT_ABORT:
                return False
            if option not in (_OPT_INFO, _OPT_GO):
                conn.sendall(struct.pack(">QIII", _REPLY_MAGIC, option, _REP_ERR_UNSUP, 0))
                continue
            flags = _FLAG_HAS_FLAGS | _FLAG_SEND_FLUSH | _FLAG_SEND_TRIM | _FLAG_SEND_WRITE_ZEROES
            info = struct.pack(">HQH", 0, size, flags)  # NBD_INFO_EXPORT
            conn.sendall(struct.pack(">QIII", _REPLY_MAGIC, option, _REP_INFO, len(info)) + info)
            conn.sendall(struct.pack(">QIII", _REPLY_MAGIC, option, _REP_ACK, 0))
            if option == _OPT_GO:
                return True

    def _transmit(self, conn: socket.socket, image: object) -> None:
        f = image  # an open file
        while True:
            magic, _, kind, handle, offset, length = struct.unpack(">IHHQQI", _recv(conn, 28))
            assert magic == _REQUEST_MAGIC
            data = b""
            if kind == _CMD_DISC:
                return
            if kind == _CMD_READ:
                f.seek(offset)  # type: ignore[attr-defined]
                data = f.read(length).ljust(length, b"\0")  # type: ignore[attr-defined]
            elif kind == _CMD_WRITE:
                payload = _recv(conn, length)
                f.seek(offset)  # type: ignore[attr-defined]
                f.write(payload)  # type: ignore[attr-defined]
                self.writes += 1
            elif kind == _CMD_WRITE_ZEROES:
                f.seek(offset)  # type: ignore[attr-defined]
                f.write(b"\0" * length)  # type: ignore[attr-defined]
                self.writes += 1
            elif kind == _CMD_FLUSH:
                f.flush()  # type: ignore[attr-defined]
            conn.sendall(struct.pack(">IIQ", _SIMPLE_REPLY_MAGIC, 0, handle) + data)


def _recv(conn: socket.socket, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        chunk = conn.recv(size - len(out))
        if not chunk:
            raise ConnectionError("peer closed")
        out += chunk
    return bytes(out)


@contextlib.contextmanager
def serve(image: Path, socket_path: Path) -> Iterator[Server]:
    """Serve ``image`` on ``socket_path`` until the block ends."""
    server = Server(image, socket_path)
    try:
        yield server
    finally:
        server.close()
