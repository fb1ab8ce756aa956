"""``iolab history`` and ``iolab gate``: a workload across stored runs, its change points, and a CI gate."""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import click

from ..errors import UsageError
from . import FORMATS, emit_tables, err, report_unreadable, store_of
from .options import db_option

if TYPE_CHECKING:
    from ..analyze import gate as gate_mod
    from ..analyze.history import History
    from ..model import Accepted
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
                 on_unreadable: Callable[[UnreadableRun], None] | None = None,
                 run_ids: Sequence[int] | None = None) -> History:
    """The history of the stored runs ``selectors`` match (or the runs ``run_ids``; all runs when
    neither), narrowed as ``Store.history`` and ``analyze.history.build`` narrow it, from the stored
    figures where they suffice, with the change points found before (``Store.change_points``) and the
    changes accepted (``store.history.Acceptances``). A run that cannot be read goes to
    ``on_unreadable`` (without it, it is raised). Raises ``UsageError`` when no series is left."""
    from ..analyze import history
    from ..store.database import UnreadableRun
    from ..store.history import Acceptances

    chosen = history.metrics_of(metrics)  # a misspelt metric fails before the database is read
    if selectors:
        run_ids = sorted({i for s in selectors for i in store.resolve(s)})
    with gc_paused():
        stored = store.history(run_ids, since, targets, workloads, figures=history.figured(chosen))
        for bad in stored.unreadable:
            if on_unreadable is None:
                raise bad
            on_unreadable(bad)
        accepted = Acceptances(store.engine, store.guard).all()
        found = history.select(history.build(stored, [m.name for m in chosen], host, store.change_points(),
                                             accepted), workloads)
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
@db_option
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
              help="A run worse than its baseline by more than this (and significantly) fails the gate; a run off "
                   "the baseline by more than this joins no later baseline until accepted.")
@click.option("--baseline", "baselines", multiple=True, metavar="SELECTOR",
              help="Judge against these runs (ids, labels, tags KEY=VALUE; repeatable) instead of the history.")
@click.option("--label", metavar="L", help="Only runs labelled L (and RUN) make the history.")
@click.option("--since", metavar="DATE", help="Only results from DATE on (2026-03-01) or an age ago (30d).")
@click.option("--all", "every", is_flag=True, help="Show every series, not only the failing ones.")
@click.option("--format", "fmt", type=click.Choice((*FORMATS, "junit")), default="table", show_default=True,
              help="junit: JUnit XML, one test case per series, a failure per regression (for CI test reports).")
@db_option
@click.pass_context
def gate(ctx: click.Context, run: str, metrics: Sequence[str], max_regression: str, baselines: Sequence[str],
         label: str | None, since: str | None, every: bool, fmt: str) -> None:
    """Judge RUN against the history before it, for CI: exit 3 on a significant regression, 2 without
    history to judge it by.

    Exit 3 when RUN is significantly worse than the baseline of one of its series by more than
    --max-regression, 2 when no series has the history to judge it by, 0 otherwise.

    RUN is a run id, `latest`, a label or a tag KEY=VALUE matching one run. The history is the runs of
    RUN's suite (the same name and text; imported outputs, which have no suite, with the other imports),
    narrowed by --label and --since. A series' baseline is its runs at its accepted level: a run off that
    level by more than --max-regression never joins it, so a regression keeps failing until someone
    accepts it as intended (iolab accept RUN --reason TEXT), which starts a new level. RUN is tested
    against its baseline (one-sided t-test of one more run, on logs, Holm-adjusted over the series).

    \b
    iolab run nightly.yaml --label nightly && iolab gate latest --label nightly
    iolab gate latest --metric iops,clat_p99 --max-regression 10% --format junit > gate.xml
    iolab gate 42 --baseline 30 --baseline 31 --baseline 32
    """
    from ..analyze import gate as gate_mod
    from ..report import history as history_report
    from ..store.history import Acceptances

    store = store_of(ctx)
    run_id = one_run(store, run)
    bound = parse_pct(max_regression, "--max-regression")
    pinned = sorted({i for s in baselines for i in store.resolve(s)} - {run_id}) if baselines else None
    verdict = judged(ctx, store, run_id, metrics, bound, pinned, label, since,
                     Acceptances(store.engine, store.guard).all())
    if fmt == "junit":
        click.echo(history_report.gate_junit(verdict), nl=False)
    else:
        emit_tables([history_report.gate_table(verdict, every)], fmt, history_report.gate_document(verdict))
    gate_mod.enforce(verdict)
    err.print(f"run {verdict.run_id}: no regression in {verdict.judged} series judged", highlight=False)


