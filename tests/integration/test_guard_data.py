"""Writable means new, iolab's own, or named with --destroy (issue 29): the second audit's rows, each
tried with `iolab` on real fio, loop devices and files, with md5 before and after.

Rows: a loop device's backing image; an existing file of someone's data as target; an `opendir=`
tree; an NBD export reached by address (a small NBD server of the test's, over a Unix socket); option
names fio substitutes (`r${EMPTY}w=write`). And the ordinary path: iolab's own files written again
without flags (re-run, resume after a kill), a job that reads a device with data and writes a file.
The guard's refusal of a name fio does not know, in-process: tests/unit/check/test_guard_names.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from clirun import iolab, popen, wait_for
from iolab.check import guard
from iolab.describe import suite
from iolab.errors import SafetyError
from iolab.run.plan import RunOptions, prepare
from iolab.runner import fence, marks
from iolab.store.database import Store
from loopdev import MiB, loop_device, requires_loop
from nbdserver import serve

W = "rw=write\nbs=64k\nsize=1m\n"


@pytest.fixture(autouse=True)
def _own_state(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """iolab's state (spool, marks, tuning journal) in a directory of this test's, for the iolab it
    runs in-process and in subprocesses: the tests run in parallel."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


def md5(path: Path | str) -> str:
    return hashlib.md5(Path(path).read_bytes()).hexdigest()


def _job(tmp_path: Path, text: str, name: str = "j.fio") -> str:
    (tmp_path / name).write_text(text)
    return str(tmp_path / name)


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return iolab("run", *args, "--no-observe", db=tmp_path / "db.sqlite", cwd=tmp_path, env=env)


@requires_loop
def test_a_loop_devices_backing_image_is_refused_even_with_destroy(tmp_path: Path) -> None:
    with loop_device(tmp_path, 16 * MiB, "bk.img") as loop:
        loop.make_ext4()
        image, before = str(loop.backing), md5(loop.backing)
        job = _job(tmp_path, f"[j]\nfilename={image}\n{W}")
        plain = _run(tmp_path, job)
        assert plain.returncode == 2, plain.stderr
        assert f"refusing to write to {image}: it is the backing file of {loop.path}, so writing it writes that " \
               "device" in plain.stderr
        named = _run(tmp_path, job, "--destroy", image)
        assert named.returncode == 2 and "(--destroy does not override this)" in named.stderr
        assert f"--destroy {loop.path}" in named.stderr  # the remedy: name the device too
        both = _run(tmp_path, job, "--destroy", image, "--destroy", loop.path)
        assert both.returncode == 2
        assert f"refusing to write to {loop.path}: it carries an ext4 filesystem signature" in both.stderr
        assert md5(image) == before


def test_an_existing_file_with_data_needs_destroy_then_is_iolabs(tmp_path: Path) -> None:
    """`--target f=old.bin` (someone's 8 MiB): refused, unchanged; with --destroy it runs and the
    file is iolab's, so the next run needs no flag; written by something else since, it is data again."""
    data = tmp_path / "old.bin"
    data.write_bytes(os.urandom(8 * MiB))
    before = md5(data)
    suite_file = tmp_path / "s.yaml"
    suite_file.write_text("targets: {}\nworkloads:\n  - {rw: randwrite, bs: 4k, size: 8m, runtime: 1s, "
                          "time_based: 1}\n")
    refused = _run(tmp_path, str(suite_file), "--target", f"f={data}")
    assert refused.returncode == 2
    assert (f"Error: refusing to write to {data}: it is an existing file with 8.00 MiB of data that iolab did not "
            "lay out, and it is not named with --destroy") in refused.stderr
    assert f"--destroy {data}" in refused.stderr
    assert md5(data) == before
    ran = _run(tmp_path, str(suite_file), "--target", f"f={data}", "--destroy", str(data))
    assert ran.returncode == 0, ran.stderr
    assert f"fio may write only: {data} (--destroy)" in " ".join(ran.stderr.split())
    assert md5(data) != before and marks.is_iolab(str(data))
    again = _run(tmp_path, str(suite_file), "--target", f"f={data}")
    assert again.returncode == 0, again.stderr
    assert f"fio may write only: {data} (iolab's)" in " ".join(again.stderr.split())
    with open(data, "r+b") as f:  # someone writes into it: its data, not iolab's any more
        f.write(b"mine")
    assert not marks.is_iolab(str(data))
    assert _run(tmp_path, str(suite_file), "--target", f"f={data}").returncode == 2


