"""Captures of real applications as people run them: on a partition, failing, interrupted, idle.

Each test drives the real ``iolab capture`` command against a loop device (partitioned with
``losetup -P``) and a real SQLite database committing with ``synchronous=FULL`` (an fsync per
commit, so flushes reach the device)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

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
    assert "stored as failed." in quick.stderr and "can be shown, replayed" not in quick.stderr  # no request
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
    assert not any("exited with status" in w for w in shown["run"]["warnings"])  # iolab ended it: not a failure


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
                     # the lazy-init thread starts up to 5 s after the mount (EXT4_DEF_LI_MAX_START_DELAY)
                     f"mount -o init_itable=0 {loop.path} {mnt} && sleep 7; umount {mnt}", db=db)
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
    assert any("replayed as writes" in w for w in document["run"]["warnings"])  # stored with the replay
    written = sum(d["io_bytes"] for job in document["results"][0]["jobs"] for name, d in job["directions"].items()
                  if name == "write")
    assert written == fp["bytes"]["write"]


def test_a_process_set_keeps_its_requests_and_the_kernel_threads_and_counts_the_rest() -> None:
    from iolab.workflows.capture import trace as trace_mod
    from iolab.workflows.capture.trace import READ, WRITE

    rows = [(1_000_000, 1_100_000, 0, 4096, READ, 0, 10),       # dd: left out
            (2_000_000, 2_100_000, 8, 4096, WRITE, 0, 20),      # the application
            (3_000_000, 3_100_000, 16, 4096, WRITE, 0, 30),     # jbd2, by name (a trace without kthreads)
            (4_000_000, 4_100_000, 24, 4096, WRITE, 0, 20)]
    trace = trace_mod.from_rows(rows, comms={10: "dd", 20: "python3", 30: "jbd2/loop1-8"})
    only = trace_mod.of_processes(trace, ["python3"])
    assert only.pid.tolist() == [20, 30, 20] and only.left_out == {"dd": 1}
    assert only.issue_ns.tolist() == [0, 1_000_000, 2_000_000]  # the span starts at the first request kept
    by_flag = trace_mod.of_processes(trace_mod.dataclasses.replace(trace, kthreads=frozenset({10})), ["20"])
    assert by_flag.pid.tolist() == [10, 20, 20]  # kernel threads as the capture saw them, pids as names
    assert trace_mod.is_kernel_thread(2, "kthreadd") and not trace_mod.is_kernel_thread(os.getpid(), "python3")


def test_iolabs_own_probes_are_left_out_when_parsing() -> None:
    from iolab.workflows.capture import trace as trace_mod
    lines = """\
          blkid-100     [000] .....   10.000000: block_rq_issue: 7,0 R 4096 () 0 + 8 be,0,4 [blkid]
     ksoftirqd/0-14     [000] ..s..   10.000050: block_rq_complete: 7,0 R () 0 + 8 be,0,4 [0]
            fio-200     [000] .....   11.000000: block_rq_issue: 7,0 R 4096 () 0 + 8 be,0,4 [fio]
     ksoftirqd/0-14     [000] ..s..   11.000040: block_rq_complete: 7,0 R () 0 + 8 be,0,4 [0]
"""
    trace = trace_mod.parse_lines(lines.splitlines())
    assert len(trace) == 1 and trace.left_out == {"blkid": 1}
    assert trace.issue_ns.tolist() == [0] and trace.complete_ns.tolist() == [40_000]  # its own completion


@requires_loop
def test_iolabs_probes_are_left_out_of_a_capture_of_iolab_itself(tmp_path: Path) -> None:
    """``iolab capture B -- iolab replay A --target b=B``: the inner iolab's blkid/wipefs reads of B
    (before fio starts) are in no figure of the capture, so its requests and span are the replay's."""
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=16 * MiB, name="a.img") as a, \
            loop_device(tmp_path, size_bytes=16 * MiB, name="b.img") as b:
        first = iolab("capture", a.path, "--label", "app", "--", "dd", f"if={a.path}", "of=/dev/null", "bs=64k",
                      "count=64", "iflag=direct", "status=none", db=db)
        assert first.returncode == 0, first.stderr
        nested = iolab("capture", b.path, "--label", "nested", "--format", "json", "--", sys.executable, "-m", "iolab",
                       "replay", "app", "--target", f"b={b.path}", "--destroy", b.path, "--format", "json", db=db)
    assert nested.returncode == 0, nested.stderr
    document = nested.stdout[nested.stdout.rindex('{\n  "schema"'):]
    fp = json.loads(document)["fingerprint"]
    assert fp["ios"] == {"read": 64}
    assert fp["left_out"].get("blkid", 0) > 0 and fp["left_out"].get("wipefs", 0) > 0
    assert not {"blkid", "wipefs"} & set(fp["processes"])
    assert fp["active_s"] < 1.0  # the replay's 64 reads, not the probes' second before them


