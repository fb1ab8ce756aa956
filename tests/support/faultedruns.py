"""Runs whose results database fails mid-run (issue 24), for the tests of every tier: the suite they run,
what they count once the run is done (results lost, results duplicated, jobs started while the database
was away), the spool's files, another SQLite writer holding the lock, and a run started with its
messages in a log file (no terminal: a line per event, so a test can wait for one)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from iolab.store.database import Store

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


class Logged:
    """``iolab ARGS`` running as a process, its stderr in ``log`` as it comes (not a terminal: a line per
    event, the database's waits included), its stdout discarded."""

    def __init__(self, *args: str, db: Path | str, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.log = log
        full_env = {**os.environ, "IOLAB_DB": str(db), "COLUMNS": "200", **env}
        with log.open("wb") as f:
            self.proc = subprocess.Popen([sys.executable, "-m", "iolab", *args], cwd=cwd, env=full_env,
                                         stdout=subprocess.DEVNULL, stderr=f)

    def said(self, text: str) -> bool:
        """Whether its stderr holds ``text`` so far."""
        return text in self.log.read_text(errors="replace")

    def finish(self, timeout: float) -> tuple[int, str]:
        """Its exit status and all of its stderr, once it ends (killed after ``timeout`` seconds)."""
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode, self.log.read_text(errors="replace")
