"""``iolab run``: plan, lint, run and print a suite or fio job file (``runs`` and ``show`` are in show.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import click

from ..errors import Interrupted, PlanRefused, RunFailed, UsageError
from ..remote import sshhost
from . import err, import_store_meanwhile, store_of
from .options import Naming, SuiteArgs, fio_command_options, format_option, run_options, suite_options

if TYPE_CHECKING:
    from ..run.options import RunOptions


@click.command()
@click.argument("suite", required=False)
@suite_options()
@fio_command_options("run")
@run_options(destroy_help="Allow writes to this block device, destroying its contents (repeatable).",
             keep_help="Keep the scratch files fio created.",
             fence_help="Run fio without the fence (bubblewrap) that lets it write only the checked targets; only the "
                        "static guard then protects your devices.",
             exec_help="Let jobs run programs (exec_prerun, exec_postrun, ioengine=exec, external engines); they run "
                       "inside the fence.")
@click.option("--dry-run", is_flag=True, help="Print the plan and the job files, run nothing; contact no host.")
@click.option("--probe", is_flag=True, help="With --dry-run: check the remote hosts and exporters as a run would.")
@click.option("--resume", "resume", type=int, metavar="RUN", help="Finish an interrupted run.")
@format_option(help="How to print the results at the end.")
@click.pass_context
def run(ctx: click.Context, suite: str | None, asked: SuiteArgs, named: Naming, quiet: bool, no_observe: bool,
        options: RunOptions, dry_run: bool, probe: bool, resume: int | None, fmt: str) -> None:
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
    if probe and not dry_run:
        raise UsageError("--probe goes with --dry-run (a run always checks its hosts first)")
    asked = replace(asked, no_observe=no_observe)
    loaded = asked.load(suite) if suite and not dry_run and resume is None else None
    if loaded is not None:  # ssh's logins (~0.5 s each) overlap the imports below and the plan's local work,
        sshhost.connect_soon([h for t in loaded.targets for h in t.hosts if h.kind == "ssh"])
        from ..run.plan import start_soon
        start_soon(loaded, options, asked.repeat)  # and so do the programs the plan starts here
    from ..run import pipeline
    from .plan import Shown, print_findings, print_jobs
    from .progress import job_progress
    from .show import print_run

    watch = Shown(job_progress(quiet), quiet=quiet)
    try:
        if resume is not None:
            if suite or dry_run or asked.given():
                raise UsageError("--resume takes no suite, --target, --tune, --pin, --observe, --passes, --tier or "
                                 "--dry-run: the run's plan is stored")
            err.print(f"Resuming run {resume}")
            watch.run_id = resume
            done = pipeline.resume(store_of(ctx), resume, options, watch=watch)
        elif not suite:
            raise UsageError("which suite? give a built-in name (quick, cdm), a .yaml suite or a fio job file")
        elif dry_run:  # the whole plan, then what a run would refuse, listed at its end
            watch.errors_last = True
            plan = pipeline.Session(lambda: store_of(ctx), options, watch=watch).plan(
                asked.load(suite), repeat=asked.repeat, contact=probe, strict=False)
            print_jobs(plan)
            if plan.errors:
                print_findings(plan.errors, heading=f"[bold red]Refused[/]: {len(plan.errors)} error(s) a run stops "
                                                    "at before fio starts")
                raise PlanRefused(f"a run of {plan.suite.name} would be refused: {len(plan.errors)} error(s), "
                                  "listed above")
            return
        else:
            assert loaded is not None
            import_store_meanwhile()  # while the plan waits for fio and the hosts
            done = pipeline.run(lambda: store_of(ctx), loaded, options, repeat=asked.repeat, label=named.label,
                                tags=named.tags, watch=watch)
    except Interrupted:
        if watch.run_id is not None:
            print_run(store_of(ctx).get_run(watch.run_id), fmt)
        raise
    print_run(done, fmt, findings_shown=True)  # the plan printed them
    run_id = done.info.id
    if done.info.status == "partial":
        err.print(f"[yellow]Run {run_id} is partial[/]: hosts were lost mid-run; the other hosts' results are "
                  f"stored (iolab show {run_id}).")
        raise RunFailed(f"run {run_id} is partial", shown=True)
    if done.info.status != "complete":
        err.print(f"[red]Some jobs failed[/]; their fio messages are stored (iolab show {run_id}).")
        raise RunFailed(f"some jobs of run {run_id} failed", shown=True)
