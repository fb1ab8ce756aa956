"""The figures history stores with each result (``result_figures``), read back and computed anew, and a
database taken back to the schema before them (migration 0006), for the tests of history's figures."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from iolab.analyze.metrics import metric
from iolab.fio.merge import by_job, job_ios
from iolab.store import history as stored_history
from iolab.store import schema
from iolab.store.database import Store


def expected(report_json: dict[str, Any]) -> dict[str, Any]:
    """The figures history computes from a stored report: ``by_job`` of its light form, each metric as
    ``compare`` defines it."""
    light = stored_history.light_report(report_json)
    return {"fio_version": light.fio_version, "ios": job_ios(light),
            "jobs": [[job, direction, *(metric(name).value(d) for name in stored_history.FIGURES)]
                     for (job, direction), d in by_job(light).items()]}


def stored_figures(store: Store) -> dict[int, dict[str, Any]]:
    """Every ``result_figures`` row, by result id."""
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(schema.result_figures)).mappings().all()
    return {r["result_id"]: {"fio_version": r["fio_version"], "ios": r["ios"], "jobs": r["jobs"]} for r in rows}


def reports(store: Store) -> dict[int, dict[str, Any]]:
    """The stored report of every ok result, by result id."""
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(schema.results.c.id, schema.results.c.report)
                            .where(schema.results.c.status == "ok", schema.results.c.report.is_not(None))).all()
    return {rid: report for rid, report in rows}


def downgraded_to_0006(store: Store) -> None:
    """The store's database taken back to migration 0006: no figures, no change points."""
    with store.engine.begin() as conn:
        config = Config()
        config.set_main_option("script_location", str(schema.MIGRATIONS))
        config.attributes["connection"] = conn
        command.downgrade(config, "0006")
        assert not sa.inspect(conn).has_table("result_figures")
