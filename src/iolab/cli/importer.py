"""``iolab import``: existing fio output files, or directories of them, as stored runs."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import IolabError
from ..report.table import Cell, Column, Table
from ..workflows import importer
from . import emit_tables, err, load_runs, report_error, store_opened_late
from .options import Naming, db_option, format_option, naming_options


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="FILE|DIR...")
@naming_options("imported runs")
@db_option
@click.option("--label-from", type=click.Choice(importer.LABEL_FROM),
              help="A run per file, labelled by its name without the extension (directpath.txt: directpath).")
@format_option(help="How to print the imported results (one file) or the import's summary.")
@click.pass_context
def import_(ctx: click.Context, paths: Sequence[Path], named: Naming, label_from: str | None, fmt: str) -> None:
    """Import fio output: JSON, json+, client/server JSON, normal text (any fio version, also pasted
    from a web page), terse. A FILE becomes one run; a DIR (searched recursively: a sweep by
    bench-fio, fio-plot or your own script) becomes one run of all the jobs in it.

    \b
    iolab import result.json --label baseline
    iolab import ssd-*.txt --label ssd --tag kernel=6.1
    iolab import bench/sdb bench/sdc                 # two sweeps, a run each
    iolab compare sdb sdc
    iolab import reports/ --label-from name          # a run per file: directpath.txt is run directpath

    A text holding several fio outputs (a field report: outputs pasted one after another, prose,
    line numbers and a recap of figures between them) becomes one run with a result per output.
    A result's target is named after the devices its disk statistics name (nvme0n1, sdb). Outputs of
    one job whose disk statistics name different devices are two storage paths, never repetitions:
    each becomes a target of its own, and the run says so; so do the outputs of one pasted text.

    fio's logs (write_*_log) are attached to the results they belong to. A file already
    imported (same sha256) is skipped, naming its run. When some files fail, the others are
    still imported and the exit code is the highest of the failures'.
    """
    sources = importer.discover(paths, label_from)
    total = sum(len(s.outputs) for s in sources)
    bulk = len(sources) > 1 or any(s.directory for s in sources)
    with Progress(TextColumn("Importing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=err, transient=True, disable=not bulk) as bar:
        task = bar.add_task("", total=total)
        outcomes = []
        for outcome in importer.import_sources(lambda: store_opened_late(ctx), sources, named.label, named.tags,
                                               lambda path: bar.update(task, advance=1, description=path.name)):
            _say(outcome)  # as each source is stored: a log file (no terminal, no bar) sees the import go on
            outcomes.append(outcome)
    if bulk:
        emit_tables([_summary(outcomes)], fmt, _document(outcomes))
    else:
        from ..report import results as results_report  # one file's run is shown: a directory's is summed up
        runs = load_runs(ctx, [o.run_id for o in outcomes if o.run_id is not None])
        if runs:
            emit_tables([results_report.results_table(runs[0])], fmt, results_report.run_document(runs[0]))
    failed = [n.error for o in outcomes for n in o.notes if n.error is not None]
    if failed:  # each was reported as its file failed: the worst gives the exit code
        worst = max(failed, key=lambda e: e.exit_code)
        worst.shown = True
        raise worst


def _say(o: importer.Outcome) -> None:
    """What became of one source, on stderr: failures as errors, skips and log notes as notes."""
    for note in o.notes:
        if note.error is not None:
            report_error(note.error)
        elif note.status == "skipped":
            err.print(f"Skipped {note.path}: " + (f"already imported in run {note.run_id}" if note.run_id
                                                   else f"the same content as {note.same_as}"), highlight=False)
    if o.run_id is None:
        return
    detail = f"{', '.join(o.formats)}, fio {', '.join(o.fio_versions) or '?'}, {o.results} result(s)"
    if o.outputs > o.files:  # a pasted text holding several outputs
        detail += f" from {o.outputs} outputs"
    if o.directory:
        detail = f"{o.files} file(s): " + detail
    if o.warnings:
        detail += f", {len(o.warnings)} warning(s)"
    if o.logs_attached or o.logs_skipped:
        detail += f"; logs: {o.logs_attached} attached ({o.series} time series), {o.logs_skipped} not attached"
    err.print(f"Imported {o.path} as run [bold]{o.run_id}[/] ({detail})", highlight=False)
    if o.log_notes:  # one print for them all: the same lines, at half the cost of a print each (a sweep: 98)
        err.print("\n".join(f"  logs: {line}" for line in o.log_notes), markup=False, highlight=False, style="yellow")


def _summary(outcomes: Sequence[importer.Outcome]) -> Table:
    """One row per source: its run, files stored, skipped, failed and passed over, results, logs."""
    columns = (Column("path", "path"), Column("run", "run", True), Column("files", "files", True),
               Column("skipped", "skipped", True), Column("failed", "failed", True),
               Column("passed_over", "other files", True), Column("results", "results", True),
               Column("logs_attached", "logs attached", True), Column("logs_skipped", "logs not attached", True),
               Column("warnings", "warnings", True))
    rows = []
    for o in outcomes:
        counts = (o.files, _count(o, "skipped"), _count(o, "failed"), o.passed_over, o.results, o.logs_attached,
                  o.logs_skipped, len(o.warnings))
        rows.append((Cell(_printable(o.path), o.path), Cell(str(o.run_id) if o.run_id else "–", o.run_id),
                     *(Cell(str(n), n, "red" if n and i == 2 else None) for i, n in enumerate(counts))))
    stored = sum(o.run_id is not None for o in outcomes)
    return Table(title=f"import: {sum(o.files for o in outcomes)} file(s) stored as {stored} run(s)",
                 columns=columns, rows=tuple(rows),
                 notes=("other files: in a directory, files that are not fio outputs (job files, images …); its fio "
                        "logs are counted as logs",))


def _printable(path: str) -> str:
    """A path as text a terminal can show: bytes that are not UTF-8 as ``\\xff``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _count(o: importer.Outcome, status: str) -> int:
    return sum(n.status == status for n in o.notes)


def _document(outcomes: Sequence[importer.Outcome]) -> dict[str, Any]:
    """The import's summary as JSON (schema ``iolab.import/1``)."""
    def note(n: importer.FileNote) -> dict[str, Any]:
        error: IolabError | None = n.error
        return {"path": n.path, "status": n.status, "run_id": n.run_id, "same_as": n.same_as,
                "error": error.message if error else None}

    return {"schema": "iolab.import/1", "sources": [{
        "path": o.path, "directory": o.directory, "run_id": o.run_id, "files": o.files, "results": o.results,
        "formats": list(o.formats), "fio_versions": list(o.fio_versions), "passed_over": o.passed_over,
        "logs_attached": o.logs_attached, "logs_not_attached": o.logs_skipped, "time_series": o.series,
        "log_notes": list(o.log_notes), "warnings": list(o.warnings), "files_not_stored": [note(n) for n in o.notes],
    } for o in outcomes]}
