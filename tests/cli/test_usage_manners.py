"""Small manners of the command line (issue 43): usage errors exit 2 and name what would be valid. In-process,
fio replayed (``fakefio``)."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

import historydata
from inprocess import iolab


@pytest.fixture
def runs(tmp_path) -> Path:
    db = tmp_path / "iolab.db"
    db.write_bytes(lzma.decompress(historydata.LOOP_RUNS.read_bytes()))
    return db


def test_an_unknown_by_axis_is_called_unknown_with_the_valid_ones(runs):
    typo = iolab("compare", "9", "--by", "iodept", db=runs)
    assert typo.returncode == 2
    assert "Error: --by iodept: unknown axis (did you mean iodepth?)" in typo.stderr
    assert "Hint: valid axes: target, pin, bs, direct, iodepth, ioengine, numjobs" in typo.stderr
    flat = iolab("compare", "9", "--by", "numjobs", db=runs)  # a known axis the run does not vary: as before
    assert flat.returncode == 2 and "the selection has 1 value(s) of numjobs" in flat.stderr


def test_tuning_a_target_cannot_have_is_a_refused_plan_exit_2(tmp_path):
    job = tmp_path / "job.fio"
    job.write_text(f"[j]\nrw=read\nbs=4k\nsize=1m\ndirectory={tmp_path}\n")
    proc = iolab("run", str(job), "--tune", "scheduler=bogus", "--dry-run", db=tmp_path / "db.sqlite", cwd=tmp_path)
    assert proc.returncode == 2 and "Error: scheduler" in proc.stderr, proc.stderr


def test_a_suite_key_typo_gets_did_you_mean(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(f"name: s\ntarget: {{a: {tmp_path}}}\nworkloads: [{{rw: read, bs: 4k}}]\n")
    proc = iolab("lint", str(suite), db=tmp_path / "db.sqlite")
    assert proc.returncode == 2
    assert f"Error: {suite}:2: target: unknown key; did you mean `targets`?" in proc.stderr


def test_capture_of_no_duration_is_refused_up_front(tmp_path):
    db = tmp_path / "db.sqlite"
    for zero in ("0s", "0", "0ms"):
        proc = iolab("capture", "/dev/iolab-none", "--duration", zero, db=db)
        assert proc.returncode == 2, proc
        assert f"Error: --duration {zero}: a capture needs a duration above zero" in proc.stderr
    assert not db.exists()  # nothing stored, nothing traced


def test_a_dry_run_shows_the_plan_and_lists_what_a_run_would_refuse_at_its_end(tmp_path):
    job = tmp_path / "job.fio"
    job.write_text(f"[j]\nrw=read\nbs=4k\nsize=1m\ndirectory={tmp_path}\nexec_prerun=true\n")
    proc = iolab("run", str(job), "--dry-run", db=tmp_path / "db.sqlite", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "exec_prerun=true" in proc.stdout and "# jobfile / j" in proc.stdout  # the plan and its job file
    refused = proc.stderr.split("Refused: 1 error(s) a run stops at before fio starts\n", 1)
    assert len(refused) == 2 and "P16 error" in refused[1] and "--allow-exec" in refused[1], proc.stderr
    assert "P16" not in refused[0]  # listed once, at the end
    assert "Error: a run of job would be refused: 1 error(s), listed above" in proc.stderr
    assert iolab("run", str(job), "--dry-run", "--allow-exec", db=tmp_path / "db.sqlite", cwd=tmp_path).returncode == 0
