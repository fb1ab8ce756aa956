"""The report's charts: one Vega-Lite spec each (built with Altair), used as-is for the
interactive HTML (vega-embed) and for PNG/SVG (vl-convert).

Every chart facets by workload (or workload family), one panel each, and colours by subject with
the same colour for a subject in every chart. The panels of one chart show one metric on one shared
y scale, so 124k and 311k IOPS never look alike (``iolab report --independent-y``, ``y_scales``,
gives each panel its own). Sweep and saturation charts size their panels to the report's card width
(``CARD_WIDTH``). Latency axes are logarithmic (a throttled disk and an SSD differ by orders of
magnitude) and labelled in µs, ms or s as each value needs; time axes in s, min or h as the run's
length needs. All data is inline.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import altair as alt

from ..analyze import sweep
from ..analyze.compare import Comparison
from ..model import Run, TimeSeries
from . import chartdata
from .chartdata import Row

#: Whether chart specs are checked against Vega-Lite's JSON schema (``spec``): the tests set it.
CHECKED = bool(os.environ.get("IOLAB_CHECK_CHARTS"))
if not CHECKED:  # altair also checks every object as it is made ("debug mode"): a third of a chart's time
    alt.utils.schemapi.disable_debug_mode()

#: Tableau 10: distinguishable, and readable in print.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac")
PANEL_WIDTH, PANEL_HEIGHT, COLUMNS = 230, 170, 4
#: The drawing width of a report card (a 1,400 px window less the page's and the card's padding, the
#: y axis and the legend): wide charts share it between their panels.
CARD_WIDTH = 1180
#: Whether the panels of a chart get their own y scale (``iolab report --independent-y``; ``y_scales``).
_INDEPENDENT_Y: ContextVar[bool] = ContextVar("independent_y", default=False)


@contextlib.contextmanager
def y_scales(independent: bool) -> Iterator[None]:
    """Charts built inside give each panel its own y scale when ``independent`` (else one shared)."""
    token = _INDEPENDENT_Y.set(independent)
    try:
        yield
    finally:
        _INDEPENDENT_Y.reset(token)
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


def panel_size(panels: int, wide: bool) -> tuple[int, int]:
    """(width, height) of each panel: the default size, or for a ``wide`` chart the card's width
    shared by the panels of a row (never narrower than the default), taller when there are few."""
    if not wide:
        return PANEL_WIDTH, PANEL_HEIGHT
    columns = max(1, min(COLUMNS, panels))
    width = max(PANEL_WIDTH, (CARD_WIDTH - 70 * columns) // columns)
    return width, (PANEL_HEIGHT * 2 if columns == 1 else int(PANEL_HEIGHT * 1.5) if columns == 2 else PANEL_HEIGHT)


def spec(chart: Any) -> dict[str, Any]:
    """The chart's Vega-Lite spec as a dict. Checked against Vega-Lite's JSON schema only when
    ``IOLAB_CHECK_CHARTS`` is set (the tests set it): jsonschema's walk over a chart took a tenth of
    a report's time, every time, for specs the code builds the same way each time."""
    return chart.to_dict(validate=CHECKED)  # type: ignore[no-any-return]


def config() -> Any:
    """Every chart's look: a white background, the page's font, a light frame around each view."""
    return alt.Config(background="white", font="Helvetica, Arial, sans-serif", view=alt.ViewConfig(stroke="#ddd"))


def _finish(layer: Any, rows: list[Row], facet: str, sort: Sequence[str], title: str, subtitle: str,
            wide: bool = False) -> dict[str, Any]:
    """Facet ``layer`` by ``facet`` over inline ``rows`` and return the spec as a dict: the panels
    share the y scale unless ``y_scales(True)``; ``wide`` sizes them to the card (``panel_size``)."""
    width, height = panel_size(len(sort), wide)
    layer.width, layer.height = width, height  # set in place: altair's chained methods each copy the chart
    chart = alt.FacetChart(
        spec=layer, data=alt.Data(values=rows),
        facet=alt.Facet(f"{facet}:N", sort=list(sort), title=None,
                        header=alt.Header(labelFontWeight="bold", labelFontSize=12, labelLimit=width)),
        columns=max(1, min(COLUMNS, len(sort))),
        resolve=alt.Resolve(scale=alt.ScaleResolveMap(y="independent" if _INDEPENDENT_Y.get() else "shared",
                                                      x="independent")),
        title=alt.Title(title, subtitle=subtitle, anchor="start", fontSize=15), config=config())
    return spec(chart)


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
        y=alt.Y("lat_us:Q", scale=alt.Scale(type="log"), title="completion latency",
                axis=alt.Axis(labelExpr=LATENCY_LABELS)),
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


