"""Time series: fio's per-second IOPS, bandwidth and latency logs of each result.

One row per result × fio job (thread) × direction × metric; ``points`` is a JSON array of
``[t_ms, value]`` pairs.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "time_series",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("job", sa.String(300), nullable=False),
        sa.Column("job_index", sa.Integer, nullable=False),
        sa.Column("hostname", sa.String(300)),
        sa.Column("direction", sa.String(10), nullable=False),
        sa.Column("metric", sa.String(20), nullable=False),
        sa.Column("interval_ms", sa.Integer),
        sa.Column("points", sa.JSON, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("time_series")
