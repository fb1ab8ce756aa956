"""Warm-up curves for people: a table of every pass (IOPS, p99, hit ratio, where it became warm), the
cache's own counters per pass, two configurations side by side, and the charts (``analyze.warmup``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import stats
from ..analyze import tiers as tiers_mod
from ..analyze import warmup
from ..describe import tiers as tier_specs
from ..model import Run
from ..units import format_iops, format_ns, format_share
from .chartdata import Row, run_name
from .table import Cell, Column, Table

if TYPE_CHECKING:
    from .charts import Chart

RULE = ("warm: the last pass of the first window of 3 passes whose IOPS are shown flat — the 95 % t-interval of "
        "the least-squares change over the window (every repetition a point) within ±5 % of its mean, and every "
        "pass's mean within ±5 % — warm values are the means over that window and every later pass "
        "(see the manual, docs/tiers.md)")


def _count(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def describe_warm(curve: warmup.Curve) -> str:
    """``warm at pass 4: passes 2–4 change by +0.1% (95% CI -0.2…+0.4%, n 3), within ±5%; mean of passes
    2–5: 52,000 IOPS, p99 20.5 us, hit ratio 99.8%`` or ``not warm after 5 pass(es): passes 3–5 change by
    …``."""
    w = curve.warm
    if w is None:
        last = curve.last_trend
        if last is None:
            return f"not warm after {len(curve.points)} pass(es) (a plateau needs {warmup.WINDOW} passes)"
        hint = "; one repetition a pass gives a wide interval: --repeat 3 narrows it" \
            if last.n <= warmup.WINDOW and last.change_ci is not None and _within(last) else ""
        return f"not warm after {len(curve.points)} pass(es): passes {_trend(last)}{hint}"
    hit = f", hit ratio {format_share(w.hit_ratio)}" if w.hit_ratio is not None else ""
    flat = f": passes {_trend(w.trend)}, within ±{warmup.THRESHOLD * 100:g}%" if w.trend else ""
    return (f"warm at pass {w.pass_index}{flat}; mean of passes {w.plateau_from}–{curve.points[-1].pass_index}: "
            f"{format_iops(w.iops)} IOPS, p99 {format_ns(w.p99_ns)}{hit}")


def _within(t: warmup.Trend) -> bool:
    return t.spread <= warmup.THRESHOLD and abs(t.change) <= warmup.THRESHOLD


def _trend(t: warmup.Trend) -> str:
    """``2–4 change by -0.1 % (95 % CI -0.4…+0.2 %, n 3)``."""
    ci = f"95% CI {t.change_ci[0] * 100:+.1f}…{t.change_ci[1] * 100:+.1f}%" if t.change_ci else "no interval"
    return f"{t.first}–{t.last} change by {t.change * 100:+.1f}% ({ci}, n {t.n})"


def _hit_cell(p: warmup.PassPoint) -> Cell:
    """The hit ratio, or why there is none (``analyze.tiers.Accounting.hit_problems``); CSV gets an empty
    value (the reason is in the ``hit_ratio_problem`` column)."""
    if p.hit_problems:
        return Cell("n/a: " + "; ".join(p.hit_problems), "")
    return Cell(format_share(p.hit_ratio), p.hit_ratio)


def _problem_cell(p: warmup.PassPoint) -> Cell:
    return Cell("", "; ".join(p.hit_problems))


def warmup_table(run: Run) -> Table | None:
    """Every pass of every curve of a run with passes (None for other runs)."""
    found = warmup.curves([run])
    if not found:
        return None
    several = len({c.target for c in found}) > 1
    tiered = any(any(v is not None for v in (*p.hit_values, *p.origin_values)) for c in found for p in c.points)
    columns = [*([Column("target", "target")] if several else []), Column("workload", "workload"),
               Column("direction", "dir"), Column("pass", "pass", True), Column("repeats", "n", True),
               Column("iops", "IOPS", True), Column("clat_p99_ns", "clat p99", True)]
    if tiered:
        columns += [Column("hit_ratio", "hit ratio", True), Column("hit_ratio_problem", "", csv_only=True),
                    Column("origin_ios", "origin I/Os", True),
                    Column("fio_ios", "fio I/Os", True)]
    columns.append(Column("warm", "warm"))
    rows = []
    for c in found:
        for p in c.points:
            warm = c.warm is not None and p.pass_index == c.warm.pass_index
            origin, issued = stats.describe(p.origin_values).mean, stats.describe(p.issued_values).mean
            rows.append((*([Cell(c.target)] if several else []), Cell(c.name), Cell(c.direction),
                         Cell(str(p.pass_index), p.pass_index), Cell(str(len(p.iops_values)), len(p.iops_values)),
                         Cell(format_iops(p.iops), p.iops), Cell(format_ns(p.p99_ns), p.p99_ns),
                         *([_hit_cell(p), _problem_cell(p), Cell(_count(origin), origin),
                            Cell(_count(issued), issued)] if tiered else []),
                         Cell("← warm" if warm else "", warm, "green" if warm else None)))
    notes = [f"{c.name} {c.direction}: {describe_warm(c)}" for c in found]
    notes.append(RULE)
    if tiered:
        notes.append("hit ratio = 1 − I/Os that reached the origin / I/Os fio issued (per direction); origin: "
                     + ", ".join(f"{t.spec()}" for t in tier_specs.from_options(run.info.options)
                                 if t.name == tier_specs.ORIGIN))
    notes += sorted({n for c in found for n in c.notes})
    return Table(title=f"warm-up: {len(found[0].points)} passes", columns=tuple(columns), rows=tuple(rows),
                 notes=tuple(notes))


def cache_table(run: Run) -> Table | None:
    """A cache device's own counters (dm-cache, bcache) over each pass or job; None without any."""
    tiers = tier_specs.from_options(run.info.options)
    columns = (Column("workload", "workload"), Column("pass", "pass", True), Column("device", "device"),
               Column("kind", "kind"), Column("counters", "increases over the job"), Column("after", "after"))
    rows = []
    sources = set()
    for result in run.results:
        acc = tiers_mod.accounting(result, tiers) if result.status == "ok" else None
        for cache in acc.caches if acc else ():
            sources.add(cache.source)
            number = int((result.extra or {}).get("pass") or 0)
            counters = cache.problem or ", ".join(f"{k} {v:,}" for k, v in cache.increases.items())
            rows.append((Cell(result.workload), Cell(str(number) if number else "–", number or None),
                         Cell(cache.device), Cell(cache.kind), Cell(counters, dict(cache.increases)),
                         Cell(", ".join(f"{k} {v:,}" for k, v in cache.gauges.items()), dict(cache.gauges))))
    if not rows:
        return None
    return Table(title="cache counters", columns=columns, rows=tuple(rows),
                 notes=tuple(f"format: {s}" for s in sorted(sources)))


