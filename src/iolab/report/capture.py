"""A capture's fingerprint as tables (``iolab show``), JSON (``fingerprint``) and charts (report).

The charts draw the fingerprint's aggregates: requests per block size and direction, LBA heat over
time (requests per time bin × LBA bin), the mean in-flight depth over time, and the flushes over
time (their rate and mean service time per bin) when the capture has any. Pure: they read the
fingerprint stored with the run (``workflows.capture.summary.stored_fingerprint``), never the trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model import Run, to_jsonable
from ..units import format_bytes, format_iops, format_ns
from ..workflows.capture.summary import Dist, Fingerprint, stored_fingerprint
from .table import Cell, Column, Table

_COLUMNS = (Column("metric", "metric"), Column("value", "value", True), Column("detail", "detail"))


def _row(metric: str, text: str, value: Any = None, detail: str = "") -> tuple[Cell, ...]:
    return (Cell(metric), Cell(text, value if value is not None else text), Cell(detail))


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}%"


def _num(value: float | None, fmt: str, unit: str = "") -> str:
    """``value`` formatted, or "–" when it was not measured (None)."""
    return "–" if value is None else f"{value:{fmt}}{unit}"


def _us(d: Dist) -> str:
    if d.count == 0 or d.mean is None:
        return "–"
    return f"mean {d.mean:.1f} µs · p50 {d.p50:.1f} · p99 {d.p99:.1f}"


def _bs(nbytes: int) -> str:
    return f"{nbytes // 1024}k" if nbytes % 1024 == 0 else f"{nbytes}B"


def _rate(fp: Fingerprint) -> tuple[Cell, ...]:
    if fp.iops is None or fp.bw_bytes_s is None:
        return _row("IOPS", "–", None, f"no request in the {fp.duration_s:.2f} s captured")
    span = (f", over the {fp.active_s:.2f} s from the first request to the last" if fp.active_s and fp.data_ios
            else "")
    return _row("IOPS", format_iops(fp.iops), fp.iops, f"{format_bytes(fp.bw_bytes_s)}/s{span}")


def _flush_rate(fp: Fingerprint) -> str:
    """`` · 2,063 flush requests, 2,725/s``: the flush requests (a replay's syncs) and their rate over
    the active span; empty without any."""
    flushes, span = fp.ios.get("flush", 0), fp.active_s or fp.duration_s
    return f" · {flushes:,} flush requests, {flushes / span:,.0f}/s" if flushes and span else ""


def _lba(fp: Fingerprint) -> tuple[Cell, ...]:
    if fp.lba_first_bytes is None or fp.lba_end_bytes is None:
        return _row("LBA range", "–", None, "no read or write request")
    size = fp.lba_end_bytes - fp.lba_first_bytes
    return _row("LBA range", format_bytes(size), size,
                f"{format_bytes(fp.lba_first_bytes)} – {format_bytes(fp.lba_end_bytes)}")


def fingerprint_rows(fp: Fingerprint) -> list[tuple[Cell, ...]]:
    """The fingerprint, one metric a row (display text, raw value, detail); "–" (raw value None)
    for what the capture did not measure."""
    ios, nbytes = fp.ios, fp.bytes
    mix = ", ".join(f"{k} {v} ({format_bytes(nbytes.get(k, 0))}"
                    + (f"; write-zeroes {fp.zeroes_ios}, {format_bytes(fp.zeroes_bytes)}"
                       if k == "write" and fp.zeroes_ios else "") + ")" for k, v in ios.items())
    sizes = []
    for kind, counts in fp.bs_counts.items():
        total = sum(counts.values())
        top = sorted(counts.items(), key=lambda kv: -kv[1])[:5]
        sizes.append(f"{kind}: " + " ".join(f"{_bs(b)}/{100 * c / total:.0f}%" for b, c in top))
    depth = " ".join(f"{d}:{p:.0f}%" for d, p in sorted(fp.depth_time_pct.items())[:8] if p >= 0.5)
    at_issue, gaps = fp.depth_at_issue, fp.interarrival_us
    return [
        _row("duration", f"{fp.duration_s:.2f} s", fp.duration_s, f"{fp.requests} requests"
             + (f", {fp.lost_events} events LOST" if fp.lost_events else "")),
        _row("requests", f"{fp.data_ios}", fp.data_ios, mix or "none: nothing reached the device"),
        _row("reads (rwmixread)", _pct(fp.read_pct_ios), fp.read_pct_ios, f"by bytes {_pct(fp.read_pct_bytes)}"),
        _rate(fp),
        _row("block sizes", f"{len({b for c in fp.bs_counts.values() for b in c})} sizes", None, "; ".join(sizes)),
        _row("random", _pct(fp.random_pct), fp.random_pct,
             "sequential: " + (", ".join(f"{k} {v:.1f}%" for k, v in fp.sequential_pct_by_kind.items()) or "–")),
        _row("depth (time mean)", f"{fp.depth_mean:.2f}", fp.depth_mean,
             f"busy {fp.busy_pct:.1f}% · mean while busy {_num(fp.depth_mean_busy, '.2f')} · max {fp.depth_max}"),
        _row("depth at issue", _num(at_issue.p50, ".0f"), at_issue.p50,
             f"p99 {_num(at_issue.p99, '.0f')} · time at depth {depth or '–'}"),
        _row("inter-arrival", _num(gaps.mean, ".1f", " µs"), gaps.mean,
             f"p50 {_num(gaps.p50, '.1f')} · p99 {_num(gaps.p99, '.1f', ' µs')} · "
             f"CV {_num(fp.interarrival_cv, '.2f')}"),
        _row("skew: hottest 1%", _pct(fp.hot1_pct), fp.hot1_pct,
             f"hottest 10 %: {_pct(fp.hot10_pct)} of {fp.granules_touched} 4 KiB blocks touched"
             + (" (every block a request covers)" if fp.granules_by == "covered" else " (by request start)")),
        _lba(fp),
        _row("flush / FUA", _pct(fp.flush_pct), fp.flush_pct,
             f"FUA {_pct(fp.fua_pct)} · sync writes {_pct(fp.sync_write_pct)}" + _flush_rate(fp)),
        *(_row(f"service time {k}", _num(d.mean, ".1f", " µs"), d.mean, _us(d)) for k, d in fp.latency_us.items()),
        _row("processes", str(len(fp.processes)), len(fp.processes),
             ", ".join(f"{k} {v}" for k, v in fp.processes.items())),
        *([_row("left out", f"{sum(fp.left_out.values())}", sum(fp.left_out.values()),
                ", ".join(f"{k} {v}" for k, v in list(fp.left_out.items())[:8])
                + " (requests in no other figure)")] if fp.left_out else []),
    ]


def fingerprint_table(run: Run) -> Table | None:
    """The fingerprint table of a capture run (None for other runs)."""
    fp = stored_fingerprint(run)
    if fp is None:
        return None
    how = (run.info.options or {}).get("how", "")
    return Table(f"run {run.info.id}: fingerprint of {(run.info.options or {}).get('device', '')}",
                 _COLUMNS, tuple(fingerprint_rows(fp)), notes=(f"captured with {how}",) if how else ())


def fingerprint_document(run: Run) -> dict[str, Any] | None:
    """The fingerprint as JSON (every field of ``Fingerprint``), None for other runs."""
    fp = stored_fingerprint(run)
    return to_jsonable(fp) if fp is not None else None


def capture_charts(runs: Sequence[Run]) -> tuple[Any, ...]:
    """Block-size histogram, LBA heat over time, depth over time and (with flushes) flushes over
    time of every capture among ``runs``."""
    from .charts import Chart
    out = []
    for run in runs:
        fp = stored_fingerprint(run)
        if fp is None:
            continue
        name = f"run {run.info.id}"
        out += [
            Chart(f"capture-{run.info.id}-bs", f"{name}: block sizes", "Captured workload",
                  "Requests per block size and direction, as the device saw them.", _bs_spec(fp, name)),
            Chart(f"capture-{run.info.id}-heat", f"{name}: LBA heat over time", "Captured workload",
                  "Requests per time bin and LBA bin: hot regions are dark.", _heat_spec(fp, name)),
            Chart(f"capture-{run.info.id}-depth", f"{name}: depth over time", "Captured workload",
                  "Mean requests in flight per time bin (time-weighted).", _depth_spec(fp, name)),
        ]
        if fp.flushes_over_time:
            out.append(Chart(f"capture-{run.info.id}-flushes", f"{name}: flushes over time", "Captured workload",
                             "Flush requests per second in each time bin (what a replay syncs), and their mean "
                             "service time at the device.", _flush_spec(fp, name)))
    return tuple(out)


def _bs_spec(fp: Fingerprint, name: str) -> dict[str, Any]:
    import altair as alt

    from .charts import spec
    rows = [{"bs": _bs(b), "direction": kind, "requests": c}
            for kind, counts in fp.bs_counts.items() for b, c in counts.items()]
    order = [_bs(b) for b in sorted({b for counts in fp.bs_counts.values() for b in counts})]
    chart = alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        x=alt.X("bs:N", sort=order, title="block size"), xOffset="direction:N",
        y=alt.Y("requests:Q", title="requests"),
        color=alt.Color("direction:N", scale=alt.Scale(domain=["read", "write"], range=["#4e79a7", "#f28e2b"])),
        tooltip=["bs:N", "direction:N", "requests:Q"],
    ).properties(width=520, height=220, title=alt.Title(f"{name}: block sizes", anchor="start"))
    return spec(chart)


def _heat_spec(fp: Fingerprint, name: str) -> dict[str, Any]:
    import altair as alt

    from .charts import CARD_WIDTH, spec
    first = fp.lba_first_bytes or 0
    span = max((fp.lba_end_bytes or 0) - first, 1)
    lba_bins = len(fp.heat[0]) if fp.heat else 1
    step = span / lba_bins / 2**20
    rows = [{"t_s": round(i * fp.bin_s, 4), "t_end_s": round((i + 1) * fp.bin_s, 4),
             "lba_mib": round(first / 2**20 + j * step, 3),
             "lba_end_mib": round(first / 2**20 + (j + 1) * step, 3), "requests": c}
            for i, row in enumerate(fp.heat) for j, c in enumerate(row) if c]
    chart = alt.Chart(alt.Data(values=rows[:1])).mark_rect().encode(
        x=alt.X("t_s:Q", title="time (s)"), x2="t_end_s:Q",
        y=alt.Y("lba_mib:Q", title="LBA (MiB)"), y2="lba_end_mib:Q",
        color=alt.Color("requests:Q", scale=alt.Scale(scheme="blues", type="sqrt")),
        tooltip=["t_s:Q", "lba_mib:Q", "requests:Q"],
    ).properties(width=CARD_WIDTH - 120, height=260, title=alt.Title(f"{name}: LBA heat over time", anchor="start"))
    out = spec(chart)  # checked (tests) with one cell: altair checks every data row against its schema
    out["data"] = {"values": rows}  # up to 60 x 32 cells: 1.6 s of validation for a busy capture
    return out


def _flush_spec(fp: Fingerprint, name: str) -> dict[str, Any]:
    """Flushes per second per time bin (a line) over their mean service time per bin (points), two
    y axes: the rate and the latency of an fsync-bound application's commits."""
    import altair as alt

    from .charts import CARD_WIDTH, spec
    rows = [{"t_s": round((i + 0.5) * fp.bin_s, 3), "flushes_s": round(n / fp.bin_s, 1) if fp.bin_s else None,
             "service_us": fp.flush_service_over_time[i] if i < len(fp.flush_service_over_time) else None}
            for i, n in enumerate(fp.flushes_over_time)]
    base = alt.Chart(alt.Data(values=rows)).encode(x=alt.X("t_s:Q", title="time (s)", axis=alt.Axis(tickCount=10)))
    rate = base.mark_line(point=alt.OverlayMarkDef(color="#59a14f"), color="#59a14f").encode(
        y=alt.Y("flushes_s:Q", title="flushes/s"), tooltip=["t_s:Q", "flushes_s:Q", "service_us:Q"])
    latency = base.mark_point(color="#e15759").encode(
        y=alt.Y("service_us:Q", title="mean service time (µs)"), tooltip=["t_s:Q", "flushes_s:Q", "service_us:Q"])
    chart = alt.layer(rate, latency).resolve_scale(y="independent").properties(
        width=CARD_WIDTH - 120, height=200, title=alt.Title(f"{name}: flushes over time", anchor="start"))
    return spec(chart)


def _depth_spec(fp: Fingerprint, name: str) -> dict[str, Any]:
    import altair as alt

    from .charts import CARD_WIDTH, spec
    rows = [{"t_s": round((i + 0.5) * fp.bin_s, 3), "depth": d} for i, d in enumerate(fp.depth_over_time)]
    chart = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=alt.X("t_s:Q", title="time (s)"), y=alt.Y("depth:Q", title="requests in flight (mean)"),
        tooltip=["t_s:Q", "depth:Q"],
    ).properties(width=CARD_WIDTH - 120, height=200, title=alt.Title(f"{name}: depth over time", anchor="start"))
    return spec(chart)


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    return f"{value:.1f}{' ' + unit if unit else ''}" if abs(value) >= 10 or unit == "%" else f"{value:.2f}"


