"""Store a Plan as a run and run it job by job, every result stored the moment its job ends.

``start`` stores the run with every planned invocation as ``pending`` (``extend`` adds a later plan's
to it: a workflow's next probe); ``execute`` runs whatever is still pending (so ``--resume`` is the
same call on an old run), one ``run.job.run_job`` each, and removes the scratch files
(``run.scratch``) after. Plans come from ``run.plan.prepare``; ``run.pipeline`` composes the steps.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .. import interrupts
from ..check import plan_checks, safety
from ..check.acknowledge import stored_text
from ..check.remote import RemoteTarget, preflight
from ..describe import tiers as tier_specs
from ..describe.spec import Target
from ..errors import HostError, Interrupted, SafetyError, StoreError
from ..facts import targets
from ..facts.owner import owner_record
from ..fio import jobfile
from ..model import ResultRecord, Run
from ..observe.watch import Observers
from ..runner import fence as fence_mod
from ..runner import marks, stage
from ..store import faults as dbfaults
from ..store.faults import DatabaseUnavailable
from ..units import format_duration
from . import remote as remote_run
from . import scratch as scratch_mod
from . import spool as spool_mod
from . import tuning
from .job import Events, JobEvent, run_job
from .plan import Plan, RunOptions, job_seconds, method_options
from .precondition import JobMethod
from .runners import writes_data
from .spool import Spool

if TYPE_CHECKING:  # the store (SQLAlchemy) is imported while the plan's checks run (``cli.import_store_meanwhile``)
    from ..store.database import Store
    from ..store.records import PendingResult


def start(store: Store, plan_: Plan, options: RunOptions, label: str | None = None,
          tags: Mapping[str, str] | None = None, planned: Mapping[str, Any] | None = None,
          warnings: Sequence[str] = ()) -> int:
    """Store the run and every planned invocation as pending; returns the run id.

    The run's warnings are ``warnings`` (what the caller knows of the run: a replay's caveats), then
    the plan's lint findings. ``planned`` is stored with every invocation (``PLANNED``: a workflow's
    crash-test phase)."""
    store.check_writable(len(plan_.items))
    spool_mod.make()
    warnings = [*warnings, *(stored_text(f) for f in plan_.findings)]
    run_id = store.create_run(
        suite_name=plan_.suite.name, suite_text=plan_.suite.text, label=label, tags=tags,
        host=plan_.host, fio_version=plan_.host.fio_version, warnings=warnings,
        options={"keep_files": options.keep_files, "scratch": list(plan_.scratch), "source": plan_.suite.source,
                 "destroy": list(options.destroy),
                 "created": list(plan_.created),
                 "method": method_options(plan_),
                 "targets": {t.name: t.path for t in plan_.suite.targets},
                 "remote": remote_run.stored_options(plan_.suite.targets),
                 "remote_scratch": {name: remote_run.scratch(rt) for name, rt in plan_.remote.items()},
                 "observe": plan_.observers.stored(), "passes": plan_.suite.passes, "owner": owner_record(),
                 "tiers": tier_specs.stored(plan_.suite.tiers), "set": dict(plan_.suite.overrides),
                 "preexisting": {t.path: sorted(scratch_mod.fio_files(t.path)) for t in plan_.suite.targets
                                 if t.path and t.name in plan_.facts and plan_.facts[t.name].kind == "directory"}},
    )
    store.add_pending(run_id, _pending(plan_, 0, planned=planned))
    return run_id


def extend(store: Store, run_id: int, plan_: Plan, first_repeat: int = 0,
           planned: Mapping[str, Any] | None = None) -> int:
    """Add a plan's invocations to the stored run ``run_id`` as pending, after its last, for a
    workflow that decides what to run next from what it has measured (``workflows.prober``); the next
    ``execute`` runs them. Their repetitions count from ``first_repeat`` (a workflow that repeats
    workloads in rounds of its own); ``planned`` is stored with each (as for ``start``). The plan's
    tuning joins the run's stored method settings. Returns the first added invocation's ``seq``."""
    run = store.get_run(run_id)
    method = dict(run.info.options.get("method") or {})
    method["tune"] = {**(method.get("tune") or {}), **method_options(plan_)["tune"]}
    store.update_run(run_id, options={**run.info.options, "method": method})
    first = max((r.seq for r in run.results), default=-1) + 1
    store.add_pending(run_id, _pending(plan_, first, first_repeat, planned))
    return first


def _pending(plan_: Plan, first_seq: int, first_repeat: int = 0,
             planned: Mapping[str, Any] | None = None) -> list[PendingResult]:
    from ..store.records import PendingResult
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
            checked: Mapping[str, RemoteTarget] | None = None, resuming: bool = False) -> str:
    """Run every invocation of ``run_id`` that has not ended yet; returns the run's status.

    First the results the spool holds for the run (finished, but not stored: the database was away,
    or iolab was killed in the write) are stored, and work directories of jobs that never finished
    are removed (``spool``). Then the database must take a write, with room for the results to come
    (``Store.check_writable``, raises ``StoreError`` before any job). ``checked`` are the remote
    targets the run's plan checked (``Plan.remote``): their hosts are not probed again (a resume,
    without them, probes). ``resuming``: the run's plan was checked by another process, so every job
    left is checked again as a plan's are (``check_remaining``) before any starts.

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
    # the run's own marks name it (runner.marks): its `writing` marks count for it, a --resume after a kill
    options = replace(options, run=marks.run_key(store.display_url, run_id, run.info.created_at))
    stage.sweep()  # what a killed iolab left staged is put back before anything is checked
    if resuming:
        check_remaining(run, todo, options)
    # who runs it now: a reader sees it `interrupted` once this process is gone (owner.py)
    store.update_run(run_id, status="running", finished_at=None, options={**run.info.options, "owner": owner_record()})
    method = JobMethod(store, run_id, run.info.options, options, spool)
    observers = Observers.from_options(run.info.options)
    keep_files = options.keep_files or run.info.options.get("keep_files", False)  # as asked at the start too
    try:
        told: list[Events] = []
        with _sigterm_as_interrupt(), dbfaults.waits_told(store.guard, _waits_as_events(told)):
            for index, result in enumerate(todo):
                events = Events(on_event, index, len(todo), result, job_seconds(jobfile.parse(result.job_text)))
                told[:] = [events]
                run_job(store, spool, result, events, options, method, observers, remote.get(result.target))
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


