"""A real fio client/server conversation, recorded byte for byte, for the fast tier's tests of
``iolab.remote.protocol`` and ``iolab.remote.relay`` (``tests/unit/remote``), and replayed there by
in-process stand-ins for fio's client and server.

``python tests/support/fiowire.py`` (on the project's machine, fio installed; no root, no network:
loopback and a Unix socket only) records one: it starts ``fio --server`` on a Unix socket in a
temporary directory, puts a recording proxy on 127.0.0.1 in front of it and runs ``fio --client``
through the proxy with ``JOB`` (as ``remote.client`` runs it: ``--output-format=json+``). Each
direction's bytes are written unchanged (xz-compressed) to ``tests/data/remote/``: ``client.bin.xz``
(client to server: probe, job, RUN …), ``server.bin.xz`` (server to client: probe reply, text,
progress reports, statistics, STOP …) and ``session.json`` (fio's version, its protocol version, the job, when).
``tests/data/remote/README.md`` says the same.
"""

from __future__ import annotations

import json
import lzma
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from iolab.remote import protocol
from paths import DATA

WIRE = DATA / "remote"
#: The job of the recorded conversation (``{data}``: a file in the temporary directory). Two
#: seconds, so the server sends progress reports while it runs.
JOB = "[t]\nfilename={data}\nsize=8m\nrw=randread\nbs=4k\nioengine=psync\ntime_based=1\nruntime=2\n"


@dataclass(frozen=True)
class Session:
    """A recorded conversation: what fio's client sent, what its server answered, and ``meta``
    (``fio_version``, ``protocol``, ``job``, ``made``)."""

    client: bytes
    server: bytes
    meta: dict[str, str | int]

    def messages(self, side: str) -> list[protocol.Message]:
        """The messages of one direction (``client`` or ``server``), fragments joined."""
        return protocol.MessageReader().feed(self.client if side == "client" else self.server)


def load(directory: Path = WIRE) -> Session:
    """The recorded conversation in ``directory``."""
    return Session(lzma.decompress((directory / "client.bin.xz").read_bytes()),
                   lzma.decompress((directory / "server.bin.xz").read_bytes()),
                   json.loads((directory / "session.json").read_text()))


def split(stream: bytes) -> list[tuple[protocol.Message, bytes]]:
    """Each whole message of a stream (fragments not joined) with its raw bytes, in order."""
    out = []
    offset = 0
    while offset < len(stream):
        length = protocol.HEADER.unpack_from(stream, offset)[4]
        raw = stream[offset:offset + protocol.HEADER.size + length]
        (message,) = protocol.MessageReader().feed(raw) or [protocol.Message(0, 0, 0, b"")]
        out.append((message, raw))
        offset += len(raw)
    return out


def record(directory: Path = WIRE) -> Session:
    """Record a conversation (see the module docstring) into ``directory``."""
    with tempfile.TemporaryDirectory(prefix="iolab-fiowire-") as tmp:
        work = Path(tmp)
        sock = work / "fio.sock"
        server = subprocess.Popen(["fio", f"--server=sock:{sock}"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 10
            while not sock.exists():
                assert time.monotonic() < deadline, "fio's server did not start"
                time.sleep(0.05)
            job = JOB.format(data=work / "data")
            (work / "job.fio").write_text(job)
            with socket.create_server(("127.0.0.1", 0)) as listener:
                port = listener.getsockname()[1]
                client = subprocess.Popen(["fio", "--output-format=json+", f"--output={work / 'out.json'}",
                                           f"--client=ip:127.0.0.1,{port}", "job.fio"], cwd=work,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                listener.settimeout(10)
                down, _ = listener.accept()
                sent, answered = _proxy(down, str(sock))
                client.wait(timeout=60)
        finally:
            server.kill()
            server.wait()
    version = subprocess.run(["fio", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    meta = {"fio_version": version, "protocol": protocol.HEADER.unpack_from(sent)[0],
            "job": JOB, "made": datetime.now(UTC).isoformat(timespec="seconds"),
            "how": "python tests/support/fiowire.py (fio --client through a recording proxy to fio --server=sock:)"}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "client.bin.xz").write_bytes(lzma.compress(sent))
    (directory / "server.bin.xz").write_bytes(lzma.compress(answered))
    (directory / "session.json").write_text(json.dumps(meta, indent=1) + "\n")
    return load(directory)


def _proxy(down: socket.socket, path: str) -> tuple[bytes, bytes]:
    """Relay between fio's client (``down``) and its server at ``path`` until either side closes;
    the bytes each side sent."""
    up = socket.socket(socket.AF_UNIX)
    up.connect(path)
    got = {down: b"", up: b""}
    with down, up, selectors.DefaultSelector() as sel:
        sel.register(down, selectors.EVENT_READ, up)
        sel.register(up, selectors.EVENT_READ, down)
        while True:
            for key, _ in sel.select(30):
                source, sink = key.fileobj, key.data
                data = source.recv(65536)  # type: ignore[union-attr]
                if not data:
                    return got[down], got[up]
                got[source] += data  # type: ignore[index]
                sink.sendall(data)


if __name__ == "__main__":
    session = record(Path(sys.argv[1]) if len(sys.argv) > 1 else WIRE)
    print({side: [protocol.OPCODES.get(m.opcode, m.opcode) for m in session.messages(side)]
           for side in ("client", "server")})
