"""The static guard over a whole job file, and the fence built from what it checked.

``check`` reads the rendered job file as fio will (``fiopaths``: every option name one fio knows,
``[global]`` sections and includes applied, section by section) and decides, per section, what fio
may write: a section that writes may open for writing only files and directories it creates new,
files iolab laid out (``runner.marks``), empty files, and what ``--destroy`` names — every block
**and character** device through ``safety.check_block_write``, every existing file (a target, a
``filename=``, each file under ``opendir=``) through ``safety.check_file_write``, storage reached
by address through ``safety.check_address_write`` — whether it came from the target, the job's own
``filename=`` lines, a global section, an include, ``${ENV}``, a section name, ``filename_format``,
``replay_redirect`` or an iolog. What a section only reads stays read-only; without Landlock a
device bound for reading could be written, so then every device in the fence must pass the
destructive-write rule. Programs (``exec_prerun``, ``exec_postrun``, ``ioengine=exec``, external
engines) are refused unless allowed. It runs when the plan is made and again right before each job
(``--resume`` included), because devices change. ``fence_for`` turns the verdict into the job's
fence (``fence.build``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SafetyError, SuiteError
from ..facts import targets
from ..model import TargetFacts
from ..runner import fence as fence_mod
from ..runner import marks
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
    whether a section writes (else fio only lays out new files)."""

    paths: tuple[str, ...] = ()
    writable: Mapping[str, str] = field(default_factory=dict)
    read: tuple[str, ...] = ()
    addresses: tuple[str, ...] = ()
    landlock: bool = True
    writes: bool = False


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
          env: Mapping[str, str] | None = None, writes: bool = False, owned: Collection[str] = (),
          fenced: bool = True) -> Checked:
    """Check every path the job opens, section by section (see the module docstring). ``facts`` are
    already inspected paths (the plan's targets), reused as they are; ``writes`` makes every section
    a writing one (preconditioning writes the target); ``owned`` real paths of files a run laid out
    (``safety.check_file_write``); ``fenced`` False when fio will run without the fence
    (``--no-fence``: no device is bound into a fence, so the rule for read devices without Landlock
    does not apply).

    Raises ``SafetyError``: a write to a device, file or address not allowed (``safety``), a log
    written to a device, a program run without ``allow_exec``, an option name fio would not read as
    written."""
    found = _named(job_text, where)
    fiopaths.check_exec(found, allow_exec, where)
    status = fence_mod.status()
    landlock = not (fenced and status.ok) or bool(status.landlock)
    known = dict(facts or {})

    def seen(path: str) -> TargetFacts:
        if path not in known:
            known[path] = _kind(path)
        return known[path]

    writable: dict[str, str] = {}
    read: list[str] = []
    target = [target_path] if target_path else []
    paths: list[str] = list(target)
    for section in found.sections:
        writing = writes or section.writes
        if section.address is not None and writing:
            safety.check_address_write(section.engine, section.address, destroy)
        mine = list(dict.fromkeys([*target, *(resolved(p, workdir) for p in section.files)]))
        trees = [resolved(p, workdir) for p in section.trees]
        paths += [*mine, *trees]
        for path in mine:
            if writing or seen(path).kind == "missing":  # fio lays out a missing file, reading or not
                writable[path] = _write_reason(seen(path), destroy, owned, writable.get(path))
            elif path not in writable:
                read.append(path)
        for tree in trees:
            if writing:
                writable.update(_tree(tree, destroy, owned))
            else:
                read.append(tree)
    read = [p for p in dict.fromkeys(read) if p not in writable]
    if not landlock:  # a device bound to be read could be written: it must be one that may be destroyed
        for path in read:
            if seen(path).kind in ("block", "other"):
                safety.check_block_write(seen(path), destroy)
    for log in found.written:
        log_facts = targets.inspect(resolved(log, workdir))
        if log_facts.kind in ("block", "other"):
            raise SafetyError(f"{where}: fio would write its log or iolog to {log_facts.path}, which is a device",
                              hint="name logs with a plain relative name; they go to iolab's work directory")
    addresses = tuple(dict.fromkeys(s.address for s in found.sections if s.address is not None))
    return Checked(tuple(dict.fromkeys(paths)), writable, tuple(read), addresses, landlock,
                   writes or any(s.writes for s in found.sections))


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


