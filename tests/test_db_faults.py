"""A finished result is never lost to the results database (issue 24): real fio, the CLI in a
subprocess, a real SQLite and a real PostgreSQL, each made to fail mid-run.

Each fault test counts, once the run is done (resumed where it stopped), the results lost (planned
jobs without a stored ``ok`` result) and duplicated (result rows or fio log series stored twice) and
asserts 0 of each; and that no job started while the database was away.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

import pg
from clirun import iolab, popen, wait_for
from iolab.errors import StoreError
from iolab.store import faults as dbfaults
from iolab.store.database import Store
from paths import DATA

JOBS = 6


def suite(tmp_path: Path, jobs: int = JOBS) -> Path:
    """A suite of ``jobs`` one-second jobs on a scratch file."""
    path = tmp_path / "suite.yaml"
    workloads = "".join(f"  - {{name: w{i}, rw: {'randread' if i % 2 else 'randwrite'}, bs: 4k}}\n"
                        for i in range(jobs))
    path.write_text(f"name: faults\ntargets: {{data: {tmp_path / 'data.bin'}}}\n"
                    "defaults: {ioengine: psync, size: 4m, time_based: 1, runtime: 1s}\n"
                    f"workloads:\n{workloads}")
    return path


def state_env(tmp_path: Path) -> dict[str, str]:
    """The run's own state directory (the spool lives there)."""
    return {"XDG_STATE_HOME": str(tmp_path / "state")}


def ok_results(url: str, run_id: int = 1) -> int:
    """How many results of the run are stored ``ok`` (0 while the database is not there)."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return int(conn.exec_driver_sql(
                f"SELECT count(*) FROM results WHERE run_id = {run_id} AND status = 'ok'").scalar() or 0)
    except sa.exc.SQLAlchemyError:
        return 0
    finally:
        engine.dispose()


def running(url: str, seq: int, run_id: int = 1) -> bool:
    """Whether the run's job ``seq`` is stored as running (its fio has started or is about to)."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql(f"SELECT status FROM results WHERE run_id = {run_id} AND seq = {seq}"
                                        ).scalar() == "running"
    except sa.exc.SQLAlchemyError:
        return False
    finally:
        engine.dispose()


def lost_and_duplicated(url: str, run_id: int = 1, planned: int = JOBS) -> tuple[int, int]:
    """(results lost, results duplicated) of a finished run: planned jobs without an ok result;
    result rows beyond one per planned job, and fio log series stored more than once."""
    store = Store(url)
    try:
        run = store.get_run(run_id)
        ok = {r.seq for r in run.results if r.status == "ok"}
        series = store.time_series(run_id)
    finally:
        store.close()
    twice = sum(n - 1 for rows in series.values()
                for n in Counter((s.job, s.job_index, s.direction, s.metric) for s in rows).values())
    assert all(series.get(r.id) for r in run.results if r.status == "ok")  # every result has its fio logs
    return planned - len(ok), len(run.results) - len({r.seq for r in run.results}) + twice


def started_between(url: str, start: datetime, end: datetime, run_id: int = 1) -> list[str]:
    """Workloads whose fio started inside [start, end]."""
    store = Store(url)
    try:
        return [r.workload for r in store.get_run(run_id).results
                if r.started_at is not None and start <= r.started_at <= end]
    finally:
        store.close()


def errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The ``Error:`` and ``Hint:`` lines a command printed."""
    return [line for line in proc.stderr.splitlines() if line.startswith(("Error:", "Hint:"))]


def spooled(tmp_path: Path) -> list[Path]:
    """The sealed results in the spool."""
    return sorted((tmp_path / "state").rglob("result.json"))


def work_dirs(tmp_path: Path) -> list[Path]:
    """Every job work directory in the spool."""
    return sorted((tmp_path / "state").rglob("result-*"))


class Lock:
    """Another writer holding SQLite's write lock (``BEGIN IMMEDIATE``) until ``release``."""

    def __init__(self, db: Path) -> None:
        self.conn = sqlite3.connect(db, isolation_level=None, timeout=30)
        self.conn.execute("BEGIN IMMEDIATE")
        self.since = datetime.now(UTC)

    def release(self) -> datetime:
        self.conn.execute("ROLLBACK")
        self.conn.close()
        return datetime.now(UTC)


