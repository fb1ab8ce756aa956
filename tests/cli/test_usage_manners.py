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
