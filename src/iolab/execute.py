"""Plan a suite, check it, run it job by job and store every result as it ends.

``prepare`` turns a Suite into a Plan: targets inspected, every job file rendered and checked by
fio itself (``--parse-only``), the destructive-write guard and the free-space check applied —
all before fio starts. ``start`` stores the run with every planned invocation as ``pending``;
``execute`` runs whatever is still pending (so ``--resume`` is the same call on an old run) and
commits each result the moment its job ends.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import crashphase, host, interrupts, jobfile, lint, pinning, safety, targets, tuning, units
from . import method as method_mod
from . import suite as suite_mod
from . import tiers as tiers_mod
from .errors import HostError, Interrupted, IolabError, SafetyError, SuiteError
from .model import (
    BlockDeviceFacts,
    FioReport,
    HostFacts,
    ResultRecord,
    TargetFacts,
    to_jsonable,
)
from .observe import config as observe_config
from .observe.config import Probed
from .observe.watch import Observers
from .owner import owner_record
from .remote import jobs as remote_jobs
from .runner import local
from .runner.status import Status
from .store import PendingResult, Store
from .suite import JobSpec, PlannedJob, Suite, Target, plan, render_job
from .sysfs import format_cpu_list as format_cpus
from .units import format_bytes

#: Seconds added to a job's expected duration before it counts as hung (file layout, startup).
TIMEOUT_SLACK_S = 300.0
#: What a plan says about an invocation beyond its job, kept in the result's ``extra``: its warm-up
#: pass (1..N, ``suite.PlannedJob.pass_index``) and a crash test's phase (``crashphase.Phase``).
PLANNED = ("pass", "crash")


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


@dataclass(frozen=True)
class Plan:
    """A checked, rendered suite. ``scratch`` lists files iolab creates and removes afterwards.

    ``host`` are this machine's facts, gathered once for the run (lint reads them, the run
    stores them). ``probed`` are the observers' exporters as the probe found them (all of them,
    to be shown), ``observers`` those the run observes (``observe.config.chosen``).
    """

    suite: Suite
    items: tuple[PlanItem, ...]
    facts: Mapping[str, TargetFacts]
    scratch: tuple[str, ...] = ()
    findings: tuple[lint.Finding, ...] = ()
    pins: Mapping[str, str] = field(default_factory=dict)
    remote: Mapping[str, remote_jobs.RemoteTarget] = field(default_factory=dict)
    host: HostFacts = field(default_factory=HostFacts)
    probed: tuple[Probed, ...] = ()
    observers: Observers = field(default_factory=Observers)

    @property
    def errors(self) -> tuple[lint.Finding, ...]:
        """Error findings (a job fio rejects, a refused destructive write): only a plan prepared with
        ``strict=False`` holds them; ``prepare`` raises them otherwise."""
        return tuple(f for f in self.findings if f.severity == lint.ERROR)

    @property
    def estimate_s(self) -> float | None:
        """Sum of the jobs' expected durations; None when any is unknown."""
        total = 0.0
        for item in self.items:
            if item.expected_s is None:
                return None
            total += item.expected_s
        return total


@dataclass(frozen=True)
class JobEvent:
    """Progress of a run, for the CLI to show. ``kind`` is ``start``, ``status``, ``note``
    (``detail`` says what happens: tuning, preconditioning rounds) or ``end``.

    ``index``/``total`` count the invocations this call runs (not the whole plan when resuming).
    A ``status`` event of a remote target names its ``host``; its ``status`` is None while the
    host starts, and when it is lost, ``note`` saying why.
    """

    kind: str
    index: int
    total: int
    target: str
    workload: str
    repeat: int
    expected_s: float | None = None
    status: Status | None = None
    outcome: str | None = None
    error: str | None = None
    detail: str | None = None
    host: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class RunOptions:
    """How to run: ``destroy`` names block devices the user allows iolab to overwrite."""

    destroy: Collection[str] = ()
    keep_files: bool = False
    fio: str = "fio"


