"""What a run leaves behind and what a resumed run repeats: scratch files on remote hosts are
removed (network-namespace hosts, ssh facts), a preconditioning fill that finished before a kill
is not done again by ``--resume``. Real fio, the CLI in a subprocess, a real SQLite database."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from clirun import iolab, popen, wait_for
from iolab.store.database import Store
from netns import lab, requires_netns, requires_sshd, start_sshd


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


@requires_netns
@pytest.mark.root
@requires_sshd
def test_scratch_files_iolab_lays_out_on_remote_hosts_are_removed(tmp_path):
    db = tmp_path / "db.sqlite"
    missing = tmp_path / "remote-scratch.bin"
    directory = tmp_path / "dir"
    directory.mkdir()
    (directory / "keep.0.0").write_bytes(b"there before the run")  # named like fio's files, yet not iolab's
    with lab(1) as (host,):
        host.start_fio_server()
        env = start_sshd(host, tmp_path)
        suite = tmp_path / "suite.yaml"
        suite.write_text(
            "name: scratch\ntargets:\n"
            f"  file: {{hosts: ['{host.spec()}'], path: {missing}, ssh: true, size: 4m}}\n"
            f"  dir: {{hosts: ['{host.spec()}'], path: {directory}/, ssh: true, size: 4m}}\n"
            "defaults: {ioengine: psync, time_based: 1, runtime: 1s}\n"
            "workloads:\n  - {name: w, rw: randwrite, bs: 4k}\n  - {name: keep, rw: randread, bs: 4k}\n")
        proc = iolab("run", str(suite), "--no-observe", db=db, cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
    assert not missing.exists()
    assert sorted(os.listdir(directory)) == ["keep.0.0"]  # fio's w.0.0 removed, the earlier file kept
    assert Store(f"sqlite:///{db}").get_run(1).info.options["remote_scratch"]["file"] == {
        host.spec(): {"host": f"ip:{host.address},8765", "files": [str(missing)], "dirs": {}}}


def test_resume_after_a_kill_in_the_measured_phase_does_not_fill_again(tmp_path):
    db = tmp_path / "db.sqlite"
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        f"name: pre\ntargets: {{data: {tmp_path / 'data.bin'}}}\nprecondition: {{fill: 1x, bs: 128k}}\n"
        "defaults: {ioengine: psync, size: 16m, time_based: 1, runtime: 8s}\nworkloads: [{name: r, rw: randread}]\n")
    proc = popen("run", str(suite), "--no-observe", db=db, cwd=tmp_path)
    wait_for(lambda: run_options(db).get("filled"))  # the fill has ended and is stored with the run
    time.sleep(1.5)  # the measured job runs
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert Store(f"sqlite:///{db}").get_run(1).results[0].status == "interrupted"  # its process is gone (owner.py)
    resumed = iolab("run", "--resume", "1", "--no-observe", db=db, cwd=tmp_path)
    assert resumed.returncode == 2 and "--resume takes no" in resumed.stderr  # the plan is stored
    resumed = iolab("run", "--resume", "1", db=db, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "writing the region" not in resumed.stderr
    (result,) = Store(f"sqlite:///{db}").get_run(1).results
    assert result.status == "ok"
    assert result.extra["precondition"]["fill"] == {"times": 1, "bs": "128k", "skipped": "done earlier in this run"}
