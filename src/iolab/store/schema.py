"""The results database's tables (SQLAlchemy Core), as the Alembic migrations (``store/migrations``)
create them; a test holds the two equal. ``head_revision`` is the newest migration.
"""

from __future__ import annotations

from importlib import resources

import sqlalchemy as sa
from sqlalchemy.engine import Connection

metadata = sa.MetaData()

runs = sa.Table(
    "runs", metadata,
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

#: Every fio output file an import stored, by checksum: the same file is never stored twice.
imported_files = sa.Table(
    "imported_files", metadata,
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("format", sa.String(20)),
    sa.Column("size_bytes", sa.BigInteger),
)

run_tags = sa.Table(
    "run_tags", metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("value", sa.String(500), nullable=False),
)

results = sa.Table(
    "results", metadata,
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

time_series = sa.Table(
    "time_series", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("job", sa.String(300), nullable=False),
    sa.Column("job_index", sa.Integer, nullable=False),
    sa.Column("hostname", sa.String(300)),
    sa.Column("direction", sa.String(10), nullable=False),
    sa.Column("metric", sa.String(20), nullable=False),
    sa.Column("interval_ms", sa.Integer),
    sa.Column("samples", sa.LargeBinary, nullable=False),  # encode_series
)

host_samples = sa.Table(
    "host_samples", metadata,  # observers' node_exporter samples (0005_host_samples)
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("host", sa.String(300), nullable=False),
    sa.Column("samples", sa.JSON, nullable=False),
)

traces = sa.Table(
    "traces", metadata,  # captures' block traces (0006_traces; written by capture.record)
    sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("requests", sa.Integer, nullable=False),
    sa.Column("meta", sa.JSON, nullable=False),  # comms, lost_events, duration_ns
    sa.Column("data", sa.LargeBinary, nullable=False),  # capture.trace.encode; empty when stored in chunks
)

#: A trace stored a chunk of requests at a time (0009_trace_chunks), each chunk's own
#: ``capture.trace.encode`` blob, in ``seq`` order.
trace_chunks = sa.Table(
    "trace_chunks", metadata,
    sa.Column("result_id", sa.Integer, sa.ForeignKey("traces.result_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("requests", sa.Integer, nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
)

#: What history reads of an ``ok`` result with a report, written with it (0007_history_figures;
#: ``store.history.Figures``): ``jobs`` is ``[[fio job, direction, iops, bw_bytes_s, clat_mean_ns,
#: clat_p99_ns], …]``, one per ``fio.merge.by_job`` entry, null where fio did not measure.
result_figures = sa.Table(
    "result_figures", metadata,
    sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("fio_version", sa.String(40)),
    sa.Column("ios", sa.BigInteger),
    sa.Column("jobs", sa.JSON, nullable=False),
)

#: Change points history found, by the sha256 of the series and the detection's parameters
#: (0007_history_figures; ``store.history.ChangePointCache``).
change_points = sa.Table(
    "change_points", metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("found", sa.JSON, nullable=False),
)

#: Changes people accepted as intended (``iolab accept``; 0008_accepted_changes): the gate judges a run's series
#: against their new level from that run on (``analyze.gate``).
accepted_changes = sa.Table(
    "accepted_changes", metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("accepted_by", sa.String(200), nullable=False),
)

MIGRATIONS = resources.files("iolab.store") / "migrations"


def head_revision() -> str:
    """The newest schema revision: migrations are ``versions/NNNN_name.py`` with ``revision =
    "NNNN"``, one after another (a test holds this against Alembic's own head)."""
    return max(p.name.split("_", 1)[0] for p in (MIGRATIONS / "versions").iterdir()
               if p.name.endswith(".py") and p.name[:4].isdigit())

#: Alembic's own bookkeeping table (``alembic.runtime.migration``), outside ``metadata``: written here
#: only when a new database is stamped.
alembic_version = sa.Table("alembic_version", sa.MetaData(),
                            sa.Column("version_num", sa.String(32), nullable=False),
                            sa.PrimaryKeyConstraint("version_num", name="alembic_version_pkc"))


def stored_revision(conn: Connection) -> str | None:
    """The revision in ``alembic_version``; None for a new database (no such table)."""
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
