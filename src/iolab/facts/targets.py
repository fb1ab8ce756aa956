"""Inspect a target path: what it is, which filesystem and device hold it, whether it holds data.

A target is a regular file, a directory (fio creates its files inside), a path that does not
exist yet (a scratch file will be created; the facts describe the filesystem of the nearest
existing parent), a block device, or ``other`` (character device, FIFO, socket).

Sources, all read-only:

* ``/proc/self/mountinfo`` (``proc(5)``): mount point, options and source of a path; the mount
  of a path is the entry with the longest mount point that is a path prefix of its real path
  (a later entry with the same mount point hides an earlier one).
* sysfs (``Documentation/ABI/stable/sysfs-block``): ``/sys/dev/block/MAJ:MIN`` links a device
  number to ``/sys/devices/.../block/NAME``; ``size`` is in 512-byte sectors whatever the
  logical block size; a partition is a child directory with a ``partition`` file and has no
  ``queue/`` of its own, so queue settings are read from its disk; ``mq/N/cpu_list`` are the
  blk-mq hardware queues.
* ``/proc/swaps`` for active swap devices.
* ``blkid -p -o export`` (low-level probing, never the cache) and ``wipefs -n`` for on-disk
  signatures; both use libblkid, which knows filesystems, partition tables, LVM, MD RAID,
  LUKS, swap and more.

The sysfs root, the mountinfo and swaps files and the probe commands are keyword parameters so
tests can point them at fixture trees.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from iolab.errors import IolabError
from iolab.facts import sysfs
from iolab.facts.sysfs import format_cpu_list, parse_cpu_list
from iolab.model import BlockDeviceFacts, TargetFacts

SYSFS = "/sys"
MOUNTINFO = "/proc/self/mountinfo"
SWAPS = "/proc/swaps"

#: libblkid's partition-table probers (``libblkid/src/partitions/``): wipefs reports these
#: under their bare name, blkid as ``PTTYPE``.
PARTITION_TABLE_TYPES = frozenset(
    {"dos", "gpt", "PMBR", "atari", "bsd", "mac", "sgi", "sun", "solaris", "unixware", "minix", "aix"}
)

#: How ``mounted_at`` marks active swap on the device, its partitions or holders (as lsblk).
SWAP_MARK = "[SWAP]"
#: How ``mounted_at`` marks a device the kernel will not let us open exclusively (``EBUSY``)
#: although no mount, swap or holder explains it: e.g. mounted in another mount namespace.
BUSY_MARK = "[BUSY]"

_PROBE_TIMEOUT_S = 30


@dataclass(frozen=True)
class Mount:
    """One line of ``/proc/self/mountinfo``, with octal escapes (``\\040``) decoded."""

    major: int
    minor: int
    root: str
    mount_point: str
    options: str
    fs_type: str
    source: str
    super_options: str


def read_mounts(mountinfo: str = MOUNTINFO) -> tuple[Mount, ...]:
    """Every mount of ``mountinfo``, in file order; ``()`` when it cannot be read.

    Line format (``proc(5)``): ``id parent MAJ:MIN root mountpoint options [optional...] -
    fstype source superoptions``.
    """
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return ()
    mounts = []
    for line in lines:
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 6 or len(rest) < 2:
            continue
        major, _, minor = fields[2].partition(":")
        mounts.append(
            Mount(
                major=int(major),
                minor=int(minor),
                root=_unescape(fields[3]),
                mount_point=_unescape(fields[4]),
                options=fields[5],
                fs_type=rest[0],
                source=_unescape(rest[1]),
                super_options=rest[2] if len(rest) > 2 else "",
            )
        )
    return tuple(mounts)


def mount_of(path: str, mounts: Iterable[Mount]) -> Mount | None:
    """The mount holding ``path`` (resolved with ``realpath``): longest mount-point prefix, last wins."""
    real = os.path.realpath(path)
    best: Mount | None = None
    for m in mounts:
        mp = m.mount_point
        inside = real == mp or mp == "/" or real.startswith(mp.rstrip("/") + "/")
        if inside and (best is None or len(mp) >= len(best.mount_point)):
            best = m
    return best


def inspect(
    path: str,
    *,
    sysfs: str = SYSFS,
    mountinfo: str = MOUNTINFO,
    swaps: str = SWAPS,
    blkid: str = "blkid",
    wipefs: str = "wipefs",
) -> TargetFacts:
    """Describe the target ``path`` (see the module docstring for the kinds and sources).

    ``path`` in the result is the absolute form of the argument, not resolved: a symlink such
    as ``/dev/disk/by-id/...`` stays as given; ``device.path`` is the kernel's node name.
    ``free_bytes`` is what an unprivileged user may still write (``f_bavail * f_frsize``; None on a
    file system without blocks, such as proc).
    ``mount_options`` joins the per-mount and the superblock options, without repeats.

    Block devices get ``mounted_at`` (mount points, ``SWAP_MARK``, or ``BUSY_MARK`` when the
    kernel reports the device held but nothing visible explains it), ``signatures`` and, when
    neither blkid nor wipefs could
    probe the device (missing, no permission), ``probe_errors``. Probing opens the device
    read-only; it needs read permission (root for most disks).

    Raises ``IolabError`` when the path exists but cannot be examined (permission denied on
    a parent directory, a file used as a directory).
    """
    abspath = os.path.abspath(path)
    try:
        st = os.stat(abspath)
    except FileNotFoundError:
        return _inspect_missing(abspath, sysfs, mountinfo)
    except OSError as exc:
        raise IolabError(
            f"cannot inspect target {abspath}: {exc.strerror}",
            hint="check the path and its permissions",
        ) from exc
    if stat.S_ISBLK(st.st_mode):
        return _inspect_block(abspath, st, sysfs, mountinfo, swaps, blkid, wipefs)
    if stat.S_ISDIR(st.st_mode):
        return _fs_facts(abspath, "directory", None, abspath, st, sysfs, mountinfo)
    if stat.S_ISREG(st.st_mode):
        return _fs_facts(abspath, "file", st.st_size, abspath, st, sysfs, mountinfo)
    return TargetFacts(path=abspath, kind="other")


def block_device_facts(path_or_name: str, *, sysfs: str = SYSFS) -> BlockDeviceFacts:
    """sysfs facts of a block device given as a node path (``/dev/sda1``, any symlink to it),
    a kernel name (``sda1``, ``nvme0n1``) or a device number (``"259:0"``).

    For a partition, ``name`` is the partition, ``parent`` its disk, and the queue settings,
    model, serial, vendor, NUMA node and ``queues`` are the disk's (a partition has none of
    its own); ``size_bytes`` and ``holders`` are the partition's. ``queues`` maps each blk-mq
    hardware context to its CPUs in cpulist spelling (``{"0": "0-1", "1": "2-3"}``), ordered
    by number. ``numa_node`` is ``None`` when sysfs says -1 (no affinity) or has no entry.
    ``path`` is ``/dev/`` + the uevent ``DEVNAME``. Unreadable attributes are ``None``.

    Raises ``IolabError`` when sysfs has no such block device.
    """
    sysdir = _sysfs_dir(path_or_name, sysfs)
    if sysdir is None:
        raise IolabError(
            f"no block device {path_or_name!r} in {sysfs}/class/block",
            hint="give a block device path such as /dev/sdb, or a kernel name such as sdb",
        )
    return _facts_from_sysdir(sysdir)


def probe_signatures(device: str, *, blkid: str = "blkid", wipefs: str = "wipefs") -> tuple[
    tuple[str, ...], tuple[str, ...]
]:
    """Signatures on ``device`` and the probe errors: ``(("ext4", "dos partition table"), ())``.

    Filesystems and other superblocks are reported by type (``ext4``, ``swap``,
    ``LVM2_member``, ``linux_raid_member``, ``crypto_LUKS`` ...), partition tables as
    ``"<type> partition table"``; blkid's "ambivalent result" (several signatures, exit 8)
    is reported as ``"ambivalent probe result"``. The union of both probes, in the order
    found, without repeats. The errors list is empty when at least one probe ran; when none
    could, it says why for each, and the caller must treat the device as not checked.
    """
    try:
        os.close(os.open(device, os.O_RDONLY | os.O_NONBLOCK))
    except OSError as exc:
        return (), (f"cannot open {device} for reading: {exc.strerror}",)
    found: list[str] = []
    errors: list[str] = []
    for probe in (_probe_blkid, _probe_wipefs):
        result = probe(device, blkid if probe is _probe_blkid else wipefs)
        if isinstance(result, str):
            errors.append(result)
        else:
            found.extend(s for s in result if s not in found)
    ran = len(errors) < 2
    return tuple(found), (() if ran else tuple(errors))


# --- files, directories, missing paths ---------------------------------------------------------


def _inspect_missing(abspath: str, sysfs: str, mountinfo: str) -> TargetFacts:
    parent = os.path.dirname(abspath)
    while not os.path.exists(parent) and parent != os.path.dirname(parent):
        parent = os.path.dirname(parent)
    try:
        st = os.stat(parent)
    except OSError:
        return TargetFacts(path=abspath, kind="missing")
    return _fs_facts(abspath, "missing", None, parent, st, sysfs, mountinfo)


def _fs_facts(
    abspath: str, kind: str, size: int | None, existing: str, st: os.stat_result, sysfs: str, mountinfo: str
) -> TargetFacts:
    """TargetFacts of a file-system target; ``existing`` (stat ``st``) is the path or its parent."""
    mount = mount_of(existing, read_mounts(mountinfo))
    try:
        vfs = os.statvfs(existing)
        # a file system without blocks (proc, sysfs) has no capacity to speak of: unknown, not 0 B free
        free: int | None = vfs.f_bavail * vfs.f_frsize if vfs.f_blocks else None
    except OSError:
        free = None
    return TargetFacts(
        path=abspath,
        kind=kind,
        size_bytes=size,
        fs_type=mount.fs_type if mount else None,
        mount_point=mount.mount_point if mount else None,
        mount_options=_join_options(mount.options, mount.super_options) if mount else None,
        mount_source=mount.source if mount else None,
        free_bytes=free,
        device=_device_under(st, mount, sysfs),
    )


def _device_under(st: os.stat_result, mount: Mount | None, sysfs: str) -> BlockDeviceFacts | None:
    """The block device under a filesystem: by ``st_dev``, else by the mount source node.

    btrfs and overlay report an anonymous ``st_dev`` (major 0), hence the fallback.
    """
    sysdir = _sysfs_dir(f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}", sysfs)
    if sysdir is None and mount is not None and mount.source.startswith("/"):
        rdev = _block_rdev(mount.source)
        if rdev is not None:
            sysdir = _sysfs_dir(f"{os.major(rdev)}:{os.minor(rdev)}", sysfs)
    return _facts_from_sysdir(sysdir) if sysdir is not None else None


def _join_options(*option_lists: str) -> str:
    seen: list[str] = []
    for opts in option_lists:
        seen.extend(o for o in opts.split(",") if o and o not in seen)
    return ",".join(seen)


# --- block devices -----------------------------------------------------------------------------


def _inspect_block(
    abspath: str, st: os.stat_result, sysfs: str, mountinfo: str, swaps: str, blkid: str, wipefs: str
) -> TargetFacts:
    sysdir = _sysfs_dir(f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}", sysfs)
    device = _facts_from_sysdir(sysdir) if sysdir is not None else None
    signatures, probe_errors = probe_signatures(abspath, blkid=blkid, wipefs=wipefs)
    mounted_at = _mounted_at(st.st_rdev, sysdir, sysfs, mountinfo, swaps)
    if not mounted_at and not (device and device.holders) and _busy(abspath):
        mounted_at = (BUSY_MARK,)
    return TargetFacts(
        path=abspath,
        kind="block",
        size_bytes=device.size_bytes if device is not None else None,
        device=device,
        mounted_at=mounted_at,
        signatures=signatures,
        probe_errors=probe_errors,
    )


def _mounted_at(rdev: int, sysdir: str | None, sysfs: str, mountinfo: str, swaps: str) -> tuple[str, ...]:
    """Mount points (and ``[SWAP]``) of the device, its partitions and its holders, recursively."""
    devnums = {(os.major(rdev), os.minor(rdev))}
    if sysdir is not None:
        devnums |= _related_devnums(sysdir, sysfs)
    points: list[str] = []
    for m in read_mounts(mountinfo):
        hit = (m.major, m.minor) in devnums
        if not hit and m.source.startswith("/dev/"):
            src = _block_rdev(m.source)
            hit = src is not None and (os.major(src), os.minor(src)) in devnums
        if hit and m.mount_point not in points:
            points.append(m.mount_point)
    for swap in _swap_devices(swaps):
        src = _block_rdev(swap)
        if src is not None and (os.major(src), os.minor(src)) in devnums and SWAP_MARK not in points:
            points.append(SWAP_MARK)
    return tuple(points)


def _related_devnums(sysdir: str, sysfs: str) -> set[tuple[int, int]]:
    """Device numbers of a sysfs block device, its partitions, and every holder of either."""
    found: set[tuple[int, int]] = set()
    todo, seen = [os.path.realpath(sysdir)], set()
    while todo:
        d = todo.pop()
        if d in seen:
            continue
        seen.add(d)
        devnum = _read_attr(d, "dev")
        if devnum and ":" in devnum:
            major, _, minor = devnum.partition(":")
            found.add((int(major), int(minor)))
        todo.extend(os.path.join(d, p) for p in _partitions(d))
        for holder in _listdir(os.path.join(d, "holders")):
            holder_dir = os.path.join(sysfs, "class", "block", holder)
            todo.append(os.path.realpath(holder_dir))
    return found


def _swap_devices(swaps: str) -> list[str]:
    """File names of active swap areas of type ``partition`` (``/proc/swaps``, ``\\040`` escaped)."""
    try:
        with open(swaps, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return []
    # Whitespace in the file name is escaped, so the columns split cleanly.
    rows = [line.split() for line in lines]
    return [_unescape(row[0]) for row in rows if len(row) >= 2 and row[1] == "partition"]


def _busy(device: str) -> bool:
    """Whether the kernel refuses an exclusive open (``O_EXCL`` on a block device, ``open(2)``).

    Mounted filesystems, swap, device-mapper/MD/bcache members and programs that opened the
    device with ``O_EXCL`` hold it exclusively, in every mount namespace. The claim is held
    for the instant of the check only.
    """
    try:
        os.close(os.open(device, os.O_RDONLY | os.O_EXCL | os.O_NONBLOCK))
    except OSError as exc:
        return exc.errno == errno.EBUSY
    return False


def _block_rdev(path: str) -> int | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_rdev if stat.S_ISBLK(st.st_mode) else None


# --- sysfs ---------------------------------------------------------------------------------------


def _sysfs_dir(path_or_name: str, sysfs: str) -> str | None:
    """The sysfs directory of a block device given by node path, kernel name or ``MAJ:MIN``."""
    if re.fullmatch(r"\d+:\d+", path_or_name):
        candidate = os.path.join(sysfs, "dev", "block", path_or_name)
        return candidate if os.path.isdir(candidate) else None
    rdev = _block_rdev(path_or_name) if os.sep in path_or_name else None
    if rdev is not None:
        return _sysfs_dir(f"{os.major(rdev)}:{os.minor(rdev)}", sysfs)
    name = os.path.basename(path_or_name.rstrip("/"))
    candidate = os.path.join(sysfs, "class", "block", name)
    if name and os.path.isdir(candidate):
        return candidate
    legacy = os.path.join(sysfs, "block", name)
    return legacy if name and os.path.isdir(legacy) else None


def _facts_from_sysdir(sysdir: str) -> BlockDeviceFacts:
    """BlockDeviceFacts of one sysfs block directory (see ``block_device_facts``)."""
    real = os.path.realpath(sysdir)
    name = os.path.basename(real)
    is_partition = os.path.exists(os.path.join(real, "partition"))
    disk = os.path.dirname(real) if is_partition else real
    queue, dev = os.path.join(disk, "queue"), os.path.join(disk, "device")
    sectors = _int_attr(real, "size")
    rotational = _int_attr(queue, "rotational")
    return BlockDeviceFacts(
        name=name,
        path="/dev/" + (_uevent(real).get("DEVNAME") or name),
        size_bytes=sectors * 512 if sectors is not None else None,
        model=_read_attr(dev, "model"),
        serial=_serial(disk),
        vendor=_read_attr(dev, "vendor"),
        rotational=None if rotational is None else rotational != 0,
        logical_block_bytes=_int_attr(queue, "logical_block_size"),
        physical_block_bytes=_int_attr(queue, "physical_block_size"),
        scheduler=_active_scheduler(_read_attr(queue, "scheduler")),
        rq_affinity=_int_attr(queue, "rq_affinity"),
        nr_requests=_int_attr(queue, "nr_requests"),
        read_ahead_kb=_int_attr(queue, "read_ahead_kb"),
        nomerges=_int_attr(queue, "nomerges"),
        write_cache=_read_attr(queue, "write_cache"),
        numa_node=_numa_node(dev),
        queues=_mq_queues(disk),
        parent=os.path.basename(disk) if is_partition else None,
        holders=tuple(sorted(_listdir(os.path.join(real, "holders")))),
        partitions=() if is_partition else _partitions(real),
        firmware=_read_attr(dev, "firmware_rev") or _read_attr(dev, "rev"),
    )


_read_attr, _int_attr, _listdir = sysfs.read_attr, sysfs.read_int, sysfs.listdir


def _partitions(disk_dir: str) -> tuple[str, ...]:
    children = _listdir(disk_dir)
    return tuple(sorted(c for c in children if os.path.exists(os.path.join(disk_dir, c, "partition"))))


def _uevent(directory: str) -> dict[str, str]:
    text = _read_attr(directory, "uevent") or ""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _active_scheduler(text: str | None) -> str | None:
    """``"none [mq-deadline] kyber"`` -> ``"mq-deadline"``; a lone ``"none"`` -> ``"none"``."""
    if text is None:
        return None
    if "[" in text:
        return sysfs.chosen(text)
    words = text.split()
    return words[0] if len(words) == 1 else None


def _serial(disk_dir: str) -> str | None:
    """``serial`` (virtio), ``device/serial`` (NVMe, some SCSI), else VPD page 0x80, else ``wwid``."""
    for rel in ("serial", "device/serial"):
        value = _read_attr(disk_dir, rel)
        if value:
            return value
    try:
        with open(os.path.join(disk_dir, "device", "vpd_pg80"), "rb") as f:
            page = f.read()
        # SPC-4 7.8.16: byte 3 is the page length, the serial number follows the 4-byte header.
        value = page[4 : 4 + page[3]].decode("ascii", "replace").strip() if len(page) > 4 else ""
        if value:
            return value
    except OSError:
        pass
    return _read_attr(disk_dir, "device/wwid") or _read_attr(disk_dir, "wwid")


def _numa_node(dev_dir: str) -> int | None:
    """``device/numa_node`` or, for NVMe namespaces, the controller's PCI device's; -1 -> None."""
    for rel in ("numa_node", "device/numa_node"):
        node = _int_attr(dev_dir, rel)
        if node is not None:
            return node if node >= 0 else None
    return None


def _mq_queues(disk_dir: str) -> dict[str, str]:
    """``mq/<hctx>/cpu_list`` of every hardware context, CPUs respelled as a cpulist."""
    queues: dict[str, str] = {}
    mq = os.path.join(disk_dir, "mq")
    for hctx in sorted(_listdir(mq), key=lambda h: (not h.isdigit(), int(h) if h.isdigit() else 0, h)):
        text = _read_attr(os.path.join(mq, hctx), "cpu_list")
        if text is None:
            continue
        try:
            queues[hctx] = format_cpu_list(parse_cpu_list(text))
        except ValueError:
            queues[hctx] = text
    return queues


# --- signature probes ------------------------------------------------------------------------------


def _probe_blkid(device: str, command: str) -> list[str] | str:
    """Signatures by ``blkid -p -o export``; a string is the reason the probe failed.

    Exit codes (blkid(8)): 0 found, 2 nothing found, 8 ambivalent (several signatures).
    """
    try:
        proc = subprocess.run(
            [command, "-p", "-o", "export", device],
            capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{command}: {_reason(exc)}"
    if proc.returncode == 2 and not proc.stderr.strip():
        return []  # blkid also exits 2 when it cannot open the device, with a message
    if proc.returncode == 8:
        return ["ambivalent probe result"]
    if proc.returncode != 0:
        return f"{command}: {proc.stderr.strip() or f'exit status {proc.returncode}'}"
    values = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    found = [values["TYPE"]] if values.get("TYPE") else []
    if values.get("PTTYPE"):
        found.append(f"{values['PTTYPE']} partition table")
    return found


def _probe_wipefs(device: str, command: str) -> list[str] | str:
    """Signatures by ``wipefs -n --json`` (util-linux >= 2.29), else its plain ``TYPE`` column."""
    argv_sets = (
        [command, "-n", "--json", device],
        [command, "-n", "--noheadings", "--output", "TYPE", device],
    )
    last_error = ""
    for argv in argv_sets:
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{command}: {_reason(exc)}"
        if proc.returncode != 0:
            last_error = proc.stderr.strip() or f"exit status {proc.returncode}"
            continue
        if "--json" in argv:
            if not proc.stdout.strip():
                return []
            try:
                types = [s.get("type") or "" for s in json.loads(proc.stdout).get("signatures", [])]
            except (ValueError, AttributeError):
                last_error = "unreadable --json output"
                continue
        else:
            types = proc.stdout.split()
        return [_describe_type(t) for t in types if t]
    return f"{command}: {last_error}"


def _describe_type(sig_type: str) -> str:
    return f"{sig_type} partition table" if sig_type in PARTITION_TABLE_TYPES else sig_type


def _reason(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "not installed"
    if isinstance(exc, subprocess.TimeoutExpired):
        return f"no answer within {_PROBE_TIMEOUT_S} s"
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return str(exc)


def _unescape(text: str) -> str:
    """Decode the kernel's octal escapes of space, tab, newline and backslash (``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)
