"""History and gate as tables (terminal, Markdown, CSV), JSON documents and charts.

``history_tables``: one row per series with a compact trend (a sparkline of its points) and its
levels, then every change point with what changed, then the series that began because options
changed, and the changes accepted as intended. ``history_document`` is the JSON
(``iolab.history/1``). ``gate_table``/``gate_document``/``gate_junit`` show a gate's verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..analyze import changes as changes_mod
from ..analyze.compare import Verdict
from ..analyze.gate import Baseline, Gate, GateRow, GateVerdict
from ..analyze.history import ChangeAt, History, Segment, Series
from ..model import Accepted
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
    return "–" if fraction is None else f"{fraction * 100:+.1f}%"


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


def change_text(c: ChangeAt) -> str:
    """``run 7: −50.0 % (worse)``, or for an unconfirmed change ``run 7: −50.0 % (worse), unconfirmed: 2 more runs
    at this level would confirm it``."""
    text = f"run {c.run_id}: {_pct(c.change)} ({c.verdict})"
    if not c.confirmed:
        text += f", unconfirmed: {c.runs_needed} more run{'s' if c.runs_needed != 1 else ''} at this level would " \
                "confirm it"
    return text


def accepted_text(a: Accepted) -> str:
    """``accepted at run 9 by ci@lab1 on 2026-12-02: new controller firmware``."""
    return f"accepted at run {a.run_id} by {a.by} on {a.at:%Y-%m-%d}: {a.reason}"


def _last_change(series: Series) -> str:
    last = series.changes[-1] if series.changes else None
    if series.accepted and (last is None or series.accepted[-1].run_id >= last.run_id):
        return accepted_text(series.accepted[-1])
    return "–" if last is None else change_text(last)


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
        style = ("red" if s.changes[-1].verdict == Verdict.WORSE else "green") if s.changes else None
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
    """Every change point of every series, with what changed between the runs on either side; the changes
    accepted as intended too (verdict ``accepted``, the reason as what changed)."""
    columns = (Column("target", "target"), Column("workload", "workload"), Column("host", "host"),
               Column("metric", "metric"), Column("run", "run", True),
               Column("previous_run", "after run", True, csv_only=True),
               Column("time", "time"), Column("before", "before", True), Column("after", "after", True),
               Column("change_pct", "change", True, unit="%"), Column("p_value", "p", True),
               Column("verdict", "verdict"), Column("what_changed", "what changed"))
    rows = []
    for s in history.series:
        rows += [_change_row(s, c) for c in s.changes]
        rows += [_accepted_row(s, a) for a in s.accepted]
    if not rows:
        return None
    return Table("change points", columns, tuple(rows))


def _accepted_row(s: Series, a: Accepted) -> tuple[Cell, ...]:
    time = next(p.time for p in s.points if p.run_id == a.run_id)
    return (Cell(s.key.target), Cell(s.key.name), Cell(s.key.host or "–"), Cell(s.metric.name),
            Cell(str(a.run_id), a.run_id), Cell("–"), Cell(f"{time:%Y-%m-%d %H:%M}", time.isoformat()), Cell("–"),
            Cell("–"), Cell("–"), Cell("–"), Cell("accepted", style="cyan"),
            Cell(f"{a.reason} ({a.by}, {a.at:%Y-%m-%d})"))


def _change_row(s: Series, c: ChangeAt) -> tuple[Cell, ...]:
    unit = s.metric.unit
    return (Cell(s.key.target), Cell(s.key.name), Cell(s.key.host or "–"), Cell(s.metric.name),
            Cell(str(c.run_id), c.run_id), Cell(str(c.previous_run), c.previous_run),
            Cell(f"{c.time:%Y-%m-%d %H:%M}", c.time.isoformat()), Cell(format_value(unit, c.before), c.before),
            Cell(format_value(unit, c.after), c.after), Cell(_pct(c.change), round(c.change * 100, 3)),
            Cell(_p(c.p_value), c.p_value),
            Cell(c.verdict if c.confirmed else f"{c.verdict}, unconfirmed: {c.runs_needed} more run(s) would "
                 "confirm it", c.verdict, style="red" if c.verdict == Verdict.WORSE else "green"),
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
            "confirmed": c.confirmed, "runs_needed": c.runs_needed,
            "what_changed": [{"what": w.what, "before": w.before, "after": w.after} for w in c.what_changed]}


def accepted_document(a: Accepted) -> dict[str, Any]:
    return {"run": a.run_id, "reason": a.reason, "at": a.at.isoformat(), "by": a.by}


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
        "accepted": [accepted_document(a) for a in s.accepted],
        "started_by": [{"option": d.option, "before": d.a, "after": d.b} for d in s.started_by],
    }


def history_document(history: History) -> dict[str, Any]:
    """``{"schema": "iolab.history/1", "method", "series": [{"target", "workload", "metric", "points": [{"run",
    "time", "value"}], "change_points": [{"run", "before", "after", "change_pct", "p_value", "confirmed",
    "runs_needed", "what_changed"}], "accepted": [{"run", "reason", "at", "by"}], …}]}``: values in the
    metric's ``unit`` (``IOPS``, ``B/s``, ``ns``, ``µs``), ``before``/``after`` the segment means either
    side, ``change_pct`` in percent, times ISO 8601 (UTC); an unconfirmed change (too few runs after it to
    be significant) has ``confirmed`` false and ``runs_needed`` the runs at its level that would confirm it."""
    return {"schema": "iolab.history/1", "method": history.method,
            "series": [series_document(s) for s in history.series]}


def baseline_text(unit: str, b: Baseline | None, verdict: GateVerdict) -> str:
    """``runs 1–6: 15079 ± 38.9 (n=6); left out: 7, 8`` (off the level), with the accepted change it began
    with, or how many runs it still needs."""
    if b is None:
        return "– (no earlier run)"
    if not b.points:
        text = "– (no run at this level yet)"
    else:
        text = f"runs {b.first_run}–{b.last_run}: {format_value(unit, b.summary.mean)}"
        if b.summary.ci95 is not None:
            text += f" ± {format_value(unit, (b.summary.ci95[1] - b.summary.ci95[0]) / 2)}"
        text += f" (n={b.summary.n})"
    if b.pinned:
        text += ", pinned"
    if b.left_out:
        text += f"; left out (off the level): {_runs(b.left_out)}"
    if b.accepted is not None:
        text += f"; since {accepted_text(b.accepted)}"
    if verdict == GateVerdict.NO_HISTORY:
        text += f", {len(b.points)} of the {b.needed} runs needed to judge"
    elif b.accepted is not None and len(b.points) < b.needed:
        text += f", {len(b.points)} of the {b.needed} runs needed to test: held to the bound until then"
    return text


def _runs(ids: Sequence[int], shown: int = 6) -> str:
    return ", ".join(map(str, ids[:shown])) + (f" … ({len(ids)} runs)" if len(ids) > shown else "")


def gate_table(gate: Gate, every: bool = False) -> Table:
    """The gate's verdict per series, the failing ones first, only those unless ``every``
    (``Gate.shown``): the run against its baseline."""
    columns = (Column("target", "target"), Column("workload", "workload"), Column("metric", "metric"),
               Column("baseline", "baseline"), Column("value", "run", True),
               Column("change_pct", "change", True, unit="%"), Column("p_value", "p", True),
               Column("adjusted_p", "p (Holm)", True), Column("verdict", "verdict"),
               Column("what_changed", "what changed since the baseline's last run"))
    rows = []
    for r in gate.shown(every):
        unit = r.metric.unit
        style = {GateVerdict.REGRESSION: "red", GateVerdict.WORSE: "yellow", GateVerdict.BETTER: "green",
                 GateVerdict.NO_HISTORY: "yellow", GateVerdict.ACCEPTED: "cyan"}.get(r.verdict)
        rows.append((Cell(r.key.target), Cell(r.key.name), Cell(r.metric.name),
                     Cell(baseline_text(unit, r.baseline, r.verdict)), Cell(format_value(unit, r.value), r.value),
                     Cell(_pct(r.change), None if r.change is None else round(r.change * 100, 3)),
                     Cell(_p(r.p_value), r.p_value), Cell(_p(r.adjusted_p), r.adjusted_p),
                     Cell(r.verdict, style=style), Cell(changes_mod.describe(r.what_changed))))
    counts = {v: sum(r.verdict == v for r in gate.rows) for v in GateVerdict}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    hidden = len(gate.rows) - len(rows)
    notes = (f"{len(gate.rows)} series: {summary}" + (f" ({hidden} not shown: --all shows every series)"
                                                        if hidden else ""),
             f"regression: worse than the baseline's mean by more than {gate.max_regression * 100:g} % and Holm-"
             f"adjusted p < {gate.alpha:g}; test: {gate.method}")
    return Table(f"gate: run {gate.run_id} against its history", columns, tuple(rows), notes)


def _row_document(r: GateRow) -> dict[str, Any]:
    b = r.baseline
    return {"target": r.key.target, "workload": r.key.workload, "label": r.key.label, "direction": r.key.direction,
            "host": r.key.host, "metric": r.metric.name, "unit": r.metric.unit, "value": r.value,
            "baseline": None if b is None else {
                "runs": [p.run_id for p in b.points], "mean": b.summary.mean,
                "ci95": list(b.summary.ci95 or ()) or None, "left_out": list(b.left_out), "pinned": b.pinned,
                "accepted": None if b.accepted is None else accepted_document(b.accepted)},
            "change_pct": None if r.change is None else r.change * 100, "p_value": r.p_value,
            "adjusted_p": r.adjusted_p, "verdict": r.verdict,
            "what_changed": [{"what": w.what, "before": w.before, "after": w.after} for w in r.what_changed]}


def gate_document(gate: Gate) -> dict[str, Any]:
    """The gate as JSON (``iolab.gate/2``): per series (failing ones first) the baseline (its runs, mean,
    95 % CI, the runs left out as off its level, whether pinned, the accepted change it began with), the
    run's value, change (%), p-values and verdict."""
    return {"schema": "iolab.gate/2", "run": gate.run_id, "max_regression_pct": gate.max_regression * 100,
            "alpha": gate.alpha, "method": gate.method, "regressions": len(gate.regressions),
            "rows": [_row_document(r) for r in gate.shown(every=True)]}


