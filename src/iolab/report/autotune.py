"""An auto-tuning run (``iolab autotune``) for people: its configurations ranked over their
full-length repetitions, with 95 % intervals (``workflows.autotune.Tuned.record``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model import Run
from ..units import format_iops, format_ns
from .table import Cell, Column, Table


def ranking_table(run: Run) -> Table | None:
    """The ranking of an autotune run (None for other runs)."""
    found = run.info.options.get("autotune")
    if not isinstance(found, Mapping):
        return None
    slo = found.get("slo")
    columns = (Column("rank", "#", True), Column("config", "configuration"), Column("iops", "IOPS", True),
               Column("ci_low", "95% CI", True), Column("slo_ns", slo["text"].split(" ≤")[0] if slo else "SLO", True),
               Column("feasible", "meets the SLO"), Column("n", "n", True))
    rows = []
    for i, r in enumerate(found.get("ranking", ()), 1):
        ci = r.get("ci95")
        rows.append((Cell(str(i), i), Cell(_config(r["config"]), None, "bold" if i == 1 else None),
                     Cell(format_iops(r["iops"]), r["iops"]),
                     Cell(f"{format_iops(ci[0])}–{format_iops(ci[1])}" if ci else "–", ci[0] if ci else None),
                     Cell(format_ns(r["slo_ns"]), r["slo_ns"]),
                     Cell("yes" if r["feasible"] else "no", r["feasible"], None if r["feasible"] else "red"),
                     Cell(str(r["n"]), r["n"])))
    point = found.get("operating_point") or {}
    added = len(rows) > (found.get("settings", {}).get("top") or len(rows))  # as it is, beyond the best
    notes = [f"{len(found.get('probes', ()))} configurations probed at QD{point.get('iodepth')} ×"
             f"{point.get('numjobs')} (the saturation search's point); the best {len(rows) - added} repeated"
             + (", and as it is to judge the best against" if added else "")]
    if slo and rows and not any(r["feasible"] for r in found.get("ranking", ())):
        notes.append(f"none met {slo['text']} over its full-length repetitions, though their probes did: the point "
                     "is at the SLO's edge; a lower iodepth (iolab saturate) or a looser SLO gives room")
    notes += _against_as_is(found)
    if found.get("cut_by_budget"):
        notes.append(f"the time budget ({found['settings'].get('budget')}) ended the search before every axis "
                     "was tried")
    notes.append("95% CI: t interval of the mean of log IOPS over the repetitions")
    return Table(title=f"autotune: {slo['text'] if slo else 'most IOPS'}", columns=columns, rows=tuple(rows),
                 notes=tuple(notes))


def _against_as_is(found: Mapping[str, Any]) -> list[str]:
    """What the ranking says of the best against the host as it is (``workflows.autotune.against_as_is``)."""
    judged, ranking = found.get("against_as_is"), found.get("ranking") or ()
    if not judged or not ranking:
        return []
    best = _config(ranking[0]["config"])
    if judged["distinguishable"]:
        return [f"the best ({best}) is better than as it is: their 95% CIs do not overlap, or only it meets the SLO"]
    rounds = judged.get("rounds")
    more = (f"about {rounds} repetitions each (--repeat {rounds}) would separate them if the difference holds"
            if rounds else "no number of repetitions up to 100 would separate them: the difference is within the noise")
    return [f"the best ({best}) is not distinguishable from as it is: their 95% CIs overlap; {more}"]


def _config(config: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items()) or "as it is"
