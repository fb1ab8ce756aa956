"""Captures of real applications as people run them: on a partition, failing, interrupted, idle.

Each test drives the real ``iolab capture`` command against a loop device (partitioned with
``losetup -P``) and a real SQLite database committing with ``synchronous=FULL`` (an fsync per
commit, so flushes reach the device)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clirun import iolab, popen, wait_for
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


def _runs(db: Path) -> dict[str, dict]:
    listed = json.loads(iolab("runs", "--format", "json", db=db).stdout)
    return {r["label"]: r for r in listed}


@requires_loop
def test_a_failing_command_is_stored_failed_with_its_status_and_its_own_duration(tmp_path: Path) -> None:
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=16 * MiB, name="app.img") as loop, \
            loop_device(tmp_path, size_bytes=16 * MiB, name="target.img") as target:
        done = iolab("capture", loop.path, "--label", "fails", "--format", "json", "--", "sh", "-c",
                     f"dd if={loop.path} of=/dev/null bs=64k count=64 iflag=direct status=none; exit 3", db=db)
        assert done.returncode == 1
        assert "sh exited with status 3" in done.stderr and "stored as failed" in done.stderr
        fp = json.loads(done.stdout)["fingerprint"]
        assert fp["ios"] == {"read": 64}  # the trace is kept whole
        run = _runs(db)["fails"]
        assert run["status"] == "failed"
        shown = json.loads(iolab("show", "fails", "--format", "json", db=db).stdout)
        assert shown["run"]["options"]["returncode"] == 3
        assert any("exited with status 3" in w for w in shown["run"]["warnings"])
        # still replayable: a failed run of an application is a workload too
        replayed = iolab("replay", "fails", "--target", f"t={target.path}", "--destroy", target.path, db=db)
        assert replayed.returncode == 0, replayed.stderr
        quick = iolab("capture", loop.path, "--label", "false", "--format", "json", "--", "false", db=db)
    assert quick.returncode == 1
    # the command's own wall time (a few ms), not the capture's poll interval (0.2 s)
    assert json.loads(quick.stdout)["fingerprint"]["duration_s"] < 0.15
    assert _runs(db)["false"]["status"] == "failed"


def _instances(pid: int) -> list[Path]:
    return list(tracefs.TRACEFS.glob(f"instances/iolab-{pid}-*"))


def _recording(pid: int) -> bool:
    """The capture of process ``pid`` has its events enabled."""
    for inst in _instances(pid):
        try:
            return (inst / "events/block/block_rq_complete/enable").read_text().strip() == "1"
        except OSError:
            return False
    return False


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
        wait_for(lambda: _recording(proc.pid), timeout_s=60)
        if mode == "duration":
            subprocess.run(["dd", f"if={loop.path}", "of=/dev/null", "bs=64k", "count=64", "iflag=direct",
                            "status=none"], check=True)
        else:
            time.sleep(2)  # the application commits meanwhile
        proc.send_signal(signal.SIGINT)
        out, errors = proc.communicate(timeout=60)
        leftover = _instances(proc.pid)
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


def test_an_empty_fingerprint_says_what_was_not_measured_and_cannot_be_fitted() -> None:
    from iolab.errors import UsageError
    from iolab.report.capture import fingerprint_rows
    from iolab.workflows.capture import fingerprint as fp_mod
    from iolab.workflows.capture import fit
    from iolab.workflows.capture import trace as trace_mod

    fp = fp_mod.fingerprint(trace_mod.from_rows([], duration_ns=3_000_000_000))
    assert fp.empty and fp.duration_s == 3.0
    assert (fp.iops, fp.bw_bytes_s, fp.interarrival_cv, fp.lba_first_bytes, fp.flush_pct) == (None,) * 5
    rows = {row[0].text: (row[1].text, row[2].text) for row in fingerprint_rows(fp)}
    assert rows["inter-arrival"] == ("–", "p50 – · p99 – · CV –")
    assert rows["IOPS"][0] == "–" and rows["LBA range"][0] == "–" and rows["depth at issue"][0] == "–"
    with pytest.raises(UsageError, match="capture 7 holds no read or write request") as caught:
        fit.fit_job(fp, what="capture 7")
    assert caught.value.hint and caught.value.exit_code == 2


@requires_loop
def test_an_idle_capture_says_so_and_fit_and_replay_refuse_it(tmp_path: Path) -> None:
    db = tmp_path / "iolab.db"
    job = tmp_path / "idle.fio"
    with loop_device(tmp_path, size_bytes=16 * MiB, name="idle.img") as idle, \
            loop_device(tmp_path, size_bytes=16 * MiB, name="target.img") as target:
        done = iolab("capture", idle.path, "--duration", "1s", "--label", "idle", db=db)
        fitted = iolab("fit", "idle", "-o", str(job), db=db)
        replayed = iolab("replay", "idle", "--target", f"t={target.path}", "--destroy", target.path, db=db)
    assert done.returncode == 0, done.stderr
    assert "No read or write request reached" in done.stderr
    assert "inter-arrival             –   p50 – · p99 – · CV –" in done.stdout
    for refused, verb in ((fitted, "fit"), (replayed, "replay")):
        assert refused.returncode == 2, refused.stderr
        assert "holds no read or write request (0 requests in 1." in refused.stderr
        assert f"nothing to {verb}" in refused.stderr and "Hint:" in refused.stderr
    assert not job.exists()
    fp = json.loads(iolab("show", "idle", "--format", "json", db=db).stdout)["fingerprint"]
    assert fp["iops"] is None and fp["interarrival_cv"] is None and fp["interarrival_us"]["mean"] is None
    assert fp["lba_end_bytes"] is None and fp["flush_pct"] is None
    markdown = iolab("show", "idle", "--format", "markdown", db=db).stdout
    assert "| inter-arrival | – | p50 – · p99 – · CV – |" in markdown


def test_fit_check_compares_the_sizes_with_the_largest_shares() -> None:
    """Six write sizes, the two largest (64k, 128k) holding 80 %: the closeness rows are theirs first,
    not the four smallest sizes'."""
    from iolab.workflows.capture import fingerprint as fp_mod
    from iolab.workflows.capture import fit
    from iolab.workflows.capture import trace as trace_mod
    from iolab.workflows.capture.trace import WRITE

    sizes = [1024] * 5 + [2048] * 5 + [4096] * 5 + [8192] * 5 + [65536] * 40 + [131072] * 40
    rows = [(i * 1000, i * 1000 + 500, i * 256, size, WRITE, 0, 1) for i, size in enumerate(sizes)]
    fp = fp_mod.fingerprint(trace_mod.from_rows(rows))
    assert fit.largest_sizes(fp.bs_counts["write"]) == [65536, 131072, 1024, 2048]
    metrics = [row.metric for row in fit.closeness(fp, fp) if " bs " in row.metric]
    assert metrics == ["write bs 64k share", "write bs 128k share", "write bs 1k share", "write bs 2k share"]


