"""``iolab capture``, ``iolab replay``, ``iolab fit``: an application's block I/O, recorded, replayed, fitted."""

from __future__ import annotations

from collections.abc import Sequence

import click

from ..capture import record
from ..errors import UsageError
from ..report.capture import fingerprint_table
from ..units import parse_duration_us
from . import FORMATS, cli, emit_tables, err, parse_tags, store_of


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("device")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND...]")
@click.option("--duration", help="Record for this long (60s, 5m) instead of while COMMAND runs.")
@click.option("--label", help="A name for this capture, usable wherever a run id is.")
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", help="Tag the capture (repeatable).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.pass_context
def capture(ctx: click.Context, device: str, command: Sequence[str], duration: str | None, label: str | None,
            tags: Sequence[str], fmt: str) -> None:
    """Record DEVICE's block I/O and store it as a run (origin capture) with its fingerprint.

    Records every request the kernel issues to DEVICE (tracefs block tracepoints, in a private
    ftrace instance filtered by the device number; tracefs is mounted if it is not) for
    --duration, or while COMMAND runs. Only reads the device.

    \b
    iolab capture /dev/sdb --duration 60s --label oltp
    iolab capture /dev/loop3 --label sqlite -- python3 app.py
    """
    if command and command[0] == "--":
        command = command[1:]
    duration_s = parse_duration_us(duration) / 1e6 if duration else None
    what = f"while `{' '.join(command)}` runs" if command else f"for {duration}"
    err.print(f"Capturing the block I/O of {device} {what}…")
    captured = record.capture(device, duration_s, tuple(command))
    store = store_of(ctx)
    run_id = record.save(store, captured, label=label, tags=parse_tags(tags))
    err.print(f"Capture [bold]{run_id}[/] stored in {store.display_url}: {len(captured.trace):,} requests")
    if captured.trace.lost_events:
        err.print(f"[yellow]The kernel dropped {captured.trace.lost_events:,} events[/]: the trace is incomplete.")
    run = store.get_run(run_id)
    table = fingerprint_table(run)
    from .run import run_document
    emit_tables([table] if table else [], fmt, run_document(run))
    if captured.returncode:
        err.print(f"[red]{command[0]} exited with status {captured.returncode}[/]")
        ctx.exit(1)


def _no_command(command: Sequence[str]) -> None:
    if command:
        raise UsageError(f"unexpected arguments: {' '.join(command)}")
