"""``iolab run``, ``runs`` and ``show``: the main job and its stored results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import click
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from .. import execute
from ..errors import Interrupted, UsageError
from ..model import Run, to_jsonable
from ..observe.config import with_args
from ..remote.jobs import RemoteTarget
from ..report import results as results_report
from ..report.autotune import ranking_table
from ..report.capture import fingerprint_document, fingerprint_table
from ..report.costs import cost_table
from ..report.crashtest import crash_document, crash_table
from ..report.saturation import saturation_table
from ..report.sweeps import run_grids
from ..report.table import Cell, Column, Table
from ..report.warmup import cache_table, warmup_document, warmup_table
from ..runner.fence import RULES as FENCE_RULES
from ..runner.guard import FencePlan
from ..runner.status import Status
from ..store import Store, UnreadableRun
from ..suite import with_passes
from ..tiers import Tier, parse_tier
from ..units import format_bytes, format_duration, format_iops, format_rate
from . import DURATION, FORMATS, cli, emit_tables, err, load_runs, out, parse_tags, report_unreadable, store_of
from .method import describe_method, load_planned, print_findings


def _describe_plan(plan: execute.Plan) -> None:
    estimate = plan.estimate_s
    err.print(f"[bold]Plan[/]: suite [cyan]{plan.suite.name}[/] — {len(plan.items)} fio run(s), "
              f"estimated {format_duration(estimate) if estimate is not None else 'unknown (size-based jobs)'}")
    for target in plan.suite.targets:
        if target.name in plan.remote:
            _describe_remote(plan.remote[target.name])
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
    for line in describe_fence(plan.fence):
        err.print(f"  {line}", markup=False, highlight=False)


def describe_fence(fence: FencePlan) -> list[str]:
    """The fence every local fio runs in and where it may write, or why fio runs unfenced."""
    if fence.tool is None:
        return [f"fence: none — {fence.reason}"]
    places = ", ".join([*fence.writable, "iolab's work directory of each job"])
    lines = [f"fence: {fence.tool} ({FENCE_RULES})", f"  fio may write only: {places}"]
    if fence.read_devices:
        lines.append(f"  and may read, not write: {', '.join(fence.read_devices)}")
    return lines


def _describe_observers(plan: execute.Plan) -> list[str]:
    """One line per exporter probed: observed or not, and what it said."""
    if not plan.probed:
        return []
    chosen = {p.endpoint for p in plan.observers.probed}
    how = f"read afterwards from {plan.observers.prometheus}" if plan.observers.prometheus else "sampled at 1 s"
    lines = [f"observers (node_exporter, {how}):"]
    for p in plan.probed:
        e = p.endpoint
        what = f"{e.host} ({e.role}) at {e.address}"
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
        if h.answer_s is not None:
            detail += f", answered in {h.answer_s * 1000:.0f} ms"
        t = h.facts.target if h.facts is not None else None
        if t is not None:
            detail += f"; {target.path}: {t.kind}" + (f" ({t.device.name})" if t.device is not None else "")
            if t.kind == "block" and t.size_bytes:
                detail += f", {format_bytes(t.size_bytes)}"
        err.print(f"    {h.spec.label} — {detail}", markup=False)


def _dry_run(plan: execute.Plan) -> None:
    seen = set()
    for item in plan.items:
        if item.job_text in seen:
            continue
        seen.add(item.job_text)
        out.print(f"# {item.job.spec.target.name} / {item.job.spec.workload.name} (hash {item.job_hash}, "
                  f"{'writes' if item.writes else 'reads only'})", style="bold", markup=False)
        out.print(item.job_text, markup=False, highlight=False)


class _LiveProgress:
    """A rich progress bar per job, fed by execute's events."""

    def __init__(self) -> None:
        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=24),
            TimeElapsedColumn(), TextColumn("{task.fields[detail]}"), console=err, transient=False,
        )
        self.task: TaskID | None = None
        self.hosts: dict[str, TaskID] = {}
        #: What the jobs are for, in place of ``[i/n]`` (a workflow's ``probe 3 · …``; ``{index}`` and
        #: ``{total}`` stand for the job's number and count).
        self.stage: str | None = None

    def __enter__(self) -> _LiveProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, event: execute.JobEvent) -> None:
        where = self.stage.format(index=event.index + 1, total=event.total) if self.stage \
            else f"{event.index + 1}/{event.total}"
        title = f"{escape('[' + where + ']')} {event.target} · {event.workload}" + \
            (f" #{event.repeat + 1}" if event.repeat else "")
        if event.kind == "start":
            self.task = self.progress.add_task(title, total=event.expected_s, detail="starting fio")
            self.hosts = {}
        elif event.kind == "status" and event.host is not None:
            self._host(event)
        elif event.kind == "status" and self.task is not None and event.status is not None:
            s = event.status
            self.progress.update(self.task, completed=s.elapsed_s, detail=_status_text(s))
        elif event.kind == "db" and event.note:
            self.progress.console.print(f"    {event.note}", style="cyan", markup=False, highlight=False)
        elif event.kind == "db" and self.task is not None and event.detail:
            self.progress.update(self.task, detail=f"[yellow]{escape(event.detail)}[/]")
        elif event.kind == "note" and event.detail:
            self.progress.console.print(f"    {event.detail}", style="cyan", markup=False, highlight=False)
        elif event.kind == "end" and self.task is not None:
            ok = event.outcome == "ok"
            mark = "[green]✓[/]" if ok else f"[red]✗ {event.outcome}[/]"
            self.progress.update(self.task, completed=event.expected_s or 1, total=event.expected_s or 1,
                                 detail=mark)
            for host_task in self.hosts.values():
                self.progress.stop_task(host_task)
            if not ok and event.error:
                self.progress.console.print(f"    {event.error.splitlines()[0]}", style="red", markup=False)

    def _host(self, event: execute.JobEvent) -> None:
        """One row per host of a remote target, under its job's row."""
        assert event.host is not None
        if event.host not in self.hosts:
            self.hosts[event.host] = self.progress.add_task(f"    {escape(event.host)}", total=event.expected_s,
                                                            detail="connecting")
        task = self.hosts[event.host]
        s = event.status
        if s is None and event.note is not None:
            self.progress.update(task, detail=f"[red]✗ lost: {escape(event.note)}[/]")
            self.progress.stop_task(task)
        if s is None:
            return
        self.progress.update(task, completed=s.elapsed_s, detail=_status_text(s))


