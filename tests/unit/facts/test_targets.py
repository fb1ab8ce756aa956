"""targets.inspect and block_device_facts: real files, directories, fixture sysfs trees.

On tmpfs mounts and loop devices (root, losetup): tests/integration/test_targets_devices.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iolab.errors import IolabError
from iolab.facts.targets import Mount, block_device_facts, inspect, mount_of, read_mounts

MiB = 1024**2

# --- mountinfo ---------------------------------------------------------------------------------

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
40 27 8:1 / /mnt/a rw,noatime shared:5 - xfs /dev/sda1 rw,attr2
41 27 8:2 / /mnt/ab rw - ext4 /dev/sda2 rw
42 40 0:50 / /mnt/a/my\\040disk rw - tmpfs none rw,size=1024k
43 40 8:3 / /mnt/a rw,nodev - ext4 /dev/sda3 rw,data=ordered
"""


@pytest.fixture
def mountinfo(tmp_path: Path) -> str:
    path = tmp_path / "mountinfo"
    path.write_text(MOUNTINFO)
    return str(path)


def test_read_mounts_parses_fields_and_escapes(mountinfo: str) -> None:
    mounts = read_mounts(mountinfo)
    assert len(mounts) == 6
    xfs = mounts[2]
    assert (xfs.major, xfs.minor, xfs.mount_point) == (8, 1, "/mnt/a")
    assert (xfs.fs_type, xfs.source) == ("xfs", "/dev/sda1")
    assert xfs.options == "rw,noatime" and xfs.super_options == "rw,attr2"
    assert mounts[4].mount_point == "/mnt/a/my disk"


def test_read_mounts_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_mounts(str(tmp_path / "nope")) == ()


def test_mount_of_longest_prefix_last_wins_and_component_boundary(mountinfo: str) -> None:
    mounts = read_mounts(mountinfo)
    # /mnt/a is mounted twice: the later mount (sda3) hides the earlier one.
    assert mount_of("/mnt/a/x/y", mounts).source == "/dev/sda3"  # type: ignore[union-attr]
    assert mount_of("/mnt/ab/file", mounts).source == "/dev/sda2"  # type: ignore[union-attr]
    assert mount_of("/mnt/abc", mounts).source == "/dev/vda"  # type: ignore[union-attr]
    assert mount_of("/mnt/a/my disk/f", mounts).fs_type == "tmpfs"  # type: ignore[union-attr]
    assert mount_of("/proc", mounts).fs_type == "proc"  # type: ignore[union-attr]


# --- files, directories, missing paths on this machine ---------------------------------------------


def _expected_mount(path: str) -> Mount | None:
    return mount_of(path, read_mounts())


def test_inspect_directory(tmp_path: Path) -> None:
    facts = inspect(str(tmp_path))
    mount = _expected_mount(str(tmp_path))
    assert facts.kind == "directory" and facts.path == str(tmp_path)
    assert facts.size_bytes is None
    assert mount is not None and facts.fs_type == mount.fs_type and facts.mount_point == mount.mount_point
    assert facts.mount_source == mount.source
    assert os.path.realpath(tmp_path).startswith(facts.mount_point.rstrip("/"))  # type: ignore[union-attr]
    vfs = os.statvfs(tmp_path)
    assert facts.free_bytes is not None
    assert abs(facts.free_bytes - vfs.f_bavail * vfs.f_frsize) < 64 * MiB
    for opt in mount.options.split(","):
        assert opt in facts.mount_options.split(",")  # type: ignore[union-attr]
    assert facts.signatures == () and facts.mounted_at == ()