def judged(ctx: click.Context, store: Store, run_id: int, metrics: Sequence[str], bound: float,
           pinned: list[int] | None, label: str | None, since: str | None,
           accepted: Mapping[int, Accepted]) -> gate_mod.Gate:
    """The gate of run ``run_id`` (``analyze.gate.judge``) against the history ``gate`` reads: the runs
    ``pinned``, or those of its suite up to it. Raises ``UsageError`` when the run has no fio report."""
    from ..analyze import gate as gate_mod

    try:  # the run's own series say which targets and fio jobs to read the history of
        own = load_history(store, (str(run_id),), metrics=split_metrics(metrics))
    except UsageError:
        raise UsageError(f"run {run_id} has no result with a fio report to judge",
                         hint="the gate judges a run whose jobs fio finished") from None
    targets = sorted({s.key.target for s in own.series})
    jobs = sorted({s.key.workload for s in own.series})
    runs = [*pinned, run_id] if pinned is not None else same_suite(store, run_id, label)
    found = load_history(store, (), targets, jobs, parse_since(since) if since else None, None, split_metrics(metrics),
                         lambda exc: report_unreadable(ctx, exc), run_ids=runs)
    return gate_mod.judge(found, run_id, bound, accepted=accepted, pinned=pinned)


def one_run(store: Store, selector: str) -> int:
    """The one run ``selector`` names. Raises ``UsageError`` when it names several."""
    ids = store.resolve(selector)
    if len(ids) > 1:
        raise UsageError(f"{selector!r} matches {len(ids)} runs ({ids[0]} … {ids[-1]}); give one",
                         hint=f"give one run: its id, or latest (the newest is {ids[-1]})")
    return ids[0]


def same_suite(store: Store, run_id: int, label: str | None = None) -> list[int]:
    """The runs of run ``run_id``'s suite, up to it: the same suite name and text (for runs without a suite
    text, such as imports, the same origin); with ``label``, only those labelled so (and the run)."""
    from ..model import RunInfo

    infos = [r for r in store.list_runs() if isinstance(r, RunInfo)]
    own = next(r for r in infos if r.id == run_id)
    if own.suite_text:
        same = [r for r in infos if (r.suite_name, r.suite_text) == (own.suite_name, own.suite_text)]
    else:
        same = [r for r in infos if not r.suite_text and r.origin == own.origin]
    return sorted(r.id for r in same if r.id <= run_id and (label is None or r.label == label or r.id == run_id))


@click.command()
@click.argument("run", metavar="RUN")
@click.option("--reason", required=True, metavar="TEXT", help="Why the change is intended (shown with it).")
@click.option("--max-regression", default="5%", show_default=True, metavar="PCT",
              help="The gate's bound: RUN must be off its baseline by more than this in some series.")
@db_option
@click.pass_context
def accept(ctx: click.Context, run: str, reason: str, max_regression: str) -> None:
    """Accept the change RUN shows as intended: the gate judges its series against their new level from it on.

    A run the gate found worse (or better) than its baseline never joins a baseline on its own, so a
    regression fails the gate night after night. Accepting it records the change with its reason, who
    and when (shown by the gate, history and the history page); the stretch of runs off the old level
    that ends at RUN becomes the new baseline. Until that level has the runs to test by, a run worse than
    it by more than the bound still fails. A run within the bound of its baseline in every series shows
    no change to accept and is refused (exit 2): accepting it would restart the baseline and hide the
    next regression.

    \b
    iolab gate latest || iolab accept latest --reason "new controller firmware: writes are slower by design"
    """
    import getpass
    import socket

    from ..analyze.gate import GateVerdict
    from ..model import Accepted
    from ..store.history import Acceptances

    if not reason.strip():
        raise UsageError("--reason is empty: say why the change is intended")
    store = store_of(ctx)
    run_id = one_run(store, run)
    acceptances = Acceptances(store.engine, store.guard)
    others = {k: v for k, v in acceptances.all().items() if k != run_id}
    bound = parse_pct(max_regression, "--max-regression")
    found = judged(ctx, store, run_id, (), bound, None, None, None, others)
    if found.judged and not any(r.verdict in (GateVerdict.REGRESSION, GateVerdict.WORSE, GateVerdict.BETTER)
                                for r in found.rows):
        raise UsageError(f"run {run_id} is within {bound:.0%} of its baseline in each of its {found.judged} series "
                         "judged: it shows no change to accept",
                         hint=f"accept the run the gate failed (iolab gate {run_id} --all shows each series), or "
                              "give the gate's --max-regression if it is smaller")
    accepted = Accepted(run_id, reason.strip(), datetime.now(UTC), f"{getpass.getuser()}@{socket.gethostname()}")
    replaced = acceptances.accept(accepted)
    if replaced is not None:
        err.print(f"run {run_id} was accepted before ({replaced.reason!r}, {replaced.by}); the reason is replaced",
                  style="yellow", markup=False, highlight=False)
    click.echo(f"run {run_id}: change accepted as intended: {accepted.reason}")


def parse_pct(text: str, flag: str) -> float:
    """``5%`` or ``5`` (percent) -> 0.05. Raises ``UsageError`` naming ``flag``."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected a percentage such as 5%") from None
    if not 0 <= value < 100:
        raise UsageError(f"{flag} {text!r}: expected a percentage from 0 up to 100")
    return value / 100