def expected_seconds(options: Mapping[str, str | None]) -> float | None:
    """How long fio will run a job: ``ramp_time + runtime`` when ``time_based`` (HOWTO
    ``time_based``); ``runtime`` is only an upper bound otherwise, so None."""
    time_based = "time_based" in options and options["time_based"] not in ("0",)
    runtime = options.get("runtime") or options.get("timeout")
    if not time_based or not runtime:
        return None
    ramp = options.get("ramp_time") or "0"
    try:
        return (units.parse_duration_us(runtime) + units.parse_duration_us(ramp)) / 1e6
    except ValueError:  # e.g. ${RUNTIME}: fio substitutes it, iolab cannot know the value
        return None


def _job_seconds(sections: tuple[jobfile.Section, ...]) -> float | None:
    times = [expected_seconds(opts) for _, opts in jobfile.effective_jobs(sections)]
    if not times or any(t is None for t in times):
        return None
    return max(t for t in times if t is not None)


def _job_paths(sections: tuple[jobfile.Section, ...]) -> list[str]:
    """The files and directories a job file names itself (``filename`` may list several,
    separated by an unescaped ``:``)."""
    paths = []
    for _, opts in jobfile.effective_jobs(sections):
        for key in ("filename", "directory"):
            value = opts.get(key)
            if value:
                paths += [p.replace("\\:", ":") for p in re.split(r"(?<!\\):", value) if p]
    return paths


def _resolve(suite: Suite) -> Suite:
    """Target paths made absolute (fio runs in another directory)."""
    resolved = tuple(
        replace(t, path=os.path.abspath(os.path.expanduser(t.path))) if t.path and not t.hosts else t
        for t in suite.targets
    )
    return replace(suite, targets=resolved)


def _needed_bytes(sections: list[jobfile.Section], kind: str) -> int:
    """Space a target needs: a file target's size (the largest job's), a directory's files
    (``size × numjobs × nrfiles`` per distinct job name, as fio lays them out as
    ``name.jobnum.filenum``: repeats of a job reuse its files)."""
    per_job: dict[str, int] = {}
    for section in sections:
        opts = dict(section.options)
        size_text = opts.get("size") or "0"
        if size_text.endswith("%"):
            continue
        size = units.parse_size(size_text)
        if kind == "directory":
            size *= int(opts.get("numjobs") or 1) * int(opts.get("nrfiles") or 1)
        per_job[section.name] = max(per_job.get(section.name, 0), size)
    if kind == "directory":
        return sum(per_job.values())
    return max(per_job.values(), default=0)


