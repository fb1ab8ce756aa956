"""A capture's fingerprint as tables (``iolab show``), JSON (``fingerprint``) and charts (report).

The charts draw the fingerprint's aggregates: requests per block size and direction, LBA heat over
time (requests per time bin × LBA bin), and the mean in-flight depth over time. Pure: they read the
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
             f"FUA {_pct(fp.fua_pct)} · sync writes {_pct(fp.sync_write_pct)}"),
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
    """Block-size histogram, LBA heat over time and depth over time of every capture among ``runs``."""
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


def _depth_spec(fp: Fingerprint, name: str) -> dict[str, Any]:
    import altair as alt

    from .charts import CARD_WIDTH, spec
    rows = [{"t_s": round((i + 0.5) * fp.bin_s, 3), "depth": d} for i, d in enumerate(fp.depth_over_time)]
    chart = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=alt.X("t_s:Q", title="time (s)"), y=alt.Y("depth:Q", title="requests in flight (mean)"),
        tooltip=["t_s:Q", "depth:Q"],
    ).properties(width=CARD_WIDTH - 120, height=200, title=alt.Title(f"{name}: depth over time", anchor="start"))
    return spec(chart)


def closeness_table(rows: Sequence[Any]) -> Table:
    """``workflows.capture.fit.closeness`` rows: metric, original, fitted, error."""
    def num(value: float | None, unit: str) -> str:
        if value is None:
            return "–"
        return f"{value:.1f}{' ' + unit if unit else ''}" if abs(value) >= 10 or unit == "%" else f"{value:.2f}"
    cols = (Column("metric", "metric"), Column("original", "original", True), Column("fitted", "fitted", True),
            Column("error", "error", True))
    out = []
    for r in rows:
        error = r.error
        text = "–" if error is None else (f"{error:+.1f} pt" if r.unit == "%" else
                                          f"{100 * r.relative:+.1f}%" if r.relative is not None else f"{error:+.2f}")
        out.append((Cell(r.metric), Cell(num(r.original, r.unit), r.original), Cell(num(r.fitted, r.unit), r.fitted),
                    Cell(text, error)))
    return Table("fingerprint: original vs fitted job (captured)", cols, tuple(out),
                 notes=("error: percentage points for shares, relative change for the rest",))


def performance_table(baseline: Run, fitted: Run) -> Table:
    """IOPS and clat p99 per direction: the baseline (the capture, or a replay of it) beside the fitted job's run."""
    from ..fio.merge import by_job
    def totals(run: Run) -> dict[str, tuple[float, float | None]]:
        out: dict[str, list[Any]] = {}
        for result in run.results:
            for (_, direction), d in by_job(result.report).items():
                out.setdefault(direction, []).append(d)
        summary = {}
        for direction, ds in out.items():
            p99s = [d.clat.percentile(99) for d in ds if d.clat and d.clat.percentile(99) is not None]
            summary[direction] = (sum(d.iops or 0 for d in ds), max(p99s) if p99s else None)
        return summary
    a, b = totals(baseline), totals(fitted)
    cols = (Column("direction", "dir"), Column("metric", "metric"), Column("a", f"run {baseline.info.id}", True),
            Column("b", f"fitted run {fitted.info.id}", True), Column("change", "change", True))
    rows = []
    for direction in ("read", "write"):
        if direction not in a or direction not in b:
            continue
        for i, metric in enumerate(("IOPS", "clat p99 (worst class)")):
            x, y = a[direction][i], b[direction][i]
            change = f"{100 * (y / x - 1):+.1f}%" if x and y is not None else "–"
            fmt = format_iops if i == 0 else format_ns
            rows.append((Cell(direction), Cell(metric), Cell(fmt(x) if x is not None else "–", x),
                         Cell(fmt(y) if y is not None else "–", y), Cell(change)))
    return Table(f"{baseline.info.suite_name} vs the fitted job", cols, tuple(rows))
