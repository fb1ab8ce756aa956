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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import host, jobfile, safety, targets, units
from .errors import Interrupted, SuiteError
from .model import TargetFacts
from .runner import local
from .runner.status import Status
from .store import PendingResult, Store
from .suite import JobSpec, PlannedJob, Suite, plan, render_job

#: Seconds added to a job's expected duration before it counts as hung (file layout, startup).
TIMEOUT_SLACK_S = 300.0


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
    """A checked, rendered suite. ``scratch`` lists files iolab creates and removes afterwards."""

    suite: Suite
    items: tuple[PlanItem, ...]
    facts: Mapping[str, TargetFacts]
    scratch: tuple[str, ...] = ()

    @property
    def estimate_s(self) -> float | None:
        """Sum of the jobs' expected durations; None when any is unknown."""
        times = [i.expected_s for i in self.items]
        return None if any(t is None for t in times) else float(sum(times))  # type: ignore[misc]


@dataclass(frozen=True)
class JobEvent:
    """Progress of a run, for the CLI to show. ``kind`` is ``start``, ``status`` or ``end``.

    ``index``/``total`` count the invocations this call runs (not the whole plan when resuming).
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


@dataclass(frozen=True)
class RunOptions:
    """How to run: ``destroy`` names block devices the user allows iolab to overwrite."""

    destroy: Collection[str] = ()
    keep_files: bool = False
    fio: str = "fio"
    extra: Mapping[str, Any] = field(default_factory=dict)


def expected_seconds(options: Mapping[str, str | None]) -> float | None:
    """How long fio will run a job: ``ramp_time + runtime`` when ``time_based`` (HOWTO
    ``time_based``); ``runtime`` is only an upper bound otherwise, so None."""
    time_based = "time_based" in options and options["time_based"] not in ("0",)
    runtime = options.get("runtime") or options.get("timeout")
    if not time_based or not runtime:
        return None
    ramp = options.get("ramp_time") or "0"
    return (units.parse_duration_us(runtime) + units.parse_duration_us(ramp)) / 1e6


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
    from dataclasses import replace
    resolved = tuple(
        replace(t, path=os.path.abspath(os.path.expanduser(t.path))) if t.path else t for t in suite.targets
    )
    return replace(suite, targets=resolved)


def _needed_bytes(specs: list[tuple[JobSpec, jobfile.Section]], kind: str) -> int:
    """Space a target needs: a file target's size (the largest job's), a directory's files
    (``size × numjobs × nrfiles`` per distinct job, as fio lays them out)."""
    needed = 0
    for _spec, section in specs:
        opts = dict(section.options)
        size_text = opts.get("size") or "0"
        if size_text.endswith("%"):
            continue
        size = units.parse_size(size_text)
        if kind == "directory":
            needed += size * int(opts.get("numjobs") or 1) * int(opts.get("nrfiles") or 1)
        else:
            needed = max(needed, size)
    return needed


def prepare(suite: Suite, options: RunOptions, repeat: int | None = None, workdir: Path | None = None) -> Plan:
    """Inspect targets, render and check every job, apply safety rules; nothing is written.

    Raises ``SafetyError`` (a destructive write, too little space), ``SuiteError`` (fio rejects
    a job: the message names the workload and quotes fio), ``FioNotFound``.
    """
    suite = _resolve(suite)
    facts = {t.name: targets.inspect(t.path) for t in suite.targets if t.path}
    items: list[PlanItem] = []
    checked: dict[str, None] = {}
    with tempfile.TemporaryDirectory(prefix="iolab-check-") as tmp:
        for job in plan(suite, repeat):
            spec = job.spec
            kind = facts[spec.target.name].kind if spec.target.path else None
            text = render_job(spec, kind)
            if text not in checked:
                problem = local.check_job(text, Path(tmp), options.fio)
                if problem:
                    raise SuiteError(f"{spec.workload.origin} ({spec.workload.name}): fio rejects the job:\n{problem}",
                                     hint="fio option names and values are used verbatim; see `fio --cmdhelp=OPTION`")
                checked[text] = None
            params = jobfile.workload_params(spec.sections)
            effective = [opts for _, opts in jobfile.effective_jobs(spec.sections)]
            items.append(PlanItem(
                job=job, kind=kind, job_text=text, params=params, job_hash=jobfile.params_hash(params),
                expected_s=_job_seconds(spec.sections), writes=any(safety.writes(o) for o in effective),
            ))
    scratch = _check_targets(suite, items, facts, options)
    return Plan(suite=suite, items=tuple(items), facts=facts, scratch=scratch)


def _check_targets(suite: Suite, items: list[PlanItem], facts: Mapping[str, TargetFacts],
                   options: RunOptions) -> tuple[str, ...]:
    scratch = []
    for target in suite.targets:
        mine = [i for i in items if i.job.spec.target.name == target.name]
        paths = [target.path] if target.path else sorted({p for i in mine for p in _job_paths(i.job.spec.sections)})
        for path in paths:
            f = facts[target.name] if path == target.path else targets.inspect(path)
            if f.kind == "block" and any(i.writes for i in mine):
                safety.check_block_write(f, options.destroy)
        f = facts.get(target.name)
        if f is None or f.kind == "block":
            continue
        sections = [(i.job.spec, s) for i in mine for s in jobfile.parse(i.job_text) if not s.is_global]
        safety.check_free_space(f, _needed_bytes(sections, f.kind))
        if f.kind == "missing" and target.path:
            scratch.append(target.path)
    return tuple(scratch)


def start(store: Store, plan_: Plan, options: RunOptions, label: str | None = None,
          tags: Mapping[str, str] | None = None) -> int:
    """Store the run and every planned invocation as pending; returns the run id."""
    fio_version = local.fio_version(options.fio)
    run_id = store.create_run(
        suite_name=plan_.suite.name, suite_text=plan_.suite.text, label=label, tags=tags,
        host=host.host_facts(fio_version), fio_version=fio_version,
        options={"keep_files": options.keep_files, "scratch": list(plan_.scratch), "source": plan_.suite.source,
                 "targets": {t.name: t.path for t in plan_.suite.targets},
                 "preexisting": {t.path: sorted(_fio_files(t.path)) for t in plan_.suite.targets
                                 if t.path and plan_.facts[t.name].kind == "directory"},
                 **options.extra},
    )
    store.add_pending(run_id, (
        PendingResult(seq=i.job.seq, target=i.job.spec.target.name, target_path=i.job.spec.target.path,
                      workload=i.job.spec.workload.name, repeat=i.job.repeat, job_text=i.job_text,
                      job_hash=i.job_hash, params=i.params)
        for i in plan_.items
    ))
    return run_id


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a run like Ctrl-C does: fio ends cleanly, finished results stay."""
    def handler(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def execute(store: Store, run_id: int, options: RunOptions,
            on_event: Callable[[JobEvent], None] = lambda e: None) -> str:
    """Run every invocation of ``run_id`` that has not ended yet; returns the run's status.

    Status: ``complete`` (all ok) or ``failed`` (some job failed; fio's message is stored).
    Raises ``Interrupted`` on Ctrl-C/SIGTERM after stopping fio; finished results are kept and
    the job in flight is marked ``interrupted`` so that ``--resume`` runs it again.
    """
    run = store.get_run(run_id)
    todo = [r for r in run.results if r.status in ("pending", "running", "interrupted")]
    store.update_run(run_id, status="running", finished_at=None)
    try:
        with _sigterm_as_interrupt():
            for index, result in enumerate(todo):
                _run_one(store, result, index, len(todo), options, on_event)
    except KeyboardInterrupt:
        store.finish_run(run_id, "interrupted")
        _cleanup(run.info.options, run.results, options.keep_files)
        raise Interrupted(f"run {run_id} interrupted; finished results are stored",
                          hint=f"finish it with: iolab run --resume {run_id}") from None
    _cleanup(run.info.options, run.results, options.keep_files or run.info.options.get("keep_files", False))
    final = store.get_run(run_id)
    status = "failed" if any(r.status != "ok" for r in final.results) else "complete"
    store.finish_run(run_id, status)
    return status


def _run_one(store: Store, result: Any, index: int, total: int, options: RunOptions,
             on_event: Callable[[JobEvent], None]) -> None:
    sections = jobfile.parse(result.job_text)
    expected = _job_seconds(sections)
    facts = targets.inspect(result.target_path) if result.target_path else None
    if facts is not None and facts.kind == "block" and any(
        safety.writes(o) for _, o in jobfile.effective_jobs(sections)
    ):
        safety.check_block_write(facts, options.destroy)  # again: the device may have changed since planning
    event = {"index": index, "total": total, "target": result.target, "workload": result.workload,
             "repeat": result.repeat, "expected_s": expected}
    on_event(JobEvent("start", **event))
    store.save_result(result.id, status="running", started_at=datetime.now(UTC), target_facts=facts)
    workdir = Path(tempfile.mkdtemp(prefix="iolab-job-"))
    try:
        outcome = local.run(
            result.job_text, workdir, on_status=lambda s: on_event(JobEvent("status", status=s, **event)),
            fio=options.fio, cwd=Path.cwd(),
            timeout_s=None if expected is None else expected * 2 + TIMEOUT_SLACK_S,
        )
    except KeyboardInterrupt:
        store.save_result(result.id, status="interrupted", target_facts=facts, ended_at=datetime.now(UTC),
                          error="interrupted by the user")
        raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    store.save_result(
        result.id, status=outcome.status, command=shlex.join(outcome.command), started_at=outcome.started_at,
        ended_at=outcome.ended_at, error=outcome.error, report=outcome.report, raw_json=outcome.raw_json,
        target_facts=facts, series=outcome.time_series,
    )
    on_event(JobEvent("end", outcome=outcome.status, error=outcome.error, **event))


def _fio_files(directory: str) -> set[str]:
    """Files in ``directory`` named the way fio names its own (``job.N.M``)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    return {n for n in names if re.fullmatch(r".+\.\d+\.\d+", n)}


def _cleanup(run_options: Mapping[str, Any], results: Any, keep: bool) -> None:
    """Remove scratch files iolab created: missing-file targets, and in directory targets the
    files fio laid out for this run's jobs (named ``<job>.N.M``) that were not there before the
    run started (the listing is stored with the run, so a resumed run cleans up too)."""
    if keep:
        return
    for path in run_options.get("scratch", ()):
        Path(path).unlink(missing_ok=True)
    jobs = {name for r in results for name, _ in jobfile.effective_jobs(jobfile.parse(r.job_text))}
    for directory, existing in run_options.get("preexisting", {}).items():
        for name in _fio_files(directory) - set(existing):
            if name.rsplit(".", 2)[0] in jobs:
                Path(directory, name).unlink(missing_ok=True)
