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


def test_lint_findings_are_printed_once_with_a_reminder_at_the_end(tmp_path):
    for quiet in ((), ("--quiet",)):
        db = tmp_path / f"db{len(quiet)}.sqlite"
        proc = iolab("run", str(job(tmp_path, 1)), "--no-observe", *quiet, db=db, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        said = proc.stdout + proc.stderr
        assert said.count("runtime 1s is under 60 s") == 1 and said.count("P3 warning") == 1, said
        assert "P3 [" not in proc.stdout  # not again under the results: one line reminds of them
        reminder = [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("lint: ")]
        assert len(reminder) == 1 and "P3" in reminder[0] and "iolab show 1 repeats them" in reminder[0], proc.stdout
        shown = iolab("show", "1", db=db).stdout  # show, later, says them in full
        assert "runtime 1s is under 60 s" in shown and "lint: " not in shown


def test_an_acknowledged_finding_is_stored_as_such_and_not_printed_again(tmp_path):
    db = tmp_path / "db.sqlite"
    proc = iolab("run", str(job(tmp_path, 1)), "--no-observe", "--ignore-lint", "p3", db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "runtime 1s is under 60 s" not in proc.stdout + proc.stderr and "acknowledged: P3" in proc.stderr
    assert "acknowledged (--ignore-lint, lint: ignore): P3" in proc.stdout
    (stored,) = [w for w in json.loads(iolab("show", "1", "--format", "json", db=db).stdout)["run"]["warnings"]
                 if "P3" in w]
    assert stored.startswith("acknowledged: P3 [job on jobfile]: runtime 1s is under 60 s")
    for code, said in (("P16", "P16 is a refusal"), ("P33", "'P33' is not a lint warning (did you mean P3?)")):
        refused = iolab("run", str(job(tmp_path, 1)), "--ignore-lint", code, db=db, cwd=tmp_path)
        assert refused.returncode == 2 and f"Error: --ignore-lint: {said}" in refused.stderr


def test_lint_list_prints_the_catalogue_offline(tmp_path):
    proc = iolab("lint", "--list", "--format", "json", db=tmp_path / "db.sqlite", env={"PATH": "/nonexistent"})
    assert proc.returncode == 0, proc.stderr
    rules = {r["id"]: r for r in json.loads(proc.stdout)["rules"]}
    assert list(rules) == [*(f"P{n}" for n in range(1, 17) if n != 10), "FIO"]
    assert rules["P3"]["finds"] == "a runtime under 60 s." and rules["P16"]["severity"] == "error"
    assert "P12" in iolab("lint", "--list", db=tmp_path / "db.sqlite").stdout
    assert iolab("lint", db=tmp_path / "db.sqlite").returncode == 2


def test_set_overrides_a_job_files_option_for_the_run_and_is_stored(tmp_path):
    db = tmp_path / "db.sqlite"
    proc = iolab("run", str(job(tmp_path, 1)), "--no-observe", "-q", "--set", "runtime=2s", "--set", "iodepth=2",
                 db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "fio options set for this run over the suite's: --set runtime=2s --set iodepth=2" in " ".join(
        proc.stdout.split())
    doc = json.loads(iolab("show", "1", "--format", "json", db=db).stdout)
    assert doc["run"]["options"]["set"] == {"runtime": "2s", "iodepth": "2"}
    (result,) = doc["results"]
    section = result["job_text"].split("[rr]", 1)[1]  # the job section: its own iodepth replaced, runtime added
    assert "runtime=2s" in section and "iodepth=2" in section and "iodepth=4" not in section
    assert result["jobs"][0]["job_options"]["runtime"] == "2s"  # as fio ran it
    for bad, said in ((["--set", "filename=/dev/sda"], "--set filename: where fio does I/O is the target's"),
                      (["--set", "=1"], "--set '=1': expected a fio option KEY=VALUE")):
        refused = iolab("run", str(job(tmp_path, 1)), *bad, db=db, cwd=tmp_path)
        assert refused.returncode == 2 and f"Error: {said}" in refused.stderr, refused.stderr


def test_help_suite_prints_the_suite_files_keys_from_its_model(tmp_path):
    from iolab.describe.schema import SuiteModel, TargetModel
    proc = iolab("help", "suite", "--format", "json", db=tmp_path / "db.sqlite", env={"PATH": "/nonexistent"})
    assert proc.returncode == 0, proc.stderr
    models = json.loads(proc.stdout)["models"]
    suite_keys, target_keys = ([r["key"] for r in rows] for rows in list(models.values())[:2])
    assert suite_keys == list(SuiteModel.model_fields) and target_keys == list(TargetModel.model_fields)
    assert all(r["what"] for rows in models.values() for r in rows)  # every key says what it is
    table = " ".join(iolab("help", "suite", db=tmp_path / "db.sqlite").stdout.split())
    assert "workloads list of mappings (required) one mapping of fio options per workload" in table
    assert "P16" in iolab("help", "lint", db=tmp_path / "db.sqlite").stdout
    assert iolab("help", "nosuch", db=tmp_path / "db.sqlite").returncode == 2


def test_exit_codes_as_the_manual_lists_them(tmp_path):
    """0 ok, 1 runtime failure, 2 usage, suite error or a refused plan (the same for run and lint);
    3 (regression) and 130 (interrupted) have their own tests (compare's; run's Ctrl-C in tests/cli/test_run.py)."""
    manual = (ROOT / "docs" / "suites.md").read_text()
    assert "Exit codes: 0 ok, 1 runtime failure, 2 usage or suite error or a\nrefused plan" in manual
    db = tmp_path / "db.sqlite"
    assert iolab("--version", db=db).returncode == 0
    # 1: fio fails at run time; an output that cannot be read
    (tmp_path / "zeros").write_bytes(bytes(2**20))  # read back as if fio had written it: verify fails
    (tmp_path / "bad.fio").write_text(f"[j]\nrw=read\nsize=1m\nfilename={tmp_path}/zeros\nverify=crc32c\n")
    failed = iolab("run", "bad.fio", "--no-observe", db=db, cwd=tmp_path)
    assert failed.returncode == 1 and "errno 84" in failed.stderr, failed.stderr  # EILSEQ: fio's verify failed
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
