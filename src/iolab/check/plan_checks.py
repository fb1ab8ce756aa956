"""The checks a plan passes before fio starts (``run.plan.prepare``): the static guard on every local
job and the free space of its target, job sizes against what each target holds, and remote targets'
safety and log names. Every check raises (``SafetyError``, ``SuiteError``) before anything is run."""

from __future__ import annotations

import os
import shlex
import stat
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import units
from ..describe import suite as suite_mod
from ..describe.spec import PlannedJob, Suite
from ..errors import SuiteError
from ..facts import targets
from ..fio import jobfile
from ..model import TargetFacts
from ..units import format_bytes
from . import fiopaths, guard, safety
from . import remote as remote_jobs


@dataclass(frozen=True)
class PlanItem:
    """One planned fio invocation, rendered: ``expected_s`` is None when fio decides the time
    (size-based jobs)."""

    job: PlannedJob
    kind: str | None
    job_text: str
    params: Mapping[str, str]
    job_hash: str
    expected_s: float | None
    writes: bool



def needed_bytes(sections: list[jobfile.Section], kind: str) -> int:
    """Space a remote target needs: a file target's size (the largest job's), a directory's files
    (per distinct job name ``size × numjobs``, or ``size`` when its clones share a ``filename``: fio
    splits a clone's ``size`` over its files, ``name.jobnum.filenum``; repeats of a job reuse them).
    ``[global]`` options apply to the jobs after them (``jobfile.effective_jobs``)."""
    per_job: dict[str, int] = {}
    for name, opts in jobfile.effective_jobs(sections):
        size_text = opts.get("size") or "0"
        try:
            size = 0 if size_text.endswith("%") else units.parse_size(size_text)
        except ValueError:
            continue  # ${VAR}: fio substitutes it, iolab cannot know the value
        if kind == "directory" and not opts.get("filename"):
            size *= int(opts.get("numjobs") or 1)
        per_job[name] = max(per_job.get(name, 0), size)
    if kind == "directory":
        return sum(per_job.values())
    return max(per_job.values(), default=0)


#: Engines that write no data into the job's files (``fiopaths.NO_LAYOUT``).
NO_LAYOUT = fiopaths.NO_LAYOUT


def file_needs(job_text: str, workdir: Path) -> dict[str, int]:
    """Bytes fio lays out for each file of a job, by absolute path (relative names in ``workdir``):
    each section's ``SectionPaths.layout_bytes``, the largest any job gives a file (repeats and jobs
    that share a file reuse it). A size fio decides (a percentage, ``${VAR}``, a range) is not
    counted, nor the files of an engine that lays out none. Source: fio HOWTO ``size``,
    ``filesize``, ``nrfiles``; fio's ``engines/``."""
    out: dict[str, int] = {}
    for section in guard.read_paths(job_text, lenient=True).sections:
        per_file = section.layout_bytes()
        for name in section.files:
            path = guard.resolved(name, workdir)
            if per_file and (not path.startswith("/dev/") or path.startswith("/dev/shm/")):  # a RAM disk has room
                out[path] = max(out.get(path, 0), per_file)
    return out


def check_room(needs: Mapping[str, int], workdir: Path, real_workdir: Path) -> None:
    """The files of a whole plan (``file_needs`` of every local job) against the free space of the file
    systems they land on, together: files in ``workdir`` land in ``real_workdir`` (iolab's work
    directory of each job, in its spool); an existing file counts only what it must grow by. Each
    directory is inspected once (a job may name thousands of files). Raises ``SafetyError``
    (``safety.check_free_space``) naming the files' directory."""
    places: dict[str, TargetFacts] = {}
    per_fs: dict[str, tuple[TargetFacts, list[int], list[str]]] = {}
    for path, size in needs.items():
        placed = str(real_workdir / os.path.relpath(path, workdir)) if path.startswith(str(workdir) + "/") else path
        try:
            st = os.stat(placed)
        except OSError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            continue  # a device or directory: no room to lay out
        parent = os.path.dirname(placed)
        if parent not in places:
            places[parent] = targets.inspect(os.path.join(parent, ".iolab-room"))  # the file system it lands on
        facts = places[parent]
        if facts.free_bytes is None:
            continue
        found = per_fs.setdefault(facts.mount_point or parent, (facts, [0], []))
        found[1][0] += max(0, size - (st.st_size if st is not None else 0))
        found[2].append(placed)
    for facts, (total,), paths in per_fs.values():
        where = paths[0] if len(paths) == 1 else os.path.commonpath(paths)
        safety.check_free_space(replace(facts, path=where, kind="missing", size_bytes=None), total)