#: Axis labels for latencies given in µs: µs, ms or s, as the value needs (a log axis spans all three).
LATENCY_LABELS = ("datum.value >= 1e6 ? format(datum.value / 1e6, '~g') + ' s' : datum.value >= 1e3 ? "
                  "format(datum.value / 1e3, '~g') + ' ms' : format(datum.value, '~g') + ' µs'")
#: Axis titles of a sweep's grid axes.
AXIS_TITLES = {"iodepth": "iodepth (queue depth per job)", "numjobs": "numjobs (jobs)"}


def _log2(values: Sequence[int]) -> alt.Scale:
    return alt.Scale(type="log", base=2, domain=[min(values), max(values)])


def _lines_of(rows: list[Row], other: str, subjects: Sequence[str]) -> tuple[Any, str, list[str]]:
    """How a sweep chart draws its lines: a colour per value of the ``other`` grid axis with a panel
    per subject and family, or, when that axis has one value, a colour per subject with a panel per
    family (so two runs' lines meet in one panel). Returns (colour encoding, panel field, panels)."""
    if len({r[other] for r in rows}) > 1:
        colour = alt.Color(f"{other}:O", title=other, scale=alt.Scale(range=list(PALETTE)),
                           legend=alt.Legend(orient="top"))
        return colour, "panel", list(dict.fromkeys(r["panel"] for r in rows))
    shown = [s for s in subjects if any(r["subject"] == s for r in rows)]
    return _color(subjects, shown), "family", list(dict.fromkeys(r["family"] for r in rows))


def sweep_lines(rows: list[Row], subjects: Sequence[str], x: str, field: str, unit: str, fmt: str,
                log_y: bool) -> dict[str, Any]:
    """A sweep's ``field`` against one grid axis (``x``: iodepth or numjobs, log2), a line per value
    of the other (or per subject, ``_lines_of``)."""
    other = "numjobs" if x == "iodepth" else "iodepth"
    xs = sorted({r[x] for r in rows})
    colour, panel, panels = _lines_of(rows, other, subjects)
    line = alt.Chart().transform_filter(f"isValid(datum.{field}) && datum.{field} > 0").mark_line(point=True).encode(
        x=alt.X(f"{x}:Q", scale=_log2(xs), axis=alt.Axis(values=xs, format="d"), title=AXIS_TITLES[x]),
        y=alt.Y(f"{field}:Q", title=unit, scale=_log_if(log_y),
                axis=alt.Axis(labelExpr=LATENCY_LABELS) if field.startswith("lat_") else alt.Undefined),
        color=colour, detail="subject:N",
        tooltip=[alt.Tooltip("subject:N"), alt.Tooltip("workload:N"), alt.Tooltip("iodepth:Q"),
                 alt.Tooltip("numjobs:Q"),
                 alt.Tooltip(f"{field}:Q", title=unit + (" (µs)" if field.startswith("lat_") else ""), format=fmt)],
    )
    what = "IOPS" if field == "iops" else "p99 completion latency"
    lines = other if panel == "panel" else "subject"
    return _finish(line, rows, panel, panels, f"{what} vs {x}",
                   f"a line per {lines}; mean of the repetitions" + ("; log scale" if log_y else ""), wide=True)


def sweep_heatmap(rows: list[Row]) -> dict[str, Any]:
    """IOPS over iodepth (down) × numjobs (across), the value in each cell, one panel each."""
    base = alt.Chart().encode(
        x=alt.X("numjobs:O", title=AXIS_TITLES["numjobs"], axis=alt.Axis(labelAngle=0)),
        y=alt.Y("iodepth:O", title=AXIS_TITLES["iodepth"]),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("iops:Q", title="IOPS", scale=alt.Scale(scheme="viridis"),
                        legend=alt.Legend(orient="right", format="~s")),
        tooltip=[alt.Tooltip("panel:N", title="sweep"), alt.Tooltip("iodepth:Q"), alt.Tooltip("numjobs:Q"),
                 alt.Tooltip("iops:Q", title="IOPS", format=",.0f"),
                 alt.Tooltip("lat_p99_us:Q", title="p99 clat (µs)", format=",.1f")],
    )
    text = base.transform_joinaggregate(top="max(iops)", groupby=["panel"]).mark_text(fontSize=10).encode(
        text=alt.Text("iops:Q", format=".3~s"),
        color=alt.condition("datum.iops > 0.6 * datum.top", alt.value("black"), alt.value("white")),
    )
    panels = list(dict.fromkeys(r["panel"] for r in rows))
    spec = _finish(alt.layer(cells, text), rows, "panel", panels, "IOPS over iodepth × numjobs",
                   "mean of the repetitions; each panel its own colour scale", wide=True)
    spec["resolve"] = {**spec.get("resolve", {}), "scale": {**spec.get("resolve", {}).get("scale", {}),
                                                           "color": "independent"}}
    return spec


