"""``iolab compare``: stored runs side by side, with statistics and verdicts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from ..analyze import compare as compare_mod
from ..errors import UsageError
from ..model import Run
from ..report import comparison as comparison_report
from ..report import warmup as warmup_report
from ..report.saturation import comparison_table
from ..store.database import Store, UnreadableRun
from . import FORMATS, emit_tables, err, read_runs, report_unreadable, store_of


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
    """``--metric``, ``--threshold`` and ``--ignore``, shared by ``compare`` and ``report``."""
    for option in reversed((
        click.option("--metric", "metrics", metavar="LIST",
                     help="Comma-separated metrics: iops, bw, {clat,lat,slat}_{mean,max,pNN}, and the observers' "
                          "cpu_us_per_io[@HOST], cpu_util[@HOST] (HOST: local, a fio server, a watched host, a target) "
                          f"[default: {','.join(compare_mod.DEFAULT_METRICS)}]"),
        click.option("--threshold", default="5%", show_default=True, metavar="PCT",
                     help="Smaller relative changes are 'unchanged'."),
        click.option("--ignore", "ignore", multiple=True, metavar="OPTION",
                     help="Compare results even though this fio option differs (repeatable)."),
    )):
        command = option(command)
    return command


def metric_names(metrics: str | None) -> list[str] | None:
    """``--metric iops,clat_p99`` -> ``["iops", "clat_p99"]``; None for the defaults."""
    return [m.strip() for m in metrics.split(",") if m.strip()] if metrics else None


def sides_of(store: Store, selectors: Sequence[str], least: int = 1,
             on_unreadable: Callable[[UnreadableRun], None] | None = None
             ) -> list[tuple[compare_mod.Side, list[Run]]]:
    """One side per selector, with every run it matches (pooled as repetitions). A run that cannot be
    read goes to ``on_unreadable`` and is left out (without it, ``UnreadableRun`` is raised), and so
    is a side left without runs. Raises ``UsageError`` for a selector that matches nothing, or when
    fewer than ``least`` sides remain."""
    sides = []
    for selector in selectors:
        runs = read_runs(store, store.resolve(selector), on_unreadable)
        if not runs:
            err.print(f"{selector!r} is left out: none of its runs can be read", style="red", markup=False)
            continue
        labels = tuple(dict.fromkeys(r.info.label for r in runs if r.info.label))
        sides.append((compare_mod.Side(selector, tuple(r.info.id for r in runs), labels), runs))
    if len(sides) < least:
        raise UsageError(f"{'no side' if not sides else 'only one side'} left to compare: the runs of the others "
                         "cannot be read (see above)", hint="list runs with: iolab runs")
    return sides


@click.command()
@click.argument("selectors", nargs=-1, required=True, metavar="A B [C ...]")
@comparison_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--fail-on-regression", is_flag=True,
              help="Exit with code 3 when a metric is significantly worse by more than the threshold.")
@click.pass_context
def compare(ctx: click.Context, selectors: Sequence[str], metrics: str | None, threshold: str,
            ignore: Sequence[str], fmt: str, fail_on_regression: bool) -> None:
    """Compare stored runs: each of B, C, … against A (the baseline).

    A, B, … are run ids, `latest`, labels or tags KEY=VALUE; a selector matching several runs
    pools them as repetitions of one side. Results pair by workload (canonical fio options and
    direction); per metric: both means, change, ratio, Welch's t-test when both sides have
    repeats, and a verdict.

    \b
    iolab compare baseline candidate
    iolab compare 12 15 --metric iops,clat_p99 --threshold 3%
    iolab compare path=virtio path=vhost --format markdown
    iolab compare old new --fail-on-regression      # exit 3 on a significant regression
    """
    if len(selectors) < 2:
        raise UsageError("compare needs at least two selectors: A B [C ...]")
    sides = sides_of(store_of(ctx), selectors, 2, lambda exc: report_unreadable(ctx, exc))
    result = compare_mod.compare(sides, metric_names(metrics), parse_threshold(threshold), tuple(ignore))
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
            ctx.exit(3)
