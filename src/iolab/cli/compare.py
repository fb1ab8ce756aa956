"""``iolab compare``: stored runs side by side, with statistics and verdicts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from ..analyze import axes
from ..analyze import compare as compare_mod
from ..analyze.metrics import DEFAULT_METRICS
from ..errors import RegressionFound, UsageError
from ..model import Run
from ..report import comparison as comparison_report
from ..report import warmup as warmup_report
from ..report.saturation import comparison_table
from ..store.database import Store
from ..store.records import UnreadableRun
from . import emit_tables, err, read_runs, report_unreadable, store_of
from .options import db_option, format_option


def parse_threshold(text: str) -> float:
    """``5%`` or ``5`` (percent) -> 0.05. Raises ``UsageError``."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise UsageError(f"--threshold {text!r}: expected a percentage such as 5%") from None
    if value < 0:
        raise UsageError(f"--threshold {text!r}: must not be negative")
    return value / 100


def comparison_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--metric``, ``--threshold``, ``--ignore``, ``--by`` and ``--baseline``, shared by ``compare`` and
    ``report``."""
    for option in reversed((
        click.option("--metric", "metrics", metavar="LIST",
                     help="Comma-separated metrics: iops, bw, {clat,lat,slat}_{mean,max,pNN}, and the observers' "
                          "cpu_us_per_io[@HOST], cpu_util[@HOST] (HOST: local, a fio server, a watched host, a target) "
                          f"[default: {','.join(DEFAULT_METRICS)}]"),
        click.option("--threshold", default="5%", show_default=True, metavar="PCT",
                     help="Smaller relative changes are 'unchanged'."),
        click.option("--ignore", "ignore", multiple=True, metavar="OPTION",
                     help="Compare results even though this fio option differs (repeatable)."),
        click.option("--by", metavar="AXIS",
                     help="Compare inside one selection: a side per value of AXIS (target, pin, tune.KNOB or a fio "
                          "option such as numjobs, iodepth, bs); a fio option axis is ignored in pairing."),
        click.option("--baseline", metavar="VALUE",
                     help="With --by: the value the others are compared with [default: the first run]."),
    )):
        command = option(command)
    return command


def metric_names(metrics: str | None) -> list[str] | None:
    """``--metric iops,clat_p99`` -> ``["iops", "clat_p99"]``; None for the defaults."""
    return [m.strip() for m in metrics.split(",") if m.strip()] if metrics else None


def resolve(store: Store, selector: str) -> tuple[list[int], str | None]:
    """The run ids ``selector`` matches (``Store.resolve``) and, for ``RUN:TARGET`` (a selector that does
    not match as a whole), the target named after the last ``:``. Raises ``UsageError``."""
    try:
        return store.resolve(selector), None
    except UsageError:
        run, colon, target = selector.rpartition(":")
        if not (colon and run and target):
            raise
    try:
        return store.resolve(run), target
    except UsageError:
        raise UsageError(f"no run matches {selector!r} (nor {run!r} of RUN:TARGET)",
                         hint="give a run id, 'latest', a range 3-7, a list 3,5,9, a label or key=value tag, "
                              "optionally :TARGET; list runs with: iolab runs") from None


def sides_of(store: Store, selectors: Sequence[str], least: int = 1,
             on_unreadable: Callable[[UnreadableRun], None] | None = None
             ) -> list[tuple[compare_mod.Side, list[Run]]]:
    """One side per selector (``RUN`` or ``RUN:TARGET``, ``resolve``), with every run it matches (pooled
    as repetitions; narrowed to TARGET's results). A run that cannot be read goes to ``on_unreadable``
    and is left out (without it, ``UnreadableRun`` is raised), and so is a side left without runs.
    Raises ``UsageError`` for a selector that matches nothing, or when fewer than ``least`` sides
    remain."""
    sides = []
    for selector in selectors:
        ids, target = resolve(store, selector)
        runs = read_runs(store, ids, on_unreadable)
        if target is not None and runs:
            runs = axes.on_target(runs, target, selector)
        if not runs:
            err.print(f"{selector!r} is left out: none of its runs can be read", style="red", markup=False)
            continue
        labels = tuple(dict.fromkeys(r.info.label for r in runs if r.info.label))
        sides.append((compare_mod.Side(selector, tuple(r.info.id for r in runs), labels), runs))
    if len(sides) < least:
        raise UsageError(f"{'no side' if not sides else 'only one side'} left to compare: the runs of the others "
                         "cannot be read (see above)", hint="list runs with: iolab runs")
    return sides


def split_by(sides: Sequence[tuple[compare_mod.Side, list[Run]]], by: str | None, baseline: str | None
             ) -> tuple[list[tuple[compare_mod.Side, list[Run]]], tuple[str, ...]]:
    """With ``--by AXIS``: the one selection's results as a side per value of the axis (``analyze.axes``),
    named ``SELECTOR:TARGET`` (``--by target``, a selector that names each side again) or
    ``AXIS=VALUE`` (``scheduler=none`` for ``tune.scheduler``), and the options pairing ignores for it.
    Without: ``sides`` as they are. Raises ``UsageError`` for ``--by`` with more than one selector and for
    ``--baseline`` without ``--by``."""
    if by is None:
        if baseline is not None:
            raise UsageError("--baseline goes with --by: it names the value of the axis the others are compared with")
        return list(sides), ()
    if len(sides) != 1:
        raise UsageError(f"--by {by} splits one selection: give one RUN",
                         hint="a selector matching several runs pools them as repetitions of every side")
    ((side, runs),) = sides
    found = axes.split(runs, by, baseline)
    if found.without:
        err.print(f"{found.without} result(s) set no {by}: left out", markup=False, highlight=False)
    name = by.removeprefix("tune.")
    return [(compare_mod.Side(f"{side.selector}:{value}" if by == "target" else f"{name}={value}",
                              tuple(r.info.id for r in split_runs), side.labels), list(split_runs))
            for value, split_runs in found.sides], found.ignore


@click.command()
@click.argument("selectors", nargs=-1, required=True, metavar="A [B C ...]")
@comparison_options
@db_option
@format_option()
@click.option("--fail-on-regression", is_flag=True,
              help="Exit with code 3 when a metric is significantly worse by more than the threshold.")
@click.pass_context
def compare(ctx: click.Context, selectors: Sequence[str], metrics: str | None, threshold: str,
            ignore: Sequence[str], by: str | None, baseline: str | None, fmt: str, fail_on_regression: bool) -> None:
    """Compare stored runs: each of B, C, … against A (the baseline). With --by, the targets (tuning
    values, pin modes, numjobs …) of one run against each other.

    A, B, … are run ids, `latest`, labels or tags KEY=VALUE, each optionally narrowed to one target
    (RUN:TARGET); a selector matching several runs pools them as repetitions of one side. Results
    pair by workload (canonical fio options and direction); per metric: both means, change, ratio,
    Welch's t-test when both sides have repeats, and a verdict.

    \b
    iolab compare baseline candidate
    iolab compare 12 15 --metric iops,clat_p99 --threshold 3%
    iolab compare path=virtio path=vhost --format markdown
    iolab compare esxi --by target                  # the targets of one run (or of every run labelled esxi)
    iolab compare esxi:virtual esxi:directpath      # the same, one side per RUN:TARGET
    iolab compare tuned --by tune.scheduler --baseline none
    iolab compare old new --fail-on-regression      # exit 3 on a significant regression
    """
    if len(selectors) < 2 and by is None:
        raise UsageError("compare needs at least two selectors: A B [C ...]",
                         hint=f"or compare inside one run: iolab compare {selectors[0]} --by target (or --by pin, "
                              "tune.KNOB, numjobs, iodepth …)")
    sides = sides_of(store_of(ctx), selectors, 1 if by else 2, lambda exc: report_unreadable(ctx, exc))
    sides, axis_ignored = split_by(sides, by, baseline)
    result = compare_mod.compare(sides, metric_names(metrics), parse_threshold(threshold),
                                 (*ignore, *axis_ignored))
    tables = comparison_report.comparison_tables(result)
    if all(len(runs) == 1 for _, runs in sides):  # iolab saturate runs: the answer in one line
        saturated = comparison_table([(side.selector, runs[0]) for side, runs in sides])
        tables += [saturated] if saturated else []
    curves = warmup_report.comparison_table([(side.selector, runs) for side, runs in sides])
    tables += [curves] if curves else []
    emit_tables(tables, fmt, comparison_report.comparison_document(result))
    regressions = result.regressions()
    if regressions:
        err.print(f"[red]{len(regressions)} significant regression(s)[/] beyond the {threshold} threshold")
        if fail_on_regression:
            raise RegressionFound(f"{len(regressions)} significant regression(s) beyond the {threshold} threshold",
                                  shown=True)