def comparison_table(sides: Sequence[tuple[str, Sequence[Run]]]) -> Table | None:
    """Two or more sides' warm-up curves pass by pass against the first side, and their warm values
    (None unless the first side and another have curves of the same workload)."""
    if len(sides) < 2:
        return None
    (base_name, base_runs), *others = sides
    base = warmup.curves(base_runs)
    other = others[0][0] if len(others) == 1 else "side"  # more sides: a row per side, named in its column
    columns: tuple[Column, ...] = (
        Column("workload", "workload"), Column("direction", "dir"), Column("pass", "pass", True),
        Column("side", "side"), Column("iops_a", f"IOPS {base_name}", True), Column("iops_b", f"IOPS {other}", True),
        Column("ratio", "ratio", True), Column("p99_a", f"p99 {base_name}", True),
        Column("p99_b", f"p99 {other}", True), Column("hit_a", f"hit {base_name}", True),
        Column("hit_b", f"hit {other}", True))
    rows: list[tuple[Cell, ...]] = []
    notes = []
    for name, runs in others:
        for a, b in warmup.pair_curves(base, warmup.curves(runs)):
            pb = warmup.by_pass(b)
            for pa in a.points:
                q = pb.get(pa.pass_index)
                iops_b, p99_b = (q.iops, q.p99_ns) if q else (None, None)
                ratio = iops_b / pa.iops if iops_b is not None and pa.iops else None
                rows.append((Cell(a.name), Cell(a.direction), Cell(str(pa.pass_index), pa.pass_index), Cell(name),
                             Cell(format_iops(pa.iops), pa.iops), Cell(format_iops(iops_b), iops_b),
                             Cell("–" if ratio is None else f"×{ratio:.3g}", ratio),
                             Cell(format_ns(pa.p99_ns), pa.p99_ns), Cell(format_ns(p99_b), p99_b),
                             _hit_cell(pa), _hit_cell(q) if q else Cell("–")))
            notes.append(_warm_note(base_name, a, name, b))
    if not rows:
        return None
    if len(others) == 1:
        columns, rows = (*columns[:3], *columns[4:]), [(*row[:3], *row[4:]) for row in rows]
    return Table(title="Warm-up curves", columns=columns, rows=tuple(rows), notes=(*notes, RULE))


def _warm_note(name_a: str, a: warmup.Curve, name_b: str, b: warmup.Curve) -> str:
    """Both sides' warm passes and values, and their ratio when both became warm."""
    text = f"{a.name} {a.direction}: {name_a} {describe_warm(a)}; {name_b} {describe_warm(b)}"
    if a.warm is not None and b.warm is not None and a.warm.iops and b.warm.iops:
        text += f"; warm IOPS {name_b}/{name_a} ×{b.warm.iops / a.warm.iops:.3g}"
        if a.warm.p99_ns and b.warm.p99_ns:
            text += f", warm p99 ×{b.warm.p99_ns / a.warm.p99_ns:.3g}"
    return text


