"""A saturation run (``iolab saturate``) for people: the knee, the most IOPS under the SLO with its
confidence interval from the repetitions, and, for two such runs, the one-line answer
"B: ×1.8 IOPS at p99 ≤ 2 ms".

The run stores what the search found under ``options["saturation"]`` (``workflow.Saturation.record``);
the chosen point's repetitions are results of the run, summarised here with ``stats``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .. import stats
from ..analyze import compare, saturation
from ..model import Run
from ..units import format_iops, format_ns
from .table import Cell, Column, Table


def record(run: Run) -> Mapping[str, Any] | None:
    """What ``iolab saturate`` stored with the run, or None for any other run."""
    found = run.info.options.get("saturation")
    return found if isinstance(found, Mapping) else None


def _slo(found: Mapping[str, Any]) -> saturation.Slo | None:
    slo = found.get("slo")
    return saturation.Slo(compare.metric(slo["metric"]), slo["limit_ns"], bool(slo.get("strict"))) if slo else None


def final_points(run: Run) -> list[saturation.Point]:
    """The chosen point in each of its full-length repetitions (``saturation.point_of``)."""
    found = record(run)
    if found is None or found.get("chosen") is None:
        return []
    ids, chosen, slo = set(found.get("final_results", ())), found["chosen"], _slo(found)
    return [p for r in run.results if r.id in ids
            and (p := saturation.point_of(r, chosen["iodepth"], chosen["numjobs"], slo)) is not None]


def chosen_iops(run: Run) -> stats.Summary:
    """The chosen point's IOPS over its full-length repetitions (``stats.describe``)."""
    return stats.describe([p.iops for p in final_points(run)])


def geometric_ci(values: Sequence[float]) -> tuple[float, float] | None:
    """The 95 % t-interval of the mean of ``log(values)``, back on the values' scale: for IOPS, which
    are positive and vary by ratios, an interval that cannot go below zero with two repetitions."""
    if len(values) < 2 or min(values) <= 0:
        return None
    logs = stats.describe([math.log(v) for v in values])
    return (math.exp(logs.ci95[0]), math.exp(logs.ci95[1])) if logs.ci95 else None


def _cells(points: Sequence[saturation.Point]) -> tuple[Cell, ...]:
    """A point (or the mean of its repetitions): where, IOPS, mean latency, SLO metric."""
    if not points:
        return (Cell("–"), Cell("–"), Cell("–"), Cell("–"))
    iops, mean, slo = (stats.describe(values).mean for values in (
        [p.iops for p in points], [p.lat_mean_ns for p in points], [p.slo_ns for p in points]))
    return (Cell(points[0].label(), points[0].concurrency), Cell(format_iops(iops), iops),
            Cell(format_ns(mean), mean), Cell(format_ns(slo), slo))


def _point(stored: Mapping[str, Any] | None) -> list[saturation.Point]:
    return [] if stored is None else [saturation.Point(**stored)]


def _held(slo: saturation.Slo, found: Mapping[str, Any], finals: Sequence[saturation.Point]) -> str:
    """Whether the chosen point held the SLO over its full-length repetitions
    (``saturation.verdict``), in words, offering the next point below when it did not."""
    v = saturation.verdict(slo, [p.slo_ns for p in finals])
    values = ", ".join(format_ns(x) for x in v.values_ns)
    interval = (f", geometric mean {format_ns(v.mean_ns)}, 95% CI {format_ns(v.ci95_ns[0])}–{format_ns(v.ci95_ns[1])} "
                "(t on log values)" if v.ci95_ns and v.mean_ns else "")
    measured = f"{slo.metric.title} over its {len(finals)} repetition(s): {values}{interval}"
    if v.outcome == saturation.MEETS:
        return f"the chosen point meets {slo}: {measured}"
    if v.outcome == saturation.UNTESTED:
        return f"the chosen point met {slo} in its one repetition ({values}); one repetition gives no interval"
    text = (f"the chosen point DOES NOT MEET {slo} (its probe did): {measured}" if v.outcome == saturation.FAILS
            else f"the chosen point is at the SLO's edge: {measured} crosses {format_ns(slo.limit_ns)}")
    probes = [saturation.Point(**p) for p in found.get("probes", ()) if p]
    below = saturation.next_below(probes, saturation.Point(**found["chosen"]), slo)
    if below is None:
        return text + "; no probe below it met the SLO"
    return (text + f"; the next point below that met it in its probe: {below.label()}, "
            f"{format_iops(below.iops)} IOPS, {slo.metric.title} {format_ns(below.slo_ns)} "
            f"(a probe, not repeated: --max-iodepth {below.iodepth} --max-numjobs {below.numjobs} repeats it)")


