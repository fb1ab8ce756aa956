"""The history page of ``iolab report --history``: one chart per series, its tables at the top.

Each chart (Vega-Lite, built with Altair; the page is rendered by ``report.html`` like every report,
self-contained) shows a series' points over time, each segment's mean as a line across its runs with
its 95 % interval as a band (split at an unconfirmed change too), each change point as a dashed rule
labelled with its size and what changed (``analyze.changes.describe``), and each change accepted as
intended as a solid rule labelled with its reason. Latencies are drawn in µs, bandwidth in MiB/s.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any

import altair as alt

from ..analyze import changes
from ..analyze.history import History, Series
from .charts import CARD_WIDTH, Chart, config, spec
from .document import Finding, Report
from .history import history_tables

GROUP = "History"
#: Display unit and divisor per metric unit.
SCALES = {"ns": ("µs", 1e3), "B/s": ("MiB/s", 2**20)}
#: What a change marker's label shows of what changed (the tooltip has it all).
LABEL_CHANGES = 2


def series_rows(s: Series) -> list[dict[str, Any]]:
    """The inline data of one series' chart: its points, segments and change points, each row marked by
    ``kind``; values in the display unit (``SCALES``)."""
    _, divisor = SCALES.get(s.metric.unit, (s.metric.unit, 1.0))
    rows: list[dict[str, Any]] = [{"kind": "point", "t": p.time.isoformat(), "run": p.run_id,
                                   "value": p.value / divisor} for p in s.points]
    for g in s.segments:
        lo, hi = g.summary.ci95 or (g.summary.mean, g.summary.mean)
        assert g.summary.mean is not None and lo is not None and hi is not None
        rows.append({"kind": "segment", "t": s.points[g.start].time.isoformat(),
                     "t2": s.points[g.end - 1].time.isoformat(), "mean": g.summary.mean / divisor,
                     "lo": lo / divisor, "hi": hi / divisor, "runs": f"{g.first_run}–{g.last_run}", "n": g.summary.n})
    for c in s.changes:
        unconfirmed = "" if c.confirmed else f" · unconfirmed ({c.runs_needed} more runs)"
        rows.append({"kind": "change", "t": c.time.isoformat(), "run": c.run_id, "verdict": c.verdict,
                     "label": f"run {c.run_id}: {c.change * 100:+.1f} %{unconfirmed} · "
                              f"{changes.describe(c.what_changed, LABEL_CHANGES)}",
                     "what": changes.describe(c.what_changed, 99), "p": c.p_value})
    times = {p.run_id: p.time for p in s.points}
    for a in s.accepted:
        rows.append({"kind": "accepted", "t": times[a.run_id].isoformat(), "run": a.run_id,
                     "label": f"run {a.run_id}: accepted · {a.reason}",
                     "what": f"{a.reason} ({a.by}, {a.at:%Y-%m-%d})"})
    return rows


def series_chart(s: Series) -> dict[str, Any]:
    """The Vega-Lite spec of one series (see the module docstring)."""
    unit, _ = SCALES.get(s.metric.unit, (s.metric.unit, 1.0))
    base = alt.Chart()
    x = alt.X("t:T", title="time")
    points = base.transform_filter("datum.kind == 'point'").mark_line(point=True, strokeWidth=1, opacity=0.8).encode(
        x=x, y=alt.Y("value:Q", title=f"{s.metric.title} ({unit})", scale=alt.Scale(zero=False)),
        tooltip=[alt.Tooltip("run:Q"), alt.Tooltip("t:T", title="time", format="%Y-%m-%d %H:%M"),
                 alt.Tooltip("value:Q", title=unit, format=",.4~g")])
    segments = base.transform_filter("datum.kind == 'segment'")
    band = segments.mark_rect(opacity=0.18, color="#4e79a7").encode(x=x, x2="t2:T", y="lo:Q", y2="hi:Q")
    means = segments.mark_rule(strokeWidth=2.5, color="#4e79a7").encode(
        x=x, x2="t2:T", y="mean:Q",
        tooltip=[alt.Tooltip("runs:N", title="runs"), alt.Tooltip("n:Q", title="points"),
                 alt.Tooltip("mean:Q", title=f"mean ({unit})", format=",.4~g"),
                 alt.Tooltip("lo:Q", title="95 % CI low", format=",.4~g"),
                 alt.Tooltip("hi:Q", title="95 % CI high", format=",.4~g")])
    marked = base.transform_filter("datum.kind == 'change'")
    colour = alt.Color("verdict:N", scale=alt.Scale(domain=["better", "worse"], range=["#59a14f", "#e15759"]),
                       legend=None)
    rules = marked.mark_rule(strokeDash=[5, 3], strokeWidth=2).encode(
        x=x, color=colour, tooltip=[alt.Tooltip("label:N", title="change"), alt.Tooltip("what:N", title="what changed"),
                                    alt.Tooltip("p:Q", title="p-value", format=".3g")])
    labels = marked.mark_text(align="left", baseline="top", dx=4, dy=4, fontSize=11, limit=460).encode(
        x=x, y=alt.value(0), text="label:N", color=colour)
    accepted = base.transform_filter("datum.kind == 'accepted'")
    accepted_rules = accepted.mark_rule(strokeWidth=2, color="#76b7b2").encode(
        x=x, tooltip=[alt.Tooltip("label:N", title="accepted"), alt.Tooltip("what:N", title="reason")])
    accepted_labels = accepted.mark_text(align="left", baseline="bottom", dx=4, dy=-4, fontSize=11, limit=460,
                                         color="#76b7b2").encode(x=x, y=alt.value(230), text="label:N")
    what = "segment means with 95 % intervals; dashed: change points; solid: accepted changes"
    chart = alt.layer(band, means, points, rules, labels, accepted_rules, accepted_labels,
                      data=alt.Data(values=series_rows(s))).properties(
        width=CARD_WIDTH - 160, height=230,
        title=alt.Title(f"{s.key.name} on {s.key.target}" + (f" · {s.key.host}" if s.key.host else "")
                        + f": {s.metric.title}", subtitle=what, anchor="start", fontSize=14),
        config=config(),
    )
    return spec(chart)


def history_charts(history: History) -> list[Chart]:
    """One chart per series, in the history's order."""
    return [Chart(f"history-{i + 1}", f"{s.key.name} on {s.key.target}: {s.metric.title}", GROUP,
                  f"{len(s.points)} runs, {len(s.changes)} change point(s)", series_chart(s))
            for i, s in enumerate(history.series)]


def breaks(history: History) -> Sequence[Finding]:
    """A finding per series that began because job options changed (never joined to the one before)."""
    seen: dict[Any, Finding] = {}
    for s in history.series:
        if s.key.part > 1 and s.key not in seen:
            differs = "; ".join(f"{d.option} {d.a} → {d.b}" for d in s.started_by) or "options not comparable"
            seen[s.key] = Finding(f"{s.key.name} on {s.key.target}", "warning",
                                  f"a new series from run {s.points[0].run_id}: {differs}")
    return tuple(seen.values())


def history_page(history: History, title: str | None = None) -> Report:
    """The history as a report document for ``html.render`` (and ``images``, ``markdown``)."""
    runs = len({p.run_id for s in history.series for p in s.points})
    return Report(title=title or f"history of {runs} runs: {len(history.series)} series", runs=(),
                  summary=tuple(history_tables(history)), charts=tuple(history_charts(history)),
                  findings=tuple(breaks(history)), facts=(), job_files=(), generated_at=datetime.now(UTC),
                  iolab_version=version("iolab"))
