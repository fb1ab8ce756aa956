"""Plan a suite, check it, run it job by job and store every result as it ends.

``prepare`` turns a Suite into a Plan: targets inspected, every job file rendered and checked by
fio itself (``--parse-only``), the destructive-write guard and the free-space check applied
(``plan_checks``) — all before fio starts. ``start`` stores the run with every planned invocation as ``pending``;
``execute`` runs whatever is still pending (so ``--resume`` is the same call on an old run) and
commits each result the moment its job ends, and removes the scratch files (``scratch``) after.
"""

from __future__ import annotations

import concurrent.futures
import os
import shlex
import signal
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import interrupts, units
from ..analyze import tiers as tiers_mod
from ..check import guard, lint, plan_checks, safety
from ..check.plan_checks import PlanItem
from ..check.remote import RemoteTarget, preflight, unchecked
from ..describe import tiers as tier_specs
from ..describe.method import Precondition
from ..describe.suite import JobSpec, Suite, Target, plan, render_job
from ..errors import HostError, Interrupted, IolabError, SafetyError, StoreError, SuiteError
from ..facts import host, pinning, targets
from ..facts.owner import owner_record
from ..facts.sysfs import format_cpu_list as format_cpus
from ..fio import jobfile
from ..model import BlockDeviceFacts, FioReport, HostFacts, ResultRecord, Run, TargetFacts, to_jsonable
from ..observe import config as observe_config
from ..observe.config import Probed
from ..observe.watch import Observers
from ..runner import fence as fence_mod
from ..runner import local
from ..runner.status import Status
from ..store import faults as dbfaults
from ..store.faults import DatabaseUnavailable
from ..units import format_duration
from . import crashphase, tuning
from . import method as method_mod
from . import remote as remote_run
from . import scratch as scratch_mod
from . import spool as spool_mod
from .spool import JobEnd, Spool

if TYPE_CHECKING:  # the store (SQLAlchemy) is imported while the plan's checks run (``cli.run``)
    from ..store.database import PendingResult, Store

#: Seconds added to a job's expected duration before it counts as hung (file layout, startup).
TIMEOUT_SLACK_S = 300.0
#: What a plan says about an invocation beyond its job, kept in the result's ``extra``: its warm-up
#: pass (1..N, ``suite.PlannedJob.pass_index``) and a crash test's phase (``crashphase.Phase``).
PLANNED = ("pass", "crash")


@dataclass(frozen=True)
class Plan:
    """A checked, rendered suite. ``scratch`` lists files iolab creates and removes afterwards.

    ``host`` are this machine's facts, gathered once for the run (lint reads them, the run
    stores them). ``probed`` are the observers' exporters as the probe found them (all of them,
    to be shown), ``observers`` those the run observes (``observe.config.chosen``). ``created`` are
    the files and directories fio creates new (real paths): stored with the run, they are iolab's
    own to a ``--resume`` of it, marked or not (``runner.marks``).
    """

    suite: Suite
    items: tuple[PlanItem, ...]
    facts: Mapping[str, TargetFacts]
    scratch: tuple[str, ...] = ()
    findings: tuple[lint.Finding, ...] = ()
    pins: Mapping[str, str] = field(default_factory=dict)
    remote: Mapping[str, RemoteTarget] = field(default_factory=dict)
    host: HostFacts = field(default_factory=HostFacts)
    probed: tuple[Probed, ...] = ()
    observers: Observers = field(default_factory=Observers)
    fence: guard.FencePlan = field(default_factory=lambda: guard.FencePlan(None, "not planned", ()))
    created: tuple[str, ...] = ()

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
    """How to run: ``destroy`` names block devices the user allows iolab to overwrite; ``fence``
    runs every local fio inside the fence (``runner.fence``; False only with ``--no-fence``);
    ``allow_exec`` lets jobs run programs (``exec_prerun`` ...), inside the fence; ``owned`` are real
    paths of files the run created (``Plan.created``, set by ``execute`` from the stored run)."""

    destroy: Collection[str] = ()
    keep_files: bool = False
    fio: str = "fio"
    fence: bool = True
    allow_exec: bool = False
    owned: Collection[str] = ()


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


def _resolve(suite: Suite) -> Suite:
    """Target paths made absolute (fio runs in another directory)."""
    resolved = tuple(
        replace(t, path=os.path.abspath(os.path.expanduser(t.path))) if t.path and not t.hosts else t
        for t in suite.targets
    )
    return replace(suite, targets=resolved)


