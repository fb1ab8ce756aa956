"""History and gate as tables (terminal, Markdown, CSV), JSON documents and charts.

``history_tables``: one row per series with a compact trend (a sparkline of its points) and its
levels, then every change point with what changed, then the series that began because options
changed. ``history_document`` is the JSON (``iolab.history/1``), ``history_charts`` one Vega-Lite
chart per series for the report page (points, segment means with their 95 % intervals, change
markers labelled with what changed). ``gate_table``/``gate_document`` show a gate's verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..analyze import changes as changes_mod
from ..analyze.compare import Verdict
from ..analyze.gate import MIN_RUNS, Gate, GateVerdict
from ..analyze.history import ChangeAt, History, Segment, Series
from .table import Cell, Column, Table, format_value

SPARKS = "▁▂▃▄▅▆▇█"
#: Characters of a trend: longer series are averaged into this many buckets.
TREND_WIDTH = 24


def sparkline(values: Sequence[float], width: int = TREND_WIDTH) -> str:
    """``values`` as block characters, lowest ``▁`` to highest ``█``, averaged into at most ``width``."""
    if not values:
        return ""
    buckets = [values[i * len(values) // width:(i + 1) * len(values) // width] for i in range(width)] \
        if len(values) > width else [[v] for v in values]
    means = [sum(b) / len(b) for b in buckets if b]
    lo, hi = min(means), max(means)
    if hi == lo:
        return SPARKS[3] * len(means)
    return "".join(SPARKS[min(len(SPARKS) - 1, int((v - lo) / (hi - lo) * len(SPARKS)))] for v in means)


def _pct(fraction: float | None) -> str:
    return "–" if fraction is None else f"{fraction * 100:+.1f} %"


def _p(p: float | None) -> str:
    return "–" if p is None else f"{p:.3f}" if p >= 0.001 else "<0.001"


def level(unit: str, segment: Segment) -> str:
    """A segment's mean ± the half-width of its 95 % interval, and its size: ``15079 ± 38.9 (n=500)``."""
    s = segment.summary
    half = f" ± {format_value(unit, (s.ci95[1] - s.ci95[0]) / 2)}" if s.ci95 is not None else ""
    return f"{format_value(unit, s.mean)}{half} (n={s.n})"


#: Segments a history row shows; longer series show the first and the last ones.
SHOWN_SEGMENTS = 4


def segments_text(unit: str, segments: Sequence[Segment]) -> str:
    """Each segment's mean ± 95 % half-width and its runs, oldest first: ``29879 ± 6924 (1–8) → 401.2 ± 0.6
    (9–14)``; beyond ``SHOWN_SEGMENTS``, the first, ``…`` and the last ones."""
    def one(g: Segment) -> str:
        ci = g.summary.ci95
        half = f" ± {format_value(unit, (ci[1] - ci[0]) / 2)}" if ci is not None else ""
        runs = f"{g.first_run}–{g.last_run}" if g.first_run != g.last_run else f"{g.first_run}"
        return f"{format_value(unit, g.summary.mean)}{half} ({runs})"

    shown = list(segments)
    if len(shown) > SHOWN_SEGMENTS:
        return " → ".join([one(shown[0]), f"… {len(shown) - SHOWN_SEGMENTS + 1} more",
                           *map(one, shown[-(SHOWN_SEGMENTS - 2):])])
    return " → ".join(map(one, shown))


def _last_change(series: Series) -> str:
    if not series.changes:
        return "–"
    c = series.changes[-1]
    return f"run {c.run_id}: {_pct(c.change)} ({c.verdict})"