#: Where the plan resolves a job's relative file names: fio's working directory is the job's work
#: directory, made when it runs (``run.runners.LocalJob``); the run checks again with the real one.
PLANNED_WORKDIR = Path(tempfile.gettempdir(), "iolab-job-planned")


def check_targets(suite: Suite, items: list[PlanItem], facts: Mapping[str, TargetFacts], destroy: Collection[str],
                  allow_exec: bool, fenced: bool = True,
                  workdir: Path = PLANNED_WORKDIR) -> tuple[tuple[str, ...], list[guard.Checked]]:
    """The static guard on every local job (``check.guard.check``: the target and every file the
    job file opens, as fio reads it, section by section) and the free space of every file system
    the plan's files land on (``check_room``; ``workdir`` is where each job's own relative files
    land: iolab's work directories); returns the scratch files and the guard's verdict on each
    distinct job (paths in iolab's planned work directory left out: each job's own). Raises
    ``SafetyError``."""
    scratch: list[str] = []
    jobs: list[LocalJob] = []
    for target in suite.targets:
        if target.hosts:
            continue  # check_remote_targets
        known = {target.path: facts[target.name]} if target.path and target.name in facts else {}
        jobs += [LocalJob(i.job_text, target.path, f"{i.job.spec.workload.origin} ({i.job.spec.workload.name})", known)
                 for i in items if i.job.spec.target.name == target.name]
        f = facts.get(target.name)
        if f is not None and f.kind == "missing" and target.path:
            scratch.append(target.path)
    verdicts = check_jobs(jobs, destroy, allow_exec, fenced, writes=suite.method.precondition is not None,
                          workdir=workdir)
    return tuple(scratch), verdicts


@dataclass(frozen=True)
class LocalJob:
    """A job to check here: its text, its target's path (None: the job file's own files), where it is named
    in refusals, and the paths already inspected for it."""

    job_text: str
    target_path: str | None
    where: str
    facts: Mapping[str, TargetFacts] = field(default_factory=dict)


def check_jobs(jobs: Sequence[LocalJob], destroy: Collection[str], allow_exec: bool, fenced: bool = True, *,
               writes: bool = False, run: str | None = None,
               workdir: Path = PLANNED_WORKDIR) -> list[guard.Checked]:
    """The static guard on each distinct job of ``jobs`` and the free space their files need together
    (``check_targets``, which says what is checked); ``writes`` and ``run`` as ``guard.check`` takes
    them. Returns the guard's verdicts. Raises ``SafetyError``."""
    verdicts: list[guard.Checked] = []
    needs: dict[str, int] = {}
    for job in {(j.job_text, j.target_path): j for j in jobs}.values():
        verdicts.append(_own_paths_left_out(guard.check(
            job.job_text, job.target_path, destroy, PLANNED_WORKDIR, allow_exec=allow_exec, where=job.where,
            facts=job.facts, writes=writes, run=run, fenced=fenced)))
        for path, size in file_needs(job.job_text, PLANNED_WORKDIR).items():
            needs[path] = max(needs.get(path, 0), size)
    check_room(needs, PLANNED_WORKDIR, workdir)
    return verdicts


