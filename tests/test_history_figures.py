"""What history reads at scale: the figures stored with each result (``result_figures``, written with the
result and filled on upgrade by migration 0007) and the change points kept between calls
(``change_points``). Real fio outputs, the real command, real SQLite (and PostgreSQL for the upgrade
when its server is installed)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

import historydata
import pg
from clirun import iolab
from iolab.analyze.metrics import metric
from iolab.describe.suite import load_yaml
from iolab.errors import ParseError
from iolab.fio import parse_output
from iolab.fio.merge import by_job, job_ios
from iolab.run import pipeline
from iolab.run.plan import RunOptions
from iolab.store import history as stored_history
from iolab.store import schema
from iolab.store.database import Store
from paths import FIO as DATA

T0 = 1_780_000_000


def expected(report_json: dict) -> dict:
    """The figures history computes from a stored report: ``by_job`` of its light form, each metric as
    ``compare`` defines it."""
    light = stored_history.light_report(report_json)
    return {"fio_version": light.fio_version, "ios": job_ios(light),
            "jobs": [[job, direction, *(metric(name).value(d) for name in stored_history.FIGURES)]
                     for (job, direction), d in by_job(light).items()]}


def stored_figures(store: Store) -> dict[int, dict]:
    """Every ``result_figures`` row, by result id."""
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(schema.result_figures)).mappings().all()
    return {r["result_id"]: {"fio_version": r["fio_version"], "ios": r["ios"], "jobs": r["jobs"]} for r in rows}


def reports(store: Store) -> dict[int, dict]:
    """The stored report of every ok result, by result id."""
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(schema.results.c.id, schema.results.c.report)
                            .where(schema.results.c.status == "ok", schema.results.c.report.is_not(None))).all()
    return {rid: report for rid, report in rows}


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    """Every sample fio output that parses, imported with the real command (one run each)."""
    paths = []
    for path in sorted(DATA.glob("fio-*")):
        try:
            parse_output(path.read_text(errors="replace"), path.name)
        except ParseError:
            continue
        paths.append(path)
    db = tmp_path_factory.mktemp("samples") / "s.db"
    done = iolab("import", *map(str, paths), db=db)
    assert done.returncode == 0, done.stderr
    return db


def test_imported_results_store_the_figures_their_reports_give(samples):
    store = Store(f"sqlite:///{samples}")
    found, stored = stored_figures(store), reports(store)
    assert len(stored) >= 15 and found.keys() == stored.keys()
    for rid, report in stored.items():
        assert found[rid] == expected(report), rid
    store.close()


def test_a_run_stores_the_figures_of_its_result(tmp_path):
    suite = load_yaml(f"name: s\ntargets:\n  t: {{path: {tmp_path}/f, size: 1m}}\n"
                      "workloads:\n  - {rw: randrw, bs: 4k, ioengine: psync, runtime: 1, time_based: 1}\n", "s.yaml")
    run = pipeline.run(lambda: Store(f"sqlite:///{tmp_path}/t.db"), suite, RunOptions(), label="figures")
    store = Store(f"sqlite:///{tmp_path}/t.db")
    ((rid, report),) = reports(store).items()
    figures = stored_figures(store)[rid]
    assert figures == expected(report) and [row[1] for row in figures["jobs"]] == ["read", "write"]
    assert figures["ios"] == job_ios(run.results[0].report) > 0
    store.save_result(rid, status="failed", error="again")  # a result that ends otherwise has none
    assert stored_figures(store) == {}
    store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_an_older_database_gets_the_figures_of_its_results_on_upgrade(tmp_path, backend, base):
    if backend == "postgresql" and not pg.pg_bin():
        pytest.skip("PostgreSQL server binaries are not installed (Debian package postgresql)")
    server = pg.start() if backend == "postgresql" else None
    try:
        url = server.url if server else f"sqlite:///{tmp_path}/old.db"
        paths = historydata.write_runs(tmp_path / "out", [historydata.output(
            base, {"a": (1.0, {}), "b": (0.5, {"iodepth": "4"})}, T0 + i * 86_400) for i in range(3)])
        done = iolab("import", *map(str, paths), db=tmp_path / "unused.db", env={"IOLAB_DB": url})
        assert done.returncode == 0, done.stderr
        store = Store(url)
        written = stored_figures(store)
        assert len(written) == 3 and all(len(f["jobs"]) == 2 for f in written.values())
        with store.engine.begin() as conn:  # back to 0006: no figures, no change points
            config = Config()
            config.set_main_option("script_location", str(schema.MIGRATIONS))
            config.attributes["connection"] = conn
            command.downgrade(config, "0006")
            assert not sa.inspect(conn).has_table("result_figures")
        store.close()
        upgraded = Store(url)
        assert stored_figures(upgraded) == written
        upgraded.close()
    finally:
        if server:
            server.stop()


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict:
    return historydata.real_output(tmp_path_factory.mktemp("fio"))


@pytest.fixture()
def nightly(base, tmp_path) -> Path:
    """30 outputs a day apart, imported: ``steady`` and ``slows`` (20 % fewer I/Os from run 15)."""
    docs = [historydata.output(base, {"steady": (1 + 0.02 * (i % 3), {}),
                                      "slows": ((1 + 0.02 * (i % 3)) * (0.8 if i >= 15 else 1), {})}, T0 + i * 86_400)
            for i in range(30)]
    done = iolab("import", *map(str, historydata.write_runs(tmp_path / "out", docs)), db=tmp_path / "h.db")
    assert done.returncode == 0, done.stderr
    return tmp_path / "h.db"


@pytest.mark.parametrize("fmt", ["json", "csv", "markdown"])
def test_history_from_the_figures_is_history_from_the_reports(nightly, fmt):
    from_figures = iolab("history", "--format", fmt, db=nightly)
    assert from_figures.returncode == 0, from_figures.stderr
    with sqlite3.connect(nightly) as conn:  # as a database whose figures were never written
        conn.execute("DELETE FROM result_figures")
        conn.execute("DELETE FROM change_points")
    from_reports = iolab("history", "--format", fmt, db=nightly)
    assert from_reports.returncode == 0, from_reports.stderr
    assert from_figures.stdout == from_reports.stdout
    if fmt == "json":
        (slows,) = [s for s in json.loads(from_figures.stdout)["series"]
                    if s["workload"] == "slows" and s["metric"] == "iops"]
        assert len(slows["change_points"]) == 1


#: ``iolab history`` with the change-point detection replaced by a failure: it succeeds only when no
#: series needs detecting; then says which of the detection's libraries it imported.
NO_DETECTION = textwrap.dedent("""
    import sys
    from iolab.analyze import changepoints

    def refuse(*args, **kwargs):
        raise RuntimeError("the detection ran")

    changepoints.detect = refuse
    from iolab.cli import main
    sys.argv = ["iolab", "history", "--format", "json"]
    try:
        main()
    finally:
        print(sorted(m for m in ("numpy", "scipy", "ruptures") if m in sys.modules), file=sys.stderr)
""")


def no_detection(db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", NO_DETECTION], env={**os.environ, "IOLAB_DB": str(db)},
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_history_shown_again_runs_no_detection_until_its_data_change(nightly, base, tmp_path):
    first = iolab("history", "--format", "json", db=nightly)
    assert first.returncode == 0, first.stderr
    with sqlite3.connect(nightly) as conn:
        kept = conn.execute("SELECT count(*) FROM change_points").fetchone()[0]
    assert kept == len(json.loads(first.stdout)["series"])  # every series' content differs
    again = no_detection(nightly)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == first.stdout.strip()  # the same change points, segments and p-values
    assert again.stderr.strip().splitlines()[-1] == "[]"  # neither numpy, scipy nor ruptures imported
    (path,) = historydata.write_runs(tmp_path / "more", [historydata.output(base, {"steady": (1.0, {})},
                                                                             T0 + 40 * 86_400)])
    assert iolab("import", str(path), db=nightly).returncode == 0
    changed = no_detection(nightly)  # steady has a new point: its series are detected again
    assert changed.returncode != 0 and "the detection ran" in changed.stderr
