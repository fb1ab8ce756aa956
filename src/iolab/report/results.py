"""A stored run as result rows (target × workload × direction, repeats summarised) and as the
documented JSON document (schema ``iolab.run/1``, docs/reference/json.md).

Per repetition, the fio jobs of one workload (numjobs clones, several sections of a job file
with the same name) are merged first (``fio.merge``: IOPS summed, percentiles from merged
histograms); the repetitions are then summarised with mean ± sample stdev (``stats.describe``).

A result of a remote target (fio's client/server mode) gives one row per host and an ``all
hosts`` row: the merge of every host's jobs, computed by iolab (never fio's "All clients"). A
``partial`` repetition (a host was lost) counts in the rows of the hosts that reported, not in
the ``all hosts`` row, which would otherwise mix two different sets of hosts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .. import stats
from ..analyze import sweep
from ..describe import canonical
from ..fio.merge import by_job, summarize, with_sync_rates
from ..model import DirectionStats, ResultRecord, Run, to_jsonable
from ..remote.hosts import label_of
from ..units import format_iops, format_ns, format_rate
from .method import method_notes
from .table import Cell, Column, Table, compact_places

SCHEMA = "iolab.run/1"
#: The ``host`` of the row that aggregates every host of a remote target.
ALL_HOSTS = "all hosts"


@dataclass(frozen=True)
class ResultRow:
    """One target × workload × fio job × direction, over its repetitions.

    Each ``*_values`` tuple holds one entry per successful repetition (None where unknown).
    Units: IOPS, bytes/s, ns. ``host`` is None for a local target, else a host's label or
    ``ALL_HOSTS``; ``partial`` counts repetitions in which some host was lost. ``options`` are the
    job's canonical fio options as ``analyze.sweep.option_table`` gives them (the naming axes always, then
    every option any row of the run sets; None where unknown). ``pass_index`` is the warm-up pass
    (0 without passes): each pass is a row of its own, its repetitions pooled. ``rounded`` names
    the figures (``iops``, ``bw``) that are fio's rounded display: the output could not make them exact.
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
    host: str | None = None
    partial: int = 0
    options: Mapping[str, str | None] = field(default_factory=dict)
    pass_index: int = 0
    rounded: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        """The workload, and the fio job when it is named otherwise."""
        return self.workload if self.job == self.workload else f"{self.workload} · {self.job}"

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


def per_host(result: ResultRecord) -> dict[tuple[str, str, str], DirectionStats]:
    """``(host label, fio job name, direction) -> merged stats`` of a client/server result;
    empty for a local one."""
    if result.report is None:
        return {}
    by_host: dict[tuple[str, str], list[Any]] = {}
    for job in result.report.jobs:
        if job.hostname is not None:
            by_host.setdefault((label_of(job.hostname, job.port), job.name), []).append(job)
    return {(host, name, direction): merged for (host, name), jobs in by_host.items()
            for direction, merged in summarize(jobs).items()}


def result_rows(run: Run) -> list[ResultRow]:
    """Rows in plan order of first appearance; a remote target's host rows come before its
    ``all hosts`` row."""
    values: dict[tuple[str, str, int, str, str, str | None], list[DirectionStats]] = {}
    failed: dict[tuple[str, str, int], int] = {}
    partial: dict[tuple[str, str, int], int] = {}
    order: dict[str, int] = {}  # hosts in the target's order, as the per-host records list them
    for result in run.results:
        for record in (result.extra or {}).get("hosts", ()):
            order.setdefault(record["host"], len(order))
        key = (result.target, result.workload, int((result.extra or {}).get("pass") or 0))
        if result.status not in ("ok", "partial"):
            if result.status == "failed":
                failed[key] = failed.get(key, 0) + 1
            continue
        hosts = per_host(result)
        for (label, job, direction), d in hosts.items():
            values.setdefault((*key, job, direction, label), []).append(d)
            values.setdefault((*key, job, direction, ALL_HOSTS), [])  # shown even if no repeat had every host
        if result.status == "partial":
            partial[key] = partial.get(key, 0) + 1
            continue
        for (job, direction), d in with_sync_rates(by_job(result.report)).items():
            values.setdefault((*key, job, direction, ALL_HOSTS if hosts else None), []).append(d)
    groups = list(dict.fromkeys(k[:5] for k in values))
    rows = []
    for (target, workload, pass_index, job, direction, host), ds in sorted(values.items(), key=lambda kv: (
            groups.index(kv[0][:5]), kv[0][5] == ALL_HOSTS, order.get(kv[0][5] or "", len(order)), kv[0][5] or "")):
        lat = [_clat(d) for d in ds]
        key = (target, workload, pass_index)
        rounded = frozenset(name for name, exact, shown in (("iops", "iops", "iops_shown"),
                                                           ("bw", "bw_bytes_s", "bw_bytes_s_shown"))
                            if any(getattr(d, exact) is None and getattr(d, shown) is not None for d in ds))
        rows.append(ResultRow(
            target=target, workload=workload, job=job, direction=direction, rounded=rounded,
            iops_values=tuple(d.iops_or_shown for d in ds), bw_values=tuple(d.bw_or_shown for d in ds),
            clat_mean_values=tuple(lt.mean_ns if lt else None for lt in lat),
            clat_p99_values=tuple(lt.percentile(99) if lt else None for lt in lat),
            failed=failed.get(key, 0), host=host, partial=partial.get(key, 0), pass_index=pass_index,
        ))
    seen = {(r.target, r.workload, r.pass_index) for r in rows if r.host in (None, ALL_HOSTS)}
    for (target, workload, pass_index), count in failed.items():
        if (target, workload, pass_index) not in seen:
            rows.append(ResultRow(target, workload, workload, "–", (), (), (), (), failed=count, pass_index=pass_index))
    for (target, workload, pass_index), count in partial.items():
        if (target, workload, pass_index) not in seen:
            rows.append(ResultRow(target, workload, workload, "–", (), (), (), (), host=ALL_HOSTS, partial=count,
                                  pass_index=pass_index))
    return _with_options(run, rows)


