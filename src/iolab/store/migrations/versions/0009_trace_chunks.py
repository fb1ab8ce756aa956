"""Captures of any length: a trace stored as chunks of requests, each a blob of its own
(``workflows.capture.trace.encode`` of 262,144 requests), so that neither writing nor
reading a trace holds all of it, and no blob nears SQLite's 1 GB limit (an hour at 50,000
requests a second is about 1 GB encoded). ``traces.data`` is empty for a trace stored so; traces
stored before keep their one blob there.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "trace_chunks",
        sa.Column("result_id", sa.Integer, sa.ForeignKey("traces.result_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("requests", sa.Integer, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("trace_chunks")
