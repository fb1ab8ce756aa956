"""`iolab run`, `runs` and `show` end to end: real fio on small files, a real SQLite database."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from inprocess import iolab
from iolab.report.table import read_csv
from iolab.store.database import Store

SMALL = """\
name: small
targets:
  scratch: {scratch}
defaults: {{ioengine: libaio, direct: 1, size: 16m, time_based: 1, runtime: 1s}}
repeat: 2
workloads:
  - {{rw: randread, bs: 4k, iodepth: [1, 8]}}
  - {{name: mixed, rw: randrw, rwmixread: 70, bs: 4k, iodepth: 4, numjobs: 2}}
"""


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "iolab.db"


def write_suite(tmp_path: Path, text: str, name: str = "suite.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_run_show_json_csv_markdown(tmp_path, db):
    suite = write_suite(tmp_path, SMALL.format(scratch=tmp_path / "scratch.dat"))
    proc = iolab("run", str(suite), "--label", "first", "--tag", "path=local", db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Plan: suite small — 6 fio run(s), estimated 6s" in proc.stderr
    assert "randread-4k-qd8" in proc.stdout and "mixed" in proc.stdout
    assert not (tmp_path / "scratch.dat").exists()  # the scratch file iolab created is removed

    doc = json.loads(iolab("show", "first", "--format", "json", db=db).stdout)
    assert doc["schema"] == "iolab.run/1"
    assert doc["run"]["label"] == "first" and doc["run"]["tags"] == {"path": "local"}
    assert doc["run"]["status"] == "complete" and doc["run"]["host"]["cpu_count"] == os.cpu_count()
    assert len(doc["results"]) == 6 and {r["status"] for r in doc["results"]} == {"ok"}
    first = doc["results"][0]
    assert first["job_text"].startswith("; iolab: workload randread-4k-qd1 on target scratch")
    assert first["fio_version"] and first["command"].startswith(("fio", "/"))
    read = first["jobs"][0]["directions"]["read"]
    assert read["iops"] == pytest.approx(read["total_ios"] * 1000 / read["runtime_ms"])
    assert read["clat"]["percentiles_ns"]["99"] > 0 and "bins_ns" not in read["clat"]
    assert first["target_facts"]["kind"] == "file"  # described after fio laid the scratch file out
    mixed = next(r for r in doc["results"] if r["workload"] == "mixed")
    assert len(mixed["jobs"]) == 2  # numjobs clones, one report entry each
    total = sum(j["directions"]["read"]["total_ios"] for j in mixed["jobs"])
    assert mixed["summary"]["read"]["total_ios"] == total
    rows = {(r["workload"], r["direction"]): r for r in doc["summary"]}
    assert rows[("mixed", "write")]["repeats"] == 2 and len(rows[("mixed", "write")]["iops"]["values"]) == 2

    csv = iolab("show", "1", "--format", "csv", db=db)
    (_, rows), = read_csv(csv.stdout)  # the results, their header first; their title and the other tables: stderr
    tables = read_csv(csv.stderr)
    assert tables[0][0] == "run 1: small [first] (complete)"
    assert ",".join(rows[0]) == ("target,workload,direction,repeats,iops,iops_cv_pct,bw_mib_s,bw_cv_pct,"
                                 "clat_mean_ns,clat_mean_cv_pct,clat_p99_ns,clat_p99_cv_pct")  # figures, spreads, units
    assert len(rows) == 1 + 4
    # then this host's cost (observed from /proc without setup)
    title, rows = tables[1]  # stderr's
    assert title == "run 1: every host's cost" and "cpu_us_per_io" in rows[0] and "cpu_busy_pct" in rows[0]
    md = iolab("show", "1", "--format", "markdown", db=db).stdout
    assert "| target | workload | dir | n | IOPS ±CV | MiB/s ±CV |" in md  # which spread the ± is
    listing = iolab("runs", db=db).stdout
    assert "first" in listing and "complete" in listing and "path=local" in listing


def test_a_methodology_warning_never_stops_a_job_file(tmp_path, db):
    """P6 on any machine: two jobs pinned to one CPU. The job file runs unchanged; the finding is a
    warning, shown before the run and stored with it."""
    jobfile = tmp_path / "pinned.fio"
    jobfile.write_text("[pinned]\nioengine=psync\nrw=randread\nbs=4k\nsize=4m\nnumjobs=2\ncpus_allowed=0\n"
                       "time_based\nruntime=1\n")
    proc = iolab("run", str(jobfile), "--target", f"data={tmp_path / 'data.bin'}", db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "P6 warning" in proc.stderr and "0 error(s)" in proc.stderr
    run = Store(f"sqlite:///{db}").get_run(1)
    assert any(w.startswith("P6 ") and "2 fio jobs run at once on 1 usable CPU" in w for w in run.info.warnings)
    assert run.results[0].status == "ok"


def test_lint_refuses_what_fio_rejects_and_run_never_starts_it(tmp_path, db):
    """The only lint errors are what is invalid or dangerous: here a job fio rejects."""
    jobfile = tmp_path / "typo.fio"
    jobfile.write_text("[typo]\nrw=randread\nbs=4k\nsize=4m\niodepht=8\n")
    target = f"data={tmp_path / 'data.bin'}"
    linted = iolab("lint", str(jobfile), "--target", target, db=db, cwd=tmp_path)
    assert linted.returncode == 2 and "FIO error" in linted.stdout and "iodepth" in linted.stdout
    refused = iolab("run", str(jobfile), "--target", target, db=db, cwd=tmp_path)
    assert refused.returncode == 2 and "fio rejects the job" in refused.stderr
    assert not (tmp_path / "data.bin").exists()  # nothing was laid out


def test_issue_job_file_runs_unchanged_with_target(tmp_path, db):
    jobfile = tmp_path / "fio_test_config.fio"
    jobfile.write_text("[global]\nioengine=libaio\ndirect=1\nthread=1\nrw=randrw\nbs=4k\nnumjobs=4\nsize=256M\n"
                       "runtime=10\ntime_based\ngroup_reporting\n\n[randwrite]\n")
    target = f"data={tmp_path / 'data.bin'}"
    proc = iolab("run", str(jobfile), "--target", target, db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr  # as it is: numjobs=4 on fewer CPUs is a P6 warning only
    run = Store(f"sqlite:///{db}").get_run(1)
    assert any(w.startswith("P6 ") for w in run.info.warnings) == ((os.cpu_count() or 1) < 4)
    (result,) = run.results
    assert result.workload == "fio_test_config" and result.target == "data"
    assert "filename=" + str(tmp_path / "data.bin") in result.job_text
    (job,) = result.report.jobs  # group_reporting: one entry for the 4 jobs
    assert job.name == "randwrite" and job.job_runtime_ms >= 4 * 9000
    assert set(job.directions) == {"read", "write"}
    assert "randwrite" in proc.stdout


def test_directory_target_files_are_removed_but_not_others(tmp_path, db):
    data = tmp_path / "dir"
    data.mkdir()
    (data / "keep.me").write_text("x")
    suite = write_suite(tmp_path, SMALL.format(scratch=data).replace("repeat: 2", "repeat: 1"))
    assert iolab("run", str(suite), db=db).returncode == 0
    assert sorted(os.listdir(data)) == ["keep.me"]
    assert iolab("run", str(suite), "--keep-files", db=db).returncode == 0
    assert "randread-4k-qd1.0.0" in os.listdir(data)


def test_malformed_suite_is_exit_2_with_place(tmp_path, db):
    suite = write_suite(tmp_path, "workloads:\n  - {rw: randread}\n  - {rw: read, bs: 4x}\n")
    proc = iolab("run", str(suite), db=db)
    assert proc.returncode == 2
    assert f"Error: {suite}:3: workloads[1].bs: expected a size like 4k or 1m, got '4x'" in proc.stderr
    assert "Traceback" not in proc.stderr
    typo = write_suite(tmp_path, "workloads:\n  - {rw: read, size: 1m, iodepht: 4}\n", "typo.yaml")
    proc = iolab("run", str(typo), "--target", f"x={tmp_path}/f", db=db)
    assert proc.returncode == 2 and "Did you mean iodepth?" in proc.stderr and "workloads[0]" in proc.stderr


def test_a_failing_job_is_recorded_and_the_suite_goes_on(tmp_path, db):
    suite = write_suite(tmp_path, f"""\
