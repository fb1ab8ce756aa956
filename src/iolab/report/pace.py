"""Whether a replay kept the recorded pace (``analyze.pace``), as a table (``iolab replay``, ``show``,
``report``) and as the run document's ``"pace"``::

    "pace": [{"result_id": 2, "repeat": 0, "job": "bs-4k", "recorded_ms": 757.0, "replayed_ms": 1832.0,
              "ratio": 2.42, "behind": true, "slowdown": 1.4, "explained_ms": 12.5,
              "limit": {"by": "replayer", "why": "the host's CPUs were 100 % busy (…)"} | null}, …]
"""

from __future__ import annotations

from typing import Any

from ..analyze import pace as pace_mod
from ..analyze.pace import ClassPace
from ..model import Run
from .table import Cell, Column, Table

_COLUMNS = (Column("job", "class"), Column("repeat", "repeat", True), Column("recorded_ms", "recorded", True),
            Column("replayed_ms", "replayed", True), Column("pace", "pace"), Column("limit", "limit"),
            Column("why", "why"))


def run_pace(run: Run) -> list[tuple[int, ClassPace]]:
    """``(repeat, class pace)`` of every timed replay result of ``run``, in plan order."""
    return [(r.repeat, p) for r in run.results for p in pace_mod.result_pace(r)]


def pace_words(p: ClassPace) -> str:
    """``kept pace (+1.2 %)``, ``behind ×2.42 (+1,075 ms)``, or ``not run``."""
    if p.ratio is None or p.behind_ms is None:
        return "not run"
    if not p.behind:
        return f"kept pace ({(p.ratio - 1) * 100:+.1f} %)"
    return f"behind ×{p.ratio:.2f} (+{p.behind_ms:,.0f} ms)"


def pace_table(run: Run) -> Table | None:
    """One row per class and repeat of a timed replay: recorded and replayed duration, the pace, and
    for a class that fell behind what held it back (``analyze.pace.attribute``); None for other runs."""
    found = run_pace(run)
    if not found:
        return None
    repeats = len({r for r, _ in found}) > 1
    rows = []
    for repeat, p in found:
        rows.append((Cell(p.job), Cell(str(repeat + 1) if repeats else "", repeat + 1),
                     Cell(f"{p.recorded_ms:,.0f} ms", p.recorded_ms),
                     Cell("–" if p.replayed_ms is None else f"{p.replayed_ms:,.0f} ms", p.replayed_ms),
                     Cell(pace_words(p), p.ratio, "red" if p.behind else "green"),
                     Cell(p.limit.by if p.limit else "", p.limit.by if p.limit else None,
                          "yellow" if p.limit else None),
                     Cell(p.limit.why if p.limit else "")))
    behind = [p for _, p in found if p.behind]
    notes = [f"recorded: the trace's active span at the replay's time scale; replayed: fio's runtime of the class; "
             f"more than {pace_mod.TOLERANCE:.0%} longer is behind the recorded pace"]
    if behind:
        notes.append("a class behind pace issued its requests later than recorded: its IOPS and bandwidth are the "
                     "replay's pace, not the application's; the limit is the target (busy ≥ 90 %, queue full, or "
                     "its latency) or the replayer (CPU of fio and iolab, fio's replay lag): see analyze/pace.py")
    return Table(f"run {run.info.id}: did the replay keep the recorded pace?", _COLUMNS, tuple(rows),
                 notes=tuple(notes))


def pace_document(run: Run) -> list[dict[str, Any]]:
    """The run's pace as JSON (see the module docstring); empty for a run that is no timed replay."""
    return [{"result_id": p.result_id, "repeat": repeat, "job": p.job, "recorded_ms": p.recorded_ms,
             "replayed_ms": p.replayed_ms, "ratio": p.ratio, "behind": p.behind, "slowdown": p.slowdown,
             "explained_ms": p.explained_ms,
             "limit": {"by": p.limit.by, "why": p.limit.why} if p.limit else None}
            for repeat, p in run_pace(run)]


def behind_summary(run: Run) -> str | None:
    """One line naming the classes that fell behind and what held them, for the console after a
    replay; None when every class kept pace (or the run is no timed replay)."""
    behind = [p for _, p in run_pace(run) if p.behind]
    if not behind:
        return None
    parts = [f"{p.job} ×{p.ratio:.2f} ({p.limit.by if p.limit else 'unknown'})" for p in behind]
    return (f"The replay fell behind the recorded pace: {', '.join(parts)}. Its IOPS there are the replay's pace, "
            "not the application's (the pace table says why).")
