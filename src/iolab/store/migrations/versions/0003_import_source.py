"""Imported runs: the checksum of the fio output file, so the same file is not imported twice.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("source_sha256", sa.String(64)))
    op.create_index("ix_runs_source_sha256", "runs", ["source_sha256"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_runs_source_sha256", table_name="runs")
    with op.batch_alter_table("runs") as batch:  # SQLite cannot drop a column in place
        batch.drop_column("source_sha256")