def warmup_document(run: Run) -> list[dict[str, Any]]:
    """The run's warm-up curves for its JSON document (``"warmup"``): per curve its passes (IOPS,
    p99 in ns, hit ratio 0..1 or null with ``hit_ratio_problems`` saying why, origin and fio I/Os, one
    value per repetition and the mean) and where it became warm (null when it did not)."""
    out = []
    for c in warmup.curves([run]):
        w = c.warm
        out.append({"target": c.target, "workload": c.workload, "job": c.job, "direction": c.direction,
                    "passes": [{"pass": p.pass_index, "iops": p.iops, "iops_values": list(p.iops_values),
                                "clat_p99_ns": p.p99_ns, "hit_ratio": p.hit_ratio,
                                "hit_ratio_problems": list(p.hit_problems),
                                "origin_ios": list(p.origin_values), "fio_ios": list(p.issued_values)}
                               for p in c.points],
                    "warm": None if w is None else {"pass": w.pass_index, "plateau_from": w.plateau_from,
                                                    "iops": w.iops, "clat_p99_ns": w.p99_ns,
                                                    "hit_ratio": w.hit_ratio}})
    return out


# --- charts --------------------------------------------------------------------------------------


def chart_rows(runs: Sequence[Run]) -> list[Row]:
    """One row per run, curve and pass: IOPS, p99 (µs), hit ratio (%), and whether it is the warm pass."""
    rows: list[Row] = []
    several = len(runs) > 1
    for run in runs:
        name = run_name(run, runs)
        for c in warmup.curves([run]):
            for p in c.points:
                rows.append({"subject": f"{name} · {c.target}" if several else c.target,
                             "category": f"{c.name} · {c.direction}", "pass": p.pass_index, "iops": p.iops,
                             "p99_us": None if p.p99_ns is None else p.p99_ns / 1000,
                             "hit_pct": None if p.hit_ratio is None else p.hit_ratio * 100,
                             "warm": "warm" if c.warm is not None and c.warm.pass_index == p.pass_index else ""})
    return rows


def _curve(rows: list[Row], field: str, unit: str, fmt: str, log: bool, title: str) -> dict[str, Any]:
    import altair as alt  # only when reporting: `iolab show` uses this module too

    from . import charts

    subjects = list(dict.fromkeys(r["subject"] for r in rows))
    categories = list(dict.fromkeys(r["category"] for r in rows))
    base = alt.Chart().transform_filter(f"isValid(datum.{field})" + (f" && datum.{field} > 0" if log else ""))
    y = alt.Y(f"{field}:Q", title=unit, scale=alt.Scale(type="log") if log else alt.Undefined,
              axis=alt.Axis(labelExpr=charts.LATENCY_LABELS) if field.endswith("_us") else alt.Undefined)
    line = base.mark_line(point=True).encode(
        x=alt.X("pass:O", title="pass"), y=y, color=charts._color(subjects),
        tooltip=[alt.Tooltip("subject:N"), alt.Tooltip("category:N", title="workload"), alt.Tooltip("pass:O"),
                 alt.Tooltip(f"{field}:Q", title=unit, format=fmt), alt.Tooltip("warm:N")])
    label = base.transform_filter("datum.warm == 'warm'").mark_text(dy=-10, fontSize=11).encode(
        x="pass:O", y=y, text="warm:N", color=charts._color(subjects))
    return charts._finish(alt.layer(line, label), rows, "category", categories, title,
                          "a point per pass; 'warm' marks the last pass of the first window of 3 shown flat "
                          "(see the manual, docs/tiers.md)"
                          + ("; log scale" if log else ""))


def warmup_charts(runs: Sequence[Run]) -> list[Chart]:
    """IOPS, p99 and (with tiers) hit ratio per pass of the runs' warm-up curves; none without."""
    from . import charts

    rows = chart_rows(runs)
    if not rows:
        return []
    out = [charts.Chart("warmup-iops", "IOPS per pass", "Warm-up", "IOPS of each warm-up pass over the same region.",
                        _curve(rows, "iops", "IOPS", ",.0f", charts.wide_spread(rows, "iops"), "Warm-up: IOPS")),
           charts.Chart("warmup-p99", "p99 latency per pass", "Warm-up",
                        "p99 completion latency of each pass, log scale.",
                        _curve(rows, "p99_us", "p99 completion latency", ",.1f", True, "Warm-up: p99 latency"))]
    if any(r["hit_pct"] is not None for r in rows):
        out.append(charts.Chart("warmup-hit-ratio", "Hit ratio per pass", "Warm-up",
                                "1 − I/Os that reached the origin device / I/Os fio issued, in %.",
                                _curve(rows, "hit_pct", "hit ratio (%)", ",.1f", False, "Warm-up: hit ratio")))
    return out