def prepare(suite: Suite, options: RunOptions, repeat: int | None = None, strict: bool = True,
            contact: bool = True, checked: Mapping[str, RemoteTarget] | None = None) -> Plan:
    """Inspect targets, render and check every job, apply safety rules, lint; nothing is written.

    Remote targets (with hosts) pass their preflight first (``remote.jobs.preflight``); then
    every observer's exporter is probed once (``observe.config.probe``, at most a few seconds).
    ``checked`` are remote targets an earlier plan of the same run checked (by name): not
    probed again. With ``contact=False`` (a dry run) no other host is contacted: remote targets stay
    unchecked (``remote.jobs.unchecked``), their facts-based safety checks wait for the run, and
    no exporter is probed. fio checks each distinct job text once per process
    (``fio --parse-only``).

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
    remote = {t.name: preflight(t, options.fio, known=(checked or {}).get(t.name),
                                            fio_version=machine.fio_version) if contact
              else unchecked(t) for t in suite.targets if t.hosts}
    servers = {name: rt.target.hosts for name, rt in remote.items()}
    probed = observe_config.probe(observe_config.endpoints(suite.observe, servers)) if contact else []
    observers = Observers(tuple(observe_config.chosen(suite.observe, probed)), suite.observe.prometheus)
    pins = _pins(suite, facts)
    items: list[PlanItem] = []
    judged: dict[str, JobSpec] = {}
    refused: list[lint.Finding] = []
    fenced = fence_mod.status().ok and options.fence
    with tempfile.TemporaryDirectory(prefix="iolab-check-") as tmp:
        for job in plan(suite, repeat):
            spec = job.spec
            kind = facts[spec.target.name].kind if spec.target.name in facts else None
            kind = remote[spec.target.name].kind if spec.target.name in remote else kind
            text = render_job(spec, kind, pinning.fio_options(pins[spec.target.name]) if spec.target.name in pins
                              else ())
            if text not in judged:
                _check_method(suite, spec, facts.get(spec.target.name), spec.target.name in remote)
                try:  # before fio parses it: parsing loads an external engine's code
                    guard.check_exec(text, options.allow_exec, f"{spec.workload.origin} ({spec.workload.name})")
                    judged[text] = spec
                except SafetyError as exc:
                    if strict:
                        raise
                    refused.append(lint.Finding("P16", lint.ERROR, exc.message, exc.hint or "",
                                                "iolab safety guard (docs/design.md)", (spec.workload.name,)))
            params = {**jobfile.workload_params(spec.sections), **{f"tune.{k}": v for k, v in spec.tune.items()}}
            effective = [opts for _, opts in jobfile.effective_jobs(spec.sections)]
            items.append(PlanItem(
                job=job, kind=kind, job_text=text, params=params, job_hash=jobfile.params_hash(params),
                expected_s=_job_seconds(spec.sections),
                writes=any(safety.writes(o) for o in effective) or suite.method.precondition is not None,
            ))
        refused += _fio_checks(judged, Path(tmp).resolve(), options.fio, strict, fenced)
    plan_checks.check_sizes(suite, items, facts)
    verdicts: list[guard.Checked] = []
    try:
        scratch, verdicts = plan_checks.check_targets(suite, items, facts, options.destroy, options.allow_exec,
                                                      options.fence)
        plan_checks.check_remote_targets(remote, items, options.destroy)
        fence_plan = guard.plan_fence(verdicts, options.fence)
    except SafetyError as exc:
        if strict:
            raise
        scratch, fence_plan = (), guard.FencePlan(None, exc.message, ())
        refused.append(lint.Finding("P16", lint.ERROR, exc.message, exc.hint or "",
                                    "iolab safety rules (docs/design.md, section 3)"))
    findings = lint.merge([*refused, *lint.lint_plan(items, facts, suite.method.precondition, machine)])
    created = tuple(dict.fromkeys(os.path.realpath(p) for v in verdicts for p, why in v.writable.items()
                                  if why == fence_mod.NEW))
    return Plan(suite=suite, items=tuple(items), facts=facts, scratch=scratch, findings=tuple(findings),
                pins={name: format_cpus(cpus) for name, cpus in pins.items()}, remote=remote, host=machine,
                probed=tuple(probed), observers=observers, fence=fence_plan, created=created)


#: fio's verdict on each job text it checked in this process, by (fio, job text).
_verdicts: dict[tuple[str, str], str | None] = {}


def _fio_checks(judged: Mapping[str, JobSpec], workdir: Path, fio: str, strict: bool,
               fenced: bool) -> list[lint.Finding]:
    """fio's own check (``runner.local.check_job``) of each distinct job text, once per process (a
    workflow prepares a plan per step, mostly of texts fio has judged) and several at once (each
    check starts fio, ~0.1 s of CPU calibrating its clock: a sweep has dozens); inside the fence
    when ``fenced`` (parsing a job can open files). Raises
    ``SuiteError`` for the first text fio rejects, in plan order, when ``strict``; else returns
    the rejections as ``FIO`` error findings."""
    todo = [text for text in judged if (fio, text) not in _verdicts]
    if todo:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(todo), os.cpu_count() or 1)) as pool:
            verdicts = pool.map(lambda i: local.check_job(
                todo[i], workdir / str(i), fio,
                fence_mod.Fence(workdir / str(i), landlock=False) if fenced else None), range(len(todo)))
            _verdicts.update({(fio, text): verdict for text, verdict in zip(todo, verdicts, strict=True)})
    refused = []
    for text, spec in judged.items():
        problem = _verdicts[(fio, text)]
        if problem and strict:
            raise SuiteError(f"{spec.workload.origin} ({spec.workload.name}): fio rejects the job:\n{problem}",
                             hint="fio option names and values are used verbatim; see `fio --cmdhelp=OPTION`")
        if problem:
            refused.append(lint.Finding("FIO", lint.ERROR, f"fio rejects the job: {problem}",
                                        "fix the option fio names; see `fio --cmdhelp=OPTION`",
                                        "fio --parse-only", (spec.workload.name,)))
    return refused


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


def start(store: Store, plan_: Plan, options: RunOptions, label: str | None = None,
          tags: Mapping[str, str] | None = None, planned: Mapping[str, Any] | None = None) -> int:
    """Store the run and every planned invocation as pending; returns the run id.

    The plan's lint findings (warnings) become the run's warnings. ``planned`` is stored with
    every invocation (``PLANNED``: a workflow's crash-test phase)."""
    store.check_writable(len(plan_.items))
    spool_mod.make()
    warnings = [f.text() for f in plan_.findings]
    run_id = store.create_run(
        suite_name=plan_.suite.name, suite_text=plan_.suite.text, label=label, tags=tags,
        host=plan_.host, fio_version=plan_.host.fio_version, warnings=warnings,
        options={"keep_files": options.keep_files, "scratch": list(plan_.scratch), "source": plan_.suite.source,
                 "created": list(plan_.created),
                 "method": method_options(plan_),
                 "targets": {t.name: t.path for t in plan_.suite.targets},
                 "remote": remote_run.stored_options(plan_.suite.targets),
                 "remote_scratch": {name: remote_run.scratch(rt) for name, rt in plan_.remote.items()},
                 "observe": plan_.observers.stored(), "passes": plan_.suite.passes, "owner": owner_record(),
                 "tiers": tier_specs.stored(plan_.suite.tiers),
                 "preexisting": {t.path: sorted(scratch_mod.fio_files(t.path)) for t in plan_.suite.targets
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
    from ..store.database import PendingResult
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
            on_event: Callable[[JobEvent], None] = lambda e: None,
            checked: Mapping[str, RemoteTarget] | None = None) -> str:
    """Run every invocation of ``run_id`` that has not ended yet; returns the run's status.

    First the results the spool holds for the run (finished, but not stored: the database was away,
    or iolab was killed in the write) are stored, and work directories of jobs that never finished
    are removed (``spool``). Then the database must take a write, with room for the results to come
    (``Store.check_writable``, raises ``StoreError`` before any job). ``checked`` are the remote
    targets the run's plan checked (``Plan.remote``): their hosts are not probed again (a resume,
    without them, probes).

    Status: ``complete`` (all ok), ``partial`` (hosts of a remote target were lost mid-run; the
    other hosts' results are kept) or ``failed`` (some job failed; fio's message is stored).
    Remote targets pass their preflight before any job (raises ``HostError``).
    Raises ``Interrupted`` on Ctrl-C/SIGTERM after stopping fio; finished results are kept and
    the job in flight is marked ``interrupted`` so that ``--resume`` runs it again. Raises
    ``DatabaseUnavailable`` when the database stays away longer than its bound (``Store.guard``):
    the run stops, finished results stay in the spool, the message says how many and where.
    """
    run = store.get_run(run_id)
    spool = Spool(store.display_url, run_id, run.info.created_at)
    if spooled := spool.store_into(store, run):
        run = store.get_run(run_id)
        on_event(JobEvent("note", 0, 0, "", "", 0, detail=f"stored {spooled} finished result(s) the spool kept for "
                                                           f"run {run_id} ({spool.path})"))
    spool.sweep()
    todo = [r for r in run.results if r.status in ("pending", "running", "interrupted")]
    store.check_writable(len(todo))
    spool.check()
    try:
        remote = _remote_targets(run.info.options, todo, options, checked or {})
    except HostError as exc:
        store.finish_run(run_id, "failed")
        hint = f"{exc.hint}; then " if exc.hint else ""
        raise HostError(exc.message, hint=f"{hint}finish the run with: iolab run --resume {run_id}") from None
    # who runs it now: a reader sees it `interrupted` once this process is gone (owner.py)
    store.update_run(run_id, status="running", finished_at=None, options={**run.info.options, "owner": owner_record()})
    # the files this run created are its own, marked or not: a job killed before its files were marked
    options = replace(options, owned=(*options.owned, *run.info.options.get("created", ())))
    method = _JobMethod(store, run_id, run.info.options, options, spool)
    observers = Observers.from_options(run.info.options)
    keep_files = options.keep_files or run.info.options.get("keep_files", False)  # as asked at the start too
    try:
        told: list[_Events] = []
        with _sigterm_as_interrupt(), dbfaults.waits_told(store.guard, _waits_as_events(told)):
            for index, result in enumerate(todo):
                events = _Events(on_event, index, len(todo), result, _job_seconds(jobfile.parse(result.job_text)))
                told[:] = [events]
                _run_job(store, spool, result, events, options, method, observers, remote.get(result.target))
    except tuning.RestoreError:
        store.finish_run(run_id, "failed")  # host settings are not what they were: stop here
        raise
    except KeyboardInterrupt:
        _mark_stopped(store, run, keep_files)
        spool.sweep()
        raise Interrupted(f"run {run_id} interrupted; finished results are stored",
                          hint=f"finish it with: iolab run --resume {run_id}") from None
    except DatabaseUnavailable as exc:
        raise _stopped(store, spool, run, keep_files, exc) from exc
    scratch_mod.cleanup(store, run_id, keep_files)
    spool.sweep()
    final = store.get_run(run_id)
    statuses = {r.status for r in final.results}
    status = "complete" if statuses <= {"ok"} else ("partial" if statuses <= {"ok", "partial"} else "failed")
    store.finish_run(run_id, status)
    return status


def _mark_stopped(store: Store, run: Run, keep_files: bool) -> None:
    """A stopped run (Ctrl-C, or the database away past its bound) marked ``interrupted`` and its scratch
    files removed, if the database answers at once: a stop does not wait for it (``--resume`` finishes
    what is left)."""
    wait_s, store.guard.wait_s = store.guard.wait_s, 0.0
    try:
        store.finish_run(run.info.id, "interrupted")
        scratch_mod.cleanup(store, run.info.id, keep_files)
    except StoreError:
        if not keep_files:
            scratch_mod.remove_listed(run)  # as far as the run's stored options say, without the database
    finally:
        store.guard.wait_s = wait_s


def _stopped(store: Store, spool: Spool, run: Run, keep_files: bool, exc: DatabaseUnavailable) -> DatabaseUnavailable:
    """The error that stops run ``run`` when the database stayed away past its bound: the run is marked
    ``interrupted`` if the database answers one last, unwaited try, and scratch files are removed."""
    run_id = run.info.id
    _mark_stopped(store, run, keep_files)
    kept = len(spool.sealed())
    return DatabaseUnavailable(
        f"run {run_id} stopped: {exc.message}. {kept} finished result(s) not yet stored are kept in {spool.path}",
        f"when the database is back, store them and finish the run with: iolab run --resume {run_id}", exc.reason)


def _waits_as_events(told: list[_Events]) -> Callable[[dbfaults.Wait], None]:
    """The database's waits (``dbfaults.Wait``) as ``db`` events of the job in flight (``told[-1]``):
    ``detail`` says what is awaited, ``note`` (once it answers again) how long it took."""
    def on_wait(wait: dbfaults.Wait) -> None:
        if not told:
            return
        if wait.back:
            told[-1]("db", note=f"the results database answered again after {format_duration(wait.waited_s)}")
        else:
            told[-1]("db", detail=f"database away: waited {format_duration(wait.waited_s)} of "
                                  f"{format_duration(wait.bound_s)}, no new job starts ({wait.reason})")
    return on_wait


def _remote_targets(run_options: Mapping[str, Any], todo: list[Any], options: RunOptions,
                    checked: Mapping[str, RemoteTarget]) -> dict[str, Target]:
    """The remote targets with work left, each past its preflight (raises ``HostError``)."""
    out = {}
    for result in todo:
        target = remote_run.target_from_options(result.target, result.target_path, run_options)
        if target is not None and target.name not in out:
            preflight(target, options.fio, known=checked.get(target.name))
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


def _run_job(store: Store, spool: Spool, result: ResultRecord, events: _Events, options: RunOptions,
             method: _JobMethod, observers: Observers, target: Target | None) -> None:
    """One invocation, on a local target or on every host of a remote one (``target``), observed
    by the run's observers; its result is stored the moment it ends.

    fio works in the job's spool directory; its result is sealed there before the database is
    asked to store it, and the directory goes once the database has it (``spool``): when the
    database stays away past the bound (``dbfaults.DatabaseUnavailable``, raised) it stays for
    ``--resume``.

    A local job gets its tuning, preconditioning and drop_caches around it. A failing setting or
    fio failure fails the job and the run goes on; a safety refusal or a restore failure stops
    the run (raised), as does Ctrl-C (the job is stored ``interrupted``).
    """
    facts = _checked_facts(result, options, method) if target is None else None
    events("start")
    store.save_result(result.id, status="running", started_at=datetime.now(UTC), target_facts=facts)
    workdir = spool.workdir(result.id)
    try:
        end = _job_end(result, events, options, method, observers, target, facts, workdir)
    except BaseException:
        spool.remove(result.id)  # a job that did not finish has nothing to keep
        raise
    if end is None:
        spool.remove(result.id)
        return
    try:
        spool.seal(result.id, end)
    except OSError as exc:  # the state directory is full or gone: the database is then the only copy
        events("note", detail=f"the result could not be kept in the spool ({exc.strerror or exc}); storing it "
                              "without that copy")
    store.save_result(result.id, **end.saved())
    spool.remove(result.id)
    events("end", outcome=end.status, error=end.error)


def _job_end(result: ResultRecord, events: _Events, options: RunOptions, method: _JobMethod,
             observers: Observers, target: Target | None, facts: TargetFacts | None,
             workdir: Path) -> JobEnd | None:
    """Run the job in ``workdir``; how it ended, or None when a failure was stored already (a tuning
    or method step failed, the job failed and the run goes on). Raises as ``_run_job`` says."""
    store = method.store
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
                done, hosts = _run_fio_job(result, options, target, events, workdir, facts)
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
        return None
    if facts is not None and facts.kind == "missing":  # fio has laid the scratch file out: describe it
        facts = targets.inspect(facts.path)
    extra.update(_with_exporter_facts(hosts, observers))
    if usage:
        extra["observed"] = to_jsonable(list(usage))
    return JobEnd(status=done.status, command=shlex.join(done.command), started_at=done.started_at,
                  ended_at=done.ended_at, error=done.error, report=done.report, raw_json=done.raw_json,
                  target_facts=facts, extra=extra, series=done.time_series, observations=samples or ())


def _writes(result: ResultRecord, method: _JobMethod | None) -> bool:
    """Whether the job (or, with ``method``, its preconditioning) writes."""
    jobs = jobfile.effective_jobs(jobfile.parse(result.job_text))
    return (method is not None and method.writes) or any(safety.writes(o) for _, o in jobs)


def _checked_facts(result: ResultRecord, options: RunOptions, method: _JobMethod) -> TargetFacts | None:
    """A local target's facts, checked again by the destructive-write guard when the job (or
    its preconditioning) writes a block device: it may have changed since planning."""
    facts = targets.inspect(result.target_path) if result.target_path else None
    if facts is not None and facts.kind == "block" and _writes(result, method):
        safety.check_block_write(facts, options.destroy)
    return facts


def _run_fio_job(result: ResultRecord, options: RunOptions, target: Target | None, events: _Events,
                 workdir: Path, facts: TargetFacts | None = None) -> tuple[local.Outcome, dict[str, Any]]:
    """fio on this machine, or fio's client driving every host of ``target``: how it ran, and what
    goes into ``extra``: a remote target's per-host records (``remote.jobs.RemoteOutcome.extra``), the
    fence a local job ran in, a crash test phase's record (``crashphase``: its options and files around
    fio, and its verdict on fio's status). fio works in ``workdir`` (the job's spool directory, which
    the caller removes)."""
    phase = crashphase.from_extra(result.extra)
    if target is None:
        prefixes = {crashphase.LOCAL: crashphase.LOCAL}
        crashphase.place_states(phase, workdir, prefixes)
        # the target's facts of this job, not probed again: blkid's reads after drop_caches would
        # warm the page cache the job is about to measure
        fence, checked = guard.job_fence(result.job_text, result.target_path, options.destroy, workdir,
                                         fenced=options.fence, allow_exec=options.allow_exec,
                                         where=f"{result.target} / {result.workload}",
                                         facts={facts.path: facts} if facts is not None else None,
                                         owned=options.owned)
        named = guard.planned_paths(result.job_text, result.target_path, workdir)
        files_before = set(guard.not_devices(named))
        done = local.run(result.job_text, workdir, on_status=lambda s: events("status", status=s), fio=options.fio,
                         cwd=Path.cwd(), timeout_s=_timeout(events.expected_s),
                         extra_args=crashphase.fio_args(phase, workdir, local=True), fence=fence)
        guard.mark_written(checked)
        done = local.not_a_device(done, [p for p in guard.not_devices(named) if p not in files_before])
        messages, hosts = (workdir / "fio.stderr").read_text(errors="replace"), [crashphase.LOCAL]
        extra: dict[str, Any] = {"fence": fence.record()} if fence is not None else {}
    else:
        remote = remote_run.run_job(
            result.job_text, target, workdir, options.fio, options.destroy,
            timeout_s=remote_run.time_bound_s(jobfile.parse(result.job_text), TIMEOUT_SLACK_S),
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


def _run_fio(job_text: str, options: RunOptions, spool: Spool, target_path: str | None) -> local.Outcome:
    """fio for a method step (preconditioning: a fill or a round on the target), fenced like every job,
    in the run's spool (removed by ``--resume`` after a kill)."""
    workdir = spool.workdir("precondition")
    try:
        fence, checked = guard.job_fence(job_text, target_path, options.destroy, workdir, fenced=options.fence,
                                         allow_exec=options.allow_exec, where="precondition", writes=True,
                                         owned=options.owned)
        done = local.run(job_text, workdir, fio=options.fio, cwd=Path.cwd(), fence=fence)
        guard.mark_written(checked)
        return done
    finally:
        spool.remove("precondition")


class _JobMethod:
    """The run's stored method settings (``method_options``), applied around each job.

    A region's preconditioning fill is done once per run: each finished fill is stored with the
    run's options (``filled``) the moment it ends, so ``--resume`` after a kill does not fill
    again what was filled before.
    """

    def __init__(self, store: Store, run_id: int, run_options: Mapping[str, Any], options: RunOptions,
                 spool: Spool) -> None:
        self.store, self.run_id, self.run_options, self.spool = store, run_id, dict(run_options), spool
        self.stored = run_options.get("method") or {}
        self.options = options
        pre = self.stored.get("precondition")
        self.precondition = Precondition(**pre) if pre else None
        self.writes = self.precondition is not None
        self.filled: set[tuple[str, str]] = {(p, w) for p, w in run_options.get("filled", ())}
        self._region: tuple[str, str] | None = None
        self.tiers = tier_specs.from_options(run_options)

    def tune(self, workload: str) -> dict[str, str]:
        return dict((self.stored.get("tune") or {}).get(workload) or {})

    def counted_devices(self, facts: TargetFacts | None, remote: bool) -> dict[str, str]:
        """The devices on this machine whose counters are read around the job (``tiers``): tier
        name -> kernel name of each local tier, and the target's own device (``target``) when it is
        a device-mapper or bcache device, which may be a cache with counters of its own."""
        out = {t.name: t.kernel_name for t in tier_specs.local_tiers(self.tiers, remote)}
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
            out["drop_caches"] = method_mod.drop_caches(scratch_mod.target_files(result, kind))
            if not out["drop_caches"]["verified"]:
                note("drop_caches: the target's pages are still cached after dropping")
        return out

    def _fio(self, label: str, job_text: str) -> FioReport:
        outcome = _run_fio(job_text, self.options, self.spool,
                           self._region[0] if self._region is not None else None)
        if outcome.status != "ok" or outcome.report is None:
            raise IolabError(f"precondition {label} failed: {outcome.error or 'no fio report'}")
        if label == "fill" and self._region is not None:
            self.filled.add(self._region)
            self.run_options["filled"] = sorted(self.filled)
            self.store.update_run(self.run_id, options=self.run_options)
        return outcome.report
