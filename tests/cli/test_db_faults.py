"""A finished result is never lost to the results database (issue 24), the bookkeeping in-process: fio
replayed (``fakefio``), a real SQLite locked by another writer while a job runs, then released once iolab
has waited for it (or never, past ``--db-wait``), and ``--resume`` storing what the spool kept.

Each test counts, once the run is done (resumed where it stopped), the results lost (planned jobs
without a stored ``ok`` result) and duplicated (result rows or fio log series stored twice) and asserts 0
of each; and that no job started while the database was away. Kills, full and read-only file systems,
PostgreSQL restarts: ``tests/integration/test_db_faults.py``, ``tests/system/test_db_faults.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from faultedruns import Lock, errors, lost_and_duplicated, spooled, started_between, state_env, suite, work_dirs
from inprocess import iolab
from iolab.runner import local
from iolab.store import faults as dbfaults


@pytest.fixture
def lock_at_second_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_fio) -> dict[str, Lock]:
    """Another writer takes the database's write lock while the run's second job runs (after the first
    result is stored): the job ends while it is held. ``["lock"]`` is the lock, once taken."""
    held: dict[str, Lock] = {}
    replayed = local.run

    def run(*args, **kwargs):
        if len(fake_fio.runs) == 1 and "lock" not in held:
            held["lock"] = Lock(tmp_path / "db.sqlite")
        return replayed(*args, **kwargs)
    monkeypatch.setattr(local, "run", run)
    return held


def test_sqlite_locked_by_another_writer_is_waited_out(tmp_path, monkeypatch, lock_at_second_job):
    """The lock is released once iolab has said it waits for it (its first retry failed)."""
    db = tmp_path / "db.sqlite"
    url = f"sqlite:///{db}"
    released = []
    tell = dbfaults.Guard._tell

    def told(guard: dbfaults.Guard, wait: dbfaults.Wait) -> None:
        tell(guard, wait)
        if not wait.back and not released:
            released.append(lock_at_second_job["lock"].release())
    monkeypatch.setattr(dbfaults.Guard, "_tell", told)
    proc = iolab("run", str(suite(tmp_path)), "--no-observe", db=db, cwd=tmp_path, env=state_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert released  # the run met the lock and waited
    assert "database away: waited" in proc.stderr and "no new job starts (database is locked)" in proc.stderr
    assert "the results database answered again after" in proc.stderr
    assert lost_and_duplicated(url) == (0, 0)
    # the lock came while w1's fio ran (its start is fio's, just after); no other job started while it was held
    assert started_between(url, lock_at_second_job["lock"].since, released[0]) == ["w1"]
    assert work_dirs(tmp_path) == []


def test_sqlite_locked_past_the_bound_stops_the_run_and_resume_stores_the_spool(tmp_path, lock_at_second_job):
    db = tmp_path / "db.sqlite"
    url = f"sqlite:///{db}"
    env = state_env(tmp_path)
    try:
        proc = iolab("run", str(suite(tmp_path)), "--no-observe", "--db-wait", "3s", db=db, cwd=tmp_path, env=env)
        assert proc.returncode == 1, proc.stderr
        error = errors(proc)
        assert error[0].startswith(f"Error: run 1 stopped: the results database {url} was away longer than the "
                                   "3s iolab waits (--db-wait): cannot store a result: database is locked. "
                                   "1 finished result(s) not yet stored are kept in "), error
        assert error[1] == "Hint: when the database is back, store them and finish the run with: iolab run --resume 1"
        assert "database away: waited" in proc.stderr and "no new job starts" in proc.stderr  # the progress line
        assert len(spooled(tmp_path)) == 1
        assert not (tmp_path / "data.bin").exists()  # scratch removed at the stop, though the database was away
    finally:
        lock_at_second_job["lock"].release()
    resumed = iolab("run", "--resume", "1", db=db, cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "stored 1 finished result(s) the spool kept for run 1" in resumed.stderr
    assert lost_and_duplicated(url) == (0, 0)
    assert list((tmp_path / "state" / "iolab" / "spool").iterdir()) == []  # nothing left once all is stored
