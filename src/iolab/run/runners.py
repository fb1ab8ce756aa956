"""One job's fio, one runner per transport, behind one protocol (``JobRunner``).

``LocalJob`` runs fio on this machine in the job's fence (``check.guard.fenced_job``, built right
before fio starts from what the guard checked, its files staged). ``RemoteJob`` has fio's client drive every host of
a remote target at once (``run.remote.run_job``). Both return the same ``runner.outcome.Outcome``,
its ``extra`` holding what the run stores beside fio's report (the fence a local job ran in, each
host's record). A crash test's phase wraps either (``run.crashphase.CrashPhase``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from ..check import guard, safety
from ..describe.spec import Target
from ..fio import jobfile
from ..model import TargetFacts
from ..runner import local
from ..runner.outcome import Outcome
from . import remote as remote_run

#: Seconds added to a job's expected duration before it counts as hung (file layout, startup).
TIMEOUT_SLACK_S = 300.0
#: The prefix fio gives the state files of a job it runs itself (``verify_save_state()``, ``verify.c``),
#: which is also how iolab names this machine among a job's hosts.
LOCAL = "local"


class Tell(Protocol):
    """Where a runner reports a job's progress: ``tell("status", status=…, host=…, note=…)``
    (``run.job.JobEvent`` fields)."""

    def __call__(self, kind: str, **fields: Any) -> None: ...


class JobRunner(Protocol):
    """fio for one job on one transport.

    ``here`` is True when fio itself runs on this machine (its state files land in the work
    directory, ``--aux-path``); ``hosts`` are the labels of the hosts the job runs on.
    ``run`` runs ``job_text`` with fio working in ``workdir`` (created, removed by the caller):
    ``extra_args`` go on fio's command line, ``before_start`` is called with ``Outcome.prefixes``
    right before fio starts (to put files there that fio will read), progress goes to ``tell``.
    Raises ``SafetyError`` when the job may not run after all (a device changed since planning),
    ``FioNotFound``/``FioError``; ``KeyboardInterrupt`` after stopping fio.
    """

    here: bool
    hosts: tuple[str, ...]

    def run(self, job_text: str, workdir: Path, tell: Tell | None = None, *, extra_args: Sequence[str] = (),
            before_start: Callable[[Mapping[str, str]], None] | None = None) -> Outcome: ...


def _quiet(kind: str, **fields: Any) -> None:
    return None


class LocalJob:
    """fio on this machine, fenced (``check.guard.fenced_job``; unfenced only with ``--no-fence``).

    ``target_path`` is the job's target (None: a job file's own files); ``run_key`` the run's key
    (``run.plan.RunOptions.run``); ``facts`` the target's facts
    as this job found them (not probed again: blkid's reads after drop_caches would warm the page
    cache the job is about to measure); ``expected_s`` how long fio should take (None: unknown, no
    time bound). ``where`` names the job in refusals.
    """

    here: bool = True
    hosts: tuple[str, ...] = (LOCAL,)

    def __init__(self, *, fio: str, destroy: Collection[str], fenced: bool, allow_exec: bool,
                 target_path: str | None, where: str, run_key: str | None = None,
                 facts: TargetFacts | None = None, expected_s: float | None = None) -> None:
        self.fio, self.destroy, self.fenced, self.allow_exec = fio, destroy, fenced, allow_exec
        self.target_path, self.where, self.run_key, self.facts = target_path, where, run_key, facts
        self.expected_s = expected_s

    def run(self, job_text: str, workdir: Path, tell: Tell | None = None, *, extra_args: Sequence[str] = (),
            before_start: Callable[[Mapping[str, str]], None] | None = None) -> Outcome:
        tell = tell or _quiet
        prefixes = {LOCAL: LOCAL}
        if before_start is not None:  # before the fence is built: what it puts there is bound as it is
            before_start(prefixes)
        named = guard.planned_paths(job_text, self.target_path, workdir)
        files_before = set(guard.not_devices(named))
        with guard.fenced_job(job_text, self.target_path, self.destroy, workdir, fenced=self.fenced,
                              allow_exec=self.allow_exec, where=self.where,
                              facts={self.facts.path: self.facts} if self.facts is not None else None,
                              run=self.run_key) as job:
            done = local.run(job_text, workdir, on_status=lambda s: tell("status", status=s), fio=self.fio,
                             cwd=Path.cwd(), timeout_s=timeout_s(self.expected_s), extra_args=extra_args,
                             fence=job.fence)
        for note in job.notes:
            tell("note", detail=note)
        done = local.not_a_device(done, [p for p in guard.not_devices(named) if p not in files_before])
        return replace(done, prefixes=prefixes, extra={"fence": job.fence.record()} if job.fence is not None else {})


class RemoteJob:
    """fio's client driving every host of ``target`` at once (``run.remote.run_job``): its time bound
    from the job's own runtime (``run.remote.time_bound_s``), each host's part in ``extra["hosts"]``;
    ``ssh://`` hosts' servers fenced unless not ``fenced`` (``--no-fence``)."""

    here: bool = False

    def __init__(self, target: Target, *, fio: str, destroy: Collection[str], fenced: bool = True) -> None:
        self.target, self.fio, self.destroy, self.fenced = target, fio, destroy, fenced
        self.hosts: tuple[str, ...] = tuple(h.label for h in target.hosts)

    def run(self, job_text: str, workdir: Path, tell: Tell | None = None, *, extra_args: Sequence[str] = (),
            before_start: Callable[[Mapping[str, str]], None] | None = None) -> Outcome:
        tell = tell or _quiet
        return remote_run.run_job(
            job_text, self.target, workdir, self.fio, self.destroy,
            timeout_s=remote_run.time_bound_s(jobfile.parse(job_text), TIMEOUT_SLACK_S),
            on_status=lambda h: tell("status", status=h.status, host=h.host, note=h.message),
            extra_args=extra_args, before_start=before_start, fenced=self.fenced)


def writes_data(job_text: str) -> bool:
    """Whether any job of ``job_text`` writes or trims (``check.safety.writes``, global options applied)."""
    return any(safety.writes(o) for _, o in jobfile.effective_jobs(jobfile.parse(job_text)))


def timeout_s(expected_s: float | None) -> float | None:
    """A local job's time bound: twice its expected duration plus ``TIMEOUT_SLACK_S``; None when unknown."""
    return None if expected_s is None else expected_s * 2 + TIMEOUT_SLACK_S