def _write_reason(facts: TargetFacts, destroy: Collection[str], owned: Collection[str], before: str | None) -> str:
    """Why fio may write the path ``facts`` describe (``fence.NEW`` …); raises ``SafetyError``."""
    if before is not None:
        return before
    if facts.kind in ("block", "other"):
        safety.check_block_write(facts, destroy)
        return fence_mod.DESTROY
    if _in_dev(facts.path):
        raise SafetyError(f"refusing to write to {facts.path}: it names a device that is not on this machine (it is "
                          f"{'missing' if facts.kind == 'missing' else 'a ' + facts.kind}); fio would write a regular "
                          "file in /dev and report it as the device's speed", hint="check the device name (lsblk)")
    if facts.kind == "missing":
        return NEW
    if facts.kind == "directory":
        return fence_mod.DESTROY if safety.is_named(facts, destroy) else NEW
    return safety.check_file_write(facts.path, destroy, owned)


def _tree(root: str, destroy: Collection[str], owned: Collection[str]) -> dict[str, str]:
    """An ``opendir=`` tree a section writes: every regular file beneath it (as fio adds them:
    ``lstat``, links not followed) must be one fio may write; returns them and the root with why."""
    found = {root: fence_mod.DESTROY if safety.is_named(TargetFacts(path=root, kind="directory"), destroy) else NEW}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            if os.path.isfile(path) and not os.path.islink(path):
                found[path] = safety.check_file_write(path, destroy, owned)
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


def fence_of(checked: Checked, workdir: Path, bwrap: str = "bwrap") -> fence_mod.Fence:
    """The fence of a checked job: what it may write writable (with why), what it only reads
    read-only, the network only for address engines."""
    return fence_mod.build(checked.writable, workdir, bwrap, read=checked.read, network=bool(checked.addresses))


def job_fence(job_text: str, target_path: str | None, destroy: Collection[str], workdir: Path, *,
              fenced: bool = True, allow_exec: bool = False, where: str = "job",
              facts: Mapping[str, TargetFacts] | None = None, writes: bool = False,
              owned: Collection[str] = ()) -> tuple[fence_mod.Fence | None, Checked]:
    """The job checked again right before fio starts (``check``: the job file as fio reads it,
    devices and files as they are now, ``--resume`` included), the files it may write that exist
    already marked as being written by iolab (``marks``), and its fence: None when ``fenced`` is
    False (``--no-fence``) or when no fence can be set up for a job that only reads. ``facts`` are
    paths the caller inspected for this job already; ``writes`` and ``owned`` as for ``check``.
    After the job, ``mark_written(checked)``.

    Raises ``SafetyError``: a refused path, or no fence for a writing job."""
    fence_ok = fenced and fence_mod.status().ok
    checked = check(job_text, target_path, destroy, workdir, allow_exec=allow_exec, where=where, facts=facts,
                    writes=writes, owned=owned, fenced=fenced)
    for path, why in checked.writable.items():
        if why != NEW:
            marks.mark(path, writing=True)
    if fence_ok:
        return fence_of(checked, workdir), checked
    if fenced and checked.writes:
        fence_mod.require()
    return None, checked


def mark_written(checked: Checked) -> None:
    """After a job: every regular file it was allowed to write is iolab's as it is now (``marks``)."""
    for path in checked.writable:
        if os.path.isfile(path) and not os.path.islink(path) and not _in_dev(path):
            marks.mark(path)


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
    summary = fence_of(Checked((), writable, read, addresses), Path("/nonexistent"))
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