targets: {{t: {tmp_path}/f.dat}}
defaults: {{size: 8m, time_based: 1, runtime: 1s}}
workloads:
  - {{name: broken, ioengine: libaio, direct: 1, bs: 1000, rw: randread}}
  - {{name: fine, ioengine: psync, rw: randread, bs: 4k}}
""")
    proc = iolab("run", str(suite), db=db)
    assert proc.returncode == 1
    assert "errno 22" in proc.stderr and "Some jobs failed" in proc.stderr
    run = Store(f"sqlite:///{db}").get_run(1)
    assert [r.status for r in run.results] == ["failed", "ok"] and run.info.status == "failed"
    assert "Invalid argument" in run.results[0].error
    assert "failed: t/broken" in iolab("show", "1", db=db).stdout


def test_fio_missing_is_one_line(tmp_path, db):
    proc = iolab("run", "quick", "--target", f"x={tmp_path}/f", db=db, env={"PATH": "/nonexistent"})
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0].startswith("Error: fio is not installed")
    assert "apt-get install fio" in proc.stderr and "Traceback" not in proc.stderr


def test_dry_run_prints_job_files_and_runs_nothing(tmp_path, db):
    proc = iolab("run", "quick", "--target", f"s={tmp_path}/x", "--dry-run", db=db)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("[randread-4k-qd32]") == 1 and "ramp_time=2s" in proc.stdout
    assert "estimated 48s" in proc.stderr
    assert not db.exists() or Store(f"sqlite:///{db}").list_runs() == []


RESUMABLE = """\
targets: {{t: {path}}}
defaults: {{ioengine: psync, size: 8m, time_based: 1, runtime: 2s, bs: 4k}}
workloads:
  - {{rw: [randread, read, randwrite, write]}}