def saturation(rows: list[Row], subjects: Sequence[str]) -> dict[str, Any]:
    """The latency–IOPS curve of a sweep: p99 (solid) and mean (dashed) completion latency against
    IOPS, a line per numjobs (or subject, ``_lines_of``) through its iodepths: where latency climbs
    while IOPS stops growing, the path is saturated."""
    colour, panel, panels = _lines_of(rows, "numjobs", subjects)
    log = wide_spread(rows, "iops", panel=panel)
    line = alt.Chart().transform_fold(["lat_p99_us", "lat_mean_us"], as_=["statistic", "lat_us"]).transform_filter(
        "isValid(datum.lat_us) && datum.lat_us > 0"
    ).mark_line(point=True).encode(
        x=alt.X("iops:Q", title="IOPS", scale=_log_if(log)),
        y=alt.Y("lat_us:Q", scale=alt.Scale(type="log"), title="completion latency",
                axis=alt.Axis(labelExpr=LATENCY_LABELS)),
        color=colour, strokeDash=alt.StrokeDash("statistic:N", legend=None, sort=["lat_p99_us", "lat_mean_us"]),
        detail=["statistic:N", "subject:N"], order="iodepth:Q",
        tooltip=[alt.Tooltip("subject:N"), alt.Tooltip("workload:N"), alt.Tooltip("iodepth:Q"),
                 alt.Tooltip("numjobs:Q"),
                 alt.Tooltip("iops:Q", title="IOPS", format=",.0f"),
                 alt.Tooltip("lat_p99_us:Q", title="p99 clat (µs)", format=",.1f"),
                 alt.Tooltip("lat_mean_us:Q", title="mean clat (µs)", format=",.1f")],
    )
    lines = "numjobs" if panel == "panel" else "subject"
    return _finish(line, rows, panel, panels, "Latency vs IOPS: the saturation curve",
                   f"a line per {lines} through its iodepths; solid: p99, dashed: mean completion latency; log "
                   "latency" + (" and IOPS" if log else ""), wide=True)


def ratio_heatmap(rows: list[Row]) -> dict[str, Any]:
    """The ratio of two sweeps at each grid point: blue where the other side is better, red where
    worse (a log colour scale centred on ×1), the ratio in each cell."""
    higher = bool(rows[0]["higher_is_better"])
    worst = max(max(abs(math.log(r["ratio"])) for r in rows), math.log(1.05))
    base = alt.Chart().encode(
        x=alt.X("numjobs:O", title=AXIS_TITLES["numjobs"], axis=alt.Axis(labelAngle=0)),
        y=alt.Y("iodepth:O", title=AXIS_TITLES["iodepth"]),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("ratio:Q", title="ratio", legend=alt.Legend(orient="right", format=".3~g"),
                        scale=alt.Scale(type="log", domain=[math.exp(-worst), math.exp(worst)],
                                        scheme="redblue", reverse=not higher)),
        tooltip=[alt.Tooltip("panel:N", title="comparison"), alt.Tooltip("iodepth:Q"), alt.Tooltip("numjobs:Q"),
                 alt.Tooltip("ratio:Q", format=".3~g"), alt.Tooltip("verdict:N")],
    )
    text = base.mark_text(fontSize=10).encode(
        text=alt.Text("label:N"),
        color=alt.condition(f"abs(log(datum.ratio)) > {0.6 * worst}", alt.value("white"), alt.value("black")))
    labelled = [{**r, "label": f"×{r['ratio']:.3g}"} for r in rows]
    panels = list(dict.fromkeys(r["panel"] for r in rows))
    metric = rows[0]["metric"]
    return _finish(alt.layer(cells, text), labelled, "panel", panels, f"{metric} ratio over iodepth × numjobs",
                   f"other side / baseline; {'higher' if higher else 'lower'} is better: blue better, red worse",
                   wide=True)


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


