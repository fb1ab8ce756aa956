"""The static guard over a whole job file, and the fence built from what it checked.

``check`` reads the rendered job file as fio will (``fiopaths``), then applies the destructive-write
rule (``safety.check_block_write``) to every block **and character** device found, whether it came
from the target, the job's own ``filename=`` lines, a global section, an include, ``${ENV}``, a
section name, ``filename_format``, ``replay_redirect`` or an iolog; and refuses programs
(``exec_prerun``, ``exec_postrun``, ``ioengine=exec``, external engines) unless allowed. It runs
when the plan is made and again right before each job (``--resume`` included), because devices
change. ``fence_for`` turns the checked paths into the job's fence (``fence.build``).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import SafetyError, SuiteError
from ..facts import targets
from ..fio import jobfile
from ..model import TargetFacts
from ..runner import fence as fence_mod
from . import fiopaths, safety

#: Marks a planned path that jobs only read (``plan_fence``).
READ_ONLY = "read:"


def resolved(path: str, workdir: Path) -> str:
    """``path`` as fio opens it: relative names are in fio's working directory, ``workdir``."""
    return os.path.normpath(os.path.join(workdir, path))


def planned_paths(job_text: str, target_path: str | None, workdir: Path,
                  env: Mapping[str, str] | None = None) -> tuple[list[str], fiopaths.JobPaths]:
    """The target and every data file the job opens, absolute, and what ``fiopaths`` found."""
    try:
        found = fiopaths.job_paths(job_text, env)
    except SuiteError:
        found = fiopaths.JobPaths((), (), ())  # fio's --parse-only reports the problem in its words
    paths = [target_path] if target_path else []
    paths += [resolved(p, workdir) for p in found.files]
    return list(dict.fromkeys(paths)), found


def check_exec(job_text: str, allow_exec: bool, where: str) -> None:
    """Refuse a job file that runs programs or loads code unless ``allow_exec`` (``fiopaths.check_exec``);
    call it before fio parses the job, which loads an external engine. Raises ``SafetyError``."""
    _, found = planned_paths(job_text, None, Path("/"))
    fiopaths.check_exec(found, allow_exec, where)


def check(job_text: str, target_path: str | None, writes: bool, destroy: Collection[str], workdir: Path, *,
          allow_exec: bool = False, where: str = "job", facts: Mapping[str, TargetFacts] | None = None,
          env: Mapping[str, str] | None = None) -> list[str]:
    """Check every path the job opens; returns them (absolute), devices included only after they
    passed. ``facts`` are already inspected paths (the plan's targets), reused as they are.

    Raises ``SafetyError``: a written device not named with ``--destroy`` or holding data
    (``safety.check_block_write``), a log written to a device, a program run without
    ``allow_exec``."""
    paths, found = planned_paths(job_text, target_path, workdir, env)
    fiopaths.check_exec(found, allow_exec, where)
    for path in paths if writes else ():  # a job that only reads is not probed (blkid would read the device)
        seen = (facts or {}).get(path) or targets.inspect(path)
        if seen.kind in ("block", "other"):
            safety.check_block_write(seen, destroy)
        elif _in_dev(path):
            raise SafetyError(f"{where}: refusing to write to {path}: it names a device that is not on this machine "
                              f"(it is {'missing' if seen.kind == 'missing' else 'a ' + seen.kind}); fio would write a "
                              "regular file in /dev and report it as the device's speed",
                              hint="check the device name (lsblk)")
    for log in found.written:
        seen = targets.inspect(resolved(log, workdir))
        if seen.kind in ("block", "other"):
            raise SafetyError(f"{where}: fio would write its log or iolog to {seen.path}, which is a device",
                              hint="name logs with a plain relative name; they go to iolab's work directory")
    return paths


def check_client_logs(job_text: str, where: str = "job") -> None:
    """A job for fio servers: the fio client on this machine writes the logs the job asks for,
    unfenced, in its working directory (iolab's work directory of the job); a log name that leads
    out of it (absolute, or up with ``..``) would write wherever it points. Raises ``SafetyError``."""
    try:
        names = fiopaths.log_names(job_text)
    except SuiteError:
        return  # fio's --parse-only reports the problem in its words
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


