"""The destructive-write guard on constructed facts and on files, free-space checks, and which fio jobs write.

Its decisions on real loop devices: tests/integration/test_safety_devices.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from iolab.check.safety import GiB, MiB, check_block_write, check_free_space, default_margin, is_named, writes
from iolab.errors import SafetyError
from iolab.facts.targets import inspect
from iolab.model import BlockDeviceFacts, TargetFacts


def _refusal(facts: TargetFacts, destroy: list[str]) -> SafetyError:
    with pytest.raises(SafetyError) as info:
        check_block_write(facts, destroy)
    return info.value


# --- constructed facts: reasons that loop devices cannot produce here --------------------------------


def _block(**kwargs: object) -> TargetFacts:
    device = BlockDeviceFacts(name="sdx", path="/dev/sdx", holders=kwargs.pop("holders", ()))  # type: ignore[arg-type]
    return TargetFacts(path="/dev/sdx", kind="block", device=device, **kwargs)  # type: ignore[arg-type]


def test_holders_and_signature_kinds_are_all_reported() -> None:
    facts = _block(holders=("dm-0",), signatures=("LVM2_member", "gpt partition table", "zfs_member"))
    err = _refusal(facts, ["/dev/sdx"])
    assert "it is held by dm-0" in err.message
    assert "an LVM physical volume signature (LVM2_member)" in err.message
    assert "a gpt partition table" in err.message and "a ZFS pool member signature" in err.message
    assert "dmsetup remove" in (err.hint or "")


def test_missing_sysfs_entry_is_refused() -> None:
    facts = TargetFacts(path="/dev/sdx", kind="block", device=None)
    assert "sysfs entry could not be read" in _refusal(facts, []).message


def test_files_directories_missing_pass_the_block_guard(tmp_path: Path) -> None:
    for facts in (inspect(str(tmp_path)), inspect(str(tmp_path / "new"))):
        check_block_write(facts, [])


def test_character_device_passes_only_when_named() -> None:
    facts = inspect("/dev/null")
    err = _refusal(facts, [])
    assert "cannot check it for data" in err.message and "--destroy /dev/null" in (err.hint or "")
    check_block_write(facts, ["/dev/null"])
    assert not is_named(facts, ["/dev/zero"])


# --- free space -----------------------------------------------------------------------------------


def test_free_space_on_real_directory(tmp_path: Path) -> None:
    facts = inspect(str(tmp_path))
    assert facts.free_bytes is not None
    check_free_space(facts, 1 * MiB)
    with pytest.raises(SafetyError) as info:
        check_free_space(facts, facts.free_bytes)
    assert "iolab keeps" in info.value.message and str(tmp_path) in info.value.message
    assert info.value.hint


def test_free_space_margin_and_existing_file() -> None:
    free = 10 * GiB
    margin = default_margin(free)
    assert margin == GiB
    directory = TargetFacts(path="/d", kind="directory", free_bytes=free, fs_type="ext4", mount_point="/")
    check_free_space(directory, free - margin)
    with pytest.raises(SafetyError, match=r"10\.00 GiB free"):
        check_free_space(directory, free - margin + 1)
    # An existing 4 GiB file is reused: it counts as available.
    existing = TargetFacts(path="/d/f", kind="file", size_bytes=4 * GiB, free_bytes=free)
    check_free_space(existing, free - margin + 4 * GiB)
    with pytest.raises(SafetyError, match="existing file"):
        check_free_space(existing, free - margin + 4 * GiB + 1)
    # Explicit margin; block devices and unknown free space are not checked here.
    check_free_space(directory, free, margin_bytes=0)
    check_free_space(TargetFacts(path="/dev/sdx", kind="block"), 10**15)
    check_free_space(TargetFacts(path="/x", kind="missing"), 10**15)


def test_default_margin_bounds() -> None:
    assert default_margin(0) == 16 * MiB
    assert default_margin(1000 * MiB) == 100 * MiB
    assert default_margin(10**15) == GiB


# --- writes() ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, False),
        ({"rw": "read"}, False),
        ({"rw": "randread:8"}, False),
        ({"readwrite": "randread", "bs": "4k"}, False),
        ({"rw": "write"}, True),
        ({"rw": "randwrite"}, True),
        ({"rw": "rw"}, True),
        ({"rw": "readwrite"}, True),
        ({"rw": "randrw", "rwmixread": "100"}, True),
        ({"rw": "write:4k"}, True),
        ({"readwrite": "trim"}, True),
        ({"rw": "randtrim"}, True),
        ({"rw": "trimwrite"}, True),
        ({"rw": "randtrimwrite"}, True),
        ({"rw": "read", "readwrite": "write"}, True),
        ({"rw": "bogus"}, True),
        ({"rw": "READ"}, True),
        ({"rw": "read", "verify": "crc32c"}, False),
        ({"rw": "write", "verify": "crc32c", "verify_only": None}, False),
        ({"rw": "randwrite", "verify_only": "1"}, False),
        ({"rw": "randwrite", "verify_only": "0"}, True),
        ({"rw": "trimwrite", "verify_only": None}, True),
        ({"rw": "read", "fill_device": "1"}, True),
        ({"rw": "read", "fill_fs": None}, True),
        ({"rw": "read", "fill_device": "0"}, False),
        ({"rw": "read", "create_only": "1"}, True),
        ({"rw": "read", "unlink": "1"}, True),
        ({"rw": "read", "unlink_each_loop": "true"}, True),
        ({"rw": "read", "trim_percentage": "10"}, True),
        ({"rw": "read", "trim_backlog": "0"}, False),
        ({"rw": "read", "ioengine": "filedelete"}, True),
        ({"rw": "read", "ioengine": "falloc"}, True),
        ({"rw": "read", "ioengine": "libaio", "zonemode": "zbd"}, False),
        ({"rw": "read", "read_iolog": "trace.bin"}, True),
        ({"read_iolog": "trace.bin", "replay_skip": "write,trim"}, False),
        ({"read_iolog": "trace.bin", "replay_skip": "write"}, True),
        ({"rw": "read", "write_iolog": "out.log", "write_bw_log": "bw"}, False),
    ],
)
def test_writes(options: dict[str, str | None], expected: bool) -> None:
    assert writes(options) is expected


def test_identity_survives_missing_paths() -> None:
    facts = TargetFacts(path="/nonexistent/dev", kind="block", device=None)
    assert not is_named(facts, ["/nonexistent/dev"])  # never matched by string
