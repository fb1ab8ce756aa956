"""iolab's own files never land on a device, and a killed capture's ftrace instance does not outlive
the next iolab command (issue 42, items 1 and 4), on real loop devices and the machine's tracefs.

On the code before issue 42 (main a662b21): ``run … --db /dev/loopN`` wrote an SQLite database over the
ext4 device and left ``/dev/loopN-wal`` and ``-shm`` in devtmpfs, ``report -o /dev/loopN`` and the others
wrote the device and exited 0; a capture killed with SIGKILL left its instance recording for good. The
function itself and the CLI's refusals of /dev/null, FIFOs and links: tests/unit/ground/test_outputs.py,
tests/cli/test_outputs.py; the sweep's rules on a stand-in tracefs: tests/unit/facts/test_ftrace.py."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import tracing
from captures import capture_of, rows, stored
from clirun import iolab, wait_for
from iolab.workflows.capture.trace import READ, from_rows
from loopdev import LoopDevice, MiB, loop_device, requires_loop

SAMPLE = Path(__file__).parents[1] / "data" / "fio" / "fio-2.2.8_randrw_posixaio.json"
READ_SUITE = """\
targets: {{data: {path}}}
defaults: {{ioengine: psync, size: 1m, time_based: 1, runtime: 1s}}
workloads:
  - {{rw: randread, bs: 4k}}
"""


@pytest.fixture(autouse=True)
def _own_state(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """iolab's state (spool, marks, tuning journal) in a directory of this test's: tests run in parallel."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture
def ext4(tmp_path: Path) -> Iterator[LoopDevice]:
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        loop.make_ext4()
        yield loop


def _beside(device: str) -> list[str]:
    """What iolab or SQLite could have left in /dev next to ``device``."""
    name = os.path.basename(device)
    return sorted(n for n in os.listdir("/dev") if (n.startswith(name) and n[len(name):][:1] in ("-", "_", "."))
                  or n.startswith(f".{name}."))


def _refused(proc: subprocess.CompletedProcess[str], what: str, device: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert (f"Error: refusing to write {what} at {device}: it is a block device under /dev, where device nodes "
            "and kernel interfaces live") in proc.stderr, proc.stderr


@pytest.mark.root
@requires_loop
def test_the_database_is_never_made_on_a_device(tmp_path: Path, ext4: LoopDevice) -> None:
    before = ext4.sha256()
    suite = tmp_path / "r.yaml"
    suite.write_text(READ_SUITE.format(path=tmp_path / "data.bin"))
    ran = iolab("run", str(suite), "--no-observe", "-q", db=Path(ext4.path), cwd=tmp_path)
    _refused(ran, "the results database", ext4.path)
    imported = iolab("import", str(SAMPLE), db=Path(ext4.path), cwd=tmp_path)
    _refused(imported, "the results database", ext4.path)
    (tmp_path / "db-link").symlink_to(ext4.path)  # a link to the device, as --db: what it leads to is judged
    linked = iolab("import", str(SAMPLE), db=tmp_path / "db-link", cwd=tmp_path)
    assert linked.returncode == 2 and f"at {ext4.path}: it is a block device under /dev" in linked.stderr
    assert ext4.sha256() == before
    assert _beside(ext4.path) == []  # no -wal, -shm or -journal in devtmpfs


@pytest.mark.root
@requires_loop
def test_reports_fits_and_suites_are_never_written_on_a_device(tmp_path: Path, ext4: LoopDevice) -> None:
    db = tmp_path / "iolab.db"
    assert iolab("import", str(SAMPLE), "--label", "sample", db=db).returncode == 0
    stored(db, capture_of(from_rows(rows((64, 0, 128, 65536, READ, 100)), comms={100: "dd"}), path=ext4.path),
           label="dd")
    before = ext4.sha256()
    _refused(iolab("report", "sample", "-o", ext4.path, db=db, cwd=tmp_path), "the HTML report", ext4.path)
    md = iolab("report", "sample", "-o", str(tmp_path / "r.html"), "--markdown", ext4.path, db=db, cwd=tmp_path)
    _refused(md, "the Markdown report", ext4.path)
    _refused(iolab("fit", "dd", "-o", ext4.path, db=db, cwd=tmp_path), "the fitted job file", ext4.path)
    tuned = iolab("autotune", "-t", f"data={tmp_path / 'data.bin'}", "--slo", "p99<=50ms", "--budget", "1m",
                  "--write-suite", ext4.path, db=db, cwd=tmp_path)
    _refused(tuned, "the suite", ext4.path)
    assert ext4.sha256() == before
    assert _beside(ext4.path) == [] and not (tmp_path / "r.html").exists() and not (tmp_path / "data.bin").exists()


INSTANCES = Path("/sys/kernel/tracing/instances")


@contextlib.contextmanager
def pid_namespace() -> Iterator[int]:
    """A pid namespace of its own (with its own /proc) that lives for the block; yields the host pid of
    its first process. Captures made in it are iolab's "elsewhere" to every iolab outside it, so that
    no other test's iolab command sweeps them while this test looks; they are removed afterwards."""
    holder = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "sleep", "600"])
    try:
        children = Path(f"/proc/{holder.pid}/task/{holder.pid}/children")
        wait_for(lambda: children.read_text().split(), timeout_s=30)
        init = int(children.read_text().split()[0])
        wait_for(lambda: os.readlink(f"/proc/{init}/exe").endswith("sleep"), timeout_s=30)
        yield init
    finally:
        ns = os.stat(f"/proc/{init}/ns/pid").st_ino if os.path.exists(f"/proc/{init}") else None
        holder.kill()
        holder.wait()
        for inst in _instances_of(init):
            tracing._remove(inst)
        # a capture killed in it left its spool too (named <pid>-<start>-<pidns>-…: judged by no one outside)
        for spool in Path(tempfile.gettempdir()).glob(f"iolab-capture-*-*-{ns}-*"):
            shutil.rmtree(spool, ignore_errors=True)