def _with_options(run: Run, rows: list[ResultRow]) -> list[ResultRow]:
    """``rows`` with each one's canonical job options (see ``ResultRow.options``)."""
    known: dict[tuple[str, str, int], dict[str, canonical.Options]] = {}
    for result in run.results:
        key = (result.target, result.workload, int((result.extra or {}).get("pass") or 0))
        if key not in known:
            version = run.info.fio_version or (result.report.fio_version if result.report else None)
            tuned = {k: v for k, v in result.params.items() if sweep.host_setting(k)}  # tuning and pinning axes
            known[key] = {job: canonical.Options({**o.values, **tuned}, o.unknown)
                          for job, o in canonical.job_options(result, version).items()}
    empty = canonical.Options({}, None)
    table = sweep.option_table([known.get((r.target, r.workload, r.pass_index), {}).get(r.job, empty)
                                for r in rows])
    return [replace(r, options=options) for r, options in zip(rows, table, strict=True)]


def _spread(summary: stats.Summary, fmt: Any) -> str:
    """``mean ±cv%`` (relative sample stdev of the repeats), or just the mean for one repeat."""
    if summary.mean is None:
        return "–"
    text = fmt(summary.mean)
    if summary.cv is not None:
        text += f" ±{summary.cv * 100:.1f}%"
    return text


#: The figures of a results row: CSV key, title, unit of the raw value, and the CSV key of its CV.
_FIGURES = (("iops", "IOPS", "IOPS", "iops_cv"), ("bw_mib_s", "MiB/s", "MiB/s", "bw_cv"),
            ("clat_mean_ns", "clat mean", "ns", "clat_mean_cv"), ("clat_p99_ns", "clat p99", "ns", "clat_p99_cv"))


def _cv(summary: stats.Summary) -> Cell:
    """The CV in % for CSV (the display shows it inside the figure's cell)."""
    return Cell("–", None if summary.cv is None else summary.cv * 100)


