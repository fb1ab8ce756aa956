"""``iolab import``: existing fio output files as stored runs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from .. import importer
from ..report import results as results_report
from . import FORMATS, _report_error, cli, emit_tables, err, load_runs, parse_tags, store_of


@cli.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="FILE...")
@click.option("--label", help="A name for the imported runs, usable wherever a run id is.")
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", help="Tag the imported runs (repeatable).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="How to print the imported results.")
@click.pass_context
def import_(ctx: click.Context, files: Sequence[Path], label: str | None, tags: Sequence[str], fmt: str) -> None:
    """Import fio output files: JSON, json+, client/server JSON, normal text (any fio version,
    also pasted from a web page), terse. Each file becomes one run.

    \b
    iolab import result.json --label baseline
    iolab import ssd-*.txt --label ssd --tag kernel=6.1
    iolab compare baseline ssd

    A file already imported (same sha256) is refused, naming the earlier run. When some files
    fail, the others are still imported and the exit code is the highest of the failures'.
    """
    store = store_of(ctx)
    imported, failure = [], 0
    for outcome in importer.import_files(store, files, label=label, tags=parse_tags(tags)):
        if isinstance(outcome, importer.Failed):
            _report_error(outcome.error)
            failure = max(failure, outcome.error.exit_code)
            continue
        imported.append(outcome)
        detail = f"{outcome.source_format}, fio {outcome.fio_version or '?'}, {outcome.results} result(s)"
        if outcome.warnings:
            detail += f", {len(outcome.warnings)} warning(s)"
        if outcome.logs:
            detail += f", {len(outcome.logs)} log file(s) beside it: {outcome.series} time series stored"
        err.print(f"Imported {outcome.path} as run [bold]{outcome.run_id}[/] ({detail})", highlight=False)
    runs = load_runs(ctx, [done.run_id for done in imported])
    if runs:
        document = [results_report.run_document(r) for r in runs]
        emit_tables([results_report.results_table(r) for r in runs], fmt,
                    document[0] if len(document) == 1 else document)
    if failure:
        ctx.exit(failure)
