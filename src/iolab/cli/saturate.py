"""``iolab saturate``: the knee and the most IOPS under a latency SLO, found with few fio runs."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

import click

from .. import saturation, suite, targets, workflow
from ..errors import UsageError
from ..execute import RunOptions
from ..report import results as results_report
from ..report.saturation import saturation_table
from ..report.sweeps import run_grids
from . import FORMATS, cli, emit_tables, err, parse_tags, store_of
from .run import _LiveProgress

#: Options the search itself sets.
SEARCHED = ("iodepth", "numjobs", "runtime", "time_based", "name")


def fio_options(args: Sequence[str]) -> dict[str, str]:
    """``["rw=randwrite", "bs=8k"]`` as fio options (names verbatim). Raises ``UsageError``."""
    out = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not key:
            raise UsageError(f"{arg!r}: expected a fio option as NAME=VALUE, such as rw=randwrite")
        if key in SEARCHED:
            raise UsageError(f"{key} is what the search sets", hint="use --max-iodepth, --max-numjobs, --runtime")
        out[key] = value
    return out


@cli.command()
@click.argument("options", nargs=-1, metavar="[FIO_OPTION=VALUE]...")
@click.option("-t", "--target", "target_arg", required=True, metavar="NAME=PATH",
              help="The file, directory or block device to saturate.")
@click.option("--slo", help="Latency objective: p99<=2ms, p99.9<=10ms, mean<=500us (completion latency; "
              "lat_p99<=… for total latency).")
@click.option("--max-iodepth", type=int, default=256, show_default=True)
@click.option("--max-numjobs", type=int, help="[default: the online CPUs]")
@click.option("--probe-runtime", default="3s", show_default=True, help="How long each probe runs.")
@click.option("--runtime", default="10s", show_default=True, help="How long each repetition of the chosen point runs.")
@click.option("--repeat", type=int, default=3, show_default=True, help="Repetitions of the chosen point.")
@click.option("--fio-latency-target", "fio_target", is_flag=True,
              help="Also run fio's own latency_target search (one job, a percentile --slo) to compare with.")
@click.option("--label", help="A name for the run.")
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE")
@click.option("--destroy", multiple=True, metavar="DEVICE", help="Allow writes to this block device.")
@click.option("--keep-files", is_flag=True, help="Keep the scratch file fio created.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.pass_context
def saturate(ctx: click.Context, options: Sequence[str], target_arg: str, slo: str | None, max_iodepth: int,
             max_numjobs: int | None, probe_runtime: str, runtime: str, repeat: int, fio_target: bool,
             label: str | None, tags: Sequence[str], destroy: Sequence[str], keep_files: bool, fmt: str) -> None:
    """Find where a target saturates: the knee of its latency–IOPS curve and, with --slo, the most
    IOPS whose latency stays under the objective. Short probes walk iodepth ×4 from 1 at one job
    until IOPS stops growing by 10 % or the SLO breaks, refine ×2, then double numjobs while that
    helps; the chosen point is repeated at full length for a confidence interval. The knee is the
    probe with the most IOPS per ms of mean latency (Kleinrock's power). Everything is one stored
    run: show, report and compare it as any other.

    \b
    iolab saturate -t ssd=/mnt/ssd/test.bin --slo p99<=2ms
    iolab saturate -t nvme=/dev/nvme1n1 rw=randrw rwmixread=70 bs=8k --slo p99.9<=5ms --destroy /dev/nvme1n1
    """
    (name, path), = suite.parse_target_args([target_arg]).items()
    user = fio_options(options)
    objective = saturation.parse_slo(slo) if slo else None
    if fio_target and (objective is None or "_p" not in objective.metric.name):
        raise UsageError("--fio-latency-target needs a percentile --slo such as p99<=2ms: fio's search judges one")
    cpus = os.cpu_count() or 1
    jobs = max_numjobs or cpus
    if jobs > cpus:
        err.print(f"[yellow]warning[/]: up to {jobs} jobs on {cpus} CPUs: more jobs than CPUs measure the CPU "
                  "scheduler as much as the storage (lint P6)")
    kind = targets.inspect(os.path.abspath(path)).kind
    size = None if kind == "block" or "size" in user else workflow.DEFAULT_SIZE
    base = {**workflow.DEFAULT_OPTIONS, **user}
    settings = {"target": path, "fio_options": base, "slo": slo, "max_iodepth": max_iodepth, "max_numjobs": jobs,
                "probe_runtime": probe_runtime, "runtime": runtime, "repeat": repeat}
    search = saturation.Search(max_iodepth, jobs, objective)
    store = store_of(ctx)
    with _LiveProgress() as progress, workflow.Prober(
            store, suite.Target(name, path, size), RunOptions(destroy=tuple(destroy), keep_files=keep_files),
            "saturate", workflow.describe("iolab saturate", settings), label, parse_tags(tags), progress) as prober:
        found = workflow.saturate(prober, base, search, probe_runtime, runtime, repeat)
        if fio_target and objective is not None:
            own = workflow.fio_latency_target(prober, base, objective, max_iodepth, runtime)
            found = replace(found, fio_target=own)
        prober.finish(found.record(objective, settings))
    assert prober.run_id is not None
    run = store.get_run(prober.run_id)
    err.print(f"Run [bold]{run.info.id}[/] stored in {store.display_url}")
    tables = [results_report.results_table(run), *run_grids(run)]
    table = saturation_table(run)
    emit_tables([*tables, *([table] if table else [])], fmt, results_report.run_document(run))
