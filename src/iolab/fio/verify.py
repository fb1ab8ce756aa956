"""fio's verify machinery as data: verify-state files and the verify failures fio reports. Pure.

**Verify-state files** (``verify_state_save``, written when a trigger fires or a job exits on an
error; read back with ``verify_state_load``). Format version 3, little-endian, from
``verify-state.h`` and ``write_thread_list_state()`` in ``verify.c@fio-3.33``::

    struct verify_state_hdr { u64 version (3); u64 size; u64 crc; }      # crc32c of what follows
    struct thread_io_list {
        u64 no_comps;            # valid entries in comps[]
        u32 depth; u32 nofiles;  # iodepth and nr_files of the job
        u64 numberio;            # writes *issued* when the state was taken (td->io_issues[WRITE])
        u64 index;               # the job's number (0-based): the file is <prefix>-<name>-<index>-verify.state
        struct { u64 use64; u64 s[6]; } rand;
        u8 name[64];
        struct { u64 fileno; u64 offset; } comps[depth * nofiles];   # the last completed writes
    }

``fio-verify-state FILE`` (shipped with fio) prints the same fields. The prefix of the file name is
``local`` for a local run (in ``--aux-path`` when given) and, for a client/server run, the address
the client connected to (``server_name()`` in ``client.c``): the client stores the state it gets at
the cut under that name, and in the verify phase the server asks the client for the file of the
same name (``fio_server_get_verify_state()``).

**How fio uses the state** (``verify_state_should_stop()``, ``verify.c``): the verify phase replays
the job's write sequence and checks the first ``numberio - depth`` writes unconditionally; of the
last ``depth`` it checks only those in ``comps``, and stops at the first that is not (so a few
completed writes at the very end may go unchecked: https://github.com/axboe/fio/issues/1440).

**Verify failures** are fio's ``log_err`` lines, one per bad block (with
``continue_on_error=verify`` fio goes on after the first)::

    verify: bad magic header 0, wanted acca at file /dev/loop0 offset 12173312, length 4096 (requested block: …)
    crc32c: verify failed at file /data/fio/pc/vfile offset 13205504, length 4096 (requested block: …)

A client prefixes what a server says with ``<server host name> ``.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from ..errors import ParseError

#: The state format this parser reads (``VSTATE_HDR_VERSION``).
STATE_VERSION = 3
_HEADER = struct.Struct("<QQQ")
_LIST = struct.Struct("<QIIQQ")  # no_comps, depth, nofiles, numberio, index
_RAND_BYTES = 8 + 6 * 8
_NAME_BYTES = 64
_COMP = struct.Struct("<QQ")
_LIST_BYTES = _LIST.size + _RAND_BYTES + _NAME_BYTES


def _crc32c_table() -> tuple[int, ...]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_CRC32C = _crc32c_table()


def fio_crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) as fio computes it: seeded with ~0 and,
    unlike the standard CRC-32C, not inverted at the end (``crc32c_sw()`` in ``crc/crc32c.c``)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


@dataclass(frozen=True)
class VerifyState:
    """One job's verify state at a cut (see the module docstring): ``numberio`` writes issued,
    ``completions`` the last completed writes as ``(file number, offset in bytes)``."""

    name: str
    index: int
    numberio: int
    depth: int
    nofiles: int
    completions: tuple[tuple[int, int], ...]


def parse_state(data: bytes, name: str = "<state>") -> VerifyState:
    """A verify-state file's contents. Raises ``ParseError`` naming ``name`` for another version, a
    size that does not match, or a checksum that does not."""
    if len(data) < _HEADER.size + _LIST_BYTES:
        raise ParseError(f"{name}: {len(data)} bytes is too short for a fio verify state")
    version, size, crc = _HEADER.unpack_from(data)
    if version != STATE_VERSION:
        raise ParseError(f"{name}: verify state version {version}; this iolab reads version {STATE_VERSION}")
    body = data[_HEADER.size:]
    if size != len(body):
        raise ParseError(f"{name}: the header says {size} bytes of state, the file has {len(body)}")
    if fio_crc32c(body) != crc:
        raise ParseError(f"{name}: the verify state's checksum does not match (a corrupt or cut-short file)")
    no_comps, depth, nofiles, numberio, index = _LIST.unpack_from(body)
    raw_name = body[_LIST.size + _RAND_BYTES:_LIST_BYTES]
    room = (len(body) - _LIST_BYTES) // _COMP.size
    if no_comps > room:
        raise ParseError(f"{name}: {no_comps} completions do not fit in {room} slots")
    comps = tuple(_COMP.unpack_from(body, _LIST_BYTES + i * _COMP.size) for i in range(no_comps))
    return VerifyState(raw_name.split(b"\0", 1)[0].decode(errors="replace"), index, numberio, depth, nofiles, comps)


def state_file_name(prefix: str, job: str, index: int) -> str:
    """``<prefix>-<job>-<index>-verify.state``, with ``/`` in the job name as ``.``
    (``verify_state_gen_name()`` in ``verify-state.h``)."""
    return f"{prefix}-{job.replace('/', '.')}-{index}-verify.state"


_STATE_NAME = re.compile(r"^(?P<prefix>.+?)-(?P<job>.+)-(?P<index>\d+)-verify\.state$")


def split_state_file_name(file_name: str, prefix: str) -> tuple[str, int] | None:
    """``(job, index)`` of a state file named with ``prefix``; None for any other name."""
    head = f"{prefix}-"
    if not file_name.startswith(head) or not file_name.endswith("-verify.state"):
        return None
    job, _, index = file_name[len(head):-len("-verify.state")].rpartition("-")
    return (job, int(index)) if job and index.isdigit() else None


@dataclass(frozen=True)
class VerifyFailure:
    """One block fio found bad in a verify phase: its offset and length in bytes, fio's reason
    (``bad magic header 0``, ``crc32c: verify failed`` …) and, for a client/server run, the server's
    name as fio's client printed it (None for a local run). ``zeros``: the block read back as never
    written (a header magic of 0, as after a wipe), rather than with other content."""

    offset: int
    length: int
    reason: str
    server: str | None = None

    @property
    def zeros(self) -> bool:
        return self.reason.startswith("verify: bad magic header 0,")


_FAILURE = re.compile(
    r"^(?:<(?P<server>[^>\s]+)> )?(?P<reason>[^\n]*?) at file .*? offset (?P<offset>\d+), length (?P<length>\d+)"
    r"(?: \(requested block:[^\n]*)?$", re.M)


def parse_failures(text: str) -> list[VerifyFailure]:
    """Every verify failure fio printed in ``text`` (stderr of a local run, the output of a
    client/server run), once per (server, offset), in order; the lines under a failure (expected
    and received checksums) are not needed."""
    seen: dict[tuple[str | None, int], VerifyFailure] = {}
    for m in _FAILURE.finditer(text):
        reason = m["reason"].strip()
        if "verify" not in reason and "bad " not in reason:
            continue
        failure = VerifyFailure(int(m["offset"]), int(m["length"]), reason, m["server"])
        seen.setdefault((failure.server, failure.offset), failure)
    return list(seen.values())
