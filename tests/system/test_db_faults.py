"""A finished result is never lost to a PostgreSQL results database (issue 24): the run's server restarted
or stopped mid-run, and a read-only database refused before fio runs yet still read. Real fio, the CLI in
a subprocess, the test run's PostgreSQL server (``conftest.pg_server``, left running) with a database of
the test's own. (SQLite's faults: ``tests/cli`` and ``tests/integration``'s ``test_db_faults.py``.)

Each fault test counts, once the run is done, the results lost (planned jobs without a stored ``ok``
result) and duplicated (result rows or fio log series stored twice) and asserts 0 of each; and that no job
started while the database was away.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from clirun import iolab, popen, wait_for
from faultedruns import Logged, errors, lost_and_duplicated, ok_results, started_between, state_env, suite
from iolab.store.database import Store

pytestmark = pytest.mark.postgres


def test_postgresql_restarted_mid_run(tmp_path, pg_server, postgres_url):
    url = postgres_url
    proc = popen("run", str(suite(tmp_path)), "--no-observe", db=tmp_path / "unused", cwd=tmp_path,
                 env={**state_env(tmp_path), "IOLAB_DB": url})
    try:
        wait_for(lambda: ok_results(url) >= 1, 60)
        pg_server.restart()  # back when it returns
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert lost_and_duplicated(url) == (0, 0)


def test_postgresql_stopped_until_the_run_waits_for_it(tmp_path, pg_server, postgres_url):
    url = postgres_url
    run = Logged("run", str(suite(tmp_path)), "--no-observe", db=tmp_path / "unused", cwd=tmp_path,
                 env={**state_env(tmp_path), "IOLAB_DB": url}, log=tmp_path / "run.log")
    try:
        wait_for(lambda: ok_results(url) >= 1, 60)
        pg_server.halt()
        try:
            stopped = datetime.now(UTC)
            wait_for(lambda: run.said("database away: waited"), 60)  # a write found it gone and is retried
        finally:
            pg_server.resume()
        back = datetime.now(UTC)
    except BaseException:
        run.proc.kill()
        raise
    finally:
        returncode, err = run.finish(timeout=120)
    assert returncode == 0, err
    assert "the results database answered again after" in err
    assert lost_and_duplicated(url) == (0, 0)
    assert started_between(url, stopped + timedelta(seconds=1), back) == []


def test_a_read_only_postgresql_is_refused_before_fio_runs_and_still_read(tmp_path, postgres_url):
    url = postgres_url
    Store(url).close()  # the schema exists
    database = sa.engine.make_url(url).database
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"ALTER DATABASE {database} SET default_transaction_read_only = on")
    try:
        env = {**state_env(tmp_path), "IOLAB_DB": url}
        proc = iolab("run", str(suite(tmp_path)), "--no-observe", db=tmp_path / "unused", cwd=tmp_path, env=env)
        assert proc.returncode == 1
        shown = Store(url).display_url
        assert errors(proc) == [
            f"Error: the results database {shown}: cannot take a write (tried before any job runs): cannot execute "
            "UPDATE in a read-only transaction",
            "Hint: give a writable database with --db or $IOLAB_DB (reading commands such as runs, show, report and "
            "compare work on this one)"]
        assert not (tmp_path / "data.bin").exists()  # fio never ran
        assert iolab("runs", db=tmp_path / "unused", env=env).returncode == 0
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql("SET default_transaction_read_only = off")
            conn.exec_driver_sql(f"ALTER DATABASE {database} SET default_transaction_read_only = off")
        admin.dispose()
