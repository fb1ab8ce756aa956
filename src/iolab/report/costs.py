"""Every host's cost of a run's jobs, from the observers: a table (``show``, reports) and a chart
of the hosts' counters over time next to fio's IOPS (reports).

The figures and their formulas are ``observe.usage``'s; this module only arranges them. Rows are
per target × workload × observed host over the repetitions (means), then a row for the whole
run (every observed host's CPU together per I/O).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import stats
from ..model import HostSamples, ResultRecord, Run, TimeSeries
from ..observe import usage
from ..units import format_rate, format_share
from .chartdata import Row, subjects
from .table import Cell, Column, Table

#: The row of a workload that counts every observed host together.
ALL_OBSERVED = "all observed"
_SHOWN_MODES = (("user", "usr"), ("system", "sys"), ("irq", "irq"), ("softirq", "softirq"), ("iowait", "iowait"),
                ("steal", "steal"))


def _mean(values: Sequence[float | None]) -> float | None:
    return stats.describe(values).mean


def _pct(fraction: float | None) -> float | None:
    return None if fraction is None else fraction * 100


def _nics(costs: Sequence[usage.HostCost]) -> dict[str, dict[str, float | None]]:
    """Every interface's mean bytes/s and share of its link (%), busiest first."""
    rates: dict[str, list[tuple[float, float | None]]] = {}
    for c in costs:
        for name, figures in c.nics.items():
            rates.setdefault(name, []).append(figures)
    found = {name: {"bytes_s": _mean([r for r, _ in nic]), "link_pct": _pct(_mean([u for _, u in nic]))}
             for name, nic in rates.items()}
    return dict(sorted(found.items(), key=lambda kv: -(kv[1]["bytes_s"] or 0.0)))


def _disks(costs: Sequence[usage.HostCost], own: Sequence[str] = ()) -> dict[str, dict[str, float | None]]:
    """Every device that completed I/Os: mean device I/Os per fio I/O and busy share (%); the target's
    own devices (``own``) first, then the busiest: on a shared host other tenants' devices come after."""
    found: dict[str, list[tuple[float | None, float]]] = {}
    for c in costs:
        for name, figures in c.disks.items():
            found.setdefault(name, []).append(figures)
    out = {name: {"ios_per_fio_io": _mean([r for r, _ in disk]), "busy_pct": _pct(_mean([b for _, b in disk]) or 0.0)}
           for name, disk in found.items()}
    return dict(sorted(out.items(), key=lambda kv: (kv[0] not in own, -(kv[1]["busy_pct"] or 0.0))))


def own_devices(result: ResultRecord) -> tuple[str, ...]:
    """The devices under a local result's target (``target_facts``): its device, and the disk of a partition."""
    device = result.target_facts.device if result.target_facts is not None else None
    return tuple(n for n in (device.name, device.parent) if n) if device is not None else ()


def host_cost_json(costs: Sequence[usage.HostCost], own: Sequence[str] = ()) -> dict[str, Any]:
    """The figures of one host over repetitions (means), units in the keys: ``cpu_us_per_io``,
    ``cpu_busy_pct`` and ``cpu_pct_by_mode`` (% of all the host's CPUs), ``nics`` (``bytes_s``,
    ``link_pct``), ``devices`` (``ios_per_fio_io``, ``busy_pct``; ``own``, the target's devices,
    first), ``gaps`` (failed scrapes)."""
    modes = {m: _pct(_mean([c.cpu_by_mode.get(m) for c in costs])) for m in usage.MODES}
    return {"host": costs[0].host, "role": costs[0].role, "repeats": len(costs),
            "window_s": _mean([c.window_s for c in costs]),
            "cpu_us_per_io": _mean([c.cpu_us_per_io for c in costs]),
            "cpu_busy_pct": _pct(_mean([c.cpu_util for c in costs])),
            "cpu_pct_by_mode": {m: v for m, v in modes.items() if v is not None},
            "nics": _nics(costs), "devices": _disks(costs, own), "gaps": sum(c.gaps for c in costs),
            "errors": sorted({c.error for c in costs if c.error})}


def result_costs(result: ResultRecord) -> list[dict[str, Any]]:
    """A result's ``host_costs`` in its JSON document: ``host_cost_json`` of each observed host,
    then, with more than one, ``{"host": "all observed", "cpu_us_per_io": …}``."""
    found = usage.host_costs(result)
    out = [host_cost_json([c], own_devices(result) if c.role == "local" else ()) for c in found]
    if len(found) > 1:
        out.append({"host": ALL_OBSERVED, "cpu_us_per_io": usage.cpu_us_per_io(usage.usages(result),
                                                                                usage.job_ios(result.report))})
    return out