@requires_loop
def test_fit_and_replay_of_one_process_leave_the_others_out(tmp_path: Path) -> None:
    db = tmp_path / "iolab.db"
    job = tmp_path / "app.fio"
    with loop_device(tmp_path, size_bytes=64 * MiB, name="app.img") as loop, \
            loop_device(tmp_path, size_bytes=64 * MiB, name="target.img") as target:
        part = loop.partition(first_sector=2048, sectors=100_000)
        loop.make_ext4(part)
        mnt = loop.mount(tmp_path / "mnt", part)
        script = (f"dd if={part} of=/dev/null bs=64k count=200 iflag=direct status=none & "
                  f"{sys.executable} {_app(tmp_path)} {mnt / 'app.sqlite'} 100; wait")
        done = iolab("capture", part, "--label", "mixed", "--format", "json", "--", "sh", "-c", script, db=db)
        assert done.returncode == 0, done.stderr
        whole = json.loads(done.stdout)["fingerprint"]
        app = os.path.basename(sys.executable)[:15]  # the task's name: the file it executed
        fitted = iolab("fit", "mixed", "--process", app, "-o", str(job), db=db)
        unknown = iolab("fit", "mixed", "--process", "nosuch", "-o", str(job), db=db)
        replayed = iolab("replay", "mixed", "--process", app, "--target", f"t={target.path}", "--destroy",
                         target.path, "--as-fast-as-possible", "--format", "json", db=db)
    assert whole["processes"]["dd"] == 200 and whole["ios"]["read"] >= 200
    assert fitted.returncode == 0, fitted.stderr
    text = job.read_text()
    options = _fit_options(text)
    assert int(options.get("rwmixread", 0)) <= 5 and "fsync" in options  # dd's reads (most by bytes) are not the app's
    assert f"processes {app}" in text and "left out: dd 200" in text
    assert unknown.returncode == 2 and "has no task 'nosuch'" in unknown.stderr and app in unknown.stderr
    assert replayed.returncode == 0, replayed.stderr
    assert "left out (dd 200" in replayed.stderr
    reads = sum(d["total_ios"] for j in json.loads(replayed.stdout)["results"][0]["jobs"]
                for name, d in j["directions"].items() if name == "read")
    assert reads == whole["ios"]["read"] - 200


def test_skew_counts_every_block_a_request_covers() -> None:
    from iolab.workflows.capture import fingerprint as fp_mod

    offsets = np.arange(64, dtype=np.int64) * 65536  # a 64k sequential write over 4 MiB
    # each block accessed once: the hottest 10 and 102 of the 1,024 blocks hold their share of accesses
    assert fp_mod.skew(offsets, np.full(64, 65536)) == (pytest.approx(100 * 10 / 1024), pytest.approx(100 * 102 / 1024),
                                                        1024)
    assert fp_mod.skew(offsets)[2] == 64  # by request start, as fingerprints stored before counted
    # a 4k block read 9 times inside a 64k region read once: of 16 blocks, the hottest (1 %: 1 block)
    # holds 10 of the 25 accesses, the hottest 2 (10 %) 11
    assert fp_mod.skew(np.array([0] + [8192] * 9), np.array([65536] + [4096] * 9)) == (40.0, 44.0, 16)


@given(st.lists(st.tuples(st.integers(0, 300_000), st.integers(1, 70_000)), min_size=1, max_size=60))
def test_the_sweep_over_runs_of_blocks_counts_as_block_by_block(requests: list[tuple[int, int]]) -> None:
    from iolab.workflows.capture import fingerprint as fp_mod

    offsets, lengths = np.array([r[0] for r in requests]), np.array([r[1] for r in requests])
    per_block: dict[int, int] = {}
    for start, length in requests:
        for block in range(start // 4096, (start + length - 1) // 4096 + 1):
            per_block[block] = per_block.get(block, 0) + 1
    hottest = np.cumsum(sorted(per_block.values(), reverse=True))
    expected = [100.0 * hottest[max(1, round(f * len(per_block))) - 1] / hottest[-1] for f in (0.01, 0.10)]
    hot1, hot10, touched = fp_mod.skew(offsets, lengths)
    assert touched == len(per_block) and [hot1, hot10] == pytest.approx(expected)


@requires_loop
def test_a_sequential_write_touches_every_block_it_covers(tmp_path: Path) -> None:
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        done = iolab("capture", loop.path, "--label", "seq", "--format", "json", "--", "dd", "if=/dev/zero",
                     f"of={loop.path}", "bs=64k", "count=64", "oflag=direct", "status=none", db=db)
        shown = iolab("show", "seq", db=db)
    assert done.returncode == 0, done.stderr
    fp = json.loads(done.stdout)["fingerprint"]
    assert fp["ios"] == {"write": 64} and fp["granules_touched"] == 1024 and fp["granules_by"] == "covered"
    assert fp["hot1_pct"] == pytest.approx(100 * 10 / 1024) and fp["hot10_pct"] == pytest.approx(100 * 102 / 1024)
    assert "of 1,024 4 KiB blocks touched (every block a request covers)" in shown.stdout
