"""What scripts and logs get from a real process: progress lines without a terminal (a line per start, end
and every 10 s, while the job runs), and a run whose process was killed shown `interrupted`, then
resumed. Real fio, the CLI in a subprocess, real SQLite. (The rest: ``tests/cli/test_scripting.py``.)"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from clirun import iolab, wait_for


def job(tmp_path: Path, runtime_s: int, name: str = "job.fio") -> Path:
    path = tmp_path / name
    path.write_text(f"[global]\nioengine=libaio\ndirect=1\nsize=16m\ntime_based=1\nruntime={runtime_s}s\n"
                    f"directory={tmp_path}\n[rr]\nrw=randread\nbs=4k\niodepth=4\n")
    return path


def start(tmp_path: Path, *args: str, log: Path) -> subprocess.Popen[bytes]:
    """``iolab ARGS`` with stderr to ``log`` (no terminal), as a CI job or `… 2> run.log &` runs it."""
    env = {**os.environ, "IOLAB_DB": str(tmp_path / "db.sqlite"), "XDG_STATE_HOME": str(tmp_path / "state")}
    with log.open("wb") as f:
        return subprocess.Popen([sys.executable, "-m", "iolab", *args], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=f)


def first_result(db: Path) -> str | None:
    """The stored status of run 1's first job."""
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT status FROM results WHERE run_id = 1 AND seq = 0").fetchone()
    return row[0] if row else None


@pytest.mark.alone  # the 10 s line shows fio's elapsed time, which lags iolab's clock by fio's start on a busy machine
def test_without_a_terminal_progress_is_a_line_per_start_end_and_every_10_s(tmp_path):
    log = tmp_path / "run.log"
    proc = start(tmp_path, "run", str(job(tmp_path, 12)), "--no-observe", log=log)
    try:
        wait_for(lambda: "started" in log.read_text(), 60)
        during = log.read_text()
        assert proc.poll() is None  # the log shows the job while it runs
        assert re.search(r"^\d\d:\d\d:\d\d \[1/1\] jobfile · job: started, about 12s$", during, re.M), during
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    status = re.findall(r"^\d\d:\d\d:\d\d \[1/1\] jobfile · job: (\d+)s elapsed, ([\d.]+) IOPS", text, re.M)
    assert len(status) == 1 and 10 <= int(status[0][0]) <= 12 and float(status[0][1]) > 0, text
    assert re.search(r"^\d\d:\d\d:\d\d \[1/1\] jobfile · job: ok after 1\ds$", text, re.M), text
    assert "━" not in text and "\r" not in text  # no bar drawn into the log


def test_a_run_whose_process_was_killed_is_interrupted_then_resumed(tmp_path):
    log = tmp_path / "run.log"
    proc = start(tmp_path, "run", str(job(tmp_path, 30)), "--no-observe", log=log)
    try:
        wait_for(lambda: "started" in log.read_text(), 60)
        wait_for(lambda: first_result(tmp_path / "db.sqlite") == "running", 30)  # fio started, the row says so
        listed = json.loads(iolab("runs", "--format", "json", db=tmp_path / "db.sqlite").stdout)["runs"]
        assert listed[0]["status"] == "running" and listed[0]["options"]["owner"]["pid"] == proc.pid
        assert listed[0]["options"]["owner"]["host"] == os.uname().nodename
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    listed = json.loads(iolab("runs", "--format", "json", db=tmp_path / "db.sqlite").stdout)["runs"]
    assert listed[0]["status"] == "interrupted"
    shown = json.loads(iolab("show", "latest", "--format", "json", db=tmp_path / "db.sqlite").stdout)
    assert shown["run"]["status"] == "interrupted" and shown["results"][0]["status"] == "interrupted"
    table = iolab("runs", db=tmp_path / "db.sqlite").stdout
    assert re.search(r"\binterrupted\b", table) and "running" not in table
    (tmp_path / "job.fio").write_text((tmp_path / "job.fio").read_text().replace("runtime=30s", "runtime=1s"))
    resumed = iolab("run", "--resume", str(listed[0]["id"]), "--quiet", db=tmp_path / "db.sqlite", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    listed = json.loads(iolab("runs", "--format", "json", db=tmp_path / "db.sqlite").stdout)["runs"]
    assert listed[0]["status"] == "complete"