def cost_document(run: Run) -> list[dict[str, Any]]:
    """The cost table's rows as data (the run's JSON ``host_costs``; the table is drawn from them):
    per target × workload × host ``host_cost_json`` with ``target`` and ``workload``; the whole
    run's row is ``{"host": "all observed", "repeats", "cpu_us_per_io", "cpu_us_per_io_values"}``."""
    out: list[dict[str, Any]] = []
    own = {r.target: own_devices(r) for r in run.results if r.target_facts is not None}
    for target, workload, host, costs, whole in cost_rows(run):
        if host == ALL_OBSERVED:
            out.append({"target": target, "workload": workload, "host": host, "repeats": len(whole),
                        "cpu_us_per_io": _mean(whole), "cpu_us_per_io_values": whole})
        else:
            mine = own.get(target, ()) if costs[0].role == "local" else ()
            out.append({"target": target, "workload": workload, **host_cost_json(costs, mine)})
    return out


def _network(row: Mapping[str, Any]) -> Cell:
    """The busiest interface: bytes/s and its share of the link; red at ``NIC_FLAG`` and above."""
    if not row["nics"]:
        return Cell("–")
    name, nic = next(iter(row["nics"].items()))
    rate, use = nic["bytes_s"], nic["link_pct"]
    if not rate or rate < 0.005 * 2**20:  # shown as 0.00 MiB/s: every interface idle, naming one says nothing
        return Cell("idle", rate)
    text = f"{name} {format_rate(rate)} MiB/s" + (f" {use:.1f}%" if use is not None else "")
    flagged = use is not None and use >= usage.NIC_FLAG * 100
    return Cell(text + (" ≥90%!" if flagged else ""), rate, "red" if flagged else None)


def _devices(row: Mapping[str, Any], limit: int = 3) -> str:
    """Devices that took part: ``vda ×0.98 64%`` (device I/Os per fio I/O, busy share), busiest
    first; a device with fewer than 1 I/O per 100 fio I/Os and under 1 % busy is left out."""
    parts = []
    for name, disk in row["devices"].items():
        ratio, busy = disk["ios_per_fio_io"], disk["busy_pct"] or 0.0
        if (ratio or 0.0) < 0.01 and busy < 1:
            continue
        parts.append(f"{name} ×{ratio:.2f} {busy:.0f}%" if ratio is not None else f"{name} {busy:.0f}%")
    return ", ".join(parts[:limit]) or "–"


def cost_rows(run: Run) -> list[tuple[str, str, str, list[usage.HostCost], list[float | None]]]:
    """``(target, workload, host, costs per repetition, whole-run CPU µs/IO per repetition)`` in
    plan order; ``host`` ``ALL_OBSERVED`` for the whole-run row (its costs list is empty)."""
    per: dict[tuple[str, str, str], list[usage.HostCost]] = {}
    whole: dict[tuple[str, str], list[float | None]] = {}
    for result in run.results:
        if result.status not in ("ok", "partial"):
            continue
        found = usage.host_costs(result)
        for c in found:
            per.setdefault((result.target, result.workload, c.host), []).append(c)
        if len(found) > 1:
            whole.setdefault((result.target, result.workload), []).append(
                usage.cpu_us_per_io(usage.usages(result), usage.job_ios(result.report)))
    out: list[tuple[str, str, str, list[usage.HostCost], list[float | None]]] = []
    for (target, workload, host), costs in per.items():
        out.append((target, workload, host, costs, []))
        last = [k for k in per if k[:2] == (target, workload)][-1]
        if (target, workload, host) == last and (target, workload) in whole:
            out.append((target, workload, ALL_OBSERVED, [], whole[(target, workload)]))
    return out


