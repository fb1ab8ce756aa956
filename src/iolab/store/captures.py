"""A capture's trace in the database: a row of ``traces`` (the request count and the meta: task
names, lost events, duration) and its requests as blobs in ``trace_chunks``, a chunk of requests
each (``workflows.capture.trace.encode_chunks``), so that a trace of any length is written and read
in the memory of a chunk. Traces stored before chunks keep their one blob in ``traces.data``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .schema import trace_chunks, traces


def insert(conn: Connection, result_id: int, requests: int, meta: Mapping[str, Any],
           chunks: Iterable[tuple[int, bytes | bytearray]]) -> None:
    """Store a trace of ``requests`` requests as ``chunks``, ``(requests, blob)`` pairs in order, each
    taken from the iterable as it is written."""
    conn.execute(traces.insert().values(result_id=result_id, requests=requests, meta=dict(meta), data=b""))
    for seq, (count, blob) in enumerate(chunks):
        conn.execute(trace_chunks.insert().values(result_id=result_id, seq=seq, requests=count, data=bytes(blob)))


def blobs(engine: Engine, result_id: int) -> tuple[Mapping[str, Any], Iterator[bytes]] | None:
    """The trace's meta and its blobs in order, each read when the iterator reaches it; None when
    the result has no trace."""
    with engine.connect() as conn:
        row = conn.execute(sa.select(traces.c.meta, sa.func.length(traces.c.data).label("size"))
                           .where(traces.c.result_id == result_id)).mappings().first()
    if row is None:
        return None

    def each() -> Iterator[bytes]:
        with engine.connect() as conn:
            if row["size"]:
                yield conn.execute(sa.select(traces.c.data).where(traces.c.result_id == result_id)).scalar_one()
                return
            seqs = conn.execute(sa.select(trace_chunks.c.seq).where(trace_chunks.c.result_id == result_id)
                                .order_by(trace_chunks.c.seq)).scalars().all()
            for seq in seqs:
                yield conn.execute(sa.select(trace_chunks.c.data).where(
                    trace_chunks.c.result_id == result_id, trace_chunks.c.seq == seq)).scalar_one()
    return row["meta"], each()
