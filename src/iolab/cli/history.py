"""``iolab history`` and ``iolab gate``: a workload across stored runs, its change points, and a CI gate."""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import click

from ..errors import UsageError
from . import FORMATS, emit_tables, err, report_unreadable, store_of

if TYPE_CHECKING:
    from ..analyze.history import History
    from ..store.database import Store, UnreadableRun

_AGO = re.compile(r"(\d+)\s*([hdw])")


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``2026-03-01``, ``2026-03-01T12:00`` (UTC unless it names a zone) or ``30d`` / ``12h`` / ``8w`` ago.
    Raises ``UsageError``."""
    ago = _AGO.fullmatch(text.strip().lower())
    if ago:
        hours = {"h": 1, "d": 24, "w": 168}[ago.group(2)] * int(ago.group(1))
        return (now or datetime.now(UTC)) - timedelta(hours=hours)
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"--since {text!r}: expected a date such as 2026-03-01, a time such as 2026-03-01T12:00, "
                         "or an age such as 30d, 12h, 8w") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def split_metrics(values: Sequence[str]) -> list[str] | None:
    """``--metric iops --metric clat_p99,bw`` -> ``["iops", "clat_p99", "bw"]``; None for the defaults."""
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    return names or None


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No garbage collection inside, and what was made inside is never looked at by it afterwards
    (``gc.freeze``): reading a history makes millions of objects (20,000 decoded reports), none of them
    cycles, and each full collection walks them all (a third of the time over 1,000 runs × 20 workloads,
    benchmarks/history.py), as would the first one after. Reference counting frees them as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def load_history(store: Store, selectors: Sequence[str] = (), targets: Sequence[str] = (),
                 workloads: Sequence[str] = (), since: datetime | None = None, host: str | None = None,
                 metrics: Sequence[str] | None = None,
                 on_unreadable: Callable[[UnreadableRun], None] | None = None) -> History:
    """The history of the stored runs ``selectors`` match (all runs when none), narrowed as
    ``Store.history`` and ``analyze.history.build`` narrow it, from the stored figures where they suffice
    and with the change points found before (``Store.change_points``). A run that cannot be read goes to
    ``on_unreadable`` (without it, it is raised). Raises ``UsageError`` when no series is left."""
    from ..analyze import history
    from ..store.database import UnreadableRun

    chosen = history.metrics_of(metrics)  # a misspelt metric fails before the database is read
    run_ids = sorted({i for s in selectors for i in store.resolve(s)}) if selectors else None
    with gc_paused():
        stored = store.history(run_ids, since, targets, workloads, figures=history.figured(chosen))
        for bad in stored.unreadable:
            if on_unreadable is None:
                raise bad
            on_unreadable(bad)
        found = history.select(history.build(stored, [m.name for m in chosen], host, store.change_points()),
                               workloads)
    for run_id, why in found.unreadable:
        bad = UnreadableRun(run_id, why)
        if on_unreadable is None:
            raise bad
        on_unreadable(bad)
    if not found.series:
        asked = [f"runs {' '.join(selectors)}" if selectors else "all runs"]
        asked += [f"{flag} {', '.join(v)}" for flag, v in (("target", targets), ("workload", workloads)) if v]
        asked += [f"since {since:%Y-%m-%d %H:%M}"] if since else []
        asked += [f"host {host}"] if host else []
        raise UsageError(f"no stored result makes a series ({'; '.join(asked)})",
                         hint="a series needs results fio finished (ok) with a report; list runs with: iolab runs")
    return found


def history_options(command: Callable[..., object]) -> Callable[..., object]:
    """``--target``, ``--workload``, ``--metric``, ``--since`` and ``--host``: what narrows a history."""
    for option in reversed((
        click.option("--target", "targets", multiple=True, metavar="T", help="Only this target (repeatable)."),
        click.option("--workload", "workloads", multiple=True, metavar="W",
                     help="Only this workload: its fio job name or the name it was stored under (repeatable)."),
        click.option("--metric", "metrics", multiple=True, metavar="M",
                     help="Metrics, repeatable or comma-separated: iops, bw, {clat,lat,slat}_{mean,max,pNN}, "
                          "cpu_us_per_io[@HOST] [default: iops,bw,clat_mean,clat_p99,cpu_us_per_io]"),
        click.option("--since", metavar="DATE",
                     help="Only results from DATE on (2026-03-01) or from an age ago (30d)."),
        click.option("--host", metavar="H", help="Only runs on this host (the host name a run recorded, or an "
                                                 "import's tag host=H)."),
    )):
        command = option(command)
    return command


@click.command()
@click.argument("selectors", nargs=-1, metavar="[SELECTOR]...")
@history_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.pass_context
def history(ctx: click.Context, selectors: Sequence[str], targets: Sequence[str], workloads: Sequence[str],
            metrics: Sequence[str], since: str | None, host: str | None, fmt: str) -> None:
    """Show each workload's history across stored runs: change points, what changed at each, and the level
    of each stretch.

    For each series: its points in time order, its change points with their size, significance and
    what changed between the runs either side (kernel, fio, device, scheduler, tuning, suite …),
    and each stretch's mean with its 95 % interval.

    SELECTORs (run ids, `latest`, labels, tags KEY=VALUE) limit the runs; without one, all runs
    count, whatever their origin (run, import, capture). A series is one workload × target × host ×
    metric; a run whose job options are not comparable starts a new series.

    \b
    iolab history
    iolab history nightly --workload randread-4k --metric iops,clat_p99
    iolab history --since 90d --host db-07 --format json
    """
    import orjson

    from ..report import history as history_report

    found = load_history(store_of(ctx), selectors, targets, workloads, parse_since(since) if since else None, host,
                         split_metrics(metrics), lambda exc: report_unreadable(ctx, exc))
    if fmt == "json":  # orjson: the json module's indenting writer takes seconds for 80,000 points
        click.echo(orjson.dumps(history_report.history_document(found), option=orjson.OPT_INDENT_2).decode())
    else:
        emit_tables(history_report.history_tables(found), fmt)


@click.command()
@click.argument("run", metavar="RUN")
@click.option("--metric", "metrics", multiple=True, metavar="M",
              help="Metrics, repeatable or comma-separated [default: iops,bw,clat_mean,clat_p99,cpu_us_per_io].")
@click.option("--max-regression", default="5%", show_default=True, metavar="PCT",
              help="A run worse than its last stable segment by more than this (and significantly) fails the gate.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.pass_context
def gate(ctx: click.Context, run: str, metrics: Sequence[str], max_regression: str, fmt: str) -> None:
    """Judge RUN against the history before it, for CI: exit 3 on a significant regression, 2 without
    history to judge it by.

    Exit 3 when RUN is significantly worse than the last stable segment of one of its series by more
    than --max-regression, 2 when no series has the history to judge it by, 0 otherwise.

    RUN is a run id, `latest`, a label or a tag KEY=VALUE matching one run. Each series of RUN is
    segmented as `iolab history` does; RUN is tested against the runs since the last change point
    (one-sided t-test of one more run, on logs, Holm-adjusted over the series).

    \b
    iolab run nightly.yaml --label nightly && iolab gate latest
    iolab gate latest --metric iops,clat_p99 --max-regression 10%
    """
    from ..analyze import gate as gate_mod
    from ..report import history as history_report

    store = store_of(ctx)
    ids = store.resolve(run)
    if len(ids) > 1:
        raise UsageError(f"{run!r} matches {len(ids)} runs ({ids[0]} … {ids[-1]}); the gate judges one",
                         hint=f"give one run: its id, or latest (the newest is {ids[-1]})")
    bound = parse_pct(max_regression, "--max-regression")
    try:  # the run's own series say which targets and fio jobs to read the history of
        own = load_history(store, (str(ids[0]),), metrics=split_metrics(metrics))
    except UsageError:
        raise UsageError(f"run {ids[0]} has no result with a fio report to judge",
                         hint="the gate judges a run whose jobs fio finished") from None
    targets = sorted({s.key.target for s in own.series})
    jobs = sorted({s.key.workload for s in own.series})
    found = load_history(store, (), targets, jobs, None, None, split_metrics(metrics),
                         lambda exc: report_unreadable(ctx, exc))
    verdict = gate_mod.judge(found, ids[0], bound)
    emit_tables([history_report.gate_table(verdict)], fmt, history_report.gate_document(verdict))
    gate_mod.enforce(verdict)
    err.print(f"run {verdict.run_id}: no regression in {verdict.judged} series judged", highlight=False)


def parse_pct(text: str, flag: str) -> float:
    """``5%`` or ``5`` (percent) -> 0.05. Raises ``UsageError`` naming ``flag``."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected a percentage such as 5%") from None
    if not 0 <= value < 100:
        raise UsageError(f"{flag} {text!r}: expected a percentage from 0 up to 100")
    return value / 100
