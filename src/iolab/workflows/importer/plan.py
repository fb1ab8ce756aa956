"""From fio output files to the results of one run: what each file's jobs were, and how the
results of many files (a sweep's directory) are named, placed and counted as repetitions. Pure
(reading the files is ``importer``'s job).

Each output holds one result per host: client/server output (``fio --client``) gives one result per
server (target ``host:port``); any other output one result on this machine, whose target is named
after the devices its disk statistics name (``device_of``: ``nvme0n1``, ``sdb``; ``local`` without
them). A file usually holds one output; a pasted text may hold several (``fio.parse_outputs``), each
planned on its own (``output``, its number in the text). The result's workload identity is derived
from what the output tells, since there is no iolab suite:

* ``job_text`` is a job file rebuilt from the options the output reports, one section per fio job
  name, headed by a comment saying so. JSON lists ``global options`` and each job's ``job
  options``; normal output only shows ``rw``, ``bs``, ``ioengine``, ``iodepth`` (job header line),
  the laid-out ``size`` and ``jobs=N`` (``JobResult.shown_options``, ``members``); terse shows none.
* ``params``/``job_hash`` are ``fio.jobfile.workload_params`` of that job file, as for iolab's runs.
* ``unknown_options`` says which absent options are unknown rather than fio's default: ``["*"]``
  (every option not in the job text) for normal and terse output and for JSON from fio before 2.3
  (no option lists); for other JSON the options fio's JSON drops when they are given without a
  value (``BARE_FLAGS``: ``time_based``, ``norandommap`` …, FIO_NOTES §1.2), unless the output lists
  them.

Many files make one run (``assemble``): results of the same workload (target, name and options)
are repetitions, numbered in file order (bench-fio's ``run-1``, ``run-2`` … directories); a job
name that several different workloads share (bench-fio names every job of a sweep alike) gets the
sweep's label (``analyze.sweep.full_label``: ``randwrite 4k QD8 ×4``); when the local results name
several files or devices in their job options, each becomes a target named after it (``sdb``,
``sdc``), else after its disk statistics, so results of one workload whose disk statistics name
different devices are never repetitions of each other (``_targets``). Outputs of one pasted text
are never repetitions of each other either: people paste one output per machine or storage path,
and two machines' disks can share a name (two VMs' ``vda``); such outputs become targets named
after their device and their number in the text (``vda#1``, ``vda#2``; ``_apart``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ...analyze import sweep
from ...describe import canonical
from ...fio import jobfile
from ...fio.num2str import version_tuple
from ...model import DiskUtil, FioReport, JobResult

#: fio options of type FIO_OPT_STR_SET (options.c@fio-3.33): the ones a job file may give without a
#: value. fio's JSON omits options given that way (json.c drops empty values), so their absence from
#: a JSON report does not mean fio's default.
BARE_FLAGS = ("bs_unaligned", "exitall", "exitall_on_error", "group_reporting", "new_group", "norandommap",
              "refill_buffers", "stonewall", "thread", "time_based", "verify_only", "zero_buffers")
#: ``unknown_options`` value meaning: every option not written in the job text is unknown.
ALL_UNKNOWN = "*"
LOCAL = "local"


@dataclass(frozen=True)
class PlannedResult:
    """One result an output file yields: a host's jobs with their derived workload identity."""

    target: str
    target_path: str | None
    workload: str
    job_text: str
    params: Mapping[str, str]
    unknown_options: tuple[str, ...]
    report: FioReport
    status: str = "ok"
    error: str | None = None
    #: The devices its disk statistics name (``device_of``), for a result on this machine.
    device: str | None = None
    #: Its output's number in a text holding several (1, 2, …), 0 for a text holding one; and that
    #: text (its path), which tells outputs of different texts apart.
    output: int = 0
    text: str = ""

    @property
    def job_hash(self) -> str:
        return jobfile.params_hash(self.params)


