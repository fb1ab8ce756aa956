"""fio's verify-state files and verify failures (``iolab.fio.verify``), against files fio wrote. fio's
own ``fio-verify-state`` reading the same file: tests/integration/test_fio_verify_state.py."""

from __future__ import annotations

import struct

import pytest

from iolab.errors import ParseError
from iolab.fio import verify
from paths import FIO

DATA = FIO / "not-output"
STATE = DATA / "local-pc-0-verify.state"  # fio 3.33, a 4k randwrite cut by --trigger-timeout (FIO_NOTES §5.3)


def test_a_state_file_fio_wrote_reads_as_fio_verify_state_prints_it():
    state = verify.parse_state(STATE.read_bytes(), STATE.name)
    assert (state.name, state.index, state.numberio, state.depth, state.nofiles) == ("pc", 0, 4961, 8, 1)
    assert [offset for _, offset in state.completions] == [7438336, 5332992, 52551680, 17645568, 46182400,
                                                          53047296, 52109312, 54530048]


def test_fio_crc32c_is_crc32c_without_the_final_inversion():
    assert verify.fio_crc32c(b"123456789") == 0xE3069283 ^ 0xFFFFFFFF  # the CRC-32C check value, not inverted


@pytest.mark.parametrize(("change", "message"), [
    (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "checksum does not match"),
    (lambda b: struct.pack("<Q", 2) + b[8:], "version 2"),
    (lambda b: b[:100], "too short"),
    (lambda b: b + b"\0" * 16, "the header says 280 bytes"),
])
def test_a_damaged_state_file_is_refused_with_the_reason(change, message):
    with pytest.raises(ParseError, match=message):
        verify.parse_state(change(STATE.read_bytes()), "x.state")


def test_state_file_names_are_fios():
    assert verify.state_file_name("local", "pc", 0) == "local-pc-0-verify.state"
    assert verify.state_file_name("10.0.0.2", "a/b", 3) == "10.0.0.2-a.b-3-verify.state"
    assert verify.split_state_file_name("127.0.0.2-crash-job-0-verify.state", "127.0.0.2") == ("crash-job", 0)
    assert verify.split_state_file_name("local-pc-0-verify.state", "127.0.0.2") is None


def test_verify_failures_are_read_from_fios_messages():
    text = (DATA / "fio-3.33_verify_failure_stderr.txt").read_text()
    (failure,) = verify.parse_failures(text)
    assert (failure.offset, failure.length, failure.reason, failure.server) == (13205504, 4096,
                                                                                 "crc32c: verify failed", None)
    assert not failure.zeros
    client = ("<vm> verify: bad magic header 0, wanted acca at file /dev/loop2 offset 2023424, length 4096 "
              "(requested block: offset=2023424, length=4096)\n"
              "<vm> verify: bad header rand_seed 46386204153304124, wanted 9409878476386542545 at file /dev/loop2 "
              "offset 4096, length 4096 (requested block: offset=4096, length=4096)\n"
              "<vm> pc: (groupid=0, jobs=1): err=84 (file:io_u.c:2197, func=io_u_queued_complete, error=Invalid or "
              "incomplete multibyte or wide character): pid=7\n")
    found = verify.parse_failures(client + client)  # the same block twice is one failure
    assert [(f.offset, f.server, f.zeros) for f in found] == [(2023424, "vm", True), (4096, "vm", False)]