def prepare(suite: Suite, options: RunOptions, repeat: int | None = None, strict: bool = True) -> Plan:
    """Inspect targets, render and check every job, apply safety rules, lint; nothing is written.

    Remote targets (with hosts) pass their preflight first (``remote.jobs.preflight``); then
    every observer's exporter is probed once (``observe.config.probe``, at most a few seconds).

    Raises ``SafetyError`` (a destructive write, too little space), ``SuiteError`` (fio rejects
    a job: the message names the workload and quotes fio; a method setting does not fit a
    target), ``TuningError``, ``HostError`` (a host fails its preflight), ``FioNotFound``.
    With ``strict=False`` (``iolab lint``) fio's rejections and safety refusals become error
    findings (``FIO``, ``P16``) instead. Lint findings are in ``Plan.findings`` either way; the
    caller decides whether errors stop it.
    """
    suite = _resolve(suite)
    machine = host.host_facts(local.fio_version(options.fio))
    facts = {t.name: targets.inspect(t.path) for t in suite.targets if t.path and not t.hosts}
    remote = {t.name: remote_jobs.preflight(t, options.fio) for t in suite.targets if t.hosts}
    servers = {name: rt.target.hosts for name, rt in remote.items()}
    probed = observe_config.probe(observe_config.endpoints(suite.observe, servers))
    observers = Observers(tuple(observe_config.chosen(suite.observe, probed)), suite.observe.prometheus)
    pins = _pins(suite, facts)
    items: list[PlanItem] = []
    checked: dict[str, None] = {}
    refused: list[lint.Finding] = []
    with tempfile.TemporaryDirectory(prefix="iolab-check-") as tmp:
        for job in plan(suite, repeat):
            spec = job.spec
            kind = facts[spec.target.name].kind if spec.target.name in facts else None
            kind = remote[spec.target.name].kind if spec.target.name in remote else kind
            text = render_job(spec, kind, pinning.fio_options(pins[spec.target.name]) if spec.target.name in pins
                              else ())
            if text not in checked:
                _check_method(suite, spec, facts.get(spec.target.name), spec.target.name in remote)
                problem = local.check_job(text, Path(tmp), options.fio)
                if problem and strict:
                    raise SuiteError(f"{spec.workload.origin} ({spec.workload.name}): fio rejects the job:\n{problem}",
                                     hint="fio option names and values are used verbatim; see `fio --cmdhelp=OPTION`")
                if problem:
                    refused.append(lint.Finding("FIO", lint.ERROR, f"fio rejects the job: {problem}",
                                                "fix the option fio names; see `fio --cmdhelp=OPTION`",
                                                "fio --parse-only", (spec.workload.name,)))
                checked[text] = None
            params = {**jobfile.workload_params(spec.sections), **{f"tune.{k}": v for k, v in spec.tune.items()}}
            effective = [opts for _, opts in jobfile.effective_jobs(spec.sections)]
            items.append(PlanItem(
                job=job, kind=kind, job_text=text, params=params, job_hash=jobfile.params_hash(params),
                expected_s=_job_seconds(spec.sections),
                writes=any(safety.writes(o) for o in effective) or suite.method.precondition is not None,
            ))
    _check_sizes(suite, items, facts)
    try:
        scratch = _check_targets(suite, items, facts, options)
        _check_remote_targets(remote, items, options)
    except SafetyError as exc:
        if strict:
            raise
        scratch = ()
        refused.append(lint.Finding("P16", lint.ERROR, exc.message, exc.hint or "",
                                    "iolab safety rules (docs/design.md, section 3)"))
    findings = lint.merge([*refused, *lint.lint_plan(items, facts, suite.method.precondition, machine)])
    return Plan(suite=suite, items=tuple(items), facts=facts, scratch=scratch, findings=tuple(findings),
                pins={name: format_cpus(cpus) for name, cpus in pins.items()}, remote=remote, host=machine,
                probed=tuple(probed), observers=observers)


def _pins(suite: Suite, facts: Mapping[str, TargetFacts]) -> dict[str, tuple[int, ...]]:
    """Each target's CPU set for ``pin:`` (empty without pinning). Raises ``SuiteError``."""
    mode = suite.method.pin
    if not mode:
        return {}
    out = {}
    for target in suite.targets:
        f = facts.get(target.name)
        if f is None or f.device is None:
            raise SuiteError(f"pin: {mode}: target {target.name} is not on a block device, so it has no queues or "
                             "NUMA node to pin to", hint="pin only targets on block devices")
        out[target.name] = pinning.cpus(mode, f.device)
    return out


def _check_method(suite: Suite, spec: JobSpec, facts: TargetFacts | None, remote: bool) -> None:
    """Tuning, preconditioning and drop_caches must be possible here, before anything runs."""
    if remote and (suite.method.precondition is not None or suite.method.drop_caches):
        raise SuiteError(f"target {spec.target.name}: precondition and drop_caches work on local targets only "
                         "(iolab cannot run them on a fio server's host)",
                         hint="precondition the remote hosts with a fill workload before the measured ones")
    tuning.knobs(spec.tune, _device(facts))
    if suite.method.precondition is not None and not spec.target.path:
        raise SuiteError("precondition: a job file's own files cannot be preconditioned",
                         hint="name the target with --target NAME=PATH")
    if suite.method.drop_caches:
        method_mod.check_drop_caches()


def _device(facts: TargetFacts | None) -> BlockDeviceFacts | None:
    return facts.device if facts is not None else None


def method_options(plan_: Plan) -> dict[str, Any]:
    """The method settings ``execute`` needs, stored with the run so ``--resume`` has them."""
    m = plan_.suite.method
    return {"pin": m.pin, "pin_cpus": dict(plan_.pins), "drop_caches": m.drop_caches,
            "precondition": to_jsonable(m.precondition) if m.precondition else None,
            "tune": {i.job.spec.workload.name: dict(i.job.spec.tune) for i in plan_.items if i.job.spec.tune}}


