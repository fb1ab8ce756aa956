"""``iolab saturate`` and ``iolab autotune``: where a target saturates, and the settings that give the
most IOPS under a latency SLO, found with few fio runs."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .. import outputs, units
from ..analyze import saturation
from ..describe.spec import Target
from ..errors import RunFailed, UsageError
from ..facts import targets
from ..model import Run
from ..report import results as results_report
from ..report.autotune import ranking_table
from ..report.saturation import saturation_table
from ..report.sweeps import run_grids
from ..report.table import Table
from ..run import tuning
from ..workflows import autotune
from ..workflows.prober import DEFAULT_OPTIONS, Prober, describe, hosts_checked
from ..workflows.saturate import fio_latency_target
from ..workflows.saturate import saturate as saturate_search
from . import emit_tables, err, store_of
from .options import Naming, fio_command_options, format_option, run_options, target_options
from .progress import JobProgress, job_progress

if TYPE_CHECKING:
    from ..check.remote import RemoteTarget

#: Options the search itself sets.
SUITE = "the suite"
SEARCHED = ("iodepth", "numjobs", "runtime", "time_based", "name")


def fio_options(args: Sequence[str], searched: bool = True) -> dict[str, str]:
    """``["rw=randwrite", "bs=8k"]`` as fio options (names verbatim); with ``searched``, none the search
    sets (``SEARCHED``). Raises ``UsageError``."""
    out = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not key:
            raise UsageError(f"{arg!r}: expected a fio option as NAME=VALUE, such as rw=randwrite")
        if any(ord(c) < 0x20 or ord(c) == 0x7f for c in arg):
            raise UsageError(f"{arg!r}: holds a control character, which would start another line of the fio job file")
        if searched and key in SEARCHED:
            raise UsageError(f"{key} is what the search sets", hint="use --max-iodepth, --max-numjobs, --runtime")
        out[key] = value
    return out


def search_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options ``saturate`` and ``autotune`` share."""
    for option in reversed((
        click.argument("fio_args", nargs=-1, metavar="[FIO_OPTION=VALUE]..."),
        target_options("The file, directory or block device to measure (on each --host, when given)."),
        click.option("--slo", help="Latency objective: p99<=2ms, p99.9<10ms, mean<=500us (completion latency; "
                     "lat_p99<=… for total latency; < is strict, <= or ≤ is not)."),
        click.option("--max-iodepth", type=int, default=256, show_default=True),
        click.option("--max-numjobs", type=int, help="[default: the online CPUs; with --host, the fewest of the "
                                                     "hosts']"),
        click.option("--probe-runtime", default="3s", show_default=True, help="How long each probe runs."),
        click.option("--runtime", default="10s", show_default=True,
                     help="How long each full-length repetition runs."),
        click.option("--ramp-time", metavar="DURATION",
                     help="fio's ramp_time of every probe and repetition: I/O in it is not counted, so each point "
                     "is measured once queues and caches have settled (0 for none; the fio option ramp_time=… "
                     f"says the same).  [default: {DEFAULT_OPTIONS['ramp_time']}]"),
        click.option("--repeat", type=int, default=3, show_default=True, help="Full-length repetitions."),
        fio_command_options("run"),
        run_options(),
        format_option(),
    )):
        command = option(command)
    return command


@dataclass(frozen=True)
class _Setup:
    target: Target
    base: dict[str, str]
    slo: saturation.Slo | None
    search: saturation.Search
    settings: dict[str, Any]
    checked: RemoteTarget | None  # the hosts' preflight, made once for the run
    cpus: int  # where the probes run: this machine's, or the fewest of the hosts'


