"""The static guard over a whole job file, and the fence built from what it checked.

``check`` reads the rendered job file as fio will (``fiopaths``: every option name one fio knows,
``[global]`` sections and includes applied, section by section) and decides, per section, what fio
may write: a section that writes may open for writing only files and directories it creates new,
files iolab laid out (``runner.marks``), empty files it was pointed at (a target, or in a target
directory), and what ``--destroy`` names — every block **and character** device through
``safety.check_block_write``, every existing file (a target, a ``filename=``, each file under
``opendir=``) through ``safety.file_write``, storage reached
by address through ``safety.check_address_write`` — whether it came from the target, the job's own
``filename=`` lines, a global section, an include, ``${ENV}``, a section name, ``filename_format``,
``replay_redirect`` or an iolog. What a section only reads stays read-only; without Landlock a
device bound for reading could be written, so then every device in the fence must pass the
destructive-write rule. Programs (``exec_prerun``, ``exec_postrun``, ``ioengine=exec``, external
engines) are refused unless allowed. The guard fails closed: a path in /proc or /sys, more file
names than it makes, or an iolog whose files it cannot read in a writing job are refused. It runs
when the plan is made and again right before each job (``--resume`` included), because devices
change; ``fenced_job`` then stages the job's files (``runner.stage``: new names reserved, existing
files checked to be the inodes checked) and builds its fence (``fence.staged``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SafetyError, SuiteError
from ..facts import targets
from ..facts.owner import owner_record
from ..model import TargetFacts
from ..runner import fence as fence_mod
from ..runner import stage
from ..runner.fence import NEW
from . import fiopaths, safety

#: At most this many files under one ``opendir=`` tree are checked; a fuller tree a job writes is refused.
MAX_TREE_FILES = 10_000


def resolved(path: str, workdir: Path) -> str:
    """``path`` as fio opens it: relative names are in fio's working directory, ``workdir``."""
    return os.path.normpath(os.path.join(workdir, path))


@dataclass(frozen=True)
class Checked:
    """The guard's verdict on one job file: ``paths`` every data path it opens (absolute: the target,
    each section's files and ``opendir`` roots); ``writable`` those fio may write, each with why
    (``fence.NEW``, ``IOLAB``, ``DESTROY``, ``EMPTY``); ``read`` the rest; ``addresses`` the storage
    address engines reach (fio needs the network for them); ``landlock`` whether devices it only
    reads are kept from writing (False: they passed the destructive-write rule instead); ``writes``
    whether a section writes (else fio only lays out new files); ``identities`` the device, inode,
    link count and ctime of each existing file fio may write, as checked (``runner.stage`` checks it is that
    file again right before fio starts); ``relaid`` the existing files fio will lay out anew
    (``SectionPaths.relays``); ``trees`` the ``opendir`` roots fio may write."""

    paths: tuple[str, ...] = ()
    writable: Mapping[str, str] = field(default_factory=dict)
    read: tuple[str, ...] = ()
    addresses: tuple[str, ...] = ()
    landlock: bool = True
    writes: bool = False
    identities: Mapping[str, stage.Identity] = field(default_factory=dict)
    relaid: frozenset[str] = frozenset()
    trees: tuple[str, ...] = ()


#: Kernel interfaces, not data: a file there is refused as one of fio's (its size 0 says nothing).
KERNEL_TREES = ("/proc", "/sys")


def read_paths(job_text: str, env: Mapping[str, str] | None = None, lenient: bool = False) -> fiopaths.JobPaths:
    """What ``fiopaths`` finds in the job; nothing when the text cannot be read (fio's
    ``--parse-only`` reports that in its words). Raises ``SafetyError`` for option names fio would
    not read as written (``lenient``: only those with ``$``; see ``fiopaths.job_paths``)."""
    try:
        return fiopaths.job_paths(job_text, env, lenient=lenient)
    except SuiteError:
        return fiopaths.JobPaths((), (), ())