def _check_targets(suite: Suite, items: list[PlanItem], facts: Mapping[str, TargetFacts],
                   options: RunOptions) -> tuple[str, ...]:
    scratch = []
    for target in suite.targets:
        if target.hosts:
            continue  # _check_remote_targets
        mine = [i for i in items if i.job.spec.target.name == target.name]
        paths = [target.path] if target.path else sorted({p for i in mine for p in _job_paths(i.job.spec.sections)})
        for path in paths:
            seen = facts[target.name] if path == target.path else targets.inspect(path)
            if seen.kind == "block" and any(i.writes for i in mine):
                safety.check_block_write(seen, options.destroy)
        f = facts.get(target.name)
        if f is None or f.kind == "block":
            continue
        sections = [s for i in mine for s in jobfile.parse(i.job_text) if not s.is_global]
        safety.check_free_space(f, _needed_bytes(sections, f.kind))
        if f.kind == "missing" and target.path:
            scratch.append(target.path)
    return tuple(scratch)


def _check_sizes(suite: Suite, items: list[PlanItem], facts: Mapping[str, TargetFacts]) -> None:
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


def _check_remote_targets(remote: Mapping[str, remote_jobs.RemoteTarget], items: list[PlanItem],
                          options: RunOptions) -> None:
    for name, rt in remote.items():
        mine = [i for i in items if i.job.spec.target.name == name]
        sections = [s for i in mine for s in jobfile.parse(i.job_text) if not s.is_global]
        remote_jobs.check_safety(rt.target, rt.target_facts, any(i.writes for i in mine), options.destroy,
                                 _needed_bytes(sections, rt.kind))


def start(store: Store, plan_: Plan, options: RunOptions, label: str | None = None,
          tags: Mapping[str, str] | None = None, planned: Mapping[str, Any] | None = None) -> int:
    """Store the run and every planned invocation as pending; returns the run id.

    The plan's lint findings (warnings) become the run's warnings. ``planned`` is stored with
    every invocation (``PLANNED``: a workflow's crash-test phase)."""
    warnings = [f.text() for f in plan_.findings]
    run_id = store.create_run(
        suite_name=plan_.suite.name, suite_text=plan_.suite.text, label=label, tags=tags,
        host=plan_.host, fio_version=plan_.host.fio_version, warnings=warnings,
        options={"keep_files": options.keep_files, "scratch": list(plan_.scratch), "source": plan_.suite.source,
                 "method": method_options(plan_),
                 "targets": {t.name: t.path for t in plan_.suite.targets},
                 "remote": remote_jobs.stored_options(plan_.suite.targets),
                 "remote_scratch": {name: remote_jobs.scratch(rt) for name, rt in plan_.remote.items()},
                 "observe": plan_.observers.stored(), "passes": plan_.suite.passes, "owner": owner_record(),
                 "tiers": tiers_mod.stored(plan_.suite.tiers),
                 "preexisting": {t.path: sorted(_fio_files(t.path)) for t in plan_.suite.targets
                                 if t.path and t.name in plan_.facts and plan_.facts[t.name].kind == "directory"}},
    )
    store.add_pending(run_id, _pending(plan_, 0, planned=planned))
    return run_id


def extend(store: Store, run_id: int, plan_: Plan, first_repeat: int = 0,
           planned: Mapping[str, Any] | None = None) -> None:
    """Add a plan's invocations to the stored run ``run_id`` as pending, after its last, for a
    workflow that decides what to run next from what it has measured (``iolab.workflow``); the next
    ``execute`` runs them. Their repetitions count from ``first_repeat`` (a workflow that repeats
    workloads in rounds of its own); ``planned`` is stored with each (as for ``start``). The plan's
    tuning joins the run's stored method settings."""
    run = store.get_run(run_id)
    method = dict(run.info.options.get("method") or {})
    method["tune"] = {**(method.get("tune") or {}), **method_options(plan_)["tune"]}
    store.update_run(run_id, options={**run.info.options, "method": method})
    store.add_pending(run_id, _pending(plan_, max((r.seq for r in run.results), default=-1) + 1, first_repeat,
                                       planned))