def results_table(run: Run, findings_shown: bool = False) -> Table:
    """The run's results for people: IOPS, MiB/s, mean and p99 clat; below them, the run's warnings, its lint
    findings in one reminder line when ``findings_shown`` (the plan printed them, in this command).

    With repeats each cell is ``mean ±CV%`` (sample stdev relative to the mean). A remote
    target adds a ``host`` column: one row per host, then the ``all hosts`` row. Workloads are
    named as ``analyze.sweep.naming`` says: by name, or, for a sweep, by a column per option that varies
    (rw, bs, iodepth, numjobs …), rows in option order.
    """
    rows = result_rows(run)
    naming = sweep.naming([r.name for r in rows], [r.options for r in rows])
    if naming.by_options:
        targets = list(dict.fromkeys(r.target for r in rows))
        rows.sort(key=lambda r: (targets.index(r.target), naming.sort_key(r.options)))  # stable: hosts stay
    show_job = not naming.by_options and any(r.job != r.workload for r in rows)
    show_failed = any(r.failed for r in rows)
    show_host = any(r.host for r in rows)
    show_partial = any(r.partial for r in rows)
    columns = [Column("target", "target")] + ([Column("host", "host")] if show_host else [])
    if not naming.by_options or naming.names:
        columns.append(Column("workload", "workload"))
    if naming.by_options:
        columns += [Column(key, key.removeprefix("tune."), key in sweep.GRID) for key in naming.keys]
    if show_job:
        columns.append(Column("job", "fio job"))
    cv = " ±CV" if any(len(r.iops_values) > 1 for r in rows) else ""  # which spread the ± shows
    columns += [
        Column("direction", "dir"), Column("repeats", "n", True),
        *(c for key, title, unit, cv_key in _FIGURES
          for c in (Column(key, title + cv, True, unit), Column(cv_key, "", True, "%", csv_only=True))),
    ]
    if show_failed:
        columns.append(Column("failed", "failed", True))
    if show_partial:
        columns.append(Column("partial", "partial", True))
    show_rounded = any(r.rounded for r in rows)
    if show_rounded:  # which raw values are fio's rounded display (shown with ≈)
        columns.append(Column("rounded", "", csv_only=True))
    table_rows = []
    for r in rows:
        cells = [Cell(r.target)]
        if show_host:
            cells.append(Cell(r.host or "", style="bold" if r.host == ALL_HOSTS else None))
        if not naming.by_options or naming.names:
            cells.append(Cell(r.workload))
        if naming.by_options:
            cells += [Cell(r.options.get(k) or "–", r.options.get(k)) for k in naming.keys]
        cells += [Cell(r.job)] if show_job else []
        cells += [
            Cell(r.direction), Cell(str(len(r.iops_values)), len(r.iops_values)),
            Cell(_shown("iops", r, _spread(r.iops, format_iops)), r.iops.mean), _cv(r.iops),
            Cell(_shown("bw", r, _spread(r.bw, format_rate)), None if r.bw.mean is None else r.bw.mean / 1048576),
            _cv(r.bw),
            Cell(_spread(r.clat_mean, format_ns), r.clat_mean.mean), _cv(r.clat_mean),
            Cell(_spread(r.clat_p99, format_ns), r.clat_p99.mean), _cv(r.clat_p99),
        ]
        if show_failed:
            cells.append(Cell(str(r.failed) if r.failed else "", r.failed, "red" if r.failed else None))
        if show_partial:
            cells.append(Cell(str(r.partial) if r.partial else "", r.partial, "yellow" if r.partial else None))
        if show_rounded:
            cells.append(Cell(" ".join(sorted(r.rounded)), " ".join(sorted(r.rounded))))
        table_rows.append(tuple(cells))
    info = run.info
    title = f"run {info.id}: {info.suite_name}" + (f" [{info.label}]" if info.label else "") + f" ({info.status})"
    return Table(title=title, columns=tuple(columns), rows=tuple(table_rows),
                 notes=_notes(run, rows, naming, findings_shown))


#: What a figure from fio's rounded display is marked with, wherever it is shown.
ROUNDED = "≈"
ROUNDED_NOTE = (f"{ROUNDED}: fio's printed value, rounded to 3–4 significant figures: the output lacks what makes "
                "it exact (the issued totals, one block size)")


def _shown(figure: str, row: ResultRow, text: str) -> str:
    return ROUNDED + text if figure in row.rounded and text != "–" else text


def _compact(warning: str) -> str:
    """A stored warning (``check.lint.Finding.text``: ``P1 [a on d, b on d, …]: …``) with its places named
    compactly (``report.table.compact_places``); the JSON document keeps them all."""
    head, sep, rest = warning.partition("]: ")
    rule, bracket, places = head.partition(" [")
    if not (sep and bracket):
        return warning
    return f"{rule} [{compact_places(places.split(', '))}]: {rest}"


#: How a finding the user acknowledged starts among the stored warnings (``check.acknowledge.PREFIX``).
ACKNOWLEDGED = "acknowledged: "
#: A stored warning that is a lint finding (``check.lint.Finding.text``: ``P4 [w on d]: …``, ``FIO …``).
_FINDING = re.compile(r"^(P\d+|FIO)\b")


