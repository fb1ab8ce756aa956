"""What scripts and logs get: progress lines without a terminal (and --quiet), the README's exit codes
per error class, read commands that refuse a database that does not exist, a killed run shown
`interrupted`, a directory's notes passed over, lint's text indented. Real fio, real SQLite."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clirun import iolab, wait_for
from paths import FIO, ROOT

SAMPLE = FIO / "fio-3.33_randrw_libaio.json"


def job(tmp_path: Path, runtime_s: int, name: str = "job.fio") -> Path:
    path = tmp_path / name
    path.write_text(f"[global]\nioengine=libaio\ndirect=1\nsize=16m\ntime_based=1\nruntime={runtime_s}s\n"
                    f"directory={tmp_path}\n[rr]\nrw=randread\nbs=4k\niodepth=4\n")
    return path


def start(tmp_path: Path, *args: str, log: Path) -> subprocess.Popen[bytes]:
    """``iolab ARGS`` with stderr to ``log`` (no terminal), as a CI job or `… 2> run.log &` runs it."""
    env = {**os.environ, "IOLAB_DB": str(tmp_path / "db.sqlite")}
    with log.open("wb") as f:
        return subprocess.Popen([sys.executable, "-m", "iolab", *args], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=f)


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
    status = re.findall(r"^\d\d:\d\d:\d\d \[1/1\] jobfile · job: (\d+)s elapsed, ([\d,]+) IOPS", text, re.M)
    assert len(status) == 1 and 10 <= int(status[0][0]) <= 12 and int(status[0][1].replace(",", "")) > 0, text
    assert re.search(r"^\d\d:\d\d:\d\d \[1/1\] jobfile · job: ok after 1\ds$", text, re.M), text
    assert "━" not in text and "\r" not in text  # no bar drawn into the log


def test_quiet_prints_no_plan_and_no_progress(tmp_path):
    proc = iolab("run", str(job(tmp_path, 1)), "--no-observe", "--quiet", db=tmp_path / "db.sqlite", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Plan:" not in proc.stderr and "started" not in proc.stderr and "ok after" not in proc.stderr
    assert "rr" in proc.stdout and "IOPS" in proc.stdout


def test_exit_codes_as_the_readme_lists_them(tmp_path):
    """0 ok, 1 runtime failure, 2 usage, suite error or a refused plan (the same for run and lint);
    3 (regression) and 130 (interrupted) have their own tests (test_compare, test_cli_run)."""
    readme = (ROOT / "README.md").read_text()
    assert "Exit codes: 0 ok, 1 runtime failure, 2 usage or suite error or a\nrefused plan" in readme
    db = tmp_path / "db.sqlite"
    assert iolab("--version", db=db).returncode == 0
    # 1: fio fails at run time; an output that cannot be read
    (tmp_path / "bad.fio").write_text("[j]\nrw=read\nsize=1m\nfilename=/proc/iolab-none/x\nruntime=1s\n")
    failed = iolab("run", "bad.fio", "--no-observe", db=db, cwd=tmp_path)
    assert failed.returncode == 1 and "fio: failed to create dir" in failed.stderr
    (tmp_path / "cut.json").write_text(SAMPLE.read_text()[:3000])
    assert iolab("import", str(tmp_path / "cut.json"), db=db).returncode == 1
    # 2: usage (no such run), a suite error, fio rejecting a job: run and lint alike
    assert iolab("show", "99", db=db).returncode == 2
    (tmp_path / "s.yaml").write_text("name: s\nworkloads: [{rw: read, bs: 4x}]\n")
    assert iolab("run", "s.yaml", db=db, cwd=tmp_path).returncode == 2
    (tmp_path / "typo.fio").write_text(f"[j]\nrw=read\nsize=1m\niodeph=4\ndirectory={tmp_path}\n")
    linted = iolab("lint", "typo.fio", db=db, cwd=tmp_path)
    ran = iolab("run", "typo.fio", db=db, cwd=tmp_path)
    assert linted.returncode == ran.returncode == 2, (linted.stderr, ran.stderr)


def test_read_commands_refuse_a_database_that_does_not_exist(tmp_path):
    missing = tmp_path / "no" / "such" / "dir" / "x.db"
    for args in (["runs"], ["show", "1"], ["compare", "1", "2"], ["report", "1"]):
        proc = iolab("--db", str(missing), *args, db=tmp_path / "unused.db")
        assert proc.returncode == 2 and f"Error: no results database at {missing}" in proc.stderr, (args, proc)
    assert not (tmp_path / "no").exists()
    made = iolab("--db", str(missing), "import", str(SAMPLE), db=tmp_path / "unused.db")
    assert made.returncode == 0 and missing.is_file()
    assert iolab("--db", str(missing), "runs", db=tmp_path / "unused.db").returncode == 0


def test_a_run_whose_process_was_killed_is_interrupted_then_resumed(tmp_path):
    log = tmp_path / "run.log"
    proc = start(tmp_path, "run", str(job(tmp_path, 30)), "--no-observe", log=log)
    try:
        wait_for(lambda: "started" in log.read_text(), 60)
        time.sleep(1)
        listed = json.loads(iolab("runs", "--format", "json", db=tmp_path / "db.sqlite").stdout)
        assert listed[0]["status"] == "running" and listed[0]["options"]["owner"]["pid"] == proc.pid
        assert listed[0]["options"]["owner"]["host"] == os.uname().nodename
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    listed = json.loads(iolab("runs", "--format", "json", db=tmp_path / "db.sqlite").stdout)
    assert listed[0]["status"] == "interrupted"
    shown = json.loads(iolab("show", "latest", "--format", "json", db=tmp_path / "db.sqlite").stdout)
    assert shown["run"]["status"] == "interrupted" and shown["results"][0]["status"] == "interrupted"
    table = iolab("runs", db=tmp_path / "db.sqlite").stdout
    assert re.search(r"\binterrupted\b", table) and "running" not in table
    (tmp_path / "job.fio").write_text((tmp_path / "job.fio").read_text().replace("runtime=30s", "runtime=1s"))
    resumed = iolab("run", "--resume", str(listed[0]["id"]), "--quiet", db=tmp_path / "db.sqlite", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(iolab("runs", "--format", "json", db=tmp_path / "db.sqlite").stdout)[0]["status"] == "complete"


def test_import_of_a_directory_passes_over_notes_that_mention_fio(tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "randread-1-1.json").write_text(SAMPLE.read_text())
    (sweep / "notes.txt").write_text("ran with fio 3.33, iodepth 1..64; groupid=0 was the only group\n")
    (sweep / "README.md").write_text("# fio sweep\n")
    proc = iolab("import", str(sweep), "--format", "json", db=tmp_path / "db.sqlite")
    assert proc.returncode == 0, proc.stderr
    (outcome,) = json.loads(proc.stdout)["sources"]
    assert outcome["results"] == 1 and outcome["passed_over"] == 2, outcome
    assert [n for n in outcome["files_not_stored"] if n["status"] == "failed"] == []


def test_lint_text_is_indented_and_names_workloads_compactly(tmp_path):
    (tmp_path / "typo.fio").write_text(f"[j]\nrw=read\nsize=1m\niodeph=4\ndirectory={tmp_path}\n")
    proc = iolab("lint", "typo.fio", db=tmp_path / "db.sqlite", cwd=tmp_path)
    assert "\n      Did you mean iodepth?\n" in proc.stdout, proc.stdout
    assert not [line for line in proc.stdout.splitlines()[1:] if line and not line.startswith("  ")]
    quick = iolab("lint", "quick", "--target", f"d={tmp_path}", db=tmp_path / "db.sqlite", cwd=tmp_path)
    assert "  P1 warning  4 workloads on d (randread-4k-qd32, …, write-1m-qd8)" in quick.stdout, quick.stdout


@pytest.mark.parametrize(("where", "shown"), [
    (["a on d"], "a on d"), (["a on d", "b on d", "c on e"], "a on d, b on d, c on e"),
    (["a on d", "b on d", "c on d", "x on e"], "3 workloads on d (a, …, c); x on e"),
    (["a on d", "b on d", "x on e", "y on e"], "2 workloads on d (a, b); 2 workloads on e (x, y)")])
def test_compact_places(where, shown):
    from iolab.report.table import compact_places
    assert compact_places(where) == shown
