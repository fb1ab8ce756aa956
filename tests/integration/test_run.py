"""`iolab run` as a process: kill -9 then --resume, Ctrl-C over a real process, and the plan's room checks on
a real tmpfs. Real fio on small files, a real SQLite database. (The rest of `run`, `runs` and `show`,
in-process: ``tests/cli/test_run.py``.)"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import iolab as iolab_pkg
from clirun import iolab, popen, wait_for
from iolab.store.database import Store


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "iolab.db"


def write_suite(tmp_path: Path, text: str, name: str = "suite.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def state(tmp_path: Path) -> dict[str, str]:
    """The run's own state directory (its spool: fio's work directories)."""
    return {"XDG_STATE_HOME": str(tmp_path / "state")}


def processes_in(directory: Path) -> list[int]:
    """Processes whose command line names something in ``directory`` (fio's job file is in the spool)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if str(directory).encode() in f.read():
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def status_of(db: Path, seq: int) -> str | None:
    """The stored status of run 1's job ``seq``."""
    if not db.exists():
        return None
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT status FROM results WHERE run_id = 1 AND seq = ?", (seq,)).fetchone()
    except sqlite3.OperationalError:
        return None
    return row[0] if row else None


def _wait_for_ok_results(db: Path, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            with sqlite3.connect(db) as conn:
                try:
                    done = conn.execute("select count(*) from results where status='ok'").fetchone()[0]
                except sqlite3.OperationalError:
                    done = 0
            if done >= count:
                return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} results finished in {timeout}s")


RESUMABLE = """\
targets: {{t: {path}}}
defaults: {{ioengine: psync, size: 8m, time_based: 1, runtime: 1s, bs: 4k}}
workloads:
  - {{rw: [randread, read, randwrite, write]}}
"""


def test_kill_9_then_resume_loses_and_repeats_nothing(tmp_path, db):
    suite = write_suite(tmp_path, RESUMABLE.format(path=tmp_path / "f.dat"))
    proc = popen("run", str(suite), db=db, cwd=tmp_path, env=state(tmp_path))
    _wait_for_ok_results(db, 2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    store = Store(f"sqlite:///{db}")
    before = {r.seq: (r.status, r.ended_at) for r in store.get_run(1).results}
    finished = {seq for seq, (status, _) in before.items() if status == "ok"}
    assert len(finished) >= 2 and len(finished) < 4
    # fio got SIGTERM from the kernel when iolab died (PR_SET_PDEATHSIG)
    wait_for(lambda: not processes_in(tmp_path / "state"), 30)

    resumed = iolab("run", "--resume", "1", db=db, cwd=tmp_path, env=state(tmp_path))
    assert resumed.returncode == 0, resumed.stderr
    after = Store(f"sqlite:///{db}").get_run(1)
    assert after.info.status == "complete" and all(r.status == "ok" for r in after.results)
    for seq in finished:  # nothing that had finished was run again
        assert (after.results[seq].status, after.results[seq].ended_at) == before[seq]
    assert f"[1/{4 - len(finished)}]" in resumed.stderr
    assert Store(f"sqlite:///{db}").integrity_problems() == []
    assert not (tmp_path / "f.dat").exists()


def test_ctrl_c_keeps_finished_results_and_exits_130(tmp_path, db):
    suite = write_suite(tmp_path, RESUMABLE.format(path=tmp_path / "f.dat"))
    proc = popen("run", str(suite), db=db, cwd=tmp_path, env=state(tmp_path))
    _wait_for_ok_results(db, 1)
    wait_for(lambda: status_of(db, 1) == "running", 30)  # the second job runs
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "iolab run --resume 1" in stderr
    run = Store(f"sqlite:///{db}").get_run(1)
    assert run.info.status == "interrupted"
    statuses = [r.status for r in run.results]
    assert statuses[0] == "ok" and "interrupted" in statuses and "running" not in statuses


@pytest.mark.root
def test_every_plan_is_checked_for_room_and_a_directory_that_is_not_there(tmp_path, db):
    """The field reports' plan mistakes, caught before fio: a job file's [global] size × numjobs on a
    small directory target and in iolab's work directory (its own files); a suite's `filename:` on a
    directory target is the clones' shared file (its room is one size, not one per clone); a target in a
    directory that does not exist."""
    from loopdev import tmpfs
    with tmpfs(tmp_path / "small", "64m") as small, tmpfs(tmp_path / "state", "64m") as state:
        job = tmp_path / "fio_test_config.fio"  # the ESXi report's job file, 32G made 24m
        job.write_text("[global]\nioengine=libaio\ndirect=0\nthread=1\nrw=randrw\nbs=4k\nnumjobs=4\nsize=24m\n"
                       "runtime=1\ngroup_reporting\n\n[randwrite]\n")
        on_target = iolab("run", str(job), "--target", f"data={small}/", db=db, cwd=tmp_path)
        assert on_target.returncode == 2
        assert f"refusing to lay out 96.00 MiB at {small}: tmpfs at {small} has 64.00 MiB free" in on_target.stderr
        own = iolab("run", str(job), db=db, cwd=tmp_path, env={"XDG_STATE_HOME": str(state)})
        assert own.returncode == 2 and "refusing to lay out 96.00 MiB at " + str(state) in own.stderr
        shared = tmp_path / "s.yaml"
        shared.write_text(f"targets: {{d: {small}}}\nworkloads:\n  - {{rw: randwrite, bs: 64k, filename: f.bin, "
                          "numjobs: 4, size: 40m, runtime: 1s, time_based: 1, group_reporting: 1}\n")
        ran = iolab("run", str(shared), "--no-observe", "--keep-files", db=db, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        assert sorted(p.name for p in small.iterdir()) == ["f.bin"] and (small / "f.bin").stat().st_size == 40 * 2**20
        apart = tmp_path / "a.yaml"
        apart.write_text(f"targets: {{d: {small}}}\nworkloads:\n  - {{rw: randwrite, bs: 64k, numjobs: 4, "
                         "size: 20m}\n")
        refused = iolab("run", str(apart), db=db, cwd=tmp_path)
        assert refused.returncode == 2 and "refusing to lay out 80.00 MiB" in refused.stderr
        null = tmp_path / "null.fio"  # fio's examples/null.fio: an engine that lays out nothing needs no room
        null.write_text("[null]\nioengine=null\nsize=100g\nrw=randread\nbs=4k\nnorandommap\nruntime=1\n")
        nothing = iolab("run", str(null), "--no-observe", db=db, cwd=tmp_path, env={"XDG_STATE_HOME": str(state)})
        assert nothing.returncode == 0, nothing.stderr
    for spelling, missing in ((f"{tmp_path}/nosuch/dir/", f"{tmp_path}/nosuch/dir"),
                              (f"{tmp_path}/nosuch/f.bin", f"{tmp_path}/nosuch")):
        proc = iolab("run", "quick", "--target", f"x={spelling}", db=db, cwd=tmp_path)
        assert proc.returncode == 2
        assert f"target x: the directory {missing} does not exist" in proc.stderr
    assert not (tmp_path / "nosuch").exists()


def test_a_run_from_the_directory_that_holds_iolab_and_its_python(tmp_path):
    """The README's quick start: `make run` in the checkout, so the scratch file's directory, which the fence
    replaces with iolab's own (``runner.stage``), also holds the virtualenv and the source tree. The fence
    started Landlock's launcher by those paths, which it had just hidden: every job failed with
    ``bwrap: execvp …/.venv/bin/python: No such file or directory``."""
    venv = tmp_path / "venv"
    venv.symlink_to(Path(sys.prefix))  # the interpreter reached through the directory, as .venv/bin/python is
    shutil.copytree(Path(iolab_pkg.__file__).parent, tmp_path / "src" / "iolab")
    job = tmp_path / "j.fio"
    job.write_text("[j]\nrw=randwrite\nbs=4k\nsize=1m\nioengine=psync\n")
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "iolab", "run", str(job), "--target",
                           f"d={tmp_path}/scratch.bin", "--no-observe"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path / "src"), "IOLAB_DB": str(tmp_path / "db")},
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok after" in proc.stdout + proc.stderr and "Landlock" in proc.stdout + proc.stderr