def _diff(error: float | None, relative: float | None, unit: str) -> str:
    """A difference as the closeness table shows it: points for shares, else the relative change."""
    if error is None:
        return "–"
    if unit == "%":
        return f"{error:+.1f} pt"
    return f"{100 * relative:+.1f}%" if relative is not None else f"{error:+.2f}"


def closeness_table(rows: Sequence[Any]) -> Table:
    """``workflows.capture.fit.closeness`` rows: metric, original, (replay on the check device,) fitted,
    fit error and (device difference): see ``workflows.capture.check``."""
    replayed = any(r.with_replay for r in rows)
    cols = (Column("metric", "metric"), Column("original", "original", True),
            *((Column("replayed", "replay (check device)", True),) if replayed else ()),
            Column("fitted", "fitted (check device)" if replayed else "fitted", True),
            Column("error", "fit error", True), *((Column("device", "device difference", True),) if replayed else ()))
    out = []
    for r in rows:
        out.append((Cell(r.metric), Cell(_figure(r.original, r.unit), r.original),
                    *((Cell(_figure(r.replayed, r.unit), r.replayed),) if replayed else ()),
                    Cell(_figure(r.fitted, r.unit), r.fitted), Cell(_diff(r.error, r.relative, r.unit), r.error),
                    *((Cell(_diff(r.device, r.device_relative, r.unit), r.device),) if replayed else ())))
    notes = ["differences: percentage points for shares, relative change for the rest"]
    if replayed:
        notes.append("fit error: the fitted job against the capture's replay, both on the check device; device "
                     "difference: that replay against the original (the same requests at the same times)")
    return Table("fingerprint: original vs fitted job (captured)", cols, tuple(out), notes=tuple(notes))


