"""What a resumed run repeats, in-process (fio replayed): a preconditioning fill that finished before the
run stopped in its measured phase is not done again by ``--resume``. (After a real kill -9:
``tests/integration/test_run_cleanup_resume.py``.)"""

from __future__ import annotations

from inprocess import iolab
from iolab.store.database import Store


def test_resume_after_ctrl_c_in_the_measured_phase_does_not_fill_again(tmp_path, fake_fio):
    db = tmp_path / "db.sqlite"
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        f"name: pre\ntargets: {{data: {tmp_path / 'data.bin'}}}\nprecondition: {{fill: 1x, bs: 128k}}\n"
        "defaults: {ioengine: psync, size: 16m, time_based: 1, runtime: 1s}\nworkloads: [{name: r, rw: randread}]\n")
    fake_fio.fault("interrupt", at=1)  # the fill is fio's first job, the measured job its second
    stopped = iolab("run", str(suite), "--no-observe", db=db, cwd=tmp_path)
    assert stopped.returncode == 130, stopped.stderr
    assert "writing the region" in stopped.stderr
    run = Store(f"sqlite:///{db}").get_run(1)
    assert run.info.options["filled"] and run.results[0].status == "interrupted"  # the fill is stored as done
    resumed = iolab("run", "--resume", "1", "--no-observe", db=db, cwd=tmp_path)
    assert resumed.returncode == 2 and "--resume takes no" in resumed.stderr  # the plan is stored
    resumed = iolab("run", "--resume", "1", db=db, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "writing the region" not in resumed.stderr
    (result,) = Store(f"sqlite:///{db}").get_run(1).results
    assert result.status == "ok"
    assert result.extra["precondition"]["fill"] == {"times": 1, "bs": "128k", "skipped": "done earlier in this run"}
    assert len(fake_fio.runs) == 3  # the fill, the interrupted job, the job again: fio never filled twice
