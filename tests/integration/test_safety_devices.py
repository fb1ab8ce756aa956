"""The destructive-write guard's decisions on real loop devices (root, losetup): ext4, mounts,
partitions, swap, exclusive holders, unprobed devices, blank devices named or not, symlinks; the
bytes of each device unchanged. Constructed facts and files: tests/unit/check/test_safety.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from iolab.check.safety import check_block_write
from iolab.errors import SafetyError
from iolab.facts.targets import BUSY_MARK, SWAP_MARK, inspect
from iolab.model import TargetFacts
from loopdev import MiB, loop_device, requires_loop


def _refusal(facts: TargetFacts, destroy: list[str]) -> SafetyError:
    with pytest.raises(SafetyError) as info:
        check_block_write(facts, destroy)
    return info.value


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
