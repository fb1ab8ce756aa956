"""The report's charts: one Vega-Lite spec each (built with Altair), used as-is for the
interactive HTML (vega-embed) and for PNG/SVG (vl-convert).

Every chart facets by workload (or workload family), one panel each with its own y scale, and
colours by subject with the same colour for a subject in every chart. Latency axes are
logarithmic (a throttled disk and an SSD differ by orders of magnitude). All data is inline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import altair as alt

from ..model import Run, TimeSeries
from . import chartdata
from .chartdata import Row

#: Tableau 10: distinguishable, and readable in print.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac")
PANEL_WIDTH, PANEL_HEIGHT, COLUMNS = 230, 170, 4
#: Above this many points per line the time series are drawn without point marks.
MAX_POINTS_WITH_MARKS = 300


@dataclass(frozen=True)
class Chart:
    """A chart: ``name`` is its file stem (``iops-bars``), ``group`` the report section it
    belongs to, ``spec`` a complete Vega-Lite spec (a JSON-able dict with its data inline)."""

    name: str
    title: str
    group: str
    description: str
    spec: Mapping[str, Any]


def _color(subjects: Sequence[str], shown: Sequence[str] | None = None) -> alt.Color:
    """Colour by subject, the i-th of ``subjects`` in the i-th colour; the legend lists
    ``shown`` (default: all), the subjects the chart has data for."""
    domain = list(subjects if shown is None else shown)
    colours = [PALETTE[list(subjects).index(s) % len(PALETTE)] for s in domain]
    return alt.Color("subject:N", title=None, scale=alt.Scale(domain=domain, range=colours),
                     legend=alt.Legend(orient="top", labelLimit=400))


def _finish(layer: Any, rows: list[Row], facet: str, sort: Sequence[str], title: str, subtitle: str) -> dict[str, Any]:
    """Facet ``layer`` by ``facet`` over inline ``rows`` and return the spec as a dict."""
    chart = layer.properties(width=PANEL_WIDTH, height=PANEL_HEIGHT).facet(
        facet=alt.Facet(f"{facet}:N", sort=list(sort), title=None,
                        header=alt.Header(labelFontWeight="bold", labelFontSize=12, labelLimit=PANEL_WIDTH)),
        columns=max(1, min(COLUMNS, len(sort))), data=alt.Data(values=rows),
    ).resolve_scale(y="independent", x="independent").properties(
        title=alt.Title(title, subtitle=subtitle, anchor="start", fontSize=15),
    ).configure(background="white", font="Helvetica, Arial, sans-serif").configure_view(stroke="#ddd")
    return chart.to_dict()  # type: ignore[no-any-return]


def bars(rows: list[Row], subjects: Sequence[str], categories: Sequence[str], field: str, unit: str,
         fmt: str) -> dict[str, Any]:
    """Bars of the repetitions' mean per subject, one panel per workload, each repetition a dot."""
    base = alt.Chart().transform_filter(f"isValid(datum.{field})")
    x = alt.X("subject:N", sort=list(subjects), title=None, axis=alt.Axis(labelAngle=-20, labelLimit=110))
    subject, category = alt.Tooltip("subject:N", title="subject"), alt.Tooltip("category:N", title="workload")
    bar = base.mark_bar().encode(
        x=x, y=alt.Y(f"mean({field}):Q", title=unit), color=_color(subjects),
        tooltip=[subject, category, alt.Tooltip(f"mean({field}):Q", title=f"mean {unit}", format=fmt),
                 alt.Tooltip(f"stdev({field}):Q", title="stdev of repeats", format=fmt),
                 alt.Tooltip(f"count({field}):Q", title="repeats")],
    )
    dots = base.mark_circle(size=28, color="#222", opacity=0.75).encode(
        x=x, y=alt.Y(f"{field}:Q"),
        tooltip=[subject, category, alt.Tooltip("repeat:O", title="repeat"),
                 alt.Tooltip(f"{field}:Q", title=unit, format=fmt)],
    )
    what = "IOPS" if field == "iops" else "Bandwidth"
    return _finish(alt.layer(bar, dots), rows, "category", categories, f"{what} per workload",
                   "bar: mean of the repetitions; dots: each repetition")