def test_every_file_under_a_written_opendir_tree_is_checked(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    files = [docs / "a.txt", docs / "sub" / "b.txt"]
    for f in files:
        f.write_bytes(os.urandom(64 * 1024))
    before = [md5(f) for f in files]
    job = _job(tmp_path, f"[j]\nopendir={docs}\nrw=write\nbs=4k\n")
    refused = _run(tmp_path, job)
    assert refused.returncode == 2
    assert f"refusing to write to {docs}/a.txt: it is an existing file with 64.00 KiB of data" in refused.stderr
    assert [md5(f) for f in files] == before
    read = _run(tmp_path, _job(tmp_path, f"[j]\nopendir={docs}\nrw=read\nbs=4k\n", "r.fio"))
    assert read.returncode == 0, read.stderr
    assert [md5(f) for f in files] == before
    named = _run(tmp_path, job, "--destroy", str(docs))
    assert named.returncode == 0, named.stderr
    assert all(md5(f) != b for f, b in zip(files, before, strict=True))


def test_storage_reached_by_address_is_written_only_when_named(tmp_path: Path) -> None:
    """ioengine=nbd to an export (a Unix socket, which no network namespace cuts): refused without
    naming the URI, the export unchanged; named with --destroy, fio writes it (so the test could fail)."""
    export = tmp_path / "export.img"
    export.write_bytes(os.urandom(8 * MiB))
    before = md5(export)
    with serve(export, tmp_path / "nbd.sock") as server:
        job = _job(tmp_path, f"[j]\nioengine=nbd\nuri={server.uri}\nrw=randwrite\nbs=4k\nsize=8m\n"
                             "time_based\nruntime=1\n")
        refused = _run(tmp_path, job)
        assert refused.returncode == 2
        assert f"refusing to write through ioengine=nbd to {server.uri}: the engine reaches storage by address" \
            in refused.stderr
        assert f"--destroy '{server.uri}'" in refused.stderr
        assert server.writes == 0 and md5(export) == before
        named = _run(tmp_path, job, "--destroy", server.uri)
        assert named.returncode == 0, named.stderr
        assert f"network: the host's, for {server.uri}" in named.stderr
        assert server.writes > 0 and md5(export) != before


@requires_loop
@pytest.mark.parametrize("spelling", ["r${EMPTY}w=write\nfilename={new}", "file${EMPTY}name={victim}\nrw=write",
                                      "$ncpus=1\nrw=write\nfilename={new}"])
def test_an_option_name_fio_would_substitute_is_refused(tmp_path: Path, spelling: str) -> None:
    with loop_device(tmp_path, 16 * MiB) as victim:
        victim.make_ext4()
        before = md5(victim.path)
        text = spelling.replace("{new}", str(tmp_path / "new.bin")).replace("{victim}", victim.path)
        job = _job(tmp_path, f"[j]\n{text}\nbs=64k\nsize=1m\n")
        for command in ("run", "lint"):
            proc = iolab(command, job, db=tmp_path / "db.sqlite", cwd=tmp_path, env={"EMPTY": ""})
            assert proc.returncode == 2, proc.stdout + proc.stderr
            said = " ".join((proc.stdout + proc.stderr).split())
            assert "fio substitutes ${VAR} and $keywords over the whole line, option names included" in said, said
        assert md5(victim.path) == before and not (tmp_path / "new.bin").exists()


def test_a_name_fio_does_not_know_is_refused(tmp_path: Path) -> None:
    """fio says it first, in its words; the guard refuses what fio would let through unread, naming
    the nearest; fio's aliases and its profiles' inert options are names fio knows."""
    proc = _run(tmp_path, _job(tmp_path, f"[j]\nfilename={tmp_path}/x\nrw=read\nsize=1m\niodeph=4\n"))
    assert proc.returncode == 2 and "fio rejects the job" in proc.stderr and "Did you mean iodepth?" in proc.stderr
    # the guard's own refusal of the name, in-process: tests/unit/check/test_guard_names.py
    aliases = _run(tmp_path, _job(tmp_path, f"[j]\nfilename={tmp_path}/x\nreadwrite=read\nblocksize=4k\n"
                                            "timeout=1\nthreads=1\nsize=1m\n", "a.fio"))
    assert aliases.returncode == 0, aliases.stderr


@requires_loop
def test_a_section_that_reads_a_device_with_data_beside_one_that_writes_a_file(tmp_path: Path) -> None:
    """Per-section decisions: [src] reads a device carrying ext4, [dst] writes a new file; the job runs,
    the device is only read (not among what the fence lets fio write), and unchanged."""
    with loop_device(tmp_path, 16 * MiB) as victim:
        victim.make_ext4()
        before = md5(victim.path)
        job = _job(tmp_path, f"[src]\nfilename={victim.path}\nrw=read\nbs=64k\nsize=1m\n"
                             f"[dst]\nfilename={tmp_path}/out.bin\nrw=write\nbs=64k\nsize=1m\n")
        proc = _run(tmp_path, job)
        assert proc.returncode == 0, proc.stderr
        plan = " ".join(proc.stderr.split())
        assert f"fio may write only: {tmp_path}/out.bin (new)" in plan
        assert f"and may read, not write: {victim.path}" in plan
        (result,) = Store(f"sqlite:///{tmp_path}/db.sqlite").get_run(1).results
        assert result.extra["fence"]["read_devices"] == [victim.path] and "devices" not in result.extra["fence"]
        assert md5(victim.path) == before


@requires_loop
def test_without_landlock_a_device_only_read_must_be_one_that_may_be_destroyed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel without Landlock (simulated: the fence's status says ABI 0): a device bound to be read
    could be written inside the fence, so a job reading a device with data is refused, and a blank one
    must be named; the `${}` job is refused statically all the same."""
    found = fence.status()
    monkeypatch.setattr(fence, "status", lambda bwrap="bwrap": fence.Status(found.tool, landlock=0,
                                                                           own_network=found.own_network))
    with loop_device(tmp_path, 16 * MiB, "v.img") as victim, loop_device(tmp_path, 16 * MiB, "b.img") as blank:
        victim.make_ext4()
        reads = suite.load(_job(tmp_path, f"[src]\nfilename={victim.path}\nrw=read\nbs=64k\nsize=1m\n"))
        with pytest.raises(SafetyError, match=f"refusing to write to {victim.path}: it carries an ext4"):
            prepare(reads, RunOptions())
        blank_reads = suite.load(_job(tmp_path, f"[src]\nfilename={blank.path}\nrw=read\nbs=64k\nsize=1m\n",
                                      "b.fio"))
        with pytest.raises(SafetyError, match="it is not named with --destroy"):
            prepare(blank_reads, RunOptions())
        plan = prepare(blank_reads, RunOptions(destroy=(blank.path,)))
        assert any("no Landlock" in n for n in plan.fence.notes)
        substituted = suite.load(_job(tmp_path, f"[j]\nfile${{EMPTY}}name={victim.path}\nrw=write\n", "s.fio"))
        with pytest.raises(SafetyError, match="option names included"):
            prepare(substituted, RunOptions())


def test_a_file_in_use_by_another_process_is_refused_even_with_destroy(tmp_path: Path) -> None:
    data = tmp_path / "db.img"
    data.write_bytes(os.urandom(MiB))
    job = _job(tmp_path, f"[j]\nfilename={data}\n{W}")
    with open(data, "r+b") as held:
        proc = _run(tmp_path, job, "--destroy", str(data))
        assert proc.returncode == 2
        assert f"pid {os.getpid()} (" in proc.stderr and "has it open for writing" in proc.stderr
    with open(data, "rb") as locked:
        fcntl.flock(locked, fcntl.LOCK_EX)
        proc = _run(tmp_path, job, "--destroy", str(data))
        assert proc.returncode == 2 and "holds a FLOCK WRITE lock on it" in proc.stderr
    subprocess.run(["mkfs.ext4", "-q", "-F", str(data)], check=True, capture_output=True)
    proc = _run(tmp_path, job, "--destroy", str(data))
    assert proc.returncode == 2 and "it carries an ext4 filesystem signature" in proc.stderr
    assert held.closed


def test_iolabs_own_scratch_and_directory_files_are_reused_without_flags(tmp_path: Path) -> None:
    """--keep-files twice on a new file target and a directory target: the second run writes iolab's own
    files again (the plan says so), and a user's file beside them stays read-only and unchanged."""
    (tmp_path / "dir").mkdir()
    mine = tmp_path / "dir" / "notes.txt"
    mine.write_text("mine\n")
    suite_file = tmp_path / "s.yaml"
    suite_file.write_text(f"targets: {{file: {tmp_path}/scratch.bin, dir: {tmp_path}/dir}}\n"
                          "workloads:\n  - {rw: randwrite, bs: 4k, size: 2m, runtime: 1s, time_based: 1}\n")
    first = _run(tmp_path, str(suite_file), "--keep-files")
    assert first.returncode == 0, first.stderr
    laid = [tmp_path / "scratch.bin", tmp_path / "dir" / "randwrite-4k-qd1.0.0"]
    assert all(marks.is_iolab(str(p)) for p in laid)
    second = _run(tmp_path, str(suite_file), "--keep-files")
    assert second.returncode == 0, second.stderr
    plan = " ".join(second.stderr.split())
    assert all(f"{p} (iolab's)" in plan for p in laid)
    assert mine.read_text() == "mine\n"


def test_resume_after_a_kill_writes_the_file_the_run_created(tmp_path: Path) -> None:
    """kill -9 while fio writes a new target file: fio writes it in iolab's staged directory, the name
    holding iolab's empty reservation (``runner.stage``), so nothing at the name is iolab's; the next
    iolab undoes what the killed one staged, and --resume of the run finishes without flags."""
    target = tmp_path / "new.bin"
    suite_file = tmp_path / "s.yaml"
    # 5 s: fio lays the file out at once, and is still writing it when it is killed
    suite_file.write_text("targets: {}\nworkloads:\n  - {rw: write, bs: 64k, size: 4m, runtime: 5s, time_based: 1}\n")
    db = tmp_path / "db.sqlite"
    proc = popen("run", str(suite_file), "--target", f"t={target}", "--no-observe", "--keep-files", db=db,
                 cwd=tmp_path)

    def staged() -> list[Path]:
        return [p for p in tmp_path.glob(".iolab-stage-*/new.bin") if p.stat().st_size >= 4 * MiB]

    wait_for(staged, 60)
    assert proc.poll() is None, "iolab ended before it was killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    _wait_gone(os.environ["XDG_STATE_HOME"])  # the fence dies with iolab, and fio with it
    assert target.stat().st_size == 0 and not marks.is_iolab(str(target))  # iolab's reservation
    options = json.loads(json.dumps(Store(f"sqlite:///{db}").get_run(1).info.options))
    assert os.path.realpath(target) in options["created"]
    resumed = iolab("run", "--resume", "1", db=db, cwd=tmp_path, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert marks.is_iolab(str(target)) and target.stat().st_size == 4 * MiB
    assert not list(tmp_path.glob(".iolab-stage-*"))  # the killed run's staged directory is gone


def _wait_gone(marker: str, timeout_s: float = 30) -> None:
    """Wait until no process has ``marker`` (this test's own directory) in its command line; kill,
    by pid, any left after ``timeout_s`` and fail."""
    def left() -> list[int]:
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                with contextlib.suppress(OSError):
                    if marker.encode() in (entry / "cmdline").read_bytes():
                        pids.append(int(entry.name))
        return pids
    deadline = time.monotonic() + timeout_s
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = left()
    for pid in survivors:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not survivors, f"processes of the killed run still running after {timeout_s:g} s: {survivors}"


def test_without_a_network_engine_fio_has_no_network(tmp_path: Path) -> None:
    """The fence of a path-engine job: its own network namespace (a TCP listener on this host's loopback
    cannot be reached); with an address engine's network the same connect works."""
    import socket
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        script = f"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('reached')"
        work = tmp_path / "work"
        work.mkdir()
        for network, reached in ((False, False), (True, True)):
            f = guard.fence_of(guard.Checked(addresses=("x",) if network else ()), work)
            done = subprocess.run(f.argv(["python3", "-c", script]), capture_output=True, text=True, timeout=30,
                                  check=False)
            assert ("reached" in done.stdout) is reached, done.stdout + done.stderr
