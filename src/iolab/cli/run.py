"""``iolab run``: plan, lint, run and print a suite or fio job file (``runs`` and ``show`` are in show.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import click
from rich.markup import escape

from ..check.guard import FencePlan
from ..check.remote import RemoteTarget
from ..describe.observe import with_args
from ..describe.suite import with_passes
from ..describe.tiers import Tier, parse_tier
from ..errors import Interrupted, UsageError
from ..observe.local import SELF
from ..run import execute
from ..runner.fence import RULES as FENCE_RULES
from ..units import format_bytes, format_duration
from . import DURATION, FORMATS, err, import_store_meanwhile, out, parse_tags, store_of
from .method import describe_method, load_planned, print_findings
from .progress import LiveProgress as _LiveProgress  # noqa: F401  (command modules of other branches import it)
from .progress import job_progress

# other branches' command modules import _LiveProgress, _print_run and run_document from here
from .show import print_run, run_document  # noqa: F401
from .show import print_run as _print_run  # noqa: F401


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
        return [f"fence: none — {fence.reason}",
                *([f"  the static guard lets fio write only: {', '.join(fence.writable)}"] if fence.writable else [])]
    places = ", ".join([*fence.writable, "iolab's work directory of each job"])
    lines = [f"fence: {fence.tool} ({FENCE_RULES})", f"  fio may write only: {places}"]
    if fence.read_devices:
        lines.append(f"  and may read, not write: {', '.join(fence.read_devices)}")
    return [*lines, *(f"  {note}" for note in fence.notes)]


def _describe_observers(plan: execute.Plan) -> list[str]:
    """One line per observer probed: observed or not, and what it said."""
    if not plan.probed:
        return []
    chosen = {p.endpoint for p in plan.observers.probed}
    how = f"read afterwards from {plan.observers.prometheus}" if plan.observers.prometheus else "sampled at 1 s"
    lines = [f"observers ({how}):"]
    for p in plan.probed:
        e = p.endpoint
        what = f"{e.host} ({e.role}) from /proc and /sys" if e.address == SELF else \
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


@click.command()
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
@click.option("-q", "--quiet", is_flag=True, help="No plan and no progress on stderr: lint findings, errors and the "
              "results only. (Without a terminal, progress is a line per job start and end and every 10 s.)")
@click.pass_context
def run(ctx: click.Context, suite: str | None, targets: Sequence[str], repeat: int | None, label: str | None,
        tags: Sequence[str], destroy: Sequence[str], keep_files: bool, no_fence: bool, allow_exec: bool,
        dry_run: bool, probe: bool, resume: int | None,
        tune: Sequence[str], pin: str | None, observe: Sequence[str], no_observe: bool, prometheus: str | None,
        passes: int | None, tier_args: Sequence[str], db_wait: float, fmt: str, quiet: bool) -> None:
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
        if not dry_run:
            import_store_meanwhile()  # while the plan waits for fio and the hosts
        plan = execute.prepare(loaded, options, repeat=repeat, contact=not dry_run or probe)
        if not quiet:
            _describe_plan(plan)
        print_findings(plan.findings)
        if dry_run:
            _dry_run(plan)
            return
        run_id = execute.start(store_of(ctx), plan, options, label=label, tags=parse_tags(tags))
        err.print(f"Run [bold]{run_id}[/] stored in {store_of(ctx).display_url}")
    store = store_of(ctx)
    try:
        with job_progress(quiet) as progress:
            status = execute.execute(store, run_id, options, on_event=progress,
                                     checked=plan.remote if resume is None else None)
    except Interrupted:
        print_run(store, run_id, fmt)
        raise
    print_run(store, run_id, fmt)
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


# ---------------------------------------------------------------------------------------------