def percentiles(rows: list[Row], labels: Sequence[str], subjects: Sequence[str],
                categories: Sequence[str]) -> dict[str, Any]:
    """Completion-latency percentile curves, log latency axis."""
    line = alt.Chart().mark_line(point=True).encode(
        x=alt.X("pct:N", sort=list(labels), title="percentile", axis=alt.Axis(labelAngle=-45)),
        y=alt.Y("lat_us:Q", scale=alt.Scale(type="log"), title="completion latency (µs)"),
        color=_color(subjects), detail="repeat:N",
        tooltip=[alt.Tooltip("subject:N"), alt.Tooltip("category:N", title="workload"),
                 alt.Tooltip("pct:N", title="percentile"),
                 alt.Tooltip("lat_us:Q", title="latency (µs)", format=",.1f")],
    )
    shown = [c for c in categories if any(r["category"] == c for r in rows)]
    return _finish(line, rows, "category", shown, "Completion latency percentiles",
                   "pooled over the repetitions' json+ histograms; log scale")


def _log_if(log: bool) -> Any:
    return alt.Scale(type="log") if log else alt.Undefined


def scaling_iops(rows: list[Row], subjects: Sequence[str], axis_title: str) -> dict[str, Any]:
    """IOPS against the matrix axis (log2 x), one line per subject; log IOPS when the subjects
    differ by more than 10×."""
    xs = sorted({r["x"] for r in rows})
    log = wide_spread(rows, "iops", panel="family")
    line = alt.Chart().mark_line(point=True).encode(
        x=alt.X("x:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(values=xs, format="d"), title=axis_title),
        y=alt.Y("iops:Q", title="IOPS", scale=_log_if(log)), color=_color(subjects),
        tooltip=[alt.Tooltip("subject:N"), alt.Tooltip("workload:N"), alt.Tooltip("x:Q", title=axis_title),
                 alt.Tooltip("iops:Q", title="IOPS (mean)", format=",.0f")],
    )
    families = list(dict.fromkeys(r["family"] for r in rows))
    name = axis_title.split()[0]
    return _finish(line, rows, "family", families, f"IOPS vs {name}",
                   "mean of the repetitions" + ("; log scale" if log else ""))


def latency_vs_iops(rows: list[Row], subjects: Sequence[str], axis_title: str) -> dict[str, Any]:
    """Mean and p99 completion latency against IOPS along the axis sweep (log latency; log
    IOPS too when the subjects differ by more than 10×)."""
    log = wide_spread(rows, "iops", panel="family")
    line = alt.Chart().transform_fold(["lat_mean_us", "lat_p99_us"], as_=["statistic", "lat_us"]).transform_filter(
        "isValid(datum.lat_us) && datum.lat_us > 0"
    ).mark_line(point=True).encode(
        x=alt.X("iops:Q", title="IOPS", scale=_log_if(log)),
        y=alt.Y("lat_us:Q", scale=alt.Scale(type="log"), title="latency (µs)"),
        color=_color(subjects), order="x:Q",
        strokeDash=alt.StrokeDash("statistic:N", legend=None),  # the subtitle says which is which
        tooltip=[alt.Tooltip("subject:N"), alt.Tooltip("workload:N"), alt.Tooltip("x:Q", title=axis_title),
                 alt.Tooltip("iops:Q", title="IOPS", format=",.0f"),
                 alt.Tooltip("lat_mean_us:Q", title="mean clat (µs)", format=",.1f"),
                 alt.Tooltip("lat_p99_us:Q", title="p99 clat (µs)", format=",.1f")],
    )
    families = list(dict.fromkeys(r["family"] for r in rows))
    name = axis_title.split()[0]
    return _finish(line, rows, "family", families, f"Latency vs IOPS ({name} sweep)",
                   "solid: mean, dashed: p99 completion latency; log scale")


def wide_spread(rows: list[Row], field: str, ratio: float = 10.0, panel: str = "category") -> bool:
    """Whether in some panel one subject's median is ``ratio`` times another's: on a linear
    axis the slower one would be a flat line at zero, so its own ups and downs would not show."""
    medians: dict[str, list[float]] = {}
    per: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r[field]:
            per.setdefault((r[panel], r["subject"]), []).append(r[field])
    for (category, _), values in per.items():
        medians.setdefault(category, []).append(sorted(values)[len(values) // 2])
    return any(max(m) > ratio * min(m) for m in medians.values() if len(m) > 1)


def timeseries(rows: list[Row], subjects: Sequence[str], categories: Sequence[str], field: str,
               unit: str, fmt: str, log: bool = False) -> dict[str, Any]:
    """Per-second values of each job over its run, repetitions overlaid (one line each); a
    log axis when asked or when the subjects differ by more than 10× (``wide_spread``)."""
    log = log or wide_spread(rows, field)
    per_line: dict[tuple[Any, ...], int] = {}
    for r in rows:
        key = (r["subject"], r["category"], r["repeat"])
        per_line[key] = per_line.get(key, 0) + 1
    marks = max(per_line.values(), default=0) <= MAX_POINTS_WITH_MARKS
    condition = f"isValid(datum.{field})" + (f" && datum.{field} > 0" if log else "")
    line = alt.Chart().transform_filter(condition).mark_line(
        point=alt.OverlayMarkDef(size=14) if marks else False, opacity=0.85, strokeWidth=1.5,
    ).encode(
        x=alt.X("t_s:Q", title="time (s)"),
        y=alt.Y(f"{field}:Q", title=unit, scale=_log_if(log)),
        color=_color(subjects, [s for s in subjects if any(r["subject"] == s for r in rows)]), detail="repeat:N",
        tooltip=[alt.Tooltip("subject:N"), alt.Tooltip("category:N", title="workload"),
                 alt.Tooltip("repeat:O"), alt.Tooltip("t_s:Q", title="time (s)"),
                 alt.Tooltip(f"{field}:Q", title=unit, format=fmt)],
    )
    shown = [c for c in categories if any(r["category"] == c and r[field] is not None for r in rows)]
    what = {"iops": "IOPS", "mib_s": "Bandwidth", "lat_us": "Completion latency"}[field]
    hosts = "; a line per host of multi-host targets" if any(r.get("host") for r in rows) else ""
    return _finish(line, rows, "category", shown, f"{what} over time",
                   "1 s averages from fio's logs; repetitions overlaid" + hosts + ("; log scale" if log else ""))


def build(runs: Sequence[Run], series: Mapping[int, Sequence[TimeSeries]]) -> list[Chart]:
    """Every chart the runs have data for, in report order."""
    subj = chartdata.subjects(runs)
    cats = chartdata.Categories(runs)
    subjects, categories = subj.order, cats.order
    charts = []
    reps = chartdata.repeat_rows(runs, subj, cats)
    if reps:
        charts += [
            Chart("iops-bars", "IOPS per workload", "Throughput", "IOPS of each workload; bars are the mean of the "
                  "repetitions, dots each repetition.", bars(reps, subjects, categories, "iops", "IOPS", ",.0f")),
            Chart("bandwidth-bars", "Bandwidth per workload", "Throughput", "Bandwidth in MiB/s of each workload.",
                  bars(reps, subjects, categories, "mib_s", "MiB/s", ",.1f")),
        ]
    pct_rows, labels = chartdata.percentile_rows(runs, subj, cats)
    if pct_rows:
        charts.append(Chart("latency-percentiles", "Completion latency percentiles", "Latency",
                            "Completion latency (clat) at each percentile fio reports, log scale.",
                            percentiles(pct_rows, labels, subjects, categories)))
    for axis, title in chartdata.SCALING_AXES.items():
        rows = chartdata.scaling_rows(runs, subj, axis)
        if rows:
            charts += [
                Chart(f"{axis}-iops", f"IOPS vs {axis}", "Scaling", f"How IOPS grows with {axis}.",
                      scaling_iops(rows, subjects, title)),
                Chart(f"{axis}-latency", f"Latency vs IOPS ({axis} sweep)", "Scaling",
                      f"What each step of {axis} costs in latency.", latency_vs_iops(rows, subjects, title)),
            ]
    ts = chartdata.time_rows(runs, series, subj, cats)
    if ts:
        # hosts of multi-host targets come after every subject, which keep their colours
        lines = subjects + [s for s in dict.fromkeys(r["subject"] for r in ts) if s not in subjects]
        charts += [
            Chart("timeseries-iops", "IOPS over time", "Time series", "Per-second IOPS of each job.",
                  timeseries(ts, lines, categories, "iops", "IOPS", ",.0f")),
            Chart("timeseries-bandwidth", "Bandwidth over time", "Time series", "Per-second MiB/s of each job.",
                  timeseries(ts, lines, categories, "mib_s", "MiB/s", ",.1f")),
            Chart("timeseries-latency", "Completion latency over time", "Time series",
                  "Per-second mean completion latency of each job, log scale.",
                  timeseries(ts, lines, categories, "lat_us", "clat (µs)", ",.1f", log=True)),
        ]
    return charts