def history_table(history: History) -> Table:
    """One row per series: its runs, trend, each segment's mean ± 95 % CI and the latest change."""
    columns = (Column("target", "target"), Column("workload", "workload"), Column("host", "host"),
               Column("metric", "metric"), Column("runs", "runs", True), Column("from", "from", csv_only=True),
               Column("to", "to", csv_only=True), Column("trend", "trend"),
               Column("segments", "segments: mean ± 95 % CI (runs)"),
               Column("level_mean", "level mean", csv_only=True), Column("since_run", "since run", True, csv_only=True),
               Column("changes", "changes", True), Column("last_change", "last change"))
    rows = []
    for s in history.series:
        last = s.segments[-1]
        style = "red" if s.changes and s.changes[-1].verdict == Verdict.WORSE else "green" if s.changes else None
        rows.append((Cell(s.key.target), Cell(s.key.name), Cell(s.key.host or "–"), Cell(s.metric.name),
                     Cell(str(len(s.points)), len(s.points)), Cell(f"{s.points[0].time:%Y-%m-%d}",
                                                                   s.points[0].time.isoformat()),
                     Cell(f"{s.points[-1].time:%Y-%m-%d}", s.points[-1].time.isoformat()),
                     Cell(sparkline([p.value for p in s.points])), Cell(segments_text(s.metric.unit, s.segments)),
                     Cell(format_value(s.metric.unit, last.summary.mean), last.summary.mean),
                     Cell(str(last.first_run), last.first_run),
                     Cell(str(len(s.changes)), len(s.changes)), Cell(_last_change(s), style=style)))
    runs = len({p.run_id for s in history.series for p in s.points})
    return Table(f"history: {len(history.series)} series over {runs} runs", columns, tuple(rows),
                 notes=(f"change points: {history.method}",))


def changes_table(history: History) -> Table | None:
    """Every change point of every series, with what changed between the runs on either side."""
    columns = (Column("target", "target"), Column("workload", "workload"), Column("host", "host"),
               Column("metric", "metric"), Column("run", "run", True),
               Column("previous_run", "after run", True, csv_only=True),
               Column("time", "time"), Column("before", "before", True), Column("after", "after", True),
               Column("change_pct", "change", True, unit="%"), Column("p_value", "p", True),
               Column("verdict", "verdict"), Column("what_changed", "what changed"))
    rows = []
    for s in history.series:
        for c in s.changes:
            rows.append(_change_row(s, c))
    if not rows:
        return None
    return Table("change points", columns, tuple(rows))


def _change_row(s: Series, c: ChangeAt) -> tuple[Cell, ...]:
    unit = s.metric.unit
    return (Cell(s.key.target), Cell(s.key.name), Cell(s.key.host or "–"), Cell(s.metric.name),
            Cell(str(c.run_id), c.run_id), Cell(str(c.previous_run), c.previous_run),
            Cell(f"{c.time:%Y-%m-%d %H:%M}", c.time.isoformat()), Cell(format_value(unit, c.before), c.before),
            Cell(format_value(unit, c.after), c.after), Cell(_pct(c.change), round(c.change * 100, 3)),
            Cell(_p(c.p_value), c.p_value), Cell(c.verdict, style="red" if c.verdict == Verdict.WORSE else "green"),
            Cell(changes_mod.describe(c.what_changed)))


def breaks_table(history: History) -> Table | None:
    """Series that began because job options stopped being comparable with the series before."""
    seen, rows = set(), []
    for s in history.series:
        if s.key.part > 1 and s.key not in seen:
            seen.add(s.key)
            differs = "; ".join(f"{d.option} {d.a} → {d.b}" for d in s.started_by) or "options not comparable"
            rows.append((Cell(s.key.target), Cell(s.key.name), Cell(s.key.host or "–"),
                         Cell(str(s.points[0].run_id), s.points[0].run_id), Cell(differs)))
    if not rows:
        return None
    return Table("new series: job options changed (not comparable, never joined)",
                 (Column("target", "target"), Column("workload", "workload"), Column("host", "host"),
                  Column("first_run", "first run", True), Column("options", "options that differ")), tuple(rows))


def history_tables(history: History) -> list[Table]:
    return [t for t in (history_table(history), changes_table(history), breaks_table(history)) if t is not None]


def _change_doc(c: ChangeAt) -> dict[str, Any]:
    return {"run": c.run_id, "previous_run": c.previous_run, "time": c.time.isoformat(), "before": c.before,
            "after": c.after, "change_pct": c.change * 100, "p_value": c.p_value, "verdict": c.verdict,
            "what_changed": [{"what": w.what, "before": w.before, "after": w.after} for w in c.what_changed]}


