"""``iolab capture``, ``iolab replay``, ``iolab fit``: an application's block I/O, recorded, replayed, fitted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import click

from .. import outputs
from ..errors import Interrupted, IolabError, RunFailed, UsageError
from ..model import Run
from ..report.capture import fingerprint_table
from ..units import parse_duration_us
from ..workflows.capture import record
from ..workflows.capture.summary import Fingerprint
from . import emit_tables, err, store_of
from .options import Naming, db_option, destroy_option, fio_command_options, format_option, naming_options
from .show import print_run, run_document

FITTED = "the fitted job file"


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("device")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND...]")
@click.option("--duration", help="Record for this long (60s, 5m) instead of while COMMAND runs.")
@naming_options("capture")
@db_option
@format_option()
@click.pass_context
def capture(ctx: click.Context, device: str, command: Sequence[str], duration: str | None, named: Naming,
            fmt: str) -> None:
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
    if (duration is None) == (not command):
        raise UsageError("capture for a --duration, or while a command runs (-- COMMAND …), not both or neither",
                         hint="iolab capture /dev/sdb --duration 60s, or iolab capture /dev/sdb -- COMMAND ARGS")
    duration_s = _duration_us("--duration", duration) / 1e6 if duration else None
    if duration_s is not None and duration_s <= 0:  # refused before tracing starts: it would store an empty run
        raise UsageError(f"--duration {duration}: a capture needs a duration above zero",
                         hint="iolab capture DEVICE --duration 60s")
    what = f"while `{' '.join(command)}` runs" if command else f"for {duration}"
    err.print(f"Capturing the block I/O of {device} {what}…")
    captured = record.capture(device, duration_s, tuple(command))
    store = store_of(ctx)
    run_id = record.save(store, captured, label=named.label, tags=named.tags)
    err.print(f"Capture [bold]{run_id}[/] stored in {store.display_url}: {len(captured.trace):,} requests"
              f" ({captured.status})")
    if captured.trace.lost_events:
        err.print(f"[yellow]The kernel dropped {captured.trace.lost_events:,} events[/]: the trace is incomplete.")
    run = store.get_run(run_id)
    fp = record.stored_fingerprint(run)
    if fp is not None and fp.empty:
        err.print(f"[yellow]No read or write request reached {device}[/] in the {fp.duration_s:.2f} s captured: "
                  "nothing to replay or fit (is it the device under the application's files? "
                  "findmnt -no SOURCE PATH names it).")
    table = fingerprint_table(run)
    emit_tables([table] if table else [], fmt, run_document(run))
    if captured.interrupted:
        err.print(f"[yellow]Interrupted ({captured.interrupted})[/] after {captured.trace.duration_ns / 1e9:.2f} s: "
                  f"what was captured is stored as run {run_id}, status interrupted.")
        raise Interrupted(f"capture interrupted by {captured.interrupted}", shown=True)
    if captured.returncode:
        kept = " (its trace can be shown, replayed and fitted)" if fp is not None and not fp.empty else ""
        err.print(f"[red]{command[0]} exited with status {captured.returncode}[/]: capture {run_id} is stored as "
                  f"failed{kept}.")
        raise IolabError(f"{command[0]} exited with status {captured.returncode}", shown=True)


def _duration_us(option: str, text: str, unit: str = "s") -> int:
    try:
        return parse_duration_us(text, unit)
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected a duration such as 60s, 500ms or 5m") from None


_process_option = click.option(
    "--process", "processes", multiple=True, metavar="NAME",
    help="Only the requests of this task (its name as the fingerprint's processes show it, or a pid; "
         "repeatable), and of kernel threads (the journal thread, the block layer's workers write for it).")


def _one_capture(ctx: click.Context, selector: str) -> Run:
    store = store_of(ctx)
    ids = store.resolve(selector)
    if len(ids) != 1:
        raise UsageError(f"{selector!r} matches {len(ids)} runs; name one capture",
                         hint="use its id (iolab runs lists them)")
    run = store.get_run(ids[0])
    record.capture_result_id(run)  # raises when it is not a capture
    return run


@click.command()
@click.argument("capture_run", metavar="CAPTURE")
@click.option("-t", "--target", "target", required=True, metavar="NAME=DEVICE",
              help="Replay onto this block device (its contents are destroyed).")
@destroy_option("Allow writes to this block device (required).")
@click.option("--as-fast-as-possible", "fast", is_flag=True,
              help="Issue as fast as the recorded depth allows (replay_no_stall), not at the recorded times.")
@click.option("--time-scale", type=click.FloatRange(0.01, 100.0), default=1.0, show_default=True,
              help="Stretch the recorded timing by this factor (2: half as fast; replay_time_scale=50).")
@click.option("--timing-quantum", "quantum", default="1us", show_default=True,
              help="Round the recorded issue times down to this (1us: as traced; larger quanta make fio sleep "
                   "less often but issue in bursts).")
@click.option("--repeat", type=click.IntRange(1, 1000), default=1, show_default=True, help="Replays in a row.")
@_process_option
@fio_command_options("replay")
@format_option()
@click.pass_context
def replay(ctx: click.Context, capture_run: str, target: str, destroy: Sequence[str], fast: bool, time_scale: float,
           quantum: str, repeat: int, processes: Sequence[str], named: Naming, quiet: bool, no_observe: bool,
           fmt: str) -> None:
    """Replay a capture on other storage with fio; the result is a run like any other.

    CAPTURE is a capture's id, label or tag. The capture's requests are replayed at their
    recorded times (fio read_iolog, iolog v3, replay_redirect onto the target), one fio reporting
    group per size class (bs-4k, bs-64k, …) running together, so results come per class and
    direction and `iolab compare` pairs two replays (or a replay and the capture). Window by
    window (about 0.25 s of the trace), a class's requests are dealt to lanes, one fio job each at
    iodepth=1, as many as its requests overlapped (so fio reaps each completion as it comes and no
    job falls behind the trace's clock). A target smaller than the traced range is replayed with
    replay_scale, as the plan says.

    \b
    iolab replay oltp --target ssd=/dev/sdc --destroy /dev/sdc --label oltp-on-ssd
    iolab replay oltp --target hdd=/dev/sdd --destroy /dev/sdd --as-fast-as-possible --repeat 3
    iolab compare oltp-on-ssd oltp-on-hdd
    """
    from ..describe.observe import with_args
    from ..report.pace import behind_summary
    from ..run import pipeline  # here: capture itself runs no fio
    from ..run.plan import RunOptions
    from ..workflows.capture import plan as plan_mod
    from ..workflows.capture.replay import ReplaySettings
    from .plan import Shown
    from .progress import job_progress

    name, sep, path = target.partition("=")
    if not sep or not name or not path:
        raise UsageError(f"--target {target!r}: expected NAME=DEVICE")
    run = _one_capture(ctx, capture_run)
    store = store_of(ctx)
    settings = ReplaySettings(as_fast_as_possible=fast, rate_pct=max(1, round(100 / time_scale)),
                              quantum_us=max(1, _duration_us("--timing-quantum", quantum, "ms")))
    planned = plan_mod.replay_suite(store, run, name, path, settings, tuple(processes))
    suite = replace(planned.suite, observe=with_args(planned.suite.observe, (), off=True)) if no_observe \
        else planned.suite
    done = pipeline.run(store, suite, RunOptions(destroy=tuple(destroy)), repeat=repeat, label=named.label,
                        tags={"capture": str(run.info.id), **named.tags}, warnings=planned.caveats,
                        watch=Shown(job_progress(quiet), quiet=quiet, stored_as="Replay", notes=planned.notes),
                        planned={"replay": planned.planned})
    print_run(done, fmt)
    if behind := behind_summary(done):
        err.print(f"[yellow]{behind}[/]")
    if done.info.status != "complete":
        err.print(f"[red]The replay failed[/]; fio's messages are stored (iolab show {done.info.id}).")
        raise RunFailed(f"the replay {done.info.id} failed", shown=True)


@click.command()
@click.argument("capture_run", metavar="CAPTURE")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), required=True,
              help="The fio job file to write.")
@click.option("--distribution", type=click.Choice(("auto", "zipf", "pareto", "zoned", "random")), default="auto",
              show_default=True, help="random_distribution for the skew (auto: zipf, or uniform when not skewed).")
@click.option("--check", "check", metavar="NAME=DEVICE",
              help="Replay the capture and run the fitted job on this block device through iolab (destroying its "
                   "contents), capturing each, and print the fit error (fitted vs replay) beside the device "
                   "difference (replay vs original).")
@destroy_option("Allow writes to this block device (for --check).")
@click.option("--replay", "replay_run", metavar="RUN", help="With --check: a replay of the capture on the check "
              "device to measure the fitted job's IOPS and latency against, instead of replaying it again (its "
              "fingerprint is then not known: the fingerprint's fit error is against the original).")
@_process_option
@fio_command_options("--check run")
@format_option()
@click.pass_context
def fit(ctx: click.Context, capture_run: str, output: str, distribution: str, check: str | None,
        destroy: Sequence[str], replay_run: str | None, processes: Sequence[str], named: Naming, quiet: bool,
        no_observe: bool, fmt: str) -> None:
    """Write a fio job file that reproduces a capture's fingerprint; with --check, show how close it is.

    The job has bssplit, rwmixread, percentage_random, random_distribution for the skew (and
    norandommap, so that fio issues the sizes whole), iodepth (closed loop) or the traced rate (open
    loop: rate_iops, or rate in bytes/s for several sizes, as fio paces rate_iops by the smallest),
    fsync for flushes, runtime = the capture's active span in whole seconds. Its target is
    filename=${TARGET}: `TARGET=/dev/sdX fio job.fio` runs it with plain fio (without TARGET fio
    refuses it rather than write a file in the current directory), `iolab run job.fio --target …`
    anywhere.

    With --check, the capture is replayed on the check device and the fitted job run there, each
    captured: the fit error is the fitted job against that replay, the device difference the replay
    against the original.

    \b
    iolab fit oltp -o oltp.fio
    iolab fit oltp -o oltp.fio --check scratch=/dev/sdc --destroy /dev/sdc
    """
    from pathlib import Path

    outputs.check(output, FITTED)  # refused before the capture is read and fitted
    from ..workflows.capture import fit as fit_mod

    run = _one_capture(ctx, capture_run)
    original = _fingerprint(ctx, run, processes)
    which = f"capture {run.info.id}" + (f" (processes {', '.join(processes)})" if processes else "")
    job = fit_mod.fit_job(original, distribution, what=which)
    text = job.text([f"fitted by iolab to {which} ({(run.info.options or {}).get('device', '')})",
                     *_left_out_note(original), job.reason], Path(output).name)
    outputs.write(output, FITTED, text)
    err.print(f"{output}: {job.reason}")
    if check is None:
        click.echo(text, nl=False)
        return
    name, sep, device = check.partition("=")
    if not sep or not name or not device:
        raise UsageError(f"--check {check!r}: expected NAME=DEVICE")
    _check(ctx, run, original, text, output, (name, device), destroy, replay_run, processes, named, quiet,
           no_observe, fmt)


def _check(ctx: click.Context, run: Run, original: Fingerprint, text: str, output: str, target: tuple[str, str],
           destroy: Sequence[str], replay_run: str | None, processes: Sequence[str], named: Naming, quiet: bool,
           no_observe: bool, fmt: str) -> None:
    """``fit --check``: the replay and the fitted job on the check device (``workflows.capture.check``),
    then the fingerprints and the performance side by side."""
    from ..report.capture import closeness_table, performance_table
    from ..report.pace import pace_table
    from ..workflows.capture import fit as fit_mod
    from ..workflows.capture.check import check_fit
    from .plan import Shown
    from .progress import job_progress

    given = _one_run(ctx, replay_run) if replay_run else None
    done = check_fit(store_of(ctx), output, target[0], target[1], destroy, run,
                     watch=Shown(job_progress(quiet), quiet=quiet, stored_as=None), label=named.label,
                     tags=named.tags, observe=not no_observe, replay_run=given, processes=processes)
    err.print(f"Replay: run {done.replay_run.info.id}"
              + (f"; its capture: run {done.replay_capture.info.id}" if done.replay_capture else "")
              + f". Fitted job: run {done.fitted_run.info.id}; its capture: run {done.fitted_capture.info.id}")
    fitted = record.stored_fingerprint(done.fitted_capture)
    replayed = record.stored_fingerprint(done.replay_capture) if done.replay_capture else None
    assert fitted is not None
    rows = fit_mod.closeness(original, fitted, replayed)
    paced = pace_table(done.replay_run)  # a device difference of a replay behind pace is partly the replayer's
    tables = [closeness_table(rows), performance_table(run, done.fitted_run, done.replay_run),
              *((paced,) if paced is not None else ())]
    emit_tables(tables, fmt, {"job": text, "closeness": [
        {"metric": r.metric, "unit": r.unit, "original": r.original, "replayed": r.replayed, "fitted": r.fitted,
         "error": r.error, "device_difference": r.device} for r in rows],
        "fitted_run": done.fitted_run.info.id, "fitted_capture": done.fitted_capture.info.id,
        "replay_run": done.replay_run.info.id,
        "replay_capture": done.replay_capture.info.id if done.replay_capture else None})


def _fingerprint(ctx: click.Context, run: Run, processes: Sequence[str]) -> Fingerprint:
    """The capture's stored fingerprint, or with ``processes`` the fingerprint of their requests."""
    if not processes:
        stored = record.stored_fingerprint(run)
        assert stored is not None
        return stored
    from ..workflows.capture.fingerprint import fingerprint
    from ..workflows.capture.trace import of_processes
    trace = record.load_trace(store_of(ctx), run)
    unknown = [p for p in processes if p not in trace.comms.values() and not (p.isdigit() and int(p) in trace.comms)]
    if unknown:
        raise UsageError(f"capture {run.info.id} has no task {', '.join(map(repr, unknown))}",
                         hint="its tasks: " + ", ".join(sorted(set(trace.comms.values()))[:20]))
    return fingerprint(of_processes(trace, processes))


def _left_out_note(fp: Fingerprint) -> list[str]:
    if not fp.left_out:
        return []
    return ["left out: " + ", ".join(f"{name} {count:,}" for name, count in list(fp.left_out.items())[:8])
            + " requests"]


def _one_run(ctx: click.Context, selector: str) -> Run:
    ids = store_of(ctx).resolve(selector)
    return store_of(ctx).get_run(ids[-1])
