"""What a resumed run repeats: a preconditioning fill that finished before a kill is not done again by
``--resume``. Real fio, the CLI in a subprocess, a real SQLite database. (Scratch files on remote
hosts: ``tests/system/test_run_cleanup_remote.py``.)"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

from clirun import iolab, popen, wait_for
from iolab.store.database import Store


def run_options(db: Path) -> dict:
    """Run 1's stored options; empty before iolab has made the database and stored the run."""
    if not db.exists():
        return {}
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT options FROM runs WHERE id = 1").fetchone()
    except sqlite3.OperationalError:  # the tables are not there yet
        return {}
    return json.loads(row[0]) if row and row[0] else {}


def measured_job_started(state: Path) -> bool:
    """fio's output of a planned job is in the spool (the fill's work directory is ``precondition``)."""
    return any((d / "fio-output.json").exists() for d in state.rglob("result-*"))


def test_resume_after_a_kill_in_the_measured_phase_does_not_fill_again(tmp_path):
    db = tmp_path / "db.sqlite"
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        f"name: pre\ntargets: {{data: {tmp_path / 'data.bin'}}}\nprecondition: {{fill: 1x, bs: 128k}}\n"
        "defaults: {ioengine: psync, size: 16m, time_based: 1, runtime: 3s}\nworkloads: [{name: r, rw: randread}]\n")
    proc = popen("run", str(suite), "--no-observe", db=db, cwd=tmp_path, env=env)
    wait_for(lambda: run_options(db).get("filled"))  # the fill has ended and is stored with the run
    wait_for(lambda: measured_job_started(tmp_path / "state"), 30)  # the measured job runs
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert Store(f"sqlite:///{db}").get_run(1).results[0].status == "interrupted"  # its process is gone (facts/owner)
    resumed = iolab("run", "--resume", "1", "--no-observe", db=db, cwd=tmp_path, env=env)
    assert resumed.returncode == 2 and "--resume takes no" in resumed.stderr  # the plan is stored
    resumed = iolab("run", "--resume", "1", db=db, cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "writing the region" not in resumed.stderr
    (result,) = Store(f"sqlite:///{db}").get_run(1).results
    assert result.status == "ok"
    assert result.extra["precondition"]["fill"] == {"times": 1, "bs": "128k", "skipped": "done earlier in this run"}