def test_sqlite_locked_by_another_writer_for_15_s_is_waited_out(tmp_path):
    db = tmp_path / "db.sqlite"
    url = f"sqlite:///{db}"
    proc = popen("run", str(suite(tmp_path)), "--no-observe", db=db, cwd=tmp_path, env=state_env(tmp_path))
    wait_for(lambda: ok_results(url) >= 1, 60)
    lock = Lock(db)
    time.sleep(15)
    released = lock.release()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "the results database answered again after" in err
    assert lost_and_duplicated(url) == (0, 0)
    # the job in flight when the lock came may have started just before; none after it
    assert started_between(url, lock.since + timedelta(seconds=1), released) == []
    assert work_dirs(tmp_path) == []


def test_sqlite_locked_past_the_bound_stops_the_run_and_resume_stores_the_spool(tmp_path):
    db = tmp_path / "db.sqlite"
    url = f"sqlite:///{db}"
    env = state_env(tmp_path)
    proc = popen("run", str(suite(tmp_path)), "--no-observe", "--db-wait", "3s", db=db, cwd=tmp_path, env=env)
    wait_for(lambda: running(url, seq=1), 60)  # the second job runs: it will end while the lock is held
    lock = Lock(db)
    try:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err
        error = [line for line in err.splitlines() if line.startswith(("Error:", "Hint:"))]
        assert error[0].startswith(f"Error: run 1 stopped: the results database {url} was away longer than the "
                                   "3s iolab waits (--db-wait): cannot store a result: database is locked. "
                                   "1 finished result(s) not yet stored are kept in "), error
        assert error[1] == "Hint: when the database is back, store them and finish the run with: iolab run --resume 1"
        assert "database away: waited" in err and "no new job starts" in err  # the progress line said so
        assert len(spooled(tmp_path)) == 1
        assert not (tmp_path / "data.bin").exists()  # scratch removed at the stop, though the database was away
    finally:
        lock.release()
    resumed = iolab("run", "--resume", "1", db=db, cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "stored 1 finished result(s) the spool kept for run 1" in resumed.stderr
    assert lost_and_duplicated(url) == (0, 0)
    assert list((tmp_path / "state" / "iolab" / "spool").iterdir()) == []  # nothing left once all is stored


def test_a_result_whose_database_write_was_killed_arrives_on_resume(tmp_path):
    db = tmp_path / "db.sqlite"
    url = f"sqlite:///{db}"
    env = state_env(tmp_path)
    proc = popen("run", str(suite(tmp_path)), "--no-observe", db=db, cwd=tmp_path, env=env)
    wait_for(lambda: running(url, seq=1), 60)
    lock = Lock(db)
    try:
        wait_for(lambda: spooled(tmp_path), 30)  # the next job ended; its write waits for the lock
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        lock.release()
    (sealed,) = spooled(tmp_path)
    result_id = int(sealed.parent.name.removeprefix("result-"))
    kept = json.loads(sealed.read_text())
    # not stored; its process is gone, so it reads as interrupted (facts/owner.py)
    assert {r.id: r.status for r in Store(url).get_run(1).results}[result_id] == "interrupted"
    resumed = iolab("run", "--resume", "1", db=db, cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    (stored,) = [r for r in Store(url).get_run(1).results if r.id == result_id]
    assert stored.status == "ok" and stored.report is not None
    (direction,) = stored.report.jobs[0].directions.values()
    assert direction.iops == kept["report"]["jobs"][0]["directions"][direction.direction]["iops"]
    assert direction.iops > 0
    assert lost_and_duplicated(url) == (0, 0)


def test_work_directories_of_a_run_killed_mid_fio_are_removed_on_resume(tmp_path):
    db = tmp_path / "db.sqlite"
    env = state_env(tmp_path)
    proc = popen("run", str(suite(tmp_path, jobs=2)), "--no-observe", db=db, cwd=tmp_path, env=env)
    wait_for(lambda: any((d / "fio-output.json").exists() or (d / "job.fio").exists() for d in work_dirs(tmp_path)),
             60)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)  # fio, if it outlived iolab
    assert work_dirs(tmp_path) and not spooled(tmp_path)
    resumed = iolab("run", "--resume", "1", db=db, cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert work_dirs(tmp_path) == []
    assert lost_and_duplicated(f"sqlite:///{db}", planned=2) == (0, 0)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs of its own (root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "dbfs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", f"iolab-test-{os.getpid()}", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def fill(directory: Path, leave_bytes: int = 0) -> Path:
    """Fill the file system of ``directory`` but ``leave_bytes``; returns the filler file."""
    filler = directory / "filler"
    # unbuffered: a buffered file keeps what the full disk refused and raises ENOSPC again as it closes
    with open(filler, "wb", buffering=0) as handle:
        try:
            while handle.write(b"\0" * 65536):
                pass
        except OSError:
            pass
    os.truncate(filler, max(0, filler.stat().st_size - leave_bytes))
    return filler


@pytest.mark.root
def test_sqlite_on_a_tmpfs_filled_mid_run_and_freed(tmp_path, small_fs):
    db = small_fs / "db.sqlite"
    url = f"sqlite:///{db}"
    proc = popen("run", str(suite(tmp_path)), "--no-observe", db=db, cwd=tmp_path, env=state_env(tmp_path))
    try:
        wait_for(lambda: ok_results(url) >= 1, 60)
        filler = fill(small_fs)
        full_since = datetime.now(UTC)
        time.sleep(8)
        filler.unlink()
        freed = datetime.now(UTC)
        _, err = proc.communicate(timeout=120)
    finally:  # not left running on the file system the fixture unmounts
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "the results database answered again after" in err
    assert lost_and_duplicated(url) == (0, 0)
    assert started_between(url, full_since + timedelta(seconds=1), freed) == []


@pytest.mark.root
def test_sqlite_with_too_little_room_is_refused_before_fio_runs(tmp_path, small_fs):
    db = small_fs / "db.sqlite"
    Store(f"sqlite:///{db}").close()  # the database exists
    fill(small_fs, leave_bytes=64 * 1024)
    proc = iolab("run", str(suite(tmp_path)), "--no-observe", db=db, cwd=tmp_path, env=state_env(tmp_path))
    assert proc.returncode == 1
    error = errors(proc)
    assert error[0].startswith(f"Error: the results database sqlite:///{db} is on a file system with "), error
    assert "KiB free; this run's 6 result(s) need about" in error[0]
    assert error[1] == f"Hint: free space on {small_fs}, or give another database with --db"
    assert not (tmp_path / "data.bin").exists()  # fio never ran


@pytest.mark.root
def test_read_only_database_is_named_as_such_and_still_read(tmp_path, small_fs):
    db = small_fs / "db.sqlite"
    samples = DATA / "fio"
    imported = iolab("import", str(samples / "fio-3.33_randrw_libaio.json"),
                     str(samples / "fio-3.33_randrw_posixaio.json"), db=db)
    assert imported.returncode == 0, imported.stderr
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    try:
        for command in (["runs"], ["show", "1"], ["compare", "1", "2"],
                        ["report", "1", "-o", str(tmp_path / "r.html")]):
            proc = iolab(*command, db=db, cwd=tmp_path)
            assert proc.returncode in (0, 3), (command, proc.stderr)  # compare: 3 when it finds a regression
        proc = iolab("run", "--resume", "1", db=db, cwd=tmp_path, env=state_env(tmp_path))
        assert proc.returncode == 1
        error = errors(proc)
        assert error == [f"Error: the results database sqlite:///{db} is on a read-only file system ({small_fs}); "
                         "results cannot be stored there",
                         "Hint: give a writable database with --db or $IOLAB_DB (reading commands such as runs, "
                         "show, report and compare work on this one)"]
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_fs)], check=False)
    # without CAP_DAC_OVERRIDE root meets file permissions as anyone does
    no_override = ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
                   "--inh-caps=-dac_override,-dac_read_search"]
    os.chmod(db, 0o444)
    proc = iolab("run", "--resume", "1", db=db, wrapper=no_override)
    assert proc.returncode == 1
    assert errors(proc)[0].startswith(f"Error: the results database sqlite:///{db} is a read-only file (no write "
                                      "permission for this user)"), proc.stderr
    os.chmod(db, 0o644)
    os.chmod(small_fs, 0o555)
    proc = iolab("run", "--resume", "1", db=db, wrapper=no_override)
    assert f"is in a read-only directory ({small_fs}: no write permission" in errors(proc)[0]