def _setup(args: Mapping[str, Any]) -> _Setup:
    """The target, the workload's fio options, the SLO and the search of a command's arguments; a
    remote target's hosts checked (``workflows.prober.hosts_checked``)."""
    user = fio_options(args["fio_args"])
    if "ramp_time" in user and args["ramp_time"] is not None:
        raise UsageError("give the probes' ramp once: --ramp-time or ramp_time=, not both")
    ramp = user.pop("ramp_time", None) or args["ramp_time"] or DEFAULT_OPTIONS["ramp_time"]
    objective = saturation.parse_slo(args["slo"]) if args["slo"] else None
    target = args["target"].target(user)
    checked, cpus = hosts_checked(target, args["options"])
    jobs = args["max_numjobs"] or cpus
    if jobs > cpus:
        where = " (the fewest of the hosts')" if target.hosts else ""
        err.print(f"[yellow]warning[/]: up to {jobs} jobs on {cpus} CPUs{where}: more jobs than CPUs measure the "
                  "CPU scheduler as much as the storage (lint P6)")
    base = {**DEFAULT_OPTIONS, "ramp_time": ramp, **user}
    settings = {"target": target.path, **({"hosts": list(args["target"].hosts)} if target.hosts else {}),
                "fio_options": base, "slo": args["slo"], "max_iodepth": args["max_iodepth"],
                "max_numjobs": jobs, "probe_runtime": args["probe_runtime"], "ramp_time": ramp,
                "runtime": args["runtime"], "repeat": args["repeat"]}
    return _Setup(target, base, objective, saturation.Search(args["max_iodepth"], jobs, objective), settings,
                  checked, cpus)


def _prober(ctx: click.Context, setup: _Setup, args: Mapping[str, Any], command: str,
            progress: JobProgress) -> Prober:
    named: Naming = args["named"]
    return Prober(store_of(ctx), setup.target, args["options"], command.split()[-1],
                  describe(command, setup.settings), named.label, named.tags, progress, observe=not args["no_observe"],
                  checked=setup.checked)


def _show(ctx: click.Context, run_id: int | None, fmt: str, summary: Callable[[Run], Table | None]) -> Run:
    """The run's results, grids and ``summary`` table, as ``iolab show`` prints them."""
    assert run_id is not None
    store = store_of(ctx)
    run = store.get_run(run_id)
    err.print(f"Run [bold]{run.info.id}[/] stored in {store.display_url}")
    tables = [results_report.results_table(run), *run_grids(run), summary(run)]
    emit_tables([t for t in tables if t is not None], fmt, results_report.run_document(run))
    return run


def _fail_if_a_job_failed(run: Run) -> None:
    """Raise ``RunFailed`` (exit 1, as ``iolab run``) when a job of the search's run failed: the search went
    on without it, and what it found is shown and kept."""
    if run.info.status not in ("complete", "partial"):
        err.print(f"[red]Some jobs failed[/]; their fio messages are stored (iolab show {run.info.id}).")
        raise RunFailed(f"some jobs of run {run.info.id} failed", shown=True)


@click.command()
@search_options
@click.option("--fio-latency-target", "fio_target", is_flag=True,
              help="Also run fio's own latency_target search (one job, a percentile --slo) to compare with.")
@click.pass_context
def saturate(ctx: click.Context, fio_target: bool, **args: Any) -> None:
    """Find where a target saturates: the knee of its latency–IOPS curve and, with --slo, the most IOPS
    whose latency stays under the objective (`<` is strict, `<=` is not). Short probes walk iodepth
    ×4 from 1 at one job until IOPS stops growing by 10 % or the SLO breaks, refine ×2, then double
    numjobs while that helps; the chosen point is repeated at full length for a confidence interval,
    and its SLO metric over the repetitions is checked against the SLO (when the interval crosses
    it, the next point below is offered). Every probe and repetition starts with --ramp-time of
    uncounted I/O. The knee is the probe with the most IOPS per ms of mean latency (Kleinrock's
    power). Everything is one stored run: show, report and compare it as any other.

    \b
    iolab saturate -t ssd=/mnt/ssd/test.bin --slo p99<=2ms
    iolab saturate -t nvme=/dev/nvme1n1 rw=randrw rwmixread=70 bs=8k --slo p99.9<=5ms --destroy /dev/nvme1n1
    """
    setup = _setup(args)
    if fio_target and (setup.slo is None or "_p" not in setup.slo.metric.name):
        raise UsageError("--fio-latency-target needs a percentile --slo such as p99<=2ms: fio's search judges one")
    with job_progress(args["quiet"]) as progress, _prober(ctx, setup, args, "iolab saturate", progress) as prober:
        found = saturate_search(prober, setup.base, setup.search, args["probe_runtime"], args["runtime"],
                                  args["repeat"], stage=lambda text: setattr(progress, "stage", text))
        if fio_target and setup.slo is not None:
            own = fio_latency_target(prober, setup.base, setup.slo, args["max_iodepth"], args["runtime"])
            found = replace(found, fio_target=own)
        prober.finish(found.record(setup.slo, setup.settings))
    _fail_if_a_job_failed(_show(ctx, prober.run_id, args["fmt"], saturation_table))