def cost_table(run: Run) -> Table | None:
    """The observed hosts' cost per workload (see the module docstring), drawn from
    ``cost_document``; None when the run was not observed. Raw values (CSV) are in the units of
    their keys: µs, % and bytes/s."""
    rows = cost_document(run)
    if not rows:
        return None
    used = [r for r in rows if r["host"] != ALL_OBSERVED]
    modes = [(m, short) for m, short in _SHOWN_MODES  # irq and steal are often zero throughout
             if m not in ("irq", "steal") or any(r["cpu_pct_by_mode"].get(m) for r in used)]
    columns = (Column("target", "target", whole=True), Column("workload", "workload", whole=True),
               Column("host", "host", whole=True),
               Column("repeats", "n", True), Column("cpu_us_per_io", "CPU µs/IO", True),
               Column("cpu_busy_pct", "CPU busy", True),
               *(Column(f"cpu_{mode}_pct", short, True) for mode, short in modes),
               Column("busiest_nic_bytes_s", "busiest NIC, % of link"),
               Column("devices", "devices: I/Os per fio I/O, busy"), Column("gaps", "gaps", True))
    table_rows = []
    for row in rows:
        per_io = row["cpu_us_per_io"]
        head = (Cell(row["target"]), Cell(row["workload"]), Cell(row["host"], style="bold" if "role" not in row
                                                                   else None),
                Cell(str(row["repeats"]), row["repeats"]))
        if row["host"] == ALL_OBSERVED:
            blank = [Cell("") for _ in range(len(modes) + 4)]
            table_rows.append((*head, Cell("–" if per_io is None else f"{per_io:.2f}", per_io, "bold"), *blank))
            continue
        by_mode = [row["cpu_pct_by_mode"].get(m) for m, _ in modes]
        gaps = row["gaps"]
        table_rows.append((
            *head, Cell("–" if per_io is None else f"{per_io:.2f}", per_io),
            Cell(_share(row["cpu_busy_pct"]), row["cpu_busy_pct"]),
            *(Cell(_share(v), v) for v in by_mode), _network(row), Cell(_devices(row)),
            Cell(str(gaps) if gaps else "", gaps, "red" if gaps else None),
        ))
    notes = ["CPU µs/IO: busy CPU time of the host (user+nice+system+irq+softirq, all CPUs) per I/O fio completed "
             "in the measured phase; CPU columns: share of all the host's CPUs (node_cpu_seconds_total)",
             "devices: I/Os the device completed per I/O fio completed (node_disk_*_completed_total), and its busy "
             "time share (node_disk_io_time_seconds_total); a NIC at 90 % of its link speed or more is marked ≥90%!",
             "the same figures, every device and interface: the run's JSON document (host_costs)"]
    notes += _gap_notes(run)
    return Table(title=f"run {run.info.id}: every host's cost", columns=columns, rows=tuple(table_rows),
                 notes=tuple(notes))


def _share(pct: float | None) -> str:
    return format_share(None if pct is None else pct / 100)


def _gap_notes(run: Run) -> list[str]:
    """One line per observer gap: where, when (s since the job started) and why."""
    out = []
    for result in run.results:
        for u in usage.usages(result):
            for g in u.gaps:
                out.append(f"gap: {u.host} during {result.target}/{result.workload} repeat {result.repeat + 1}: "
                           f"{g.attempts} scrape(s) failed from {g.start_ms / 1000:.1f} s to {g.end_ms / 1000:.1f} s: "
                           f"{g.error}")
            if u.window_s is None and u.error:
                head = "" if u.error.startswith("not measured") else "not observed: "
                out.append(f"{head}{u.host} during {result.target}/{result.workload}: {u.error}")
    return out


# --- over time --------------------------------------------------------------------------------


def _rates(s: HostSamples) -> dict[str, list[tuple[float, float, str]]]:
    """Per measure, ``(t_s, value, phase)`` between consecutive scrapes, ``t_s`` from the start
    of the measured phase (negative: ramp). CPU busy % of all CPUs, MiB/s of all NICs, device
    IOPS of all devices (node_exporter counters; see ``observe.usage``)."""
    offset = s.window_ms[0] if s.window_ms else 0
    end = s.window_ms[1] if s.window_ms else None
    busy = [x for x in s.series if x.metric == "node_cpu_seconds_total" and x.labels.get("mode") not in usage.NOT_BUSY]
    nic = [x for x in s.series if x.metric in ("node_network_receive_bytes_total", "node_network_transmit_bytes_total")]
    disk = [x for x in s.series if x.metric in ("node_disk_reads_completed_total", "node_disk_writes_completed_total")]
    scale = {"CPU busy %": 100 / (s.cpu_count or 1), "network MiB/s": 1 / 1048576, "device IOPS": 1.0}
    out: dict[str, list[tuple[float, float, str]]] = {}
    for measure, series in (("CPU busy %", busy), ("network MiB/s", nic), ("device IOPS", disk)):
        for i in range(1, len(s.t_ms)):
            dt = (s.t_ms[i] - s.t_ms[i - 1]) / 1000
            pairs = [(x.values[i - 1], x.values[i]) for x in series]
            if dt <= 0 or not pairs or any(a is None or b is None for a, b in pairs):
                continue
            value = sum(b - a for a, b in pairs if a is not None and b is not None) / dt * scale[measure]
            t = s.t_ms[i]
            phase = "ramp" if t <= offset else ("after" if end is not None and t > end + 500 else "measured")
            out.setdefault(measure, []).append(((t - offset) / 1000, value, phase))
    return out


