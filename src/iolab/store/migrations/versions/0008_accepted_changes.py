"""Accepted changes: a run whose change someone accepted as intended (``iolab accept RUN --reason TEXT``), the
reason, when and by whom. The gate judges the run's series against their new level from it on.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "accepted_changes",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("accepted_by", sa.String(200), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("accepted_changes")