@click.command("autotune")
@search_options
@click.option("--budget", default="10m", show_default=True, help="How long the whole search may take.")
@click.option("--axes", default=",".join(autotune.ORDER), show_default=True,
              help="The settings to try, comma-separated.")
@click.option("--top", type=int, default=3, show_default=True, help="How many best configurations to repeat.")
@click.option("--write-suite", type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the best configuration as a suite [default: iolab-autotune-RUN.yaml].")
@click.pass_context
def autotune_command(ctx: click.Context, budget: str, axes: str, top: int, write_suite: Path | None,
                     **args: Any) -> None:
    """Find the host and fio settings with the most IOPS under --slo within --budget: the operating
    point by the saturation search, then coordinate descent over the axes (host tuning: scheduler,
    nomerges, rq_affinity, read_ahead_kb, and cpu_dma_latency 0 where idle CPUs may enter states
    with exit latencies; CPU pinning; ioengine; numjobs at the same outstanding
    I/Os), each probe under its settings, restored after it as for `iolab run` (also after Ctrl-C or
    a kill: the next iolab command restores them). The best --top are repeated and ranked with 95 %
    intervals; the best is written as a suite to run again.

    \b
    iolab autotune -t nvme=/dev/nvme1n1 --slo p99<=1ms --budget 15m --destroy /dev/nvme1n1
    iolab autotune -t ssd=/mnt/ssd/test.bin --axes ioengine,numjobs --budget 5m
    """
    outputs.check(write_suite or Path("iolab-autotune-RUN.yaml"), SUITE)  # refused now, not after the search
    wanted = [a.strip() for a in axes.split(",") if a.strip()]
    if args["target"].hosts:  # only fio's settings travel to the hosts
        here = [a for a in wanted if a in autotune.HERE]
        if here and ctx.get_parameter_source("axes") != click.core.ParameterSource.DEFAULT:
            raise UsageError(f"autotune --axes {','.join(here)}: tunes this machine's block queues and CPUs, not a "
                             "host's", hint="with --host, try the fio settings: --axes ioengine,numjobs")
        wanted = [a for a in wanted if a not in here]
    setup = _setup(args)
    try:
        budget_s = units.parse_duration_us(budget, default_unit="s") / 1e6
        device = None if setup.target.hosts else targets.inspect(os.path.abspath(setup.target.path or "")).device
        chosen_axes = autotune.axes(wanted, tuning.snapshot(device), setup.base, setup.cpus,
                                    device)
    except ValueError as exc:
        raise UsageError(f"autotune: {exc}") from None
    setup.settings.update(budget=budget, axes=[a.name for a in chosen_axes], top=top)
    with job_progress(args["quiet"]) as progress, _prober(ctx, setup, args, "iolab autotune", progress) as prober:
        found = autotune.autotune_run(prober, setup.base, setup.search, chosen_axes, budget_s, args["probe_runtime"],
                                      args["runtime"], args["repeat"], top)
        prober.finish(found.record(setup.slo, setup.settings))
    run = _show(ctx, prober.run_id, args["fmt"], ranking_table)
    point = found.operating.chosen
    if found.ranking and point is not None:
        path = write_suite or Path(f"iolab-autotune-{run.info.id}.yaml")
        best = found.ranking[0]
        what = f"the most IOPS with {setup.slo}" if setup.slo else "the most IOPS"
        text = autotune.best_suite(setup.target, setup.base, best.config, point, args["runtime"],
                                   f"iolab autotune, run {run.info.id}: {what}\n"
                                   f"{autotune.describe(best.config)}: {units.format_iops(best.iops.mean)} IOPS")
        outputs.write(path, SUITE, text)
        edge = "" if best.feasible else f" (it did not meet {setup.slo} over its repetitions)"
        judged = autotune.against_as_is(found.ranking)
        edge += " (not distinguishable from as it is: see the table)" if judged and not judged.distinguishable else ""
        err.print(f"Best configuration ({autotune.describe(best.config)}){edge} written to {path}; run it again "
                  f"with: iolab run {path}")
    _fail_if_a_job_failed(run)