def _pending(plan_: Plan, first_seq: int, first_repeat: int = 0,
             planned: Mapping[str, Any] | None = None) -> list[PendingResult]:
    return [PendingResult(seq=first_seq + i.job.seq, target=i.job.spec.target.name,
                          target_path=i.job.spec.target.path, workload=i.job.spec.workload.name,
                          repeat=first_repeat + i.job.repeat, job_text=i.job_text, job_hash=i.job_hash,
                          params=i.params, planned={**(planned or {}),
                                                    **({"pass": i.job.pass_index} if i.job.pass_index else {})})
            for i in plan_.items]


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a run like Ctrl-C does: fio ends cleanly, finished results stay."""
    previous = signal.signal(signal.SIGTERM, interrupts.handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def execute(store: Store, run_id: int, options: RunOptions,
            on_event: Callable[[JobEvent], None] = lambda e: None) -> str:
    """Run every invocation of ``run_id`` that has not ended yet; returns the run's status.

    Status: ``complete`` (all ok), ``partial`` (hosts of a remote target were lost mid-run; the
    other hosts' results are kept) or ``failed`` (some job failed; fio's message is stored).
    Remote targets pass their preflight before any job (raises ``HostError``).
    Raises ``Interrupted`` on Ctrl-C/SIGTERM after stopping fio; finished results are kept and
    the job in flight is marked ``interrupted`` so that ``--resume`` runs it again.
    """
    run = store.get_run(run_id)
    todo = [r for r in run.results if r.status in ("pending", "running", "interrupted")]
    try:
        remote = _remote_targets(run.info.options, todo, options)
    except HostError as exc:
        store.finish_run(run_id, "failed")
        hint = f"{exc.hint}; then " if exc.hint else ""
        raise HostError(exc.message, hint=f"{hint}finish the run with: iolab run --resume {run_id}") from None
    # who runs it now: a reader sees it `interrupted` once this process is gone (owner.py)
    store.update_run(run_id, status="running", finished_at=None, options={**run.info.options, "owner": owner_record()})
    method = _JobMethod(store, run_id, run.info.options, options)
    observers = Observers.from_options(run.info.options)
    keep_files = options.keep_files or run.info.options.get("keep_files", False)  # as asked at the start too
    try:
        with _sigterm_as_interrupt():
            for index, result in enumerate(todo):
                events = _Events(on_event, index, len(todo), result, _job_seconds(jobfile.parse(result.job_text)))
                _run_job(store, result, events, options, method, observers, remote.get(result.target))
    except tuning.RestoreError:
        store.finish_run(run_id, "failed")  # host settings are not what they were: stop here
        raise
    except KeyboardInterrupt:
        store.finish_run(run_id, "interrupted")
        _cleanup(store, run_id, keep_files)
        raise Interrupted(f"run {run_id} interrupted; finished results are stored",
                          hint=f"finish it with: iolab run --resume {run_id}") from None
    _cleanup(store, run_id, keep_files)
    final = store.get_run(run_id)
    statuses = {r.status for r in final.results}
    status = "complete" if statuses <= {"ok"} else ("partial" if statuses <= {"ok", "partial"} else "failed")
    store.finish_run(run_id, status)
    return status


def _remote_targets(run_options: Mapping[str, Any], todo: list[Any], options: RunOptions) -> dict[str, Target]:
    """The remote targets with work left, each past its preflight (raises ``HostError``)."""
    out = {}
    for result in todo:
        target = remote_jobs.target_from_options(result.target, result.target_path, run_options)
        if target is not None and target.name not in out:
            remote_jobs.preflight(target, options.fio)
            out[target.name] = target
    return out


@dataclass(frozen=True)
class _Events:
    """``JobEvent``s of one invocation, for ``on_event``."""

    on_event: Callable[[JobEvent], None]
    index: int
    total: int
    result: ResultRecord
    expected_s: float | None

    def __call__(self, kind: str, **fields: Any) -> None:
        self.on_event(JobEvent(kind, self.index, self.total, self.result.target, self.result.workload,
                               self.result.repeat, self.expected_s, **fields))


def _run_job(store: Store, result: ResultRecord, events: _Events, options: RunOptions, method: _JobMethod,
             observers: Observers, target: Target | None) -> None:
    """One invocation, on a local target or on every host of a remote one (``target``), observed
    by the run's observers; its result is stored the moment it ends.

    A local job gets its tuning, preconditioning and drop_caches around it. A failing setting or
    fio failure fails the job and the run goes on; a safety refusal or a restore failure stops
    the run (raised), as does Ctrl-C (the job is stored ``interrupted``).
    """
    facts = _checked_facts(result, options, method) if target is None else None
    events("start")
    store.save_result(result.id, status="running", started_at=datetime.now(UTC), target_facts=facts)
    extra: dict[str, Any] = {k: v for k, v in (result.extra or {}).items() if k in PLANNED}
    failed: dict[str, Any] = {"target_facts": facts, "extra": extra}
    tune = method.tune(result.workload) if target is None else {}
    try:
        with tuning.applied(tune, _device(facts)) as in_force:
            if tune and result.target_path:  # the facts stored with the result show the values in force
                facts = failed["target_facts"] = targets.inspect(result.target_path)
            extra.update(method.record(result, in_force))
            extra.update(method.before(result, facts, lambda text: events("note", detail=text)))
            counted = method.counted_devices(facts, target is not None)
            before = tiers_mod.snapshot(counted.values()) if counted else None
            with observers.watch(result.target) as watch:
                done, hosts = _run_fio_job(result, options, target, events)
                samples, usage = watch.finish(done.report, done.started_at, done.ended_at, done.measured_start_ms)
            if before is not None:
                extra["tiers"] = {"devices": counted, "before": before, "after": tiers_mod.snapshot(counted.values())}
    except KeyboardInterrupt:
        store.save_result(result.id, status="interrupted", error="interrupted by the user",
                          ended_at=datetime.now(UTC), **failed)
        raise
    except (tuning.RestoreError, SafetyError) as exc:  # the host is not as it was, or unsafe: the run stops
        store.save_result(result.id, status="failed", error=exc.message, ended_at=datetime.now(UTC), **failed)
        raise
    except IolabError as exc:  # tuning refused, preconditioning or drop_caches failed: this job fails
        store.save_result(result.id, status="failed", error=exc.message, ended_at=datetime.now(UTC), **failed)
        events("end", outcome="failed", error=exc.message)
        return
    if facts is not None and facts.kind == "missing":  # fio has laid the scratch file out: describe it
        facts = targets.inspect(facts.path)
    extra.update(_with_exporter_facts(hosts, observers))
    if usage:
        extra["observed"] = to_jsonable(list(usage))
    store.save_result(
        result.id, status=done.status, command=shlex.join(done.command), started_at=done.started_at,
        ended_at=done.ended_at, error=done.error, report=done.report, raw_json=done.raw_json,
        target_facts=facts, extra=extra, series=done.time_series, observations=samples,
    )
    events("end", outcome=done.status, error=done.error)


def _checked_facts(result: ResultRecord, options: RunOptions, method: _JobMethod) -> TargetFacts | None:
    """A local target's facts, checked again by the destructive-write guard when the job (or
    its preconditioning) writes a block device: it may have changed since planning."""
    facts = targets.inspect(result.target_path) if result.target_path else None
    if facts is not None and facts.kind == "block" and (method.writes or any(
        safety.writes(o) for _, o in jobfile.effective_jobs(jobfile.parse(result.job_text))
    )):
        safety.check_block_write(facts, options.destroy)
    return facts


def _run_fio_job(result: ResultRecord, options: RunOptions, target: Target | None,
                 events: _Events) -> tuple[local.Outcome, dict[str, Any]]:
    """fio on this machine, or fio's client driving every host of ``target``: how it ran, and what
    goes into ``extra``: a remote target's per-host records (``remote.jobs.RemoteOutcome.extra``), a
    crash test phase's record (``crashphase``: its options and files around fio, and its verdict on
    fio's status)."""
    workdir = Path(tempfile.mkdtemp(prefix="iolab-job-"))
    phase = crashphase.from_extra(result.extra)
    try:
        if target is None:
            prefixes = {crashphase.LOCAL: crashphase.LOCAL}
            crashphase.place_states(phase, workdir, prefixes)
            done = local.run(result.job_text, workdir, on_status=lambda s: events("status", status=s), fio=options.fio,
                             cwd=Path.cwd(), timeout_s=_timeout(events.expected_s),
                             extra_args=crashphase.fio_args(phase, workdir, local=True))
            messages, hosts, extra = (workdir / "fio.stderr").read_text(errors="replace"), [crashphase.LOCAL], {}
        else:
            remote = remote_jobs.run_job(
                result.job_text, target, workdir, options.fio, options.destroy,
                timeout_s=remote_jobs.time_bound_s(jobfile.parse(result.job_text), TIMEOUT_SLACK_S),
                on_status=lambda h: events("status", status=h.status, host=h.host, note=h.message),
                extra_args=crashphase.fio_args(phase, workdir, local=False),
                before_start=lambda found: crashphase.place_states(phase, workdir, found))
            c = remote.client
            done = local.Outcome(c.status, c.command, c.started_at, c.ended_at, c.report, c.raw_json, c.error,
                                 c.time_series)
            messages, hosts, extra, prefixes = c.raw_json or "", [h.label for h in target.hosts], remote.extra, \
                dict(c.prefixes)
        if phase is None:
            return done, extra
        ended = crashphase.Ended(done.status, done.error, done.report, messages,
                                 crashphase.collect_states(workdir, prefixes), (workdir / crashphase.MARKER).exists(),
                                 hosts)
        judged = crashphase.judge(phase, ended)
        return replace(done, status=judged.status, error=judged.error, report=judged.report), \
            {**extra, "crash": judged.record}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _timeout(expected: float | None) -> float | None:
    return None if expected is None else expected * 2 + TIMEOUT_SLACK_S