def time_axis(longest_s: float) -> tuple[str, str]:
    """The title and label expression of a time axis in seconds: labelled in s up to 5 minutes, in
    min up to 5 hours, else in h (``300 s`` reads better as ``5 min``, ``36,000 s`` as ``10 h``)."""
    if longest_s > 5 * 3600:
        return "time (h)", "format(datum.value / 3600, '~g')"
    if longest_s > 300:
        return "time (min)", "format(datum.value / 60, '~g')"
    return "time (s)", "format(datum.value, '~g')"


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
    time_title, time_labels = time_axis(max((r["t_s"] for r in rows if r.get("t_s") is not None), default=0))
    line = alt.Chart().transform_filter(condition).mark_line(
        point=alt.OverlayMarkDef(size=14) if marks else False, opacity=0.85, strokeWidth=1.5,
    ).encode(
        x=alt.X("t_s:Q", title=time_title, axis=alt.Axis(labelExpr=time_labels)),
        y=alt.Y(f"{field}:Q", title=unit, scale=_log_if(log),
                axis=alt.Axis(labelExpr=LATENCY_LABELS) if field == "lat_us" else alt.Undefined),
        color=_color(subjects, [s for s in subjects if any(r["subject"] == s for r in rows)]), detail="repeat:N",
        tooltip=[alt.Tooltip("subject:N"), alt.Tooltip("category:N", title="workload"),
                 alt.Tooltip("repeat:O"), alt.Tooltip("t_s:Q", title="time (s)"),
                 alt.Tooltip(f"{field}:Q", title=unit + (" (µs)" if field == "lat_us" else ""), format=fmt)],
    )
    shown = [c for c in categories if any(r["category"] == c and r[field] is not None for r in rows)]
    what = {"iops": "IOPS", "mib_s": "Bandwidth", "lat_us": "Completion latency"}[field]
    hosts = "; a line per host of multi-host targets" if any(r.get("host") for r in rows) else ""
    return _finish(line, rows, "category", shown, f"{what} over time",
                   "1 s averages from fio's logs; repetitions overlaid" + hosts + ("; log scale" if log else ""))


def search_chart(rows: list[Row]) -> dict[str, Any]:
    """A saturation search: every probe's latency (the SLO metric) against its IOPS, a line per numjobs
    through its iodepths, the SLO as a dashed rule, the knee and the chosen point marked."""
    base = alt.Chart().encode(
        x=alt.X("iops:Q", title="IOPS"),
        y=alt.Y("lat_us:Q", scale=alt.Scale(type="log"), title=f"{rows[0]['metric']}",
                axis=alt.Axis(labelExpr=LATENCY_LABELS)),
    )
    tooltip = [alt.Tooltip("subject:N"), alt.Tooltip("point:N"), alt.Tooltip("role:N"),
               alt.Tooltip("iops:Q", title="IOPS", format=",.0f"),
               alt.Tooltip("lat_us:Q", title=f"{rows[0]['metric']} (µs)", format=",.1f")]
    colour = alt.Color("numjobs:O", title="numjobs", scale=alt.Scale(range=list(PALETTE)),
                       legend=alt.Legend(orient="top"))
    line = base.transform_filter("isValid(datum.lat_us)").mark_line(opacity=0.6).encode(
        color=colour, detail="numjobs:O", order="iodepth:Q")
    points = base.transform_filter("isValid(datum.lat_us)").mark_point(filled=True).encode(
        color=colour, tooltip=tooltip,
        shape=alt.Shape("role:N", title="point", scale=alt.Scale(
            domain=["probe", "knee", "chosen", "knee & chosen"], range=["circle", "triangle-up", "diamond", "square"])),
        size=alt.condition("datum.role == 'probe'", alt.value(40), alt.value(220)))
    labels = base.transform_filter("datum.role != 'probe'").mark_text(align="left", dx=9, dy=-8, fontSize=11).encode(
        text="point:N")
    slo = alt.Chart().transform_filter("isValid(datum.slo_us)").mark_rule(strokeDash=[6, 4], color="#b3261e").encode(
        y=alt.Y("mean(slo_us):Q"))
    subjects = list(dict.fromkeys(r["subject"] for r in rows))
    return _finish(alt.layer(line, points, labels, slo), rows, "subject", subjects, "Saturation search",
                   "each probe's latency against its IOPS, a line per numjobs through its iodepths; dashed: the SLO",
                   wide=True)


