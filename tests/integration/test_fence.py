"""The fence (bubblewrap) around every local fio: what it enforces, and that what must work still works
inside it — a blank --destroy device with direct=1 on libaio and io_uring, file and directory
targets, logs, passes, verify state and a crash test, saturate, autotune — with real fio and loop
devices; and that a writing run without a fence refuses unless --no-fence. A fenced fio server:
tests/system/test_fence_server.py.

Each test keeps iolab's state (spool, marks, tuning journal) in a directory of its own, so the tests
run in parallel."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clirun import iolab
from iolab.runner import fence
from iolab.store.database import Store
from loopdev import MiB, loop_device, requires_loop

pytestmark = pytest.mark.skipif(not fence.status().ok, reason=f"no fence here: {fence.status().reason}")


@pytest.fixture(autouse=True)
def _own_state(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """iolab's state directory of this test (outside tmp_path, whose entries some tests list)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


def _inside(f: fence.Fence, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(f.argv(("sh", "-c", script)), capture_output=True, text=True, timeout=30, check=False)


@requires_loop
def test_only_the_planned_device_and_paths_are_writable(tmp_path: Path) -> None:
    """Inside: /dev holds the planned device and the harmless nodes only, and is read-only; the
    root is read-only; no capabilities; a pid namespace (the host's processes are not visible, so
    /proc/PID/root cannot reach the host's /dev); the work directory is the working directory."""
    work, target = tmp_path / "work", tmp_path / "target"
    work.mkdir()
    target.mkdir()
    with loop_device(tmp_path, 4 * MiB, "a.img") as planned, loop_device(tmp_path, 4 * MiB, "b.img") as other:
        f = fence.build({planned.path: fence.DESTROY, str(target): fence.DESTROY}, work)
        assert f.devices == (planned.path,) and f.write_devices == (planned.path,) and f.writable == (str(target),)
        seen = _inside(f, "ls /dev; grep CapEff /proc/self/status; ls /proc | grep -c '^[0-9]'; cat /proc/1/comm; "
                          f"pwd; "
                          f"touch {target}/ok && echo target-ok; touch {work}/ok && echo work-ok; "
                          f"touch /etc/iolab-x 2>&1; touch /dev/{other.name} 2>&1; "
                          f"dd if=/dev/zero of={other.path} bs=4k count=1 2>&1; "
                          f"dd if=/dev/zero of=/proc/1/root{other.path} bs=4k count=1 2>&1; "
                          f"mount -t devtmpfs x {target} 2>&1; "
                          f"dd if=/dev/zero of={planned.path} bs=4k count=1 2>&1 | tail -1")
        out = seen.stdout
        listed = set(out.split("CapEff")[0].split())
        assert planned.name in listed and other.name not in listed
        assert listed <= {planned.name, "core", "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr",
                          "stdin", "stdout", "tty", "urandom", "zero"}
        assert "CapEff:\t0000000000000000" in out
        pids, init = out.split("CapEff:\t0000000000000000")[1].split()[:2]
        assert int(pids) <= 5 and init == "bwrap"  # its own pid namespace: bwrap's init, sh, ls, grep
        assert str(work) in out and "target-ok" in out and "work-ok" in out
        assert "touch: cannot touch '/etc/iolab-x': Read-only file system" in out
        assert f"touch: cannot touch '/dev/{other.name}': Read-only file system" in out
        assert f"dd: failed to open '{other.path}': Read-only file system" in out
        assert f"dd: failed to open '/proc/1/root{other.path}'" in out
        assert "mount: " in out and "permission denied" in out
        assert "4096 bytes" in out  # the planned device is writable
        assert not (Path("/etc/iolab-x")).exists()


@requires_loop
@pytest.mark.skipif(not fence.status().landlock, reason="the kernel has no Landlock")
def test_a_device_a_job_only_reads_cannot_be_written_inside_the_fence(tmp_path: Path) -> None:
    """Landlock on top of bubblewrap: the device is there to be read, and opening it for writing
    is refused; iolab's work directory stays writable."""
    work = tmp_path / "work"
    work.mkdir()
    with loop_device(tmp_path, 4 * MiB) as loop:
        with open(loop.path, "r+b") as dev:
            dev.write(b"iolab-data" * 100)
        before = hashlib.md5(Path(loop.path).read_bytes()).hexdigest()
        f = fence.build({}, work, read=[loop.path])
        assert f.devices == (loop.path,) and f.write_devices == () and f.describe() == [f"{work} (iolab's work "
                                                                                        "directory)"]
        seen = _inside(f, f"head -c 10 {loop.path}; echo; dd if=/dev/zero of={loop.path} bs=4k count=1 2>&1; "
                          f"touch {work}/ok && echo work-ok; echo x > /dev/null && echo null-ok")
        assert seen.stdout.startswith("iolab-data")
        assert f"dd: failed to open '{loop.path}': Permission denied" in seen.stdout
        assert "work-ok" in seen.stdout and "null-ok" in seen.stdout
        assert hashlib.md5(Path(loop.path).read_bytes()).hexdigest() == before


def _suite(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


@requires_loop
def test_a_blank_destroy_device_with_direct_io_on_libaio_and_io_uring(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    with loop_device(tmp_path, 16 * MiB) as loop:
        suite = _suite(tmp_path, f"targets: {{dev: {loop.path}}}\n"
                                 "defaults: {direct: 1, size: 8m, time_based: 1, runtime: 1s, bs: 4k, iodepth: 8}\n"
                                 "workloads:\n  - {rw: randwrite, ioengine: [libaio, io_uring]}\n"
                                 "  - {rw: randread, ioengine: io_uring}\n")
        proc = iolab("run", str(suite), "--destroy", loop.path, "--no-observe", db=db, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "fence: bubblewrap" in proc.stderr
        assert f"fio may write only: {loop.path} (--destroy), iolab's work directory" in proc.stderr
        store = Store(f"sqlite:///{db}")
        results, series = store.get_run(1).results, store.time_series(1)
        assert len(results) == 3
        for r in results:
            assert r.status == "ok" and r.report is not None, r.error
            assert sum(d.total_ios for d in r.report.jobs[0].directions.values()) > 0
            key = "devices" if r.workload.startswith("randwrite") else "read_devices"  # reads: not writable
            assert r.extra["fence"] == {key: [loop.path], "writable": []}
            assert series[r.id]  # iolab's logs, written in the work directory


def test_file_and_directory_targets_with_passes_and_logs(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    (tmp_path / "dir").mkdir()
    suite = _suite(tmp_path, f"targets: {{file: {tmp_path}/new.bin, dir: {tmp_path}/dir}}\n"
                             "defaults: {size: 4m, time_based: 1, runtime: 1s, bs: 4k}\n"
                             "passes: 2\nworkloads:\n  - {rw: randwrite}\n")
    proc = iolab("run", str(suite), "--no-observe", db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (f"fio may write only: {tmp_path}/new.bin (new), {tmp_path}/dir/randwrite-4k-qd1.0.0 (new), {tmp_path} "
            "(new files only: its existing entries are read-only), iolab's work directory of each job"
            ) in " ".join(proc.stderr.split())
    store = Store(f"sqlite:///{db}")
    results, series = store.get_run(1).results, store.time_series(1)
    assert [r.status for r in results] == ["ok"] * 4
    assert all(series[r.id] for r in results)
    assert not (tmp_path / "new.bin").exists()  # the scratch file is removed afterwards
    assert not list((tmp_path / "dir").iterdir())


def test_where_fio_creates_a_file_the_existing_entries_stay_read_only(tmp_path: Path) -> None:
    """A new scratch file's directory is writable (fio creates the file, and lays it out by
    unlinking and writing it anew), but every entry already there is bound read-only over itself:
    writing, truncating, removing or renaming over one fails, down the path to a planned file in a
    subdirectory, which stays writable; new files may be added."""
    home = tmp_path / "home"
    (home / "sub").mkdir(parents=True)
    (home / "notes.txt").write_text("mine\n")
    (home / "sub" / "deep.txt").write_text("deep\n")
    (home / "sub" / "planned.dat").write_text("planned\n")
    (home / "link").symlink_to(home / "notes.txt")
    work = tmp_path / "work"
    work.mkdir()
    f = fence.build({str(home / "scratch.dat"): fence.NEW, str(home / "sub" / "planned.dat"): fence.IOLAB}, work)
    assert f.writable == (str(home),) and f.creating == (str(home),)
    assert f.protected == (str(home / "notes.txt"), str(home / "sub" / "deep.txt"))
    assert f.places() == [f"{home}/scratch.dat (new)", f"{home}/sub/planned.dat (iolab's)",
                          f"{home} (new files only: its existing entries are read-only)"]
    assert not f.allows(str(home / "notes.txt")) and f.allows(str(home / "scratch.dat"))
    done = _inside(f, f"cd {home}; echo new > scratch.dat && echo created; echo p > sub/planned.dat && echo planned; "
                      "echo x > notes.txt; echo -n > sub/deep.txt; rm notes.txt; rm -r sub; mv scratch.dat notes.txt")
    seen = done.stdout + done.stderr
    assert "created" in seen and "planned" in seen
    assert "cannot create notes.txt: Read-only file system" in seen
    assert "cannot create sub/deep.txt: Read-only file system" in seen
    assert "cannot remove 'notes.txt': Device or resource busy" in seen
    assert "cannot remove 'sub/deep.txt': Device or resource busy" in seen
    assert "cannot move 'scratch.dat' to 'notes.txt': Device or resource busy" in seen
    assert (home / "notes.txt").read_text() == "mine\n" and (home / "sub" / "deep.txt").read_text() == "deep\n"
    assert (home / "scratch.dat").read_text() == "new\n" and (home / "link").is_symlink()


def test_a_ram_disk_place_in_dev_shm_is_bound_into_the_fresh_dev(tmp_path: Path) -> None:
    """A scratch file in /dev/shm (a RAM-disk target) is created in the fence's own /dev, where the
    directory's other entries stay read-only and nothing else of /dev is writable; a file the job only
    reads there is visible, read-only."""
    shm = Path("/dev/shm", f"iolab-fence-{os.getpid()}")
    shm.mkdir()
    try:
        (shm / "other.dat").write_text("theirs\n")
        (shm / "read.dat").write_text("data\n")
        work = tmp_path / "work"
        work.mkdir()
        f = fence.build({str(shm / "new.dat"): fence.NEW}, work, read=[str(shm / "read.dat")])
        done = _inside(f, f"echo new > {shm}/new.dat && echo created; cat {shm}/read.dat; echo x > {shm}/other.dat; "
                          f"echo x > {shm}/read.dat; echo x > /dev/shm/elsewhere")
        seen = done.stdout + done.stderr
        assert "created" in seen and "data" in seen
        assert f"{shm}/other.dat: Read-only file system" in seen and f"{shm}/read.dat: Read-only file system" in seen
        assert "/dev/shm/elsewhere: Read-only file system" in seen
        assert (shm / "other.dat").read_text() == "theirs\n" and (shm / "new.dat").read_text() == "new\n"
        assert not Path("/dev/shm/elsewhere").exists()
    finally:
        shutil.rmtree(shm)


def test_a_job_that_writes_beside_its_new_file_changes_nothing_there(tmp_path: Path) -> None:
    """``iolab run`` of a job creating its file in a directory that holds the user's files: a
    program the job runs (``exec_prerun``, allowed) overwriting one of them is stopped; a plain job
    creates and lays out its file there as before, and so in a directory of more entries than a fio
    server's fence binds one by one (issue 42: no false refusal)."""
    db = tmp_path / "db.sqlite"
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine\n")
    (tmp_path / "j.fio").write_text(f"[j]\nfilename={home}/scratch.dat\nrw=randread\nbs=4k\nsize=1m\n"
                                    f"exec_prerun=dd if=/dev/zero of={home}/notes.txt bs=4k count=1\n")
    proc = iolab("run", str(tmp_path / "j.fio"), "--allow-exec", "--no-observe", db=db, cwd=tmp_path)
    assert f"{home} (new files only: its existing entries are read-only)" in " ".join(proc.stderr.split())
    assert (home / "notes.txt").read_text() == "mine\n"
    (tmp_path / "j.fio").write_text(f"[j]\nfilename={home}/scratch.dat\nrw=randread\nbs=4k\nsize=1m\n")
    proc = iolab("run", str(tmp_path / "j.fio"), "--no-observe", db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (home / "notes.txt").read_text() == "mine\n"
    for i in range(fence.MAX_PROTECTED + 1):  # more entries than a fio server's fence binds one by one: a
        (home / f"f{i}").touch()  # local job's directory is staged (runner.stage), one bind whatever it holds
    (tmp_path / "j.fio").write_text(f"[j]\nfilename={home}/new.dat\nrw=randread\nbs=4k\nsize=1m\n")
    proc = iolab("run", str(tmp_path / "j.fio"), "--no-observe", db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (home / "notes.txt").read_text() == "mine\n" and all((home / f"f{i}").stat().st_size == 0
                                                                for i in range(fence.MAX_PROTECTED + 1))


def test_a_job_files_own_logs_land_in_the_work_directory_not_the_users(tmp_path: Path) -> None:
    """fio's working directory is iolab's work directory: a job's own relative log names land
    there (a symlink planted in the user's directory is never followed)."""
    db = tmp_path / "db.sqlite"
    (tmp_path / "own_bw.1.log").symlink_to("/etc/hostname")  # what a planted symlink would reach
    (tmp_path / "j.fio").write_text(f"[j]\nfilename={tmp_path}/f\nrw=write\nsize=1m\nwrite_bw_log=own\n")
    before = Path("/etc/hostname").read_bytes()
    proc = iolab("run", str(tmp_path / "j.fio"), "--no-observe", db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert Path("/etc/hostname").read_bytes() == before


def test_an_existing_file_smaller_than_the_job_is_not_laid_out_anew(tmp_path: Path) -> None:
    """fio unlinks and re-creates a file smaller than the job's size (``filesetup.c``
    ``extend_file``); the fence lets fio write the named file, not its directory: the job fails
    saying so and what to do, the file keeps its bytes; with a size the file has, the job runs."""
    db = tmp_path / "db.sqlite"
    small = tmp_path / "notes.txt"
    small.write_text("precious\n")
    (tmp_path / "j.fio").write_text(f"[j]\nfilename={small}\nrw=randread\nbs=4k\nsize=1m\n")
    proc = iolab("run", str(tmp_path / "j.fio"), "--no-observe", db=db, cwd=tmp_path)
    (result,) = Store(f"sqlite:///{db}").get_run(1).results
    assert result.status == "failed" and result.error.startswith(f"fio tried to lay out {small} anew"), result.error
    assert "Give the job a size the file already has" in result.error
    assert small.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("db.sqlite")) == ["j.fio", "notes.txt"]
    small.write_bytes(b"\0" * MiB)
    (tmp_path / "j.fio").write_text(f"[j]\nfilename={small}\nrw=randread\nbs=4k\nsize=100%\n")
    proc = iolab("run", str(tmp_path / "j.fio"), "--no-observe", db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


@requires_loop
def test_crash_test_saves_and_loads_verify_state_inside_the_fence(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    with loop_device(tmp_path, 32 * MiB) as loop:
        proc = iolab("crash-test", "-t", f"dev={loop.path}", "--destroy", loop.path, "size=16m", "rate_iops=2000",
                     "--trigger-timeout", "2s", "--trigger", "true", "--cuts", "1", "--settle", "0s",
                     "--no-observe", "--format", "json", db=db, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        cuts = json.loads(proc.stdout)["crash_test"]["cuts"]
        assert cuts[0]["verdict"] == "intact" and cuts[0]["checked"] > 0, cuts


def test_saturate_runs_fenced(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    proc = iolab("saturate", "-t", f"f={tmp_path}/s.bin", "size=8m", "--max-iodepth", "4", "--max-numjobs", "1",
                 "--probe-runtime", "1s", "--runtime", "1s", "--ramp-time", "0", "--repeat", "1", "--no-observe", db=db,
                 cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    results = Store(f"sqlite:///{db}").get_run(1).results
    assert results and all(r.status == "ok" and r.extra.get("fence") for r in results)


@requires_loop
def test_autotune_runs_fenced(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    with loop_device(tmp_path, 16 * MiB) as loop:
        proc = iolab("autotune", "-t", f"dev={loop.path}", "--axes", "nomerges", "--budget", "2m",
                     "--probe-runtime", "1s", "--runtime", "1s", "--ramp-time", "0", "--repeat", "1", "--top", "1",
                     "--max-iodepth", "4", "--no-observe", db=db, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        results = Store(f"sqlite:///{db}").get_run(1).results
        assert results and all(r.status == "ok" and r.extra["fence"]["read_devices"] == [loop.path] for r in results)


def test_without_a_fence_a_writing_run_refuses_unless_no_fence(tmp_path: Path) -> None:
    """bwrap missing from PATH: a run that writes refuses and says why; one that only reads runs
    unfenced and the plan says so; --no-fence runs the writing one."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("fio", "blkid", "wipefs", "findmnt", "lsblk"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool) or "")
    env = {"PATH": str(bin_dir)}
    db = tmp_path / "db.sqlite"
    (tmp_path / "data.bin").write_bytes(os.urandom(MiB))
    write = _suite(tmp_path, f"targets: {{f: {tmp_path}/new.bin}}\nworkloads:\n  - {{rw: write, size: 1m}}\n")
    refused = iolab("run", str(write), "--no-observe", db=db, cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert "Error: no fence can be set up: bubblewrap (bwrap) is not installed" in refused.stderr
    assert "--no-fence" in refused.stderr
    read = tmp_path / "r.yaml"
    read.write_text(f"targets: {{f: {tmp_path}/data.bin}}\nworkloads:\n  - {{rw: read, size: 1m}}\n")
    ran = iolab("run", str(read), "--no-observe", db=db, cwd=tmp_path, env=env)
    assert ran.returncode == 0, ran.stderr
    assert "fence: none — bubblewrap (bwrap) is not installed; this run only reads" in ran.stderr
    forced = iolab("run", str(write), "--no-observe", "--no-fence", db=db, cwd=tmp_path, env=env)
    assert forced.returncode == 0, forced.stderr
    assert "fence: none — --no-fence" in forced.stderr
    assert sys.executable  # the tests run iolab with this interpreter, not through PATH