def saturation_table(run: Run) -> Table | None:
    """The knee and the chosen point of a saturation run (None for other runs)."""
    found = record(run)
    if found is None:
        return None
    slo = found.get("slo")
    what = slo["text"] if slo else "no SLO"
    metric = _slo(found).metric.title if slo else "SLO metric"  # type: ignore[union-attr]
    objective = _slo(found)
    columns: tuple[Column, ...] = (Column("point", "point"), Column("at", "iodepth × numjobs"),
                                   Column("iops", "IOPS", True, "IOPS"),
                                   Column("lat_mean_ns", "clat mean", True, "ns"),
                                   Column("slo_ns", metric, True, "ns"))
    rows: list[tuple[Cell, ...]] = [(Cell("knee (most IOPS per ms of latency)"), *_cells(_point(found.get("knee"))))]
    chosen = found.get("chosen")
    label = f"most IOPS with {what}" if slo else "chosen (the knee)"
    finals = final_points(run)
    rows.append((Cell(label, style="bold"), *_cells(finals or _point(chosen))))
    fio = found.get("fio_latency_target")
    if fio:
        rows.append((Cell("fio's latency_target search (one job)"), Cell(f"QD{fio['depth']} ×1", fio["depth"]),
                     Cell(format_iops(fio["iops"]), fio["iops"]), Cell("–"), Cell(format_ns(fio["slo_ns"]),
                                                                                  fio["slo_ns"])))
    held = _held(objective, found, finals) if objective is not None and chosen is not None and finals else None
    summary = chosen_iops(run)
    settings = found.get("settings", {})
    notes = [f"{len(found.get('probes', ()))} probes of {settings.get('probe_runtime')} each; the chosen point "
             f"repeated {summary.n}× at {settings.get('runtime')}"]
    ci = geometric_ci([p.iops for p in finals])
    if summary.mean is not None:
        interval = f", 95% CI {format_iops(ci[0])}–{format_iops(ci[1])} (t on log IOPS)" if ci else ""
        notes.append(f"the chosen point's row is the mean of its repetitions: {format_iops(summary.mean)} IOPS"
                     f"{interval}; the knee's is its probe")
    if held is not None:
        notes.append(held)
    if chosen is None and slo:
        notes.append(f"no probe met {what}: even the lightest load is slower than the SLO")
    if fio:
        notes.append("fio's latency_target row: the depth fio settled on, and IOPS and latency over its whole run, "
                     "its search included; fio judges total latency (slat + clat)")
    notes.append("knee: the probe of highest power, IOPS / mean latency (Kleinrock 1979); see `iolab saturate --help`")
    if metric == "clat mean":  # the SLO's own column would repeat the one before it
        columns, rows = columns[:-1], [row[:-1] for row in rows]
    return Table(title=f"saturation: {what}", columns=columns, rows=tuple(rows), notes=tuple(notes))


def comparison_table(sides: Sequence[tuple[str, Run]]) -> Table | None:
    """Saturation runs side by side (each side one run): each one's chosen point with its IOPS over
    the repetitions, and per other side the answer in one line against the first, at the same SLO:
    ``hdd: ×0.5 IOPS at clat mean ≤ 5.0 ms against ssd (95% CI 0.49–0.51, p 1e-05)``. None unless
    every side is a saturation run."""
    if len(sides) < 2 or any(record(run) is None for _, run in sides):
        return None
    columns = (Column("side", "side"), Column("slo", "SLO"), Column("at", "chosen point"),
               Column("iops", "IOPS (mean of repetitions)", True), Column("repeats", "n", True))
    rows = []
    for name, run in sides:
        found, summary = record(run) or {}, chosen_iops(run)
        chosen, slo = found.get("chosen"), found.get("slo")
        rows.append((Cell(name), Cell(slo["text"] if slo else "none: the knee"),
                     Cell(f"QD{chosen['iodepth']} ×{chosen['numjobs']}" if chosen else "–"),
                     Cell(format_iops(summary.mean), summary.mean), Cell(str(summary.n), summary.n)))
    (base_name, base), *others = sides
    notes = tuple(line for name, run in others if (line := _answer(base_name, base, name, run)))
    return Table(title="Saturation: the most IOPS under the SLO", columns=columns, rows=tuple(rows), notes=notes)


def _answer(name_a: str, a: Run, name_b: str, b: Run) -> str | None:
    """``B: ×1.8 IOPS at p99 ≤ 2 ms against A`` with Welch's interval of the ratio when both have
    repetitions; None when the SLOs differ or a side found nothing."""
    slo_a, slo_b = (record(a) or {}).get("slo"), (record(b) or {}).get("slo")
    if slo_a != slo_b:
        return f"{name_b}: its SLO differs from {name_a}'s, so their chosen points do not compare"
    values_a, values_b = [p.iops for p in final_points(a)], [p.iops for p in final_points(b)]
    if not values_a or not values_b:
        return None
    ratio = stats.describe(values_b).mean / stats.describe(values_a).mean  # type: ignore[operator]
    what = f"at {slo_a['text']}" if slo_a else "at the knee"
    interval = ""
    if len(values_a) >= 2 and len(values_b) >= 2:
        test = stats.welch(values_a, values_b, log=True)
        interval = f" (95% CI {test.ci95[0]:.3g}–{test.ci95[1]:.3g}, p {test.p_value:.2g})"
    return f"{name_b}: ×{ratio:.3g} IOPS {what} against {name_a}{interval}"