def check_directory_exists(name: str, path: str) -> None:
    """A new scratch file is made only in an existing directory: fio would create the directories
    on the way (``filesetup.c``), and a path meant as a directory (``DIR/``) would become a file.
    Raises ``SuiteError``."""
    parent = os.path.dirname(path.rstrip("/"))
    if path.endswith("/") or not os.path.isdir(parent):
        missing = path.rstrip("/") if path.endswith("/") else parent
        raise SuiteError(f"target {name}: the directory {missing} does not exist; iolab lays out scratch files only "
                         "in an existing directory", hint=f"create it first (mkdir -p {shlex.quote(missing)}), or "
                                                          "name an existing directory")


def _own_paths_left_out(checked: guard.Checked) -> guard.Checked:
    def mine(path: str) -> bool:
        return path.startswith(str(PLANNED_WORKDIR) + "/")
    return replace(checked, writable={p: w for p, w in checked.writable.items() if not mine(p)},
                   read=tuple(p for p in checked.read if not mine(p)))


def check_sizes(suite: Suite, items: list[PlanItem], facts: Mapping[str, TargetFacts]) -> None:
    """A job whose ``size`` (from its ``offset``) is more than its target can ever hold is an invalid
    value: fio silently tests only up to a block device's end, and cannot lay out a file larger than
    the free space. Raises ``SuiteError`` naming the place (``suite_mod.option_place``). Sums over
    several jobs, and the room iolab keeps free, are the safety guard's (``safety.check_free_space``)."""
    for item in {i.job_text: i for i in items}.values():
        spec, f = item.job.spec, facts.get(item.job.spec.target.name)
        if f is None or (capacity := _capacity(f)) is None:
            continue
        for job, opts in jobfile.effective_jobs(jobfile.parse(item.job_text)):
            size_text, offset_text = opts.get("size") or "0", opts.get("offset") or "0"
            try:
                size = units.parse_size(size_text)
                offset = 0 if offset_text.endswith("%") else units.parse_size(offset_text)
            except ValueError:
                continue  # a percentage of the target always fits
            if size + offset > capacity:
                at = f" from offset {offset_text}" if offset else ""
                place = suite_mod.option_place(suite, spec, job, "size")
                raise SuiteError(f"{place}: {size_text} ({format_bytes(size)}){at} is more than target "
                                 f"{spec.target.name} holds: {f.path} {_holding(f, capacity)}",
                                 hint="use a smaller size, or a percentage of the target (size=100%)")


def _holding(facts: TargetFacts, capacity: int) -> str:
    if facts.kind == "block":
        return f"is a {format_bytes(capacity)} block device"
    return f"has {format_bytes(capacity)} of room" + (" (free space and the file)" if facts.kind == "file" else "")


def _capacity(facts: TargetFacts) -> int | None:
    """The most a job can use of a target: a block device's size, a file system's free space (plus an
    existing file's size, which fio reuses); None when unknown."""
    if facts.kind == "block":
        return facts.size_bytes
    if facts.kind in ("file", "missing", "directory") and facts.free_bytes is not None:
        return facts.free_bytes + ((facts.size_bytes or 0) if facts.kind == "file" else 0)
    return None


def check_remote_targets(remote: Mapping[str, remote_jobs.RemoteTarget], items: list[PlanItem],
                         destroy: Collection[str]) -> None:
    """A remote target's jobs: log names that keep fio's local client in its work directory
    (``guard.check_client_logs``), and the write and space rules on the hosts' device when its
    facts are known (``check.remote.check_safety``)."""
    for name, rt in remote.items():
        mine = [i for i in items if i.job.spec.target.name == name]
        for item in {i.job_text: i for i in mine}.values():
            guard.check_client_logs(item.job_text, f"{item.job.spec.workload.origin} ({item.job.spec.workload.name})")
        if rt.target.ssh and not rt.checked:
            continue  # its facts come from the hosts: checked when the run contacts them
        sections = [s for i in mine for s in jobfile.parse(i.job_text) if not s.is_global]
        remote_jobs.check_safety(rt.target, rt.target_facts, any(i.writes for i in mine), destroy,
                                 needed_bytes(sections, rt.kind))


