"""Loop devices for tests: attach a backing file, format, partition, mount, and always clean up.

Usage::

    from loopdev import loop_device, requires_loop

    @requires_loop
    def test_something(tmp_path):
        with loop_device(tmp_path, size_bytes=32 * MiB) as loop:
            loop.make_ext4()
            loop.mount(tmp_path / "mnt")
            ...  # loop.path is "/dev/loopN", loop.backing the image file

Everything a ``LoopDevice`` does is undone when the ``with`` block ends, in reverse order:
its own mounts are unmounted, its own swap is switched off, and the device it attached is
detached by its path, after checking that the device still has our backing file. Other loop
devices on the machine are never touched.

Needs root and util-linux (``losetup``, ``mount``, ``partx``; ``mkfs.ext4`` from e2fsprogs,
``mkswap``/``swapon``). A partition table is written with ``sfdisk`` or ``parted`` when either
is installed, else as a hand-made MBR (so neither package is required).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import struct
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

MiB = 1024**2


def loop_unavailable_reason() -> str | None:
    """Why loop-device tests cannot run here, or ``None`` when they can."""
    if os.geteuid() != 0:
        return "needs root to attach loop devices (losetup)"
    if shutil.which("losetup") is None:
        return "losetup (util-linux) is not installed"
    if not (os.path.exists("/dev/loop-control") or os.path.exists("/dev/loop0")):
        return "no loop device support (/dev/loop-control missing)"
    return None


#: Marks a test as needing root and loop devices, and skips it with the reason when unavailable.
requires_loop = pytest.mark.skipif(loop_unavailable_reason() is not None,
                                   reason=loop_unavailable_reason() or "")


def run(*argv: str, stdin: str | None = None) -> str:
    """Run a command, return its stdout; raise with its stderr when it fails."""
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def sha256_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class LoopDevice:
    """An attached loop device; ``path`` is ``/dev/loopN``, ``backing`` the image file."""

    path: str
    backing: Path
    _undo: list[Callable[[], None]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def sha256(self) -> str:
        """Digest of the backing file (all bytes of the device)."""
        return sha256_file(self.backing)

    def make_ext4(self, device: str | None = None) -> None:
        """ext4 without lazy init, so a mounted filesystem does not keep writing in the background."""
        run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", device or self.path)

    def make_swap(self, device: str | None = None) -> None:
        run("mkswap", device or self.path)

    def swapon(self, device: str | None = None) -> None:
        dev = device or self.path
        run("swapon", dev)
        self._undo.append(lambda: _quiet("swapoff", dev))

    def mount(self, mount_point: Path, device: str | None = None, options: str = "") -> Path:
        """Mount the device (or one of its partitions) on ``mount_point``, created if needed."""
        mount_point.mkdir(parents=True, exist_ok=True)
        argv = ["mount", *(["-o", options] if options else []), device or self.path, str(mount_point)]
        run(*argv)
        self._undo.append(lambda: _quiet("umount", str(mount_point)))
        return mount_point

    def partition(self, first_sector: int = 2048, sectors: int = 4096) -> str:
        """Write a DOS partition table with one Linux partition; return its node (``/dev/loopNp1``)."""
        if shutil.which("sfdisk"):
            run("sfdisk", "-q", self.path, stdin=f"start={first_sector}, size={sectors}, type=83\n")
        elif shutil.which("parted"):
            end = first_sector + sectors - 1
            run("parted", "-s", self.path, "mklabel", "msdos", "mkpart", "primary",
                f"{first_sector}s", f"{end}s")
        else:
            self._write_mbr(first_sector, sectors)
        with contextlib.suppress(RuntimeError):  # partx -a fails when the kernel already has them
            run("partx", "-a", self.path)
        part = f"{self.path}p1"
        if not os.path.exists(f"/sys/class/block/{self.name}p1"):
            raise RuntimeError(f"the kernel did not pick up the partition of {self.path}")
        return part

    def _write_mbr(self, first_sector: int, sectors: int) -> None:
        """A minimal MBR: one entry (type 0x83, LBA start/length), boot signature 0x55AA."""
        entry = bytes([0x00, 0, 0, 0, 0x83, 0, 0, 0]) + struct.pack("<II", first_sector, sectors)
        with open(self.path, "r+b") as dev:
            dev.seek(446)
            dev.write(entry + bytes(48) + b"\x55\xaa")
            dev.flush()
            os.fsync(dev.fileno())

    def close(self) -> None:
        while self._undo:
            self._undo.pop()()
        backing = _backing_file(self.name)
        if backing is not None and os.path.realpath(backing) == os.path.realpath(self.backing):
            _quiet("losetup", "-d", self.path)


@contextlib.contextmanager
def loop_device(tmp_dir: Path, size_bytes: int = 32 * MiB, name: str = "loop.img",
                direct_io: bool = False) -> Iterator[LoopDevice]:
    """Attach a fresh zero-filled (sparse) image in ``tmp_dir`` with partition scanning on; with
    ``direct_io``, the loop driver reads and writes the image with O_DIRECT (``losetup --direct-io``:
    a request lasts as long as the backing file's I/O, not a copy in the loop worker)."""
    backing = tmp_dir / name
    with open(backing, "wb") as f:
        f.truncate(size_bytes)
    path = run("losetup", "--find", "--show", "--partscan", *(["--direct-io=on"] if direct_io else []),
               str(backing)).strip()
    loop = LoopDevice(path=path, backing=backing)
    try:
        yield loop
    finally:
        loop.close()


@contextlib.contextmanager
def tmpfs(mount_point: Path, size: str = "8m") -> Iterator[Path]:
    """Mount a small tmpfs on ``mount_point`` for the duration of the block."""
    mount_point.mkdir(parents=True, exist_ok=True)
    run("mount", "-t", "tmpfs", "-o", f"size={size}", "iolab-test", str(mount_point))
    try:
        yield mount_point
    finally:
        _quiet("umount", str(mount_point))


def _backing_file(name: str) -> str | None:
    try:
        with open(f"/sys/block/{name}/loop/backing_file", encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def _quiet(*argv: str) -> None:
    subprocess.run(argv, capture_output=True, check=False)
