"""A run's pipeline as the terminal shows it: the plan before anything runs (targets, workloads,
method, observers, the fence), its lint findings, where the run is stored, then each job's progress
(``cli.progress``). ``Shown`` is the ``run.pipeline.Watch`` the commands that run fio hand the pipeline.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from ..analyze import warmup
from ..check import lint
from ..check.guard import FencePlan
from ..check.remote import HostFence, RemoteTarget
from ..observe.local import SELF
from ..report.table import compact_places
from ..run.job import JobEvent
from ..run.pipeline import Watch
from ..run.plan import Plan
from ..runner.fence import RULES as FENCE_RULES
from ..units import format_bytes, format_duration
from . import err, out
from .progress import JobProgress

if TYPE_CHECKING:
    from ..store.database import Store


def describe_plan(plan: Plan) -> None:
    estimate = plan.estimate_s
    err.print(f"[bold]Plan[/]: suite [cyan]{plan.suite.name}[/] — {len(plan.items)} fio run(s), "
              f"estimated {format_duration(estimate) if estimate is not None else 'unknown (size-based jobs)'}")
    for target in plan.suite.targets:
        if target.name in plan.remote:
            _describe_remote(plan.remote[target.name])
            for line in describe_host_fences(plan.host_fences.get(target.name, ())):
                err.print(f"    {line}", markup=False, highlight=False)
            continue
        facts = plan.facts.get(target.name)
        if facts is None:
            err.print(f"  target [cyan]{target.name}[/]: the job file's own files")
            continue
        detail = facts.kind if facts.kind != "missing" else "new scratch file"
        if facts.fs_type:
            detail += f" on {facts.fs_type}"
        if facts.device is not None:
            detail += f", device {facts.device.name}"
            if facts.device.model:
                detail += f" ({facts.device.model})"
        if facts.kind == "block" and facts.size_bytes:
            detail += f", {format_bytes(facts.size_bytes)}"
        err.print(f"  target [cyan]{target.name}[/]: {target.path} — {detail}", markup=True)
    names = list(dict.fromkeys(i.job.spec.workload.name for i in plan.items))
    repeats = max(i.job.repeat for i in plan.items) + 1 if plan.items else 0
    err.print(f"  workloads: {', '.join(names)}" + (f" × {repeats} repeats" if repeats > 1 else ""))
    for line in describe_method(plan):
        err.print(f"  {line}", markup=False, highlight=False)
    for line in _describe_observers(plan):
        err.print(f"  {line}", markup=False, highlight=False)
    for line in _local_fence(plan):
        err.print(f"  {line}", markup=False, highlight=False)


def _local_fence(plan: Plan) -> list[str]:
    """This machine's fence (``describe_fence``), when a job runs fio here. With every job on remote
    hosts nothing is said when each host's fence is shown above (``ssh://`` hosts), and else that the
    jobs run on the hosts' fio servers (fio's client here only sends them and writes their logs)."""
    if any(i.job.spec.target.name not in plan.remote for i in plan.items):
        return describe_fence(plan.fence)
    shown = all({h.label for h in rt.target.hosts} == {f.host for f in plan.host_fences.get(name, ())}
                for name, rt in plan.remote.items())
    return [] if shown else ["fence on this machine: not needed — every job runs on the remote hosts' fio servers"]


def describe_fence(fence: FencePlan) -> list[str]:
    """The fence every local fio runs in and where it may write, or why fio runs unfenced."""
    if fence.tool is None:
        return [f"fence: none — {fence.reason}",
                *([f"  the static guard lets fio write only: {', '.join(fence.writable)}"] if fence.writable else [])]
    places = ", ".join([*fence.writable, "iolab's work directory of each job"])
    lines = [f"fence: {fence.tool} ({FENCE_RULES})", f"  fio may write only: {places}"]
    if fence.read_devices:
        lines.append(f"  and may read, not write: {', '.join(fence.read_devices)}")
    return [*lines, *(f"  {note}" for note in fence.notes)]


def describe_host_fences(fences: Sequence[HostFence]) -> list[str]:
    """The fence of each ``ssh://`` host (``check.remote.plan_fences``): the tool once when every
    host has the same, then where fio may write on each."""
    if not fences:
        return []
    tools = {f.tool for f in fences}
    lines = [f"fence on each ssh host: {next(iter(tools))} ({FENCE_RULES}, no network)" if tools != {None}
             else "fence on the ssh hosts: none — --no-fence: fio runs unfenced there"] if len(tools) == 1 else []
    for f in fences:
        tool = "" if len(tools) == 1 else (f"{f.tool}; " if f.tool else "unfenced; ")
        places = ", ".join([*f.writable, f"its work directory {f.work}"])
        lines.append(f"  {f.host}: {tool}fio may write only: {places}"
                     + (f"; and may read, not write: {', '.join(f.read)}" if f.read else ""))
    return lines


def _describe_observers(plan: Plan) -> list[str]:
    """One line per observer probed: observed or not, and what it said."""
    if not plan.probed:
        return []
    chosen = {p.endpoint for p in plan.observers.probed}
    how = f"read afterwards from {plan.observers.prometheus}" if plan.observers.prometheus else "sampled at 1 s"
    lines = [f"observers ({how}):"]
    for p in plan.probed:
        e = p.endpoint
        what = f"{e.host} ({e.role}) from /proc and /sys" if e.address == SELF else \
            f"{e.host} ({e.role}) from /proc and /sys over ssh" if e.address.startswith("ssh://") else \
            f"{e.host} ({e.role}) at {e.address}, node_exporter"
        if p.facts is not None:
            f = p.facts.host
            detail = ", ".join(x for x in (f.hostname, f"{f.cpu_count} CPUs" if f.cpu_count else None,
                                           f.kernel.split()[0] if f.kernel else None) if x)
            lines.append(f"  {what} — {detail}")
        elif e in chosen:
            lines.append(f"  {what} — not answering now ({p.error}); observed anyway, gaps recorded")
        else:
            lines.append(f"  {what} — not observed: {p.error}")
    return lines


def _describe_remote(remote: RemoteTarget) -> None:
    target = remote.target
    err.print(f"  target [cyan]{target.name}[/]: {target.path} on {len(remote.hosts)} host(s) through fio's "
              f"client/server mode{' (facts over ssh)' if target.ssh else ''}")
    if not remote.checked:
        err.print("    hosts not checked (a dry run contacts no host; --probe checks them): "
                  + ", ".join(h.spec.label for h in remote.hosts), markup=False, highlight=False)
        return
    if remote.slow:
        err.print("    [yellow]slow to answer[/]: " + escape(", ".join(
            f"{h.spec.label} ({h.answer_s:.2f} s)" for h in remote.slow)) + " — loaded, distant or stuck?")
    for h in remote.hosts:
        if h.server is None:
            continue
        detail = f"{h.server.hostname}, {h.server.fio_version}, {h.server.os} {h.server.arch}, {h.server.cpus} CPUs"
        if h.hello is not None:
            detail += f", ssh connected in {h.hello.connect_s * 1000:.0f} ms"
        if h.answer_s is not None:
            detail += f", answered in {h.answer_s * 1000:.0f} ms"
        t = h.facts.target if h.facts is not None else None
        if t is not None:
            detail += f"; {target.path}: {t.kind}" + (f" ({t.device.name})" if t.device is not None else "")
            if t.kind == "block" and t.size_bytes:
                detail += f", {format_bytes(t.size_bytes)}"
        err.print(f"    {h.spec.label} — {detail}", markup=False)


def print_jobs(plan: Plan) -> None:
    """Each distinct job file of the plan, headed by its target, workload, hash and whether it writes
    (``--dry-run``)."""
    seen = set()
    for item in plan.items:
        if item.job_text in seen:
            continue
        seen.add(item.job_text)
        out.print(f"# {item.job.spec.target.name} / {item.job.spec.workload.name} (hash {item.job_hash}, "
                  f"{'writes' if item.writes else 'reads only'})", style="bold", markup=False)
        out.print(item.job_text, markup=False, highlight=False)


def print_findings(findings: Sequence[lint.Finding], console: Console = err, *, full: bool = False,
                   heading: str | None = None) -> None:
    """Findings as readable text under ``heading`` (default: how many errors and warnings): id, severity and
    places, then what is wrong and the remedy (and the source when ``full``)."""
    from ..check.acknowledge import ACKNOWLEDGED
    acknowledged = list(dict.fromkeys(f.id for f in findings if f.severity == ACKNOWLEDGED))
    findings = [f for f in findings if f.severity != ACKNOWLEDGED]
    if not findings and not acknowledged:
        return
    errors = sum(f.severity == lint.ERROR for f in findings)
    console.print(heading or f"[bold]Lint[/]: {errors} error(s), {len(findings) - errors} warning(s)"
              + (f", acknowledged: {', '.join(acknowledged)}" if acknowledged else ""))
    for f in findings:
        style = "red" if f.severity == lint.ERROR else "yellow"
        console.print(f"  {f.id} {f.severity}", style=f"bold {style}", end="", markup=False)
        console.print(f"  {compact_places(f.where)}", markup=False, highlight=False)
        for label, text in (("", f.message), ("Remedy: ", f.remedy), *((("Source: ", f.source),) if full else ())):
            lines = text.splitlines() or [""]  # fio's own messages span lines ("Did you mean iodepth?")
            indent, width = " " * (6 + len(label)), max(console.width, 40)
            wrapped = [textwrap.fill(line, width, initial_indent=f"      {label}" if i == 0 else indent,
                                     subsequent_indent=indent, break_on_hyphens=False) or indent
                       for i, line in enumerate(lines)]  # wrapped under its own indent, not the terminal's
            console.print("\n".join(wrapped), markup=False, highlight=False, soft_wrap=True,
                          style="dim" if label == "Source: " else None)


def describe_method(plan: Plan) -> list[str]:
    """The plan's host setup and method, one line each, for the plan summary."""
    suite, lines = plan.suite, []
    if suite.tune:
        settings = ", ".join(f"{k}={'|'.join(v)}" for k, v in suite.tune.items())
        lines.append(f"tuning (restored after each job): {settings}")
    for name, cpus in plan.pins.items():
        lines.append(f"pin {suite.method.pin}: target {name} on CPUs {cpus} (cpus_allowed_policy=split)")
    pre = suite.method.precondition
    if pre is not None:
        parts = [f"fill {pre.fill}× with bs={pre.bs}"] if pre.fill else []
        if pre.rounds:
            parts.append(f"up to {pre.rounds} rounds of {pre.round_time} per job until steady state ({pre.track})")
        lines.append("precondition (not in the estimate): " + "; ".join(parts))
    if suite.method.drop_caches:
        lines.append("drop_caches before every job" + (" (before the first pass)" if suite.passes > 1 else ""))
    if suite.passes > 1:
        lines.append(f"warm-up: {suite.passes} passes of every job over the same region, back to back")
        if any(warmup.drops_page_cache(i.job_text) for i in plan.items):
            lines.append("  note: buffered I/O with fio's invalidate=1 (its default) drops the page cache before "
                         "every pass; set invalidate=0 for the page cache to warm up")
    if suite.tiers:
        lines.append("tiers (I/Os counted per job): " + ", ".join(f"{t.name}={t.spec()}" for t in suite.tiers))
    return lines