@pytest.fixture(scope="module")
def postgres() -> Iterator[pg.PostgresServer]:
    if not pg.pg_bin():
        pytest.skip("PostgreSQL server binaries are not installed (Debian package postgresql)")
    server = pg.start(port=54724)
    yield server
    server.stop()


@pytest.mark.postgres
def test_postgresql_restarted_mid_run(tmp_path, postgres):
    url = postgres.url
    before = Store(url).list_runs()
    run_id = (before[0].id if before else 0) + 1
    proc = popen("run", str(suite(tmp_path)), "--no-observe", db=tmp_path / "unused", cwd=tmp_path,
                 env={**state_env(tmp_path), "IOLAB_DB": url})
    wait_for(lambda: ok_results(url, run_id) >= 1, 60)
    postgres.restart()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert lost_and_duplicated(url, run_id) == (0, 0)


@pytest.mark.postgres
def test_postgresql_stopped_for_10_s(tmp_path, postgres):
    url = postgres.url
    before = Store(url).list_runs()
    run_id = (before[0].id if before else 0) + 1
    proc = popen("run", str(suite(tmp_path)), "--no-observe", db=tmp_path / "unused", cwd=tmp_path,
                 env={**state_env(tmp_path), "IOLAB_DB": url})
    wait_for(lambda: ok_results(url, run_id) >= 1, 60)
    postgres.halt()
    stopped = datetime.now(UTC)
    time.sleep(10)
    postgres.resume()
    back = datetime.now(UTC)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "the results database answered again after" in err
    assert lost_and_duplicated(url, run_id) == (0, 0)
    assert started_between(url, stopped + timedelta(seconds=1), back, run_id) == []


