"""What scripts and logs get: --quiet, the manual's exit codes per error class, read commands that refuse a
database that does not exist, a directory's notes passed over, lint's text indented. In-process, fio
replayed (``fakefio``), real SQLite. Progress lines in a log and a killed run:
``tests/integration/test_scripting.py``."""

from __future__ import annotations

import json
from pathlib import Path

from inprocess import iolab
from paths import FIO, ROOT

SAMPLE = FIO / "fio-3.33_randrw_libaio.json"


def job(tmp_path: Path, runtime_s: int, name: str = "job.fio") -> Path:
    path = tmp_path / name
    path.write_text(f"[global]\nioengine=libaio\ndirect=1\nsize=16m\ntime_based=1\nruntime={runtime_s}s\n"
                    f"directory={tmp_path}\n[rr]\nrw=randread\nbs=4k\niodepth=4\n")
    return path


def test_quiet_prints_no_plan_and_no_progress(tmp_path):
    proc = iolab("run", str(job(tmp_path, 1)), "--no-observe", "--quiet", db=tmp_path / "db.sqlite", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Plan:" not in proc.stderr and "started" not in proc.stderr and "ok after" not in proc.stderr
    assert "rr" in proc.stdout and "IOPS" in proc.stdout


def test_exit_codes_as_the_manual_lists_them(tmp_path):
    """0 ok, 1 runtime failure, 2 usage, suite error or a refused plan (the same for run and lint);
    3 (regression) and 130 (interrupted) have their own tests (compare's; run's Ctrl-C in tests/cli/test_run.py)."""
    manual = (ROOT / "docs" / "suites.md").read_text()
    assert "Exit codes: 0 ok, 1 runtime failure, 2 usage or suite error or a\nrefused plan" in manual
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
