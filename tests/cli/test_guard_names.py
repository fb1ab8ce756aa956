"""What is opened, not its name (issue 42), in-process with fio replayed: hard links, empty files,
marks that name an inode, ``writing`` marks left by a killed run, ``--resume`` after a file was put at
its path, a link placed at a planned path between the guard's check and fio's start, and the static
guard failing closed (more files than it expands, /proc and /sys). Each vector must be refused
before fio runs, the victim unchanged. The fence's side with real fio: tests/integration/test_guard_names.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from fakefio import FakeFio
from inprocess import iolab
from iolab.check import guard, plan_checks
from iolab.runner import marks

MiB = 1024**2


def _run(tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    return iolab("run", *args, "--no-observe", db=tmp_path / "db.sqlite", cwd=tmp_path)


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _job(tmp_path: Path, text: str) -> str:
    (tmp_path / "j.fio").write_text(text)
    return str(tmp_path / "j.fio")


def test_a_file_with_other_names_is_written_only_when_named_itself(tmp_path: Path, fake_fio: FakeFio) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    data = tree / "x.bin"
    data.write_bytes(os.urandom(MiB))
    os.link(data, tmp_path / "snapshot-of-x.bin")  # an rsnapshot / cp -al tree outside the directory named
    before = _md5(data)
    job = _job(tmp_path, f"[j]\nfilename={data}\nrw=write\nbs=64k\nsize=1m\n")
    refused = _run(tmp_path, job, "--destroy", str(tree))
    assert refused.returncode == 2, refused.stderr
    assert f"Error: refusing to write to {data}: it has 1 other name (hard link: st_nlink 2)" in refused.stderr
    assert f"add --destroy {data}" in refused.stderr and f"find / -xdev -samefile {data}" in refused.stderr
    assert fake_fio.runs == [] and _md5(data) == before


def test_a_marked_file_with_other_names_is_not_iolabs_to_write(tmp_path: Path, fake_fio: FakeFio) -> None:
    data = tmp_path / "laid.bin"
    data.write_bytes(bytes(MiB))
    marks.mark(str(data))  # iolab laid it out; then someone linked it into their tree
    os.link(data, tmp_path / "kept.bin")
    refused = _run(tmp_path, _job(tmp_path, f"[j]\nfilename={data}\nrw=write\nbs=64k\nsize=1m\n"))
    assert refused.returncode == 2 and "it has 1 other name" in refused.stderr, refused.stderr
    assert fake_fio.runs == []


def test_an_empty_file_outside_the_targets_is_data(tmp_path: Path, fake_fio: FakeFio) -> None:
    config = tmp_path / "app.conf"
    config.touch()
    job = _job(tmp_path, f"[j]\nfilename={config}\nrw=write\nbs=64k\nsize=4m\nfile_append=1\n")
    refused = _run(tmp_path, job)
    assert refused.returncode == 2, refused.stderr
    assert (f"Error: refusing to write to {config}: it is an existing empty file that iolab did not lay out, "
            "outside the job's targets") in refused.stderr
    assert f"--destroy {config}" in refused.stderr
    assert fake_fio.runs == [] and config.stat().st_size == 0


def test_a_copy_that_kept_the_mark_is_not_iolabs(tmp_path: Path, fake_fio: FakeFio) -> None:
    laid = tmp_path / "laid.bin"
    laid.write_bytes(bytes(MiB))
    marks.mark(str(laid))
    copy = tmp_path / "copy.bin"
    shutil.copy2(laid, copy)  # cp -a: the attribute, size and mtime kept, another inode
    assert os.getxattr(copy, marks.ATTR) == os.getxattr(laid, marks.ATTR)
    refused = _run(tmp_path, _job(tmp_path, f"[j]\nfilename={copy}\nrw=write\nbs=64k\nsize=1m\n"))
    assert refused.returncode == 2, refused.stderr
    assert f"refusing to write to {copy}: it is an existing file with 1.00 MiB of data that iolab did not lay out" \
        in refused.stderr
    assert fake_fio.runs == []


def test_a_writing_mark_left_by_a_killed_run_makes_nothing_iolabs(tmp_path: Path, fake_fio: FakeFio) -> None:
    data = tmp_path / "was-laid.bin"
    data.write_bytes(bytes(MiB))
    st = data.stat()
    gone = {"pid": 2**22 + 7, "host": os.uname().nodename, "boot_id": None, "start_ticks": 1}
    os.setxattr(data, marks.ATTR, json.dumps({"writing": True, "dev": st.st_dev, "ino": st.st_ino, "run": "killed",
                                              "created": True, "owner": gone}).encode())
    with open(data, "r+b") as f:  # after the kill, the user keeps their data in it
        f.write(b"user data")
    before = _md5(data)
    refused = _run(tmp_path, _job(tmp_path, f"[j]\nfilename={data}\nrw=write\nbs=64k\nsize=1m\n"))
    assert refused.returncode == 2, refused.stderr
    assert f"refusing to write to {data}: it is an existing file with 1.00 MiB of data" in refused.stderr
    assert fake_fio.runs == [] and _md5(data) == before


def test_resume_does_not_own_a_file_put_at_its_path_after_the_stop(tmp_path: Path, fake_fio: FakeFio) -> None:
    target = tmp_path / "scratch.bin"
    suite = tmp_path / "s.yaml"
    suite.write_text(f"name: s\ntargets: {{t: {target}}}\nworkloads:\n  - {{name: w, rw: randwrite, bs: 4k, "
                     "size: 4m, time_based: 1, runtime: 1s}\n")
    fake_fio.fault("interrupt", at=0)
    stopped = _run(tmp_path, str(suite))
    assert stopped.returncode == 130, stopped.stderr
    assert not target.exists()  # the scratch file the run created was removed when it stopped
    target.write_bytes(os.urandom(4 * MiB))  # the user's file, at the name the run had planned
    before = _md5(target)
    resumed = iolab("run", "--resume", "1", db=tmp_path / "db.sqlite", cwd=tmp_path)
    assert resumed.returncode == 2, resumed.stderr
    assert f"refusing to write to {target}: it is an existing file with 4.00 MiB of data" in resumed.stderr
    assert len(fake_fio.runs) == 1 and _md5(target) == before  # neither written nor removed


@pytest.mark.parametrize("how", ["hard link", "symlink"])
def test_a_link_placed_at_a_planned_path_after_the_check_is_refused(tmp_path: Path, fake_fio: FakeFio,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     how: str) -> None:
    victim = tmp_path / "users.db"
    victim.write_bytes(os.urandom(MiB))
    before = _md5(victim)
    planned = tmp_path / "new.bin"
    checked = guard.check

    def check_then_link(*args, **kwargs):  # type: ignore[no-untyped-def]
        verdict = checked(*args, **kwargs)
        if args[3] != plan_checks.PLANNED_WORKDIR and not os.path.lexists(planned):  # right before fio starts
            os.link(victim, planned) if how == "hard link" else planned.symlink_to(victim)
        return verdict

    monkeypatch.setattr(guard, "check", check_then_link)
    refused = _run(tmp_path, _job(tmp_path, f"[j]\nfilename={planned}\nrw=write\nbs=64k\nsize=1m\n"))
    assert refused.returncode == 2, refused.stderr
    assert (f"Error: refusing to run the job: {planned} appeared after the guard checked it (it did not exist then); "
            "iolab creates the files a job names itself, so nothing was written there") in refused.stderr
    assert fake_fio.runs == [] and _md5(victim) == before and os.path.lexists(planned)


def test_every_file_name_of_a_job_is_checked(tmp_path: Path, fake_fio: FakeFio) -> None:
    (tmp_path / "d").mkdir()
    theirs = tmp_path / "d" / "j.0.4500"  # past the 4,096 names the guard used to check
    theirs.write_bytes(os.urandom(64 * 1024))
    job = _job(tmp_path, f"[j]\ndirectory={tmp_path / 'd'}\nnrfiles=5000\nfilesize=64k\nrw=write\nbs=64k\n")
    refused = _run(tmp_path, job, "--no-fence")
    assert refused.returncode == 2, refused.stderr
    assert f"refusing to write to {theirs}: it is an existing file with 64.00 KiB of data" in refused.stderr
    assert fake_fio.runs == []


def test_a_job_naming_more_files_than_the_guard_expands_is_refused(tmp_path: Path, fake_fio: FakeFio) -> None:
    job = _job(tmp_path, f"[j]\ndirectory={tmp_path}\nnumjobs=3\nnrfiles=4000\nfilesize=4k\nrw=write\nbs=4k\n")
    refused = _run(tmp_path, job)
    assert refused.returncode == 2, refused.stderr
    assert ("[j] numjobs=3 × nrfiles=4000 names 12,000 files; iolab checks every file a job opens, at most 10,000 "
            "of one job, and runs none it has not checked") in refused.stderr
    assert fake_fio.runs == []


@pytest.mark.parametrize("path", ["/proc/self/comm", "/sys/kernel/iolab-none/x",
                                  "/proc/sys/kernel/../kernel/iolab-none"])
def test_proc_and_sys_are_refused_as_fio_files(tmp_path: Path, fake_fio: FakeFio, path: str) -> None:
    refused = _run(tmp_path, _job(tmp_path, f"[j]\nfilename={path}\nrw=write\nbs=4k\nsize=4k\n"))
    assert refused.returncode == 2, refused.stderr
    tree = path.split("/")[1]
    assert f"refusing {os.path.normpath(path)} as a file of fio's: it is in /{tree}, the kernel's interface, not " \
        "storage" in refused.stderr
    assert fake_fio.runs == []