def planned_paths(job_text: str, target_path: str | None, workdir: Path,
                  env: Mapping[str, str] | None = None) -> list[str]:
    """The target and every data file the job opens, absolute."""
    found = read_paths(job_text, env, lenient=True)
    return list(dict.fromkeys([*([target_path] if target_path else []), *(resolved(p, workdir) for p in found.files)]))


def check_exec(job_text: str, allow_exec: bool, where: str) -> None:
    """Refuse a job file that runs programs or loads code unless ``allow_exec`` (``fiopaths.check_exec``),
    or with an option name fio would substitute (``$``); call it before fio parses the job, which
    loads an external engine. Names fio does not know are left to fio's ``--parse-only``, which
    rejects them in its words; ``check`` refuses any it let through. Raises ``SafetyError``."""
    fiopaths.check_exec(_named(job_text, where, lenient=True), allow_exec, where)


def _named(job_text: str, where: str, lenient: bool = False) -> fiopaths.JobPaths:
    try:
        return read_paths(job_text, lenient=lenient)
    except SafetyError as exc:
        raise SafetyError(f"{where}: {exc.message}", hint=exc.hint) from None


def check(job_text: str, target_path: str | None, destroy: Collection[str], workdir: Path, *,
          allow_exec: bool = False, where: str = "job", facts: Mapping[str, TargetFacts] | None = None,
          env: Mapping[str, str] | None = None, writes: bool = False, run: str | None = None,
          fenced: bool = True) -> Checked:
    """Check every path the job opens, section by section (see the module docstring). ``facts`` are
    already inspected paths (the plan's targets), reused as they are; ``writes`` makes every section
    a writing one (preconditioning writes the target); ``run`` the run's key (``runner.marks``: its
    own ``writing`` marks count, ``safety.file_write``); ``fenced`` False when fio will run without
    the fence (``--no-fence``: no device is bound into a fence, so the rule for read devices without
    Landlock does not apply, and nothing stops fio laying out anew a file it only reads).

    Raises ``SafetyError``: a write to a device, file or address not allowed (``safety``), a path in
    /proc or /sys, a log written to a device, a program run without ``allow_exec``, an option name
    fio would not read as written, more files than the guard makes names for."""
    found = _named(job_text, where)
    fiopaths.check_exec(found, allow_exec, where)
    status = fence_mod.status()
    landlock = not (fenced and status.ok) or bool(status.landlock)
    known = dict(facts or {})

    def seen(path: str) -> TargetFacts:
        if path not in known or (known[path].kind == "missing" and os.path.lexists(path)):  # made since (a fill)
            known[path] = _kind(path)
        return known[path]

    verdict = _Verdict(destroy, run, (target_path,) if target_path else (), fenced and status.ok)
    target = [target_path] if target_path else []
    paths: list[str] = list(target)
    for section in found.sections:
        writing = writes or section.writes
        if section.address is not None and writing:
            safety.check_address_write(section.engine, section.address, destroy)
        mine = list(dict.fromkeys([*target, *(resolved(p, workdir) for p in section.files)]))
        trees = [resolved(p, workdir) for p in section.trees]
        for path in [*mine, *trees]:
            _not_kernel(path, where)
        paths += [*mine, *trees]
        for path in mine:
            verdict.file(path, seen(path), section, writing)
        for tree in trees:
            verdict.tree(tree) if writing else verdict.read.append(tree)
    read = [p for p in dict.fromkeys(verdict.read) if p not in verdict.writable]
    if not landlock:  # a device bound to be read could be written: it must be one that may be destroyed
        for path in read:
            if seen(path).kind in ("block", "other"):
                safety.check_block_write(seen(path), destroy)
    for log in found.written:
        _not_kernel(resolved(log, workdir), where)
        log_facts = targets.inspect(resolved(log, workdir))
        if log_facts.kind in ("block", "other"):
            raise SafetyError(f"{where}: fio would write its log or iolog to {log_facts.path}, which is a device",
                              hint="name logs with a plain relative name; they go to iolab's work directory")
    addresses = tuple(dict.fromkeys(s.address for s in found.sections if s.address is not None))
    return Checked(tuple(dict.fromkeys(paths)), verdict.writable, tuple(read), addresses, landlock,
                   writes or any(s.writes for s in found.sections), verdict.identities, frozenset(verdict.relaid),
                   tuple(dict.fromkeys(verdict.trees)))


