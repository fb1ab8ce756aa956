"""A finished result is never lost to the results database (issue 24), where the fault is a real one: iolab
killed (-9) while a result waits to be written or while fio runs, and SQLite on a real tmpfs that fills
up mid-run, has too little room, or is read-only. Real fio, the CLI in a subprocess, a real SQLite.
(A lock's bookkeeping in-process: ``tests/cli/test_db_faults.py``; PostgreSQL restarted, stopped, read-only:
``tests/system/test_db_faults.py``.)

Each fault test counts, once the run is done (resumed where it stopped), the results lost (planned
jobs without a stored ``ok`` result) and duplicated (result rows or fio log series stored twice) and
asserts 0 of each; and that no job started while the database was away.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from clirun import iolab, popen, wait_for
from faultedruns import (
    Lock,
    Logged,
    errors,
    lost_and_duplicated,
    ok_results,
    running,
    spooled,
    started_between,
    state_env,
    suite,
    work_dirs,
)
from iolab.store.database import Store
from paths import DATA


def test_a_result_whose_database_write_was_killed_arrives_on_resume(tmp_path):
    db = tmp_path / "db.sqlite"
    url = f"sqlite:///{db}"
    env = state_env(tmp_path)
    proc = popen("run", str(suite(tmp_path, jobs=3)), "--no-observe", db=db, cwd=tmp_path, env=env)
    wait_for(lambda: running(url, seq=1), 60)
    lock = Lock(db)
    try:
        wait_for(lambda: spooled(tmp_path), 30)  # the next job ended; its write waits for the lock
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        lock.release()
    (sealed,) = spooled(tmp_path)
    result_id = int(sealed.parent.name.removeprefix("result-"))
    kept = json.loads(sealed.read_text())
    # not stored; its process is gone, so it reads as interrupted (facts/owner.py)
    assert {r.id: r.status for r in Store(url).get_run(1).results}[result_id] == "interrupted"
    resumed = iolab("run", "--resume", "1", db=db, cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    (stored,) = [r for r in Store(url).get_run(1).results if r.id == result_id]
    assert stored.status == "ok" and stored.report is not None
    (direction,) = stored.report.jobs[0].directions.values()
    assert direction.iops == kept["report"]["jobs"][0]["directions"][direction.direction]["iops"]
    assert direction.iops > 0
    assert lost_and_duplicated(url, planned=3) == (0, 0)


def test_work_directories_of_a_run_killed_mid_fio_are_removed_on_resume(tmp_path):
    db = tmp_path / "db.sqlite"
    env = state_env(tmp_path)
    proc = popen("run", str(suite(tmp_path, jobs=2)), "--no-observe", db=db, cwd=tmp_path, env=env)
    wait_for(lambda: any((d / "fio-output.json").exists() or (d / "job.fio").exists() for d in work_dirs(tmp_path)),
             60)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)  # fio, if it outlived iolab
    assert work_dirs(tmp_path) and not spooled(tmp_path)
    resumed = iolab("run", "--resume", "1", db=db, cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert work_dirs(tmp_path) == []
    assert lost_and_duplicated(f"sqlite:///{db}", planned=2) == (0, 0)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs of its own (root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "dbfs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", f"iolab-test-{os.getpid()}", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def fill(directory: Path, leave_bytes: int = 0) -> Path:
    """Fill the file system of ``directory`` but ``leave_bytes``; returns the filler file."""
    filler = directory / "filler"
    # unbuffered: a buffered file keeps what the full disk refused and raises ENOSPC again as it closes
    with open(filler, "wb", buffering=0) as handle:
        try:
            while handle.write(b"\0" * 65536):
                pass
        except OSError:
            pass
    os.truncate(filler, max(0, filler.stat().st_size - leave_bytes))
    return filler


@pytest.mark.root
def test_sqlite_on_a_tmpfs_filled_mid_run_and_freed(tmp_path, small_fs):
    db = small_fs / "db.sqlite"
    url = f"sqlite:///{db}"
    run = Logged("run", str(suite(tmp_path)), "--no-observe", db=db, cwd=tmp_path, env=state_env(tmp_path),
                 log=tmp_path / "run.log")
    try:
        wait_for(lambda: ok_results(url) >= 1, 60)
        filler = fill(small_fs)
        full_since = datetime.now(UTC)
        wait_for(lambda: run.said("database away: waited"), 60)  # a write met the full disk and is retried
        filler.unlink()
        freed = datetime.now(UTC)
    except BaseException:  # not left running on the file system the fixture unmounts
        run.proc.kill()
        raise
    finally:
        returncode, err = run.finish(timeout=120)
    assert returncode == 0, err
    assert "the results database answered again after" in err
    assert lost_and_duplicated(url) == (0, 0)
    assert started_between(url, full_since + timedelta(seconds=1), freed) == []


@pytest.mark.root
def test_sqlite_with_too_little_room_is_refused_before_fio_runs(tmp_path, small_fs):
    db = small_fs / "db.sqlite"
    Store(f"sqlite:///{db}").close()  # the database exists
    fill(small_fs, leave_bytes=64 * 1024)
    proc = iolab("run", str(suite(tmp_path)), "--no-observe", db=db, cwd=tmp_path, env=state_env(tmp_path))
    assert proc.returncode == 1
    error = errors(proc)
    assert error[0].startswith(f"Error: the results database sqlite:///{db} is on a file system with "), error
    assert "KiB free; this run's 6 result(s) need about" in error[0]
    assert error[1] == f"Hint: free space on {small_fs}, or give another database with --db"
    assert not (tmp_path / "data.bin").exists()  # fio never ran


@pytest.mark.root
def test_read_only_database_is_named_as_such_and_still_read(tmp_path, small_fs):
    db = small_fs / "db.sqlite"
    samples = DATA / "fio"
    imported = iolab("import", str(samples / "fio-3.33_randrw_libaio.json"),
                     str(samples / "fio-3.33_randrw_posixaio.json"), db=db)
    assert imported.returncode == 0, imported.stderr
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    try:
        for command in (["runs"], ["show", "1"], ["compare", "1", "2"],
                        ["report", "1", "-o", str(tmp_path / "r.html")]):
            proc = iolab(*command, db=db, cwd=tmp_path)
            assert proc.returncode in (0, 3), (command, proc.stderr)  # compare: 3 when it finds a regression
        proc = iolab("run", "--resume", "1", db=db, cwd=tmp_path, env=state_env(tmp_path))
        assert proc.returncode == 1
        error = errors(proc)
        assert error == [f"Error: the results database sqlite:///{db} is on a read-only file system ({small_fs}); "
                         "results cannot be stored there",
                         "Hint: give a writable database with --db or $IOLAB_DB (reading commands such as runs, "
                         "show, report and compare work on this one)"]
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_fs)], check=False)
    # without CAP_DAC_OVERRIDE root meets file permissions as anyone does
    no_override = ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
                   "--inh-caps=-dac_override,-dac_read_search"]
    os.chmod(db, 0o444)
    proc = iolab("run", "--resume", "1", db=db, wrapper=no_override)
    assert proc.returncode == 1
    assert errors(proc)[0].startswith(f"Error: the results database sqlite:///{db} is a read-only file (no write "
                                      "permission for this user)"), proc.stderr
    os.chmod(db, 0o644)
    os.chmod(small_fs, 0o555)
    proc = iolab("run", "--resume", "1", db=db, wrapper=no_override)
    assert f"is in a read-only directory ({small_fs}: no write permission" in errors(proc)[0]
