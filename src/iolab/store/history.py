"""What ``Store.history`` reads: every ``ok`` result with its report, decoded but not validated
(``analyze.history`` reads thousands of them; ``Store.get_run`` would take ten times as long)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..model import RunInfo, TargetFacts
from .codecs import utc
from .records import ROW_ERRORS, UnreadableRun, column, unreadable
from .schema import results, runs


@dataclass(frozen=True)
class HistoryResult:
    """A stored ``ok`` result as ``Store.history`` reads it: ``ended_at`` as in ``ResultRecord`` (for an
    import, the time fio's output gives), ``extra`` as stored, and ``report`` the stored JSON of its
    ``FioReport`` (``model.to_jsonable``'s form: field names as keys), decoded but not validated."""

    id: int
    run_id: int
    target: str
    workload: str
    job_text: str
    ended_at: datetime | None
    extra: Mapping[str, Any]
    target_facts: TargetFacts | None
    report: Mapping[str, Any]


@dataclass(frozen=True)
class History:
    """What ``Store.history`` found: the runs (ascending id) and their results; runs with a row that
    does not load are left out, each an ``UnreadableRun`` in ``unreadable``."""

    runs: tuple[RunInfo, ...]
    results: tuple[HistoryResult, ...]
    unreadable: tuple[UnreadableRun, ...] = ()


def query(run_ids: Sequence[int] | None, since: datetime | None, targets: Sequence[str],
          workloads: Sequence[str]) -> sa.Select[Any]:
    """The ``ok`` results with a report, in run and plan order, narrowed as ``Store.history`` says."""
    query = (sa.select(results.c.id, results.c.run_id, results.c.target, results.c.workload, results.c.job_text,
                       results.c.ended_at, sa.cast(results.c.extra, sa.Text),
                       sa.cast(results.c.target_facts, sa.Text), sa.cast(results.c.report, sa.Text))
             .join(runs, runs.c.id == results.c.run_id)
             .where(results.c.status == "ok", results.c.report.is_not(None))
             .order_by(results.c.run_id, results.c.seq))
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


def results_of(conn: Connection, query: sa.Select[Any]) -> tuple[list[HistoryResult], dict[int, UnreadableRun]]:
    """The rows of ``query`` decoded, and the runs with a row that does not load, by id."""
    found: list[HistoryResult] = []
    facts: dict[str | None, TargetFacts | None] = {None: None}
    bad: dict[int, UnreadableRun] = {}
    for rid, run_id, target, workload, job_text, ended_at, extra, target_facts, report in conn.execute(query):
        try:  # a JSON column given None holds JSON's null
            if target_facts not in facts:
                data = orjson.loads(target_facts)
                facts[target_facts] = column("target_facts", TargetFacts, data) if data else None
            decoded = orjson.loads(report)
            if decoded:
                found.append(HistoryResult(rid, run_id, target, workload, job_text, utc(ended_at),
                                           orjson.loads(extra or "null") or {}, facts[target_facts],
                                           decoded))
        except (*ROW_ERRORS, orjson.JSONDecodeError) as exc:
            bad.setdefault(run_id, unreadable(run_id, exc))
    return found, bad
