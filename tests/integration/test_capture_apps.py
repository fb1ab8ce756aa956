"""Captures of real applications as people run them: on a partition, failing, interrupted, idle,
ext4's lazy init, iolab itself, several processes at once.

Each test drives the real ``iolab capture`` command against a loop device (partitioned with
``losetup -P``) and a real SQLite database committing with ``synchronous=FULL`` (an fsync per
commit, so flushes reach the device). What iolab then does with a stored capture (show, fit, replay
of such captures, built without tracefs) is in tests/cli/test_capture.py and test_capture_replay.py;
the pure parts in tests/unit/workflows/test_capture_apps.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tracing
from captures import capture_of, rows, stored
from clirun import iolab, popen, wait_for
from iolab.workflows.capture.trace import READ, from_rows
from loopdev import MiB, loop_device, requires_loop


@pytest.fixture(autouse=True)
def _tracefs_clean() -> Iterator[None]:
    """No ftrace instance of a capture made here outlives the test (the tests assert that their
    captures remove their own; this removes what a failed test left)."""
    with tracing.cleaned_up():
        yield


#: SQLite committing ``N`` small transactions, each an fsync (``synchronous=FULL``, rollback journal).
APP = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA synchronous=FULL")
db.execute("PRAGMA journal_mode=DELETE")
db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v BLOB)")
n = int(sys.argv[2])
for i in range(n if n > 0 else 10**9):
    db.execute("BEGIN")
    db.execute("INSERT INTO t (v) VALUES (randomblob(3000))")
    db.execute("COMMIT")
    if len(sys.argv) > 3:
        time.sleep(float(sys.argv[3]))
db.close()
"""


def _app(tmp_path: Path) -> Path:
    app = tmp_path / "app.py"
    app.write_text(APP)
    return app


def _fit_options(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith(";"))


@requires_loop
def test_sqlite_on_a_partition_keeps_its_flushes_and_the_fit_its_fsync(tmp_path: Path) -> None:
    """The flushes of SQLite's fsyncs carry sector 0 on the whole disk; a partition's capture must
    keep them (it kept none when flushes were filtered by the partition's sectors)."""
    db = tmp_path / "iolab.db"
    commits = 150
    with loop_device(tmp_path, size_bytes=64 * MiB) as loop:
        part = loop.partition(first_sector=2048, sectors=100_000)
        loop.make_ext4(part)
        mnt = loop.mount(tmp_path / "mnt", part)
        done = iolab("capture", part, "--label", "sqlite-part", "--format", "json", "--",
                     sys.executable, str(_app(tmp_path)), str(mnt / "app.sqlite"), str(commits), db=db)
    assert done.returncode == 0, done.stderr
    fp = json.loads(done.stdout)["fingerprint"]
    assert fp["ios"].get("flush", 0) >= commits  # at least one flush per commit's fsync
    assert fp["flush_pct"] > 10
    assert fp["latency_us"]["flush"]["count"] == fp["ios"]["flush"]  # their completions (sector -1) kept too
    assert fp["lba_end_bytes"] <= 100_000 * 512  # data requests: still the partition's own, from its start
    job = tmp_path / "fitted.fio"
    fitted = iolab("fit", "sqlite-part", "-o", str(job), db=db)
    assert fitted.returncode == 0, fitted.stderr
    assert int(_fit_options(job.read_text())["fsync"]) >= 1


def _runs(db: Path) -> dict[str, dict]:
    listed = json.loads(iolab("runs", "--format", "json", db=db).stdout)["runs"]
    return {r["label"]: r for r in listed}


@requires_loop
def test_a_failing_command_is_stored_failed_with_its_status_and_its_own_duration(tmp_path: Path) -> None:
    """(Showing and replaying such a capture: tests/cli/test_capture.py.)"""
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=16 * MiB, name="app.img") as loop:
        done = iolab("capture", loop.path, "--label", "fails", "--format", "json", "--", "sh", "-c",
                     f"dd if={loop.path} of=/dev/null bs=64k count=64 iflag=direct status=none; exit 3", db=db)
        assert done.returncode == 1
        assert "sh exited with status 3" in done.stderr and "stored as failed" in done.stderr
        fp = json.loads(done.stdout)["fingerprint"]
        assert fp["ios"] == {"read": 64}  # the trace is kept whole
        quick = iolab("capture", loop.path, "--label", "false", "--format", "json", "--", "false", db=db)
    assert quick.returncode == 1
    assert "stored as failed." in quick.stderr and "can be shown, replayed" not in quick.stderr  # no request
    # the command's own wall time (a few ms), not the capture's poll interval (0.2 s)
    assert json.loads(quick.stdout)["fingerprint"]["duration_s"] < 0.15
    runs = _runs(db)
    assert runs["fails"]["status"] == "failed" and runs["false"]["status"] == "failed"