def sweep_charts(rows: list[Row], ratios: list[Row], subjects: Sequence[str]) -> list[Chart]:
    """The charts of sweeps (``chartdata.sweep_rows``) and of the ratio between two
    (``chartdata.ratio_rows``): IOPS and p99 latency against each grid axis that varies, the IOPS
    heatmap when both do, the saturation curve, the ratio heatmap."""
    charts = []
    axes = [a for a in ("iodepth", "numjobs") if len({r[a] for r in rows}) > 1]
    for axis in axes:
        charts.append(Chart(f"sweep-iops-{axis}", f"IOPS vs {axis}", "Sweep",
                            f"How IOPS grows with {axis}, a line per "
                            f"{'numjobs' if axis == 'iodepth' else 'iodepth'}.",
                            sweep_lines(rows, subjects, axis, "iops", "IOPS", ",.0f",
                                        wide_spread(rows, "iops", panel="family"))))
    for axis in axes:
        charts.append(Chart(f"sweep-p99-{axis}", f"p99 latency vs {axis}", "Sweep",
                            f"What each step of {axis} costs in p99 completion latency, log scale.",
                            sweep_lines(rows, subjects, axis, "lat_p99_us", "p99 completion latency", ",.1f", True)))
    if len(axes) == 2:
        charts.append(Chart("sweep-heatmap", "IOPS over iodepth × numjobs", "Sweep",
                            "IOPS at each point of the grid.", sweep_heatmap(rows)))
    if rows:
        charts.append(Chart("sweep-saturation", "Latency vs IOPS: the saturation curve", "Sweep",
                            "Completion latency against IOPS along each numjobs line: the knee is where IOPS stops "
                            "growing and latency climbs.", saturation(rows, subjects)))
    if ratios:
        charts.append(Chart("sweep-ratio", f"{ratios[0]['metric']} ratio over iodepth × numjobs", "Sweep",
                            "The other side's figure over the baseline's at each grid point.", ratio_heatmap(ratios)))
    return charts


def build(runs: Sequence[Run], series: Mapping[int, Sequence[TimeSeries]],
          comparison: Comparison | None = None) -> list[Chart]:
    """Every chart the runs have data for, in report order; ``comparison`` (of the runs) adds the
    ratio heatmap of two sweeps. Sweeps get their own charts instead of a bar and a percentile
    panel per workload, which would be dozens (``analyze.sweep.is_sweep``)."""
    subj = chartdata.subjects(runs)
    cats = chartdata.Categories(runs)
    subjects, categories = subj.order, cats.order
    charts = []
    swept = sweep.is_sweep([r.options for run in runs for r in chartdata.aggregate_rows(run)])
    reps = [] if swept else chartdata.repeat_rows(runs, subj, cats)
    if reps:
        charts += [
            Chart("iops-bars", "IOPS per workload", "Throughput", "IOPS of each workload; bars are the mean of the "
                  "repetitions, dots each repetition.", bars(reps, subjects, categories, "iops", "IOPS", ",.0f")),
            Chart("bandwidth-bars", "Bandwidth per workload", "Throughput", "Bandwidth in MiB/s of each workload.",
                  bars(reps, subjects, categories, "mib_s", "MiB/s", ",.1f")),
        ]
    pct_rows, labels = ([], []) if swept else chartdata.percentile_rows(runs, subj, cats)
    if pct_rows:
        charts.append(Chart("latency-percentiles", "Completion latency percentiles", "Latency",
                            "Completion latency (clat) at each percentile fio reports, log scale.",
                            percentiles(pct_rows, labels, subjects, categories)))
    searched = chartdata.search_rows(runs, subj)
    if searched:
        charts.append(Chart("saturation-search", "Saturation search", "Sweep",
                            "Every probe of the saturation search; triangle: the knee, diamond: the chosen point.",
                            search_chart(searched)))
    charts += sweep_charts(chartdata.sweep_rows(runs, subj), chartdata.ratio_rows(comparison) if comparison else [],
                           subjects)
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
                  timeseries(ts, lines, categories, "lat_us", "clat", ",.1f", log=True)),
        ]
    return charts
