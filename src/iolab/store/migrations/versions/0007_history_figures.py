"""History's figures: what ``iolab history`` reads of each result, and the change points it found.

* ``result_figures``: one row per ``ok`` result with a report, written with the result
  (``store.history.Figures``): for each fio job and direction (``fio.merge.by_job``) its IOPS,
  bandwidth (B/s), clat mean and p99 (ns), the result's I/O count and the report's fio version.
  History reads these instead of decoding every stored report. This migration fills it for the
  results already stored, from their reports as history read them (``store.history.light_report``);
  a report that does not load gets no row, and history reads it (and says it is unreadable) as before.
* ``change_points``: what the change-point detection found in a series, by a key of the series'
  values and the detection's parameters, so that a history shown again does no detection.

Revision ID: 0007
Revises: 0006
"""

import json

import sqlalchemy as sa
from alembic import op

from iolab.store.history import figures_of, light_report

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

#: Results read and written at a time while filling ``result_figures``.
BATCH = 500


def upgrade() -> None:
    figures = op.create_table(
        "result_figures",
        sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("fio_version", sa.String(40)),
        sa.Column("ios", sa.BigInteger),
        sa.Column("jobs", sa.JSON, nullable=False),
    )
    op.create_table(
        "change_points",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("found", sa.JSON, nullable=False),
    )
    conn = op.get_bind()
    results = sa.table("results", sa.column("id", sa.Integer), sa.column("status", sa.String),
                       sa.column("report", sa.JSON))
    ids = conn.execute(sa.select(results.c.id).where(results.c.status == "ok", results.c.report.is_not(None))
                       .order_by(results.c.id)).scalars().all()
    for first in range(0, len(ids), BATCH):
        rows = []
        for result_id, text in conn.execute(sa.select(results.c.id, sa.cast(results.c.report, sa.Text))
                                            .where(results.c.id.in_(ids[first:first + BATCH]))):
            try:
                report = json.loads(text)
                if report:
                    rows.append(figures_of(light_report(report)).row(result_id))
            except (KeyError, TypeError, ValueError, AttributeError):
                continue  # left to history, which reads the report and names the run unreadable
        if rows:
            op.bulk_insert(figures, rows)


def downgrade() -> None:
    op.drop_table("change_points")
    op.drop_table("result_figures")