def _commits(database: Path) -> int:
    """Rows the application has committed so far (0 before its table exists)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=1)) as conn:
            return int(conn.execute("SELECT count(*) FROM t").fetchone()[0])
    except sqlite3.Error:
        return 0


@requires_loop
@pytest.mark.parametrize("mode", ["duration", "command"])
def test_an_interrupted_capture_stores_what_it_captured(tmp_path: Path, mode: str) -> None:
    """SIGINT to a real ``iolab capture`` process: it exits 130 and says so, the requests captured
    until then are stored (status interrupted), the command is ended and the ftrace instance removed."""
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=64 * MiB) as loop:
        if mode == "duration":
            proc = popen("capture", loop.path, "--duration", "60s", "--label", "cut", "--format", "json", db=db)
        else:
            loop.make_ext4()
            mnt = loop.mount(tmp_path / "mnt")
            proc = popen("capture", loop.path, "--label", "cut", "--format", "json", "--", sys.executable,
                         str(_app(tmp_path)), str(mnt / "app.sqlite"), "0", "0.005", db=db)
        try:
            wait_for(lambda: tracing.recording(proc.pid), timeout_s=60)
            if mode == "duration":
                subprocess.run(["dd", f"if={loop.path}", "of=/dev/null", "bs=64k", "count=64", "iflag=direct",
                                "status=none"], check=True)
            else:  # the application commits meanwhile: 25 commits (fsyncs) while recorded
                first = _commits(mnt / "app.sqlite")
                wait_for(lambda: _commits(mnt / "app.sqlite") >= first + 25, timeout_s=60)
            proc.send_signal(signal.SIGINT)
            out, errors = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        leftover = tracing.instances(proc.pid)
    assert proc.returncode == 130, errors
    assert "Interrupted (SIGINT)" in errors and "status interrupted" in errors
    assert leftover == []
    fp = json.loads(out)["fingerprint"]
    if mode == "duration":
        assert fp["ios"] == {"read": 64}
        assert fp["duration_s"] < 30
    else:
        assert fp["ios"]["flush"] >= 20 and fp["ios"]["write"] >= 20
        assert subprocess.run(["pgrep", "-f", str(tmp_path / "mnt" / "app.sqlite")], check=False).returncode == 1
    assert _runs(db)["cut"]["status"] == "interrupted"
    shown = json.loads(iolab("show", "cut", "--format", "json", db=db).stdout)
    assert any("interrupted (SIGINT)" in w for w in shown["run"]["warnings"])
    assert not any("exited with status" in w for w in shown["run"]["warnings"])  # iolab ended it: not a failure


@requires_loop
def test_an_idle_capture_says_so(tmp_path: Path) -> None:
    """A second of a device nobody uses. (Fit and replay refusing such a capture, and how it is shown:
    tests/cli/test_capture.py.)"""
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=16 * MiB, name="idle.img") as idle:
        done = iolab("capture", idle.path, "--duration", "1s", "--label", "idle", db=db)
    assert done.returncode == 0, done.stderr
    assert "No read or write request reached" in done.stderr
    assert "inter-arrival             –   p50 – · p99 – · CV –" in done.stdout
    assert _runs(db)["idle"]["status"] == "complete"


#: ``mount`` ext4 without zeroing its inode tables first (``init_itable=0``: the lazy-init thread at
#: once), until the device has written 64 KiB more than the mount itself (the zeroing: a few MiB) or 7 s
#: have passed (the thread starts up to 5 s after the mount, EXT4_DEF_LI_MAX_START_DELAY), then umount.
LAZY = """stat="/sys/block/$3/stat"
mount -o init_itable=0 "$1" "$2" || exit 1
start=$(awk '{print $7}' "$stat"); i=0
while [ "$(awk '{print $7}' "$stat")" -lt $((start + 128)) ] && [ $i -lt 70 ]; do sleep 0.1; i=$((i + 1)); done
umount "$2"
"""


@requires_loop
def test_ext4_lazy_init_write_zeroes_are_captured_as_writes(tmp_path: Path) -> None:
    """ext4's lazy inode-table init zeroes with REQ_OP_WRITE_ZEROES (rwbs ``N``): counted as writes
    (as /sys/block/*/stat does) and shown apart. (Their replay as writes of their size, and what the
    replay says: tests/cli/test_capture_replay.py.)"""
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=64 * MiB, name="fs.img") as loop:
        subprocess.run(["mkfs.ext4", "-q", "-F", loop.path], check=True)  # lazy_itable_init on (the default)
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        done = iolab("capture", loop.path, "--label", "lazy", "--format", "json", "--", "sh", "-c", LAZY, "lazy",
                     loop.path, str(mnt), loop.name, db=db)
    assert done.returncode == 0, done.stderr
    fp = json.loads(done.stdout)["fingerprint"]
    assert fp["zeroes_ios"] >= 1 and fp["zeroes_bytes"] >= 64 * 1024
    assert "other" not in fp["ios"] and fp["bytes"]["write"] >= fp["zeroes_bytes"]


@requires_loop
def test_iolabs_probes_are_left_out_of_a_capture_of_iolab_itself(tmp_path: Path) -> None:
    """``iolab capture B -- iolab replay A --target b=B``: the inner iolab's blkid/wipefs reads of B
    (before fio starts) are in no figure of the capture, so its requests and span are the replay's.
    (A: a capture of 64 reads of 64k, stored here without tracefs.)"""
    db = tmp_path / "iolab.db"
    stored(db, capture_of(from_rows(rows((64, 0, 128, 65536, READ, 100)), comms={100: "dd"})), label="app")
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    with loop_device(tmp_path, size_bytes=16 * MiB, name="b.img") as b:
        nested = iolab("capture", b.path, "--label", "nested", "--format", "json", "--", sys.executable, "-m", "iolab",
                       "replay", "app", "--target", f"b={b.path}", "--destroy", b.path, "--format", "json", db=db,
                       env=cache)
    assert nested.returncode == 0, nested.stderr
    document = nested.stdout[nested.stdout.rindex('{\n  "schema"'):]
    fp = json.loads(document)["fingerprint"]
    assert fp["ios"] == {"read": 64}
    assert fp["left_out"].get("blkid", 0) > 0 and fp["left_out"].get("wipefs", 0) > 0
    assert not {"blkid", "wipefs"} & set(fp["processes"])
    assert fp["active_s"] < 1.0  # the replay's 64 reads, not the probes' second before them


@requires_loop
def test_fit_of_one_process_leaves_the_others_out(tmp_path: Path) -> None:
    """dd reading, then SQLite committing, on one partition, in one capture. One after the other: the
    kernel names the task in whose context a request is issued, and blk-mq issues requests other tasks
    queued from a submitter's context, so two at once would lend each other requests (seen under load: a
    flush and a 1 KiB journal write counted as dd's 201st). (The replay of one process:
    tests/cli/test_capture_replay.py.)"""
    db = tmp_path / "iolab.db"
    job = tmp_path / "app.fio"
    with loop_device(tmp_path, size_bytes=64 * MiB, name="app.img") as loop:
        part = loop.partition(first_sector=2048, sectors=100_000)
        loop.make_ext4(part)
        mnt = loop.mount(tmp_path / "mnt", part)
        script = (f"dd if={part} of=/dev/null bs=64k count=200 iflag=direct status=none && "
                  f"{sys.executable} {_app(tmp_path)} {mnt / 'app.sqlite'} 100")
        done = iolab("capture", part, "--label", "mixed", "--format", "json", "--", "sh", "-c", script, db=db)
    assert done.returncode == 0, done.stderr
    whole = json.loads(done.stdout)["fingerprint"]
    app = os.path.basename(sys.executable)[:15]  # the task's name: the file it executed
    fitted = iolab("fit", "mixed", "--process", app, "-o", str(job), db=db)
    unknown = iolab("fit", "mixed", "--process", "nosuch", "-o", str(job), db=db)
    assert whole["processes"]["dd"] == 200 and whole["ios"]["read"] >= 200
    assert fitted.returncode == 0, fitted.stderr
    text = job.read_text()
    options = _fit_options(text)
    assert int(options.get("rwmixread", 0)) <= 5 and "fsync" in options  # dd's reads (most by bytes) are not the app's
    assert f"processes {app}" in text and "left out: dd 200" in text
    assert unknown.returncode == 2 and "has no task 'nosuch'" in unknown.stderr and app in unknown.stderr


@requires_loop
def test_a_sequential_write_touches_every_block_it_covers(tmp_path: Path) -> None:
    """(How ``show`` says so: tests/cli/test_capture.py.)"""
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        done = iolab("capture", loop.path, "--label", "seq", "--format", "json", "--", "dd", "if=/dev/zero",
                     f"of={loop.path}", "bs=64k", "count=64", "oflag=direct", "status=none", db=db)
    assert done.returncode == 0, done.stderr
    fp = json.loads(done.stdout)["fingerprint"]
    assert fp["ios"] == {"write": 64} and fp["granules_touched"] == 1024 and fp["granules_by"] == "covered"
    assert fp["hot1_pct"] == pytest.approx(100 * 10 / 1024) and fp["hot10_pct"] == pytest.approx(100 * 102 / 1024)
