"""A report as data: the summary tables, charts, findings, facts and job files of one run or of
several runs side by side. ``html.render`` and ``markdown.render`` turn it into files.

At the top: the run's results table, or for several runs the comparison ``iolab compare``
prints (verdicts, geometric means, option and environment differences): see ``summary_tables``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version

from ..analyze import compare as compare_mod
from ..analyze.compare import Comparison
from ..model import HostSamples, Run, RunInfo, TimeSeries
from . import charts as charts_mod
from . import costs as costs_mod
from . import facts, saturation, warmup
from .capture import capture_charts
from .chartdata import run_name, subjects
from .comparison import comparison_tables
from .pace import pace_table
from .results import results_table
from .saturation import saturation_table
from .table import Table


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
    costs: tuple[Table, ...] = ()


def compare_runs(runs: Sequence[Run], metrics: Sequence[str] | None = None, threshold: float = 0.05,
                 ignore: Sequence[str] = ()) -> Comparison:
    """``analyze.compare.compare`` with each run as a side: the first run is the baseline, every other run is
    compared with it. Sides are named like the charts' subjects (``run_name``). Raises
    ``UsageError`` as ``analyze.compare.compare`` does (fewer than two runs, unknown metric)."""
    sides = [(compare_mod.Side(run_name(r, runs), (r.info.id,), (r.info.label,) if r.info.label else ()), [r])
             for r in runs]
    return compare_mod.compare(sides, metrics, threshold, ignore)


def summary_tables(runs: Sequence[Run], comparison: Comparison | None = None) -> tuple[Table, ...]:
    """The tables at the top of the report, in order.

    With a ``comparison``: exactly the tables ``iolab compare`` prints
    (``report.comparison.comparison_tables``: per compared side the geometric-mean summary, put
    first so that it is not below a long table, the verdict table, option and environment
    differences). Without one, one run gives its results table (``report.results.
    results_table``; a replay's pace after it, ``report.pace``) and several runs are compared with
    ``compare_runs`` and its defaults.
    """
    if comparison is None:
        if len(runs) == 1:
            run = runs[0]
            return tuple(t for t in (results_table(run), pace_table(run), saturation_table(run),
                                     warmup.warmup_table(run), warmup.cache_table(run), _crash_table(run))
                         if t is not None)
        comparison = compare_runs(runs)
    saturated = saturation.comparison_table([(run_name(r, runs), r) for r in runs])
    curves = warmup.comparison_table([(run_name(r, runs), [r]) for r in runs])
    return (*comparison_tables(comparison, summary_first=True), *(t for t in (saturated, curves) if t is not None))


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


def cost_charts(runs: Sequence[Run], samples: Mapping[int, Sequence[HostSamples]],
                series: Mapping[int, Sequence[TimeSeries]]) -> tuple[charts_mod.Chart, ...]:
    """The observers' chart (``report.costs``), when any job was observed."""
    rows = costs_mod.over_time_rows(runs, samples, series)
    if not rows:
        return ()
    return (charts_mod.Chart("host-cost-over-time", "Every host's cost over time", "Host cost",
                             "CPU busy, network and device I/O of every observed host at 1 s, beside fio's IOPS.",
                             costs_mod.over_time_chart(rows)),)


def build(runs: Sequence[Run], series: Mapping[int, Sequence[TimeSeries]] | None = None,
          title: str | None = None, comparison: Comparison | None = None,
          samples: Mapping[int, Sequence[HostSamples]] | None = None) -> Report:
    """The report of ``runs`` (one, or several side by side); ``series`` maps result ids to
    their time series (``Store.time_series``), ``samples`` to the observers' samples
    (``Store.host_samples``); ``comparison`` is the comparison of the runs to show at the top
    (default: see ``summary_tables``)."""
    if not runs:
        raise ValueError("a report needs at least one run")
    if title is None:
        first = runs[0].info
        title = (f"run {first.id}: {first.suite_name}" + (f" [{first.label}]" if first.label else "")
                 if len(runs) == 1 else " vs ".join(run_name(r, runs) for r in runs))
    if comparison is None and len(runs) > 1:
        comparison = compare_runs(runs)
    return Report(
        title=title, runs=tuple(r.info for r in runs), summary=summary_tables(runs, comparison),
        charts=(*capture_charts(runs), *charts_mod.build(runs, series or {}, comparison), *warmup.warmup_charts(runs),
                *cost_charts(runs, samples or {}, series or {})),
        findings=findings(runs),
        facts=tuple(t for t in (facts.host_table(runs), facts.target_table(runs), facts.other_hosts_table(runs))
                    if t.rows), job_files=job_files(runs),
        generated_at=datetime.now(UTC), iolab_version=version("iolab"),
        costs=tuple(t for t in (costs_mod.cost_table(r) for r in runs) if t is not None),
    )


def _crash_table(run: Run) -> Table | None:
    """``report.crashtest.crash_table``, imported only for a crash test's run (it brings the crash
    phase's modules)."""
    if not any("crash" in (r.extra or {}) for r in run.results):
        return None
    from .crashtest import crash_table
    return crash_table(run)
