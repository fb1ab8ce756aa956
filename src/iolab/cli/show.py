"""``iolab runs`` and ``iolab show``: stored runs as tables or their JSON document.

Kept apart from ``run`` so that reading the database imports no planning, fio or remote code
(``COMMANDS`` in ``cli/__init__.py`` loads this module alone for them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from ..model import Run, to_jsonable
from ..report.table import Cell, Column, Table
from . import emit_tables, load_runs, report_unreadable, store_of
from .options import db_option, format_option

if TYPE_CHECKING:
    pass

# ``show`` imports a report module only for a run that carries its data (the markers below are
# what each module reads first): ``runs`` needs none of them, a plain run's ``show`` few.


def _carries(run: Run, key: str) -> bool:
    return any(key in (r.extra or {}) for r in run.results)


def _extra_tables(run: Run) -> list[Table]:
    """The tables that follow the results when the run has them: a capture's fingerprint
    (``report.capture``), whether a replay kept the recorded pace (``report.pace``), every host's
    cost when it was observed (``report.costs``), the warm-up
    curve of a run with passes and its cache counters (``report.warmup``), the cuts of a crash test
    (``report.crashtest``)."""
    tables: list[Table | None] = []
    if run.info.origin == "capture":
        from ..report.capture import fingerprint_table
        tables.append(fingerprint_table(run))
    if _carries(run, "replay"):
        from ..report.pace import pace_table
        tables.append(pace_table(run))
    if _carries(run, "observed"):
        from ..report.costs import cost_table
        tables.append(cost_table(run))
    if _carries(run, "pass") or run.info.options.get("tiers"):
        from ..report.warmup import cache_table, warmup_table
        tables += [warmup_table(run), cache_table(run)]
    if _carries(run, "crash"):
        from ..report.crashtest import crash_table
        tables.append(crash_table(run))
    return [t for t in tables if t is not None]


def run_document(run: Run) -> dict[str, Any]:
    """The run's JSON document (``report.results.run_document``) with every table ``show`` prints
    beside the results: each observed host's cost per result (``results[].host_costs``) and as the
    cost table's rows (``host_costs``, ``report.costs.cost_document``), and the warm-up curves and
    crash-test cuts, a capture's fingerprint and a replay's pace when it has them (``"warmup"``,
    ``"crash_test"``, ``"fingerprint"``, ``"pace"``: ``report.pace``)."""
    from ..report import results as results_report
    document = results_report.run_document(run)
    if _carries(run, "observed"):
        from ..report.costs import cost_document, result_costs
        for doc, result in zip(document["results"], run.results, strict=True):
            if costs := result_costs(result):
                doc["host_costs"] = costs
        if costs := cost_document(run):
            document["host_costs"] = costs
    if _carries(run, "pass"):
        from ..report.warmup import warmup_document
        if curves := warmup_document(run):
            document["warmup"] = curves
    if _carries(run, "crash"):
        from ..report.crashtest import crash_document
        if crashes := crash_document(run):
            document["crash_test"] = crashes
    if _carries(run, "replay"):
        from ..report.pace import pace_document
        if paces := pace_document(run):
            document["pace"] = paces
    if run.info.origin == "capture":
        from ..report.capture import fingerprint_document
        if fingerprint := fingerprint_document(run):
            document["fingerprint"] = fingerprint
    return document


def print_run(stored: Run, fmt: str, findings_shown: bool = False) -> None:
    """The run's results and the tables that follow them (``iolab show``'s), or its JSON document; its lint
    findings in one line when ``findings_shown`` (``report.results.results_table``)."""
    from ..report import results as results_report
    # the JSON document only for --format json: building it (pydantic's serialisers) is most of the
    # time between a run's last job and its exit
    emit_tables([results_report.results_table(stored, findings_shown), *_extra_tables(stored)], fmt,
                run_document(stored) if fmt == "json" else None)


@click.command()
@db_option
@click.option("-n", "--limit", type=int, default=50, show_default=True, help="How many runs to list.")
@format_option()
@click.pass_context
def runs(ctx: click.Context, limit: int, fmt: str) -> None:
    """List stored runs, newest first."""
    from ..store.records import UnreadableRun
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
    document = {"schema": "iolab.runs/1", "runs": [
        to_jsonable(i) if not isinstance(i, UnreadableRun) else {"id": i.run_id, "unreadable": i.reason}
        for i in listed]}
    emit_tables([Table("runs", columns, rows)], fmt, document)
    for problem in listed:
        if isinstance(problem, UnreadableRun):
            report_unreadable(ctx, problem)


@click.command()
@click.argument("selectors", nargs=-1, required=True, metavar="RUN...")
@db_option
@format_option()
@click.pass_context
def show(ctx: click.Context, selectors: Sequence[str], fmt: str) -> None:
    """Show stored runs: RUN is an id, `latest`, a range 3-7, a list 3,5,9, a label or a tag KEY=VALUE."""
    from ..report import results as results_report
    from ..report.sweeps import run_grids
    store = store_of(ctx)
    ids = list(dict.fromkeys(i for s in selectors for i in store.resolve(s)))
    stored = load_runs(ctx, ids)
    if not stored:
        return
    documents = [run_document(r) for r in stored] if fmt == "json" else []  # as print_run
    emit_tables([t for r in stored for t in (results_report.results_table(r), *run_grids(r), *_extra_tables(r),
                                             *_search_tables(r))], fmt,
                documents[0] if len(documents) == 1 else {"schema": "iolab.run-set/1", "runs": documents})


def _search_tables(run: Run) -> list[Table]:
    """The knee of a saturation run (``report.saturation``), the ranking of an autotune run
    (``report.autotune``); none for other runs."""
    tables: list[Table | None] = []
    if "saturation" in run.info.options:
        from ..report.saturation import saturation_table
        tables.append(saturation_table(run))
    if "autotune" in run.info.options:
        from ..report.autotune import ranking_table
        tables.append(ranking_table(run))
    return [t for t in tables if t is not None]
