"""What ``Store.history`` reads: every ``ok`` result with its figures (``result_figures``: written with
the result, a few numbers per fio job and direction), or, where they are not stored or not enough, its
report decoded but not validated (``analyze.history`` reads thousands of them; ``Store.get_run`` would
take ten times as long); the change points found before (``ChangePointCache``); and the changes people
accepted as intended (``Acceptances``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..fio.merge import by_job, job_ios, latency_figure
from ..histogram import Histogram
from ..model import Accepted, DirectionStats, FioReport, JobResult, Latency, RunInfo, TargetFacts
from .codecs import utc
from .faults import Guard
from .records import UnreadableRun
from .rows import ROW_ERRORS, column, unreadable
from .schema import accepted_changes, change_points, result_figures, results, runs

#: The ``compare`` metrics ``Figures.jobs`` holds, in its order: IOPS, bandwidth (B/s), clat mean and
#: p99 (ns), as ``analyze.metrics.metric(name).value`` gives them of ``by_job(light_report(…))``.
FIGURES = ("iops", "bw", "clat_mean", "clat_p99")


@dataclass(frozen=True)
class Figures:
    """What history needs of one result's report, stored with it (``result_figures``): ``jobs`` one
    ``(fio job name, direction, values)`` per ``by_job`` entry, ``values`` those of ``FIGURES`` (None:
    not measured); ``ios`` the I/Os of every job (``job_ios``); ``fio_version`` the report's."""

    fio_version: str | None
    ios: int | None
    jobs: tuple[tuple[str, str, tuple[float | None, ...]], ...]

    def row(self, result_id: int) -> dict[str, Any]:
        """The ``result_figures`` row of result ``result_id``."""
        return {"result_id": result_id, "fio_version": self.fio_version, "ios": self.ios,
                "jobs": [[job, direction, *values] for job, direction, values in self.jobs]}


def figures_of(report: FioReport) -> Figures:
    """The figures of ``report`` (a ``light_report``, or a full one: the same figures, as the store
    keeps neither fio's rounded IOPS display nor single jobs' histograms for them)."""
    return Figures(report.fio_version, job_ios(report), tuple(
        (job, direction, (d.iops, d.bw_bytes_s, latency_figure(d, "clat", "mean"), latency_figure(d, "clat", "p99")))
        for (job, direction), d in by_job(report).items()))


@dataclass(frozen=True)
class HistoryResult:
    """A stored ``ok`` result as ``Store.history`` reads it: ``ended_at`` as in ``ResultRecord`` (for an
    import, the time fio's output gives), ``extra`` as stored, and ``report`` the stored JSON of its
    ``FioReport`` (``model.to_jsonable``'s form: field names as keys), decoded but not validated, or None
    when ``figures``, its stored figures, were read instead."""

    id: int
    run_id: int
    target: str
    workload: str
    job_text: str
    ended_at: datetime | None
    extra: Mapping[str, Any]
    target_facts: TargetFacts | None
    report: Mapping[str, Any] | None
    figures: Figures | None = None


@dataclass(frozen=True)
class History:
    """What ``Store.history`` found: the runs (ascending id) and their results; runs with a row that
    does not load are left out, each an ``UnreadableRun`` in ``unreadable``."""

    runs: tuple[RunInfo, ...]
    results: tuple[HistoryResult, ...]
    unreadable: tuple[UnreadableRun, ...] = ()