def check_remaining(run: Run, todo: Sequence[ResultRecord], options: RunOptions) -> None:
    """The jobs left of ``run`` (``todo``) checked as a plan's are, before any starts: a block device
    they write as ``safety.check_block_write`` does, every job by the static guard and the room its
    files need (``check.plan_checks.check_jobs``), and the fence a writing job needs. Remote targets'
    hosts are checked by their preflight. Raises ``SafetyError``, its hint naming the ``--destroy`` the
    run was started with."""
    local = [r for r in todo if remote_run.target_from_options(r.target, r.target_path, run.info.options) is None]
    facts = {p: targets.inspect(p) for p in {r.target_path for r in local if r.target_path}}
    precondition = bool((run.info.options.get("method") or {}).get("precondition"))
    writing = [r for r in local if precondition or writes_data(r.job_text)]
    try:
        for r in writing:
            if r.target_path and facts[r.target_path].kind == "block":
                safety.check_block_write(facts[r.target_path], options.destroy)
        plan_checks.check_jobs([plan_checks.LocalJob(r.job_text, r.target_path, f"{r.target} / {r.workload}",
                                                     {r.target_path: facts[r.target_path]} if r.target_path else {})
                                for r in local], options.destroy, options.allow_exec, options.fence,
                               writes=precondition, run=options.run)
        if writing and options.fence:
            fence_mod.require()
    except SafetyError as exc:
        given = run.info.options.get("destroy") or []
        was = f"the interrupted run was started with {' '.join(f'--destroy {d}' for d in given)}" if given else \
            "the interrupted run was started without --destroy"
        raise SafetyError(exc.message, hint=f"{exc.hint}; {was}" if exc.hint else was) from None


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
            # as far as the run's stored options say, without the database
            scratch_mod.remove_listed(run, marks.run_key(store.display_url, run.info.id, run.info.created_at))
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


def _waits_as_events(told: list[Events]) -> Callable[[dbfaults.Wait], None]:
    """The database's waits (``store.faults.Wait``) as ``db`` events of the job in flight (``told[-1]``):
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
            preflight(target, options.fio, known=checked.get(target.name), fenced=options.fence)
            out[target.name] = target
    return out