def _status_text(s: Status) -> str:
    detail = f"{format_iops(s.iops)} IOPS  {format_rate(s.bw_bytes_s)} MiB/s" if s.iops is not None \
        else "ramping / laying out"
    if s.eta_s is not None:
        detail += f"  ETA {format_duration(s.eta_s)}"
    return detail


@cli.command()
@click.argument("suite", required=False)
@click.option("-t", "--target", "targets", multiple=True, metavar="NAME=PATH",
              help="Run on this file, directory or block device (repeatable); replaces the suite's targets.")
@click.option("--repeat", type=click.IntRange(1, 1000), help="Repetitions of every job (default: the suite's).")
@click.option("--label", help="A name for this run, usable wherever a run id is.")
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", help="Tag the run (repeatable).")
@click.option("--destroy", multiple=True, metavar="DEVICE",
              help="Allow writes to this block device, destroying its contents (repeatable).")
@click.option("--keep-files", is_flag=True, help="Keep the scratch files fio created.")
@click.option("--no-fence", is_flag=True, help="Run fio without the fence (bubblewrap) that lets it write only the "
              "checked targets; only the static guard then protects your devices.")
@click.option("--allow-exec", is_flag=True, help="Let jobs run programs (exec_prerun, exec_postrun, ioengine=exec, "
              "external engines); they run inside the fence.")
@click.option("--dry-run", is_flag=True, help="Print the plan and the job files, run nothing; contact no host.")
@click.option("--probe", is_flag=True, help="With --dry-run: check the remote hosts and exporters as a run would.")
@click.option("--resume", "resume", type=int, metavar="RUN", help="Finish an interrupted run.")
@click.option("--tune", multiple=True, metavar="KEY=VALUE",
              help="Host tuning while jobs run, restored after each (repeatable; a key given twice is an axis): "
                   "scheduler, rq_affinity, nomerges, nr_requests, read_ahead_kb, write_cache, governor.")
@click.option("--pin", type=click.Choice(("mq", "numa")), help="Pin fio to the CPUs of the device's blk-mq "
              "queues or NUMA node (cpus_allowed_policy=split).")
@click.option("--observe", "observe", multiple=True, metavar="[NAME=]HOST:PORT",
              help="Also watch this host's node_exporter (repeatable); local=HOST:PORT moves this host's exporter.")