def test_inspect_file_and_device_under_it(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(b"x" * 12345)
    facts = inspect(str(path))
    assert facts.kind == "file" and facts.size_bytes == 12345
    st = os.stat(path)
    devnum = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if os.path.exists(f"/sys/dev/block/{devnum}"):
        assert facts.device is not None
        expected = os.path.basename(os.path.realpath(f"/sys/dev/block/{devnum}"))
        assert facts.device.name == expected
        # A partition's queue settings come from its disk.
        if facts.device.parent is not None:
            assert os.path.exists(f"/sys/class/block/{facts.device.parent}/{facts.device.name}/partition")
        assert facts.device.logical_block_bytes in (512, 1024, 2048, 4096)


def test_inspect_missing_describes_nearest_parent(tmp_path: Path) -> None:
    facts = inspect(str(tmp_path / "not" / "yet" / "file.dat"))
    parent = inspect(str(tmp_path))
    assert facts.kind == "missing" and facts.size_bytes is None
    assert (facts.fs_type, facts.mount_point) == (parent.fs_type, parent.mount_point)
    assert facts.device == parent.device
    assert facts.free_bytes is not None and facts.free_bytes > 0


def test_inspect_relative_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert inspect("scratch").path == str(tmp_path / "scratch")


def test_inspect_character_device_is_other() -> None:
    facts = inspect("/dev/null")
    assert facts.kind == "other" and facts.device is None


def test_inspect_file_as_directory_raises(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(IolabError, match="cannot inspect target"):
        inspect(str(tmp_path / "f" / "below"))


def test_inspect_with_fixture_mountinfo(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(f"50 1 0:99 / {tmp_path} rw,nosuid - fakefs fake-src rw,flavour=x\n")
    facts = inspect(str(tmp_path / "x"), mountinfo=str(info))
    assert (facts.fs_type, facts.mount_point, facts.mount_source) == ("fakefs", str(tmp_path), "fake-src")
    assert facts.mount_options == "rw,nosuid,flavour=x"


# --- fixture sysfs trees ----------------------------------------------------------------------------


def test_block_device_facts_nvme_with_queues_and_numa(fake_sysfs) -> None:
    disk = fake_sysfs.disk(
        "nvme0n1", devnum="259:0", size_sectors=8_000_000, numa_node=1,
        queues=["0, 1", "2, 3", "4", "5, 6, 7"] + [f"{i}" for i in range(8, 12)],
        queue={"scheduler": "[none] mq-deadline kyber", "nr_requests": "1023"},
        device={"model": "Fake NVMe 1TB  ", "serial": "S123"},
    )
    fake_sysfs.partition(disk, "nvme0n1p1", devnum="259:1", number=1, size_sectors=2048)
    sysfs = str(fake_sysfs.root)
    facts = block_device_facts("nvme0n1", sysfs=sysfs)
    assert facts.name == "nvme0n1" and facts.path == "/dev/nvme0n1"
    assert facts.size_bytes == 8_000_000 * 512
    assert facts.model == "Fake NVMe 1TB" and facts.serial == "S123"
    assert facts.numa_node == 1
    assert facts.scheduler == "none" and facts.nr_requests == 1023 and facts.rotational is False
    assert facts.logical_block_bytes == 512 and facts.physical_block_bytes == 4096
    assert facts.write_cache == "write back" and facts.read_ahead_kb == 128
    assert list(facts.queues.items()) == [
        ("0", "0-1"), ("1", "2-3"), ("2", "4"), ("3", "5-7"),
        ("4", "8"), ("5", "9"), ("6", "10"), ("7", "11"),
    ]
    assert facts.partitions == ("nvme0n1p1",) and facts.parent is None
    # The same device by number and by /dev path (no such node here: falls back to the name).
    assert block_device_facts("259:0", sysfs=sysfs) == facts
    assert block_device_facts("/dev/nvme0n1", sysfs=sysfs) == facts


def test_block_device_facts_partition_reads_disk_queue(fake_sysfs) -> None:
    disk = fake_sysfs.disk("sda", devnum="8:0", numa_node=0, queues=["0-3"],
                           queue={"rotational": "1", "scheduler": "mq-deadline [bfq] none"},
                           device={"vendor": "ATA     ", "model": "Spinner"})
    fake_sysfs.partition(disk, "sda2", devnum="8:2", number=2, size_sectors=4096)
    part = block_device_facts("sda2", sysfs=str(fake_sysfs.root))
    assert (part.name, part.parent, part.path) == ("sda2", "sda", "/dev/sda2")
    assert part.size_bytes == 4096 * 512
    assert part.rotational is True and part.scheduler == "bfq" and part.vendor == "ATA"
    assert part.queues == {"0": "0-3"} and part.numa_node == 0 and part.partitions == ()


def test_block_device_facts_holders_numa_minus_one_and_vpd_serial(fake_sysfs) -> None:
    disk = fake_sysfs.disk("sdb", devnum="8:16", numa_node=-1, holders=["dm-0", "md127"])
    serial = b"PRODUCT-SERIAL-9"
    (disk / "device" / "vpd_pg80").write_bytes(bytes([0, 0x80, 0, len(serial)]) + serial)
    facts = block_device_facts("sdb", sysfs=str(fake_sysfs.root))
    assert facts.numa_node is None
    assert facts.holders == ("dm-0", "md127")
    assert facts.serial == "PRODUCT-SERIAL-9"


def test_block_device_facts_hctx_sorted_numerically(fake_sysfs) -> None:
    fake_sysfs.disk("nvme1n1", devnum="259:5", queues=[str(i) for i in range(12)])
    queues = block_device_facts("nvme1n1", sysfs=str(fake_sysfs.root)).queues
    assert list(queues) == [str(i) for i in range(12)]


def test_block_device_facts_missing_attributes_are_none(tmp_path: Path) -> None:
    bare = tmp_path / "sys" / "class" / "block" / "xvda"
    bare.mkdir(parents=True)
    facts = block_device_facts("xvda", sysfs=str(tmp_path / "sys"))
    assert facts.name == "xvda" and facts.size_bytes is None and facts.scheduler is None
    assert facts.queues == {} and facts.holders == () and facts.partitions == ()


def test_block_device_facts_unknown_device_raises(fake_sysfs) -> None:
    with pytest.raises(IolabError, match="no block device 'sdz'"):
        block_device_facts("sdz", sysfs=str(fake_sysfs.root))
    with pytest.raises(IolabError):
        block_device_facts("9:9", sysfs=str(fake_sysfs.root))


def test_block_device_facts_real_sysfs_matches_kernel() -> None:
    # Loop devices come and go while other tests run; the others are stable.
    names = sorted(os.listdir("/sys/class/block")) if os.path.isdir("/sys/class/block") else []
    names = [n for n in names if not n.startswith("loop")]
    if not names:
        pytest.skip("no block devices besides loop devices in /sys/class/block")
    for name in names:
        facts = block_device_facts(name)
        with open(f"/sys/class/block/{name}/size") as f:
            assert facts.size_bytes == int(f.read()) * 512
        assert facts.name == name
