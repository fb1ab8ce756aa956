"""A stored run as result rows (target × workload × direction, repeats summarised) and as the
documented JSON document (schema ``iolab.run/1``, see README "JSON output").

Per repetition, the fio jobs of one workload (numjobs clones, several sections of a job file
with the same name) are merged first (``fio.merge``: IOPS summed, percentiles from merged
histograms); the repetitions are then summarised with mean ± sample stdev (``stats.describe``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import stats
from ..fio.merge import summarize
from ..model import DirectionStats, ResultRecord, Run, to_jsonable
from ..units import format_iops, format_ns, format_rate
from .table import Cell, Column, Table

SCHEMA = "iolab.run/1"


@dataclass(frozen=True)
class ResultRow:
    """One target × workload × fio job × direction, over its repetitions.

    Each ``*_values`` tuple holds one entry per successful repetition (None where unknown).
    Units: IOPS, bytes/s, ns.
    """

    target: str
    workload: str
    job: str
    direction: str
    iops_values: tuple[float | None, ...]
    bw_values: tuple[float | None, ...]
    clat_mean_values: tuple[float | None, ...]
    clat_p99_values: tuple[float | None, ...]
    failed: int = 0

    @property
    def iops(self) -> stats.Summary:
        return stats.describe(self.iops_values)

    @property
    def bw(self) -> stats.Summary:
        return stats.describe(self.bw_values)

    @property
    def clat_mean(self) -> stats.Summary:
        return stats.describe(self.clat_mean_values)

    @property
    def clat_p99(self) -> stats.Summary:
        return stats.describe(self.clat_p99_values)


def _clat(d: DirectionStats) -> Any:
    """Completion latency; sync-only directions carry only ``lat``."""
    return d.clat if d.clat is not None and d.clat.samples != 0 else d.lat


def per_repeat(result: ResultRecord) -> dict[tuple[str, str], DirectionStats]:
    """``(fio job name, direction) -> merged stats`` for one successful invocation."""
    if result.report is None:
        return {}
    by_name: dict[str, list[Any]] = {}
    for job in result.report.jobs:
        by_name.setdefault(job.name, []).append(job)
    out = {}
    for name, jobs in by_name.items():
        for direction, merged in summarize(jobs).items():
            out[(name, direction)] = merged
    return out


def result_rows(run: Run) -> list[ResultRow]:
    """Rows in plan order of first appearance."""
    values: dict[tuple[str, str, str, str], list[DirectionStats]] = {}
    failed: dict[tuple[str, str], int] = {}
    for result in run.results:
        if result.status != "ok":
            if result.status == "failed":
                failed[(result.target, result.workload)] = failed.get((result.target, result.workload), 0) + 1
            continue
        for (job, direction), d in per_repeat(result).items():
            values.setdefault((result.target, result.workload, job, direction), []).append(d)
    rows = []
    for (target, workload, job, direction), ds in values.items():
        lat = [_clat(d) for d in ds]
        rows.append(ResultRow(
            target=target, workload=workload, job=job, direction=direction,
            iops_values=tuple(d.iops for d in ds), bw_values=tuple(d.bw_bytes_s for d in ds),
            clat_mean_values=tuple(lt.mean_ns if lt else None for lt in lat),
            clat_p99_values=tuple(lt.percentile(99) if lt else None for lt in lat),
            failed=failed.get((target, workload), 0),
        ))
    seen = {(r.target, r.workload) for r in rows}
    for (target, workload), count in failed.items():
        if (target, workload) not in seen:
            rows.append(ResultRow(target, workload, workload, "–", (), (), (), (), failed=count))
    return rows


def _spread(summary: stats.Summary, fmt: Any) -> str:
    """``mean ±cv%`` (relative sample stdev of the repeats), or just the mean for one repeat."""
    if summary.mean is None:
        return "–"
    text = fmt(summary.mean)
    if summary.cv is not None:
        text += f" ±{summary.cv * 100:.1f}%"
    return text


def results_table(run: Run) -> Table:
    """The run's results for people: IOPS, MiB/s, mean and p99 clat.

    With repeats each cell is ``mean ±CV%`` (sample stdev relative to the mean).
    """
    rows = result_rows(run)
    show_job = any(r.job != r.workload for r in rows)
    show_failed = any(r.failed for r in rows)
    columns = [Column("target", "target"), Column("workload", "workload")]
    if show_job:
        columns.append(Column("job", "fio job"))
    columns += [
        Column("direction", "dir"), Column("repeats", "n", True), Column("iops", "IOPS", True),
        Column("bw_mib_s", "MiB/s", True), Column("clat_mean_ns", "clat mean", True),
        Column("clat_p99_ns", "clat p99", True),
    ]
    if show_failed:
        columns.append(Column("failed", "failed", True))
    table_rows = []
    for r in rows:
        cells = [Cell(r.target), Cell(r.workload)] + ([Cell(r.job)] if show_job else [])
        cells += [
            Cell(r.direction), Cell(str(len(r.iops_values)), len(r.iops_values)),
            Cell(_spread(r.iops, format_iops), r.iops.mean),
            Cell(_spread(r.bw, format_rate), None if r.bw.mean is None else r.bw.mean / 1048576),
            Cell(_spread(r.clat_mean, format_ns), r.clat_mean.mean),
            Cell(_spread(r.clat_p99, format_ns), r.clat_p99.mean),
        ]
        if show_failed:
            cells.append(Cell(str(r.failed) if r.failed else "", r.failed, "red" if r.failed else None))
        table_rows.append(tuple(cells))
    info = run.info
    title = f"run {info.id}: {info.suite_name}" + (f" [{info.label}]" if info.label else "") + f" ({info.status})"
    notes = tuple(f"warning: {w}" for w in info.warnings)
    if info.source:
        notes = (f"imported from {info.source.get('name')} ({info.source.get('format')} output, "
                 f"sha256 {info.source.get('sha256', '')[:16]}…)", *notes)
    if any(len(r.iops_values) > 1 for r in rows):
        notes += ("± is the repeats' sample standard deviation relative to the mean (CV)",)
    notes += tuple(f"failed: {r.target}/{r.workload} repeat {r.repeat + 1}: {(r.error or '').splitlines()[0]}"
                   for r in run.results if r.status == "failed")
    return Table(title=title, columns=tuple(columns), rows=tuple(table_rows), notes=notes)


def _summary_json(s: stats.Summary, values: Sequence[float | None]) -> dict[str, Any]:
    return {"mean": s.mean, "stdev": s.stdev, "min": s.minimum, "max": s.maximum,
            "ci95": list(s.ci95) if s.ci95 else None, "values": list(values)}


def _strip_bins(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_bins(v) for k, v in obj.items() if k != "bins_ns"}
    if isinstance(obj, list):
        return [_strip_bins(v) for v in obj]
    return obj


def run_document(run: Run) -> dict[str, Any]:
    """The JSON document of a run (schema ``iolab.run/1``); histogram bins are left out."""
    results = []
    for r in run.results:
        doc = _strip_bins(to_jsonable(r))
        doc.pop("report", None)
        report = r.report
        doc["fio_version"] = report.fio_version if report else None
        doc["jobs"] = _strip_bins(to_jsonable(list(report.jobs))) if report else []
        doc["summary"] = {f"{job}/{direction}" if job != r.workload else direction: _strip_bins(to_jsonable(d))
                          for (job, direction), d in per_repeat(r).items()}
        results.append(doc)
    rows = [{
        "target": row.target, "workload": row.workload, "job": row.job, "direction": row.direction,
        "repeats": len(row.iops_values), "failed": row.failed,
        "iops": _summary_json(row.iops, row.iops_values),
        "bw_bytes_s": _summary_json(row.bw, row.bw_values),
        "clat_mean_ns": _summary_json(row.clat_mean, row.clat_mean_values),
        "clat_p99_ns": _summary_json(row.clat_p99, row.clat_p99_values),
    } for row in result_rows(run)]
    return {"schema": SCHEMA, "run": to_jsonable(run.info), "summary": rows, "results": results}