def plan_results(report: FioReport, name: str, output: int = 0, text: str = "") -> list[PlannedResult]:
    """The results ``report`` (read from the file called ``name``) is stored as, one per host.

    ``output`` is the report's number among the outputs of the text ``text`` (its path) when that
    text holds several, else 0 (see ``PlannedResult``)."""
    hosts: dict[tuple[str | None, int | None], list[JobResult]] = {}
    for job in report.jobs:
        hosts.setdefault((job.hostname, job.port), []).append(job)
    planned = []
    for (hostname, port), jobs in hosts.items():
        part = report if len(hosts) == 1 else replace(
            report, jobs=tuple(jobs), disk_util=tuple(d for d in report.disk_util if d.hostname == hostname))
        target = f"{hostname}:{port}" if hostname and port else hostname or LOCAL
        planned.append(replace(_plan_one(part, name, target), output=output, text=text,
                               device=device_of(part.disk_util) if target == LOCAL else None))
    return planned


def device_of(disks: Sequence[DiskUtil]) -> str | None:
    """The devices fio's disk statistics name, joined by ``+`` (``nvme0n1``, ``sdb+sdc``), or None
    without disk statistics.

    fio lists the disk under each file its jobs used (``Disk stats (read/write):`` in normal output,
    ``disk_util`` in JSON, the disk fields of terse v3+). A disk with slaves (device-mapper, md) is
    listed with ``aggr*`` figures summed over them, then each slave on a line of its own
    (diskutil.c; FIO_NOTES §1.1): the slaves are the devices, so ``dm-2`` over ``nvme0n1`` is
    ``nvme0n1``. Disks with aggregates name the target only when no other disk is listed.
    """
    names = [d.name for d in disks if d.aggregate is None and d.name] or [d.name for d in disks if d.name]
    return "+".join(dict.fromkeys(names)) or None


def _plan_one(report: FioReport, name: str, target: str) -> PlannedResult:
    sections = _sections(report)
    job_text = jobfile.render(sections, header=(
        f"iolab import of {name} ({report.source_format} output of fio {report.fio_version or '(version unknown)'})",
        "the options this output reports, not necessarily the whole job file",
    ))
    names = list(dict.fromkeys(s.name for s in sections))
    failed = [j for j in report.jobs if j.error]
    locations = {value for s in sections for key, value in s.options if key in ("filename", "directory")}
    return PlannedResult(
        target=target, target_path=locations.pop() if len(locations) == 1 else None,
        workload=names[0] if len(names) == 1 else Path(name).stem, job_text=job_text,
        params=jobfile.workload_params(sections), unknown_options=_unknown(report, sections), report=report,
        status="failed" if failed else "ok",
        error="; ".join(f"fio error {j.error} in job {j.name!r}" for j in failed) or None,
    )


def _sections(report: FioReport) -> tuple[jobfile.Section, ...]:
    """One job section per fio job name, with the options the report gives for it."""
    options: dict[str, dict[str, str]] = {}
    members: dict[str, int | None] = {}
    for job in report.jobs:
        mine = options.setdefault(job.name, {**report.global_options, **job.shown_options, **job.job_options})
        mine.pop("name", None)
        if job.members is not None:
            count = members.get(job.name, 0)
            members[job.name] = None if count is None else count + job.members
        elif report.source_format == "normal":
            members[job.name] = None
    for job_name, count in members.items():
        if count and "numjobs" not in options[job_name]:
            options[job_name]["numjobs"] = str(count)  # normal output: jobs=N of the blocks with this name
    return tuple(
        jobfile.Section(_section_name(job_name), tuple((k, _one_line(v)) for k, v in opts.items()))
        for job_name, opts in options.items()
    )


def _section_name(name: str) -> str:
    """A job name usable as a ``[section]`` header (fio's own names always are)."""
    cleaned = name.replace("]", ")").replace("\n", " ").strip()
    return cleaned or "job"


def _one_line(value: str) -> str:
    return value.replace("\r", " ").replace("\n", " ")


def _unknown(report: FioReport, sections: Sequence[jobfile.Section]) -> tuple[str, ...]:
    version = version_tuple(report.fio_version)
    if report.source_format not in ("json", "json+", "client-json") or (version is not None and version < (2, 3)):
        return (ALL_UNKNOWN,)
    given = {key for s in sections for key, _ in s.options}
    return tuple(flag for flag in BARE_FLAGS if flag not in given)


def options_of(planned: PlannedResult) -> canonical.Options:
    """The canonical options of a result's workload: its one job's, or for several jobs the
    ``job.option`` parameters (``fio.jobfile.workload_params``) as they are."""
    jobs = canonical.job_text_options(planned.job_text, planned.unknown_options, planned.report.fio_version)
    return next(iter(jobs.values())) if len(jobs) == 1 else canonical.Options(dict(planned.params), None)