def _notes(run: Run, rows: Sequence[ResultRow], naming: sweep.Naming, findings_shown: bool) -> tuple[str, ...]:
    info = run.info
    # The table shows what each finding says; the remedies are in the JSON document and `iolab lint`. Findings
    # the plan printed just before are not said twice: one line reminds of them.
    acknowledged = [w.removeprefix(ACKNOWLEDGED) for w in info.warnings if w.startswith(ACKNOWLEDGED)]
    said = [w for w in info.warnings if findings_shown and _FINDING.match(w)]
    shown = [w for w in info.warnings if w not in said and not w.startswith(ACKNOWLEDGED)]
    notes = tuple(f"warning: {_compact(w.split(' Remedy: ')[0])}" for w in shown) + method_notes(run)
    if said:
        ids = ", ".join(dict.fromkeys(str(_FINDING.match(w)[0]) for w in said))  # type: ignore[index]
        notes = (f"lint: {len(said)} warning(s) ({ids}), printed with the plan; iolab show {info.id} repeats them, "
                 "iolab lint SUITE explains them", *notes)
    if sets := info.options.get("set"):
        given = " ".join(f"--set {k}" + ("" if v is None else f"={v}") for k, v in sets.items())
        notes += (f"fio options set for this run over the suite's: {given}",)
    if acknowledged:
        ids = ", ".join(dict.fromkeys(m[0] for w in acknowledged if (m := _FINDING.match(w))))
        notes += (f"acknowledged (--ignore-lint, lint: ignore): {ids}",)
    if any(" Remedy: " in w for w in shown):
        notes += ("remedies for these warnings: iolab lint SUITE (or the run's JSON document: run.warnings)",)
    if info.source:
        files = info.source.get("files")
        what = (f"{files} file(s) in {info.source.get('path')}" if info.source.get("format") == "directory" else
                f"{info.source.get('name')} ({info.source.get('format')} output, sha256 "
                f"{info.source.get('sha256', '')[:16]}…)")
        notes = (f"imported from {what}", *notes)
    if naming.note():
        notes += (str(naming.note()),)
    if any(len(r.iops_values) > 1 for r in rows):
        notes += ("±CV: the repeats' sample standard deviation relative to the mean (coefficient of variation)",)
    if any(r.rounded for r in rows):
        notes += (ROUNDED_NOTE,)
    notes += tuple(f"failed: {r.target}/{r.workload} repeat {r.repeat + 1}: {(r.error or '').splitlines()[0]}"
                   for r in run.results if r.status == "failed")
    if any(r.partial for r in rows):
        notes += (f"partial: a host was lost; those repeats count for the hosts that reported, not for '{ALL_HOSTS}'",)
    notes += tuple(f"partial: {r.target}/{r.workload} repeat {r.repeat + 1}: {line}"
                   for r in run.results if r.status == "partial" for line in (r.error or "").splitlines())
    return notes


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
    """The JSON document of a run (schema ``iolab.run/1``); histogram bins are left out.

    A result of a remote target has ``summary`` over all hosts (of those that reported, when
    ``partial``), ``summary_by_host`` and, in ``extra.hosts``, each host's status, error, server
    and facts; its summary rows carry ``host`` (a label or ``"all hosts"``; null when local).
    """
    results = []
    for r in run.results:
        doc = _strip_bins(to_jsonable(r))
        doc.pop("report", None)
        report = r.report
        doc["fio_version"] = report.fio_version if report else None
        doc["jobs"] = _strip_bins(to_jsonable(list(report.jobs))) if report else []
        doc["disk_util"] = to_jsonable(list(report.disk_util)) if report else []
        doc["summary"] = {f"{job}/{direction}" if job != r.workload else direction: _strip_bins(to_jsonable(d))
                          for (job, direction), d in with_sync_rates(by_job(r.report)).items()}
        by_host: dict[str, dict[str, Any]] = {}
        for (host, job, direction), d in per_host(r).items():
            key = f"{job}/{direction}" if job != r.workload else direction
            by_host.setdefault(host, {})[key] = _strip_bins(to_jsonable(d))
        if by_host:
            doc["summary_by_host"] = by_host
        results.append(doc)
    rows = [{
        "target": row.target, "host": row.host, "workload": row.workload, "job": row.job,
        **({"pass": row.pass_index} if row.pass_index else {}),
        "direction": row.direction, "options": {k: v for k, v in row.options.items() if v is not None},
        "repeats": len(row.iops_values), "failed": row.failed, "partial": row.partial,
        "iops": _summary_json(row.iops, row.iops_values),
        "bw_bytes_s": _summary_json(row.bw, row.bw_values),
        **({"rounded": sorted(row.rounded)} if row.rounded else {}),
        "clat_mean_ns": _summary_json(row.clat_mean, row.clat_mean_values),
        "clat_p99_ns": _summary_json(row.clat_p99, row.clat_p99_values),
    } for row in result_rows(run)]
    return {"schema": SCHEMA, "run": to_jsonable(run.info), "summary": rows, "results": results}
