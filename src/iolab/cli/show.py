"""``iolab runs`` and ``iolab show``: stored runs as tables or their JSON document.

Kept apart from ``run`` so that reading the database imports no planning, fio or remote code
(``COMMANDS`` in ``cli/__init__.py`` loads this module alone for them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from ..model import Run, to_jsonable
from ..report.table import Cell, Column, Table
from ..store import Store, UnreadableRun
from . import FORMATS, emit_tables, load_runs, report_unreadable, store_of

# ``show`` imports the report modules it uses when it runs: ``runs`` needs none of them.


def _extra_tables(run: Run) -> list[Table]:
    """The tables that follow the results when the run has them: every host's cost when it was
    observed (``report.costs``), the warm-up curve of a run with passes and its cache counters
    (``report.warmup``), the cuts of a crash test (``report.crashtest``), a capture's fingerprint
    (``report.capture``)."""
    from ..report.capture import fingerprint_table
    from ..report.costs import cost_table
    from ..report.crashtest import crash_table
    from ..report.warmup import cache_table, warmup_table
    return [t for t in (fingerprint_table(run), cost_table(run), warmup_table(run), cache_table(run), crash_table(run))
            if t is not None]


def run_document(run: Run) -> dict[str, Any]:
    """The run's JSON document (``report.results.run_document``) with every table ``show`` prints
    beside the results: each observed host's cost per result (``results[].host_costs``) and as the
    cost table's rows (``host_costs``, ``report.costs.cost_document``), and the warm-up curves and
    crash-test cuts and a capture's fingerprint when it has them (``"warmup"``, ``"crash_test"``,
    ``"fingerprint"``)."""
    from ..report import results as results_report
    from ..report.capture import fingerprint_document
    from ..report.costs import cost_document, result_costs
    from ..report.crashtest import crash_document
    from ..report.warmup import warmup_document
    document = results_report.run_document(run)
    for doc, result in zip(document["results"], run.results, strict=True):
        costs = result_costs(result)
        if costs:
            doc["host_costs"] = costs
    costs, curves, crashes = cost_document(run), warmup_document(run), crash_document(run)
    fingerprint = fingerprint_document(run)
    return {**document, **({"host_costs": costs} if costs else {}), **({"warmup": curves} if curves else {}),
            **({"crash_test": crashes} if crashes else {}), **({"fingerprint": fingerprint} if fingerprint else {})}


def print_run(store: Store, run_id: int, fmt: str) -> None:
    from ..report import results as results_report
    stored = store.get_run(run_id)
    emit_tables([results_report.results_table(stored), *_extra_tables(stored)], fmt, run_document(stored))


@click.command()
@click.option("-n", "--limit", type=int, default=50, show_default=True, help="How many runs to list.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.pass_context
def runs(ctx: click.Context, limit: int, fmt: str) -> None:
    """List stored runs, newest first."""
    listed = store_of(ctx).list_runs(limit)
    columns = tuple(Column(k, t, n) for k, t, n in (
        ("id", "id", True), ("created_at", "created (UTC)", False), ("status", "status", False),
        ("origin", "origin", False), ("suite", "suite", False), ("label", "label", False),
        ("tags", "tags", False), ("fio", "fio", False), ("host", "host", False)))
    rows = tuple((
        Cell(str(i.id), i.id), Cell(i.created_at.strftime("%Y-%m-%d %H:%M:%S"), i.created_at.isoformat()),
        Cell(i.status, style={"complete": "green", "failed": "red", "interrupted": "yellow",
                              "partial": "yellow"}.get(i.status)),
        Cell(i.origin), Cell(i.suite_name), Cell(i.label or ""),
        Cell(" ".join(f"{k}={v}" for k, v in i.tags.items())), Cell(i.fio_version or "–"),
        Cell(i.host.hostname if i.host and i.host.hostname else "–"),
    ) if not isinstance(i, UnreadableRun) else (
        Cell(str(i.run_id), i.run_id), Cell(""), Cell("unreadable", style="red"), *(Cell("") for _ in range(6)),
    ) for i in listed)
    document = [to_jsonable(i) if not isinstance(i, UnreadableRun) else {"id": i.run_id, "unreadable": i.reason}
                for i in listed]
    emit_tables([Table("runs", columns, rows)], fmt, document)
    for problem in listed:
        if isinstance(problem, UnreadableRun):
            report_unreadable(ctx, problem)


@click.command()
@click.argument("selectors", nargs=-1, required=True, metavar="RUN...")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.pass_context
def show(ctx: click.Context, selectors: Sequence[str], fmt: str) -> None:
    """Show stored runs: RUN is an id, `latest`, a label or a tag KEY=VALUE."""
    from ..report import results as results_report
    from ..report.autotune import ranking_table
    from ..report.saturation import saturation_table
    from ..report.sweeps import run_grids
    store = store_of(ctx)
    ids = list(dict.fromkeys(i for s in selectors for i in store.resolve(s)))
    stored = load_runs(ctx, ids)
    if not stored:
        return
    document: Any = [run_document(r) for r in stored]
    emit_tables([t for r in stored for t in (results_report.results_table(r), *run_grids(r), *_extra_tables(r),
                                             saturation_table(r), ranking_table(r)) if t is not None], fmt,
                document[0] if len(document) == 1 else document)