def query(run_ids: Sequence[int] | None, since: datetime | None, targets: Sequence[str],
          workloads: Sequence[str], figures: bool = False) -> sa.Select[Any]:
    """The ``ok`` results with a report, in run and plan order, narrowed as ``Store.history`` says;
    each with its report, or with ``figures`` its stored figures (NULLs where none are stored)."""
    if figures:
        data: tuple[Any, ...] = (result_figures.c.fio_version, result_figures.c.ios,
                                 sa.cast(result_figures.c.jobs, sa.Text))
    else:
        data = (sa.cast(results.c.report, sa.Text),)
    query = (sa.select(results.c.id, results.c.run_id, results.c.target, results.c.workload, results.c.job_text,
                       results.c.ended_at, sa.cast(results.c.extra, sa.Text),
                       sa.cast(results.c.target_facts, sa.Text), *data)
             .join(runs, runs.c.id == results.c.run_id)
             .where(results.c.status == "ok", results.c.report.is_not(None))
             .order_by(results.c.run_id, results.c.seq))
    if figures:
        query = query.outerjoin(result_figures, result_figures.c.result_id == results.c.id)
    if run_ids is not None:
        query = query.where(results.c.run_id.in_(list(run_ids)))
    if since is not None:
        query = query.where(sa.func.coalesce(results.c.ended_at, runs.c.created_at) >= since)
    if targets:
        query = query.where(results.c.target.in_(list(targets)))
    if workloads:  # a stored workload name, or a fio job name inside the job text (``[name]``)
        query = query.where(sa.or_(results.c.workload.in_(list(workloads)),
                                   *(results.c.job_text.contains(f"[{w}]", autoescape=True) for w in workloads)))
    return query


def results_of(conn: Connection, query: sa.Select[Any],
               figures: bool = False) -> tuple[list[HistoryResult], dict[int, UnreadableRun]]:
    """The rows of ``query`` (``query(…, figures)``) decoded, and the runs with a row that does not load,
    by id. With ``figures``, a result without stored figures is read with its report."""
    found: list[HistoryResult] = []
    facts: dict[str | None, TargetFacts | None] = {None: None}
    bad: dict[int, UnreadableRun] = {}
    rows = conn.execute(query).all()
    reports: dict[int, str] = {}
    if figures:
        missing = [row[0] for row in rows if row[-1] is None]
        for first in range(0, len(missing), 500):
            reports.update(conn.execute(sa.select(results.c.id, sa.cast(results.c.report, sa.Text))
                                        .where(results.c.id.in_(missing[first:first + 500]))).all())
    for rid, run_id, target, workload, job_text, ended_at, extra, target_facts, *data in rows:
        try:  # a JSON column given None holds JSON's null
            if target_facts not in facts:
                loaded = orjson.loads(target_facts)
                facts[target_facts] = column("target_facts", TargetFacts, loaded) if loaded else None
            stored = None
            if figures and data[-1] is not None:
                stored = Figures(data[0], data[1], tuple((job, direction, tuple(values))
                                                         for job, direction, *values in orjson.loads(data[-1])))
                decoded = None
            else:
                decoded = orjson.loads(reports[rid] if figures else data[0])
                if not decoded:
                    continue
            found.append(HistoryResult(rid, run_id, target, workload, job_text, utc(ended_at),
                                       orjson.loads(extra or "null") or {}, facts[target_facts], decoded, stored))
        except (*ROW_ERRORS, orjson.JSONDecodeError) as exc:
            bad.setdefault(run_id, unreadable(run_id, exc))
    return found, bad


def light_report(stored: Mapping[str, Any]) -> FioReport:
    """A stored report (``model.to_jsonable``'s form) as the ``FioReport`` ``by_job`` needs: jobs and
    their directions' totals and latencies, built directly rather than validated (the store validated
    it when it was written; ``Store.get_run`` validates again). Histograms are kept only for job
    names that occur more than once, the clones ``by_job`` merges: a single job's percentiles are
    fio's own. Raises ``KeyError``/``TypeError`` for a report not in that form."""
    jobs = stored["jobs"]
    names = [j["name"] for j in jobs]
    repeated = {n for n in names if names.count(n) > 1} if len(set(names)) < len(names) else set()
    return FioReport(source_format=stored["source_format"], fio_version=stored.get("fio_version"), jobs=tuple(
        JobResult(name=j["name"], index=j.get("index", 0), groupid=j.get("groupid", 0),
                  directions={d: _direction(s, j["name"] in repeated) for d, s in j["directions"].items()})
        for j in jobs))


def _direction(s: Mapping[str, Any], bins: bool) -> DirectionStats:
    return DirectionStats(direction=s["direction"], total_ios=s.get("total_ios"), io_bytes=s.get("io_bytes"),
                          runtime_ms=s.get("runtime_ms"), iops=s.get("iops"), bw_bytes_s=s.get("bw_bytes_s"),
                          slat=_latency(s.get("slat"), bins), clat=_latency(s.get("clat"), bins),
                          lat=_latency(s.get("lat"), bins))


