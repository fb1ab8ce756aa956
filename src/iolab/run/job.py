"""One invocation of a stored run: its runner chosen, the method around it, fio run and observed,
its result stored the moment it ends (``run_job``), and the events that tell its progress.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analyze import tiers as tiers_mod
from ..check import safety
from ..describe.spec import Target
from ..errors import IolabError, SafetyError
from ..facts import targets
from ..model import ResultRecord, TargetFacts, to_jsonable
from ..observe.watch import Observers
from ..outputs import OutputError
from ..runner.status import Status
from . import crashphase, tuning
from .plan import RunOptions, device_of
from .precondition import JobMethod
from .runners import JobRunner, LocalJob, RemoteJob, writes_data
from .spool import JobEnd, Spool

if TYPE_CHECKING:
    from ..store.database import Store

#: What a plan says about an invocation beyond its job, kept in the result's ``extra``: its warm-up
#: pass (1..N, ``describe.spec.PlannedJob.pass_index``), a crash test's phase (``crashphase.Phase``)
#: and what a replay's trace took (``workflows.capture.plan.ReplayPlan.planned``).
PLANNED = ("pass", "crash", "replay")


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
class Events:
    """``JobEvent``s of one invocation, for ``on_event``."""

    on_event: Callable[[JobEvent], None]
    index: int
    total: int
    result: ResultRecord
    expected_s: float | None

    def __call__(self, kind: str, **fields: Any) -> None:
        self.on_event(JobEvent(kind, self.index, self.total, self.result.target, self.result.workload,
                               self.result.repeat, self.expected_s, **fields))


def run_job(store: Store, spool: Spool, result: ResultRecord, events: Events, options: RunOptions,
            method: JobMethod, observers: Observers, target: Target | None) -> None:
    """One invocation, on a local target or on every host of a remote one (``target``), observed
    by the run's observers; its result is stored the moment it ends.

    fio works in the job's spool directory; its result is sealed there before the database is
    asked to store it, and the directory goes once the database has it (``spool``): when the
    database stays away past the bound (``store.faults.DatabaseUnavailable``, raised) it stays for
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
    except OutputError as exc:  # the state directory is full or gone, a name planted: the database is the only copy
        events("note", detail=f"the result could not be kept in the spool ({exc.message}); storing it without that "
                              "copy")
    store.save_result(result.id, **end.saved())
    spool.remove(result.id)
    events("end", outcome=end.status, error=end.error)


def _job_end(result: ResultRecord, events: Events, options: RunOptions, method: JobMethod,
             observers: Observers, target: Target | None, facts: TargetFacts | None,
             workdir: Path) -> JobEnd | None:
    """Run the job in ``workdir``; how it ended, or None when a failure was stored already (a tuning
    or method step failed, the job failed and the run goes on). Raises as ``run_job`` says."""
    store = method.store
    extra: dict[str, Any] = {k: v for k, v in (result.extra or {}).items() if k in PLANNED}
    failed: dict[str, Any] = {"target_facts": facts, "extra": extra}
    tune = method.tune(result.workload) if target is None else {}
    try:
        with tuning.applied(tune, device_of(facts)) as in_force:
            if tune and result.target_path:  # the facts stored with the result show the values in force
                facts = failed["target_facts"] = targets.inspect(result.target_path)
            extra.update(method.record(result, in_force))
            extra.update(method.before(result, facts, lambda text: events("note", detail=text)))
            counted = method.counted_devices(facts, target is not None)
            before = tiers_mod.snapshot(counted.values()) if counted else None
            with observers.watch(result.target) as watch:
                cpu_before = os.times()
                done = _runner(result, options, target, facts, events.expected_s).run(result.job_text, workdir, events)
                cpu_after = os.times()
                samples, usage = watch.finish(done.report, done.started_at, done.ended_at, done.measured_start_ms)
            extra["iolab_cpu_s"] = own_cpu_s(cpu_before, cpu_after)
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
    extra.update(_with_exporter_facts(done.extra, observers))
    if usage:
        extra["observed"] = to_jsonable(list(usage))
    return JobEnd(status=done.status, command=shlex.join(done.command), started_at=done.started_at,
                  ended_at=done.ended_at, error=done.error, report=done.report, raw_json=done.raw_json,
                  target_facts=facts, extra=extra, series=done.time_series, observations=samples or ())


def own_cpu_s(before: os.times_result, after: os.times_result) -> float:
    """CPU seconds (user + system) iolab's process used between ``before`` and ``after`` (every
    thread: progress, observers, the store), stored with a result as ``extra["iolab_cpu_s"]``: with
    fio's own (its report's ``usr_cpu``/``sys_cpu``: ``fio.merge.jobs_cpu_s``), the replayer's CPU.
    Not the children's times: fio in its fence runs in a pid namespace of bubblewrap's, whose CPU
    does not reach iolab's (measured: a 2 s fio job's 1.3 CPU-s showed as 0 through bwrap --unshare-pid)."""
    return round((after.user + after.system) - (before.user + before.system), 3)


def _checked_facts(result: ResultRecord, options: RunOptions, method: JobMethod) -> TargetFacts | None:
    """A local target's facts, checked again by the destructive-write guard when the job (or
    its preconditioning) writes a block device: it may have changed since planning."""
    facts = targets.inspect(result.target_path) if result.target_path else None
    if facts is not None and facts.kind == "block" and (method.writes or writes_data(result.job_text)):
        safety.check_block_write(facts, options.destroy)
    return facts


def _runner(result: ResultRecord, options: RunOptions, target: Target | None, facts: TargetFacts | None,
            expected_s: float | None) -> JobRunner:
    """The job's runner: fio here in its fence (``facts``: the target's as this job found them), or
    fio's client on every host of ``target``; wrapped in its crash-test phase when it is one
    (``crashphase.CrashPhase``)."""
    runner: JobRunner = LocalJob(
        fio=options.fio, destroy=options.destroy, fenced=options.fence, allow_exec=options.allow_exec,
        target_path=result.target_path, where=f"{result.target} / {result.workload}", facts=facts,
        expected_s=expected_s, run_key=options.run,
    ) if target is None else RemoteJob(target, fio=options.fio, destroy=options.destroy, fenced=options.fence)
    phase = crashphase.from_extra(result.extra)
    return runner if phase is None else crashphase.CrashPhase(runner, phase)


def _with_exporter_facts(extra: Mapping[str, Any], observers: Observers) -> dict[str, Any]:
    """A remote result's per-host records with the facts each host's exporter gave where ssh
    gave none (``run.remote.HostRecord.facts``)."""
    if not extra.get("hosts"):
        return dict(extra)
    found = observers.facts()
    hosts = [{**r, "facts": to_jsonable(found[r["host"]].host)} if r.get("facts") is None and r["host"] in found
             else r for r in extra["hosts"]]
    return {**extra, "hosts": hosts}
