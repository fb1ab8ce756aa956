"""Captures of real applications as people run them: on a partition, failing, interrupted, idle.

Each test drives the real ``iolab capture`` command against a loop device (partitioned with
``losetup -P``) and a real SQLite database committing with ``synchronous=FULL`` (an fsync per
commit, so flushes reach the device)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from clirun import iolab
from iolab.workflows.capture import tracefs
from loopdev import MiB, loop_device, requires_loop

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


def test_a_partitions_filter_keeps_requests_without_sectors() -> None:
    ref = tracefs.DeviceRef("/dev/loop9p2", 7 << 20 | 9, 2048, 10240)
    assert ref.filter == "dev == 7340041 && ((sector >= 2048 && sector < 10240) || nr_sector == 0)"
    assert tracefs.DeviceRef("/dev/loop9", 7 << 20 | 9).filter == "dev == 7340041"


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
