"""A real application captured and replayed: SQLite committing small transactions (synchronous=FULL,
so every commit is an fsync, a flush on the device) on ext4 on a loop device, its trace replayed with
fio onto a second loop device (the one real capture-to-replay run); and the replay's fidelity to a
rate-limited fio job's timing, which needs a quiet machine (``alone``).

The replay's plan and bookkeeping on captures built without tracefs (fio replayed from recordings):
tests/cli/test_capture_replay.py; a replay under a blkio cap: tests/system/test_capture_throttled.py."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tracing
from captures import data_ios
from clirun import iolab
from iolab.store.database import Store
from iolab.workflows.capture import record, replay
from loopdev import MiB, loop_device, requires_loop

APP = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA synchronous=FULL")
db.execute("PRAGMA journal_mode=DELETE")
db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v BLOB)")
for i in range(int(sys.argv[2])):
    db.execute("BEGIN")
    db.execute("INSERT INTO t (v) VALUES (randomblob(3000))")
    db.execute("COMMIT")
db.close()
"""
COMMITS = 100


@pytest.fixture(autouse=True)
def _tracefs_clean() -> Iterator[None]:
    """No ftrace instance of a capture made here outlives the test."""
    with tracing.cleaned_up():
        yield


def _flat(text: str) -> str:
    """``text`` with its line wrapping undone (the console wraps long lines)."""
    return " ".join(text.split())


@requires_loop
def test_sqlite_captured_then_replayed(tmp_path: Path) -> None:
    db = tmp_path / "iolab.db"
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}  # the replay's iologs
    app = tmp_path / "app.py"
    app.write_text(APP)
    with loop_device(tmp_path, size_bytes=64 * MiB, name="app.img") as disk, \
            loop_device(tmp_path, size_bytes=64 * MiB, name="a.img") as fast:
        disk.make_ext4()
        mnt = disk.mount(tmp_path / "mnt")
        done = iolab("capture", disk.path, "--label", "sqlite", "--format", "json", "--",
                     sys.executable, str(app), str(mnt / "app.sqlite"), str(COMMITS), db=db)
        assert done.returncode == 0, done.stderr
        fp = json.loads(done.stdout)["fingerprint"]
        assert fp["ios"]["write"] >= COMMITS  # a journal and a database write per commit at least
        assert fp["flush_pct"] > 0 or fp["fua_pct"] > 0  # synchronous=FULL: fsync reaches the device
        assert fp["latency_us"]["flush"]["count"] == fp["ios"]["flush"]  # every flush completed (sector -1)
        assert fp["depth_max"] < 64
        assert "jbd2" in " ".join(fp["processes"])  # ext4's journal thread wrote too: the device's view
        traced = fp["ios"].get("read", 0) + fp["ios"]["write"]

        refused = iolab("replay", "sqlite", "--target", f"fast={fast.path}", db=db, env=cache)
        assert refused.returncode != 0 and "--destroy" in refused.stderr + refused.stdout
        plain = iolab("replay", "sqlite", "--target", f"fast={fast.path}", "--destroy", fast.path,
                      "--as-fast-as-possible", "--label", "plain", "--format", "json", db=db, env=cache)
        assert plain.returncode == 0, plain.stderr
    assert "replay of capture" in plain.stderr and "as fast as possible" in plain.stderr
    assert data_ios(json.loads(plain.stdout)) == traced


@requires_loop
@pytest.mark.alone  # IOPS within 10 % of the original's and µs-scale latencies: a quiet machine
def test_a_rate_limited_fio_job_replays_at_its_rate_and_latency(tmp_path: Path) -> None:
    """Replay fidelity, the regression guard of benchmarks/capture.py's: fio randrw 4k 70/30 at QD4
    capped at 1,000+400 IOPS, captured and replayed on the same loop device with its original timing.
    The replay's IOPS (fio's: its I/Os over its runtime) within 10 % of the original's (fio's report;
    the benchmark's target is 5 %, a test on a shared machine gets twice that), and its median clat
    far below the gaps between requests: fio 3.33 replaying at the trace's depth reaped completions
    only after its next sleep, so its median clat was ~1 ms where the original's was tens of µs.
    Stretched with --time-scale 2, half the rate (fio's replay_time_scale is a rate: 200 had run
    it twice as fast)."""
    db = tmp_path / "iolab.db"
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = tmp_path / "orig.json"
    with loop_device(tmp_path, size_bytes=64 * MiB) as dev:
        job = ["fio", "--name=orig", f"--filename={dev.path}", "--rw=randrw", "--rwmixread=70", "--bs=4k",
               "--direct=1", "--ioengine=libaio", "--iodepth=4", "--rate_iops=1000,400", "--size=48M",
               "--runtime=3", "--time_based", "--output-format=json", f"--output={out}"]
        done = iolab("capture", dev.path, "--label", "orig", "--format", "json", "--", *job, db=db)
        assert done.returncode == 0, done.stderr
        original = json.loads(out.read_text())["jobs"][0]
        replayed = iolab("replay", "orig", "--target", f"same={dev.path}", "--destroy", dev.path, "--format", "json",
                         db=db, env=cache)
        assert replayed.returncode == 0, replayed.stderr
        slower = iolab("replay", "orig", "--target", f"same={dev.path}", "--destroy", dev.path, "--time-scale", "2",
                       "--format", "json", db=db, env=cache)
        assert slower.returncode == 0, slower.stderr
    doc = json.loads(replayed.stdout)
    # windows of about 0.25 s: 0.25 when fio's issues spanned 3 s at most, 0.231 (13 windows) when a hair more
    store = Store(str(db))
    jobs, window_ns = replay.replay_jobs(record.load_trace(store, store.get_run(store.resolve("orig")[0])))
    assert 0.2e9 < window_ns <= replay.WINDOW_NS
    planned = f"{len(jobs)} fio job(s) at iodepth=1 (lanes of windows of {window_ns / 1e9:.3g} s), original timing"
    assert planned in _flat(replayed.stderr)
    assert "timing stretched ×2" in _flat(slower.stderr) and "replay_time_scale=50" in _flat(slower.stderr)
    (stretched,) = json.loads(slower.stdout)["results"][0]["jobs"]
    assert stretched["directions"]["read"]["iops"] == pytest.approx(original["read"]["iops"] / 2, rel=0.10)
    assert data_ios(doc) == original["read"]["total_ios"] + original["write"]["total_ios"]
    (job_result,) = doc["results"][0]["jobs"]  # one class (bs-4k), its jobs one reporting group
    for direction in ("read", "write"):
        stats = job_result["directions"][direction]
        assert stats["iops"] == pytest.approx(original[direction]["iops"], rel=0.10), direction
        assert stats["clat"]["percentiles_ns"]["50"] < 400_000, direction