def series_document(s: Series) -> dict[str, Any]:
    """One series as JSON (see ``history_document``)."""
    return {
        "target": s.key.target, "workload": s.key.workload, "label": s.key.label, "direction": s.key.direction,
        "host": s.key.host, "part": s.key.part, "metric": s.metric.name, "unit": s.metric.unit,
        "higher_is_better": s.metric.higher_is_better,
        "points": [{"run": p.run_id, "time": p.time.isoformat(), "value": p.value, "repeats": list(p.repeats)}
                   for p in s.points],
        "segments": [{"first_run": g.first_run, "last_run": g.last_run, "runs": g.summary.n, "mean": g.summary.mean,
                      "ci95": list(g.summary.ci95) if g.summary.ci95 else None} for g in s.segments],
        "change_points": [_change_doc(c) for c in s.changes],
        "started_by": [{"option": d.option, "before": d.a, "after": d.b} for d in s.started_by],
    }


def history_document(history: History) -> dict[str, Any]:
    """``{"schema": "iolab.history/1", "method", "series": [{"target", "workload", "metric", "points": [{"run",
    "time", "value"}], "change_points": [{"run", "before", "after", "change_pct", "p_value", "what_changed"}],
    …}]}``: values in the metric's ``unit`` (``IOPS``, ``B/s``, ``ns``, ``µs``), ``before``/``after`` the
    segment means either side, ``change_pct`` in percent, times ISO 8601 (UTC)."""
    return {"schema": "iolab.history/1", "method": history.method,
            "series": [series_document(s) for s in history.series]}


def gate_table(gate: Gate) -> Table:
    """The gate's verdict per series: the run against the last stable segment before it."""
    columns = (Column("target", "target"), Column("workload", "workload"), Column("metric", "metric"),
               Column("segment", "last stable segment"), Column("value", "run", True),
               Column("change_pct", "change", True, unit="%"), Column("p_value", "p", True),
               Column("adjusted_p", "p (Holm)", True), Column("verdict", "verdict"),
               Column("what_changed", "what changed since the segment's last run"))
    rows = []
    for r in gate.rows:
        unit = r.metric.unit
        segment = (f"runs {r.segment.first_run}–{r.segment.last_run}: {level(unit, r.segment)}" if r.segment is not None
                   else "– (no earlier run)")
        if r.verdict == GateVerdict.NO_HISTORY and r.segment is not None:
            segment += f", {r.segment.end - r.segment.start} of the {MIN_RUNS} needed"
        style = {GateVerdict.REGRESSION: "red", GateVerdict.WORSE: "yellow", GateVerdict.BETTER: "green",
                 GateVerdict.NO_HISTORY: "yellow"}.get(r.verdict)
        rows.append((Cell(r.key.target), Cell(r.key.name), Cell(r.metric.name), Cell(segment),
                     Cell(format_value(unit, r.value), r.value),
                     Cell(_pct(r.change), None if r.change is None else round(r.change * 100, 3)),
                     Cell(_p(r.p_value), r.p_value), Cell(_p(r.adjusted_p), r.adjusted_p),
                     Cell(r.verdict, style=style), Cell(changes_mod.describe(r.what_changed))))
    notes = (f"regression: worse than the segment's mean by more than {gate.max_regression * 100:g} % and Holm-"
             f"adjusted p < {gate.alpha:g}; test: {gate.method}",)
    return Table(f"gate: run {gate.run_id} against its history", columns, tuple(rows), notes)


def gate_document(gate: Gate) -> dict[str, Any]:
    """The gate as JSON (``iolab.gate/1``): per series the segment, value, change, p-values, verdict."""
    return {"schema": "iolab.gate/1", "run": gate.run_id, "max_regression_pct": gate.max_regression * 100,
            "alpha": gate.alpha, "method": gate.method, "regressions": len(gate.regressions), "rows": [{
                "target": r.key.target, "workload": r.key.workload, "label": r.key.label, "direction": r.key.direction,
                "host": r.key.host, "metric": r.metric.name, "unit": r.metric.unit, "value": r.value,
                "segment": None if r.segment is None else {
                    "first_run": r.segment.first_run, "last_run": r.segment.last_run, "runs": r.segment.summary.n,
                    "mean": r.segment.summary.mean, "ci95": list(r.segment.summary.ci95 or ()) or None},
                "change_pct": None if r.change is None else r.change * 100, "p_value": r.p_value,
                "adjusted_p": r.adjusted_p, "verdict": r.verdict,
                "what_changed": [{"what": w.what, "before": w.before, "after": w.after} for w in r.what_changed],
            } for r in gate.rows]}