def _with_exporter_facts(extra: Mapping[str, Any], observers: Observers) -> dict[str, Any]:
    """A remote result's per-host records with the facts each host's exporter gave where ssh
    gave none (``remote.jobs.HostRecord.facts``)."""
    if not extra.get("hosts"):
        return dict(extra)
    found = observers.facts()
    hosts = [{**r, "facts": to_jsonable(found[r["host"]].host)} if r.get("facts") is None and r["host"] in found
             else r for r in extra["hosts"]]
    return {**extra, "hosts": hosts}


def _run_fio(job_text: str, options: RunOptions) -> local.Outcome:
    workdir = Path(tempfile.mkdtemp(prefix="iolab-job-"))
    try:
        return local.run(job_text, workdir, fio=options.fio, cwd=Path.cwd())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class _JobMethod:
    """The run's stored method settings (``method_options``), applied around each job.

    A region's preconditioning fill is done once per run: each finished fill is stored with the
    run's options (``filled``) the moment it ends, so ``--resume`` after a kill does not fill
    again what was filled before.
    """

    def __init__(self, store: Store, run_id: int, run_options: Mapping[str, Any], options: RunOptions) -> None:
        self.store, self.run_id, self.run_options = store, run_id, dict(run_options)
        self.stored = run_options.get("method") or {}
        self.options = options
        pre = self.stored.get("precondition")
        self.precondition = method_mod.Precondition(**pre) if pre else None
        self.writes = self.precondition is not None
        self.filled: set[tuple[str, str]] = {(p, w) for p, w in run_options.get("filled", ())}
        self._region: tuple[str, str] | None = None
        self.tiers = tiers_mod.from_options(run_options)

    def tune(self, workload: str) -> dict[str, str]:
        return dict((self.stored.get("tune") or {}).get(workload) or {})

    def counted_devices(self, facts: TargetFacts | None, remote: bool) -> dict[str, str]:
        """The devices on this machine whose counters are read around the job (``tiers``): tier
        name -> kernel name of each local tier, and the target's own device (``target``) when it is
        a device-mapper or bcache device, which may be a cache with counters of its own."""
        out = {t.name: t.kernel_name for t in tiers_mod.local_tiers(self.tiers, remote)}
        device = facts.device if facts is not None else None
        if device is not None and device.name.startswith(("dm-", "bcache")) and device.name not in out.values():
            out["target"] = device.name
        return out

    def record(self, result: ResultRecord, in_force: Mapping[str, str]) -> dict[str, Any]:
        """What is in force for this job: tuning values (all of them) and the pinned CPUs."""
        out: dict[str, Any] = {}
        if in_force:
            out["tuning"] = {"requested": self.tune(result.workload), "in_force": dict(in_force)}
        cpus = (self.stored.get("pin_cpus") or {}).get(result.target)
        if cpus:
            out["pin"] = {"mode": self.stored.get("pin"), "cpus": cpus}
        return out

    def before(self, result: ResultRecord, facts: TargetFacts | None, note: Callable[[str], None]) -> dict[str, Any]:
        """Preconditioning, then dropping caches; returns their records for ``extra``. A warm-up's
        later passes get neither: they measure what the earlier passes left in the caches."""
        out: dict[str, Any] = {}
        if (result.extra or {}).get("pass", 0) > 1:
            return out
        kind = facts.kind if facts is not None else None
        if self.precondition is not None and result.target_path is not None:
            self._region = (result.target_path, result.workload if kind == "directory" else "")
            out["precondition"] = method_mod.precondition(
                result.job_text, kind, self.precondition, fill=self._region not in self.filled, run_fio=self._fio,
                note=note)
        if self.stored.get("drop_caches"):
            out["drop_caches"] = method_mod.drop_caches(_target_files(result, kind))
            if not out["drop_caches"]["verified"]:
                note("drop_caches: the target's pages are still cached after dropping")
        return out

    def _fio(self, label: str, job_text: str) -> FioReport:
        outcome = _run_fio(job_text, self.options)
        if outcome.status != "ok" or outcome.report is None:
            raise IolabError(f"precondition {label} failed: {outcome.error or 'no fio report'}")
        if label == "fill" and self._region is not None:
            self.filled.add(self._region)
            self.run_options["filled"] = sorted(self.filled)
            self.store.update_run(self.run_id, options=self.run_options)
        return outcome.report


