"""Methodology checks: the catalogue P1–P16 of docs/design.md (section 2) as typed findings with remedies.

Each rule is a pure function of one fio job's effective options (``fio.jobfile.effective_jobs``,
``[global]`` applied) and the facts of the target and host it will run on (``JobContext``), so
it can be tested without running anything. ``lint_plan`` builds the contexts of a rendered plan
(the items of ``run.plan.Plan``) and runs every rule; ``unlike_runs`` (P11) compares two stored runs.

Severities: every rule here is a ``warning`` with its remedy, stored with the run and shown with its
results, so an unchanged fio job file always runs. ``error`` is only for what is dangerous or
meaningless: a destructive write to a device with data (``P16``, the safety guard) and a job fio
rejects (``FIO``); ``iolab run`` refuses those before fio starts, ``iolab lint`` lists them.
Findings with the same id and text are merged, their places (``where``) joined, so a suite with
twenty workloads without a ramp gives one P4.

Option values are read the way fio reads them (``units``); a value iolab cannot read (an
``${ENV}`` substitution, an unusual spelling) makes the rule that needs it stay silent rather
than guess.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from .. import units
from ..describe.method import Precondition
from ..describe.spec import PlannedJob
from ..errors import IolabError
from ..facts import targets
from ..facts.sysfs import parse_cpu_list
from ..fio import jobfile
from ..model import HostFacts, Run, TargetFacts
from . import power, safety
from .findings import ERROR, WARNING, Finding

#: Engines that do no storage I/O (fio ``engines/``): storage rules do not apply to them.
NON_STORAGE_ENGINES = frozenset({"null", "cpuio", "net", "netsplice", "exec", "filecreate", "filedelete",
                                 "filestat", "dircreate", "dirdelete", "dirstat", "http", "rdma"})
#: Engines that issue one I/O per call, so ``iodepth`` has no effect (HOWTO ``iodepth``).
SYNC_ENGINES = frozenset({"sync", "psync", "vsync", "pvsync", "pvsync2", "mmap", "splice"})
#: ``systemd-detect-virt`` names of clouds whose volumes may burst (P3).
CLOUD_VIRT = ("amazon", "google", "microsoft", "oracle")
#: Below this share of the device, a working set is "far smaller" (P1): SNIA PTS uses an
#: ActiveRange of 100 % (75 % in some client tests).
ACTIVE_RANGE_MIN = 0.10
#: Buffered working sets below this multiple of RAM are largely cached (P1).
RAM_MULTIPLE = 4
MIN_RUNTIME_S = 60


@dataclass(frozen=True)
class JobContext:
    """What the rules know about one fio job (one section of a job file, globals applied).

    ``concurrent`` counts the fio processes or threads that run at the same time as this job
    (its numjobs and those of the other sections up to the next ``stonewall``, doubled for
    ``sqthread_poll``). ``written_before``: the target region was written earlier in the plan
    (a preconditioning fill, an earlier write job, a writing section before this one).
    ``allocated_bytes`` is a regular file target's allocated size (``st_blocks × 512``).
    """

    where: str
    options: Mapping[str, str | None]
    host: HostFacts
    target: TargetFacts | None = None
    concurrent: int = 1
    repeats: int = 1
    preconditioned: bool = False
    written_before: bool = False
    allocated_bytes: int | None = None
    tune: Mapping[str, str] = field(default_factory=dict)


# --- reading options the way fio does ------------------------------------------------------------


def _value(opts: Mapping[str, str | None], *keys: str) -> str | None:
    for key in keys:
        if key in opts:
            return "1" if opts[key] is None else opts[key]
    return None


def _flag(opts: Mapping[str, str | None], *keys: str) -> bool:
    value = _value(opts, *keys)
    return value is not None and value.strip().lower() not in ("0", "false", "no", "off", "")


def _int(opts: Mapping[str, str | None], key: str, default: int) -> int | None:
    value = _value(opts, key)
    if value is None:
        return default
    try:
        return int(value.strip())
    except ValueError:
        return None


def _size(opts: Mapping[str, str | None], key: str) -> int | None:
    value = _value(opts, key)
    kb_base = 1000 if _value(opts, "kb_base") == "1000" else 1024
    try:
        return units.parse_size(value, kb_base) if value is not None else None
    except ValueError:
        return None


def _seconds(opts: Mapping[str, str | None], *keys: str) -> float | None:
    value = _value(opts, *keys)
    try:
        return units.parse_duration_us(value) / 1e6 if value is not None else None
    except ValueError:
        return None


def rw_mode(opts: Mapping[str, str | None]) -> str:
    """``rw`` without its ``:N`` suffix (default ``read``)."""
    return (_value(opts, "rw", "readwrite") or "read").split(":", 1)[0].strip()


def _engine(opts: Mapping[str, str | None]) -> str:
    return (_value(opts, "ioengine") or "psync").strip()


def _direct(opts: Mapping[str, str | None]) -> bool:
    if "buffered" in opts and not _flag(opts, "buffered"):
        return True
    return _flag(opts, "direct")


def _storage(ctx: JobContext) -> bool:
    return _engine(ctx.options) not in NON_STORAGE_ENGINES


def _writes(ctx: JobContext) -> bool:
    return safety.writes(ctx.options)


def _reads(opts: Mapping[str, str | None]) -> bool:
    mode = rw_mode(opts)
    if mode in ("read", "randread"):
        return True
    if mode in ("rw", "readwrite", "randrw"):
        return _int(opts, "rwmixread", 50) != 0 and _int(opts, "rwmixwrite", 50) != 100
    return False


def _device_size(ctx: JobContext) -> int | None:
    t = ctx.target
    if t is None:
        return None
    if t.kind == "block":
        return t.size_bytes
    return t.device.size_bytes if t.device is not None else None


def working_set_bytes(ctx: JobContext) -> int | None:
    """Bytes the job touches: ``size`` (a percentage of the target when written so), else the
    file or device size; times ``numjobs`` in a directory target (each clone has its own files).
    ``None`` when unknown."""
    opts, t = ctx.options, ctx.target
    whole = t.size_bytes if t is not None and t.kind in ("file", "block") else None
    size = _size(opts, "size")
    text = _value(opts, "size")
    if size is None and text and text.strip().endswith("%") and whole:
        try:
            size = int(whole * float(text.strip()[:-1]) / 100)
        except ValueError:
            size = None
    if size is None and text is None:
        size = whole
    if size is None:
        return None
    if t is not None and t.kind == "directory":
        size *= _int(opts, "numjobs", 1) or 1
    return size


# --- the rules --------------------------------------------------------------------------------------


def p1_working_set(ctx: JobContext) -> list[Finding]:
    """P1: a working set far smaller than RAM (buffered I/O) or than the device (device claims)."""
    if not _storage(ctx):
        return []
    ws = working_set_bytes(ctx)
    if ws is None:
        return []
    out = []
    ram = ctx.host.memory_bytes
    if not _direct(ctx.options) and ram and ws < RAM_MULTIPLE * ram:
        out.append(Finding(
            "P1", WARNING,
            f"the working set ({units.format_bytes(ws)}) is smaller than {RAM_MULTIPLE}× RAM "
            f"({units.format_bytes(ram)}) and I/O is buffered: the page cache answers much of it.",
            f"use direct=1, or a working set of at least {units.format_bytes(RAM_MULTIPLE * ram)}.",
            "Bonnie/Bonnie++ (test files larger than RAM); iolab docs/design.md, P1"))
    device = _device_size(ctx)
    if device and ws < ACTIVE_RANGE_MIN * device:
        out.append(Finding(
            "P1", WARNING,
            f"the working set ({units.format_bytes(ws)}) is {100 * ws / device:.2g} % of the device "
            f"({units.format_bytes(device)}): caches and spare area see a small part of it, so the numbers "
            "are not the device's.",
            "test the whole device (size=100% on a block device) or a region of at least "
            f"{units.format_bytes(ACTIVE_RANGE_MIN * device)}; otherwise present the result as a small-region test.",
            "SNIA SSS PTS, ActiveRange (100 %)"))
    return out


def p2_buffered(ctx: JobContext) -> list[Finding]:
    """P2: buffered I/O on a block device, and libaio without direct=1 (not asynchronous)."""
    if not _storage(ctx) or _direct(ctx.options):
        return []
    out = []
    if ctx.target is not None and ctx.target.kind == "block":
        out.append(Finding(
            "P2", WARNING, f"buffered I/O (direct=0) on block device {ctx.target.path} measures the page cache "
            "as much as the device.", "set direct=1.", "fio HOWTO, direct"))
    depth = _int(ctx.options, "iodepth", 1) or 1
    if _engine(ctx.options) == "libaio" and depth > 1:
        out.append(Finding(
            "P2", WARNING, f"libaio without direct=1 is not asynchronous on Linux: iodepth={depth} behaves like 1.",
            "set direct=1, or use ioengine=io_uring for buffered asynchronous I/O.", "fio HOWTO, iodepth and libaio"))
    return out


def p3_runtime(ctx: JobContext) -> list[Finding]:
    """P3: a runtime under 60 s."""
    runtime = _seconds(ctx.options, "runtime", "timeout")
    if not _storage(ctx) or runtime is None or runtime <= 0 or runtime >= MIN_RUNTIME_S:
        return []
    cloud = ctx.host.virtualization or ""
    burst = " On cloud volumes a short run measures burst credits, not the baseline." if any(
        c in cloud for c in CLOUD_VIRT) else ""
    return [Finding(
        "P3", WARNING, f"runtime {units.format_duration(runtime)} is under {MIN_RUNTIME_S} s: short runs miss "
        f"background work (garbage collection, write-back, throttling).{burst}",
        f"run at least {MIN_RUNTIME_S} s for a claim (minutes on burstable cloud volumes).",
        "AWS EBS and Google Cloud disk benchmarking guides")]


def _replay(ctx: JobContext) -> bool:
    """The job replays an I/O log (``read_iolog``): its requests are the trace's, not fio's."""
    return bool(_value(ctx.options, "read_iolog"))


def p4_ramp(ctx: JobContext) -> list[Finding]:
    """P4: no ``ramp_time`` (not for a replay: a ramp would drop the trace's first requests)."""
    ramp = _seconds(ctx.options, "ramp_time")
    if not _storage(ctx) or _replay(ctx) or (ramp is not None and ramp > 0) or \
            ("ramp_time" in ctx.options and ramp is None):
        return []
    return [Finding(
        "P4", WARNING, "no ramp_time: the first seconds (queues filling, caches and tiers warming) are averaged "
        "into the result.", "set ramp_time (e.g. ramp_time=10s); caching tiers need a longer explicit warm-up.",
        "fio HOWTO, ramp_time")]


def p5_compressible(ctx: JobContext) -> list[Finding]:
    """P5: zeroed, patterned, compressible or dedupable write buffers."""
    opts = ctx.options
    reasons = []
    if _flag(opts, "zero_buffers"):
        reasons.append("zero_buffers")
    if _value(opts, "buffer_pattern"):
        reasons.append(f"buffer_pattern={_value(opts, 'buffer_pattern')}")
    for key in ("buffer_compress_percentage", "dedupe_percentage"):
        if (_int(opts, key, 0) or 0) > 0:
            reasons.append(f"{key}={_value(opts, key)}")
    if not reasons or not _writes(ctx):
        return []
    return [Finding(
        "P5", WARNING, f"the data written is compressible or repeated ({', '.join(reasons)}): storage that "
        "compresses or deduplicates (SSD controllers, ZFS, btrfs, arrays, zram) writes less than fio reports.",
        "leave fio's random buffers (no zero_buffers/buffer_pattern), or set refill_buffers; use compression or "
        "dedupe percentages only to model real data deliberately.", "fio HOWTO, buffer options")]


def p6_cpus(ctx: JobContext) -> list[Finding]:
    """P6: more concurrent fio jobs than usable CPUs (pinned set, else online CPUs); not for a timed
    replay, whose jobs sleep until their logged times (only as many run as the trace had in flight)."""
    if _replay(ctx) and not _flag(ctx.options, "replay_no_stall"):
        return []
    allowed = _value(ctx.options, "cpus_allowed")
    usable: int | None = ctx.host.cpu_count
    if allowed:
        with contextlib.suppress(ValueError):
            usable = len(parse_cpu_list(allowed))
    if not usable or ctx.concurrent <= usable:
        return []
    return [Finding(
        "P6", WARNING, f"{ctx.concurrent} fio jobs run at once on {usable} usable CPU(s): they compete for CPUs, "
        "so the result measures the CPU scheduler as much as the storage.",
        f"run at most {usable} jobs at once (numjobs, or stonewall between sections), with cpus_allowed and "
        "cpus_allowed_policy=split (pin: mq).", "SPDK maintainers' fio guidance; fio HOWTO, cpus_allowed_policy")]


def p7_sync_depth(ctx: JobContext) -> list[Finding]:
    """P7: iodepth > 1 with a synchronous engine."""
    depth = _int(ctx.options, "iodepth", 1) or 1
    engine = _engine(ctx.options)
    if depth <= 1 or engine not in SYNC_ENGINES:
        return []
    implicit = "" if "ioengine" in ctx.options else " (fio's default engine)"
    return [Finding(
        "P7", WARNING, f"iodepth={depth} has no effect with ioengine={engine}{implicit}: it issues one I/O per call.",
        "use ioengine=libaio or io_uring with direct=1 for queue depth, or numjobs for parallel synchronous I/O.",
        "fio HOWTO, iodepth")]


def p8_precondition(ctx: JobContext) -> list[Finding]:
    """P8: writes to an SSD (non-rotational block device) without preconditioning."""
    t = ctx.target
    if not _storage(ctx) or ctx.preconditioned or t is None or t.kind != "block" or not _writes(ctx):
        return []
    if t.device is None or t.device.rotational is not False:
        return []
    return [Finding(
        "P8", WARNING, f"writes to SSD {t.path} without preconditioning: fresh or trimmed flash writes far faster "
        "than in steady state.", "add precondition: {fill: 2x, bs: 128k, rounds: 25} to the suite.",
        "SNIA SSS PTS, preconditioning and steady state")]


def p9_unwritten(ctx: JobContext) -> list[Finding]:
    """P9: reads of blocks never written (a block device, or a sparse file target)."""
    t = ctx.target
    if not _storage(ctx) or ctx.written_before or t is None or not _reads(ctx.options):
        return []
    if t.kind == "block":
        what = f"block device {t.path} is read before anything in the plan writes it"
    elif t.kind == "file" and t.size_bytes and ctx.allocated_bytes is not None \
            and ctx.allocated_bytes < 0.9 * t.size_bytes:
        what = (f"file {t.path} is sparse ({units.format_bytes(ctx.allocated_bytes)} of "
                f"{units.format_bytes(t.size_bytes)} allocated) and is read before the plan writes it")
    else:
        return []
    return [Finding(
        "P9", WARNING, f"{what}: never-written, trimmed or thin-provisioned blocks can be answered with zeros "
        "without touching the media.", "write the region first (precondition: {fill: 1x}, or a write job before "
        "the reads).", "fio issue 719")]


def p12_randrepeat(ctx: JobContext) -> list[Finding]:
    """P12: the same random offsets every repetition (``randrepeat=1``, fio's default)."""
    opts = ctx.options
    if not _storage(ctx) or not rw_mode(opts).startswith("rand") or "randseed" in opts:
        return []
    if "randrepeat" in opts and not _flag(opts, "randrepeat"):
        return []
    if _direct(opts) and ctx.repeats <= 1:
        return []
    why = "buffered I/O (the page cache)" if not _direct(opts) else f"{ctx.repeats} repetitions"
    return [Finding(
        "P12", WARNING, f"randrepeat=1 (fio's default) replays the same offsets every time, and with {why} a cache "
        "learns them.", "set randrepeat=0 so each repetition has its own offsets; fix randseed= deliberately only "
        "for A/B runs.", "fio HOWTO, randrepeat")]


def p13_logging(ctx: JobContext) -> list[Finding]:
    """P13: per-I/O logs (``write_*_log`` without ``log_avg_msec``)."""
    logs = [k for k in ("write_bw_log", "write_iops_log", "write_lat_log") if k in ctx.options]
    if not logs or (_int(ctx.options, "log_avg_msec", 0) or 0) > 0:
        return []
    return [Finding(
        "P13", WARNING, f"{', '.join(logs)} without log_avg_msec logs every I/O: about 32 bytes per I/O per log are "
        "held in memory until the job ends, and writing them perturbs the run at high IOPS.",
        "set log_avg_msec=1000 (or another averaging window).", "fio HOWTO, log_avg_msec; fio issue 588")]


def p14_verify_norandommap(ctx: JobContext) -> list[Finding]:
    """P14: verify with norandommap at iodepth > 1 (false verification errors)."""
    opts = ctx.options
    verify = _value(opts, "verify")
    if verify in (None, "0", "none") or not _flag(opts, "norandommap"):
        return []
    depth = _int(opts, "iodepth", 1) or 1
    if depth <= 1 or _value(opts, "random_generator") == "lfsr" or _engine(opts) in SYNC_ENGINES:
        return []
    return [Finding(
        "P14", WARNING, f"verify={verify} with norandommap at iodepth={depth}: a block can be overwritten while a "
        "write to it is in flight, which fio reports as a verification error.",
        "drop norandommap, or add random_generator=lfsr.", "fio HOWTO, norandommap and verify")]


def _block_bytes(opts: Mapping[str, str | None]) -> int | None:
    """The job's one block size: ``bs`` (``blocksize``), fio's 4k when it sets none; None when it
    sets several (``bs=4k,64k``, ``bssplit``, ``bsrange``) or one iolab cannot read."""
    if {"bssplit", "bsrange", "blocksize_range"} & set(opts):
        return None
    key = "bs" if "bs" in opts else "blocksize"
    if key not in opts:
        return 4096
    return None if "," in (_value(opts, key) or "") else _size(opts, key)


def p15_power(ctx: JobContext) -> list[Finding]:
    """P15: the CPU governor and idle states for a latency-sensitive or small-block job (``check.power``)."""
    opts = ctx.options
    if not _storage(ctx):
        return []
    bs = _block_bytes(opts)
    return power.p15(ctx.host, ctx.tune,
                     latency=_int(opts, "iodepth", 1) == 1 or "latency_target" in opts or "rate_iops" in opts,
                     small_blocks=bs is not None and 0 < bs <= power.SMALL_BLOCK_BYTES, polled=_flag(opts, "hipri"))


JOB_RULES: tuple[Callable[[JobContext], list[Finding]], ...] = (
    p1_working_set, p2_buffered, p3_runtime, p4_ramp, p5_compressible, p6_cpus, p7_sync_depth, p8_precondition,
    p9_unwritten, p12_randrepeat, p13_logging, p14_verify_norandommap, p15_power,
)


def check(contexts: Iterable[JobContext]) -> list[Finding]:
    """Every job rule on every context, merged (same id, severity and text: places joined)."""
    return merge(replace(f, where=(ctx.where,)) for ctx in contexts for rule in JOB_RULES for f in rule(ctx))


def merge(findings: Iterable[Finding]) -> list[Finding]:
    """Findings with the same id, severity, message and remedy become one with all places;
    errors first, then by id number."""
    merged: dict[tuple[str, str, str, str], Finding] = {}
    for f in findings:
        key = (f.id, f.severity, f.message, f.remedy)
        if key in merged:
            old = merged[key]
            merged[key] = replace(old, where=old.where + tuple(w for w in f.where if w not in old.where))
        else:
            merged[key] = f
    return sorted(merged.values(), key=lambda f: (f.severity != ERROR, _id_number(f.id)))


def _id_number(ident: str) -> int:
    return int(ident[1:]) if ident[1:].isdigit() else 0


# --- P11: unlike runs ---------------------------------------------------------------------------------


def unlike_params(workload: str, by_target: Mapping[str, Mapping[str, str]]) -> list[Finding]:
    """P11 inside one plan: ``workload`` runs with different fio parameters on different targets
    (e.g. a target's own ``size``), so its results on them do not compare."""
    names = list(by_target)
    if len(names) < 2:
        return []
    first = by_target[names[0]]
    out = []
    for name in names[1:]:
        other = by_target[name]
        diff = sorted(k for k in set(first) | set(other) if first.get(k) != other.get(k) and not k.startswith("tune."))
        if diff:
            shown = ", ".join(f"{k} {first.get(k, '–')} vs {other.get(k, '–')}" for k in diff[:4])
            out.append(Finding(
                "P11", WARNING, f"workload {workload} has different parameters on targets {names[0]} and {name} "
                f"({shown}): their results do not compare.", "give the targets the same size, or set size in the "
                "workload.", "SNIA SSS PTS, test conditions", (workload,)))
    return out


def unlike_runs(a: Run, b: Run) -> list[Finding]:
    """P11 between two stored runs: the environment facts that differ (fio version, kernel,
    CPU, memory, the device under each target), one warning each. Pure."""
    out = []
    ha, hb = a.info.host, b.info.host
    pairs: list[tuple[str, object, object]] = [("fio version", a.info.fio_version, b.info.fio_version)]
    if ha is not None and hb is not None:
        pairs += [("kernel", ha.kernel, hb.kernel), ("CPU", ha.cpu_model, hb.cpu_model),
                  ("memory", ha.memory_bytes, hb.memory_bytes), ("host", ha.hostname, hb.hostname)]
    devices_a, devices_b = _devices(a), _devices(b)
    for target in sorted(set(devices_a) & set(devices_b)):
        pairs.append((f"device of target {target}", devices_a[target], devices_b[target]))
    for what, va, vb in pairs:
        if va is not None and vb is not None and va != vb:
            out.append(Finding(
                "P11", WARNING, f"run {a.info.id} and run {b.info.id} differ in {what}: {va} vs {vb}.",
                "compare runs that differ only in what you study, or state the difference with the result.",
                "SNIA SSS PTS, test conditions", (f"runs {a.info.id}, {b.info.id}",)))
    return out


def _devices(run: Run) -> dict[str, str]:
    out: dict[str, str] = {}
    for r in run.results:
        facts = r.target_facts
        dev = facts.device if facts is not None else None
        if dev is not None:
            out.setdefault(r.target, " ".join(filter(None, (dev.model, dev.serial))) or dev.name)
    return out


# --- a plan's contexts ------------------------------------------------------------------------------------


def _concurrency(sections: Sequence[tuple[str, Mapping[str, str | None]]]) -> list[int]:
    """For each job section, the fio jobs running with it: its group up to the next stonewall."""
    groups: list[list[int]] = []
    for i, (_, opts) in enumerate(sections):
        if not groups or _flag(opts, "stonewall", "wait_for_previous"):
            groups.append([])
        groups[-1].append(i)
    counts = [0] * len(sections)
    for group in groups:
        total = sum((_int(sections[i][1], "numjobs", 1) or 1) * (2 if _flag(sections[i][1], "sqthread_poll") else 1)
                    for i in group)
        for i in group:
            counts[i] = total
    return counts


def _allocated(facts: TargetFacts | None) -> int | None:
    if facts is None or facts.kind != "file":
        return None
    try:
        return os.stat(facts.path).st_blocks * 512
    except OSError:
        return None


class RenderedJob(Protocol):
    """A planned job with the job file fio will run (``plan_checks.PlanItem``)."""

    @property
    def job(self) -> PlannedJob: ...

    @property
    def job_text(self) -> str: ...

    @property
    def params(self) -> Mapping[str, str]: ...


def lint_plan(items: Sequence[RenderedJob], facts_of: Mapping[str, TargetFacts], precondition: Precondition | None,
              host: HostFacts) -> list[Finding]:
    """Every rule on every distinct (target, workload) of a rendered plan (``run.plan.Plan.items``).

    Reads the rendered job text (what fio will run, pinning included), the targets' facts
    (``facts_of`` by target name; a job file without a target: the first file it names), the
    suite's preconditioning and each job's tuning. Touches nothing; may ``stat`` target files.
    """
    reps = max((i.job.repeat + 1 for i in items), default=1)
    written: set[str] = set()
    contexts: list[JobContext] = []
    params: dict[str, dict[str, Mapping[str, str]]] = {}
    seen: set[tuple[str, str]] = set()
    for item in sorted(items, key=lambda i: i.job.seq):
        spec = item.job.spec
        key = (spec.target.name, spec.workload.name)
        if key in seen:
            continue
        seen.add(key)
        params.setdefault(spec.workload.name, {})[spec.target.name] = item.params
        jobs = jobfile.effective_jobs(jobfile.parse(item.job_text))
        facts = facts_of.get(spec.target.name)
        concurrent = _concurrency(jobs)
        for index, (name, opts) in enumerate(jobs):
            own = facts if facts is not None else _own_target(opts)
            where = f"{spec.workload.name} on {spec.target.name}" if name == spec.workload.name or len(jobs) == 1 \
                else f"{spec.workload.name}/{name} on {spec.target.name}"
            contexts.append(JobContext(
                where=where, options=opts, host=host, target=own, concurrent=concurrent[index], repeats=reps,
                preconditioned=precondition is not None, tune=spec.tune, allocated_bytes=_allocated(own),
                written_before=(bool(precondition and precondition.fill) or spec.target.name in written
                                or any(safety.writes(o) for _, o in jobs[:index])),
            ))
        if any(safety.writes(o) for _, o in jobs):
            written.add(spec.target.name)
    findings = check(contexts)
    for workload, by_target in params.items():
        findings += unlike_params(workload, by_target)
    return merge(findings)


def _own_target(opts: Mapping[str, str | None]) -> TargetFacts | None:
    """Facts of the first file a job names itself (``filename=``), when it exists."""
    name = _value(opts, "filename")
    if not name:
        return None
    first = name.replace("\\:", "\0").split(":")[0].replace("\0", ":")
    if not os.path.isabs(first) or not os.path.exists(first):
        return None
    try:
        return targets.inspect(first)
    except IolabError:  # unreadable: the rules that need it stay silent
        return None