def gate_junit(gate: Gate) -> str:
    """The gate as JUnit XML, as CI systems show test results: one ``testsuite`` for the run, one
    ``testcase`` per series (``classname`` its target, ``name`` its workload and metric), a ``failure`` per
    regression, ``worse`` as a passing case with its text in ``system-out``, a series with too little
    history ``skipped``. (The JUnit XML of Ant's ``junitreport``, which Jenkins, GitLab and GitHub read.)"""
    import xml.etree.ElementTree as ET

    suite = ET.Element("testsuite", name=f"iolab gate: run {gate.run_id}", tests=str(len(gate.rows)),
                       failures=str(len(gate.regressions)),
                       skipped=str(sum(r.verdict == GateVerdict.NO_HISTORY for r in gate.rows)), errors="0")
    for r in gate.shown(every=True):
        case = ET.SubElement(suite, "testcase", classname=r.key.target, name=f"{r.key.name} {r.metric.name}")
        text = (f"{r.verdict}: run {format_value(r.metric.unit, r.value)} against "
                f"{baseline_text(r.metric.unit, r.baseline, r.verdict)}; change {_pct(r.change)}, p {_p(r.p_value)}, "
                f"p (Holm) {_p(r.adjusted_p)}; what changed: {changes_mod.describe(r.what_changed)}")
        if r.verdict == GateVerdict.REGRESSION:
            ET.SubElement(case, "failure", message=f"{r.metric.name} {_pct(r.change)}", type="regression").text = text
        elif r.verdict == GateVerdict.NO_HISTORY:
            ET.SubElement(case, "skipped", message=text)
        else:
            ET.SubElement(case, "system-out").text = text
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
