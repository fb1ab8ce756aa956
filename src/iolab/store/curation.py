"""Curating stored runs: a new label, tags set or removed, runs deleted (``iolab label``, ``tag``, ``delete``).

A run is deleted with everything that is its own, by the schema's ``ON DELETE CASCADE``: its results
with their reports, fio's logs (``time_series``), the observers' samples, traces, history figures, the
import's file checksums (so the same file can be imported again), tags and an accepted change. Nothing
another run holds goes with it: change points history found are kept by the series' hash and found
anew for the series as they are now. A run in progress is refused: its process still writes to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import UsageError
from ..facts.owner import effective_status
from .codecs import utc
from .schema import host_samples, results, run_tags, runs, time_series, traces


@dataclass(frozen=True)
class Deleted:
    """A run deleted: its id, label and creation time (to find its spool, ``run.spool``), and how many
    results, fio logs (series), observers' samples (one per host and result) and traces went with it."""

    run_id: int
    label: str | None
    created_at: datetime
    results: int
    logs: int
    samples: int
    traces: int


def relabel(conn: Connection, run_ids: Sequence[int], label: str | None) -> None:
    """Give the runs ``label`` (None: no label)."""
    conn.execute(runs.update().where(runs.c.id.in_(run_ids)).values(label=label))


def retag(conn: Connection, run_ids: Sequence[int], tags: Mapping[str, str], remove: Sequence[str]) -> None:
    """Set ``tags`` on the runs (a key they have takes the new value) and remove the keys ``remove``.
    Raises ``UsageError`` for a key to remove that none of them has (a typo would otherwise pass silently)."""
    held = set(conn.execute(sa.select(run_tags.c.key).where(run_tags.c.run_id.in_(run_ids))).scalars())
    missing = [k for k in remove if k not in held]
    if missing:
        raise UsageError(f"no run of {_ids(run_ids)} has the tag {', '.join(map(repr, missing))}",
                         hint=f"its tags: {', '.join(sorted(held)) or 'none'} (iolab runs lists them)")
    keys = [*tags, *remove]
    conn.execute(run_tags.delete().where(run_tags.c.run_id.in_(run_ids), run_tags.c.key.in_(keys)))
    rows = [{"run_id": i, "key": k, "value": v} for i in run_ids for k, v in tags.items()]
    if rows:
        conn.execute(run_tags.insert(), rows)


def delete(conn: Connection, run_ids: Sequence[int]) -> list[Deleted]:
    """Delete the runs with what is theirs (see the module); returns what went, in ``run_ids``' order.
    Raises ``UsageError``, deleting none, when one of them is in progress."""
    rows = {r["id"]: r for r in conn.execute(sa.select(runs).where(runs.c.id.in_(run_ids))).mappings()}
    running = [i for i in run_ids if effective_status(rows[i]["status"], rows[i]["options"]) == "running"]
    if running:
        raise UsageError(f"run {_ids(running)} is in progress; nothing was deleted",
                         hint="wait for it to end or stop it (Ctrl-C); a run whose process is gone shows as "
                              "interrupted and can be deleted")
    deleted = [Deleted(i, rows[i]["label"], utc(rows[i]["created_at"]),  # type: ignore[arg-type]
                       *_counts(conn, i)) for i in run_ids]
    conn.execute(runs.delete().where(runs.c.id.in_(run_ids)))
    return deleted


def _counts(conn: Connection, run_id: int) -> tuple[int, int, int, int]:
    ids = sa.select(results.c.id).where(results.c.run_id == run_id).scalar_subquery()
    count = sa.func.count()
    return (
        int(conn.execute(sa.select(count).select_from(results).where(results.c.run_id == run_id)).scalar_one()),
        int(conn.execute(sa.select(count).select_from(time_series).where(time_series.c.result_id.in_(ids)))
            .scalar_one()),
        int(conn.execute(sa.select(count).select_from(host_samples).where(host_samples.c.result_id.in_(ids)))
            .scalar_one()),
        int(conn.execute(sa.select(count).select_from(traces).where(traces.c.result_id.in_(ids))).scalar_one()),
    )


def _ids(run_ids: Sequence[int]) -> str:
    return ", ".join(map(str, run_ids))