def _fio_iops(series: Sequence[TimeSeries]) -> list[tuple[float, float]]:
    """The invocation's IOPS per second, all jobs, directions and hosts summed; only windows
    every log has (a partial sum would look like a collapse, as in ``chartdata``)."""
    logs = [s for s in series if s.metric == "iops"]
    per_log = [{round(t / (s.interval_ms or 1000)) * (s.interval_ms or 1000) / 1000: v
                for t, v in zip(s.t_ms, s.values, strict=True)} for s in logs]
    common = set.intersection(*(set(p) for p in per_log)) if per_log else set()
    return [(t, sum(p[t] for p in per_log)) for t in sorted(common)]


def over_time_rows(runs: Sequence[Run], samples: Mapping[int, Sequence[HostSamples]],
                   series: Mapping[int, Sequence[TimeSeries]]) -> list[Row]:
    """Rows ``{measure, line, workload, repeat, t_s, value, phase}``: fio's IOPS per second
    (from its logs) and each observed host's measures (``_rates``); empty when nothing was
    observed."""
    subj = subjects(runs)
    rows: list[Row] = []
    for run in runs:
        for result in run.results:
            observed = samples.get(result.id, ())
            if not observed:
                continue
            subject = subj.names[(run.info.id, result.target)]
            base = {"workload": result.workload, "repeat": result.repeat + 1}
            rows += [{**base, "measure": "fio IOPS", "line": subject, "t_s": t, "value": v, "phase": "measured"}
                     for t, v in _fio_iops(series.get(result.id, ()))]
            for s in observed:
                for measure, points in _rates(s).items():
                    rows += [{**base, "measure": measure, "line": f"{subject} · {s.host}", "t_s": t, "value": v,
                              "phase": phase} for t, v, phase in points]
    return rows


def over_time_chart(rows: list[Row]) -> dict[str, Any]:
    """Per workload (columns) and measure (rows): fio's IOPS and every host's CPU, network and
    device rates over time, 0 s being the start of the measured phase (ramp dashed)."""
    import altair as alt  # only when reporting: `iolab show` uses this module too

    from .charts import config, spec

    measures = [m for m in ("fio IOPS", "CPU busy %", "network MiB/s", "device IOPS") if any(r["measure"] == m
                                                                                            for r in rows)]
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    chart = alt.Chart().mark_line(point=alt.OverlayMarkDef(size=12), strokeWidth=1.5).encode(
        x=alt.X("t_s:Q", title="time since the measured phase began (s)"),
        y=alt.Y("value:Q", title=None),
        color=alt.Color("line:N", title=None, legend=alt.Legend(orient="top", labelLimit=400)),
        strokeDash=alt.StrokeDash("phase:N", title=None, scale=alt.Scale(domain=["measured", "ramp", "after"],
                                                                          range=[[1, 0], [4, 3], [1, 3]])),
        detail="repeat:N",
        tooltip=[alt.Tooltip("line:N", title="host"), alt.Tooltip("measure:N"), alt.Tooltip("workload:N"),
                 alt.Tooltip("repeat:O"), alt.Tooltip("phase:N"), alt.Tooltip("t_s:Q", format=".1f"),
                 alt.Tooltip("value:Q", format=",.1f")],
    ).properties(width=230, height=120)
    faceted = chart.facet(
        row=alt.Row("measure:N", sort=measures, title=None, header=alt.Header(labelFontWeight="bold")),
        column=alt.Column("workload:N", sort=workloads, title=None, header=alt.Header(labelFontWeight="bold")),
        data=alt.Data(values=rows),
    ).resolve_scale(y="independent").properties(
        title=alt.Title("Every host's cost over time", anchor="start", fontSize=15,
                        subtitle="node_exporter counters at 1 s beside fio's IOPS; dashed: ramp and file layout"),
        config=config(),
    )
    return spec(faceted)