def _target_files(result: ResultRecord, kind: str | None) -> list[str]:
    """The regular files a job reads or writes in its target (for drop_caches' check)."""
    if result.target_path is None:
        return []
    if kind in ("file", "missing"):
        return [result.target_path]
    if kind == "directory":
        jobs = {name for name, _ in jobfile.effective_jobs(jobfile.parse(result.job_text))}
        return [os.path.join(result.target_path, n) for n in sorted(_fio_files(result.target_path))
                if n.rsplit(".", 2)[0] in jobs]
    return []


def _fio_files(directory: str) -> set[str]:
    """Files in ``directory`` named the way fio names its own (``job.N.M``)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    return {n for n in names if re.fullmatch(r".+\.\d+\.\d+", n)}


def remove_scratch(store: Store, run_id: int) -> None:
    """Remove the scratch files of a run whose jobs ran with ``keep_files`` (a workflow's probes
    reuse the laid-out file; it goes when the workflow ends)."""
    _cleanup(store, run_id, keep=False)


def _cleanup(store: Store, run_id: int, keep: bool) -> None:
    """Remove scratch files iolab created: missing-file targets, and in directory targets the
    files fio laid out for this run's jobs (named ``<job>.N.M``) that were not there before the
    run started (the listing is stored with the run, so a resumed run cleans up too); the same
    on the hosts of remote targets where ssh facts said what is iolab's (``remote.jobs.scratch``).
    Files that cannot be removed on a remote host become a warning of the run."""
    if keep:
        return
    run = store.get_run(run_id)
    run_options = run.info.options
    for path in run_options.get("scratch", ()):
        Path(path).unlink(missing_ok=True)
    jobs = {name for r in run.results for name, _ in jobfile.effective_jobs(jobfile.parse(r.job_text))}
    for directory, existing in run_options.get("preexisting", {}).items():
        for name in _fio_files(directory) - set(existing):
            if name.rsplit(".", 2)[0] in jobs:
                Path(directory, name).unlink(missing_ok=True)
    problems = []
    for target, stored in (run_options.get("remote_scratch") or {}).items():
        mine = {name for r in run.results if r.target == target
                for name, _ in jobfile.effective_jobs(jobfile.parse(r.job_text))}
        if stored:
            problems += remote_jobs.remove_scratch(stored, mine)
    if problems:
        store.update_run(run_id, warnings=[*run.info.warnings, *(f"scratch files left: {p}" for p in problems)])
