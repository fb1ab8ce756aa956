"""Captures: the block trace of a capture result, compact (``capture.trace.encode``).

One row per capture result; ``meta`` holds the task names by pid, the kernel's lost-event count
and the capture's duration.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "traces",
        sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("requests", sa.Integer, nullable=False),
        sa.Column("meta", sa.JSON, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("traces")
