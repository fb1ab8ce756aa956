"""``iolab lint``, ``host`` and ``restore``: the method and the machine."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import click

from ..errors import IolabError, PlanRefused, UsageError
from ..facts import ftrace, idle, pinning, sysfs, targets
from ..facts import host as host_mod
from ..model import to_jsonable
from ..report.method import findings_table
from ..report.table import Cell, Column, Table
from ..run import tuning
from ..run.plan import RunOptions, prepare
from ..runner import local
from ..units import format_bytes
from . import emit_tables, out, report_restored
from .options import SuiteArgs, destroy_option, format_option, suite_options
from .plan import print_findings


@click.command("lint")
@click.argument("suite", required=False)
@click.option("--list", "listing", is_flag=True, help="Print the catalogue of findings (P1–P16, FIO) and exit.")
@suite_options(lint=True)
@destroy_option("As for `run`: devices you allow iolab to overwrite.")
@click.option("--allow-exec", is_flag=True, help="As for `run`: jobs may run programs (exec_prerun ...).")
@format_option(("table", "json", "markdown", "csv"))
def lint_command(suite: str | None, listing: bool, asked: SuiteArgs, destroy: Sequence[str], allow_exec: bool,
                 fmt: str) -> None:
    """Check a suite or fio job file for methodology problems (catalogue P1–P16), on the targets
    and host it would run on. Every methodology finding is a warning; errors are what `iolab run`
    refuses before fio starts (a destructive write to a device with data, a job fio rejects), and
    then lint exits 2.

    \b
    iolab lint my-suite.yaml
    iolab lint job.fio --target data=/mnt/ssd/test.bin
    iolab lint --list                                # the catalogue
    """
    if listing:
        from ..check.acknowledge import catalogue
        rows = tuple((Cell(i), Cell(s), Cell(w)) for i, s, w in catalogue())
        emit_tables([Table("lint catalogue (acknowledge a warning: --ignore-lint CODE, or lint: {ignore: [CODE]})",
                           (Column("id", "id", whole=True), Column("severity", "severity"),
                            Column("finds", "finds")), rows)], fmt,
                    {"schema": "iolab.lint-catalogue/1", "rules": [dict(zip(("id", "severity", "finds"), r,
                                                                             strict=True)) for r in catalogue()]})
        return
    if suite is None:
        raise UsageError("which suite? give a .yaml suite or a fio job file, or --list for the catalogue")
    loaded = asked.load(suite)
    plan = prepare(loaded, RunOptions(destroy=tuple(destroy), allow_exec=allow_exec), strict=False)
    findings = list(plan.findings)
    if fmt == "table":
        print_findings(findings, out, full=True)
        if not findings:
            out.print(f"Lint: no findings for {loaded.name}")
    else:
        emit_tables([findings_table(findings, f"lint: {loaded.name}")], fmt,
                    {"schema": "iolab.lint/1", "suite": loaded.name,
                     "findings": [dataclasses.asdict(f) for f in findings]})
    if plan.errors:
        raise PlanRefused(f"{len(plan.errors)} error(s) in the plan of {loaded.name}", shown=True)


#: What an unknown host fact means, where "unknown" says too little.
_UNKNOWN = {"cpu_governor": "– (no cpufreq: the hypervisor or firmware decides)",
            "cpuidle_driver": "– (no cpuidle)", "idle_states": "– (no cpuidle)",
            "cpu_dma_latency_us": "– (unknown: only root can read /dev/cpu_dma_latency)"}


def _facts_rows(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    rows = []
    for key, value in to_jsonable(obj).items():
        if key == "idle_states" and value is not None:
            value = idle.describe_states(getattr(obj, key))
        elif key == "cpu_dma_latency_us" and value is not None:
            value = idle.describe_limit(value)
        if value is None:
            value = _UNKNOWN.get(key, "– (unknown)")
        if value in ({}, []):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k}: {v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        elif key.endswith("_bytes") and isinstance(value, int) and value >= 1024:
            value = f"{value} ({format_bytes(value)})"
        rows.append((prefix + key, str(value)))
    return rows


@click.command("host")
@click.option("--device", metavar="PATH", help="Also describe this block device (or the device under a file).")
@format_option(("table", "json", "markdown", "csv"))
def host_command(device: str | None, fmt: str) -> None:
    """Print the facts iolab records with a run: the host, and one device with its queue settings,
    blk-mq queues and the CPUs `pin: mq` / `pin: numa` would use."""
    try:
        fio_version = local.fio_version()
    except IolabError:
        fio_version = None
    facts = host_mod.host_facts(fio_version)
    document: dict[str, Any] = {"schema": "iolab.host/1", "host": to_jsonable(facts)}
    rows = _facts_rows(facts, "host.")
    if device:
        target = targets.inspect(device)
        dev = target.device
        if target.kind == "missing" or dev is None:
            raise UsageError(f"--device {device}: not a block device nor a file on one ({target.kind})")
        document["target"] = to_jsonable(target)
        document["tuning_in_force"] = tuning.snapshot(dev)
        document["pin"] = {}
        rows += _facts_rows(dev, "device.")
        rows += [(f"tuning.{k}", v) for k, v in document["tuning_in_force"].items() if k in ("governor",
                                                                                            "cpu_dma_latency")]
        for mode in pinning.MODES:
            try:
                cpus = sysfs.format_cpu_list(pinning.cpus(mode, dev))
            except IolabError as exc:
                cpus = f"– ({exc.message})"
            document["pin"][mode] = cpus
            rows.append((f"pin.{mode}", cpus))
    table = Table("host" + (f" and {device}" if device else ""), (Column("fact", "fact"), Column("value", "value")),
                  tuple((Cell(k), Cell(v)) for k, v in rows))
    emit_tables([table], fmt, document)


@click.command("restore")
@click.option("--discard", is_flag=True, help="Forget journals whose values cannot be written back.")
def restore_command(discard: bool) -> None:
    """Write back host tuning left behind by an iolab run that was killed, and remove the ftrace
    instances of captures that were killed (every command also does both first).

    Journals live in $XDG_STATE_HOME/iolab/tuning; a capture's instance in
    /sys/kernel/tracing/instances/iolab-PID-… (the capture's process: one whose process is gone is
    removed, with its block events and ring buffer)."""
    done = tuning.restore_leftovers(discard=discard)
    swept = ftrace.sweep()
    if not done and not swept.removed:
        click.echo(f"Nothing to restore (no left-over journal in {tuning.state_dir()}, no ftrace instance left by "
                   f"a killed capture in {ftrace.TRACEFS / 'instances'}).")
    for left in done:
        report_restored(left, click.echo)
    for removed in swept.removed:
        click.echo(ftrace.describe(removed))
    for kept in swept.kept:
        why = (f"its capture (pid {kept.pid}) is running" if kept.state == "running" else
               "made in another pid namespace (a container), whose processes cannot be seen from here")
        click.echo(f"Left the ftrace instance {kept.name} alone: {why}.")
    if swept.unreadable:
        click.echo(f"Could not look for ftrace instances left by captures ({swept.unreadable}); they are root's.")