def _totals(run: Run) -> dict[str, tuple[float | None, float | None]]:
    """Per direction (read, write, sync) of ``run``: IOPS summed over its classes (a sync's rate:
    ``fio.merge.with_sync_rates``) and the worst class's clat p99 (a sync's lat), ns."""
    from ..fio.merge import by_job, latency_figure, with_sync_rates
    found: dict[str, list[Any]] = {}
    for result in run.results:
        for (_, direction), d in with_sync_rates(by_job(result.report)).items():
            found.setdefault(direction, []).append(d)
    out = {}
    for direction, ds in found.items():
        p99s = [v for v in (latency_figure(d, "clat", "p99") for d in ds) if v is not None]
        rates = [d.iops for d in ds if d.iops is not None]
        out[direction] = (sum(rates) if rates else None, max(p99s) if p99s else None)
    return out


def performance_table(original: Run, fitted: Run, replay: Run | None = None) -> Table:
    """IOPS (syncs/s for sync) and clat p99 per direction: the original (the capture, or a replay of
    it) and the fitted job's run, and with ``replay`` (the capture replayed on the check device) that
    replay between them, the fit error (fitted vs replay) and the device difference (replay vs original)."""
    runs = [original, *((replay,) if replay is not None else ()), fitted]
    totals = [_totals(r) for r in runs]
    cols = (Column("direction", "dir"), Column("metric", "metric"),
            Column("a", f"run {original.info.id}", True),
            *((Column("replay", f"replay run {replay.info.id}", True),) if replay is not None else ()),
            Column("b", f"fitted run {fitted.info.id}", True),
            Column("change", "fit error" if replay is not None else "change", True),
            *((Column("device", "device difference", True),) if replay is not None else ()))
    rows = []
    for direction in ("read", "write", "sync"):
        if not all(direction in t for t in totals):
            continue
        for i, metric in enumerate(("syncs/s" if direction == "sync" else "IOPS", "clat p99 (worst class)")):
            values = [t[direction][i] for t in totals]
            shown = [format_iops(v) if i == 0 else format_ns(v) for v in values]
            changes = [_change(values[-2], values[-1])]
            if replay is not None:
                changes.append(_change(values[0], values[1]))
            rows.append((Cell(direction), Cell(metric), *(Cell(text, v) for text, v in zip(shown, values, strict=True)),
                         *(Cell(c) for c in changes)))
    notes = ("fit error: the fitted job against the capture's replay on the same device; device difference: that "
             "replay against the original",) if replay is not None else ()
    return Table(f"{original.info.suite_name} vs the fitted job", cols, tuple(rows), notes=notes)


def _change(before: float | None, after: float | None) -> str:
    return f"{100 * (after / before - 1):+.1f}%" if before and after is not None else "–"
