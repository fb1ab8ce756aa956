"""``iolab run --resume`` checks every job left as a plan's are, before any fio starts."""

from __future__ import annotations

from inprocess import iolab
from iolab.store.database import Store

SUITE = """\
targets: {{a: {tmp}/a.dat, b: {tmp}/b.dat, kept: {tmp}/kept.dat}}
defaults: {{ioengine: psync, size: 4m, time_based: 1, runtime: 1s, bs: 4k}}
workloads:
  - {{rw: randwrite}}
"""


def test_resume_refuses_a_write_it_may_not_make_before_any_job_runs(tmp_path, fake_fio):
    """The run was given --destroy for the file with data; resumed without it, it refused the third target
    only after running the second (main, 2026-12-02), leaving the run half resumed. Now the whole rest
    is checked first, nothing runs, and the refusal names the --destroy the run was started with."""
    kept = tmp_path / "kept.dat"
    kept.write_bytes(b"somebody's data!" * 262144)  # 4 MiB: the job's size, so fio writes it in place
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE.format(tmp=tmp_path))
    db = tmp_path / "iolab.db"
    fake_fio.fault("interrupt", at=1)
    first = iolab("run", str(suite), "--destroy", str(kept), db=db, cwd=tmp_path)
    assert first.returncode == 130, first.stderr
    ran = len(fake_fio.runs)

    refused = iolab("run", "--resume", "1", db=db, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert f"refusing to write to {kept}" in refused.stderr
    assert f"the interrupted run was started with --destroy {kept}" in refused.stderr
    assert len(fake_fio.runs) == ran  # no fio started
    run = Store(f"sqlite:///{db}").get_run(1)
    assert [r.status for r in run.results] == ["ok", "interrupted", "pending"] and run.info.status == "interrupted"

    resumed = iolab("run", "--resume", "1", "--destroy", str(kept), db=db, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert [r.status for r in Store(f"sqlite:///{db}").get_run(1).results] == ["ok"] * 3