"""


def test_user_strings_are_not_rich_markup(tmp_path, db):
    suite = write_suite(tmp_path, f"targets: {{t: {tmp_path / 'f'}}}\n"
                        "workloads:\n  - {name: '[bold]w', rw: read, size: 1m, ioengine: 'null'}\n")
    proc = iolab("run", str(suite), "--label", "[red]base[/]", db=db)
    assert proc.returncode == 0, proc.stderr
    assert "[red]base[/]" in proc.stdout


def test_ctrl_c_keeps_finished_results_exits_130_and_resume_runs_only_the_rest(tmp_path, db, fake_fio):
    suite = write_suite(tmp_path, RESUMABLE.format(path=tmp_path / "f.dat"))
    fake_fio.fault("interrupt", at=1)  # Ctrl-C while the second job runs
    proc = iolab("run", str(suite), db=db, cwd=tmp_path)
    assert proc.returncode == 130, proc.stderr
    assert "iolab run --resume 1" in proc.stderr
    run = Store(f"sqlite:///{db}").get_run(1)
    assert run.info.status == "interrupted"
    assert [r.status for r in run.results] == ["ok", "interrupted", "pending", "pending"]
    assert not (tmp_path / "f.dat").exists()  # the scratch file is removed on the way out

    resumed = iolab("run", "--resume", "1", db=db, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "[1/3]" in resumed.stderr and "[3/3]" in resumed.stderr
    after = Store(f"sqlite:///{db}").get_run(1)
    assert after.info.status == "complete" and [r.status for r in after.results] == ["ok"] * 4
    assert after.results[0].ended_at == run.results[0].ended_at  # what had finished is not run again
    assert [r.job_text for r in fake_fio.runs[2:]] == [r.job_text for r in after.results[1:]]
    assert Store(f"sqlite:///{db}").integrity_problems() == []