def test_database_errors_are_one_line_without_sql(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/t.db", wait_s=0.5)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE run_tags")
    with pytest.raises(StoreError) as raised:
        store.create_run(suite_name="s", suite_text="", tags={"k": "v"})
    assert raised.value.message == (f"the results database sqlite:///{tmp_path}/t.db: cannot store the run: "
                                    "no such table: run_tags")
    assert "SQL" not in raised.value.message and "bug" not in (raised.value.hint or "")


def test_a_lock_is_waited_for_within_the_bound_and_told(tmp_path):
    db = tmp_path / "t.db"
    waits: list[dbfaults.Wait] = []
    store = Store(f"sqlite:///{db}", wait_s=1.0)
    store.guard.on_wait = waits.append
    lock = Lock(db)
    started = time.monotonic()
    with pytest.raises(dbfaults.DatabaseUnavailable) as raised:
        store.create_run(suite_name="s", suite_text="")
    assert 1.0 <= time.monotonic() - started < 4.0  # the bound, and one SQLite lock wait at most
    assert raised.value.reason == "database is locked"
    assert waits and all(w.reason == "database is locked" and not w.back for w in waits)
    lock.release()
    assert store.create_run(suite_name="s", suite_text="") == 1


@pytest.mark.postgres
def test_a_read_only_postgresql_is_refused_before_fio_runs_and_still_read(tmp_path, postgres):
    url = postgres.url
    Store(url).close()  # the schema exists
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        conn.exec_driver_sql("ALTER DATABASE postgres SET default_transaction_read_only = on")
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
            conn.exec_driver_sql("ALTER DATABASE postgres SET default_transaction_read_only = off")
        admin.dispose()