@click.option("--no-observe", is_flag=True, help="Observe no host (no node_exporter sampling).")
@click.option("--prometheus", metavar="URL",
              help="Read the observers' series from this Prometheus server after each job instead of scraping.")
@click.option("--passes", type=int, metavar="N", help="Run every job N times back to back over the same region: a "
              "cache's warm-up curve (default: the suite's passes).")
@click.option("--tier", "tier_args", multiple=True, metavar="NAME=DEVICE[@HOST]",
              help="Count the I/Os reaching this device under the cache per job (repeatable); origin=DEVICE gives "
                   "the hit ratio.")
@click.option("--db-wait", "db_wait", type=DURATION, metavar="DURATION", default="3m", show_default=True,
              help="How long to wait out a results database that is away (restarting, locked, full) before the "
                   "run stops; finished results wait in the spool for --resume.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="How to print the results at the end.")
@click.pass_context
def run(ctx: click.Context, suite: str | None, targets: Sequence[str], repeat: int | None, label: str | None,
        tags: Sequence[str], destroy: Sequence[str], keep_files: bool, no_fence: bool, allow_exec: bool,
        dry_run: bool, probe: bool, resume: int | None,
        tune: Sequence[str], pin: str | None, observe: Sequence[str], no_observe: bool, prometheus: str | None,
        passes: int | None, tier_args: Sequence[str], db_wait: float, fmt: str) -> None:
    """Run a suite (a built-in name such as `quick` or `cdm`, a .yaml suite, or a fio job file).

    \b
    iolab run quick                                  # built-in suite on ./iolab-scratch
    iolab run quick --target ssd=/mnt/ssd --target hdd=/mnt/hdd
    iolab run my-suite.yaml --repeat 3 --label baseline --tag path=virtio
    iolab run job.fio --target data=/data            # a fio job file, unchanged
    iolab run --resume 12                            # finish an interrupted run
    iolab run hosts.yaml --dry-run --probe           # the plan, with what every fio server says
    iolab run my-suite.yaml --tune scheduler=none --tune scheduler=mq-deadline --pin mq
    iolab run my-suite.yaml --observe nvmet=10.0.0.5:9100   # also watch a storage target's node_exporter
    iolab run job.fio --target hdd=/dev/sdb --passes 5 --tier origin=/dev/sdb   # a cache's warm-up curve
    """
    ctx.obj["db_wait"] = db_wait
    options = execute.RunOptions(destroy=tuple(destroy), keep_files=keep_files, fence=not no_fence,
                                 allow_exec=allow_exec)
    if probe and not dry_run:
        raise UsageError("--probe goes with --dry-run (a run always checks its hosts first)")
    if resume is not None:
        if suite or targets or dry_run or tune or pin or observe or no_observe or prometheus or passes or tier_args:
            raise UsageError("--resume takes no suite, --target, --tune, --pin, --observe, --passes, --tier or "
                             "--dry-run: the run's plan is stored")
        run_id = resume
        err.print(f"Resuming run {run_id}")
    else:
        if not suite:
            raise UsageError("which suite? give a built-in name (quick, cdm), a .yaml suite or a fio job file")
        loaded = load_planned(suite, targets, tune, pin)
        try:
            loaded = replace(loaded, observe=with_args(loaded.observe, observe, no_observe, prometheus))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        loaded = with_passes(loaded, passes, _tiers(tier_args))
        plan = execute.prepare(loaded, options, repeat=repeat, contact=not dry_run or probe)
        _describe_plan(plan)
        print_findings(plan.findings)
        if dry_run:
            _dry_run(plan)
            return
        run_id = execute.start(store_of(ctx), plan, options, label=label, tags=parse_tags(tags))
        err.print(f"Run [bold]{run_id}[/] stored in {store_of(ctx).display_url}")
    store = store_of(ctx)
    try:
        with _LiveProgress() as progress:
            status = execute.execute(store, run_id, options, on_event=progress,
                                     checked=plan.remote if resume is None else None)
    except Interrupted:
        _print_run(store, run_id, fmt)
        raise
    _print_run(store, run_id, fmt)
    if status == "partial":
        err.print(f"[yellow]Run {run_id} is partial[/]: hosts were lost mid-run; the other hosts' results are "
                  f"stored (iolab show {run_id}).")
        ctx.exit(1)
    if status != "complete":
        err.print(f"[red]Some jobs failed[/]; their fio messages are stored (iolab show {run_id}).")
        ctx.exit(1)


def _tiers(args: Sequence[str]) -> list[Tier]:
    """``--tier NAME=DEVICE[@HOST]`` values as tiers. Raises ``UsageError``."""
    out = []
    for arg in args:
        name, sep, device = arg.partition("=")
        try:
            if not sep:
                raise ValueError("expected NAME=DEVICE such as origin=/dev/sdb")
            out.append(parse_tier(name, device))
        except ValueError as exc:
            raise UsageError(f"--tier {arg!r}: {exc}") from None
    return out


def _extra_tables(run: Run) -> list[Table]:
    """The tables that follow the results when the run has them: every host's cost when it was
    observed (``report.costs``), the warm-up curve of a run with passes and its cache counters
    (``report.warmup``), the cuts of a crash test (``report.crashtest``)."""
    return [t for t in (fingerprint_table(run), cost_table(run), warmup_table(run), cache_table(run), crash_table(run))
            if t is not None]


def run_document(run: Run) -> dict[str, Any]:
    """The run's JSON document (``report.results.run_document``) with its warm-up curves and crash-test
    cuts when it has them (``"warmup"``, ``"crash_test"``)."""
    document = results_report.run_document(run)
    curves, crashes, fingerprint = warmup_document(run), crash_document(run), fingerprint_document(run)
    return {**document, **({"warmup": curves} if curves else {}), **({"crash_test": crashes} if crashes else {}),
            **({"fingerprint": fingerprint} if fingerprint else {})}


def _print_run(store: Store, run_id: int, fmt: str) -> None:
    stored = store.get_run(run_id)
    emit_tables([results_report.results_table(stored), *_extra_tables(stored)], fmt, run_document(stored))


# runs, show


@cli.command()
@click.option("-n", "--limit", type=int, default=50, show_default=True, help="How many runs to list.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.pass_context
def runs(ctx: click.Context, limit: int, fmt: str) -> None:
    """List stored runs, newest first."""
    listed = store_of(ctx).list_runs(limit)
    columns = tuple(Column(k, t, n) for k, t, n in (
        ("id", "id", True), ("created_at", "created (UTC)", False), ("status", "status", False),
        ("origin", "origin", False), ("suite", "suite", False), ("label", "label", False),
        ("tags", "tags", False), ("fio", "fio", False), ("host", "host", False)))
    rows = tuple((
        Cell(str(i.id), i.id), Cell(i.created_at.strftime("%Y-%m-%d %H:%M:%S"), i.created_at.isoformat()),
        Cell(i.status, style={"complete": "green", "failed": "red", "interrupted": "yellow",
                              "partial": "yellow"}.get(i.status)),
        Cell(i.origin), Cell(i.suite_name), Cell(i.label or ""),
        Cell(" ".join(f"{k}={v}" for k, v in i.tags.items())), Cell(i.fio_version or "–"),
        Cell(i.host.hostname if i.host and i.host.hostname else "–"),
    ) if not isinstance(i, UnreadableRun) else (
        Cell(str(i.run_id), i.run_id), Cell(""), Cell("unreadable", style="red"), *(Cell("") for _ in range(6)),
    ) for i in listed)
    document = [to_jsonable(i) if not isinstance(i, UnreadableRun) else {"id": i.run_id, "unreadable": i.reason}
                for i in listed]
    emit_tables([Table("runs", columns, rows)], fmt, document)
    for problem in listed:
        if isinstance(problem, UnreadableRun):
            report_unreadable(ctx, problem)


@cli.command()
@click.argument("selectors", nargs=-1, required=True, metavar="RUN...")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.pass_context
def show(ctx: click.Context, selectors: Sequence[str], fmt: str) -> None:
    """Show stored runs: RUN is an id, `latest`, a label or a tag KEY=VALUE."""
    store = store_of(ctx)
    ids = list(dict.fromkeys(i for s in selectors for i in store.resolve(s)))
    stored = load_runs(ctx, ids)
    if not stored:
        return
    document: Any = [run_document(r) for r in stored]
    emit_tables([t for r in stored for t in (results_report.results_table(r), *run_grids(r), *_extra_tables(r),
                                             saturation_table(r), ranking_table(r)) if t is not None], fmt,
                document[0] if len(document) == 1 else document)


# ---------------------------------------------------------------------------------------------