def _instances_of(init: int) -> list[Path]:
    """iolab's instances made in the pid namespace of host process ``init``."""
    ns = os.stat(f"/proc/{init}/ns/pid").st_ino if os.path.exists(f"/proc/{init}") else None
    return sorted(p for p in INSTANCES.glob("iolab-*-*-*-*") if ns is not None and p.name.split("-")[3] == str(ns))


def _inside(init: int, *args: str) -> list[str]:
    """``iolab ARGS`` run in the pid (and mount) namespace of host process ``init``: the argv."""
    return ["nsenter", "-t", str(init), "-p", "-m", "--", sys.executable, "-m", "iolab", *args]


def _run_inside(init: int, *args: str, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_inside(init, *args), capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "IOLAB_DB": str(db), "COLUMNS": "200"})


def _killed_capture(init: int, device: str, db: Path) -> Path:
    """A real ``iolab capture`` of ``device`` in the namespace of ``init``, ended by SIGKILL while it
    records: the instance it left behind (still recording)."""
    before = set(_instances_of(init))
    proc = subprocess.Popen(_inside(init, "capture", device, "--duration", "120s", "--label", "killed"),
                            env={**os.environ, "IOLAB_DB": str(db)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        def recording() -> bool:
            new = set(_instances_of(init)) - before
            return any((p / "events/block/block_rq_issue/enable").read_text().strip() == "1" for p in new)
        wait_for(recording, timeout_s=60)
        capture = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0])  # nsenter's child
        os.kill(capture, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    [left] = sorted(set(_instances_of(init)) - before)
    assert (left / "events/block/block_rq_issue/enable").read_text().strip() == "1"  # still recording
    return left


@pytest.mark.root
@requires_loop
@pytest.mark.skipif(not INSTANCES.is_dir() or shutil.which("nsenter") is None,
                    reason="tracefs is not mounted at /sys/kernel/tracing, or nsenter is missing")
def test_a_killed_captures_instance_is_removed_by_restore_and_by_the_next_command(tmp_path: Path) -> None:
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop, pid_namespace() as init:
        left = _killed_capture(init, loop.path, db)
        pid = left.name.split("-")[1]  # as the capture's namespace numbers it
        outside = iolab("restore", db=db)  # from another pid namespace: its pid means nothing here
        assert (f"Left the ftrace instance {left.name} alone: made in another pid namespace (a container)"
                in outside.stdout), outside.stdout
        assert left.exists()
        restored = _run_inside(init, "restore", db=db)
        assert restored.returncode == 0, restored.stderr
        assert (f"Removed the ftrace instance {left.name} left by a capture whose process (pid {pid}) is gone "
                "(its block events were on, ") in restored.stdout, restored.stdout
        assert "MiB of ring buffer)" in restored.stdout
        assert not left.exists()
        left = _killed_capture(init, loop.path, db)
        listed = _run_inside(init, "runs", db=db)  # any command: the sweep comes first
        assert (f"Removed the ftrace instance {left.name} left by a capture whose process "
                f"(pid {left.name.split('-')[1]}) is gone" in listed.stderr), listed.stderr
        assert not left.exists()