class _Verdict:
    """What ``check`` decides path by path: why each may be written, the identity of each existing
    file, which fio lays out anew, which it only reads."""

    def __init__(self, destroy: Collection[str], run: str | None, within: Sequence[str], fenced: bool) -> None:
        self.destroy, self.run, self.within, self.fenced = destroy, run, within, fenced
        self.writable: dict[str, str] = {}
        self.identities: dict[str, stage.Identity] = {}
        self.relaid: set[str] = set()
        self.trees: list[str] = []
        self.read: list[str] = []

    def file(self, path: str, facts: TargetFacts, section: fiopaths.SectionPaths, writing: bool) -> None:
        """One data path of ``section``: fio writes it when the section writes, creates it when it is
        missing (reading or not), and lays out anew a file smaller than the section's size."""
        if writing or facts.kind == "missing":
            if path not in self.writable:
                self.writable[path] = self._write_reason(facts, path)
            if path in self.identities and section.relays(facts.size_bytes or 0):
                self.relaid.add(path)
        elif facts.kind == "file" and section.relays(facts.size_bytes or 0) and path not in self.writable:
            try:  # fio unlinks and writes the file anew, to read it: allowed only as a write is
                self._existing(path)
                self.relaid.add(path)
            except SafetyError as exc:
                if not self.fenced:  # nothing would stop it: refused here
                    raise SafetyError(f"{exc.message}; the job only reads it, but it is smaller than the job's "
                                      "size, and fio lays such a file out anew (unlinks it and writes it again) "
                                      "before reading it", hint=exc.hint) from None
                self.read.append(path)  # the fence keeps it in place: the job fails, saying why
        elif path not in self.writable:
            self.read.append(path)

    def _write_reason(self, facts: TargetFacts, path: str) -> str:
        """Why fio may write the path ``facts`` describe (``fence.NEW`` …); raises ``SafetyError``."""
        if facts.kind in ("block", "other"):
            safety.check_block_write(facts, self.destroy)
            return fence_mod.DESTROY
        if _in_dev(facts.path):
            raise SafetyError(f"refusing to write to {facts.path}: it names a device that is not on this machine (it "
                              f"is {'missing' if facts.kind == 'missing' else 'a ' + facts.kind}); fio would write a "
                              "regular file in /dev and report it as the device's speed",
                              hint="check the device name (lsblk)")
        if facts.kind == "missing":
            return NEW
        if facts.kind == "directory":
            return fence_mod.DESTROY if safety.is_named(facts, self.destroy) else NEW
        return self._existing(path)

    def _existing(self, path: str) -> str:
        why, st = safety.file_write(path, self.destroy, run=self.run, within=self.within)
        self.writable[path] = why
        self.identities[path] = stage.identity(st)
        return why

    def tree(self, root: str) -> None:
        """An ``opendir=`` tree a section writes: every regular file beneath it (as fio adds them:
        ``lstat``, links not followed) must be one fio may write."""
        self.writable.update(_tree(root, self.destroy, self.run, self.within))
        self.trees.append(root)


def _not_kernel(path: str, where: str) -> None:
    """Refuse a data file or log in /proc or /sys (by its name or its real path)."""
    for spelled in (os.path.abspath(path), os.path.realpath(path)):
        tree = next((t for t in KERNEL_TREES if spelled == t or spelled.startswith(t + "/")), None)
        if tree is not None:
            raise SafetyError(f"{where}: refusing {path} as a file of fio's: it is in {tree}, the kernel's interface, "
                              "not storage (a size-0 file there is not an empty file)",
                              hint="name a file, directory or device to benchmark")


