"""How a run was done, as notes under its results: tuning in force, pinning, preconditioning
rounds and their steady-state verdict, fio's own steady state, dropped caches; and lint
findings as a table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..model import Run
from ..run.method import fio_steady_state, format_tracked
from .table import Cell, Column, Table

if TYPE_CHECKING:  # lint imports the planning code, which `iolab show` does not need
    from ..check.lint import Finding


def method_notes(run: Run) -> tuple[str, ...]:
    """One note per distinct fact, in plan order (repeats that agree are said once)."""
    notes: list[str] = []
    tunings: dict[str, list[str]] = {}  # the values in force -> the places that ran with them

    def add(text: str) -> None:
        if text not in notes:
            notes.append(text)

    for r in run.results:
        place = f"{r.target}/{r.workload}"
        extra = r.extra or {}
        tuned = (extra.get("tuning") or {}).get("requested")
        if tuned:
            in_force = extra["tuning"].get("in_force") or {}
            places = tunings.setdefault(", ".join(f"{k}={in_force.get(k, v)}" for k, v in tuned.items()), [])
            if place not in places:
                places.append(place)
        pin = extra.get("pin")
        if pin:
            add(f"pinned {r.target}: pin {pin.get('mode')} -> cpus_allowed={pin.get('cpus')}, split")
        pre = extra.get("precondition") or {}
        if pre:
            add(_precondition_note(f"{place} #{r.repeat + 1}", pre))
        drop = extra.get("drop_caches")
        if drop and not drop.get("verified", True):
            add(f"drop_caches {place} #{r.repeat + 1}: target pages were still cached after dropping")
        for job in r.report.jobs if r.report else ():
            ss = fio_steady_state(job.steadystate)
            if ss is not None:
                add(f"{place} #{r.repeat + 1} {job.name}: {ss.describe()}")
    return tuple(f"tuning {values}: {', '.join(places)}" for values, places in tunings.items()) + tuple(notes)


def _precondition_note(place: str, pre: dict[str, Any]) -> str:
    parts = []
    fill = pre.get("fill")
    if fill:
        parts.append(f"fill {fill.get('times')}× bs={fill.get('bs')}" + (" (done earlier)" if fill.get("skipped")
                                                                          else ""))
    rounds = pre.get("rounds")
    if rounds:
        track = pre.get("track", "iops")
        values = ", ".join(format_tracked(r.get(track), track) for r in rounds)
        parts.append(f"{len(rounds)} round(s) of {track} [{values}]; steady state "
                     f"{(pre.get('steady_state') or {}).get('verdict', '?')}")
    return f"precondition {place}: " + "; ".join(parts)


def findings_table(findings: Sequence[Finding], title: str) -> Table:
    """Lint findings: id, severity, places, what is wrong and what to do."""
    columns = (Column("id", "id"), Column("severity", "severity"), Column("where", "where"),
               Column("message", "finding"), Column("remedy", "remedy"), Column("source", "source"))
    rows = tuple((
        Cell(f.id), Cell(f.severity, style="red" if f.severity == "error" else "yellow"),
        Cell(", ".join(f.where)), Cell(f.message), Cell(f.remedy), Cell(f.source),
    ) for f in findings)
    notes = () if findings else ("no findings",)
    return Table(title=title, columns=columns, rows=rows, notes=notes)
