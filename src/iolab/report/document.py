"""A report as data: the summary table, charts, findings, facts and job files of one run or of
several runs side by side. ``html.render`` and ``markdown.render`` turn it into files.

The summary at the top is where the comparison verdicts belong: see ``summary_tables``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version

from ..model import Run, RunInfo, TimeSeries
from ..units import format_iops, format_ns, format_rate
from . import charts as charts_mod
from . import facts
from .chartdata import Categories, run_name, subjects
from .results import _spread, result_rows, results_table
from .table import Cell, Column, Table


@dataclass(frozen=True)
class Finding:
    """A methodology finding or a problem to show with the results. ``severity`` is
    ``warning`` or ``error`` (a failed job)."""

    run: str
    severity: str
    text: str


@dataclass(frozen=True)
class JobFile:
    """The exact job file fio ran for a subject's workload, and the fio command line."""

    title: str
    text: str
    command: str | None
    job_hash: str


@dataclass(frozen=True)
class Report:
    title: str
    runs: tuple[RunInfo, ...]
    summary: tuple[Table, ...]
    charts: tuple[charts_mod.Chart, ...]
    findings: tuple[Finding, ...]
    facts: tuple[Table, ...]
    job_files: tuple[JobFile, ...]
    generated_at: datetime
    iolab_version: str


def summary_tables(runs: Sequence[Run]) -> tuple[Table, ...]:
    """The table at the top of the report.

    One run: its results table (``report.results.results_table``). Several runs: a
    side-by-side table of the same numbers, no verdicts.

    COMPARE HOOK: when ``compare`` (issue 3) lands, the several-runs branch returns its verdict
    table (better/worse/unchanged/noisy per metric, with the statistic used) here, optionally
    followed by the side-by-side table. Nothing else in the report needs to change: HTML and
    Markdown render whatever Tables this returns, in order, under "Summary".
    """
    if len(runs) == 1:
        return (results_table(runs[0]),)
    return (side_by_side_table(runs),)


def side_by_side_table(runs: Sequence[Run]) -> Table:
    """Per workload and direction, IOPS, MiB/s and p99 clat of each subject next to each other
    (``mean ±CV%`` over repetitions). Describes; does not judge (that is ``compare``'s job)."""
    subj = subjects(runs)
    cats = Categories(runs)
    names = subj.order
    cells: dict[str, dict[str, tuple[Cell, Cell, Cell]]] = {}
    for run in runs:
        for r in result_rows(run):
            if r.direction == "–":
                continue
            cells.setdefault(cats.name(r.workload, r.job, r.direction), {})[subj.names[(run.info.id, r.target)]] = (
                Cell(_spread(r.iops, format_iops), r.iops.mean),
                Cell(_spread(r.bw, format_rate), None if r.bw.mean is None else r.bw.mean / 1048576),
                Cell(_spread(r.clat_p99, format_ns), r.clat_p99.mean),
            )
    columns = [Column("workload", "workload")]
    for metric, title in (("iops", "IOPS"), ("bw_mib_s", "MiB/s"), ("clat_p99_ns", "clat p99")):
        columns += [Column(f"{metric}:{n}", f"{title} {n}", True) for n in names]
    missing = (Cell("–"),) * 3
    rows = []
    for category in cats.order:
        by_subject = cells.get(category, {})
        per = [by_subject.get(n, missing) for n in names]
        rows.append((Cell(category), *(p[k] for k in range(3) for p in per)))
    notes = ("each cell: mean ±CV% of the repetitions; no verdicts (see `iolab compare`)",)
    title = "Side by side: " + " · ".join(run_name(r, runs) for r in runs)
    return Table(title=title, columns=tuple(columns), rows=tuple(rows), notes=notes)


def findings(runs: Sequence[Run]) -> tuple[Finding, ...]:
    """Each run's methodology warnings, fio report warnings and failed jobs, without repeats."""
    out: dict[Finding, None] = {}
    for run in runs:
        name = run_name(run, runs)
        for warning in run.info.warnings:
            out[Finding(name, "warning", warning)] = None
        for r in run.results:
            where = f"{r.target} / {r.workload} repeat {r.repeat + 1}"
            for warning in r.report.warnings if r.report else ():
                out[Finding(name, "warning", f"{where}: {warning}")] = None
            if r.status == "failed":
                out[Finding(name, "error", f"{where} failed: {r.error or 'no message'}")] = None
    return tuple(out)


def job_files(runs: Sequence[Run]) -> tuple[JobFile, ...]:
    """One job file per subject and workload (repetitions run the same file)."""
    subj = subjects(runs)
    seen: dict[tuple[str, str], JobFile] = {}
    for run in runs:
        for r in run.results:
            key = (subj.names[(run.info.id, r.target)], r.workload)
            if key not in seen or (seen[key].command is None and r.command):
                seen[key] = JobFile(title=f"{key[0]} / {key[1]}", text=r.job_text, command=r.command,
                                    job_hash=r.job_hash)
    return tuple(seen.values())


def build(runs: Sequence[Run], series: Mapping[int, Sequence[TimeSeries]] | None = None,
          title: str | None = None) -> Report:
    """The report of ``runs`` (one, or several side by side); ``series`` maps result ids to
    their time series (``Store.time_series``)."""
    if not runs:
        raise ValueError("a report needs at least one run")
    if title is None:
        first = runs[0].info
        title = (f"run {first.id}: {first.suite_name}" + (f" [{first.label}]" if first.label else "")
                 if len(runs) == 1 else " vs ".join(run_name(r, runs) for r in runs))
    return Report(
        title=title, runs=tuple(r.info for r in runs), summary=summary_tables(runs),
        charts=tuple(charts_mod.build(runs, series or {})), findings=findings(runs),
        facts=tuple(t for t in (facts.host_table(runs), facts.target_table(runs)) if t.rows), job_files=job_files(runs),
        generated_at=datetime.now(UTC), iolab_version=version("iolab"),
    )