def _latency(d: Mapping[str, Any] | None, bins: bool) -> Latency | None:
    if d is None:
        return None
    histogram = d.get("bins_ns") if bins else None
    return Latency(min_ns=d.get("min_ns"), max_ns=d.get("max_ns"), mean_ns=d.get("mean_ns"),
                   stddev_ns=d.get("stddev_ns"), samples=d.get("samples"), percentiles_ns=d.get("percentiles_ns") or {},
                   bins_ns=None if histogram is None else Histogram.from_text_keys(histogram) or Histogram(
                       {int(k): v for k, v in histogram.items()}))


class ChangePointCache:
    """Change points found before, by the key of the series they were found in
    (``analyze.changepoints.key``: its values and the detection's parameters), so that a history shown
    again does no detection. An entry is whatever JSON ``analyze.history`` stores for a series; an
    entry is never replaced (the key names its content). Writing is best effort: a database this
    process cannot write (read-only SQLite, a PostgreSQL role without the right) or a write that fails
    only means the detection runs again next time."""

    def __init__(self, engine: Engine, guard: Guard, writable: bool) -> None:
        self.engine, self.guard, self.writable = engine, guard, writable

    def get(self, keys: Sequence[str]) -> dict[str, Any]:
        """The stored entries of ``keys``, by key. Raises ``StoreError`` as every read does."""
        def read() -> dict[str, Any]:
            found: dict[str, Any] = {}
            with self.engine.connect() as conn:
                for first in range(0, len(keys), 500):
                    rows = conn.execute(sa.select(change_points.c.key, sa.cast(change_points.c.found, sa.Text))
                                        .where(change_points.c.key.in_(list(keys[first:first + 500]))))
                    found.update((key, orjson.loads(text)) for key, text in rows)
            return found
        return self.guard.call("read the change points found before", read) if keys else {}

    def put(self, entries: Mapping[str, Any]) -> None:
        """Store ``entries`` (key -> JSON-able), keeping an entry another process stored first."""
        if not entries or not self.writable:
            return
        from sqlalchemy.dialects import postgresql, sqlite

        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        rows = [{"key": key, "found": found} for key, found in entries.items()]
        try:
            with self.engine.begin() as conn:
                conn.execute(dialect.insert(change_points).on_conflict_do_nothing(), rows)
        except sa.exc.SQLAlchemyError:
            pass  # best effort (see the class docstring): the entries are found again next time


class Acceptances:
    """The changes accepted as intended (``iolab accept``), by run id: the gate judges a run's series against
    their new level from such a run on (``analyze.gate``)."""

    def __init__(self, engine: Engine, guard: Guard) -> None:
        self.engine, self.guard = engine, guard

    def all(self) -> dict[int, Accepted]:
        """Every accepted change, by run id. Raises ``StoreError`` as every read does."""
        def read() -> dict[int, Accepted]:
            with self.engine.connect() as conn:
                rows = conn.execute(sa.select(accepted_changes).order_by(accepted_changes.c.run_id)).mappings()
                return {r["run_id"]: _accepted(r) for r in rows}
        return self.guard.call("read the accepted changes", read)

    def accept(self, accepted: Accepted) -> Accepted | None:
        """Store ``accepted``; returns the acceptance it replaced (the same run accepted before), or None.
        Raises ``StoreError`` as every write does."""
        def write() -> Accepted | None:
            with self.engine.begin() as conn:
                old = conn.execute(sa.select(accepted_changes).where(
                    accepted_changes.c.run_id == accepted.run_id)).mappings().first()
                conn.execute(sa.delete(accepted_changes).where(accepted_changes.c.run_id == accepted.run_id))
                conn.execute(sa.insert(accepted_changes).values(
                    run_id=accepted.run_id, reason=accepted.reason, accepted_at=accepted.at,
                    accepted_by=accepted.by))
            return None if old is None else _accepted(old)
        return self.guard.call("store the accepted change", write)


def _accepted(row: sa.RowMapping) -> Accepted:
    at = utc(row["accepted_at"])
    assert at is not None  # the column is NOT NULL
    return Accepted(row["run_id"], row["reason"], at, row["accepted_by"])
