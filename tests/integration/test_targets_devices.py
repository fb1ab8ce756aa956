"""targets.inspect and probe_signatures on a tmpfs mount and on loop devices (root, losetup): blank,
partitioned with ext4 and mounted, through a symlink and as swap, with no probe tool. Files,
directories and fixture sysfs trees: tests/unit/facts/test_targets.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from iolab.facts.targets import SWAP_MARK, inspect, probe_signatures
from loopdev import MiB, loop_device, requires_loop, tmpfs


@pytest.mark.root
@requires_loop
def test_inspect_tmpfs_has_no_device(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "t", size="4m") as mnt:
        facts = inspect(str(mnt / "file"))
        assert facts.kind == "missing" and facts.fs_type == "tmpfs" and facts.mount_point == str(mnt)
        assert facts.device is None
        assert 0 < facts.free_bytes <= 4 * MiB  # type: ignore[operator]


@pytest.mark.root
@requires_loop
def test_inspect_blank_loop_device(tmp_path: Path) -> None:
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        facts = inspect(loop.path)
        assert facts.kind == "block" and facts.size_bytes == 16 * MiB
        dev = facts.device
        assert dev is not None and dev.name == loop.name and dev.path == loop.path
        assert dev.size_bytes == 16 * MiB and dev.parent is None
        assert dev.holders == () and dev.partitions == ()
        assert dev.logical_block_bytes == 512
        assert dev.queues and all(v for v in dev.queues.values())
        assert facts.signatures == () and facts.mounted_at == () and facts.probe_errors == ()


@pytest.mark.root
@requires_loop
def test_inspect_loop_with_filesystem_partition_and_mounts(tmp_path: Path) -> None:
    with loop_device(tmp_path, size_bytes=32 * MiB) as loop:
        part = loop.partition(first_sector=2048, sectors=16384)
        loop.make_ext4(part)
        mnt = loop.mount(tmp_path / "mnt", device=part)
        disk = inspect(loop.path)
        assert "dos partition table" in disk.signatures
        assert disk.device is not None and disk.device.partitions == (f"{loop.name}p1",)
        assert disk.mounted_at == (str(mnt),)  # the partition's mount counts for the disk
        p = inspect(part)
        assert p.signatures == ("ext4",) and p.mounted_at == (str(mnt),)
        assert p.device is not None
        assert (p.device.name, p.device.parent) == (f"{loop.name}p1", loop.name)
        assert p.device.size_bytes == 16384 * 512
        assert p.device.scheduler == disk.device.scheduler and p.device.queues == disk.device.queues
        inside = inspect(str(mnt / "newfile"))
        assert inside.kind == "missing" and inside.fs_type == "ext4" and inside.mount_point == str(mnt)
        assert inside.device is not None and inside.device.name == f"{loop.name}p1"
        assert inside.device.parent == loop.name


@pytest.mark.root
@requires_loop
def test_inspect_through_symlink_and_swap(tmp_path: Path) -> None:
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        link = tmp_path / "my-disk"
        link.symlink_to(loop.path)
        loop.make_swap()
        facts = inspect(str(link))
        assert facts.path == str(link) and facts.device is not None and facts.device.path == loop.path
        assert facts.signatures == ("swap",)
        loop.swapon()
        assert SWAP_MARK in inspect(loop.path).mounted_at


@pytest.mark.root
@requires_loop
def test_probe_errors_when_no_tool_runs(tmp_path: Path) -> None:
    with loop_device(tmp_path, size_bytes=8 * MiB) as loop:
        sigs, errors = probe_signatures(loop.path, blkid="/nonexistent/blkid", wipefs="/nonexistent/wipefs")
        assert sigs == () and len(errors) == 2 and "not installed" in errors[0]
        # One probe is enough.
        assert probe_signatures(loop.path, blkid="/nonexistent/blkid") == ((), ())
