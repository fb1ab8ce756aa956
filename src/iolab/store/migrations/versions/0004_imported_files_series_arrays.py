"""Imported files as their own table; time series as compact arrays.

* ``imported_files``: one row per fio output file an import stored (its sha256, the run holding its
  results, where it was read). A directory of a sweep is one run of many files, so the checksum that
  refuses a second import of the same file moves from ``runs.source_sha256`` (one file per run) to
  this table, which takes over its rows.
* ``time_series.samples`` replaces the JSON ``points`` (``[[t_ms, value], …]``, about 20 bytes a
  sample): the times and values as little-endian arrays, zlib-compressed (format 1 of
  ``store.encode_series``: a 6-byte header ``<BBI`` = format 1, flags (bit 0: values are integers),
  sample count; then int64 time deltas (the first from 0) and the values, int64 deltas when integral,
  else float64). This migration writes format 1 itself, so that it stays what it is if the store's
  encoder changes.

Revision ID: 0004
Revises: 0003
"""

import json
import struct
import zlib

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _encode(points: list[list[float]]) -> bytes:
    times = [int(p[0]) for p in points]
    values = [float(p[1]) for p in points]
    integral = all(v.is_integer() and abs(v) < 2 ** 53 for v in values)
    t_deltas = [b - a for a, b in zip([0, *times], times, strict=False)]
    if integral:
        ints = [int(v) for v in values]
        v_deltas = [b - a for a, b in zip([0, *ints], ints, strict=False)]
        body = struct.pack(f"<{len(times)}q{len(ints)}q", *t_deltas, *v_deltas)
    else:
        body = struct.pack(f"<{len(times)}q{len(values)}d", *t_deltas, *values)
    return zlib.compress(struct.pack("<BBI", 1, int(integral), len(times)) + body, 1)


def upgrade() -> None:
    files = op.create_table(
        "imported_files",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("format", sa.String(20)),
        sa.Column("size_bytes", sa.BigInteger),
    )
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, source_sha256, source FROM runs WHERE source_sha256 IS NOT NULL"))
    moved = []
    for run_id, sha256, source in rows:
        source = json.loads(source) if isinstance(source, str) else (source or {})
        size = source.get("size_bytes")
        moved.append({"sha256": sha256, "run_id": run_id, "path": source.get("path") or source.get("name") or "",
                      "format": source.get("format"), "size_bytes": int(size) if size else None})
    if moved:
        op.bulk_insert(files, moved)
    op.drop_index("ix_runs_source_sha256", table_name="runs")
    # Not a batch (copy, drop, rename) on SQLite: dropping the old runs table would cascade to every
    # table that refers to it. SQLite drops a column in place since 3.35 (2021).
    conn.exec_driver_sql("ALTER TABLE runs DROP COLUMN source_sha256")

    op.add_column("time_series", sa.Column("samples", sa.LargeBinary))
    series = sa.table("time_series", sa.column("id", sa.Integer), sa.column("points", sa.JSON),
                      sa.column("samples", sa.LargeBinary))
    for row_id, points in conn.execute(sa.select(series.c.id, series.c.points)).all():
        points = json.loads(points) if isinstance(points, str) else (points or [])
        conn.execute(series.update().where(series.c.id == row_id).values(samples=_encode(points)))
    with op.batch_alter_table("time_series") as batch:  # no table refers to this one: a copy is safe
        batch.drop_column("points")
        batch.alter_column("samples", existing_type=sa.LargeBinary, nullable=False)


def downgrade() -> None:
    raise NotImplementedError("iolab does not downgrade a results database; restore a copy made before upgrading")
