"""The destructive-write guard: refuse, before fio starts, any job that could destroy data.

The rule (docs/design.md, section 3, "Safety"): a job that writes or trims a block device runs only when the
device is not mounted (nor any partition or holder of it), not active swap, carries no
signature (filesystem, partition table, LVM, RAID, swap, LUKS, anything libblkid knows), has no
holders and no partitions in sysfs, and the user named that very device with
``--destroy DEVICE``. The name is matched by device number, so ``/dev/loop3`` and any symlink
to it (``/dev/disk/by-id/...``) are the same device, and a different node never matches by
accident of spelling. When the device could not be checked (no permission to read it,
blkid and wipefs missing, no sysfs entry) the guard refuses: not knowing is not clean.

A file is data exactly as a device with a signature is (``file_write``): a job writes an existing file
only when iolab laid it out (``runner.marks``: that inode, as iolab left it), the user named it, or a
directory above it, with ``--destroy``, or it is empty and a target of the job (or in a target
directory); a file with other names (hard links) only when named itself; a file that backs a loop
device, carries a signature or is held open for writing or locked by another process is refused
even then. Storage an engine reaches
by address (nbd, rbd …) is written only when that address is named (``check_address_write``). File
targets need room too: ``check_free_space``.

All checks take ``TargetFacts`` from ``facts.targets.inspect``; call them right before fio
starts, on fresh facts.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Collection, Mapping

from iolab.errors import SafetyError
from iolab.facts import files, targets
from iolab.facts.owner import owner_gone, owner_record
from iolab.facts.targets import BUSY_MARK, SWAP_MARK
from iolab.model import TargetFacts
from iolab.runner import marks
from iolab.runner.fence import DESTROY, EMPTY, IOLAB
from iolab.units import format_bytes

GiB = 1024**3
MiB = 1024**2

#: ``rw`` values (fio ``options.c``, option ``rw``) that issue writes or trims.
WRITING_RW = frozenset({"write", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim",
                        "trimwrite", "randtrimwrite"})
#: ``rw`` values that only read.
READING_RW = frozenset({"read", "randread"})
#: I/O engines that create, delete or allocate files whatever ``rw`` says (fio
#: ``engines/fileoperations.c``, ``engines/falloc.c``: ``falloc`` fallocates on reads too).
WRITING_ENGINES = frozenset({"filecreate", "filedelete", "dircreate", "dirdelete", "falloc"})
#: Boolean options that make fio write or delete files whatever ``rw`` says.
WRITING_FLAGS = ("fill_device", "fill_fs", "create_only", "unlink", "unlink_each_loop")
#: Integer options that make fio trim verified blocks.
TRIMMING_COUNTS = ("trim_percentage", "trim_backlog")

_FILESYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "vfat", "exfat", "ntfs", "f2fs", "jfs",
                          "reiserfs", "nilfs2", "bcachefs", "iso9660", "udf", "squashfs", "erofs", "zfs"})
_SIGNATURE_WORDS = {
    "swap": "a swap signature",
    "LVM2_member": "an LVM physical volume signature (LVM2_member)",
    "linux_raid_member": "an MD RAID member signature (linux_raid_member)",
    "crypto_LUKS": "a LUKS encryption header (crypto_LUKS)",
    "zfs_member": "a ZFS pool member signature (zfs_member)",
    "ambivalent probe result": "several signatures (blkid: ambivalent probe result)",
}


def check_block_write(facts: TargetFacts, destroy: Collection[str], named: bool | None = None) -> None:
    """Refuse to write or trim a block device unless it is clean and named in ``destroy``.

    ``destroy`` holds the paths given with ``--destroy``; each is compared with the target by
    device number (``st_rdev``), so spelling never matters. Files, directories and missing
    paths pass (see ``check_free_space``). ``other`` targets (character devices such as NVMe
    generic nodes, FIFOs) cannot be checked for data and pass only when named.

    ``named``, when given, replaces that match: for a device on a remote host, whose device
    number means nothing here, the caller decides (``check.remote``: the exact path was named).

    Raises ``SafetyError`` whose message names the device and every reason found, and whose
    hint lists the commands that would clear them (unmount, swapoff, wipefs ...) and the
    exact ``--destroy`` flag. Never modifies the device.
    """
    if facts.kind in ("file", "directory", "missing"):
        return None
    named = is_named(facts, destroy) if named is None else named
    flag = f"--destroy {shlex.quote(facts.path)}"
    if facts.kind != "block":
        if named:
            return None
        raise SafetyError(
            f"refusing to write to {facts.path}: it is not a block device or regular file, so iolab "
            "cannot check it for data, and it is not named with --destroy",
            hint=f"if everything on {facts.path} may be destroyed, add {flag}",
        )
    reasons = _in_use_reasons(facts) + _data_reasons(facts)
    if not reasons and named:
        return None
    label = _label(facts)
    if not reasons:
        raise SafetyError(
            f"refusing to write to {label}: it is not named with --destroy (it looks blank: not "
            "mounted, no signatures, no holders, no partitions)",
            hint=f"if everything on {facts.path} may be destroyed, add {flag}",
        )
    if not named:
        reasons.append("it is not named with --destroy")
    raise SafetyError(f"refusing to write to {label}: " + "; ".join(reasons), hint=_hint(facts, named, flag))


def check_file_write(path: str, destroy: Collection[str], *, run: str | None = None,
                     within: Collection[str] = ()) -> str:
    """Why fio may write the existing regular file ``path`` (``file_write``'s reason)."""
    return file_write(path, destroy, run=run, within=within)[0]


def file_write(path: str, destroy: Collection[str], *, run: str | None = None,
               within: Collection[str] = ()) -> tuple[str, os.stat_result]:
    """Whether fio may write the existing regular file ``path``, and why, with the status of the file
    checked (its real path opened without following a link, so what is judged is one inode):
    ``IOLAB`` (it carries iolab's mark and is as the mark says, ``runner.marks``; a ``writing`` mark
    counts only for the run ``run`` that set it, while no other process runs it), ``EMPTY`` (no
    bytes, and it is a target of the job or lies in a target directory: ``within``), ``DESTROY``
    (named with ``--destroy``, or a directory above it is).

    Raises ``SafetyError`` for any other file: one with data or an empty one outside the targets (the
    hint gives the ``--destroy`` flag); a file with other names (``st_nlink`` > 1: writing it writes
    them too) unless named itself with ``--destroy``; and, whatever was named, a file that backs a
    loop device not itself named with ``--destroy`` (a named one must pass ``check_block_write``),
    that carries a filesystem, partition-table or other signature libblkid knows
    (``targets.probe_signatures``, as for devices), or that another process holds open for writing or
    locked (``facts.files.writers_of``): each would destroy data in use."""
    st = _regular(path)
    flag = f"--destroy {shlex.quote(path)}"
    reasons: list[str] = []
    steps: list[str] = []
    for loop in files.loop_devices_of(path):
        if is_named(TargetFacts(path=loop, kind="block"), destroy):
            check_block_write(targets.inspect(loop), destroy)
        else:
            reasons.append(f"it is the backing file of {loop}, so writing it writes that device")
            steps.append(f"name the device too if everything on it may be destroyed (--destroy {loop}), or detach "
                         f"it (losetup -d {loop})")
    size = st.st_size
    signatures = targets.probe_signatures(path)[0] if size else ()
    if signatures:
        reasons.append("it carries " + _and_list([_describe(sig) for sig in signatures]))
        steps.append(f"wipe it yourself if that is not needed (wipefs -a {shlex.quote(path)})")
    writers = files.writers_of(path)
    if writers:
        reasons += list(writers)
        steps.append(f"stop what uses it (fuser -v {shlex.quote(path)})")
    if reasons:
        raise SafetyError(f"refusing to write to {path}: " + "; ".join(reasons) + " (--destroy does not override this)",
                          hint=", then ".join([*steps, "run again"]))
    if st.st_nlink > 1:
        if any(_identity(p) == ("inode", st.st_dev, st.st_ino) for p in destroy):
            return DESTROY, st
        others = st.st_nlink - 1
        raise SafetyError(f"refusing to write to {path}: it has {others} other name{'s' if others > 1 else ''} (hard "
                          f"link{'s' if others > 1 else ''}: st_nlink {st.st_nlink}), so writing it changes the same "
                          "data under every name, wherever those are; a file with other names is written only when "
                          "named itself with --destroy",
                          hint=f"if its data may be destroyed under every name, add {flag}; to find the other names: "
                               f"find / -xdev -samefile {shlex.quote(path)}")
    if _iolab(path, run):
        return IOLAB, st
    if size == 0 and _in_targets(path, within):
        return EMPTY, st
    if is_named(TargetFacts(path=path, kind="file"), destroy):
        return DESTROY, st
    if size:
        raise SafetyError(f"refusing to write to {path}: it is an existing file with {format_bytes(size)} of data "
                          "that iolab did not lay out, and it is not named with --destroy",
                          hint=f"if its contents may be destroyed, add {flag} (or name its directory); to keep it, "
                               "point the job at a file that does not exist yet, or at a directory as --target")
    raise SafetyError(f"refusing to write to {path}: it is an existing empty file that iolab did not lay out, outside "
                      "the job's targets (an empty file can be someone's: a lock, a flag, a configuration), and it "
                      "is not named with --destroy",
                      hint=f"if it may be written, add {flag}, or name it as the target (--target NAME={path})")


def _regular(path: str) -> os.stat_result:
    """The status of the regular file ``path`` is, through its real path opened without following a
    link; raises ``SafetyError`` when it is not one any more (changed while it was being checked)."""
    try:
        with marks.opened(os.path.realpath(path)) as fd:
            st = os.fstat(fd) if fd is not None else None
    except OSError:
        st = None
    if st is None or not stat.S_ISREG(st.st_mode):
        raise SafetyError(f"refusing to write to {path}: it changed while iolab was checking it (it is not the "
                          "regular file it was a moment before)", hint="run again when nothing else changes it")
    return st


def _iolab(path: str, run: str | None) -> bool:
    """Whether ``path`` carries iolab's mark as it is (``runner.marks``); a ``writing`` mark only for
    the run that set it, and only while no other process runs that run (its process is this one, or
    gone: ``--resume`` after a kill)."""
    found = marks.read(os.path.realpath(path))
    if found is None:
        return False
    value, st = found
    if not value.get("writing"):
        return marks.complete(value, st)
    owner = value.get("owner") or {}
    mine = {k: owner.get(k) for k in ("pid", "boot_id", "start_ticks")} == \
        {k: v for k, v in owner_record().items() if k in ("pid", "boot_id", "start_ticks")}
    return run is not None and value.get("run") == run and (mine or owner_gone(owner))


def _in_targets(path: str, within: Collection[str]) -> bool:
    """Whether ``path`` is one of ``within`` or lies in one that is a directory (real paths)."""
    real = os.path.realpath(path)
    for target in within:
        top = os.path.realpath(target)
        if real == top or (os.path.isdir(top) and real.startswith(top.rstrip("/") + "/")):
            return True
    return False


def check_address_write(engine: str, address: str, destroy: Collection[str]) -> None:
    """Refuse a job that writes through an engine reaching storage by address (``ioengine=nbd``,
    ``rbd``, ``rados``, ``gfapi``, ``http``, ``net`` …: ``check.fiopaths.PATH_ENGINES`` lists the
    others) unless ``address`` (``check.fiopaths`` spells it: an NBD URI, ``rbd:pool/image``) is
    named with ``--destroy``: neither the guard nor the fence can see what lies there. Raises
    ``SafetyError``."""
    if address in destroy:
        return
    raise SafetyError(f"refusing to write through ioengine={engine} to {address}: the engine reaches storage by "
                      "address, where iolab can check nothing and the fence confines nothing; it is not named with "
                      "--destroy",
                      hint=f"if everything there may be destroyed, add --destroy {shlex.quote(address)}")


def check_free_space(facts: TargetFacts, needed_bytes: int, margin_bytes: int | None = None) -> None:
    """Refuse to lay out ``needed_bytes`` on a file system that cannot hold them with room to spare.

    Applies to ``file``, ``directory`` and ``missing`` targets; other kinds, and targets whose
    free space is unknown, pass. The space available is ``free_bytes`` plus, for an existing
    file, its current size (fio reuses it; a sparse file counts at its apparent size, so
    filling its holes may still need more). The margin defaults to ``default_margin(free)``.

    Raises ``SafetyError`` when ``needed_bytes > available - margin``.
    """
    if facts.kind not in ("file", "directory", "missing") or facts.free_bytes is None:
        return None
    margin = default_margin(facts.free_bytes) if margin_bytes is None else margin_bytes
    existing = (facts.size_bytes or 0) if facts.kind == "file" else 0
    available = facts.free_bytes + existing
    if needed_bytes <= available - margin:
        return None
    where = f"{facts.fs_type or 'the filesystem'} at {facts.mount_point}" if facts.mount_point else "it"
    have = f"{format_bytes(facts.free_bytes)} free"
    if existing:
        have += f" plus the existing file's {format_bytes(existing)}"
    raise SafetyError(
        f"refusing to lay out {format_bytes(needed_bytes)} at {facts.path}: {where} has {have}, "
        f"and iolab keeps {format_bytes(margin)} free",
        hint="use a smaller size, another directory, or free some space",
    )


def default_margin(free_bytes: int) -> int:
    """Space ``check_free_space`` leaves free: a tenth of the free space, between 16 MiB and 1 GiB.

    Proportional so that small scratch filesystems (a tmpfs, a test loop device) stay usable,
    capped at 1 GiB so large disks can be filled almost completely; the kernel's own reserve
    (ext4's 5 % for root) is already excluded from ``free_bytes``.
    """
    return max(16 * MiB, min(GiB, free_bytes // 10))


def writes(options: Mapping[str, str | None]) -> bool:
    """Whether a fio job with these effective options (global merged with job) writes or trims.

    Reads fio's HOWTO (fio 3.x): ``rw``/``readwrite`` default to ``read`` and may carry a
    ``:<nr>`` suffix; the writing values are ``WRITING_RW``. Besides ``rw``, fio writes or
    deletes when ``fill_device``/``fill_fs`` (fills the mount point first even for reads),
    ``create_only`` (lays files out), ``unlink``/``unlink_each_loop`` (deletes job files),
    ``trim_percentage``/``trim_backlog`` (trims verified blocks) are set, when replaying an
    I/O log (``read_iolog``, ``merge_blktrace_file``) unless ``replay_skip`` drops both writes
    and trims, and with the engines in ``WRITING_ENGINES``. ``verify_only`` turns writes into
    "phantom writes" (HOWTO: "no writes are actually issued"), but not trims.

    Not considered: ``zonemode=zbd`` (fio resets zones only for jobs that write, ``zbd.c``),
    ``exec_prerun``/``exec_postrun`` and the ``exec`` engine (arbitrary commands).
    When unsure (an unknown ``rw`` value, a flag fio would reject), returns ``True``.
    """
    # Both spellings present: fio keeps the later one; a mapping has no order, so check both.
    modes = [(options.get(k) or "").split(":", 1)[0].strip() for k in ("rw", "readwrite")]
    modes = [m for m in modes if m] or ["read"]
    if any(m not in WRITING_RW | READING_RW for m in modes):
        return True
    if any("trim" in m for m in modes):
        return True
    if any(m in WRITING_RW for m in modes) and not _flag(options, "verify_only", unknown=False):
        return True
    if (options.get("ioengine") or "").strip() in WRITING_ENGINES:
        return True
    if any(_flag(options, name, unknown=True) for name in WRITING_FLAGS):
        return True
    if any(_count(options, name) for name in TRIMMING_COUNTS):
        return True
    return _replays_writes(options)


def opens_for_write(options: Mapping[str, str | None]) -> bool:
    """Whether fio opens the job's files for writing: when it writes (``writes``), and for a writing
    ``rw`` with ``verify_only``, which issues no write but opens read-write all the same
    (``filesetup.c`` ``file_open_flags``). What a fence must let fio open, under the same rules."""
    return writes(options) or mode(options) in WRITING_RW


def mode(options: Mapping[str, str | None]) -> str:
    """The job's ``rw`` mode without its ``:<nr>`` suffix (fio's default ``read``; the later of
    ``rw``/``readwrite`` when a mapping holds both spellings)."""
    modes = [(options.get(k) or "").split(":", 1)[0].strip() for k in ("rw", "readwrite")]
    return next((m for m in reversed(modes) if m), "read")


def is_named(facts: TargetFacts, destroy: Collection[str]) -> bool:
    """Whether one of the ``destroy`` paths is the target's device (by device number / inode) or, for
    a file or directory, the target itself or a directory above it."""
    target_ids = {_identity(facts.path)}
    if facts.device is not None and facts.kind in ("block", "other"):
        target_ids.add(_identity(facts.device.path))
    target_ids.discard(None)
    if any(_identity(p) in target_ids for p in destroy):
        return True
    if facts.kind in ("file", "directory"):
        real = os.path.realpath(facts.path)
        return any(os.path.isdir(p) and real.startswith(os.path.realpath(p).rstrip("/") + "/") for p in destroy)
    return False


# --- helpers ----------------------------------------------------------------------------------


def _identity(path: str) -> tuple[object, ...] | None:
    """What a path names: ``("block", rdev)``, ``("char", rdev)``, ``("inode", dev, ino)``, or None."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if stat.S_ISBLK(st.st_mode):
        return ("block", st.st_rdev)
    if stat.S_ISCHR(st.st_mode):
        return ("char", st.st_rdev)
    return ("inode", st.st_dev, st.st_ino)


def _label(facts: TargetFacts) -> str:
    device_path = facts.device.path if facts.device is not None else None
    if device_path and facts.path != device_path:
        return f"{facts.path} ({device_path})"
    return facts.path


def _in_use_reasons(facts: TargetFacts) -> list[str]:
    device = facts.device
    family = bool(device and (device.partitions or device.holders))
    who = "it or a partition or holder of it" if family else "it"
    reasons = []
    mounts = [m for m in facts.mounted_at if m not in (SWAP_MARK, BUSY_MARK)]
    if mounts:
        reasons.append(f"{who} is mounted at {', '.join(mounts)}")
    if SWAP_MARK in facts.mounted_at:
        reasons.append(f"{who} is in use as swap")
    if BUSY_MARK in facts.mounted_at:
        reasons.append("the kernel reports it busy (held exclusively, e.g. mounted in another mount "
                       "namespace or opened by a program)")
    if device is None:
        reasons.append("its sysfs entry could not be read, so its holders and partitions are unknown")
    elif device.holders:
        reasons.append(f"it is held by {', '.join(device.holders)} (device-mapper, LVM, MD RAID or bcache)")
    return reasons


def _data_reasons(facts: TargetFacts) -> list[str]:
    reasons = []
    if facts.signatures:
        reasons.append("it carries " + _and_list([_describe(s) for s in facts.signatures]))
    if facts.probe_errors:
        reasons.append("it could not be checked for signatures (" + "; ".join(facts.probe_errors) + ")")
    if facts.device is not None and facts.device.partitions:
        reasons.append(f"it has partitions {', '.join(facts.device.partitions)}")
    return reasons


def _hint(facts: TargetFacts, named: bool, flag: str) -> str:
    dev = shlex.quote(facts.device.path if facts.device is not None else facts.path)
    steps = []
    mounts = [m for m in facts.mounted_at if m not in (SWAP_MARK, BUSY_MARK)]
    if mounts:
        steps.append("unmount it (" + "; ".join(f"umount {shlex.quote(m)}" for m in mounts) + ")")
    if SWAP_MARK in facts.mounted_at:
        steps.append("stop swapping on it (swapoff)")
    if BUSY_MARK in facts.mounted_at:
        steps.append(f"find what holds it (fuser -v {dev}, findmnt in other namespaces) and release it")
    if facts.device is not None and facts.device.holders:
        steps.append("release its holders (dmsetup remove, mdadm --stop, vgchange -an ...)")
    if facts.probe_errors:
        steps.append("run iolab as root with util-linux installed (blkid, wipefs) so it can check the device")
    if facts.signatures or (facts.device is not None and facts.device.partitions):
        wipe = f"wipe it yourself if the data is not needed (wipefs -a {dev}"
        if facts.device is not None and facts.device.partitions:
            wipe += f", then blockdev --rereadpt {dev} so the kernel drops its partitions"
        steps.append(wipe + ")")
    steps.append("run again" if named else f"pass {flag}")
    return ", then ".join(steps)


def _describe(signature: str) -> str:
    if signature.endswith("partition table"):
        return f"a {signature}"
    if signature in _SIGNATURE_WORDS:
        return _SIGNATURE_WORDS[signature]
    if signature in _FILESYSTEMS:
        return f"{'an' if signature[0] in 'aeiou' else 'a'} {signature} filesystem signature"
    return f"a {signature} signature"


def _and_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _flag(options: Mapping[str, str | None], name: str, *, unknown: bool) -> bool:
    """A fio bool/``STR_SET`` option: present without value = set; ints as fio reads them.

    ``unknown`` is the answer for a value fio would reject, chosen by the caller to err on the
    side of "writes".
    """
    if name not in options:
        return False
    value = options[name]
    if value is None or value.strip() == "":
        return True
    text = value.strip().lower()
    if text in ("true", "yes", "on"):
        return True
    if text in ("false", "no", "off"):
        return False
    try:
        return int(text, 0) != 0
    except ValueError:
        return unknown


def _count(options: Mapping[str, str | None], name: str) -> bool:
    """Whether an integer option is present and not zero (unparseable counts as set)."""
    if name not in options:
        return False
    value = (options[name] or "").strip()
    try:
        return int(value.rstrip("%")) != 0
    except ValueError:
        return True


def _replays_writes(options: Mapping[str, str | None]) -> bool:
    """An I/O log replay writes unless ``replay_skip`` drops both writes and trims."""
    if not (options.get("read_iolog") or options.get("merge_blktrace_file")):
        return False
    skipped = {s.strip() for s in (options.get("replay_skip") or "").split(",")}
    return not {"write", "trim"} <= skipped
