"""The first schema: runs, their tags, and one row per fio invocation (result).

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("origin", sa.String(20), nullable=False),
        sa.Column("suite_name", sa.String(200), nullable=False),
        sa.Column("suite_text", sa.Text, nullable=False, server_default=""),
        sa.Column("label", sa.String(200), index=True),
        sa.Column("fio_version", sa.String(40)),
        sa.Column("host", sa.JSON),
        sa.Column("warnings", sa.JSON),
        sa.Column("source", sa.JSON),
        sa.Column("options", sa.JSON),
    )
    op.create_table(
        "run_tags",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("value", sa.String(500), nullable=False),
    )
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("target", sa.String(200), nullable=False),
        sa.Column("target_path", sa.Text),
        sa.Column("workload", sa.String(300), nullable=False),
        sa.Column("repeat", sa.Integer, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("job_text", sa.Text, nullable=False),
        sa.Column("job_hash", sa.String(64), nullable=False, index=True),
        sa.Column("params", sa.JSON),
        sa.Column("command", sa.Text),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("ended_at", sa.DateTime(timezone=True)),
        sa.Column("error", sa.Text),
        sa.Column("report", sa.JSON),
        sa.Column("raw_gz", sa.LargeBinary),
        sa.Column("target_facts", sa.JSON),
        sa.Column("extra", sa.JSON),
        sa.UniqueConstraint("run_id", "seq", name="uq_results_run_seq"),
    )


def downgrade() -> None:
    op.drop_table("results")
    op.drop_table("run_tags")
    op.drop_table("runs")
