"""iolab's own files never land on a device, and a killed capture's ftrace instance does not outlive
the next iolab command (issue 42, items 1 and 4), on real loop devices and the machine's tracefs.

On the code before issue 42 (main a662b21): ``run … --db /dev/loopN`` wrote an SQLite database over the
ext4 device and left ``/dev/loopN-wal`` and ``-shm`` in devtmpfs, ``report -o /dev/loopN`` and the others
wrote the device and exited 0; a capture killed with SIGKILL left its instance recording for good. The
function itself and the CLI's refusals of /dev/null, FIFOs and links: tests/unit/ground/test_outputs.py,
tests/cli/test_outputs.py; the sweep's rules on a stand-in tracefs: tests/unit/facts/test_ftrace.py."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import tracing
from captures import capture_of, rows, stored
from clirun import iolab, popen, wait_for
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


@pytest.fixture
def _tracefs_clean() -> Iterator[None]:
    """What a failed test left in tracefs is removed (its own captures only)."""
    with tracing.cleaned_up():
        yield


def _killed_capture(device: str, db: Path) -> tuple[int, Path]:
    """A real ``iolab capture`` of ``device`` ended by SIGKILL while it records: its pid and the
    instance it left behind (recording)."""
    proc = popen("capture", device, "--duration", "120s", "--label", "killed", db=db)
    try:
        wait_for(lambda: tracing.recording(proc.pid), timeout_s=60)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    [left] = tracing.instances(proc.pid)
    assert (left / "events/block/block_rq_issue/enable").read_text().strip() == "1"  # still recording
    return proc.pid, left


@pytest.mark.root
@requires_loop
@pytest.mark.skipif(not os.path.isdir("/sys/kernel/tracing/instances"), reason="tracefs is not mounted there")
@pytest.mark.usefixtures("_tracefs_clean")
def test_a_killed_captures_instance_is_removed_by_restore_and_by_the_next_command(tmp_path: Path) -> None:
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        pid, left = _killed_capture(loop.path, db)
        assert left.name.startswith(f"iolab-{pid}-")
        restored = iolab("restore", db=db)
        assert restored.returncode == 0, restored.stderr
        assert (f"Removed the ftrace instance {left.name} left by a capture whose process (pid {pid}) is gone "
                "(its block events were on, ") in restored.stdout
        assert "MiB of ring buffer)" in restored.stdout
        assert not left.exists()
        pid, left = _killed_capture(loop.path, db)
        listed = iolab("runs", db=db)  # any command: the sweep comes first
        assert (f"Removed the ftrace instance {left.name} left by a capture whose process (pid {pid}) is gone"
                in listed.stderr), listed.stderr
        assert not left.exists()
