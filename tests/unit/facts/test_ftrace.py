"""iolab's ftrace instances (issue 42, item 4), on a stand-in for tracefs (a directory: ``rmdir`` of an
empty one is what tracefs does with an instance): which are leftovers of a capture whose process is
gone, which are left alone (running, another pid namespace, not iolab's), and what ``iolab restore``
and every other command say of them. Real instances of a capture killed with SIGKILL:
tests/integration/test_outputs_devices.py."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from inprocess import iolab
from iolab.facts import ftrace
from iolab.facts.owner import start_ticks


def _ended() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.fixture
def tracefs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "instances").mkdir()
    monkeypatch.setattr(ftrace, "TRACEFS", tmp_path)
    return tmp_path


def _make(tracefs: Path, name: str) -> Path:
    path = tracefs / "instances" / name
    path.mkdir()
    return path


def test_an_instance_carries_this_processs_pid_start_and_namespace():
    name = ftrace.instance_name(3)
    ns = os.stat("/proc/self/ns/pid").st_ino
    assert name == f"iolab-{os.getpid()}-{start_ticks('self')}-{ns}-3"


def test_only_instances_whose_process_is_gone_are_removed(tracefs):
    me, ticks, ns = os.getpid(), start_ticks("self"), os.stat("/proc/self/ns/pid").st_ino
    dead = _ended()
    gone = [f"iolab-{dead}-{ticks}-{ns}-0", f"iolab-{me}-{(ticks or 0) + 1}-{ns}-0",  # a reused pid
            f"iolab-{dead}-2"]  # named by an earlier iolab: judged by its pid
    kept = {f"iolab-{me}-{ticks}-{ns}-1": "running", f"iolab-{dead}-{ticks}-{ns + 1}-0": "elsewhere",
            f"iolab-{me}-5": "running"}
    others = ["iolab-notapid-1", "perf-trace", f"iolab-{dead}"]
    for name in [*gone, *kept, *others]:
        _make(tracefs, name)
    swept = ftrace.sweep()
    assert sorted(r.name for r in swept.removed) == sorted(gone)
    assert all(r.error is None for r in swept.removed)
    assert {k.name: k.state for k in swept.kept} == kept and swept.unreadable is None
    assert sorted(os.listdir(tracefs / "instances")) == sorted([*kept, *others])
    assert ftrace.sweep().removed == []  # a second command finds nothing more


def test_what_a_leftover_held_is_said_and_a_busy_one_is_reported(tracefs, monkeypatch):
    dead = _ended()
    inst = _make(tracefs, f"iolab-{dead}-0-0-0")
    (inst / "events" / "block").mkdir(parents=True)
    (inst / "events" / "block" / "enable").write_text("X\n")  # tracefs: some of the block events are on
    (inst / "buffer_total_size_kb").write_text("131072\n")
    real_rmdir = os.rmdir

    def with_its_files(path: str) -> None:  # tracefs removes an instance with its files
        for file in sorted(Path(path).rglob("*"), reverse=True):
            file.unlink() if file.is_file() else real_rmdir(file)
        real_rmdir(path)
    monkeypatch.setattr(ftrace.os, "rmdir", with_its_files)
    [removed] = ftrace.sweep().removed
    assert ftrace.describe(removed) == (f"Removed the ftrace instance iolab-{dead}-0-0-0 left by a capture whose "
                                        f"process (pid {dead}) is gone (its block events were on, 128 MiB of ring "
                                        "buffer)")
    _make(tracefs, f"iolab-{dead}-0-0-1")

    def busy(path: object) -> None:
        raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
    monkeypatch.setattr(ftrace.os, "rmdir", busy)
    [held] = ftrace.sweep().removed
    assert ftrace.describe(held) == (f"Could not remove the ftrace instance iolab-{dead}-0-0-1 left by a capture "
                                     f"whose process (pid {dead}) is gone: a process holds one of its files open")


def test_tracefs_absent_or_unreadable(tmp_path, monkeypatch):
    assert ftrace.sweep(tmp_path / "not-mounted") == ftrace.Sweep()
    (tmp_path / "instances").mkdir()

    def denied(path: object) -> list[str]:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))
    monkeypatch.setattr(ftrace.os, "listdir", denied)
    assert ftrace.sweep(tmp_path).unreadable == f"{tmp_path / 'instances'}: Permission denied"


def test_restore_lists_and_removes_them_and_every_command_removes_them_first(tracefs, tmp_path):
    dead, me = _ended(), os.getpid()
    _make(tracefs, f"iolab-{dead}-0-0-0")
    _make(tracefs, f"iolab-{me}-7")
    done = iolab("restore", db=tmp_path / "iolab.db")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"Removed the ftrace instance iolab-{dead}-0-0-0 left by a capture whose process (pid {dead}) is gone",
        f"Left the ftrace instance iolab-{me}-7 alone: its capture (pid {me}) is running."]
    assert not (tracefs / "instances" / f"iolab-{dead}-0-0-0").exists()
    _make(tracefs, f"iolab-{dead}-0-0-1")
    other = iolab("runs", db=tmp_path / "iolab.db")
    assert f"Removed the ftrace instance iolab-{dead}-0-0-1 left by a capture whose process (pid {dead}) is gone" \
        in other.stderr
    assert sorted(os.listdir(tracefs / "instances")) == [f"iolab-{me}-7"]
    (tracefs / "instances" / f"iolab-{me}-7").rmdir()
    nothing = iolab("restore", db=tmp_path / "iolab.db")
    assert nothing.stdout.startswith("Nothing to restore (no left-over journal in ")
    assert nothing.stdout.rstrip().endswith(f"no ftrace instance left by a killed capture in {tracefs / 'instances'}).")