def fence_for(job_text: str, target_path: str | None, writes: bool, destroy: Collection[str], workdir: Path, *,
              allow_exec: bool = False, where: str = "job", bwrap: str = "bwrap",
              facts: Mapping[str, TargetFacts] | None = None) -> fence_mod.Fence:
    """The job checked again (``check``) and its fence: the checked paths writable, the rest read-only.

    Raises ``SafetyError`` as ``check`` does."""
    paths = check(job_text, target_path, writes, destroy, workdir, allow_exec=allow_exec, where=where, facts=facts)
    return fence_mod.build(paths, workdir, bwrap, writes=writes or _opens_for_writing(job_text))


def _opens_for_writing(job_text: str) -> bool:
    """Whether fio opens the job's files read-write although it issues no writes: a writing ``rw``
    with ``verify_only`` (a crash test's verify phase) still opens them O_RDWR (``filesetup.c``
    ``file_open_flags`` follows ``td_write``)."""
    try:
        jobs = jobfile.effective_jobs(jobfile.parse(job_text))
    except SuiteError:
        return True
    modes = [(o.get("rw") or o.get("readwrite") or "read").split(":", 1)[0].strip() for _, o in jobs]
    return any(m not in safety.READING_RW for m in modes)


def job_fence(job_text: str, target_path: str | None, writes: bool, destroy: Collection[str], workdir: Path, *,
              fenced: bool = True, allow_exec: bool = False, where: str = "job",
              facts: Mapping[str, TargetFacts] | None = None) -> fence_mod.Fence | None:
    """The job checked again right before fio starts (``check``: the job file as fio reads it,
    devices as they are now, ``--resume`` included) and its fence. None when ``fenced`` is False
    (``--no-fence``) or when no fence can be set up for a job that only reads. ``facts`` are paths
    the caller inspected for this job already.

    Raises ``SafetyError``: a refused path, or no fence for a writing job."""
    if fenced and fence_mod.status().ok:
        return fence_for(job_text, target_path, writes, destroy, workdir, allow_exec=allow_exec, where=where,
                         facts=facts)
    check(job_text, target_path, writes, destroy, workdir, allow_exec=allow_exec, where=where, facts=facts)
    if fenced and writes:
        fence_mod.require()
    return None


@dataclass(frozen=True)
class FencePlan:
    """What a plan says about the fence: ``tool`` (``bubblewrap 0.8.0``), or None when fio runs
    unfenced and ``reason`` says why; ``writable`` the places fio may write besides iolab's work
    directory of each job."""

    tool: str | None
    reason: str | None
    writable: tuple[str, ...]
    read_devices: tuple[str, ...] = ()


def plan_fence(local_writes: Sequence[bool], writable: tuple[str, ...], fenced: bool) -> FencePlan:
    """The fence of a plan whose local jobs write or not (``local_writes``, one per job), failing
    closed: without a fence (no bwrap, no namespaces) a plan whose local jobs write is refused
    unless ``fenced`` is False (``--no-fence``). ``writable`` entries starting with ``READ_ONLY`` are
    paths jobs only read. Raises ``SafetyError``."""
    reads = [p.removeprefix(READ_ONLY) for p in writable if p.startswith(READ_ONLY)]
    writable = tuple(p for p in writable if not p.startswith(READ_ONLY))
    if not local_writes:
        return FencePlan(None, "no job runs fio on this machine", ())
    if not fenced:
        return FencePlan(None, "--no-fence: fio runs unfenced; only the static guard protects devices", writable)
    found = fence_mod.status()
    if found.ok:
        built, read = fence_mod.build(writable, Path("/nonexistent")), fence_mod.build(reads, Path("/nonexistent"))
        read_devices = tuple(d for d in read.devices if d not in built.devices) if found.landlock else ()
        devices = tuple(d for d in (*built.devices, *read.devices) if d not in read_devices)
        return FencePlan(found.tool, None, (*devices, *dict.fromkeys((*built.places(), *read.places()))),
                         read_devices)
    if any(local_writes):
        fence_mod.require()
    return FencePlan(None, f"{found.reason}; this run only reads, so fio runs unfenced", writable)