@dataclass(frozen=True)
class Placed:
    """A planned result's place in its run: target, workload name and repetition number."""

    target: str
    workload: str
    repeat: int


def assemble(planned: Sequence[PlannedResult]) -> tuple[list[Placed], list[str]]:
    """Targets, workload names and repetition numbers for the results of one run, in order (see the
    module docstring), and a line for each thing people should know of how they were placed."""
    targets, notes = _targets(planned)
    targets, apart = _apart(planned, targets)
    names = _names(planned)
    counts: dict[tuple[str, str, str], int] = {}
    placed = []
    for p, target, name in zip(planned, targets, names, strict=True):
        key = (target, name, p.job_hash)
        placed.append(Placed(target, name, counts.get(key, 0)))
        counts[key] = counts.get(key, 0) + 1
    return placed, notes + apart


def _targets(planned: Sequence[PlannedResult]) -> tuple[list[str], list[str]]:
    """Each result's target, and a line when one workload ran on several devices.

    A host's results keep ``host:port``. Local results are named after their path's last part (the
    whole path when two share it) when they name several files or devices in their job options,
    else after the devices in their disk statistics (``PlannedResult.device``), else ``local``.
    """
    paths = list(dict.fromkeys(p.target_path for p in planned if p.target == LOCAL and p.target_path))
    short = {path: Path(path).name or path for path in paths} if len(paths) > 1 else {}
    if len(set(short.values())) < len(short):
        short = {path: path for path in paths}
    targets = [p.target if p.target != LOCAL else short.get(p.target_path or "") or p.device or LOCAL
               for p in planned]
    devices: dict[tuple[str, str], set[str]] = {}
    for p, target in zip(planned, targets, strict=True):
        if p.target == LOCAL and p.device and not short:
            devices.setdefault((p.workload, p.job_hash), set()).add(target)
    spread = sorted({d for found in devices.values() if len(found) > 1 for d in found})
    if not spread:
        return targets, []
    return targets, [f"the same job ran on different devices ({'; '.join(spread)} in fio's disk statistics): "
                     "stored as one target each, not as repetitions of one"]


def _apart(planned: Sequence[PlannedResult], targets: list[str]) -> tuple[list[str], list[str]]:
    """``targets`` with the outputs of one text that would be repetitions of one workload told apart
    by their number in the text (``vda#1``, ``vda#2``), and a line for each such group."""
    groups: dict[tuple[str, str, str, str], list[int]] = {}
    for i, (p, target) in enumerate(zip(planned, targets, strict=True)):
        if p.output:
            groups.setdefault((p.text, target, p.workload, p.job_hash), []).append(i)
    out, notes = list(targets), []
    for (text, target, workload, _), members in groups.items():
        outputs = sorted({planned[i].output for i in members})
        if len(outputs) < 2:
            continue
        for i in members:
            out[i] = f"{target}#{planned[i].output}"
        numbers = ", ".join(map(str, outputs[:-1])) + f" and {outputs[-1]}"
        notes.append(f"outputs {numbers} of {Path(text).name} ran the same job ({workload}) on targets named "
                     f"{target!r} (a pasted text's outputs are separate runs, and two machines' disks can share a "
                     f"name): stored as {', '.join(f'{target}#{n}' for n in outputs)}, not as repetitions of one")
    return out, notes


def _names(planned: Sequence[PlannedResult]) -> list[str]:
    """Each result's workload name: its job name, unless different workloads share that name; then
    the sweep's label of its options (axes, and the other options varying among them)."""
    hashes: dict[str, set[str]] = {}
    for p in planned:
        hashes.setdefault(p.workload, set()).add(p.job_hash)
    shared = {name for name, found in hashes.items() if len(found) > 1}
    if not shared:
        return [p.workload for p in planned]
    index = [i for i, p in enumerate(planned) if p.workload in shared]
    table = sweep.option_table([options_of(planned[i]) for i in index])
    extra = sweep.varying(table)
    labels = {i: sweep.full_label(row, extra) or planned[i].workload for i, row in zip(index, table, strict=True)}
    return [labels.get(i, p.workload) for i, p in enumerate(planned)]
