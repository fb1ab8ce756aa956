"""``iolab lint``, ``host`` and ``restore``: the method and the machine."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import click
from rich.console import Console

from ..analyze import warmup
from ..check import lint
from ..describe import suite as suite_mod
from ..describe.tune import parse_tune_args
from ..errors import IolabError, UsageError
from ..facts import host as host_mod
from ..facts import pinning, sysfs, targets
from ..model import to_jsonable
from ..report.method import findings_table
from ..report.table import Cell, Column, Table, compact_places
from ..run import execute, tuning
from ..runner import local
from ..units import format_bytes
from . import emit_tables, err, out

PIN_CHOICE = click.Choice(pinning.MODES)


def load_planned(suite: str, targets_: Sequence[str], tune: Sequence[str], pin: str | None) -> suite_mod.Suite:
    """A suite as ``run`` and ``lint`` read it: ``--target``, ``--tune`` and ``--pin`` applied."""
    loaded = suite_mod.with_targets(suite_mod.load(suite), suite_mod.parse_target_args(targets_))
    return suite_mod.with_method(loaded, parse_tune_args(tune), pin)


def print_findings(findings: Sequence[lint.Finding], console: Console = err, *, full: bool = False) -> None:
    """Findings as readable text: id, severity and places, then what is wrong and the remedy
    (and the source when ``full``)."""
    if not findings:
        return
    errors = sum(f.severity == lint.ERROR for f in findings)
    console.print(f"[bold]Lint[/]: {errors} error(s), {len(findings) - errors} warning(s)")
    for f in findings:
        style = "red" if f.severity == lint.ERROR else "yellow"
        console.print(f"  {f.id} {f.severity}", style=f"bold {style}", end="", markup=False)
        console.print(f"  {compact_places(f.where)}", markup=False, highlight=False)
        for label, text in (("", f.message), ("Remedy: ", f.remedy), *((("Source: ", f.source),) if full else ())):
            lines = text.splitlines() or [""]  # fio's own messages span lines ("Did you mean iodepth?")
            console.print("\n".join(f"      {label if i == 0 else ' ' * len(label)}{line}"
                                    for i, line in enumerate(lines)), markup=False, highlight=False,
                          style="dim" if label == "Source: " else None)


def describe_method(plan: execute.Plan) -> list[str]:
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


@click.command("lint")
@click.argument("suite")
@click.option("-t", "--target", "targets_", multiple=True, metavar="NAME=PATH",
              help="Lint for this file, directory or block device (repeatable); replaces the suite's targets.")
@click.option("--tune", multiple=True, metavar="KEY=VALUE", help="Tuning as `run --tune` would apply it.")
@click.option("--pin", type=PIN_CHOICE, help="Pinning as `run --pin` would apply it.")
@click.option("--destroy", multiple=True, metavar="DEVICE", help="As for `run`: devices you allow iolab to overwrite.")
@click.option("--allow-exec", is_flag=True, help="As for `run`: jobs may run programs (exec_prerun ...).")
@click.option("--format", "fmt", type=click.Choice(("table", "json", "markdown", "csv")), default="table",
              show_default=True)
@click.pass_context
def lint_command(ctx: click.Context, suite: str, targets_: Sequence[str], tune: Sequence[str], pin: str | None,
                 destroy: Sequence[str], allow_exec: bool, fmt: str) -> None:
    """Check a suite or fio job file for methodology problems (catalogue P1–P16), on the targets
    and host it would run on. Every methodology finding is a warning; errors are what `iolab run`
    refuses before fio starts (a destructive write to a device with data, a job fio rejects), and
    then lint exits 2.

    \b
    iolab lint my-suite.yaml
    iolab lint job.fio --target data=/mnt/ssd/test.bin
    """
    loaded = load_planned(suite, targets_, tune, pin)
    plan = execute.prepare(loaded, execute.RunOptions(destroy=tuple(destroy), allow_exec=allow_exec),
                           strict=False)
    findings = list(plan.findings)
    if fmt == "table":
        print_findings(findings, out, full=True)
        if not findings:
            out.print(f"Lint: no findings for {loaded.name}")
    else:
        emit_tables([findings_table(findings, f"lint: {loaded.name}")], fmt,
                    {"suite": loaded.name, "findings": [dataclasses.asdict(f) for f in findings]})
    if plan.errors:
        ctx.exit(2)


def _facts_rows(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    rows = []
    for key, value in to_jsonable(obj).items():
        if value is None:
            value = "– (unknown)" if key != "cpu_governor" else "– (no cpufreq: the hypervisor or firmware decides)"
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
@click.option("--format", "fmt", type=click.Choice(("table", "json", "markdown", "csv")), default="table",
              show_default=True)
def host_command(device: str | None, fmt: str) -> None:
    """Print the facts iolab records with a run: the host, and one device with its queue settings,
    blk-mq queues and the CPUs `pin: mq` / `pin: numa` would use."""
    try:
        fio_version = local.fio_version()
    except IolabError:
        fio_version = None
    facts = host_mod.host_facts(fio_version)
    document: dict[str, Any] = {"host": to_jsonable(facts)}
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
        rows += [(f"tuning.{k}", v) for k, v in document["tuning_in_force"].items() if k == "governor"]
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
    """Write back host tuning left behind by an iolab run that was killed (every command also
    does this first). Journals live in $XDG_STATE_HOME/iolab/tuning."""
    done = tuning.restore_leftovers(discard=discard)
    if not done:
        click.echo(f"Nothing to restore (no left-over journal in {tuning.state_dir()}).")
    for left in done:
        report_restored(left, click.echo)


def report_restored(left: tuning.LeftOver, echo: Any) -> None:
    """One line per journal: whose it was and each value written back (values that were
    already right are not listed)."""
    owner = left.owner
    changes = []
    for r in left.restored:
        if r.error is not None:
            changes.append(f"{r.scope} {r.key}: FAILED ({r.error})")
        elif r.was is None:
            changes.append(f"{r.scope} {r.key}: device gone")
        elif r.was != r.value:
            changes.append(f"{r.scope} {r.key} {r.was} -> {r.value}")
    echo(f"Restored host tuning left by iolab (pid {owner.get('pid', '?')}, started {owner.get('started_at', '?')}):"
         f" {', '.join(changes) or 'every value was already back'}"
         + ("; journal kept, see `iolab restore --discard`" if left.kept else ""))
