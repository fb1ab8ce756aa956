"""``iolab crash-test``: cut the power (or kill the server) while fio writes, then verify with fio."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from .. import units
from ..errors import DataLost, RunFailed, UsageError
from ..report import results as results_report
from ..report.crashtest import crash_table
from ..run.plan import RunOptions
from ..workflows import crashtest
from ..workflows.crashtest import CutVerdict
from ..workflows.prober import Prober, describe
from . import emit_tables, err, store_of
from .options import Naming, TargetArgs, fio_command_options, format_option, run_options, target_options
from .progress import job_progress
from .saturate import fio_options
from .show import run_document


def _seconds(option: str, text: str) -> float:
    try:
        return units.parse_duration_us(text) / 1e6
    except ValueError as exc:
        raise UsageError(f"{option} {text!r}: {exc}") from None


@click.command("crash-test")
@click.argument("fio_args", nargs=-1, metavar="[FIO_OPTION=VALUE]...")
@target_options("The file or block device to write (on each --host, when given).")
@click.option("--cuts", type=click.IntRange(1, 10000), default=1, show_default=True, help="How many cuts.")
@click.option("--trigger-timeout", metavar="DURATION", help="Cut this long after fio starts (whole seconds).")
@click.option("--trigger-file", metavar="PATH", help="Cut when this file appears (fio removes it).")
@click.option("--trigger", "trigger", metavar="CMD", help="Run this here at the cut (a PDU, IPMI or hypervisor "
              "power-off), once fio has saved its verify state. This or --trigger-remote is required: without "
              "either nothing is cut, fio only stops.")
@click.option("--trigger-remote", metavar="CMD", help="Run this on each fio server's host at the cut.")
@click.option("--settle", default="0s", show_default=True, metavar="DURATION",
              help="Wait this long after the cut before looking for the hosts (a power-off takes time to act).")
@click.option("--wait-timeout", default="10m", show_default=True, metavar="DURATION",
              help="How long the hosts (or a local device) may take to come back.")
@click.option("--no-wipe", is_flag=True, help="Do not zero the region before each cut (see --help).")
@run_options()
@fio_command_options("run")
@click.option("--fail-on-loss", is_flag=True, help="Exit with code 3 when a cut lost an acknowledged write.")
@format_option()
@click.pass_context
def crash_test(ctx: click.Context, fio_args: Sequence[str], target: TargetArgs, cuts: int, settle: str,
               wait_timeout: str, no_wipe: bool, options: RunOptions, named: Naming,
               quiet: bool, no_observe: bool, fail_on_loss: bool, fmt: str, **trigger: Any) -> None:
    """Write with fio's verification, cut at a trigger, wait for the host, verify what was acknowledged.

    Each cut: zero the region (a block left by an earlier write would verify in fio's verify-only
    mode), write with verify=crc32c and fio's verify state, cut with fio's trigger options (at
    --trigger-timeout or --trigger-file fio saves its state, stops and runs --trigger here and
    --trigger-remote on each fio server), wait --settle and until the host answers, then verify the
    writes fio recorded as complete with verify_only and verify_state_load. Reported per cut: writes
    issued, acknowledged and checked, blocks lost or corrupt with their offsets, a verdict; over
    --cuts, the share of cuts that lost data with its 95 % Wilson interval. Writes need --destroy
    for a block device (the destructive guard applies).

    \b
    iolab crash-test -t ssd=/dev/sdc --destroy /dev/sdc size=1g --cuts 20 --trigger-timeout 20s \\
        --trigger 'ipmitool -H pdu power cycle' --settle 30s
    iolab crash-test -t vm=/dev/vdb --host 10.0.0.5 --ssh --destroy /dev/vdb --trigger-timeout 10s \\
        --trigger 'virsh reset guest1'
    """
    user = fio_options(fio_args, searched=False)  # crashtest.check names what it sets itself
    base = {**crashtest.DEFAULT_OPTIONS, **user}
    where = target.target(user)
    settings = crashtest.Settings(
        cuts=cuts, trigger_timeout=trigger["trigger_timeout"], trigger_file=trigger["trigger_file"],
        trigger=trigger["trigger"], trigger_remote=trigger["trigger_remote"], settle_s=_seconds("--settle", settle),
        wait_timeout_s=_seconds("--wait-timeout", wait_timeout), wipe=not no_wipe)
    crashtest.check(settings, base, bool(where.hosts))
    described = {"target": target.text, "hosts": list(target.hosts), "fio_options": base, **crashtest.record(
        [], settings, base)["crash_test"]["settings"]}
    with job_progress(quiet) as progress:
        prober = Prober(store_of(ctx), where, options, "crash-test", describe("iolab crash-test", described),
                        named.label, named.tags, progress, observe=not no_observe)
        with prober:
            done = crashtest.run_cuts(prober, base, settings,
                                      note=progress.note)
            prober.finish(crashtest.record(done, settings, base))
    assert prober.run_id is not None
    run = store_of(ctx).get_run(prober.run_id)
    err.print(f"Run [bold]{run.info.id}[/] stored in {store_of(ctx).display_url}")
    tables = [results_report.results_table(run), crash_table(run)]
    emit_tables([t for t in tables if t is not None], fmt, run_document(run))
    outcomes = crashtest.cut_outcomes(run)
    failed = [o.cut for o in outcomes if o.verdict == CutVerdict.FAILED]
    if failed:
        raise RunFailed(f"cut(s) {', '.join(map(str, failed))} failed", shown=True)  # the cuts table says why
    lost = [o.cut for o in outcomes if o.verdict == CutVerdict.LOST]
    if fail_on_loss and lost:
        raise DataLost(f"cut(s) {', '.join(map(str, lost))} lost acknowledged writes", shown=True)
