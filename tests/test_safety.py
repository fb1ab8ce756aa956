"""The destructive-write guard on real loop devices, free-space checks, and which fio jobs write."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from iolab.check.safety import GiB, check_block_write, check_free_space, default_margin, is_named, writes
from iolab.errors import SafetyError
from iolab.facts.targets import BUSY_MARK, SWAP_MARK, inspect
from iolab.model import BlockDeviceFacts, TargetFacts
from loopdev import MiB, loop_device, requires_loop


def _refusal(facts: TargetFacts, destroy: list[str]) -> SafetyError:
    with pytest.raises(SafetyError) as info:
        check_block_write(facts, destroy)
    return info.value


# --- real loop devices -----------------------------------------------------------------------------


@pytest.mark.root
@requires_loop
def test_guard_refuses_ext4_even_when_named_and_leaves_bytes_alone(tmp_path: Path) -> None:
    with loop_device(tmp_path) as loop:
        loop.make_ext4()
        before = loop.sha256()
        facts = inspect(loop.path)
        err = _refusal(facts, [loop.path])
        assert err.message.startswith(f"refusing to write to {loop.path}: ")
        assert "an ext4 filesystem signature" in err.message
        assert "not named" not in err.message
        assert f"wipefs -a {loop.path}" in (err.hint or "")
        assert "--destroy" not in (err.hint or "")  # already named: "run again"
        assert loop.sha256() == before


@pytest.mark.root
@requires_loop
def test_guard_refuses_mounted_device_with_every_reason(tmp_path: Path) -> None:
    with loop_device(tmp_path) as loop:
        loop.make_ext4()
        mnt = loop.mount(tmp_path / "mnt", options="ro")  # read-only: the kernel writes nothing
        before = loop.sha256()
        facts = inspect(loop.path)
        assert facts.mounted_at == (str(mnt),)
        err = _refusal(facts, [])
        assert f"it is mounted at {mnt}" in err.message
        assert "ext4 filesystem signature" in err.message
        assert "it is not named with --destroy" in err.message
        assert f"umount {mnt}" in (err.hint or "")
        assert (err.hint or "").endswith(f"pass --destroy {loop.path}")
        err_named = _refusal(facts, [loop.path])
        assert f"mounted at {mnt}" in err_named.message
        assert loop.sha256() == before


@pytest.mark.root
@requires_loop
def test_guard_refuses_partition_table_and_mounted_partition(tmp_path: Path) -> None:
    with loop_device(tmp_path) as loop:
        part = loop.partition(first_sector=2048, sectors=8192)
        before = loop.sha256()
        facts = inspect(loop.path)
        err = _refusal(facts, [loop.path])
        assert "a dos partition table" in err.message
        assert f"it has partitions {loop.name}p1" in err.message
        assert "blockdev --rereadpt" in (err.hint or "")
        assert loop.sha256() == before
        # A filesystem on the partition, mounted: the disk is refused for the mount too.
        loop.make_ext4(part)
        mnt = loop.mount(tmp_path / "mnt", device=part, options="ro")
        before = loop.sha256()
        err = _refusal(inspect(loop.path), [loop.path])
        assert f"it or a partition or holder of it is mounted at {mnt}" in err.message
        # The partition itself: its own signature and mount.
        err = _refusal(inspect(part), [part])
        assert "ext4" in err.message and f"mounted at {mnt}" in err.message
        assert loop.sha256() == before


@pytest.mark.root
@requires_loop
def test_guard_blank_device_passes_only_when_named(tmp_path: Path) -> None:
    with loop_device(tmp_path, name="a.img") as loop, loop_device(tmp_path, name="b.img") as other:
        facts = inspect(loop.path)
        assert facts.signatures == () and facts.probe_errors == ()
        check_block_write(facts, [loop.path])
        err = _refusal(facts, [])
        assert "it is not named with --destroy (it looks blank" in err.message
        assert err.hint == f"if everything on {loop.path} may be destroyed, add --destroy {loop.path}"
        # Another device, a string prefix of the name, a non-existing path: not a match.
        _refusal(facts, [other.path])
        _refusal(facts, [loop.path + "0", loop.path[:-1], str(tmp_path / "nope"), loop.name])
        # A symlink to the device matches (device number, not spelling).
        link = tmp_path / "by-id-link"
        link.symlink_to(loop.path)
        check_block_write(facts, [str(link)])
        # Target given through the symlink, destroy named by the kernel path.
        via_link = inspect(str(link))
        check_block_write(via_link, [loop.path])
        err = _refusal(via_link, [])
        assert err.message.startswith(f"refusing to write to {link} ({loop.path}):")
        assert f"--destroy {link}" in (err.hint or "")


@pytest.mark.root
@requires_loop
@pytest.mark.skipif(shutil.which("mkswap") is None, reason="mkswap is not installed")
def test_guard_refuses_swap_signature_and_active_swap(tmp_path: Path) -> None:
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        loop.make_swap()
        before = loop.sha256()
        err = _refusal(inspect(loop.path), [loop.path])
        assert "a swap signature" in err.message
        assert loop.sha256() == before
        loop.swapon()
        facts = inspect(loop.path)
        assert SWAP_MARK in facts.mounted_at
        err = _refusal(facts, [loop.path])
        assert "it is in use as swap" in err.message and "swapoff" in (err.hint or "")


@pytest.mark.root
@requires_loop
def test_guard_refuses_device_held_exclusively_by_a_program(tmp_path: Path) -> None:
    with loop_device(tmp_path, size_bytes=8 * MiB) as loop:
        fd = os.open(loop.path, os.O_RDONLY | os.O_EXCL)  # as a mount in another namespace would
        try:
            facts = inspect(loop.path)
        finally:
            os.close(fd)
        assert facts.mounted_at == (BUSY_MARK,) and facts.signatures == ()
        err = _refusal(facts, [loop.path])
        assert "the kernel reports it busy" in err.message and "fuser" in (err.hint or "")
        assert inspect(loop.path).mounted_at == ()


@pytest.mark.root
@requires_loop
def test_guard_refuses_unchecked_device(tmp_path: Path) -> None:
    with loop_device(tmp_path, size_bytes=8 * MiB) as loop:
        facts = inspect(loop.path, blkid="/nonexistent/blkid", wipefs="/nonexistent/wipefs")
        assert facts.probe_errors
        err = _refusal(facts, [loop.path])
        assert "could not be checked for signatures" in err.message
        assert "not installed" in err.message


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