def _kind(path: str) -> TargetFacts:
    """What ``path`` is, as far as the guard needs: devices fully inspected (``targets.inspect``:
    mounts, signatures, holders), files, directories and missing paths by one ``stat`` (a job can
    name thousands of files; their file systems are the free-space check's)."""
    abspath = os.path.abspath(path)
    try:
        st = os.stat(abspath)
    except FileNotFoundError:
        return TargetFacts(path=abspath, kind="missing")
    except OSError:
        return targets.inspect(abspath)  # says why it cannot be examined
    if stat.S_ISREG(st.st_mode):
        return TargetFacts(path=abspath, kind="file", size_bytes=st.st_size)
    if stat.S_ISDIR(st.st_mode):
        return TargetFacts(path=abspath, kind="directory")
    return targets.inspect(abspath)


def _tree(root: str, destroy: Collection[str], run: str | None, within: Sequence[str]) -> dict[str, str]:
    """An ``opendir=`` tree a section writes: every regular file beneath it (as fio adds them:
    ``lstat``, links not followed) must be one fio may write; returns them and the root with why."""
    found = {root: fence_mod.DESTROY if safety.is_named(TargetFacts(path=root, kind="directory"), destroy) else NEW}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            if os.path.isfile(path) and not os.path.islink(path):
                found[path] = safety.check_file_write(path, destroy, run=run, within=within)
            if len(found) > MAX_TREE_FILES:
                raise SafetyError(f"opendir={root}: more than {MAX_TREE_FILES} files beneath it to check",
                                  hint="give the job a smaller directory tree")
    return found


def check_client_logs(job_text: str, where: str = "job") -> None:
    """A job for fio servers: the fio client on this machine writes the logs the job asks for,
    unfenced, in its working directory (iolab's work directory of the job); a log name that leads
    out of it (absolute, or up with ``..``) would write wherever it points. Raises ``SafetyError``,
    also for option names fio would not read as written."""
    try:
        names = fiopaths.log_names(job_text)
    except SuiteError:
        return  # fio's --parse-only reports the problem in its words
    except SafetyError as exc:
        raise SafetyError(f"{where}: {exc.message}", hint=exc.hint) from None
    for name in names:
        if os.path.isabs(name) or os.path.normpath(name).split(os.sep)[0] == "..":
            raise SafetyError(f"{where}: the log {name!r} would be written by fio's client on this machine outside "
                              "iolab's work directory (fio's servers send their logs to the client, which names "
                              "them as the job says)",
                              hint="name the job's logs with a plain relative name; iolab stores its own 1 s logs "
                                   "of every host with the result")


def _in_dev(path: str) -> bool:
    real = os.path.realpath(path)
    return any(p == "/dev" or p.startswith("/dev/") for p in (path, real)) and not real.startswith("/dev/shm/")


def not_devices(paths: Sequence[str]) -> list[str]:
    """The paths under ``/dev`` a job named that are regular files now: each is a write that landed
    in a file where the job named a device (``--no-fence``, or a device that vanished), never a
    measurement of a device."""
    return [p for p in paths if _in_dev(p) and os.path.isfile(p)]


def fence_of(checked: Checked, workdir: Path, bwrap: str = "bwrap", protect: bool = True) -> fence_mod.Fence:
    """The fence of a checked job as ``fence.build`` makes it (a fio server's way; ``protect`` False: a
    plan's summary): what it may write writable (with why), what it only reads read-only, the
    network only for address engines."""
    return fence_mod.build(checked.writable, workdir, bwrap, read=checked.read, network=bool(checked.addresses),
                           protect=protect)


@dataclass
class JobFence:
    """A local job about to run (``fenced_job``): its ``fence`` (None: fio runs unfenced), the guard's
    verdict, and after the job ``notes``: what staging could not put back as planned, for people."""

    fence: fence_mod.Fence | None
    checked: Checked
    notes: list[str] = field(default_factory=list)