class Shown(Watch):
    """The pipeline drawn on stderr: the plan (unless ``quiet``) then its lint findings and ``notes``;
    ``"{stored_as} N stored in URL"`` once the run is stored (nothing when ``stored_as`` is None); each job
    on ``progress`` (a ``cli.progress`` display, entered while the jobs run). ``run_id`` is the stored
    run's, for a command that shows the run after an interrupt."""

    def __init__(self, progress: JobProgress, *, quiet: bool = False, stored_as: str | None = "Run",
                 notes: Sequence[str] = ()) -> None:
        super().__init__()
        self.progress, self.quiet, self.stored_as, self.notes = progress, quiet, stored_as, notes
        self.run_id: int | None = None
        #: A dry run lists the plan's errors (what a run refuses) after its job files, not with its warnings.
        self.errors_last = False

    def planned(self, plan: Plan) -> None:
        if not self.quiet:
            describe_plan(plan)
            for note in self.notes:
                err.print(f"  {note}", markup=False, highlight=False)
        print_findings([f for f in plan.findings if not (self.errors_last and f.severity == lint.ERROR)])

    def stored(self, run_id: int, store: Store) -> None:
        self.run_id = run_id
        if self.stored_as is not None:
            err.print(f"{self.stored_as} [bold]{run_id}[/] stored in {store.display_url}")

    def running(self) -> AbstractContextManager[object]:
        return self.progress

    def event(self, event: JobEvent) -> None:
        self.progress(event)
