"""Observers: node_exporter samples of every host observed while a result's job ran.

One row per result × host; ``samples`` is the JSON of ``model.HostSamples`` (scrape times, then
one array of values per series, so a series' name and labels are stored once).

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "host_samples",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("host", sa.String(300), nullable=False),
        sa.Column("samples", sa.JSON, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("host_samples")
