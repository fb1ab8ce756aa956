"""``iolab report``: one run, or several side by side, as HTML (+ PNG/SVG charts, Markdown)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from .. import outputs
from ..analyze import compare as compare_mod
from ..analyze.metrics import metric as known_metric
from ..errors import UsageError
from . import err, report_unreadable, store_of
from .compare import comparison_options, metric_names, parse_threshold, sides_of, split_by
from .options import db_option

HTML, MARKDOWN = "the HTML report", "the Markdown report"



@click.command()
@click.argument("selectors", nargs=-1, metavar="RUN...")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="The HTML file to write [default: iolab-report-<run ids>.html].")
@click.option("--png", "png_dir", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Also write every chart as PNG and SVG into DIR.")
@click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Also write a Markdown report that shows the PNG charts (from --png DIR, else FILE's "
                   "directory/<name>_files).")
@click.option("--title", help="The report's title [default: the run, or the runs compared].")
@click.option("--independent-y", is_flag=True, help="Give each panel of a chart its own y scale (by default the "
              "panels of one metric share one, so their heights compare).")
@comparison_options
@click.option("--history", "history", is_flag=True, help="Write the history page instead: a chart per series of "
              "the runs RUN... match (all runs without RUN), as `iolab history` shows them.")
@click.option("--target", "targets", multiple=True, metavar="T", help="With --history: only this target.")
@click.option("--workload", "workloads", multiple=True, metavar="W", help="With --history: only this workload.")
@click.option("--since", metavar="DATE", help="With --history: only results from DATE (or an age, 30d) on.")
@click.option("--host", metavar="H", help="With --history: only runs on this host.")
@db_option
@click.pass_context
def report(ctx: click.Context, selectors: Sequence[str], output: Path | None, png_dir: Path | None,
           markdown_path: Path | None, title: str | None, independent_y: bool, metrics: str | None,
           threshold: str, ignore: Sequence[str], by: str | None, baseline: str | None, history: bool,
           targets: Sequence[str], workloads: Sequence[str], since: str | None, host: str | None) -> None:
    """Write a report of stored runs: RUN is an id, `latest`, a range 3-7, a list 3,5,9, a label or a tag KEY=VALUE.

    One run gives its results table. Several start with the comparison `iolab compare` prints
    for the same selectors (the first is the baseline; a selector matching several runs pools
    them as repetitions; a single selector matching several runs compares each with the
    first; with --by AXIS, the targets, tuning values, pin modes … of one selection), with --metric,
    --threshold, --ignore, --by and --baseline as there. Then the charts: IOPS and
    bandwidth per workload, latency percentiles, scaling with iodepth/numjobs when the suite
    varies them, per-second time series (per host for multi-host targets), findings, host and
    device facts, the job files. The HTML file is self-contained: it opens from disk with no
    network.

    \b
    iolab report latest
    iolab report esxi --by target -o esxi.html
    iolab report baseline candidate -o compare.html --png charts/ --markdown compare.md
    iolab report old new --metric iops,clat_p99 --threshold 3%
    iolab report --history nightly --since 90d -o history.html
    """
    from ..report import html, images, markdown  # Altair and Jinja2: only when reporting

    if png_dir is None and markdown_path is not None:
        png_dir = markdown_path.parent / f"{markdown_path.stem}_files"
    for path, what in ((output, HTML), (markdown_path, MARKDOWN)):
        if path is not None:  # refused before the report is built, which takes a while
            outputs.check(path, what)
    if png_dir is not None:
        outputs.check(png_dir, images.FOLDER, folder=True)
    store = store_of(ctx)
    if history:
        doc, default = _history_page(ctx, selectors, targets, workloads, since, host, metrics, title)
    elif not selectors:
        raise UsageError("report needs a RUN (an id, latest, a range 3-7, a list 3,5,9, a label or a tag "
                         "KEY=VALUE), or --history")
    elif targets or workloads or since or host:
        raise UsageError("--target, --workload, --since and --host go with --history")
    else:
        doc, default = _runs_report(ctx, store, selectors, title, independent_y, metrics, threshold,
                                    (by, baseline), ignore)
    output = output or default
    outputs.write(output, HTML, html.render(doc))
    click.echo(f"{output}  (HTML, {len(doc.charts)} charts)")
    if png_dir is not None:
        written = images.write_images(doc.charts, png_dir)
        click.echo(f"{png_dir}/  ({len(written)} charts as PNG and SVG)")
        if markdown_path is not None:
            pngs = {name: png for name, (png, _svg) in written.items()}
            outputs.write(markdown_path, MARKDOWN, markdown.render(doc, pngs, markdown_path.parent))
            click.echo(f"{markdown_path}  (Markdown)")


def _history_page(ctx: click.Context, selectors: Sequence[str], targets: Sequence[str], workloads: Sequence[str],
                  since: str | None, host: str | None, metrics: str | None, title: str | None) -> tuple[Any, Path]:
    """The history page (``report.historypage``) and its default file name."""
    from ..report.historypage import history_page
    from .history import load_history, parse_since, split_metrics

    found = load_history(store_of(ctx), selectors, targets, workloads, parse_since(since) if since else None, host,
                         split_metrics([metrics] if metrics else []), lambda exc: report_unreadable(ctx, exc))
    err.print(f"Building the history page of {len(found.series)} series…")
    return history_page(found, title), Path("iolab-history.html")


def _runs_report(ctx: click.Context, store: Any, selectors: Sequence[str], title: str | None, independent_y: bool,
                 metrics: str | None, threshold: str, by: tuple[str | None, str | None],
                 ignore: Sequence[str]) -> tuple[Any, Path]:
    """The report of the runs ``selectors`` match (compared ``--by`` an axis: ``by`` is the axis and the
    baseline value) and its default file name."""
    from ..report import charts, document

    sides = sides_of(store, selectors, 1, lambda exc: report_unreadable(ctx, exc))
    runs = list({r.info.id: r for _, side_runs in sides for r in side_runs}.values())
    sides, axis_ignored = split_by(sides, *by)
    ids = [r.info.id for r in runs]
    names, fraction = metric_names(metrics), parse_threshold(threshold)
    comparison = None
    if len(sides) > 1:
        comparison = compare_mod.compare(sides, names, fraction, (*ignore, *axis_ignored))
    elif len(runs) > 1:
        comparison = document.compare_runs(runs, names, fraction, tuple(ignore))
    else:
        for name in names or ():
            known_metric(name)  # one run compares nothing, but a typo is still an error
    series = {rid: s for i in ids for rid, s in store.time_series(i).items()}
    samples = {rid: s for i in ids for rid, s in store.host_samples(i).items()}
    err.print(f"Building the report of run{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}…")
    with charts.y_scales(independent_y):
        doc = document.build(runs, series, title, comparison, samples)
    return doc, Path(f"iolab-report-{'-'.join(map(str, ids))}.html")