@contextlib.contextmanager
def fenced_job(job_text: str, target_path: str | None, destroy: Collection[str], workdir: Path, *,
               fenced: bool = True, allow_exec: bool = False, where: str = "job",
               facts: Mapping[str, TargetFacts] | None = None, writes: bool = False,
               run: str | None = None) -> Iterator[JobFence]:
    """A local job checked again right before fio starts and its files staged, for the block that runs
    fio: what killed iolab processes left staged is undone first (``stage.sweep``); then ``check``
    (the job file as fio reads it, devices and files as they are now, ``--resume`` included); then
    ``stage.prepare`` (new names reserved, existing files checked to be the inodes checked, marked as
    being written for ``run``) and the fence built from it (``fence.staged``): None when ``fenced``
    is False (``--no-fence``) or when no fence can be set up for a job that only reads. ``facts``
    are paths the caller inspected for this job already; ``writes`` as for ``check``. Leaving the
    block puts the staged files back and marks what fio left (``JobFence.notes`` what could not be).

    Raises ``SafetyError``: a refused path, a name that is not what was checked, or no fence for a
    writing job; ``FioError`` when iolab cannot create in a directory fio writes."""
    stage.sweep()
    fence_ok = fenced and fence_mod.status().ok
    checked = check(job_text, target_path, destroy, workdir, allow_exec=allow_exec, where=where, facts=facts,
                    writes=writes, run=run, fenced=fence_ok)
    if not fence_ok and fenced and checked.writes:
        fence_mod.require()
    staging = stage.prepare(checked.writable, checked.identities, relaid=checked.relaid, trees=checked.trees,
                            read=checked.read, workdir=workdir, run=run, owner=owner_record(), fenced=fence_ok)
    try:
        fence = fence_mod.staged(checked.writable, workdir, read=checked.read, network=bool(checked.addresses),
                                 fd_binds=staging.fd_binds, directories=staging.directories,
                                 read_binds=staging.reads, trees=checked.trees) if fence_ok else None
    except BaseException:
        staging.finish(ran=False)
        raise
    job = JobFence(fence, checked)
    ran = True
    try:
        yield job
    except Exception:
        ran = False  # fio did not start, or iolab failed reading what it did: nothing to call iolab's
        raise
    finally:
        job.notes = staging.finish(ran=ran)


@dataclass(frozen=True)
class FencePlan:
    """What a plan says about the fence: ``tool`` (``bubblewrap 0.8.0``), or None when fio runs
    unfenced and ``reason`` says why; ``writable`` the places fio may write besides iolab's work
    directory of each job, each with why (``fence.Fence.places``); ``read_devices`` devices jobs
    only read; ``notes`` what else a reader must know (the network, read devices without Landlock)."""

    tool: str | None
    reason: str | None
    writable: tuple[str, ...]
    read_devices: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def plan_fence(local: Sequence[Checked], fenced: bool) -> FencePlan:
    """The fence of a plan's local jobs (``local``, one verdict per job), failing closed: without a
    fence (no bwrap, no namespaces) a plan whose local jobs write is refused unless ``fenced`` is
    False (``--no-fence``). Raises ``SafetyError``."""
    writable: dict[str, str] = {}
    for checked in local:
        writable.update(checked.writable)
    read = tuple(dict.fromkeys(p for c in local for p in c.read if p not in writable))
    addresses = tuple(dict.fromkeys(a for c in local for a in c.addresses))
    summary = fence_of(Checked((), writable, read, addresses), Path("/nonexistent"), protect=False)
    if not local:
        return FencePlan(None, "no job runs fio on this machine", ())
    if not fenced:
        return FencePlan(None, "--no-fence: fio runs unfenced; only the static guard protects your data",
                         tuple(summary.places()))
    found = fence_mod.status()
    if not found.ok:
        if any(c.writes for c in local):
            fence_mod.require()
        return FencePlan(None, f"{found.reason}; this run only reads, so fio runs unfenced", ())
    read_devices = tuple(d for d in summary.devices if d not in summary.write_devices)
    notes = []
    if read_devices and not found.landlock:
        notes.append("no Landlock in this kernel: the devices jobs read are writable inside the fence, so each "
                     "passed the destructive-write rule (--destroy, no data)")
    if addresses:
        notes.append(f"network: the host's, for {', '.join(addresses)}")
    elif found.own_network:
        notes.append("network: none (fio has a network namespace of its own)")
    return FencePlan(found.tool, None, tuple(summary.places()), read_devices, tuple(notes))