def test_write_zeroes_requests_are_writes() -> None:
    from iolab.workflows.capture import trace as trace_mod
    from iolab.workflows.capture.trace import OTHER, SYNC, WRITE, ZEROES

    assert trace_mod.parse_rwbs("NS", 2048) == (WRITE, ZEROES | SYNC)  # as 6.18 prints REQ_OP_WRITE_ZEROES
    assert trace_mod.parse_rwbs("N", 0) == (OTHER, 0)  # a pass-through command: no sectors


@requires_loop
def test_ext4_lazy_init_write_zeroes_are_captured_and_replayed_as_writes(tmp_path: Path) -> None:
    """ext4's lazy inode-table init zeroes with REQ_OP_WRITE_ZEROES (rwbs ``N``): counted as writes
    (as /sys/block/*/stat does), shown apart, replayed as writes of their size, and the replay says so."""
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=64 * MiB, name="fs.img") as loop, \
            loop_device(tmp_path, size_bytes=64 * MiB, name="target.img") as target:
        subprocess.run(["mkfs.ext4", "-q", "-F", loop.path], check=True)  # lazy_itable_init on (the default)
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        done = iolab("capture", loop.path, "--label", "lazy", "--format", "json", "--", "sh", "-c",
                     f"mount -o init_itable=0 {loop.path} {mnt} && sleep 3; umount {mnt}", db=db)
        assert done.returncode == 0, done.stderr
        fp = json.loads(done.stdout)["fingerprint"]
        replayed = iolab("replay", "lazy", "--target", f"t={target.path}", "--destroy", target.path,
                         "--as-fast-as-possible", "--format", "json", db=db)
    assert fp["zeroes_ios"] >= 1 and fp["zeroes_bytes"] >= 64 * 1024
    assert "other" not in fp["ios"] and fp["bytes"]["write"] >= fp["zeroes_bytes"]
    assert replayed.returncode == 0, replayed.stderr
    assert f"{fp['zeroes_ios']:,} write-zeroes request(s)" in replayed.stderr
    assert "replayed as writes" in replayed.stderr
    document = json.loads(replayed.stdout)
    written = sum(d["io_bytes"] for job in document["results"][0]["jobs"] for name, d in job["directions"].items()
                  if name == "write")
    assert written == fp["bytes"]["write"]
